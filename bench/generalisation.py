"""Does a checkpoint generalise to a review file it never saw?

Protocol: train a run on all data files but one (``make demo-holdout`` holds out the
seed report's own *Cell Phones and Accessories* file), then evaluate it

  1. on its own balanced test split (in-distribution), and
  2. on a balanced set drawn from the held-out file (every class cut to the smallest
     one; exact duplicates and conflicting texts removed as in training).

    python bench/generalisation.py --checkpoint checkpoints/demo-holdout \
        --heldout ../shared/data/cell_phones_and_accessories_5core_sample.json

Prints a summary, then one JSON line (what `python -m reviewbert.training.card --generalisation` reads).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reviewbert.data import ReadOptions, build_splits, splits_from_meta  # noqa: E402
from reviewbert.model.batch_predict import evaluate_examples
from reviewbert.model.checkpoint import load_checkpoint


def run(checkpoint: str, heldout: str, data_dir: str | None = None) -> dict:
    model, tok, info = load_checkpoint(checkpoint)
    meta = info.meta
    hp = meta.get("hyperparameters") or {}
    k, max_length = info.scheme.num_labels, hp.get("max_length", 256)
    trained_on = [f["name"] for f in meta["data"]["files"]]
    if Path(heldout).name in trained_on:
        raise SystemExit(f"{heldout} is one of the checkpoint's training files: not held out")

    own = splits_from_meta(meta, data_dir=data_dir, tokenizer=tok)
    options = ReadOptions(**(meta["data"].get("options") or {}))
    # All three balanced splits of the unseen file together: a balanced evaluation set.
    unseen = build_splits([heldout], info.scheme, seed=hp.get("split_seed", 42), options=options)
    unseen_rows = unseen.train + unseen.validation + unseen.test

    rows = []
    for label, examples in ((f"its own test split ({', '.join(trained_on)})", own.test),
                            (f"unseen file `{Path(heldout).name}`, balanced", unseen_rows)):
        m = evaluate_examples(model, tok, examples, max_length=max_length, num_labels=k)
        rows.append({"label": label, "n": m["n"], "accuracy": m["accuracy"],
                     "relaxed_accuracy": m.get("relaxed_accuracy"), "auc": m["auc"],
                     "loss": m["loss"]})
        print(f"{label}: n={m['n']} acc={m['accuracy']:.3f} auc={m['auc']}", file=sys.stderr)
    drop = 100 * (rows[0]["accuracy"] - rows[1]["accuracy"])
    return {
        "checkpoint": str(info.path), "heldout": Path(heldout).name,
        "protocol": (f"A second run with the demo's settings was trained on the other "
                     f"{len(trained_on)} files only "
                     f"(`{Path(info.path).parent.name if info.run_dir else info.path.name}`), "
                     + (f"distilled, as the demo is, from {len(teachers)} teacher runs trained on "
                        f"the same {len(trained_on)} files (checked), "
                        if (teachers := (meta.get("distillation") or {}).get("teachers")) else "")
                     + f"then evaluated on its own balanced test split and on a balanced set from "
                     f"`{Path(heldout).name}`, which it never saw."),
        "rows": rows,
        "accuracy_drop_points": round(drop, 1),
        "conclusion": (f"On the unseen file, accuracy is {abs(drop):.1f} points "
                       f"{'lower' if drop > 0 else 'higher'} than on its in-distribution test split."),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--heldout", required=True, help="the data file the checkpoint did not train on")
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    print(json.dumps(run(a.checkpoint, a.heldout, a.data_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
