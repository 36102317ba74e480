"""What if? on a model whose deciding word is known (tests/trigger_model.py): the deletion
flip finds exactly that word, occlusion and LIME rank it first, HotFlip's best swap is
it, and every counterfactual carries the probabilities of its own forward pass. Plus the
text edits, the word diff, the comparison, the history, the batched forward and figures."""
from __future__ import annotations

import html
import re

import numpy as np
import pytest
import torch

from reviewbert.explain import faithfulness as FA
from reviewbert.explain import methods as E
from reviewbert.whatif import counterfactuals as W
from reviewbert.whatif import figures as WF

from hostile_texts import BY_NAME
from trigger_model import DOWN, DOWN_CLASS, NEUTRAL, UP, UP_CLASS, make_trigger_model

WITH_UP = "The phone is fine. The screen is excellent, and the battery lasts a day."
NEUTRAL_TEXT = "The phone is fine and the battery lasts a day."


@pytest.fixture(scope="module")
def trig(tmp_path_factory):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(make_trigger_model(tmp_path_factory.mktemp("trig") / "m"),
                                     torch.device("cpu"))


@pytest.fixture(scope="module")
def tiny(tiny_model_dir, tmp_path_factory):
    """The tiny model from a copy of its folder: ``compare`` caches a slow method's scores
    beside the checkpoint (reviewbert/explain/cache.py), and the session's
    ``tiny_model_dir`` must stay as made for the tests that copy it (their caches empty)."""
    import shutil

    from reviewbert.model.inference import Predictor
    folder = tmp_path_factory.mktemp("whatif-tiny") / "tiny"
    shutil.copytree(tiny_model_dir, folder)
    return Predictor.from_checkpoint(folder, torch.device("cpu"))


def word_index(pred, word: str) -> int:
    return pred.words.index(word)


# ------------------------------------------------------------------ the toy model itself
def test_the_trigger_model_is_decided_by_one_word(trig):
    assert trig.predict(WITH_UP).label_id == UP_CLASS
    assert trig.predict(NEUTRAL_TEXT).label_id == NEUTRAL
    assert trig.predict(f"the battery is {DOWN}").label_id == DOWN_CLASS
    assert trig.predict(WITH_UP).probs[UP_CLASS] > 0.9


# ------------------------------------------------------------------ 1. deletion flip
@pytest.mark.parametrize("method", ["value_norm", "occlusion", "lime", "integrated_gradients"])
def test_minimal_deletion_finds_exactly_the_trigger(trig, method):
    pred = trig.predict(WITH_UP)
    flip = W.minimal_deletion(W.Checker(trig), pred, W.ranking(trig, pred, method), method)
    assert flip.found and flip.words == [word_index(pred, UP)]
    cf = flip.counterfactual
    assert cf.text == WITH_UP.replace("excellent,", ",") and UP not in cf.text
    assert cf.label_id == NEUTRAL and cf.flipped and cf.kind == "deletion"
    np.testing.assert_allclose(cf.probs, trig.predict(cf.text).probs, atol=1e-5)
    assert flip.sentence(pred) == "Deleting this word turns 4 stars into 3 stars: excellent."


@pytest.mark.parametrize("search, verify_passes", [("bf16", 1), ("fp32", 0)])
def test_greedy_then_pruned_back_to_the_one_word_that_matters(trig, search, verify_passes):
    """The counterfactual shown is verified in one exact pass after a bf16 search; after an
    fp32 search (what "auto" picks on a CPU without bf16 units) the search's own exact
    result is reused: no pass at all. Each precision named, so both hold on any CPU."""
    pred = trig.predict(WITH_UP)
    up = word_index(pred, UP)
    others = [i for i in range(len(pred.words)) if i != up and W.is_word(pred.words[i])]
    order = others[:3] + [up] + others[3:]          # the trigger ranked 4th
    checker = W.Checker(trig, search=search)
    flip = W.minimal_deletion(checker, pred, order, "by hand", max_words=10)
    assert flip.found and flip.words == [up]           # 4 deleted, 3 put back
    assert checker.passes["verify"] == verify_passes
    assert flip.counterfactual.label_id == NEUTRAL


