"""The main page, driven with Streamlit's AppTest (no browser)."""
from pathlib import Path

import pytest
from app_support import open_view, run_loaded
from streamlit.testing.v1 import AppTest

from reviewbert.ui import prediction_card as prediction

from browser_support import write_meta
from conftest import make_tiny_model

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    """Two fixture checkpoints: 5 labels (run folder with best/) and 3 labels."""
    import shutil
    root = tmp_path_factory.mktemp("ckpts")
    five = root / "run5" / "best"
    shutil.copytree(tiny_model_dir, five)
    write_meta(five.parent, 5)                  # reviewbert.json in the run folder
    write_meta(make_tiny_model(root / "three", num_labels=3, seed=1), 3)
    return root


def app(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error) for e in kind]
    return "\n".join(str(p) for p in parts)


def predict(at, text):
    at.text_area(key="review_text").input(text)
    at.button(key="predict_btn").click()
    at.run()
    assert not at.exception, at.exception
    return at


def test_paste_and_predict(monkeypatch, ckpt_root):
    at = app(monkeypatch, ckpt_root)
    assert at.selectbox(key="checkpoint").value.endswith("best")   # a run's best/ first
    predict(at, "The battery died after two days. Terrible phone.")
    out = texts(run_loaded(at))      # the sidebar's status, drawn before the click's load
    assert "CPU" in out or "GPU" in out                # the device named in the sidebar
    assert "Predicted:" in out and "star" in out
    assert any("★" in m.value for m in at.markdown)
    assert [t.label for t in at.tabs if t.label in prediction.VIEWS] == list(prediction.VIEWS)
    # only the open tab (the attention views) is built: no other view's widgets
    assert not [b for b in at.button if b.key in ("ww_run", "wi_edit")]
    # the attention views are tabs too, and only the open one is built: the highlighted
    # review first, then each chart alone (a chart's key names it)
    assert [t.label for t in at.tabs if t.label in prediction.ATTENTION_VIEWS] == list(
        prediction.ATTENTION_VIEWS)

    def built():
        return {"highlight": any("rb-highlight" in str(m.value) for m in at.html),
                "charts": sorted(c.proto.id.rsplit("-", 1)[-1] for c in at.get("plotly_chart")),
                "bertviz": len(at.get("component_instance")) == 1}
    assert built() == {"highlight": True, "charts": ["probs_chart"], "bertviz": False}, built()
    cls_view, heads_view, bertviz_view = prediction.ATTENTION_VIEWS[1:]
    open_view(at, cls_view)
    assert not at.exception, at.exception
    assert built() == {"highlight": False, "charts": ["cls_heatmap", "probs_chart"],
                       "bertviz": False}, built()
    open_view(at, heads_view)
    assert built() == {"highlight": False, "charts": ["head_bars", "heads_fig", "probs_chart"],
                       "bertviz": False}, built()
    # the token charts without Streamlit's theme (figures.OWN_TEMPLATE), the others with it
    themes = {c.proto.id.rsplit("-", 1)[-1]: c.proto.theme for c in at.get("plotly_chart")}
    assert themes == {"heads_fig": "", "head_bars": "", "probs_chart": "streamlit"}, themes
    open_view(at, cls_view)
    themes = {c.proto.id.rsplit("-", 1)[-1]: c.proto.theme for c in at.get("plotly_chart")}
    assert themes["cls_heatmap"] == "", themes
    open_view(at, bertviz_view)
    assert not at.exception, at.exception
    assert built() == {"highlight": False, "charts": ["probs_chart"], "bertviz": True}, built()
    assert "Showing the whole review" in texts(at)      # the head view's window caption
    # the open attention view is kept while another tab of the page is open
    open_view(at, "What if?")                          # another tab: built, the views are not
    assert not at.exception and [b for b in at.button if b.key == "wi_edit"]
    assert built() == {"highlight": False, "charts": ["probs_chart"], "bertviz": False}
    open_view(at, prediction.VIEWS[0])
    assert built()["bertviz"], built()
    open_view(at, prediction.ATTENTION_VIEWS[0])
    assert built()["highlight"]
    # widget changes redraw from the stored Prediction
    at.selectbox(key="att_layer").set_value(0).run()
    at.selectbox(key="att_head").set_value(2).run()
    at.radio(key="att_level").set_value("word").run()
    assert not at.exception
    assert "layer 1, head 3" in texts(at)


