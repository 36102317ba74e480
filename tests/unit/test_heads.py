"""Head masking, Michel et al.'s importance, the masking check, pruning curves, the head
atlas and the JS divergence, on the tiny random BERT (2 layers x 4 heads) and on
hand-made attention matrices whose roles are known."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from reviewbert.data.examples import Review
from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import importance as heads
from reviewbert.heads import roles as head_roles
from reviewbert.model.checkpoint import load_checkpoint

from heads_support import TEXTS, lively


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model, tok, info = load_checkpoint(tiny_model_dir, torch.device("cpu"), attn_implementation="eager")
    return lively(model), tok, info


def batch_of(tok, texts=TEXTS):
    from reviewbert.model.batch_predict import encode_texts
    ids = encode_texts(tok, list(texts), 64)
    (b,) = heads.make_batches(ids, tok.pad_token_id, tokens_per_batch=10_000)
    return b


def by_hand(model, zero: dict[int, list[int]]):
    """A deep copy whose output projections ignore the given heads' slices (columns zeroed):
    the same as zeroing that slice of the projection's input."""
    m = copy.deepcopy(model)
    d = m.config.hidden_size // m.config.num_attention_heads
    with torch.no_grad():
        for li, hs in zero.items():
            for h in hs:
                m.bert.encoder.layer[li].attention.output.dense.weight[:, h * d:(h + 1) * d] = 0
    return m


# ------------------------------------------------------------------ masking
def test_the_hook_mask_is_zeroing_the_heads_slice_by_hand(tiny):
    model, tok, _ = tiny
    b = batch_of(tok)
    mm = heads.MaskedModel(model)
    xi = torch.ones(2, 4)
    xi[0, 1] = xi[1, 3] = 0.0
    with torch.inference_mode(), mm.masked(xi):
        ours = mm.logits(b)
    with torch.inference_mode():
        hand = by_hand(model, {0: [1], 1: [3]})(input_ids=b.ids, attention_mask=b.mask).logits
        full = model(input_ids=b.ids, attention_mask=b.mask).logits
    assert torch.allclose(ours, hand, atol=1e-5)
    assert (ours - full).abs().max() > 0.05                   # the mask does something
    with torch.inference_mode():
        assert torch.allclose(mm.logits(b), full, atol=1e-5)  # and nothing once lifted


def test_one_mask_per_review(tiny):
    model, tok, _ = tiny
    b = batch_of(tok)
    mm = heads.MaskedModel(model)
    xi = torch.ones(len(TEXTS), 2, 4)
    xi[2, 0, 0] = 0.0                                           # review 2 only
    with torch.inference_mode(), mm.masked(xi):
        per_row = mm.logits(b)
    with torch.inference_mode():
        hand = by_hand(model, {0: [0]})(input_ids=b.ids, attention_mask=b.mask).logits
        full = model(input_ids=b.ids, attention_mask=b.mask).logits
    assert torch.allclose(per_row[2], hand[2], atol=1e-5)
    others = [i for i in range(len(TEXTS)) if i != 2]
    assert torch.allclose(per_row[others], full[others], atol=1e-5)


def test_the_shared_model_is_never_changed(tiny):
    model, tok, info = tiny
    before = {k: v.clone() for k, v in model.state_dict().items()}
    revs = [Review(t, s, "t") for t, s in zip(TEXTS, [1, 5, 3, 3, 1])]
    head_analysis.analyze(model, tok, info.path, revs, info.scheme, max_length=64,
                          base_model=None, settings=head_analysis.Settings(random_draws=1),
                          use_cache=False)
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert model.config._attn_implementation == "eager" and not model.training


