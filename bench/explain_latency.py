"""Explanation latency on CPU: every method on one 256-token review, and our IG against
Captum's IG with default settings run unbatched, in the same process.

- each method of reviewbert/explain/methods.py, timed as the page runs it (``Method.run``),
  after one warm-up; median of --repeats. IG as on the page: 16 steps, doubled while
  the delta is above 5 % (its final step count is reported);
- "all methods": the sum of the medians (target: <= 3 s at 256 tokens on this CPU);
- ``captum_default_unbatched``: ``LayerIntegratedGradients.attribute`` with Captum's
  defaults (n_steps=50, Gauss-Legendre) and ``internal_batch_size=1``: one
  interpolation step per forward + backward pass. Same model, forward function
  (log p of the predicted class), layer and [PAD] baseline as ours;
- equal convergence delta: our IG (steps batched, fixed step count) at the
  smallest step count in the ladder whose |delta| is no larger than the default's,
  timed the same way (target: >= 2x faster than the unbatched default). Also the
  smallest count whose delta is within the page's 5 % warning line, for reference.

Model: a ReviewBERT checkpoint (default: the shipped demo), read with max_length =
--tokens (the demo was trained at 128; its position table has 512).

Usage: ``OMP_NUM_THREADS=2 python bench/explain_latency.py [--checkpoint DIR]
[--tokens 256] [--repeats 3]``. The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.data.examples import builtin_examples  # noqa: E402
from reviewbert.explain import methods as E  # noqa: E402
from reviewbert.model.inference import Predictor

LADDER = (8, 12, 16, 20, 24, 32, 40, 50)


def review_of(tokenizer, n_tokens: int) -> str:
    """Real-looking text (the built-in reviews, one after another) of at least n_tokens."""
    text = " ".join(r.text for r in builtin_examples())
    assert len(tokenizer(text)["input_ids"]) > n_tokens
    return text


def predictor_at(checkpoint: str, n_tokens: int) -> Predictor:
    """The checkpoint's Predictor, reading up to ``n_tokens`` (transformers' log quiet)."""
    import transformers
    transformers.logging.set_verbosity_error()
    base = Predictor.from_checkpoint(checkpoint, torch.device("cpu"))
    return Predictor(base.model, base.tokenizer, base.scheme, max_length=n_tokens)


def timed(fn, repeats: int):
    out, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out), out, result


def captum_default_unbatched(predictor, pred):
    """Captum's IG with its default n_steps and method, one step per pass."""
    from captum.attr import LayerIntegratedGradients
    _, emb, ids = E._gradient_setup(predictor, pred)
    base = E.pad_baseline(ids, pred.word_ids, predictor.tokenizer.pad_token_id)
    # the checkpoint's own eager transformers model, as a practitioner would call it
    fn = E._log_prob_fn(lambda x: predictor.model(inputs_embeds=x).logits, emb)
    with torch.enable_grad():
        attr, delta = LayerIntegratedGradients(fn, emb).attribute(
            ids, baselines=base, target=int(pred.label_id), internal_batch_size=1,
            return_convergence_delta=True)
    tok = attr[0].sum(-1).double()
    return float(delta.reshape(-1)[0]), float(tok.sum()) - float(delta.reshape(-1)[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)

    predictor = predictor_at(args.checkpoint, args.tokens)
    pred = predictor.predict(review_of(predictor.tokenizer, args.tokens))
    assert pred.n_tokens == args.tokens, pred.n_tokens
    print(f"{args.checkpoint}: {pred.n_tokens} tokens, {len(pred.words)} words, "
          f"torch threads {torch.get_num_threads()}", flush=True)

    # warm-up: oneDNN kernels, allocator, Captum imports
    predictor.predict(pred.text)
    for m in E.all_methods(ig_steps=2):
        m.run(predictor, pred)

    methods = {}
    t_pred, _, _ = timed(lambda: predictor.predict(pred.text), args.repeats)
    for m in E.all_methods():
        med, runs, res = timed(lambda: m.run(predictor, pred), args.repeats)
        methods[m.name] = {"median_s": round(med, 4), "runs_s": [round(x, 4) for x in runs]}
        if res.relative_delta is not None:
            methods[m.name] |= {"steps": res.n_steps, "delta": res.delta,
                                "relative_delta": round(res.relative_delta, 5)}
        print(f"  {m.label:24s} {med:7.3f} s", flush=True)
    total = sum(v["median_s"] for v in methods.values())
    print(f"  {'all methods':24s} {total:7.3f} s  (prediction itself {t_pred:.3f} s)", flush=True)

    d_med, d_runs, (d_delta, d_diff) = timed(lambda: captum_default_unbatched(predictor, pred),
                                             args.repeats)
    print(f"  Captum default (50 steps, unbatched) {d_med:.3f} s, |delta| {abs(d_delta):.2e}",
          flush=True)

    ladder = []
    for n in LADDER:
        r = E.IntegratedGradients(n, max_steps=None).run(predictor, pred)
        ladder.append({"steps": n, "seconds": round(r.seconds, 4), "delta": r.delta,
                       "relative_delta": round(r.relative_delta, 6)})
        print(f"  ours, {n:2d} steps: {r.seconds:.3f} s, |delta| {abs(r.delta):.2e} "
              f"({r.relative_delta:.2%})", flush=True)

    def at(n):
        med, runs, r = timed(lambda: E.IntegratedGradients(n, max_steps=None).run(predictor, pred),
                             args.repeats)
        return {"steps": n, "median_s": round(med, 4), "delta": r.delta,
                "relative_delta": round(r.relative_delta, 6),
                "speedup_vs_default_unbatched": round(d_med / med, 3)}

    equal = next((x["steps"] for x in ladder if abs(x["delta"]) <= abs(d_delta)), None)
    within = next((x["steps"] for x in ladder if x["relative_delta"] <= E.DELTA_WARN), None)
    same_steps = at(50)
    eq = at(equal) if equal is not None else None
    wl = at(within) if within is not None else None
    speed = eq["speedup_vs_default_unbatched"] if eq else None
    out = {
        "checkpoint": args.checkpoint, "n_tokens": pred.n_tokens, "n_words": len(pred.words),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "predict_s": round(t_pred, 4), "methods": methods,
        "all_methods_s": round(total, 4), "all_methods_target_s": 3.0,
        "all_methods_ok": total <= 3.0,
        "captum_default_unbatched": {"steps": 50, "internal_batch_size": 1,
                                     "median_s": round(d_med, 4),
                                     "runs_s": [round(x, 4) for x in d_runs], "delta": d_delta,
                                     "relative_delta": round(abs(d_delta) / max(abs(d_diff), 1e-6), 6)},
        "ours_same_steps_batched": same_steps,
        "ours_at_equal_delta": eq,
        "ours_within_5pct_delta": wl,
        "ig_speedup_target": 2.0,
        "ig_speedup_at_equal_delta": speed,
        "ig_speedup_ok": bool(speed is not None and speed >= 2.0),
        "ladder": ladder,
        "note": ("speedup = Captum default unbatched median / ours median. 'equal delta': the "
                 "smallest step count of the ladder whose |delta| <= the default's |delta| "
                 "(same integrand and quadrature, so about the same count: the gain there is "
                 "batching alone). 'within 5%': the smallest count whose delta is inside the "
                 "page's warning line."),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
