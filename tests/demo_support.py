"""The shipped demo checkpoint in the integration tests: symlinked copies (so no cache is
written into checkpoints/demo) and one fp32 evaluation of its test split shared by the run.

The demo's test split (2,105 reviews at 256 tokens) costs about a minute to score on two
cores. The card's check, the report's and the split map's tests all need the same fp32
scores, so ``evaluate_once`` (conftest's ``demo_evaluation``) runs ``evaluate`` once
per test run, for every xdist worker (a file lock: the first worker to ask scores it, the
others wait and read its result), and each module works in its own copy of the folder,
prediction cache included.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reviewbert.fsio import atomic_write_text

from toyreviews import ROOT, cli

DEMO = ROOT / "checkpoints" / "demo"
ANALYSIS = ".analysis"


def demo_copy(root: Path, cache_from: Path | None = None) -> Path:
    """``root/demo``: the demo's files as symlinks, with a copy of ``cache_from``'s
    prediction cache (its ``.analysis`` folder) when given."""
    if not (DEMO / "model.safetensors").exists():
        pytest.skip("the demo checkpoint is not in this checkout")
    d = root / "demo"
    d.mkdir(parents=True)
    for f in DEMO.iterdir():
        if f.is_file():
            (d / f.name).symlink_to(f.resolve())
    if cache_from is not None:
        shutil.copytree(cache_from / ANALYSIS, d / ANALYSIS)
    return d


def shared_root(request, tmp_path_factory) -> Path:
    """A folder every xdist worker of this run sees (the workers' temporary folders'
    parent); without xdist, this process's own temporary folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if hasattr(request.config, "workerinput") else base


def evaluate_once(root: Path) -> dict:
    """``evaluate --precision fp32 --json`` of the demo's test split in ``root/demo``,
    saving the predictions (``root/preds.csv``) and sentence vectors (``root/vecs.npy``)
    beside it, unless a worker already did (``root/evaluate.json``). Call under a lock."""
    done = root / "evaluate.json"
    if not done.exists():
        d = demo_copy(root)
        res = cli("evaluate", "--checkpoint", d, "--split", "test", "--precision", "fp32",
                  "--json", "--save-predictions", root / "preds.csv",
                  "--save-embeddings", root / "vecs.npy", timeout=900)
        assert res.returncode == 0, res.stderr[-3000:]
        atomic_write_text(done, res.stdout.strip().splitlines()[-1])
    return json.loads(done.read_text(encoding="utf-8"))
