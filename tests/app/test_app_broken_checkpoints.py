"""Broken checkpoints in the app (AppTest): every page shows one clear message,
never a traceback, and the app keeps serving the good checkpoint.

The checkpoint root holds one good run and one run per fault of
broken_checkpoints.BROKEN. Faults in config.json / reviewbert.json keep a folder
out of the picker (the sidebar says which and why); faults in the weights or
tokenizer leave it in the picker, and picking it shows why it cannot load.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from app_support import loading, run_loaded, wait_for_loads
from streamlit.testing.v1 import AppTest

from reviewbert.ui import state as S

from broken_checkpoints import BROKEN, make_broken
from browser_support import write_meta

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "app.py")
# every page that loads the sidebar's checkpoint (the Train page is tested below)
MODEL_PAGES = [p for p in (S.PREDICT_PAGE, S.INSIDE_PAGE, getattr(S, "ERROR_PAGE", None),
                           getattr(S, "FAITH_PAGE", None)) if p and (ROOT / p).exists()]
LOAD_LEVEL = sorted(n for n, (_, _, level) in BROKEN.items() if level == "load")
INFO_LEVEL = sorted(n for n, (_, _, level) in BROKEN.items() if level == "info")


def _run_folder(run: Path) -> None:
    """A finished run as the Train page lists it (status.json, reviewbert.json)."""
    write_meta(run, 5)
    (run / "status.json").write_text(json.dumps(
        {"state": "finished", "step": 10, "total_steps": 10, "epoch": 1, "epochs": 1,
         "message": "done", "pid": 1, "updated": 1.0}))


@pytest.fixture(scope="module")
def root(tmp_path_factory, tiny_model_dir) -> Path:
    root = tmp_path_factory.mktemp("ckpts")
    good = root / "good-run" / "best"
    shutil.copytree(tiny_model_dir, good)
    write_meta(good, 5)
    _run_folder(good.parent)
    for name in BROKEN:
        make_broken(good, root / name / "best", name)
        _run_folder(root / name)
    return root


@pytest.fixture
def env(monkeypatch, root, tmp_path):
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    monkeypatch.setenv("REVIEWBERT_QUEUE_DIR", str(tmp_path / ".queue"))
    monkeypatch.setenv("REVIEWBERT_UPLOADS_DIR", str(tmp_path / "uploads"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return root


def ok(at: AppTest) -> AppTest:
    run_loaded(at)
    assert not at.exception, at.exception
    return at


def errors(at) -> str:
    return "\n".join(str(e.value) for e in at.error)


def captions(at) -> str:
    return "\n".join(str(c.value) for c in at.caption)


def _run_name(label: str) -> str:
    """"NAME/best (5 labels)", as the picker shows an option -> "NAME"."""
    return label.split("/")[0]


def test_picker_offers_the_loadable_and_the_sidebar_says_why_not_the_rest(env):
    at = ok(AppTest.from_file(APP, default_timeout=120))
    offered = {_run_name(o) for o in at.selectbox(key=S.CHECKPOINT).options}
    assert offered == {"good-run"} | set(LOAD_LEVEL)
    note = captions(at).replace("\\", "")  # (shown Markdown-escaped)
    for name in INFO_LEVEL:
        assert f"{name}/best" in note and BROKEN[name][1] in note, name


def test_each_broken_checkpoint_gets_its_message_on_every_page_and_the_good_one_still_works(env):
    at = ok(AppTest.from_file(APP, default_timeout=120))
    for name in LOAD_LEVEL:
        at.selectbox(key=S.CHECKPOINT).set_value(str(env / name / "best"))
        ok(at)
        for page in MODEL_PAGES:
            at.switch_page(page)
            ok(at)
            msg = errors(at).replace("\\", "")
            assert "cannot be loaded" in msg and BROKEN[name][1] in msg, (name, page, msg)
            assert len(at.error) == 1
        at.switch_page(S.PREDICT_PAGE)
    # the good checkpoint is still served, in the same session
    at.selectbox(key=S.CHECKPOINT).set_value(str(env / "good-run" / "best"))
    ok(at)
    at.switch_page(S.PREDICT_PAGE)
    ok(at)
    at.text_area(key=S.REVIEW_TEXT).input("The battery died after two days.")
    at.button(key="predict_btn").click()
    ok(at)
    assert not at.error and any("Predicted:" in str(m.value) for m in at.markdown)


@pytest.mark.parametrize("name", ["truncated-weights", "garbage-config"])
def test_open_on_the_main_page_of_a_broken_run_says_why(env, name):
    """The Train page's "Open on the main page": a weights fault shows the load error;
    an unreadable config says it cannot be opened (never another checkpoint silently)."""
    at = ok(AppTest.from_file(APP, default_timeout=120))
    at.switch_page(S.TRAIN_PAGE)
    ok(at)
    run = str(env / name)
    at.selectbox(key=S.LIVE_RUN).set_value(run)
    ok(at)
    at.button(key="open_btn").click()
    at.run()
    assert not at.exception and [t.value for t in at.title] == ["ReviewBERT"]   # on Predict
    if loading(at):
        # In a browser the sidebar's fragment reruns the Predict page once the load has
        # failed; AppTest reruns the page it was told to, so tell it.
        wait_for_loads()
        at.switch_page(S.PREDICT_PAGE)
        ok(at)
    msg = errors(at).replace("\\", "")
    assert BROKEN[name][1] in msg, msg
    assert "Predicted:" not in "\n".join(str(m.value) for m in at.markdown)
