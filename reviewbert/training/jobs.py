"""What the training page starts: a named run folder, its config file, the queued launch.

The page never trains inside Streamlit: :func:`start_run` writes
``RUN/train_config.json`` and starts ``python -m reviewbert train --config …
--out RUN --queue`` through :func:`reviewbert.training.runs.launch_training`, as its own
detached process. The run waits its turn for the device (state ``queued``),
trains, and goes on if the browser closes or Streamlit restarts; the page
reattaches by reading the folder.
"""
from __future__ import annotations

import re
import time
from pathlib import Path

from reviewbert.config import TrainConfig
from reviewbert.errors import ConfigError
from reviewbert.training import runs

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def suggest_name(root: Path, prefix: str = "run") -> str:
    """``run-YYYYmmdd-HHMMSS``, with a counter if that folder is taken."""
    base = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    name, i = base, 2
    while (Path(root) / name).exists():
        name, i = f"{base}-{i}", i + 1
    return name


def check_name(root: Path, name: str) -> Path:
    """The run folder for ``name``; ConfigError if the name is unsafe or taken."""
    name = (name or "").strip()
    if not NAME_RE.match(name) or ".." in name:
        raise ConfigError("run name: use letters, digits, '.', '_' or '-' (at most 80), "
                          "starting with a letter or digit")
    path = Path(root) / name
    if path.exists():
        raise ConfigError(f"run name: {name!r} exists already; pick another name")
    return path


def start_run(cfg: TrainConfig | dict, root: Path, name: str):
    """Write the config, launch queued. Returns (run folder, Popen). ``cfg`` is the form's
    TrainConfig (checked once, by ``config.check``), or a dict of its fields (made into
    one here: ConfigError with the field's message)."""
    if not isinstance(cfg, TrainConfig):
        cfg = TrainConfig(**cfg)
    if not cfg.data:
        raise ConfigError("data: choose at least one data file")
    run_dir = check_name(root, name)
    run_dir.mkdir(parents=True)
    config_path = runs.write_config(run_dir, cfg)
    proc = runs.launch_training(["--config", str(config_path)], run_dir, queue=True)
    return run_dir, proc
