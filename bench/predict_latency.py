"""Predict-plus-attention latency on CPU: ReviewBERT's one pass vs the obvious baseline.

Model: the embedded all-MiniLM-L6-v2 (6 layers, 12 heads, hidden 384) with a
classifier head (untrained unless --checkpoint is given; timing does not care).

- ours:     ``Predictor.predict(text)`` — tokens, words, probabilities and every
            attention matrix from one forward pass (reviewbert/model/inference.py).
- baseline: ``transformers.pipeline("text-classification")`` for the prediction,
            plus a separate eager forward with ``output_attentions=True``.

Reviews of 32, 128 and 256 tokens; warm-up, then N timed repeats each. The last
stdout line is JSON: p50/p95 (ms) per length for both, and ratio = ours p50 /
baseline p50. Usage: ``python bench/predict_latency.py [--repeats 30] [--checkpoint DIR]``
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reviewbert.model.inference import Predictor, encode
from reviewbert.model.labels import FIVE  # noqa: E402

BASE = ("The phone arrived on time and works well, but the battery drains quickly when I use "
        "the camera, and the screen scratches easily. Support answered my questions politely. ")


def text_of(tok, n_tokens: int) -> str:
    """A review that tokenises to exactly ``n_tokens`` (specials included)."""
    ids = tok(BASE * 20, add_special_tokens=False)["input_ids"][: n_tokens - 2]
    text = tok.decode(ids)
    got = len(tok(text)["input_ids"])
    assert abs(got - n_tokens) <= 2, (got, n_tokens)
    return text


def timeit(fn, warmup: int, repeats: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def pct(xs, q):
    return float(np.percentile(xs, q))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--checkpoint", help="a ReviewBERT checkpoint (default: embedded MiniLM + random head)")
    args = ap.parse_args(argv)

    import transformers
    from transformers import pipeline
    transformers.logging.set_verbosity_error()
    if args.checkpoint:
        ours = Predictor.from_checkpoint(args.checkpoint, torch.device("cpu"))
        model, tok = ours.model, ours.tokenizer
    else:
        from reviewbert.model.checkpoint import load_for_training
        torch.manual_seed(0)
        model, tok = load_for_training(None, FIVE, attn_implementation="eager")
        model.eval()
        ours = Predictor(model, tok, FIVE, max_length=256)
    pipe = pipeline("text-classification", model=model, tokenizer=tok, device=-1)

    def baseline(text):
        pred = pipe(text, truncation=True, max_length=256)
        with torch.inference_mode():
            enc = tok(text, return_tensors="pt", truncation=True, max_length=256)
            out = model(**enc, output_attentions=True)
        return pred, out.attentions

    results = {}
    for n in (32, 128, 256):
        text = text_of(tok, n)
        n_real = len(encode(tok, text, 256).ids)
        # interleave ours and baseline in rounds so background load hits both alike
        o, b = [], []
        for _ in range(3):
            o += timeit(lambda: ours.predict(text), args.warmup, args.repeats // 3)
            b += timeit(lambda: baseline(text), args.warmup, args.repeats // 3)
        results[str(n)] = {"tokens": n_real,
                           "ours_p50_ms": round(statistics.median(o), 2), "ours_p95_ms": round(pct(o, 95), 2),
                           "baseline_p50_ms": round(statistics.median(b), 2),
                           "baseline_p95_ms": round(pct(b, 95), 2),
                           "ratio": round(statistics.median(o) / statistics.median(b), 3)}
        r = results[str(n)]
        print(f"{n:>4} tokens: ours p50 {r['ours_p50_ms']:7.2f} ms  p95 {r['ours_p95_ms']:7.2f} | "
              f"baseline p50 {r['baseline_p50_ms']:7.2f} ms  p95 {r['baseline_p95_ms']:7.2f} | "
              f"ratio {r['ratio']:.3f}", file=sys.stderr)
    summary = {"bench": "predict_latency", "model": "all-MiniLM-L6-v2 (6x12, hidden 384)",
               "device": "cpu", "threads": torch.get_num_threads(), "repeats": args.repeats,
               "fast_path": ours.fast is not None,
               "onednn_packed": bool(ours.fast is not None and ours.fast.packed),
               "lengths": results, "ratio_256": results["256"]["ratio"]}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
