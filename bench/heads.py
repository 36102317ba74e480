"""Heads benchmark: Michel et al.'s importance of every head against the naive way, and a
pruned checkpoint's latency and accuracy against the full one, in one run.

- ours: ``heads.importance``, |∂loss/∂ξ| of all heads from one forward + backward pass per
  batch (fp32), on --n reviews of the checkpoint's test split;
- naive, in the same run, on the same reviews and batches: mask each head in turn and score
  the reviews again (one forward pass over them per head: 72 for the demo; fp32 too, so the
  two do the same arithmetic per pass). ``ratio_vs_naive`` = naive / ours.
  Targets: ours <= 60 s for 1,000 reviews on this 2-core CPU, and >= 20x faster;
- pruning: the --fraction least important heads, scored on the validation split (as
  ``reviewbert heads prune`` does, so the test split still measures the result), removed
  from the weights; prediction latency of ``Predictor.predict`` (the Predict page's fast
  path) on a 256-token review, full and pruned timed alternately, median of --repeats;
  accuracy of each on the same --n test reviews. Reported as they are; the aim is a
  pruned checkpoint that is faster at less than 1 point of accuracy (``aims``, not in ``met``).

--quick proves it runs: 100 reviews, the naive loop over one layer's heads (timed, then
scaled to all of them: ``naive_heads_timed`` says how many), 5 latency repeats. Its
figures are not the benchmark's.

Usage: ``OMP_NUM_THREADS=2 python bench/heads.py [--checkpoint checkpoints/demo] [--n 1000]
[--fraction 0.3] [--repeats 30] [--quick]``. The last stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.data.examples import builtin_examples  # noqa: E402
from reviewbert.heads import analysis as head_analysis
from reviewbert.heads import importance as heads  # noqa: E402
from reviewbert.model.batch_predict import encode_texts  # noqa: E402
from reviewbert.model.checkpoint import load_checkpoint  # noqa: E402
from reviewbert.model.device import cpu_description  # noqa: E402
from reviewbert.model.inference import Predictor  # noqa: E402
from reviewbert.model.pruning import alive_heads  # noqa: E402

TARGET_SECONDS, TARGET_RATIO = 60.0, 20.0


def split(info, tok, name: str, n: int):
    from reviewbert.analysis.sources import named_split
    reviews, _, _ = named_split(info.meta, name, tok)
    return head_analysis.sample_reviews(reviews, n, seed=0)


def prepared(tok, scheme, reviews):
    ids = encode_texts(tok, [r.text for r in reviews], 256)
    labels = np.array([scheme.class_of(int(r.stars)) for r in reviews])
    return heads.make_batches(ids, tok.pad_token_id), labels


def ours(mm, batches, labels) -> tuple[float, np.ndarray]:
    t0 = time.perf_counter()
    raw = heads.importance(mm, batches, labels)
    return time.perf_counter() - t0, raw


def naive(mm, batches, labels, cells) -> float:
    """Mask each head of ``cells`` in turn and score every review again (fp32)."""
    t0 = time.perf_counter()
    for li, h in cells:
        heads.evaluate(mm, batches, len(labels), heads.mask_of([(li, h)], (mm.L, mm.H)), "fp32")
    return time.perf_counter() - t0


def accuracy(model, batches, labels) -> float:
    probs = heads.evaluate(heads.MaskedModel(model), batches, len(labels), None, "fp32")
    return float((probs.argmax(1) == labels).mean())


def review_of(tok, n_tokens: int) -> str:
    text = " ".join(r.text for r in builtin_examples())
    assert len(tok(text)["input_ids"]) > n_tokens
    return text


def latencies(full: Predictor, small: Predictor, text: str, repeats: int) -> tuple[float, float]:
    for p in (full, small):
        p.warm_up()
        p.predict(text)
    a, b = [], []
    for _ in range(repeats):
        for p, out in ((full, a), (small, b)):
            t0 = time.perf_counter()
            p.predict(text)
            out.append(time.perf_counter() - t0)
    return 1000 * statistics.median(a), 1000 * statistics.median(b)


def pruned_part(model, tok, info, args, test_batches, test_labels) -> dict:
    val = split(info, tok, "validation", args.n)
    remove, _ = head_analysis.heads_to_prune(model, tok, val, info.scheme, args.fraction,
                                             max_length=256)
    with tempfile.TemporaryDirectory() as d:
        out = head_analysis.write_pruned(model, tok, info, remove, Path(d) / "pruned",
                                         {"fraction": args.fraction, "bench": True})
        small_model, _, _ = load_checkpoint(out, torch.device("cpu"), attn_implementation="eager")
    full = Predictor(model, tok, info.scheme, max_length=256)
    small = Predictor(small_model, tok, info.scheme, max_length=256)
    text = review_of(tok, 256)
    assert full.predict(text).n_tokens == 256
    lat_full, lat_small = latencies(full, small, text, args.repeats)
    return {"heads_removed": sum(len(v) for v in remove.values()),
            "heads_per_layer": [len(a) for a in alive_heads(small_model)],
            "latency_full_ms": round(lat_full, 2), "latency_pruned_ms": round(lat_small, 2),
            "accuracy_full": accuracy(model, test_batches, test_labels),
            "accuracy_pruned": accuracy(small_model, test_batches, test_labels)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--fraction", type=float, default=0.3)
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.n, args.repeats = 100, 5
    import transformers
    transformers.logging.set_verbosity_error()
    model, tok, info = load_checkpoint(args.checkpoint, torch.device("cpu"), attn_implementation="eager")
    reviews = split(info, tok, "test", args.n)
    batches, labels = prepared(tok, info.scheme, reviews)
    mm = heads.MaskedModel(model)
    print(f"{args.checkpoint}: {len(reviews)} test reviews, {len(batches)} batches, "
          f"torch threads {torch.get_num_threads()}, {cpu_description()}", flush=True)
    heads.evaluate(mm, batches[:2], len(labels), None, "fp32")                  # warm-up
    t_ours, _ = ours(mm, batches, labels)
    print(f"  ours (gradient, all heads): {t_ours:.1f} s", flush=True)
    cells = [(li, h) for li, hs in enumerate(alive_heads(model)) for h in hs]
    timed = cells[:len(alive_heads(model)[0])] if args.quick else cells
    t_naive = naive(mm, batches, labels, timed) * len(cells) / len(timed)
    print(f"  naive ({len(timed)} of {len(cells)} heads timed): {t_naive:.1f} s for all", flush=True)
    pr = pruned_part(model, tok, info, args, batches, labels)
    print(f"  pruned {pr['heads_removed']} heads: {pr['latency_pruned_ms']} ms vs "
          f"{pr['latency_full_ms']} ms at 256 tokens; accuracy {pr['accuracy_pruned']:.3f} vs "
          f"{pr['accuracy_full']:.3f}", flush=True)
    ratio = t_naive / t_ours
    checks = {f"seconds <= {TARGET_SECONDS:g}": t_ours <= TARGET_SECONDS,
              f"ratio_vs_naive >= {TARGET_RATIO:g}": ratio >= TARGET_RATIO}
    aims = {"pruned faster": pr["latency_pruned_ms"] < pr["latency_full_ms"],
            "pruned within 1 point": pr["accuracy_full"] - pr["accuracy_pruned"] < 0.01}
    print(json.dumps({
        "bench": "heads", "quick": args.quick, "n": len(reviews), "heads": len(cells),
        "seconds": round(t_ours, 2), "naive_seconds": round(t_naive, 2),
        "naive_heads_timed": len(timed), "ratio_vs_naive": round(ratio, 1),
        "fraction": args.fraction, **pr, "threads": torch.get_num_threads(),
        "cpu": cpu_description(), "targets": {"seconds": TARGET_SECONDS, "ratio_vs_naive": TARGET_RATIO},
        "checks": checks, "aims": aims, "met": all(checks.values())}))


if __name__ == "__main__":
    main()