@pytest.mark.parametrize("text", ["", "   \n  "])
def test_empty_input_gets_a_friendly_message(monkeypatch, ckpt_root, text):
    at = predict(app(monkeypatch, ckpt_root), text)
    assert "text box is empty" in texts(at)
    assert "Predicted:" not in texts(at)


def test_truncation_notice(monkeypatch, ckpt_root):
    at = predict(app(monkeypatch, ckpt_root), "great phone " * 400)
    assert "Truncated" in texts(at)


def test_sample_from_builtin_examples(monkeypatch, ckpt_root):
    at = run_loaded(app(monkeypatch, ckpt_root))    # alone, the first run is still loading
    assert "built-in examples" in texts(at)
    at.selectbox(key="sample_stars").set_value(4)
    at.button(key="sample_btn").click()
    at.run()
    assert not at.exception
    assert at.text_area(key="review_text").value
    out = texts(at)
    assert "True rating: " in out and "(4 stars)" in out and "Predicted:" in out, \
        [m.value[:90] for m in at.markdown]


def test_sample_misclassified(monkeypatch, ckpt_root):
    at = app(monkeypatch, ckpt_root)
    at.checkbox(key="sample_wrong").check()
    at.button(key="sample_btn").click()
    at.run()
    assert not at.exception
    out = texts(at)
    assert "misclassified" in out or "model got it right" in out


def test_sample_from_the_checkpoints_test_split(monkeypatch, tmp_path, tiny_model_dir, data_dir):
    import shutil
    ck = tmp_path / "withdata"
    shutil.copytree(tiny_model_dir, ck)
    write_meta(ck, 5, data_file=data_dir / "unlocked_mobile_10k.csv", max_per_class=10)
    at = app(monkeypatch, tmp_path)
    assert "test split" in texts(at), texts(at)
    at.button(key="sample_btn").click()
    at.run()
    assert not at.exception
    assert "unlocked_mobile_10k.csv" in texts(at) and "True rating" in texts(at)


def test_no_checkpoint_shows_the_training_guide(monkeypatch, tmp_path):
    at = app(monkeypatch, tmp_path / "empty")
    out = texts(at) + "\n".join(c.value for c in at.code)
    assert "No trained checkpoint yet" in out
    assert "python -m reviewbert train --data ../shared/data/unlocked_mobile_10k.csv" in out
    assert "--max-per-class 200 --epochs 1" in out          # a quick first run, spelled out


def test_broken_checkpoint_is_a_clear_error(monkeypatch, tmp_path, tiny_model_dir):
    import shutil
    ck = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, ck)
    (ck / "model.safetensors").write_bytes(b"not a safetensors file")
    at = AppTest.from_file(APP, default_timeout=120)
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(tmp_path))
    at.run()                # the page draws while the checkpoint loads in the background
    assert not at.exception
    assert at.error or any("loading the model" in c.value for c in at.caption)
    run_loaded(at)          # what the sidebar's fragment does once the load has failed
    assert not at.exception
    assert at.error and "cannot be loaded" in at.error[0].value


def test_switching_checkpoints_changes_the_labels(monkeypatch, ckpt_root):
    at = predict(app(monkeypatch, ckpt_root), "Okay phone, average battery.")
    five = texts(at)
    assert "1 star" in five or "stars" in five
    other = [o for o in at.selectbox(key="checkpoint").options if "three" in o]
    at.selectbox(key="checkpoint").set_value(other[0]).run()
    assert not at.exception
    three = texts(at)
    assert any(f"Predicted: {n}" in three for n in ("negative", "neutral", "positive"))