# ------------------------------------------------------------------ importance
def test_the_gradient_importance_is_a_finite_difference(tiny):
    model, tok, _ = tiny
    m64 = copy.deepcopy(model).double()
    b = batch_of(tok, TEXTS[:3])
    y = torch.tensor([0, 4, 2])
    mm = heads.MaskedModel(m64)
    grad, _ = heads.head_gradients(mm, b, y)                   # [3, 2, 4]

    def loss(i, xi):
        with torch.inference_mode(), mm.masked(xi):
            one = heads.Batch(b.ids[i:i + 1], b.mask[i:i + 1], b.rows[i:i + 1])
            return float(torch.nn.functional.cross_entropy(mm.logits(one), y[i:i + 1]))
    eps = 1e-4
    for i in range(3):
        for li in range(2):
            for h in range(4):
                up, down = torch.ones(2, 4, dtype=torch.float64), torch.ones(2, 4, dtype=torch.float64)
                up[li, h] += eps
                down[li, h] -= eps
                fd = (loss(i, up) - loss(i, down)) / (2 * eps)
                assert grad[i, li, h].item() == pytest.approx(fd, rel=1e-5, abs=1e-8)
    # importance sums |per-review gradient|: not |gradient of the summed loss|
    raw = heads.importance(mm, [b], y.numpy())
    assert np.allclose(raw, grad.abs().sum(0).numpy())
    assert not np.allclose(raw, grad.sum(0).abs().numpy())


def test_importance_is_normalised_per_layer_by_its_l2_norm():
    raw = np.array([[3.0, 4.0, 0.0], [1.0, 1.0, 1.0]])
    alive = np.array([[True, True, True], [True, False, True]])
    got = heads.normalise(raw, alive)
    assert np.allclose(got[0], [0.6, 0.8, 0.0])
    assert np.isnan(got[1, 1]) and np.allclose(got[1, [0, 2]], [2 ** -0.5, 2 ** -0.5])
    assert np.allclose(np.nansum(got ** 2, axis=1), 1.0)


# ------------------------------------------------------------------ the check and the curves
def test_masking_drops_equal_masking_each_head_and_scoring_again(tiny):
    """The saved-inputs shortcut (layer l masked from its saved input on, heads side by
    side) gives exactly what the naive loop gives: mask one head, re-score everything."""
    model, tok, _ = tiny
    from reviewbert.model.batch_predict import encode_texts
    ids = encode_texts(tok, TEXTS * 3, 64)
    batches = heads.make_batches(ids, tok.pad_token_id, tokens_per_batch=60)
    assert len(batches) > 2
    labels = np.array([0, 4, 2, 2, 0] * 3)
    mm = heads.MaskedModel(model)
    got = heads.masking_drops(mm, batches, labels, "fp32")
    base = heads.evaluate(mm, batches, len(ids), None, "fp32")
    yhat = base.argmax(1)
    assert got.base_accuracy == pytest.approx((yhat == labels).mean())
    for li in range(2):
        for h in range(4):
            p = heads.evaluate(mm, batches, len(ids), heads.mask_of([(li, h)], (2, 4)), "fp32")
            assert got.accuracy_drop[li, h] == pytest.approx(
                (yhat == labels).mean() - (p.argmax(1) == labels).mean(), abs=1e-9)
            assert got.probability_drop[li, h] == pytest.approx(
                base.max(1).mean() - p[np.arange(len(ids)), yhat].mean(), abs=1e-5)


def test_pruning_orders_and_points():
    scores = np.array([[0.9, 0.1, 0.5], [0.3, 0.7, np.nan]])
    alive = np.array([[True, True, True], [True, True, False]])
    order = heads.ranked(scores, alive)
    assert order == [(0, 1), (1, 0), (0, 2), (1, 1), (0, 0)]
    o = heads.pruning_orders(order, draws=3, seed=0)
    assert o["most"] == order[::-1]
    assert all(sorted(r) == sorted(order) for r in o["random"])
    assert o == heads.pruning_orders(order, draws=3, seed=0)    # seeded
    xi = heads.mask_of(order[:2], (2, 3))
    assert xi.tolist() == [[1.0, 0.0, 1.0], [0.0, 1.0, 1.0]]


