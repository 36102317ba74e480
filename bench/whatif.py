"""What if? on CPU: each counterfactual kind, LIME and occlusion on one 256-token review,
batched against the same search done one forward pass at a time, in the same process;
and the brittleness run's time over test reviews.

- the three kinds of ``reviewbert/whatif/counterfactuals.py`` (deletion flip along attention × value
  norm, the page's default ranking; sentence occlusion; HotFlip), each timed as the page
  runs it (``whatif.counterfactuals`` with a fresh ``Checker``: batched search passes in
  bf16 where the CPU has bf16 units, what is shown again in exact fp32), median of
  --repeats, after one warm-up. Baseline: the same searches with ``Checker(one_at_a_time=
  True)``: every candidate alone through the exact fp32 single-review pass (the Predict
  page's ``FastBertForward``), as a search without batching would run them. Both must
  give the same counterfactuals (texts and classes; reported). For reference, a third
  configuration the app does not use: verification in bf16 too, near ties (top two
  logits closer than 0.25) run again in fp32 (``Checker(verify="bf16")``);
- LIME (200 samples) and occlusion (each word deleted) as the page runs them (all
  perturbations in one call, batched through ``Predictor.batch_logits``, fp32) against
  Captum's default of one perturbation per forward pass;
- the brittleness run (``reviewbert.whatif.brittleness``, occlusion ranking, ≤ 10 words) over the
  first --brittleness-n reviews of the demo's test split sample, uncached.

Targets: all three kinds together ≤ 2 s; ≥ 3× faster than one pass at a time.

Usage: ``OMP_NUM_THREADS=2 python bench/whatif.py [--checkpoint DIR] [--tokens 256]
[--repeats 3] [--brittleness-n 300]``; ``--quick``: one repeat, 20 brittleness reviews
(to check that it runs; timings then are not the figures). The last stdout line is one
JSON object.
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
from reviewbert.model.device import cpu_description  # noqa: E402
from reviewbert.model.inference import Predictor  # noqa: E402
from reviewbert.whatif import brittleness
from reviewbert.whatif import counterfactuals as whatif  # noqa: E402

KINDS = ("deletion", "sentences", "hotflip")
TARGET_S, TARGET_SPEEDUP = 2.0, 3.0


def review_of(tokenizer, n_tokens: int) -> str:
    """Real-looking text (the built-in reviews, one after another) of at least n_tokens."""
    text = " ".join(r.text for r in builtin_examples())
    assert len(tokenizer(text)["input_ids"]) > n_tokens
    return text


MODES = {"batched": dict(), "one_at_a_time": dict(one_at_a_time=True),
         "batched_bf16_verify": dict(verify="bf16")}


def one_search(predictor, pred, mode: str) -> dict:
    """Seconds of each kind, passes and results of one run with a fresh Checker."""
    checker = whatif.Checker(predictor, **MODES[mode])
    t0 = time.perf_counter()
    order = whatif.ranking(predictor, pred)
    rank_s = time.perf_counter() - t0
    found = whatif.counterfactuals(predictor, pred, checker=checker, order=order)
    secs = {"deletion": found.deletion.seconds + rank_s, "sentences": found.sentences.seconds,
            "hotflip": found.hotflip.seconds}
    return {"seconds": secs, "passes": dict(checker.passes),
            "results": [(cf.kind, cf.text, cf.label_id) for cf in found.all()]}


def kinds(predictor, pred, repeats: int) -> dict:
    """Per kind: the shipped configuration (batched, bf16 search, fp32 verification) and the
    one-at-a-time baseline, and for reference the same with bf16 verification (near ties
    re-run in fp32: the ratings are fp32's, the probabilities bf16's)."""
    runs = {mode: [] for mode in MODES}
    for _ in range(repeats):                 # modes taking turns: drift hits all alike
        for mode in MODES:
            runs[mode].append(one_search(predictor, pred, mode))
    out = {}
    for k in (*KINDS, "all_three"):
        med = {mode: statistics.median(sum(r["seconds"].values()) if k == "all_three"
                                       else r["seconds"][k] for r in rs)
               for mode, rs in runs.items()}
        base = med["one_at_a_time"]
        out[k] = {"batched_s": round(med["batched"], 4), "one_at_a_time_s": round(base, 4),
                  "speedup": round(base / max(med["batched"], 1e-9), 3),
                  "bf16_verify_s": round(med["batched_bf16_verify"], 4),
                  "bf16_verify_speedup": round(base / max(med["batched_bf16_verify"], 1e-9), 3)}
    out["passes"] = {mode: rs[0]["passes"] for mode, rs in runs.items()}
    first = {mode: [(kind, text, label) for kind, text, label in rs[0]["results"]]
             for mode, rs in runs.items()}
    out["same_counterfactuals"] = first["batched"] == first["one_at_a_time"]
    out["same_ratings_bf16_verify"] = first["batched_bf16_verify"] == first["one_at_a_time"]
    out["counterfactuals"] = len(first["batched"])
    return out


def perturbation(predictor, pred, repeats: int) -> dict:
    out = {}
    for name, make in (("lime", lambda b: E.Lime(batched=b)), ("occlusion", lambda b: E.Occlusion(b))):
        med = {}
        for batched in (True, False):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                make(batched).run(predictor, pred)
                times.append(time.perf_counter() - t0)
            med[batched] = statistics.median(times)
        out[name] = {"batched_s": round(med[True], 4), "one_at_a_time_s": round(med[False], 4),
                     "speedup": round(med[False] / max(med[True], 1e-9), 3)}
    return out


def brittleness_time(predictor, checkpoint: str, n: int) -> dict | None:
    """The brittleness run over ``n`` test reviews; None when ``n`` is 0 (not measured)."""
    if n <= 0:
        return None
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    try:
        reviews = test_split_examples(checkpoint_info(checkpoint).meta, predictor.tokenizer)
    except Exception as e:  # noqa: BLE001 - no data here: say so in the JSON
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    chosen = [reviews[i] for i in brittleness.sample(len(reviews), n, 0)]
    t0 = time.perf_counter()
    res = brittleness.measure(predictor, checkpoint, [r.text for r in chosen], [r.stars for r in chosen],
                          use_cache=False)
    secs = time.perf_counter() - t0
    return {"n": len(chosen), "seconds": round(secs, 2), "per_review_s": round(secs / len(chosen), 4),
            "at_300_s": round(secs / len(chosen) * 300, 1), "measured_at_300": len(chosen) == 300,
            "flipped": sum(1 for r in res.reviews if r["found"]), "method": res.settings["method"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--brittleness-n", type=int, default=300, help="0: skip the brittleness run")
    ap.add_argument("--quick", action="store_true", help="1 repeat, 20 brittleness reviews")
    args = ap.parse_args(argv)
    if args.quick:
        args.repeats, args.brittleness_n = 1, min(args.brittleness_n, 20)
    import transformers
    transformers.logging.set_verbosity_error()
    base = Predictor.from_checkpoint(args.checkpoint, torch.device("cpu"))
    predictor = Predictor(base.model, base.tokenizer, base.scheme, max_length=args.tokens)
    predictor.warm_up()
    pred = predictor.predict(review_of(predictor.tokenizer, args.tokens))
    assert pred.n_tokens == args.tokens, pred.n_tokens
    say = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    say(f"{args.checkpoint}: {pred.n_tokens} tokens, {len(pred.words)} words, "
        f"torch threads {torch.get_num_threads()}")
    for mode in MODES:                                   # warm-up: bf16 kernels, Captum
        one_search(predictor, pred, mode)
    E.Occlusion().run(predictor, predictor.predict("Warm-up, the battery died. " * 4))
    k = kinds(predictor, pred, args.repeats)
    for name in (*KINDS, "all_three"):
        say(f"  {name:10s} batched {k[name]['batched_s']:.3f} s, one at a time "
            f"{k[name]['one_at_a_time_s']:.3f} s ({k[name]['speedup']:.2f}×); bf16 verification "
            f"{k[name]['bf16_verify_s']:.3f} s ({k[name]['bf16_verify_speedup']:.2f}×)")
    p = perturbation(predictor, pred, args.repeats)
    for name, v in p.items():
        say(f"  {name:10s} batched {v['batched_s']:.3f} s, one at a time {v['one_at_a_time_s']:.3f} s")
    b = brittleness_time(base, args.checkpoint, args.brittleness_n)
    say(f"  brittleness {b}")
    checks = {"all_three_le_2s": k["all_three"]["batched_s"] <= TARGET_S,
              "speedup_ge_3x": k["all_three"]["speedup"] >= TARGET_SPEEDUP,
              "same_counterfactuals": bool(k["same_counterfactuals"])}
    print(json.dumps({"bench": "whatif", "quick": args.quick, "cpu": cpu_description(),
                      "torch_threads": torch.get_num_threads(),
                      "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                      "checkpoint": args.checkpoint, "n_tokens": pred.n_tokens,
                      "n_words": len(pred.words), "repeats": args.repeats,
                      "search_precision": whatif.Checker(predictor).search_precision,
                      "kinds": k, "perturbation": p, "brittleness": b,
                      "targets": {"all_three_s": TARGET_S, "speedup": TARGET_SPEEDUP},
                      "checks": checks, "met": all(checks.values())}))


if __name__ == "__main__":
    main()
