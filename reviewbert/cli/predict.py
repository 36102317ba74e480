"""``reviewbert predict``: the star rating of review texts."""
from __future__ import annotations

import argparse
import json

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    pr = sub.add_parser("predict", help="star rating of a review text",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    flags.checkpoint(pr)
    pr.add_argument("text", nargs="+", help="review text(s)")
    flags.max_length(pr)
    flags.json_output(pr, "one JSON object per text")
    return pr


def run(args) -> int:
    from reviewbert.model.batch_predict import predict_texts
    from reviewbert.model.checkpoint import load_checkpoint
    texts = [t.strip() for t in args.text]
    if not all(texts):
        raise UsageError("review text is empty")
    model, tok, info = load_checkpoint(args.checkpoint)
    max_length = args.max_length or (info.meta.get("hyperparameters") or {}).get("max_length") or 256
    probs = predict_texts(model, tok, texts, max_length=max_length)
    names = info.scheme.names
    for text, p in zip(texts, probs):
        k = int(p.argmax())
        out = {"text": text, "label": names[k], "label_id": k,
               "probabilities": {n: round(float(v), 6) for n, v in zip(names, p)}}
        if info.scheme.ordinal:
            out["expected_stars"] = round(float(sum((i + 1) * v for i, v in enumerate(p))), 3)
        if args.json:
            print(json.dumps(out))
        else:
            print(f"{names[k]}  ({100 * p[k]:.1f}%)  " + "  ".join(
                f"{n}: {100 * v:.1f}%" for n, v in zip(names, p)))
    return 0