def test_curves_mask_the_right_number_of_heads(tiny):
    model, tok, _ = tiny
    from reviewbert.model.batch_predict import encode_texts
    ids = encode_texts(tok, TEXTS * 4, 64)
    labels = np.array([0, 4, 2, 3, 1] * 4)
    mm = heads.MaskedModel(model)
    curves = heads.pruning_curves(mm, heads.make_batches(ids, 0), labels,
                                  np.arange(8.0).reshape(2, 4), 5, "fp32", fractions=(0.25, 0.5),
                                  draws=2)
    assert [p["heads_masked"] for p in curves["least"]] == [0, 2, 4]
    assert curves["least"][0] == curves["most"][0] == curves["random"][0]
    r = curves["random"][1]
    assert r["accuracy_min"] <= r["accuracy"] <= r["accuracy_max"]
    # least important first = heads 0 and 1 of layer 1 (scores 0, 1): check by hand
    probs = heads.evaluate(mm, heads.make_batches(ids, 0), len(ids),
                           heads.mask_of([(0, 0), (0, 1)], (2, 4)), "fp32")
    assert curves["least"][1]["accuracy"] == pytest.approx((probs.argmax(1) == labels).mean())


def test_removable_reads_the_least_important_curve():
    def res(accs):
        curve = [{"fraction": i / 10, "heads_masked": round(i * 7.2), "accuracy": a}
                 for i, a in enumerate(accs)]
        r = head_analysis.HeadsResult.__new__(head_analysis.HeadsResult)
        r.pruning, r.n, r.alive = {"least": curve}, 300, np.ones((6, 12), dtype=bool)
        return r
    assert head_analysis.removable(res([0.56, 0.56, 0.555, 0.551, 0.54, 0.56])) == (0.3, 22)
    assert head_analysis.removable(res([0.56, 0.549, 0.56])) == (0.0, 0)
    assert "30% of the heads (22 of 72) can be removed for less than 1 point" in \
        head_analysis.removable_sentence(res([0.56, 0.56, 0.555, 0.551, 0.54]))
    assert "costs a point of accuracy or more" in head_analysis.removable_sentence(res([0.56, 0.5]))


# ------------------------------------------------------------------ atlas on hand-made matrices
TOKENS = ("[CLS] the battery lasts two full days and charges fast . "
          "the case feels cheap and the buttons stick ! [SEP]").split()
N = len(TOKENS)                  # 21: [CLS], sentence 1-10 ("."), sentence 11-19 ("!"), [SEP]
S1, S2 = list(range(1, 11)), list(range(11, 20))


def test_vertical_head_on_cls():
    a = np.zeros((N, N))
    a[:, 0] = 1.0
    s = head_roles.single(a, TOKENS)
    assert s["cls"] == pytest.approx(1.0) and s["sep"] == 0 and s["punct"] == 0
    assert s["entropy"] == pytest.approx(0.0)
    # [CLS] is no word: row 1 looking at it is not "previous token", [CLS]'s row not "self"
    assert s["prev"] == s["self"] == s["next"] == 0
    assert head_roles.role(s) == "vertical"


def test_vertical_head_on_sep_and_punctuation():
    a = np.zeros((N, N))
    a[:, N - 1] = 0.5
    a[:, 10] = a[:, 19] = 0.25
    s = head_roles.single(a, TOKENS)
    assert s["sep"] == pytest.approx(0.5) and s["punct"] == pytest.approx(0.5)
    assert s["entropy"] == pytest.approx(-(0.5 * np.log(0.5) + 0.5 * np.log(0.25)))
    assert head_roles.role(s) == "vertical"


def test_previous_token_head_is_diagonal():
    a = np.zeros((N, N))
    a[0, 0] = 1.0
    for i in range(1, N):
        a[i, i - 1] = 1.0
    s = head_roles.single(a, TOKENS)
    assert s["prev"] == pytest.approx(1.0)      # every row whose previous token is a word
    assert s["next"] == 0 and s["self"] == 0
    assert s["cls"] == pytest.approx(2 / N) and s["punct"] == pytest.approx(2 / N)
    assert head_roles.role(s) == "diagonal"


def test_next_and_self():
    nxt = np.eye(N, k=1)
    nxt[-1, -1] = 1.0
    s = head_roles.single(nxt, TOKENS)
    assert s["next"] == pytest.approx(1.0) and s["prev"] == 0
    assert head_roles.role(s) == "diagonal"
    s = head_roles.single(np.eye(N), TOKENS)
    assert s["self"] == pytest.approx(1.0) and s["prev"] == s["next"] == 0
    assert head_roles.role(s) == "diagonal"