def test_no_flip_within_k_words_is_said(trig):
    text = f"{UP} phone, truly {UP} battery"            # both must go
    pred = trig.predict(text)
    order = W.ranking(trig, pred, "occlusion")
    short = W.minimal_deletion(W.Checker(trig), pred, order, "occlusion", max_words=1)
    assert not short.found and short.counterfactual is None
    assert short.sentence(pred).startswith("No flip within 1 words")
    full = W.minimal_deletion(W.Checker(trig), pred, order, "occlusion", max_words=10)
    assert full.found and sorted(pred.words[i] for i in full.words) == [UP, UP]
    assert full.sentence(pred).startswith("Deleting these 2 words turns 4 stars into 3 stars")


def test_punctuation_is_never_deleted_and_one_word_always_stays(trig):
    pred = trig.predict(f"{UP}!!")
    flip = W.minimal_deletion(W.Checker(trig), pred, range(len(pred.words)), "by hand")
    assert not flip.found and flip.candidates == 0      # only "!" besides the one word


def test_a_flip_that_fp32_does_not_confirm_is_searched_again_exactly(trig):
    """A search pass that claims a flip which the exact pass denies is never shown."""
    class Lying(W.Checker):
        def search(self, texts):
            probs = super().search(texts)
            if self.search_precision == "bf16":       # every candidate "flips"
                probs = np.tile(np.eye(probs.shape[1])[0], (len(texts), 1))
            return probs
    pred = trig.predict(WITH_UP)
    liar = Lying(trig, search="bf16")
    flip = W.minimal_deletion(liar, pred, W.ranking(trig, pred, "occlusion"), "occlusion")
    assert flip.found and flip.words == [word_index(pred, UP)]
    assert flip.counterfactual.label_id == NEUTRAL      # the exact search's answer


def test_one_pass_at_a_time_finds_the_same(trig):
    pred = trig.predict(WITH_UP)
    a = W.counterfactuals(trig, pred, checker=W.Checker(trig, search="fp32"))
    b = W.counterfactuals(trig, pred, checker=W.Checker(trig, one_at_a_time=True))
    assert [cf.text for cf in a.all()] == [cf.text for cf in b.all()]
    for x, y in zip(a.all(), b.all()):
        np.testing.assert_allclose(x.probs, y.probs, atol=1e-5)


# ------------------------------------------------------------------ 2. sentences
def test_sentence_occlusion_drops_each_sentence(trig):
    pred = trig.predict(WITH_UP)
    occ = W.sentence_occlusion(W.Checker(trig), pred)
    assert occ.sentences == ["The phone is fine.",
                             "The screen is excellent, and the battery lasts a day."]
    d = occ.deltas
    assert d.shape == (2, 5)
    assert d[1, UP_CLASS] < -0.8 and occ.drops[1].flipped and not occ.drops[0].flipped
    assert np.abs(d[0]).max() < 1e-4
    for drop in occ.drops:
        np.testing.assert_allclose(drop.probs, trig.predict(drop.text).probs, atol=1e-5)
    one = W.sentence_occlusion(W.Checker(trig), trig.predict("Just one sentence here"))
    assert one.drops == []


def test_sentence_spans_and_edits():
    text = "Great phone!! Battery died... after 2.5 days :) \nWould not buy."
    spans = W.sentence_spans(text)
    assert [text[s:e] for s, e in spans] == ["Great phone!!", "Battery died...",
                                             "after 2.5 days :)", "Would not buy."]
    assert W.apply_edits("don't stop", [(3, 4, "")]) == "don t stop"
    assert W.apply_edits("good, phone", [(4, 5, "")]) == "good phone"
    assert W.apply_edits("a good phone", [(2, 6, "bad")]) == "a bad phone"
    with pytest.raises(ValueError):
        W.apply_edits("abc", [(0, 2, ""), (1, 3, "")])


