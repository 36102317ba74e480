"""The Train page, driven with Streamlit's AppTest (no browser)."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from reviewbert.training import runs as R
from reviewbert.ui import state as S

from toyreviews import write_toy_csv

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture
def env(monkeypatch, tmp_path, tiny_model_dir):
    data = tmp_path / "data"
    write_toy_csv(data / "toy.csv", n=150)
    for name, var in (("ckpts", "REVIEWBERT_CHECKPOINTS"), ("data", "REVIEWBERT_DATA_DIR"),
                      ("uploads", "REVIEWBERT_UPLOADS_DIR"), ("ckpts/.queue", "REVIEWBERT_QUEUE_DIR")):
        (tmp_path / name).mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(var, str(tmp_path / name))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    return tmp_path


def train_page(view: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(S.TRAIN_PAGE)
    at.run()
    assert not at.exception, at.exception
    if view:
        at.radio(key=S.TRAIN_VIEW).set_value(view).run()
        assert not at.exception, at.exception
    return at


def messages(at) -> str:
    parts = [e.value for kind in (at.error, at.warning, at.info, at.success) for e in kind]
    parts += [m.value for m in at.markdown] + [c.value for c in at.caption]
    return "\n".join(str(p) for p in parts)


def fill(at, tiny, epochs=1):
    at.multiselect(key=S.TRAIN_FILES).set_value([str(Path(at.multiselect(key=S.TRAIN_FILES).options[0]))])
    at.text_input(key=S.CONFIG_FIELD + "base_model").input(str(tiny))
    at.number_input(key=S.CONFIG_FIELD + "epochs").set_value(epochs)
    at.number_input(key=S.CONFIG_FIELD + "max_length").set_value(32)
    at.number_input(key=S.CONFIG_FIELD + "max_per_class").set_value(20)
    at.run()
    assert not at.exception, at.exception
    return at


def test_no_checkpoint_still_opens_the_train_page(env):
    at = train_page()
    assert at.title[0].value == "Train a model"
    assert "No run yet" in messages(at)


def test_form_validation_is_shown_next_to_the_field_before_launch(env, tiny_model_dir):
    at = fill(train_page("New run"), tiny_model_dir)
    assert not at.button(key="launch_btn").disabled
    at.number_input(key=S.CONFIG_FIELD + "lr_bert").set_value(-1e-3)
    at.number_input(key=S.CONFIG_FIELD + "epochs").set_value(0)
    at.run()
    errs = [e.value for e in at.error]
    assert any("lr_bert" in e for e in errs), errs
    assert any("epochs" in e for e in errs), errs
    assert at.button(key="launch_btn").disabled
    at.multiselect(key=S.TRAIN_FILES).set_value([])
    at.number_input(key=S.CONFIG_FIELD + "lr_bert").set_value(5e-5)
    at.number_input(key=S.CONFIG_FIELD + "epochs").set_value(1)
    at.run()
    assert "Choose a data file" in messages(at)
    assert at.button(key="launch_btn").disabled


def test_the_data_report_appears_with_balanced_splits(env, tiny_model_dir):
    at = fill(train_page("New run"), tiny_model_dir)
    assert "Rows read" in [m.label for m in at.metric]
    report = "\n".join(c.value for c in at.code)
    assert "Balanced splits (5 labels, 20 per class in all)" in report
    at.selectbox(key=S.CONFIG_FIELD + "labels").set_value(3).run()
    assert "Balanced splits (3 labels" in "\n".join(c.value for c in at.code)


def test_the_data_report_follows_the_class_balance_choice(env, tiny_model_dir):
    at = fill(train_page("New run"), tiny_model_dir)
    assert "Class balance: undersample" in messages(at)
    at.selectbox(key=S.CONFIG_FIELD + "class_balance").set_value("weighted").run()
    assert not at.exception, at.exception
    report = "\n".join(c.value for c in at.code)
    assert "train keeps every other review" in report
    assert "Class balance: weighted: every training review; loss weights" in messages(at)


@pytest.mark.parametrize("name,content,why", [
    ("cols.csv", b"id,colour\n1,red\n", "cannot tell which column"),
    ("junk.csv", bytes(range(256)) * 20, "binary"),
    ("empty.csv", b"", "empty"),
])
def test_a_bad_upload_gets_a_clear_message(env, name, content, why):
    at = train_page("New run")
    at.file_uploader(key=S.TRAIN_UPLOAD).upload(name, content, "text/csv").run()
    assert not at.exception, at.exception
    assert any(why in e.value and name in e.value for e in at.error), [e.value for e in at.error]
    assert not any((env / "uploads").iterdir())


def test_a_good_upload_is_selected_and_previewed(env):
    at = train_page("New run")
    at.file_uploader(key=S.TRAIN_UPLOAD).upload(
        "../my reviews.csv", b"Rating,Reviews\n5,Great phone\n1,Awful phone\n", "text/csv").run()
    assert not at.exception, at.exception
    assert (env / "uploads" / "my_reviews.csv").exists()
    assert at.multiselect(key=S.TRAIN_FILES).value == [str(env / "uploads" / "my_reviews.csv")]
    assert "Text column **Reviews**, rating column **Rating**" in messages(at)


def test_launch_writes_a_run_that_the_table_lists_and_delete_asks_first(env, tiny_model_dir):
    at = fill(train_page("New run"), tiny_model_dir, epochs=50)
    at.text_input(key=S.TRAIN_RUN_NAME).input("page-run")
    at.button(key="launch_btn").click().run()
    assert not at.exception, at.exception
    run = env / "ckpts" / "page-run"
    try:
        cfg = json.loads((run / "train_config.json").read_text())
        assert cfg["epochs"] == 50 and cfg["max_length"] == 32 and cfg["data"]
        assert at.radio(key=S.TRAIN_VIEW).value == "Runs"          # switched to the live view
        assert (R.read_status(run) or {}).get("state") in ("queued", "running")
        # nothing else is queued, so it starts; stop it once it runs (stopping a queued run
        # is a cancel, which can race with its start)
        deadline = time.time() + 90
        while (R.read_status(run) or {}).get("state") != "running":
            assert time.time() < deadline, R.read_status(run)
            time.sleep(0.2)
        at.run()
        assert "page-run" in "\n".join(str(v) for v in at.dataframe[0].value["run"])
        assert not any(b.key == "delete_btn" for b in at.button)     # never while running
        assert R.stop_run(run), R.read_status(run)
        deadline = time.time() + 60
        while (R.read_status(run) or {}).get("state") in ("queued", "running"):
            assert time.time() < deadline
            time.sleep(0.2)
        at.run()
        at.button(key="delete_btn").click().run()
        assert "cannot be undone" in messages(at) and run.exists()   # asks, deletes nothing yet
        at.button(key="delete_yes").click().run()
        assert not at.exception, at.exception
        assert not run.exists()
    finally:
        if run.exists() and (R.read_status(run) or {}).get("state") in ("queued", "running"):
            R.stop_run(run)
            time.sleep(2)
            shutil.rmtree(run, ignore_errors=True)


def test_search_form_builds_the_spec_the_cli_would():
    import dataclasses

    from reviewbert.config import TrainConfig
    from reviewbert.errors import ConfigError
    from reviewbert.ui.train_search import spec_from_form
    base = dataclasses.asdict(TrainConfig(data=[__file__]))
    spec = spec_from_form(base, [{"hyperparameter": "lr_bert", "values": "1e-5, 5e-5"},
                                 {"hyperparameter": "labels", "values": "5,3"}],
                          "grid", None, "accuracy", True, "")
    assert spec.grid == {"lr_bert": [1e-5, 5e-5], "labels": [5, 3]} and spec.size == 4
    assert "lr_bert" not in spec.base and spec.prune
    assert "--grid" in spec.to_args() and "--prune" in spec.to_args()
    tpe = spec_from_form(base, [{"hyperparameter": "lr_bert", "values": "1e-6:1e-4:log"}],
                         "tpe", 6, "loss", False, "")
    assert tpe.ranges == {"lr_bert": {"low": 1e-6, "high": 1e-4, "log": True}}
    assert tpe.size == 6 and tpe.direction == "minimize"
    with pytest.raises(ConfigError, match="tpe"):
        spec_from_form(base, [{"hyperparameter": "lr_bert", "values": "1e-6:1e-4"}],
                       "grid", None, "accuracy", False, "")
    with pytest.raises(ConfigError):
        spec_from_form(base, [{"hyperparameter": "epochs", "values": "one,two"}],
                       "grid", None, "accuracy", False, "")


@pytest.mark.e2e
def test_a_search_launched_from_the_page_queues_and_shows_progress(env, tiny_model_dir):
    at = fill(train_page("Search"), tiny_model_dir)
    assert "4 trial(s)" in messages(at)                       # the default 2 x 2 grid
    at.text_input(key=S.SEARCH_FIELD + "name").input("page-search")
    at.button(key="search_btn").click().run()
    assert not at.exception, at.exception
    folder = env / "ckpts" / "page-search"
    try:
        deadline = time.time() + 60
        while not (folder / "search.json").exists():
            assert time.time() < deadline, (R.read_status(folder), R.read_log_tail(folder))
            time.sleep(0.3)
        at.run()
        assert "page-search" in messages(at) and "left of 4" in "\n".join(
            p.text or "" for p in at.get("progress")) or "left of 4" in messages(at)
    finally:
        R.stop_run(folder)
        deadline = time.time() + 60
        while (R.read_status(folder) or {}).get("state") in ("queued", "running") \
                and time.time() < deadline:
            time.sleep(0.3)


def test_a_run_distilled_from_an_earlier_run_is_launched_from_the_form(env, tiny_model_dir):
    at = fill(train_page("New run"), tiny_model_dir)
    teachers = at.multiselect(key=S.CONFIG_FIELD + "teachers")
    assert teachers.options == []                      # no finished run yet
    teachers.set_value([str(env / "ckpts" / "no-such-run")]).run()   # a typed folder
    assert any("teacher checkpoint folder not found" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert at.button(key="launch_btn").disabled
    # a teacher trained on the same file and split, then a student taught by it
    at.multiselect(key=S.CONFIG_FIELD + "teachers").set_value([]).run()
    at.text_input(key=S.TRAIN_RUN_NAME).input("teacher")
    at.button(key="launch_btn").click().run()
    teacher = env / "ckpts" / "teacher"
    wait_for(lambda: (R.read_status(teacher) or {}).get("state") == "finished", teacher)
    at = fill(train_page("New run"), tiny_model_dir)
    offered = at.multiselect(key=S.CONFIG_FIELD + "teachers")
    assert offered.options == [str(teacher)]           # the finished run on the same file
    offered.set_value([str(teacher)]).run()
    at.number_input(key=S.CONFIG_FIELD + "distill_weight").set_value(0.7).run()
    assert at.button(key="launch_btn").disabled is False
    at.text_input(key=S.TRAIN_RUN_NAME).input("student")
    at.button(key="launch_btn").click().run()
    student = env / "ckpts" / "student"
    wait_for(lambda: (R.read_status(student) or {}).get("state") == "finished", student)
    meta = json.loads((student / "reviewbert.json").read_text())
    assert meta["hyperparameters"]["teachers"] == [str(teacher)]
    assert meta["distillation"]["weight"] == 0.7
    assert meta["distillation"]["teachers"][0]["path"] == str(teacher / "best")
    assert "distillation: 1 teacher(s) scored" in (student / "train.log").read_text()


def wait_for(done, run, seconds=120):
    deadline = time.time() + seconds
    while not done():
        assert time.time() < deadline, (R.read_status(run), R.read_log_tail(run))
        time.sleep(0.3)