def test_block_head_stays_in_its_sentence():
    a = np.zeros((N, N))
    a[0, 0] = a[N - 1, N - 1] = 1.0
    for sent in (S1, S2):
        for i in sent:
            a[i, sent] = 1 / len(sent)
    s = head_roles.single(a, TOKENS)
    # a word row puts all its mass in its sentence; spread evenly it would put 10/21 or 9/21
    want = (10 * (1 - 10 / N) + 9 * (1 - 9 / N)) / 19
    assert s["sentence"] == pytest.approx(want)
    assert head_roles.role(s) == "block"


def test_uniform_head_is_heterogeneous():
    s = head_roles.single(np.full((N, N), 1 / N), TOKENS)
    assert s["entropy"] == pytest.approx(np.log(N))
    assert s["cls"] == pytest.approx(1 / N) and s["punct"] == pytest.approx(2 / N)
    assert s["sentence"] == pytest.approx(0.0, abs=1e-12)
    assert head_roles.role(s) == "heterogeneous"


def test_vertical_plus_diagonal():
    a = np.zeros((N, N))
    for i in range(N):
        a[i, 0] += 0.5
        a[i, i] += 0.5
    s = head_roles.single(a, TOKENS)
    assert s["self"] == pytest.approx(0.5) and s["cls"] == pytest.approx(((N - 1) * 0.5 + 1) / N)
    assert head_roles.role(s) == "vertical + diagonal"


def test_padding_is_ignored():
    """Two reviews in one padded batch: the short one's padded rows and keys count for nothing."""
    kinds = head_roles.TokenKinds.of(torch.tensor([[1, 5, 2, 0], [1, 5, 6, 2]]),
                                     torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), 2,
                                     torch.zeros(10, dtype=torch.bool), torch.zeros(10, dtype=torch.bool))
    a = torch.zeros(2, 1, 4, 4)
    a[0, 0, :3, 0] = 1.0
    a[0, 0, 3, 3] = 1.0                 # garbage in the padded row
    a[1, 0, :, 0] = 1.0
    atlas = head_roles.Atlas(1, 1)
    atlas.add(0, a, kinds)
    assert atlas.means()["cls"][0, 0] == pytest.approx(1.0)
    assert atlas.counts["cls"][0] == 7


def test_js_divergence_matches_scipy():
    from scipy.spatial.distance import jensenshannon
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.ones(9), size=(2, 3, 9))
    q = rng.dirichlet(np.ones(9), size=(2, 3, 9))
    ours = head_roles.js_rows(torch.as_tensor(p), torch.as_tensor(q)).numpy()
    assert np.allclose(ours, jensenshannon(p, q, axis=-1, base=2) ** 2, atol=1e-12)
    eye = torch.eye(4)
    assert torch.allclose(head_roles.js_rows(eye, eye), torch.zeros(4, dtype=torch.float64))
    assert torch.allclose(head_roles.js_rows(eye, eye.roll(1, 0)), torch.ones(4, dtype=torch.float64))


def test_attention_probs_are_the_eager_models(tiny):
    model, tok, _ = tiny
    b = batch_of(tok)
    mm = heads.MaskedModel(model)
    with torch.inference_mode():
        out = model(input_ids=b.ids, attention_mask=b.mask, output_attentions=True)
        h = mm.embed(b.ids)
        ext = mm.attention_mask(h, b.mask)
        for li in range(2):
            ours = mm.attention_probs(li, h, b.mask)
            valid = b.mask.bool()
            for r in range(len(TEXTS)):
                n = int(valid[r].sum())
                assert torch.allclose(ours[r, :, :n, :n], out.attentions[li][r, :, :n, :n], atol=1e-5)
            h = mm.layer_modules[li](h, attention_mask=ext)


