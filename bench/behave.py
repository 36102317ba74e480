"""The behavioural suite on the demo: the shipped suite through ``reviewbert.behave.runner``
against a per-case loop through ``transformers.pipeline`` on the same cases, in one run.

- **suite**: ``run_suite`` on a fresh Predictor (no row memo, no cache): cases built from
  the demo's test split, every distinct text scored once, batched by length, fp32;
- **pipeline loop**: what a user would write without ReviewBERT: for each case, its texts
  (the original and the perturbed one for INV and DIR) through
  ``transformers.pipeline("text-classification", top_k=None)``, one call per text, fp32,
  truncated to the same max_length. On a seeded sample of --baseline-cases cases (all with
  0), its time per case scaled to the suite's case count;
- **cached**: ``run_suite`` again on a checkpoint whose result is cached beside it (a
  symlinked copy of the demo in a temporary folder: nothing is written into
  checkpoints/demo), with a fresh Predictor: what a second visit or a CI re-run pays.

``checklist``'s own runner is not timed: its 0.0.11 sdist's setup.py installs Jupyter
while it builds, which cannot happen offline, and it does not install here.

Targets: the suite ≤ 60 s on a 2-core CPU in fp32; ≥ 5× the pipeline loop; the cached
re-run ≤ 1 s.

Usage: ``OMP_NUM_THREADS=2 python bench/behave.py [--checkpoint checkpoints/demo]
[--baseline-cases 600]``; ``--quick``: 60 baseline cases (to check that it runs). The last
stdout line is one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.behave import runner  # noqa: E402
from reviewbert.behave.cases import build_cases  # noqa: E402
from reviewbert.behave.suite import default_suite  # noqa: E402
from reviewbert.data.examples import builtin_examples, test_split_examples  # noqa: E402
from reviewbert.model.checkpoint import checkpoint_info  # noqa: E402
from reviewbert.model.device import cpu_description  # noqa: E402
from reviewbert.model.inference import Predictor  # noqa: E402

TARGET_S, TARGET_SPEEDUP, TARGET_CACHED_S = 60.0, 5.0, 1.0


def say(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def reviews_of(checkpoint: str, tokenizer) -> tuple[list, str]:
    try:
        return test_split_examples(checkpoint_info(checkpoint).meta, tokenizer), "test split"
    except Exception as e:      # noqa: BLE001 - the bench still runs, and says on what
        say(f"the test split cannot be rebuilt ({e}): built-in examples instead")
        return builtin_examples(), "built-in examples"


def time_suite(checkpoint: str, suite, reviews, cache_dir=None) -> tuple[float, object]:
    predictor = Predictor.from_checkpoint(checkpoint, torch.device("cpu"))
    predictor.warm_up()
    t0 = time.perf_counter()
    result = runner.run_suite(predictor, suite, reviews, checkpoint=cache_dir,
                              cache=cache_dir is not None)
    return time.perf_counter() - t0, result


def pipeline_loop(checkpoint: str, suite, reviews, n_cases: int, max_length: int) -> dict:
    """Seconds per case of the per-case pipeline loop, on a seeded sample of cases."""
    from transformers import pipeline
    clf = pipeline("text-classification", model=checkpoint, tokenizer=checkpoint,
                   device=-1, top_k=None)
    all_cases = [c for cases in build_cases(suite, reviews).values() for c in cases]
    sample = (random.Random(0).sample(all_cases, n_cases) if 0 < n_cases < len(all_cases)
              else all_cases)
    clf("Warm-up: the battery is fine.", truncation=True, max_length=max_length)
    t0 = time.perf_counter()
    for c in sample:
        for text in ([c.original] if c.original is not None else []) + [c.text]:
            clf(text, truncation=True, max_length=max_length)
    seconds = time.perf_counter() - t0
    return {"cases_timed": len(sample), "seconds_timed": round(seconds, 3),
            "s_per_case": seconds / len(sample),
            "suite_cases": len(all_cases),
            "suite_estimate_s": round(seconds / len(sample) * len(all_cases), 2)}


def cached_rerun(checkpoint: str, suite, reviews) -> dict:
    with tempfile.TemporaryDirectory(prefix="behave-bench-") as tmp:
        copy = Path(tmp) / "demo"
        copy.mkdir()
        for f in Path(checkpoint).iterdir():
            if f.is_file():
                (copy / f.name).symlink_to(f.resolve())
        first_s, _ = time_suite(str(copy), suite, reviews, cache_dir=copy)
        predictor = Predictor.from_checkpoint(copy, torch.device("cpu"))
        t0 = time.perf_counter()
        again = runner.run_suite(predictor, suite, reviews, checkpoint=copy)
        return {"first_s": round(first_s, 2), "cached_s": round(time.perf_counter() - t0, 3),
                "was_cached": bool(again.cached)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--baseline-cases", type=int, default=600)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.baseline_cases = 60
    import transformers
    transformers.logging.set_verbosity_error()
    suite = default_suite()
    probe = Predictor.from_checkpoint(args.checkpoint, torch.device("cpu"))
    reviews, source = reviews_of(args.checkpoint, probe.tokenizer)
    suite_s, result = time_suite(args.checkpoint, suite, reviews)
    n_cases = sum(t.n for t in result.tests)
    say(f"suite: {len(result.tests)} tests, {n_cases} cases from the {source}: {suite_s:.1f} s")
    base = pipeline_loop(args.checkpoint, suite, reviews, args.baseline_cases, probe.max_length)
    speedup = base["suite_estimate_s"] / suite_s
    say(f"pipeline loop: {base['s_per_case'] * 1000:.1f} ms per case over {base['cases_timed']} "
        f"cases, {base['suite_estimate_s']:.1f} s for the suite ({speedup:.1f}× slower)")
    cached = cached_rerun(args.checkpoint, suite, reviews)
    say(f"cached re-run: {cached['cached_s']:.3f} s (first run {cached['first_s']:.1f} s)")
    checks = {"suite_le_60s": suite_s <= TARGET_S, "speedup_ge_5x": speedup >= TARGET_SPEEDUP,
              "cached_le_1s": cached["cached_s"] <= TARGET_CACHED_S and cached["was_cached"]}
    print(json.dumps({"bench": "behave", "quick": args.quick, "cpu": cpu_description(),
                      "torch_threads": torch.get_num_threads(),
                      "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                      "checkpoint": args.checkpoint, "reviews": source,
                      "tests": len(result.tests), "cases": n_cases,
                      "suite_s": round(suite_s, 2), "pipeline": base,
                      "speedup": round(speedup, 2), "cached": cached,
                      "targets": {"suite_s": TARGET_S, "speedup": TARGET_SPEEDUP,
                                  "cached_s": TARGET_CACHED_S},
                      "checks": checks, "met": all(checks.values())}))


if __name__ == "__main__":
    main()
