"""``reviewbert evaluate``: the four metrics and the confusion matrix of a checkpoint.

Under ``accelerate launch`` (or torchrun) every process scores its share of the
batches and the main process prints and writes; one process needs no Accelerator.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from reviewbert.cli import UsageError, flags


def add_parser(sub):
    e = sub.add_parser("evaluate", help="metrics and confusion matrix of a checkpoint",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    flags.checkpoint(e)
    flags.data(e, "review file(s); for --split test they must be the training files "
                  "(default: the files recorded in the checkpoint's reviewbert.json)")
    flags.split(e, "test: rebuild the checkpoint's own test split (same seed and options); "
                   "all: every row of the --data files after deduplication")
    flags.batch_size(e)
    flags.max_length(e)
    flags.precision(e, "auto: bf16 autocast on a CPU with bf16 units (AMX-BF16/AVX512-BF16), "
                       "else fp32; training recorded its metrics in fp32")
    e.add_argument("--save-predictions", metavar="FILE", default=None,
                   help="write every review's text, true and predicted rating, class "
                        "probabilities and token count: Parquet if FILE ends in .parquet, "
                        "else CSV")
    e.add_argument("--save-embeddings", metavar="FILE.npy", default=None,
                   help="write every review's sentence vector (float16 [reviews, hidden]), one "
                        "row per review in the order of --save-predictions' rows")
    e.add_argument("--embedding-pooling", choices=("cls", "mean"), default="cls",
                   help="the sentence vector: the [CLS] hidden state, or the mean of the tokens'")
    e.add_argument("--embedding-layer", type=int, default=-1, metavar="N",
                   help="hidden state to take: -1 the last layer, 0 the embedding output")
    flags.no_cache(e, "neither read nor write the prediction cache beside the checkpoint")
    flags.json_output(e)
    return e


def run(args) -> int:
    from reviewbert.model.checkpoint import load_checkpoint
    from reviewbert.model.device import resolve_precision
    accelerator = _eval_accelerator()
    main = accelerator is None or accelerator.is_main_process
    model, tok, info = load_checkpoint(args.checkpoint,
                                       accelerator.device if accelerator else None)
    hp = info.meta.get("hyperparameters") or {}
    max_length = args.max_length or hp.get("max_length") or 256
    precision = resolve_precision(args.precision,
                                  accelerator.device if accelerator else model.device)
    args.embed = _embedding_spec(args, model)
    reviews, stream, source, total = _reviews(args, info, tok, main)
    score = _score_held if reviews is not None else _score_streamed
    y, p, preds = score(args, model, tok, info, reviews if reviews is not None else stream,
                        source, total, max_length, precision, accelerator, main)
    if main:
        _print_results(args, info, y, p, preds, source, max_length, precision, accelerator)
    return 0


def _embedding_spec(args, model):
    """The --embedding-* flags as an EmbeddingSpec (checked against the model's layers)."""
    from reviewbert.analysis.embeddings import EmbeddingSpec, n_layers_of
    spec = EmbeddingSpec(args.embedding_pooling, args.embedding_layer)
    try:
        spec.resolved_layer(n_layers_of(model))
    except ValueError as e:
        raise UsageError(f"--embedding-layer: {e}") from None
    if args.save_embeddings and not str(args.save_embeddings).endswith(".npy"):
        raise UsageError("--save-embeddings writes a NumPy file: give it a .npy name")
    return spec


def _eval_accelerator():
    """An Accelerator when launched as several processes (accelerate launch, torchrun), else None.

    cpu=True on a machine without a GPU: Accelerate otherwise ignores WORLD_SIZE there
    (see training/setup.py).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    from reviewbert.model.device import pick_device
    return Accelerator(cpu=pick_device().type == "cpu")


def _reviews(args, info, tok, main: bool):
    """(reviews held in memory or None, a chunk stream or None, source, how many): the
    checkpoint's test split, or every review of --data (streamed when too many to hold)."""
    from reviewbert.analysis.sources import CACHE_MAX_REVIEWS, all_reviews, test_split
    if args.split == "test":
        if not info.meta.get("data"):
            raise UsageError(f"{info.path} records no training data, so its test split cannot be "
                             "rebuilt; use --split all --data FILE")
        reviews, source, warnings = test_split(info.meta, tok, args.data)
        if main:
            for w in warnings:
                print(f"warning: {w}", file=sys.stderr)
        return reviews, None, source, len(reviews)
    if not args.data:
        raise UsageError("--split all needs --data FILE")
    report, stream, source = all_reviews(args.data, info.scheme, info.meta)
    if report.unique_texts <= CACHE_MAX_REVIEWS:   # small enough to hold, score and cache
        reviews = [e for chunk in stream for e in chunk]
        return reviews, None, source, len(reviews)
    return None, stream, source, report.unique_texts


def _score_held(args, model, tok, info, reviews, source, total, max_length, precision,
                accelerator, main):
    """Every review scored in one pass, through the prediction cache beside the checkpoint."""
    from reviewbert import data
    from reviewbert.analysis import predict_split, save_export
    from reviewbert.analysis.predictions import planned_reviews
    from reviewbert.progress import TqdmProgress
    if not reviews:
        raise data.DataError("no reviews to evaluate")
    with TqdmProgress(planned_reviews(len(reviews), precision), "evaluating",
                      enabled=main) as progress:
        preds = predict_split(model, tok, info.path, reviews, info.scheme, max_length=max_length,
                              precision=precision, batch_size=args.batch_size,
                              progress=progress, source=source, accelerator=accelerator,
                              use_cache=not args.no_cache, embed=args.embed)
    if args.save_predictions and main:
        save_export(preds, args.save_predictions)
    if args.save_embeddings:
        _save_embeddings(args, model, tok, preds, main, accelerator)
    return preds.y, preds.probs, preds


def _save_embeddings(args, model, tok, preds, main, accelerator) -> None:
    """The vectors of a held evaluation: from its pass, its cache, or one more pass."""
    from reviewbert.analysis import embeddings
    from reviewbert.progress import TqdmProgress
    if main:
        with TqdmProgress(preds.n, "sentence vectors") as progress:
            vecs = embeddings.vectors_for(preds, model, tok, args.embed, progress=progress,
                                          use_cache=not args.no_cache,
                                          batch_size=args.batch_size)
        embeddings.save_vectors(args.save_embeddings, vecs)
    if accelerator is not None:
        accelerator.wait_for_everyone()


def _score_streamed(args, model, tok, info, stream, source, total, max_length, precision,
                    accelerator, main):
    """Too many to hold: score chunk by chunk, write predictions as they come."""
    import numpy as np

    from reviewbert import data
    from reviewbert.analysis.embeddings import NpyRowWriter, VectorTap, n_layers_of
    from reviewbert.analysis.predictions import ExportWriter, SplitPredictions, build_frame
    from reviewbert.model.batch_predict import predict_in_order
    from reviewbert.progress import TqdmProgress
    writer = ExportWriter(args.save_predictions) if args.save_predictions and main else None
    vec_writer = (NpyRowWriter(args.save_embeddings, model.config.hidden_size)
                  if args.save_embeddings and main else None)
    writers = [w for w in (writer, vec_writer) if w is not None]
    ys, ps = [], []
    try:
        with TqdmProgress(total, "evaluating", enabled=main) as progress:
            for chunk in stream:
                tap = VectorTap(args.embed, n_layers_of(model)) if args.save_embeddings else None
                probs, n_tokens, _ = predict_in_order(
                    model, tok, [e.text for e in chunk], max_length=max_length,
                    batch_size=args.batch_size, precision=precision,
                    accelerator=accelerator, progress=progress, tap=tap)
                part = SplitPredictions(build_frame(chunk, info.scheme, probs, n_tokens),
                                        info.scheme)
                if writer is not None:
                    writer.write(part)
                if vec_writer is not None:
                    vec_writer.write(tap.vectors)
                ys.append(part.y)
                ps.append(probs)
    except BaseException:
        for w in writers:
            w.abort()
        raise
    for w in writers:
        w.close()
    if not ys:
        raise data.DataError("no reviews to evaluate")
    return np.concatenate(ys), np.concatenate(ps), None


def _print_results(args, info, y, p, preds, source, max_length, precision, accelerator) -> None:
    from reviewbert.analysis.sources import describe
    from reviewbert.model.metrics import (
        compute_metrics,
        confusion,
        format_confusion,
        format_metrics,
        three_label_view,
    )
    scheme = info.scheme
    res = compute_metrics(y, p, scheme.num_labels)
    cm = confusion(y, p, scheme.num_labels)
    three = three_label_view(y, p) if scheme.num_labels == 5 else None
    check = preds.meta.get("fp32_check") if preds is not None else None
    cached = preds.cached if preds is not None else False
    print(f"checkpoint {info.path} ({scheme.num_labels} labels, base {info.base_model})")
    print(f"split {args.split}: {res['n']} reviews ({describe(source)}), max_length {max_length}")
    line = f"precision {precision}"
    if check:
        line += (f" (a sample of {check['n']} re-scored in fp32: {check['agree']} "
                 f"same class, {check['agree'] / check['n']:.1%})")
    if preds is not None and preds.folder is not None:
        line += f"; {'read from' if cached else 'saved to'} the cache {preds.folder}"
    print(line)
    print(format_metrics(res))
    if res.get("auc_note"):
        print(f"auc: {res['auc_note']}")
    print(format_confusion(cm, scheme.names))
    if three is not None:
        print(f"3-label view (probabilities merged: 1-2 / 3 / 4-5 stars): "
              f"{format_metrics(three)}")
    if args.save_predictions:
        print(f"predictions written to {args.save_predictions}")
    if args.save_embeddings:
        print(f"sentence vectors ({args.embed.pooling}, layer {args.embed.layer}) written to "
              f"{args.save_embeddings}")
    if args.json:
        print(json.dumps({"checkpoint": str(info.path), "split": args.split, "n": res["n"],
                          "labels": list(scheme.names),
                          "metrics": {k: res.get(k) for k in
                                      ("loss", "auc", "accuracy", "relaxed_accuracy")},
                          "auc_note": res.get("auc_note"),
                          "confusion_matrix": cm, "three_label": three, "precision": precision,
                          "processes": 1 if accelerator is None else accelerator.num_processes,
                          "fp32_check": check, "cached": cached,
                          "cache": None if preds is None or preds.folder is None
                          else str(preds.folder),
                          "predictions": args.save_predictions,
                          "embeddings": args.save_embeddings}))
