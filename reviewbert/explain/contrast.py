"""Why this star and not the next: Integrated Gradients of one rating's logit minus another's.

Plain IG (``methods.IntegratedGradients``) explains log p(predicted): a word scores high
when it pushes the predicted rating up against *all* others at once. Between two
neighbouring ratings that is rarely the question a reader asks; "why 4 stars and not 5?"
is. Here IG explains the difference of two logits, f(x) = logit[a] − logit[b]: a word
with a positive attribution moves the model toward rating a rather than b, a negative
one toward b. Softmax ignores a shift of all logits, so f is also log p(a) − log p(b).

Everything else is the plain IG of the explain package, reused: its private embedding
module (Captum hooks that, never the shared model), its [PAD] baseline that keeps [CLS]
and [SEP], its Gauss-Legendre steps batched through ``Predictor.embedded_logits``, its
policy of doubling the steps while Captum's convergence delta is above ``DELTA_WARN``
(``IntegratedGradients.run``), and its word sums. Only the function differentiated
changes (:meth:`ContrastiveIG.attribute`).

Completeness, the check the view prints: the attributions add up to
f(x) − f(baseline) up to Captum's convergence delta. f(x) and f(baseline) are measured by
:func:`contrast` in one extra two-row pass of the same differentiable forward, so the
printed numbers are the model's, not derived from the delta.

Results go through the explain package's cache (``reviewbert/explain/cache.py``): keyed by
the weights, the token ids and the method's settings (the pair, the steps and
:data:`VERSION`), kept beside the checkpoint, computed once for the whole server.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from reviewbert.explain import cache as explanation_cache
from reviewbert.explain import methods as explain

VERSION = 1
"""Raise when the arithmetic here changes: cached contrasts then no longer match."""


class ContrastError(ValueError):
    """A pair of ratings that cannot be contrasted (the same one twice, or not a rating)."""


# ------------------------------------------------------------------- the pair
def ranked(pred) -> list[int]:
    """Class ids from the most probable to the least (ties: the lower id first)."""
    return [int(i) for i in np.argsort(-np.asarray(pred.probs, dtype=np.float64), kind="stable")]


def default_pair(pred) -> tuple[int, int]:
    """(the predicted rating, the runner-up): the question a reader of the card asks."""
    order = ranked(pred)
    a = int(pred.label_id)
    return a, next(i for i in order if i != a)


def rating_names(pred) -> list[str]:
    """Each class id's name (``"4 stars"``; ``"negative"`` in a 3-label scheme)."""
    n = len(pred.probs)
    if pred.scheme is not None and len(pred.scheme.names) == n:
        return list(pred.scheme.names)
    return [f"class {i}" for i in range(n)]


def check_pair(pred, a, b) -> tuple[int, int]:
    """(a, b) as class ids of ``pred``'s model; :class:`ContrastError` (one line) if not two
    distinct ones."""
    names, n = rating_names(pred), len(pred.probs)
    for x in (a, b):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or not 0 <= int(x) < n:
            raise ContrastError(f"rating {x!r} is not a class of this model (0 to {n - 1}: "
                                f"{', '.join(names)})")
    if int(a) == int(b):
        raise ContrastError(f"choose two different ratings to contrast (both are {names[int(a)]})")
    return int(a), int(b)


# ------------------------------------------------------------------- the method
def _difference_fn(predictor, emb, a: int, b: int, progress=None):
    """ids [B, T] → logit[a] − logit[b] [B], through the same differentiable forward as
    plain IG (``Predictor.embedded_logits``); ``progress(n)`` with each batch's wordpieces."""
    def forward(ids: torch.Tensor) -> torch.Tensor:
        logits = predictor.embedded_logits(emb(ids)).float()
        if progress is not None:
            progress(int(ids.numel()))
        return logits[:, a] - logits[:, b]
    return forward


def _setup(predictor, pred):
    """(the private embedding module, ids [1, T], the [PAD] baseline [1, T]), as plain IG's."""
    emb = explain._WordEmbedding(predictor.model.get_input_embeddings().weight)
    ids = torch.tensor([explain.token_ids(predictor, pred)], dtype=torch.long, device=emb.table.device)
    pad = predictor.tokenizer.pad_token_id
    return emb, ids, explain.pad_baseline(ids, pred.word_ids, 0 if pad is None else pad)