def test_the_first_element_skips_streamlits_repl_check(monkeypatch):
    """runtime.runs.skip_repl_check: the first element a process draws no longer runs Streamlit's
    REPL check (``env_util.is_repl``: ``inspect.stack()``, 145 ms in front of the first
    page). The first half shows the check is still there to skip in this Streamlit."""
    from streamlit import delta_generator, env_util

    from reviewbert.ui.runtime import runs
    calls = []
    monkeypatch.setattr(env_util, "is_repl", lambda: calls.append(1) or False)
    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)
    delta_generator._maybe_print_use_warning()
    assert calls == [1]
    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)
    runs.skip_repl_check()
    delta_generator._maybe_print_use_warning()
    assert calls == [1]


def test_the_review_and_the_sampler_filters_survive_another_page(monkeypatch, ckpt_root):
    """The review box and the sampler's filters keep their values while the user is on
    another page (persist_state=state.KEEP: Streamlit drops the state of a widget that a
    run does not draw); the Train page's view does too."""
    from reviewbert.ui import state as S
    at = predict(app(monkeypatch, ckpt_root), "Kept while I look at the Train page. Good.")
    at.selectbox(key=S.SAMPLE_STARS).set_value(2)
    at.checkbox(key=S.SAMPLE_WRONG).check()
    at.run()
    at.switch_page(S.TRAIN_PAGE).run()
    assert not at.exception, at.exception
    at.radio(key=S.TRAIN_VIEW).set_value("Search").run()
    at.switch_page(S.PREDICT_PAGE).run()
    assert not at.exception, at.exception
    assert at.text_area(key=S.REVIEW_TEXT).value == "Kept while I look at the Train page. Good."
    assert at.selectbox(key=S.SAMPLE_STARS).value == 2
    assert at.checkbox(key=S.SAMPLE_WRONG).value is True
    at.switch_page(S.TRAIN_PAGE).run()
    assert at.radio(key=S.TRAIN_VIEW).value == "Search"


def test_a_predict_run_looks_its_prediction_up_once(monkeypatch, ckpt_root):
    """The run that carries *Predict* draws the prediction it just made: one shared-cache
    lookup (and one spinner), not a second one for the views; a later run looks it up."""
    from reviewbert.ui import predict as P
    calls = []
    real = P._predict
    monkeypatch.setattr(P, "_predict", lambda *a: (calls.append(a[1]), real(*a))[1])
    at = run_loaded(app(monkeypatch, ckpt_root))
    predict(at, "Screen cracked on day one, returned it.")
    assert calls == ["Screen cracked on day one, returned it."]
    assert "Predicted:" in texts(at)
    at.run()                                            # no click: the kept result, looked up
    assert calls == ["Screen cracked on day one, returned it."] * 2
    assert "Predicted:" in texts(at)


def test_a_checkpoints_mtime_is_read_once_a_second_and_a_re_save_is_seen(tmp_path, monkeypatch):
    import os
    import time

    from reviewbert.ui.runtime import cached_model
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x")
    os.utime(tmp_path / "model.safetensors", (1_000_000, 1_000_000))
    os.utime(tmp_path / "config.json", (1_000_000, 1_000_000))
    globs = []
    real_glob = Path.glob
    monkeypatch.setattr(Path, "glob", lambda self, pat: (globs.append(pat), real_glob(self, pat))[1])
    first = cached_model.mtime(tmp_path)
    assert first == 1_000_000 and cached_model.mtime(tmp_path) == first and len(globs) == 1
    os.utime(tmp_path / "model.safetensors", (2_000_000, 2_000_000))     # re-saved in place
    monkeypatch.setattr(cached_model, "MTIME_TTL_S", 0.05)
    time.sleep(0.06)
    assert cached_model.mtime(tmp_path) == 2_000_000 and len(globs) == 2
