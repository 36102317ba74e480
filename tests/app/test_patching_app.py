"""What if?'s "Where does the change act?" driven with AppTest on the hand-weighted trigger
model (tests/trigger_model.py): patching the original against a compared edit draws both
grids and the reading; a typed pair that cannot be aligned says why and runs nothing; a
hostile word stays escaped in the figure."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from app_support import open_view
from streamlit.testing.v1 import AppTest

from browser_support import write_meta
from toyreviews import write_toy_csv
from trigger_model import UP, make_trigger_model

APP = str(Path(__file__).resolve().parents[2] / "app.py")
REVIEW = f"The phone is fine. The screen is {UP}, and the battery lasts a day."


@pytest.fixture(scope="module")
def ckpt_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("patch-ckpts")
    toy = write_toy_csv(root.parent / "toy.csv", n=150)
    write_meta(make_trigger_model(root / "trig"), 5, data_file=toy, max_length=64, max_per_class=10)
    return root


def run(at) -> AppTest:
    at.run()
    assert not at.exception, at.exception
    return at


def opened(monkeypatch, root) -> AppTest:
    monkeypatch.setenv("REVIEWBERT_CHECKPOINTS", str(root))
    at = run(AppTest.from_file(APP, default_timeout=180))
    at.text_area(key="review_text").input(REVIEW)
    at.button(key="predict_btn").click()
    run(at)
    open_view(at, "What if?")
    at.button(key="wi_edit").click()
    return run(at)


def charts(at) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def titled(at, words: str) -> list[dict]:
    return [c for c in charts(at) if words in str(c["layout"].get("title", {}).get("text", ""))]


def test_patching_the_original_against_the_edit(monkeypatch, ckpt_root):
    at = opened(monkeypatch, ckpt_root)
    at.text_area(key="wi_editor").input(REVIEW.replace(UP, "great"))
    at.button(key="wi_compare").click()
    run(at)
    assert at.radio(key="wi_patch_pair").value == "original → edit"
    assert not titled(at, "(layer, word)")                       # nothing runs before the click
    at.button(key="wi_patch_run").click()
    run(at)
    (words,) = titled(at, "(layer, word)")
    assert len(titled(at, "one head")) == 1
    ticks = words["layout"]["xaxis"]["ticktext"]
    assert ticks[0] == "[CLS]" and f"{UP}→great" in ticks and ticks[-1] == "[SEP]"
    z = words["data"][0]["z"]
    assert len(z) == 2 and abs(z[0][ticks.index(f"{UP}→great")] - 1.0) < 1e-4
    md = "\n".join(m.value for m in at.markdown)
    assert "restores" in md and "«excellent→great»" in md
    # the other way round is another pair: its button is back
    at.radio(key="wi_patch_pair").set_value("edit → original")
    run(at)
    assert [b for b in at.button if b.key == "wi_patch_run"]


def test_a_typed_pair_that_cannot_be_aligned_and_a_hostile_word(monkeypatch, ckpt_root):
    at = opened(monkeypatch, ckpt_root)
    at.radio(key="wi_patch_pair").set_value("a pair typed here")
    run(at)
    at.text_area(key="wi_patch_clean").input("good phone")
    at.text_area(key="wi_patch_corrupt").input("not a good phone")
    run(at)
    info = "\n".join(i.value for i in at.info)
    assert "cannot be patched" in info and "same number of words" in info
    assert "2 \\(clean\\) vs 4 \\(corrupted\\)" in info          # md_escape'd
    assert not [b for b in at.button if b.key == "wi_patch_run"]
    at.text_area(key="wi_patch_clean").input("a excellent c phone")
    at.text_area(key="wi_patch_corrupt").input("< terrible > phone")  # four words each
    run(at)
    at.button(key="wi_patch_run").click()
    run(at)
    (words,) = titled(at, "(layer, word)")
    ticks = words["layout"]["xaxis"]["ticktext"]
    assert ticks[1:4] == ["a→&lt;", "excellent→terrible", "c→&gt;"]
    assert "<" not in json.dumps(ticks) and ">" not in json.dumps(ticks)