class ContrastiveIG(explain.IntegratedGradients):
    """IG of logit[a] − logit[b]: plain IG's steps, batching, doubling policy and word sums."""
    name, label, signed, gradient = "contrastive_ig", "Contrastive Integrated Gradients", True, True

    def __init__(self, a: int, b: int, n_steps: int = explain.IG_STEPS,
                 tokens_per_batch: int = explain.IG_TOKENS_PER_BATCH,
                 max_steps: int | None = explain.IG_MAX_STEPS):
        super().__init__(n_steps, tokens_per_batch, max_steps)
        # plain attributes: the cache's key reads them (cache.method_fields)
        self.a, self.b, self.version = int(a), int(b), VERSION

    def attribute(self, predictor, pred, n_steps: int,
                  progress=None) -> tuple[np.ndarray, float, float]:
        """(per-token attributions [T], Captum's delta, f(x) − f(baseline)) at ``n_steps``."""
        from captum.attr import LayerIntegratedGradients
        emb, ids, base = _setup(predictor, pred)
        fn = _difference_fn(predictor, emb, self.a, self.b, progress)
        with torch.inference_mode(False), torch.enable_grad():
            attr, delta = LayerIntegratedGradients(fn, emb).attribute(
                ids, baselines=base, n_steps=n_steps, method="gausslegendre",
                internal_batch_size=self.batch_size(ids.shape[1], n_steps),
                return_convergence_delta=True)
        tok = attr[0].sum(-1).detach().double().cpu().numpy()
        delta = float(delta.reshape(-1)[0])
        return tok, delta, float(tok.sum()) - delta

    def run(self, predictor, pred, progress=None) -> explain.TokenScores:
        """Plain IG's run (its doubling policy) on the difference; ``target`` is rating a."""
        check_pair(pred, self.a, self.b)
        r = super().run(predictor, pred, progress)
        names = rating_names(pred)
        tried = [self.n_steps * 2 ** i for i in range(int(np.log2(r.n_steps / self.n_steps)))]
        again = f" (delta above {explain.DELTA_WARN:.0%} at {', '.join(map(str, tried))})" \
            if tried else ""
        return replace(r, target=self.a, detail=f"{r.n_steps} steps{again}, [PAD] baseline, "
                       f"logit[{names[self.a]}] − logit[{names[self.b]}]")


# ------------------------------------------------------------------- the result
@dataclass
class Contrast:
    """Why rating ``a`` and not rating ``b``: IG of logit[a] − logit[b] on one review."""
    a: int
    b: int
    a_name: str
    b_name: str
    scores: np.ndarray          # float32 [n_words]: > 0 toward a, < 0 toward b
    token_scores: np.ndarray    # float32 [n_tokens], specials included (0: the baseline keeps them)
    logit_diff: float           # logit[a] − logit[b] at the review
    baseline_diff: float        # logit[a] − logit[b] at the [PAD] baseline
    delta: float                # Captum's convergence delta: Σ attributions − (f(x) − f(baseline))
    n_steps: int
    detail: str
    seconds: float = 0.0
    from_cache: bool = False
    cache_error: str | None = None

    @property
    def total(self) -> float:
        """Σ attributions (wordpieces, specials included)."""
        return float(np.asarray(self.token_scores, dtype=np.float64).sum())

    @property
    def relative_delta(self) -> float:
        """|delta| / |f(x) − f(baseline)|, as plain IG reports it."""
        return abs(self.delta) / max(abs(self.logit_diff - self.baseline_diff), 1e-6)

    @property
    def delta_too_large(self) -> bool:
        return self.relative_delta > explain.DELTA_WARN


@torch.no_grad()
def endpoints(predictor, pred, a: int, b: int) -> tuple[float, float]:
    """(logit[a] − logit[b] at the review, at its [PAD] baseline): one pass of two rows."""
    emb, ids, base = _setup(predictor, pred)
    with torch.inference_mode(False):
        out = _difference_fn(predictor, emb, a, b)(torch.cat([ids, base]))
    return float(out[0]), float(out[1])


def method(pred, a: int | None = None, b: int | None = None,
           n_steps: int = explain.IG_STEPS) -> ContrastiveIG:
    """The method for the pair (default: predicted vs runner-up), checked against ``pred``."""
    da, db = default_pair(pred)
    a, b = check_pair(pred, da if a is None else a, db if b is None else b)
    return ContrastiveIG(a, b, n_steps)


def contrast(predictor, pred, a: int | None = None, b: int | None = None,
             n_steps: int = explain.IG_STEPS, progress=None, on_wait=None) -> Contrast:
    """Why ``a`` and not ``b`` (default: the predicted rating and the runner-up) on ``pred``:
    read from the explain cache, or computed (``progress(n)`` per batch of wordpieces,
    ``progress.grow`` when the steps double) and stored there."""
    m = method(pred, a, b, n_steps)
    out = explanation_cache.scores(predictor, pred, m, progress=progress, on_wait=on_wait)
    r = out.results[0]
    fx, fb = endpoints(predictor, pred, m.a, m.b)
    names = rating_names(pred)
    return Contrast(a=m.a, b=m.b, a_name=names[m.a], b_name=names[m.b],
                    scores=np.asarray(r.scores, dtype=np.float32),
                    token_scores=np.asarray(r.token_scores, dtype=np.float32),
                    logit_diff=fx, baseline_diff=fb, delta=float(r.delta), n_steps=int(r.n_steps),
                    detail=r.detail, seconds=r.seconds,
                    from_cache=out.from_cache, cache_error=out.cache_error)


def completeness_text(c: Contrast) -> str:
    """The completeness check in one line (plain text, the rating names as given)."""
    return (f"the attributions sum to {c.total:+.3f}; logit[{c.a_name}] − logit[{c.b_name}] is "
            f"{c.logit_diff:+.3f} on the review and {c.baseline_diff:+.3f} on the [PAD] baseline, "
            f"a change of {c.logit_diff - c.baseline_diff:+.3f}; Captum's convergence delta "
            f"{c.delta:+.2g} ({c.relative_delta:.1%} of it, {c.n_steps} steps)")
