"""The "Inside BERT" page (and the head-view window on the main page), driven with AppTest."""
from pathlib import Path

import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from browser_support import write_meta
from conftest import make_tiny_model

APP = str(Path(__file__).resolve().parents[2] / "app.py")
PAGE = "pages/inside_bert.py"


def tiny_mlm(out: Path) -> Path:
    """A tiny random BertForMaskedLM (a base model *with* its MLM head) and the tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    from reviewbert.model.checkpoint import resolve_base_model
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                     intermediate_size=64)
    BertForMaskedLM(cfg).save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(resolve_base_model(None)).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory, tiny_model_dir):
    """A 5-label run (best/) whose base model is nowhere, and a 3-label checkpoint whose
    base model is a local masked LM; both tiny random BERTs."""
    import shutil
    root = tmp_path_factory.mktemp("teach-ckpts")
    five = root / "run5" / "best"
    shutil.copytree(tiny_model_dir, five)
    write_meta(five.parent, 5)
    mlm = tiny_mlm(tmp_path_factory.mktemp("bases") / "tiny-mlm")
    write_meta(make_tiny_model(root / "three", num_labels=3, seed=1), 3, base_model=str(mlm))
    return root


def texts(at) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [e.value for kind in (at.info, at.warning, at.error) for e in kind]
    return "\n".join(str(p) for p in parts)


def headers(at) -> list[str]:
    return [h.value for h in at.main.header]


def page(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(PAGE)
    at.run()
    assert not at.exception, at.exception
    return at


def test_default_sentence_every_step(monkeypatch, ckpt_root):
    at = page(monkeypatch, ckpt_root)
    assert at.text_input(key="inside_sentence").value == "time flies like an arrow"
    assert headers(at) == ["1. Tokens", "2. Input embeddings", "3. One attention head, by hand",
                           "4. All heads of the layer", "5. Static versus contextual",
                           "6. From [CLS] to stars"]
    out = texts(at)
    assert "2 layers, 4 heads × 8 dimensions = hidden size 32" in out     # from the config
    assert "this is the same matrix that the heatmaps on the main page draw" in out.lower()
    checks = [c.value for c in at.caption if "Checked" in c.value]
    assert len(checks) == 4 and all(c.startswith("✓") for c in checks), checks
    assert "unboxing" in out and "##box" in out
    # the fixture's base model is nowhere on this machine: step 7 hidden, said plainly
    assert "Step 7, the masked language model, is hidden" in out and "not on this machine" in out
    assert not at.error


def test_one_word_and_empty_input(monkeypatch, ckpt_root):
    at = page(monkeypatch, ckpt_root)
    at.text_input(key="inside_sentence").input("wonderful").run()
    assert not at.exception, at.exception
    assert "Shape: **[3]** token ids" in texts(at)
    assert len(headers(at)) == 6
    at.text_input(key="inside_sentence").input("   ").run()
    assert not at.exception
    assert "Type a sentence in the box above" in texts(at)
    assert headers(at) == []


def test_three_label_checkpoint_with_an_mlm_base(monkeypatch, ckpt_root):
    at = page(monkeypatch, ckpt_root)
    three = [o for o in at.selectbox(key="checkpoint").options if "three" in o]
    at.selectbox(key="checkpoint").set_value(three[0]).run()
    assert not at.exception, at.exception
    out = texts(at)
    assert "3 classes" in out and "classifier, [3, 32]" in out
    assert any(f"By hand: **{n}**" in out for n in ("negative", "neutral", "positive")), out[-600:]
    # its base model has an MLM head: step 7 is shown and fills in [MASK]
    assert headers(at)[-1] == "7. Masked language model"
    assert not at.warning, [w.value for w in at.warning]
    assert at.text_input(key="inside_masked").value == "time flies like an [MASK]"
    assert "is hidden" not in out
    at.text_input(key="inside_masked").input("no mask in this one").run()
    assert "Put [MASK] where a word should be guessed" in texts(at)


def test_classroom_mode_steps_forward_and_back(monkeypatch, ckpt_root):
    at = page(monkeypatch, ckpt_root)
    at.selectbox(key="inside_layer").set_value(1).run()        # layer 2, kept across steps
    at.toggle(key="inside_classroom").set_value(True).run()
    assert headers(at) == ["1. Tokens"] and "Step 1 of 6" in at.get("progress")[0].proto.text
    for _ in range(3):
        at.button(key="inside_next").click().run()
    assert headers(at) == ["4. All heads of the layer"], headers(at)
    assert "Layer 2 (pick another in step 3)" in texts(at)
    at.button(key="inside_back").click().run()
    assert headers(at) == ["3. One attention head, by hand"]
    assert at.selectbox(key="inside_layer").value == 1
    # a visit to another page keeps the sentence, the mode and the step
    at.text_input(key="inside_sentence").input("fruit flies like a banana").run()
    at.switch_page("pages/predict.py").run()
    at.switch_page(PAGE).run()
    assert at.text_input(key="inside_sentence").value == "fruit flies like a banana"
    assert headers(at) == ["3. One attention head, by hand"]
    assert not at.exception


def test_main_page_head_view_window(monkeypatch, ckpt_root):
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(ckpt_root))
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.text_area(key="review_text").input("the battery is great " * 30 + "finally")
    at.button(key="predict_btn").click().run()
    from reviewbert.ui.predict import shared_prediction
    res = at.session_state["result"]
    assert set(res) == {"key", "input"}       # the session keeps no attention array
    n = shared_prediction(res["key"], res["input"], None).n_tokens   # cached: no model needed
    open_view(at, "Head view (bertviz)")
    slider = at.slider(key="hv_window")
    assert (slider.min, slider.max) == (1, n - 1 - 46)
    slider.set_value(slider.max).run()
    assert not at.exception, at.exception
    assert f"tokens {n - 47}–{n - 2} of {n - 2} and [SEP]" in texts(at)