def test_deleting_words_reads_back_as_the_same_pieces(tiny):
    """Deleting a word from the text gives the review's wordpieces without that word's."""
    text = "Don't buy: the battery's \"great\" life lasted 2.5 days!"
    pred = tiny.predict(text)
    ids = E.token_ids(tiny, pred)
    for w in range(len(pred.words)):
        got = tiny.encode_rows([W.delete_words(pred, [w])])[0]
        assert got == [t for t, wid in zip(ids, pred.word_ids) if wid != w], pred.words[w]


# ------------------------------------------------------------------ 3. HotFlip
def test_hotflip_best_swap_is_the_trigger_and_really_moves_the_rating(trig):
    pred = trig.predict(NEUTRAL_TEXT)
    hf = W.hotflip(W.Checker(trig), pred)
    assert set(hf.by_class) == {DOWN_CLASS, UP_CLASS}
    up, down = hf.by_class[UP_CLASS][0], hf.by_class[DOWN_CLASS][0]
    assert up.what.endswith(f"→ {UP}") and up.label_id == UP_CLASS and up.flipped
    assert down.what.endswith(f"→ {DOWN}") and down.label_id == DOWN_CLASS
    assert up.estimate > 0
    for cf in hf.by_class[UP_CLASS] + hf.by_class[DOWN_CLASS]:
        p = trig.predict(cf.text)
        np.testing.assert_allclose(cf.probs, p.probs, atol=1e-5)
        assert len(p.words) == len(pred.words)          # one word for one word
    assert len(hf.by_class[UP_CLASS]) == W.HOTFLIP_SHOW
    assert hf.positions == len(pred.words) and hf.tried > 0


def test_hotflip_never_swaps_specials_continuations_or_multi_piece_words(tiny):
    pred = tiny.predict("Unbelievably bad phone, the battery died")
    positions = W.single_piece_positions(pred)
    assert all(pred.word_ids[i] is not None for i in positions)
    assert all(not pred.tokens[i].startswith("##") for i in positions)
    multi = {w for w in pred.word_ids if w is not None and pred.word_ids.count(w) > 1}
    assert multi and not {pred.word_ids[i] for i in positions} & multi
    vocab, tokens = W._replacement_vocab(tiny.tokenizer)
    for special in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]", "[unused3]", "##ing"):
        assert not vocab[tiny.tokenizer.convert_tokens_to_ids(special)], special
    hf = W.hotflip(W.Checker(tiny), pred)
    for swaps in hf.by_class.values():
        for cf in swaps:
            new = cf.edits[0][2]
            assert not new.startswith("##") and not new.startswith("[")
            np.testing.assert_allclose(cf.probs, tiny.predict(cf.text).probs, atol=1e-5)


# ------------------------------------------------------------------ all three
def test_every_counterfactual_carries_its_own_verified_pass(trig):
    pred = trig.predict(WITH_UP)
    found = W.counterfactuals(trig, pred)
    kinds = {cf.kind for cf in found.all()}
    assert kinds == {"deletion", "sentence", "hotflip"}
    for cf in found.all():
        p = trig.predict(cf.text)
        np.testing.assert_allclose(cf.probs, p.probs, atol=1e-5)
        assert cf.label_id == p.label_id and cf.precision == "fp32"
        assert W.apply_edits(pred.text, cf.edits) == cf.text
    js = found.to_json(pred)
    assert js["label_id"] == UP_CLASS and len(js["counterfactuals"]) == len(found.all())
    assert all(set(c) >= {"kind", "text", "label", "stars", "probabilities"}
               for c in js["counterfactuals"])
    assert js["deletion"]["words"] == [UP]