# ------------------------------------------------------------------ the analysis and its cache
def test_analysis_caches_each_stage_and_resumes(tiny, tmp_path):
    import shutil

    from reviewbert.heads import cache as heads_cache
    model, tok, info = tiny
    ck = tmp_path / "ck"
    shutil.copytree(info.path, ck)
    revs = [Review(t, s, "t") for t, s in zip(TEXTS * 2, [1, 5, 3, 3, 1, 2, 4, 5, 1, 3])]
    s = head_analysis.Settings(fractions=(0.5,), random_draws=2, precision="fp32")
    stages = []
    first = head_analysis.analyze(model, tok, ck, revs, info.scheme, max_length=64,
                                  base_model=None, settings=s, on_stage=stages.append)
    assert len(stages) == 4 and not first.from_cache
    (folder,) = (ck / ".analysis" / heads_cache.SUBFOLDER).iterdir()
    assert {p.name for p in folder.iterdir()} == {"meta.json", "result.json", "importance.json",
                                                   "masking.json", "pruning.json", "attention.json"}
    again = head_analysis.analyze(model, tok, ck, revs, info.scheme, max_length=64,
                                  base_model=None, settings=s)
    assert again.from_cache and again.to_json()["importance"] == first.to_json()["importance"]
    # an interrupted run: the finished stages are read, the rest computed
    (folder / "result.json").unlink()
    (folder / "attention.json").unlink()
    stages.clear()
    third = head_analysis.analyze(model, tok, ck, revs, info.scheme, max_length=64,
                                  base_model=None, settings=s, on_stage=stages.append)
    assert len(stages) == 1 and "atlas" in stages[0]
    assert third.to_json()["pruning"] == first.to_json()["pruning"]
    # other reviews, other settings: another key
    other = head_analysis.analyze(model, tok, ck, revs[:5], info.scheme, max_length=64,
                                  base_model=None, settings=s)
    assert not other.from_cache and other.n == 5


def test_result_json_has_the_issues_keys(tiny):
    model, tok, info = tiny
    revs = [Review(t, s, "t") for t, s in zip(TEXTS, [1, 5, 3, 3, 1])]
    res = head_analysis.analyze(model, tok, info.path, revs, info.scheme, max_length=64,
                                base_model=None, use_cache=False,
                                settings=head_analysis.Settings(fractions=(0.5,), random_draws=1))
    j = res.to_json()
    for key in ("importance", "masking_drop", "spearman", "pruning", "atlas", "finetune_js",
                "n", "seconds"):
        assert key in j
    assert np.array(j["importance"]).shape == (2, 4) and np.array(j["masking_drop"]).shape == (2, 4)
    assert set(j["pruning"]) == {"least", "random", "most"}
    assert set(j["pruning"]["least"][1]) >= {"fraction", "accuracy", "relaxed_accuracy", "auc"}
    assert j["finetune_js"] is None and "names no base model" in j["finetune_note"]
    assert set(j["atlas"]) >= set(head_roles.STATS) | {"role"}
    back = head_analysis.HeadsResult.from_json(j)
    assert back.to_json()["importance"] == j["importance"] and back.roles == res.roles


def test_finetune_js_against_a_base_model(tiny, tmp_path):
    """The model against itself as its own base: zero divergence everywhere."""
    model, tok, info = tiny
    model.save_pretrained(tmp_path / "base", safe_serialization=True)
    revs = [Review(t, s, "t") for t, s in zip(TEXTS, [1, 5, 3, 3, 1])]
    res = head_analysis.analyze(model, tok, info.path, revs, info.scheme, max_length=64,
                                base_model=str(tmp_path / "base"), use_cache=False,
                                settings=head_analysis.Settings(fractions=(0.5,), random_draws=1))
    assert res.finetune_js is not None and np.allclose(res.finetune_js, 0.0, atol=1e-9)
    assert "layer" in head_analysis.finetune_sentence(res)


def test_sample_reviews_is_seeded_and_keeps_order():
    revs = list(range(100))
    a = head_analysis.sample_reviews(revs, 10, seed=3)
    assert a == sorted(a) and len(set(a)) == 10 and a == head_analysis.sample_reviews(revs, 10, 3)
    assert head_analysis.sample_reviews(revs, 1000) == revs
