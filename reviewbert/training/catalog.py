"""Which checkpoints the app offers, and under which name.

A checkpoint root holds run folders (``NAME/best``, ``NAME/last``), search
folders whose trials are run folders (``SEARCH/trial-0003/best``), and plain
checkpoints (the shipped ``demo/``). The picker offers one entry per finished
piece of work: a run's ``best/`` (never ``last/``, which is rewritten while a
run trains), a plain checkpoint, and a search's trials only when asked.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from reviewbert.model.checkpoint import CheckpointInfo, list_checkpoints
from reviewbert.training.runs import (  # a search folder, and a trial run folder inside it
    SEARCH_FILE,
    TRIAL_FILE,
)

REPO = Path(__file__).resolve().parents[2]


def checkpoints_root() -> Path:
    """Where the app looks for checkpoints: ``$REVIEWBERT_CHECKPOINTS``, else the
    repository's ``checkpoints/``."""
    return Path(os.environ.get("REVIEWBERT_CHECKPOINTS") or REPO / "checkpoints")


@dataclass(frozen=True)
class Entry:
    info: CheckpointInfo
    group: str          # "run", "search NAME" or "checkpoint"
    label: str          # what the picker shows

    @property
    def path(self) -> str:
        return str(self.info.path)


def _search_of(run_dir: Path) -> str | None:
    """The search folder name if ``run_dir`` is one of its trials."""
    if (run_dir / TRIAL_FILE).exists() or (run_dir.parent / SEARCH_FILE).exists():
        return run_dir.parent.name
    return None


def entries(infos: list[CheckpointInfo], show_trials: bool = False) -> list[Entry]:
    """Picker entries from ``checkpoint.list_checkpoints`` (newest first, order kept)."""
    out = []
    for info in infos:
        labels = f"{info.scheme.num_labels} labels"
        if info.run_dir is None:
            if info.path.name == "last" or (info.path.parent / "best").is_dir() \
                    and info.path.name != "best":
                continue  # a run's other folders, seen without its reviewbert.json
            out.append(Entry(info, "checkpoint", f"{info.path.name} ({labels})"))
            continue
        if info.path.name != "best":
            continue
        search = _search_of(info.run_dir)
        if search is not None:
            if show_trials:
                out.append(Entry(info, f"search {search}",
                                 f"{search} › {info.run_dir.name}/best ({labels})"))
            continue
        out.append(Entry(info, "run", f"{info.run_dir.name}/best ({labels})"))
    return out


def list_entries(root, show_trials: bool = False) -> list[Entry]:
    return entries(list_checkpoints(root), show_trials)


def count_trials(infos: list[CheckpointInfo]) -> int:
    return sum(1 for i in infos if i.run_dir is not None and i.path.name == "best"
               and _search_of(i.run_dir) is not None)