# ------------------------------------------------------------------ LIME and occlusion
def test_lime_and_occlusion_rank_the_trigger_first_one_score_per_word(trig):
    pred = trig.predict(WITH_UP)
    up = word_index(pred, UP)
    for method in (E.Occlusion(), E.Lime(n_samples=120)):
        r = method.run(trig, pred)
        assert r.scores.shape == (len(pred.words),) and r.token_scores.shape == (pred.n_tokens,)
        assert r.top_words(1) == [up], method.name
        assert r.signed and np.isfinite(r.scores).all()
        np.testing.assert_allclose(E.word_sum(r.token_scores, pred.word_ids, len(pred.words)),
                                   r.scores, atol=1e-6)
    occ = E.Occlusion().run(trig, pred)
    without = trig.predict(W.delete_words(pred, [up])).probs[UP_CLASS]
    assert occ.scores[up] == pytest.approx(pred.probs[UP_CLASS] - without, abs=1e-5)
    lime = E.Lime(n_samples=120, seed=3)
    np.testing.assert_array_equal(lime.run(trig, pred).scores, lime.run(trig, pred).scores)
    assert "120 samples" in lime.run(trig, pred).detail and "σ = 0.25" in lime.run(trig, pred).detail


def test_lime_and_occlusion_pass_through_the_faithfulness_measure(trig):
    pred = trig.predict(WITH_UP)
    settings = FA.Settings(methods=("lime", "occlusion"), random_draws=3, lime_samples=100)
    rec = FA.review_record(trig, WITH_UP, 0, settings.build_methods(), settings)
    drop = pred.probs[UP_CLASS] - trig.predict(W.delete_words(pred, [word_index(pred, UP)])).probs[UP_CLASS]
    for m in ("lime", "occlusion"):
        assert rec["comprehensiveness"][m][0] == pytest.approx(drop, abs=1e-4)   # top 5 %: the word
        assert rec["sufficiency"][m][0] < 0.05                                     # it alone suffices
    assert rec["comprehensiveness"]["random"][0] < drop / 2


# ------------------------------------------------------------------ batched forward
def test_batch_logits_equal_one_pass_each_padded_or_not(tiny):
    texts = ["ok", "The battery died after two days, poor quality!", "Great phone. " * 30]
    rows = tiny.encode_rows(texts)
    assert rows == [E.token_ids(tiny, tiny.predict(t)) for t in texts]
    one = np.stack([tiny.forward(r)[0] for r in rows])
    for budget in (1, 64, 4096):                         # alone, a few, all padded together
        np.testing.assert_allclose(tiny.batch_logits(rows, tokens_per_batch=budget), one,
                                   rtol=1e-4, atol=1e-5)
    from reviewbert.model.inference import Predictor
    eager = Predictor(tiny.model, tiny.tokenizer, tiny.scheme, fast=False)
    np.testing.assert_allclose(eager.batch_logits(rows), one, rtol=1e-4, atol=1e-5)
    assert tiny.batch_logits([]).shape == (0, 5)
    np.testing.assert_allclose(tiny.batch_logits(rows, "bf16"), one, atol=0.1)


def test_batch_logits_report_each_batch_s_wordpieces_as_it_is_done(tiny):
    rows = tiny.encode_rows(["ok", "The battery died after two days, poor quality!",
                             "Great phone. " * 30])
    for budget, batches in ((1, 3), (4096, 1)):
        seen = []
        tiny.batch_logits(rows, tokens_per_batch=budget, progress=seen.append)
        assert sum(seen) == sum(map(len, rows)) and len(seen) == batches  # padding not counted
    seen = []
    tiny.batch_logits(rows[:1], progress=seen.append)                     # the one-row path
    assert seen == [len(rows[0])]


# ------------------------------------------------------------------ edit and compare
@pytest.mark.parametrize("method", ["occlusion", "integrated_gradients", "rollout"])
def test_compare_reports_the_wordpieces_its_method_reads(tiny, method):
    before = tiny.predict("The battery died after two days, poor quality!")
    after = tiny.predict("The battery lasts two days, good quality!")
    seen = []
    W.compare(tiny, before, after, method, progress=seen.append)
    assert sum(seen) == W.compare_cost(before, after, method)
    assert (W.compare_cost(before, after, method) > 0) == (method != "rollout")
    assert W.compare_cost(before, after, None) == 0


