"""``reviewbert layers``: the rating after every layer — a linear probe on [CLS] at each depth
of the checkpoint and of its base model, scored on the checkpoint's test split."""
from __future__ import annotations

import argparse
import json
import sys

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    p = sub.add_parser(
        "layers", help="per-layer linear probes: how much of the rating each layer holds",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Fits a logistic-regression probe on the [CLS] vector after the embeddings "
                    "(layer 0) and after every encoder layer, on a seeded sample of the "
                    "checkpoint's training split, and scores it on its test split (accuracy, "
                    "relaxed accuracy, AUC, with 95 % intervals); the same on the base model it "
                    "was fine-tuned from. Cached beside the checkpoint.")
    flags.checkpoint(p)
    flags.data(p, "the checkpoint's training files, if not where reviewbert.json says")
    p.add_argument("--train-cap", type=int, default=None, metavar="N",
                   help="training reviews per probe (a seeded sample); default: "
                        "reviewbert/layers/probes.py's TRAIN_CAP")
    flags.seed(p, "seed of the training sample and of the probes")
    flags.precision(p, "of the passes that read the vectors: auto is bf16 on a CPU with bf16 units")
    flags.no_cache(p)
    flags.json_output(p, "also print one JSON object as the last line: layers and base_layers "
                         "(each {layer, accuracy, relaxed_accuracy, auc, and their _ci}; layer 0 "
                         "= the embeddings), model_accuracy, settled_layer")
    return p


def run(args) -> int:
    from reviewbert.layers import analysis as layer_analysis
    from reviewbert.layers import probes
    from reviewbert.progress import TqdmProgress
    cap = probes.TRAIN_CAP if args.train_cap is None else args.train_cap
    if cap < 2:
        raise UsageError("--train-cap must be at least 2")
    model, tok, info, max_length = _load(args)
    train, test, source = _splits(args, info, tok)
    settings = probes.Settings(train_cap=cap, seed=args.seed, precision=args.precision)
    n_train = len(layer_analysis.training_sample(train, settings))
    with TqdmProgress(layer_analysis.planned(n_train, len(test)), "layers", unit="review") as bar:
        res = layer_analysis.analyze(model, tok, info.path, train, test, info.scheme,
                                     max_length=max_length, base_model=info.base_model,
                                     settings=settings, progress=bar, on_stage=bar.describe,
                                     source=source, use_cache=not args.no_cache)
    _print(res, info)
    if args.json:
        print(json.dumps(res.to_json()))
    return 0


def _load(args):
    import torch

    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.inference import model_max_length
    model, tok, info = load_checkpoint(args.checkpoint, torch.device("cpu"),
                                       attn_implementation="eager")
    if getattr(model.config, "num_hidden_layers", None) is None:
        raise UsageError(f"{info.path} is not a layered encoder; the probes need one")
    return model, tok, info, model_max_length(model, tok, info.meta)


def _splits(args, info, tok):
    """(training split, test split, description of the test split)."""
    from reviewbert.analysis.sources import named_split
    if not info.meta.get("data"):
        raise UsageError(f"{info.path} records no training data, so its splits cannot be rebuilt "
                         "for the probes")
    train, _, warnings = named_split(info.meta, "train", tok, args.data)
    test, source, _ = named_split(info.meta, "test", tok, args.data)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    return train, test, source


def _pct(x, ci=None) -> str:
    if x is None:
        return "     —"
    out = f"{100 * x:5.1f}%"
    return out + (f" [{100 * ci[0]:4.1f}–{100 * ci[1]:4.1f}]" if ci else "")


def _table(rows: list[dict]) -> None:
    print(f"  {'after':<11} {'accuracy [95 %]':<22} {'relaxed (±1)':<22} {'AUC':<22}")
    for r in rows:
        name = "embeddings" if r["layer"] == 0 else f"layer {r['layer']}"
        print(f"  {name:<11} " + " ".join(f"{_pct(r.get(m), r.get(m + '_ci')):<22}"
                                          for m in ("accuracy", "relaxed_accuracy", "auc")))


def _print(res, info) -> None:
    from reviewbert.analysis.sources import describe
    where = "cached" if res.from_cache else f"{res.seconds:.0f} s"
    print(f"checkpoint {info.path}: probes fitted on {res.n_train:,} training reviews, scored on "
          f"{res.n_test:,} ({describe(res.source) if res.source else 'test split'}), {where}")
    print("the checkpoint's probes:")
    _table(res.layers)
    print(f"the checkpoint's own classifier on the same reviews: accuracy "
          f"{_pct(res.model_accuracy, res.model.get('accuracy_ci'))}")
    if res.settled is not None:
        print(f"from layer {res.settled} on, the probe's accuracy interval reaches the last "
              "layer's accuracy: the rating is settled there")
    if res.base_layers:
        print(f"the base model's probes ({res.base_model}):")
        _table(res.base_layers)
    else:
        print(f"no base model comparison: {res.base_note}")
