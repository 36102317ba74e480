"""What if?'s inputs under generated text (Hypothesis): whatever a user types into the
editor, or whatever review a counterfactual starts from.

- deleting any set of words from a text leaves exactly the other words' wordpieces (the
  deletion flip's promise that what is deleted is those words and nothing else);
- sentences are ordered, disjoint, inside the text, each with a letter or digit;
- the diff of any two texts is drawn only with the view's own tags, and outside the
  removed marks it is exactly the edit as typed;
- the editor's comparison of any text with a review raises nothing but the empty-text
  ValueError, and accounts for every word.
"""
from __future__ import annotations

import html
import re
from functools import lru_cache

from hypothesis import strategies as st

from reviewbert.whatif import counterfactuals as W
from reviewbert.whatif import figures as WF

from conftest import ROOT
from fuzzing import time_limit, twins

PIECES = st.sampled_from(["good", "battery", "don't", "it's", "!", "?!", "...", ".", ",", " ",
                          "  ", "\n", "\r\n", "\r", "\t", "é", "e\u0301", "中文", "😡", "\u200b",
                          "\x00", "<b>", "</b>", "&amp;", "**", "[x](javascript:1)", "$x$",
                          ":red[x]", "e.g.", "2.5", "UN", "##ing", "[CLS]", "[SEP]", "\u202e"])
TEXTS = st.one_of(st.lists(PIECES, max_size=30).map("".join), st.text(max_size=200))


@lru_cache(maxsize=1)
def tokenizer():
    from transformers import AutoTokenizer

    from reviewbert.model.checkpoint import resolve_base_model
    return AutoTokenizer.from_pretrained(resolve_base_model(None))


@lru_cache(maxsize=1)
def tiny_predictor():
    import torch

    from reviewbert.model.inference import Predictor

    from conftest import make_tiny_model
    folder = ROOT / "artifacts" / "fuzz-tiny-bert"
    if not (folder / "model.safetensors").exists():
        make_tiny_model(folder)
    return Predictor.from_checkpoint(folder, torch.device("cpu"))


def _deleting_words_leaves_the_other_pieces(text, data):
    from reviewbert.model.inference import encode
    enc = encode(tokenizer(), text, 10_000)
    if not enc.words:
        return
    gone = data.draw(st.sets(st.integers(0, len(enc.words) - 1)))
    pred = type("P", (), {"text": enc.text, "word_spans": enc.word_spans})
    with time_limit(10, "delete_words"):
        out = W.delete_words(pred, gone)
    want = [t for t, w in zip(enc.ids, enc.word_ids) if w not in gone]
    assert encode(tokenizer(), out, 10_000).ids == want, (text, sorted(gone), out)


def _sentences_are_ordered_disjoint_and_wordy(text):
    spans = W.sentence_spans(text)
    ends = [0]
    for s, e in spans:
        assert ends[-1] <= s < e <= len(text)
        assert W.is_word(text[s:e]) and text[s:e] == text[s:e].strip()
        ends.append(e)


def _diff_is_the_edit_as_typed(before, after):
    d = W.text_diff(tokenizer(), before, after)
    out = WF.diff_html(d.before, d.before_spans, d.after, d.after_spans, d.changes)
    assert set(re.findall(r"</?([a-z]+)", out)) <= {"div", "span", "br"}
    assert "\r" not in out and "\n" not in out
    kept = re.sub(r'<span class="rb-removed"[^>]*>.*?</span>', "", out)
    shown = html.unescape(re.sub(r"<[^>]*>", "", kept.replace("<br>", "\n")))
    assert shown == re.sub(r"\r\n?|\n", "\n", d.after)


def _the_editor_takes_any_text(text):
    p = tiny_predictor()
    before = p.predict("The battery died after two days. Poor quality!")
    try:
        with time_limit(20, "compare"):
            after = p.predict(text)
    except ValueError as e:
        assert not text.strip() and "empty" in str(e)
        return
    cmp = W.compare(p, before, after, "value_norm" if after.words else None)
    rows = cmp.word_rows()
    kept = sum(1 for r in rows if r["op"] == "kept")
    assert kept + cmp.added == len(after.words) and kept + cmp.removed == len(before.words)
    assert abs(cmp.delta.sum()) < 1e-5


(test_deleting_words_leaves_the_other_pieces,
 test_deleting_words_leaves_the_other_pieces_fuzz) = twins(
    _deleting_words_leaves_the_other_pieces, text=TEXTS, data=st.data())
(test_sentences_are_ordered_disjoint_and_wordy,
 test_sentences_are_ordered_disjoint_and_wordy_fuzz) = twins(
    _sentences_are_ordered_disjoint_and_wordy, text=TEXTS)
test_diff_is_the_edit_as_typed, test_diff_is_the_edit_as_typed_fuzz = twins(
    _diff_is_the_edit_as_typed, before=TEXTS, after=TEXTS)
test_the_editor_takes_any_text, test_the_editor_takes_any_text_fuzz = twins(
    _the_editor_takes_any_text, text=TEXTS)