def test_compare_diff_and_history(trig):
    before = trig.predict(WITH_UP)
    after = trig.predict("The phone is fine. The screen is great, and the battery lasts.")
    cmp = W.compare(trig, before, after, "occlusion")
    assert cmp.delta[UP_CLASS] < -0.8 and cmp.delta.sum() == pytest.approx(0, abs=1e-6)
    ops = {(r["word"], r["op"]) for r in cmp.word_rows()}
    assert {("excellent", "removed"), ("great", "added"), ("a", "removed"), ("day", "removed"),
            ("phone", "kept")} <= ops
    assert (cmp.added, cmp.removed) == (1, 3)
    removed = next(r for r in cmp.word_rows() if r["word"] == "excellent")
    assert removed["after"] is None and removed["change"] == pytest.approx(-removed["before"])
    hist = W.History(before.text, size=2)
    hist.add(cmp)
    hist.add(W.compare(trig, before, trig.predict("fine"), None))
    hist.add(cmp)                                     # the same text again: moved to the top
    assert [e.text for e in hist.edits] == [after.text, "fine"] and len(hist) == 2
    hist.add(W.compare(trig, before, trig.predict("terrible"), None))
    assert [e.text for e in hist.edits] == ["terrible", after.text]
    row = hist.rows(trig.scheme, before.probs)[0]
    assert row["rating"] == "2 stars" and row["Δ p(4 stars)"] < -0.9


def test_diff_html_marks_changes_and_keeps_hostile_text_literal(tiny):
    for name in ("script tag", "carriage returns end an HTML block", "attribute breakout"):
        text = BY_NAME[name].text
        edited = text.replace("PWN", "PWNED ok", 1)
        d = W.text_diff(tiny.tokenizer, text, edited)
        out = WF.diff_html(d.before, d.before_spans, d.after, d.after_spans, d.changes)
        assert set(re.findall(r"</?([a-z]+)", out)) <= {"div", "span", "br"}, name
        assert "\r" not in out and "\n" not in out
        shown = html.unescape(re.sub(r"<[^>]*>", "", out.replace("<br>", "\n")))
        kept = re.sub(r'<span class="rb-removed"[^>]*>.*?</span>', "", out)
        assert html.unescape(re.sub(r"<[^>]*>", "", kept.replace("<br>", "\n"))).strip() \
            == re.sub(r"\r\n?", "\n", edited).strip(), name
        assert "PWNED" in shown and 'class="rb-added"' in out


def test_figures_escape_text_and_have_one_bar_per_thing():
    names = ["1 star", "2 stars", "3 stars", "4 stars", "5 stars"]
    fig = WF.probability_change(names, [0.1, 0.1, 0.2, 0.5, 0.1], [0.1, 0.1, 0.6, 0.1, 0.1])
    assert [len(t.x) for t in fig.data] == [5, 5] and fig.data[1].text[2] == "+40.0%"
    sb = WF.sentence_bars(["<b>PWN</b> first", "second"], np.zeros((2, 5)), names)
    assert len(sb.data) == 5 and "<b>" not in sb.data[0].customdata[0]
    assert "&lt;b&gt;PWN&lt;/b&gt;" in sb.data[0].customdata[0]
    rows = [{"word": "<i>x</i>", "op": "added", "before": None, "after": 0.3, "change": 0.3},
            {"word": "y", "op": "kept", "before": 0.2, "after": 0.1, "change": -0.1}]
    wb = WF.word_change_bars(rows, "Occlusion")
    assert list(wb.data[0].x) == [0.3, -0.1] and "<i>" not in wb.layout.yaxis.ticktext[0]
    summary = {g: {"n": 4, "histogram": {1: 2, 2: 1, "none": 1}} for g in ("correct", "wrong")}
    h = WF.brittleness_histogram(summary, 2)
    assert list(h.data[0].x) == ["1", "2", "> 2"] and list(h.data[0].y) == [0.5, 0.25, 0.25]
    assert WF.plotly_text("a " * 100, 10).endswith("…")
