"""Broken checkpoints in the CLI and the loader: one clear line each, exit status 2,
no traceback; the listing skips what it cannot read and says why.

The pages are tested in test_app_broken_checkpoints.py; the cases are built in
broken_checkpoints.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import strategies as st

from reviewbert.cli import main
from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import checkpoint_info, list_checkpoints, load_checkpoint

from broken_checkpoints import BROKEN, make_broken
from browser_support import write_meta
from fuzzing import time_limit, twins

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def good(tmp_path_factory, tiny_model_dir) -> Path:
    d = tmp_path_factory.mktemp("good") / "good"
    shutil.copytree(tiny_model_dir, d)
    return write_meta(d, 5)


@pytest.fixture(scope="module")
def broken(tmp_path_factory, good) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("broken")
    return {name: make_broken(good, root / name, name) for name in BROKEN}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_cli_names_the_fault_in_one_line(broken, name, capsys):
    rc = main(["predict", "--checkpoint", str(broken[name]), "The battery died in a day."])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert BROKEN[name][1] in err[0] and str(broken[name]) in err[0], err


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_loader_raises_checkpoint_error_only(broken, name):
    with pytest.raises(CheckpointError, match=BROKEN[name][1]):
        load_checkpoint(broken[name])


@pytest.mark.parametrize("name", ["labels-differ"])
def test_cli_process_prints_no_traceback_and_no_load_report(broken, name, tmp_path):
    """In a real process, so transformers' own logging (its multi-line load report for
    a shape mismatch) would show: only our one line may reach stderr."""
    from toyreviews import write_toy_csv
    data = write_toy_csv(tmp_path / "toy.csv", n=20)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    for cmd in (["predict", "--checkpoint", str(broken[name]), "great phone"],
                ["evaluate", "--checkpoint", str(broken[name]), "--split", "all",
                 "--data", str(data)]):
        proc = subprocess.run([sys.executable, "-m", "reviewbert", *cmd], capture_output=True,
                              text=True, timeout=120, cwd=ROOT, env=env)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2, proc.stderr
        assert len(lines) == 1 and BROKEN[name][1] in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr and not proc.stdout.strip()


def test_a_plain_hugging_face_folder_without_reviewbert_json_loads(tmp_path, tiny_model_dir):
    """Not broken: reviewbert.json is ReviewBERT's record of the training, not needed to predict."""
    d = tmp_path / "plain"
    shutil.copytree(tiny_model_dir, d)
    model, tok, info = load_checkpoint(d)
    assert info.meta == {} and info.test_metrics == {} and model.config.num_labels == 5


def test_a_folder_without_config_json_is_not_a_checkpoint(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["predict", "--checkpoint", str(tmp_path / "empty"), "text"]) == 2
    assert "no config.json" in capsys.readouterr().err


def test_missing_weights_are_refused_not_made_up(tmp_path, tiny_model_dir):
    """A safetensors file without the classifier would load with a random one."""
    from safetensors.torch import load_file, save_file
    d = tmp_path / "headless"
    shutil.copytree(tiny_model_dir, d)
    w = load_file(str(d / "model.safetensors"))
    del w["classifier.weight"], w["classifier.bias"]
    save_file(w, str(d / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="classifier.bias, classifier.weight"):
        load_checkpoint(d)


def test_listing_offers_what_it_can_read_and_says_why_not_the_rest(broken, good, tmp_path):
    root = tmp_path / "root"
    shutil.copytree(broken["truncated-weights"].parent, root)
    shutil.copytree(good, root / "good")
    problems: list = []
    infos = list_checkpoints(root, problems)
    offered = {i.path.name for i in infos}
    info_level = {n for n, (_, _, level) in BROKEN.items() if level == "info"}
    assert offered == {"good"} | (set(BROKEN) - info_level)
    assert {p.name for p, _ in problems} == info_level
    for path, why in problems:
        assert BROKEN[path.name][1] in why and "\n" not in why


def test_listing_survives_a_symlink_loop(tmp_path, good):
    shutil.copytree(good, tmp_path / "a" / "good")
    os.symlink(tmp_path, tmp_path / "a" / "loop")
    with time_limit(20, "list_checkpoints"):
        infos = list_checkpoints(tmp_path)
    assert [i.path.name for i in infos] == ["good"]


# ----------------------------------------- generated config.json / reviewbert.json
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=3),
    max_leaves=8)


@st.composite
def checkpoint_jsons(draw):
    """(config.json, reviewbert.json or None) as bytes: the good files with random
    fields replaced, dropped or added, or random JSON, or bytes that are not JSON."""
    from reviewbert.model.labels import FIVE
    cfg = {"model_type": "bert", "num_labels": 5, "id2label": {str(k): v for k, v in
                                                             FIVE.id2label.items()},
           "label2id": FIVE.label2id, "_name_or_path": "x"}
    meta = {"labels": 5, "hyperparameters": {"base_model": "b", "max_length": 128},
            "best": {"epoch": 1, "test": {"accuracy": 0.4, "auc": 0.7, "loss": 1.2}},
            "data": {"files": []}}

    def mutate(d: dict) -> bytes:
        kind = draw(st.sampled_from(["edit", "edit", "random", "garbage", "same"]))
        if kind == "random":
            return json.dumps(draw(JSON)).encode()
        if kind == "garbage":
            return draw(st.binary(max_size=30))
        d = json.loads(json.dumps(d))
        for _ in range(draw(st.integers(0, 3)) if kind == "edit" else 0):
            target = d
            path = draw(st.sampled_from([[], ["hyperparameters"], ["best"], ["best", "test"],
                                         ["id2label"]]))
            for k in path:
                target = target.get(k) if isinstance(target, dict) else None
            if not isinstance(target, dict):
                continue
            key = draw(st.sampled_from(sorted(target) + ["extra"]))
            if draw(st.booleans()):
                target.pop(key, None)
            else:
                target[key] = draw(JSON)
        return json.dumps(d).encode()

    return mutate(cfg), (mutate(meta) if draw(st.booleans()) else None)


def _any_config_reads_or_fails_cleanly(files):
    """checkpoint_info, the listing and the sidebar's description: a CheckpointError or a
    usable CheckpointInfo, never another exception (the sidebar runs on every page)."""
    from reviewbert.training import catalog
    from reviewbert.ui.checkpoints import describe
    config, meta = files
    with tempfile.TemporaryDirectory() as root:
        d = Path(root) / "ckpt"
        d.mkdir()
        (d / "config.json").write_bytes(config)
        if meta is not None:
            (d / "reviewbert.json").write_bytes(meta)
        try:
            info = checkpoint_info(d)
        except CheckpointError as e:
            assert str(e).strip() and "\n" not in str(e)
            assert list_checkpoints(root) == []
            return
        assert isinstance(info.meta, dict) and isinstance(info.test_metrics, dict)
        assert describe(info)
        assert [e.info.path for e in catalog.entries(list_checkpoints(root))] == [d]


test_any_config_reads_or_fails_cleanly, test_any_config_reads_or_fails_cleanly_fuzz = twins(
    _any_config_reads_or_fails_cleanly, files=checkpoint_jsons())
