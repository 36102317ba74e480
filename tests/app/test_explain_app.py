"""The "Which words mattered?" section and the Faithfulness page, driven with AppTest."""
from pathlib import Path

import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from browser_support import write_meta

APP = str(Path(__file__).resolve().parents[2] / "app.py")


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    import shutil
    root = tmp_path_factory.mktemp("ckpts")
    shutil.copytree(tiny_model_dir, root / "tiny")
    write_meta(root / "tiny", 5)
    return root


def app(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    return at


def rows(at) -> list[str]:
    return [m.value for m in at.html if 'class="rb-explain"' in str(m.value)]


def test_which_words_mattered_attention_at_once_gradients_on_request(monkeypatch, ckpt_root):
    at = app(monkeypatch, ckpt_root)
    at.text_area(key="review_text").input("Battery died after two days. Poor quality!")
    at.button(key="predict_btn").click().run()
    assert not at.exception, at.exception
    assert not rows(at)                                        # its tab is not open yet
    open_view(at, "Which words mattered?")
    assert "Which words mattered?" in [h.value for h in at.subheader]
    assert len(rows(at)) == 3                                  # raw, rollout, value norm
    reading = [m.value for m in at.markdown if str(m.value).startswith("**Reading:**")]
    assert reading and "rollout ranks" in reading[0]
    at.button(key="ww_run").click().run()
    assert not at.exception, at.exception
    assert len(rows(at)) == 5
    at.button(key="ww_perturb").click().run()                # LIME and occlusion
    assert not at.exception, at.exception
    assert len(rows(at)) == 7
    assert any("**LIME**" in str(m.value) and "200 samples" in str(m.value) for m in at.markdown)
    assert any("**Occlusion**" in str(m.value) for m in at.markdown)
    assert any("IG ranks" in str(m.value) for m in at.markdown)
    assert any("Integrated Gradients" in str(m.value) and "convergence delta" in str(m.value)
               for m in at.markdown)
    # the gradient results stay with the prediction when an attention control moves
    at.selectbox(key="att_layer").set_value(0).run()
    assert len(rows(at)) == 7 and not at.exception
    assert not [b for b in at.button if b.key in ("ww_run", "ww_perturb")]
    assert len(list((ckpt_root / "tiny" / "explanations").glob("*.json"))) == 2
    # another session (a student in the same class) gets both at once, from the cache
    other = app(monkeypatch, ckpt_root)
    other.text_area(key="review_text").input("Battery died after two days. Poor quality!")
    other.button(key="predict_btn").click().run()
    open_view(other, "Which words mattered?")
    assert len(rows(other)) == 7 and not other.exception
    assert not [b for b in other.button if b.key in ("ww_run", "ww_perturb")]
    cached = [c.value for c in other.caption if "read from the cache" in str(c.value)]
    assert len(cached) == 2, [c.value for c in other.caption]
    # another review is not
    other.text_area(key="review_text").input("Great phone, works well.")
    other.button(key="predict_btn").click().run()
    assert len(rows(other)) == 3 and [b for b in other.button if b.key == "ww_perturb"]


def test_faithfulness_page_runs_caches_and_says_which_method_wins(monkeypatch, ckpt_root):
    at = app(monkeypatch, ckpt_root)
    at.switch_page("pages/faithfulness.py").run()
    assert not at.exception, at.exception
    assert any("built-in examples" in i.value for i in at.info)   # no test split here
    at.number_input(key="faith_n").set_value(2)
    at.selectbox(key="faith_steps").set_value(8).run()
    at.button(key="faith_run").click().run()
    assert not at.exception, at.exception
    text = "\n".join(str(m.value) for m in at.markdown)
    assert "most faithful method on this model" in text and "Raw attention" in text
    assert len(at.dataframe) == 1 and at.dataframe[0].value.shape[0] == 16   # 7 methods + random
    assert list((ckpt_root / "tiny" / "faithfulness").glob("*.json"))
    # a fresh session finds the cached result without running anything
    at2 = app(monkeypatch, ckpt_root)
    at2.switch_page("pages/faithfulness.py").run()
    at2.number_input(key="faith_n").set_value(2)
    at2.selectbox(key="faith_steps").set_value(8).run()
    assert "most faithful method" in "\n".join(str(m.value) for m in at2.markdown)
    assert not [b for b in at2.button if b.key == "faith_run"]
