"""Command line: ``python -m reviewbert {train,evaluate,predict} ...``.

    python -m reviewbert train --data FILE [--data FILE ...] --labels 5 --out checkpoints/NAME
    python -m reviewbert train --config RUN/train_config.json --out RUN [--queue] [--FLAG ...]
    python -m reviewbert train --out checkpoints/NAME --resume
    python -m reviewbert evaluate --checkpoint checkpoints/NAME [--data FILE ...] [--split test|all]
                                  [--save-predictions FILE.csv|FILE.parquet] [--json]
    python -m reviewbert report --checkpoint checkpoints/NAME --out report.html
    python -m reviewbert predict --checkpoint checkpoints/NAME "review text" [--json]
    python -m reviewbert export --checkpoint checkpoints/NAME --out checkpoints/demo [--dtype float16]

``train`` and ``evaluate`` also run unchanged under ``accelerate launch`` and ``torchrun``
(``evaluate`` then splits the reviews across the processes).
Expected failures (missing or broken checkpoint, unusable data, bad options,
empty text) print one line to stderr and exit with status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import typing
from dataclasses import MISSING, fields
from pathlib import Path


class UsageError(Exception):
    """Bad command-line input; printed as one line, exit status 2."""


# ------------------------------------------------------------------- parser
def _add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, help and default taken from the dataclass,
    listed by the field's group (basic, advanced, data, internal) in --help.

    Defaults are SUPPRESSed in the namespace so we can tell which flags were
    given: they override --config, and on --resume only those may override the
    stored hyperparameters.
    """
    from .train import GROUPS, TrainConfig, list_fields
    titles = {"basic": "basic hyperparameters", "advanced": "advanced hyperparameters",
              "data": "data", "internal": "speed and bookkeeping"}
    sections = {g: p.add_argument_group(titles[g]) for g in GROUPS}
    hints = typing.get_type_hints(TrainConfig)
    for f in fields(TrainConfig):
        meta = dict(f.metadata)
        default = f.default if f.default is not MISSING else f.default_factory()
        flag = "--" + f.name.replace("_", "-")
        kw = {"dest": f.name, "default": argparse.SUPPRESS}
        helptext = meta.pop("help", "")
        g = sections[meta.pop("group")]
        if f.name in list_fields():  # --data FILE, --teachers DIR: repeat the flag
            metavar = "FILE" if f.name == "data" else "DIR"
            g.add_argument(flag, action="append", metavar=metavar, help=helptext, **kw)
            continue
        typ = hints[f.name]
        args = typing.get_args(typ)
        base = next((a for a in args if a is not type(None)), typ) if args else typ
        if base is bool:
            g.add_argument(flag, action=argparse.BooleanOptionalAction,
                           help=f"{helptext} (default: {default})", **kw)
            continue
        if typing.get_origin(base) is tuple:
            base = float
        shown = " ".join(map(str, default)) if isinstance(default, tuple) else default
        if default is not None:
            helptext += f" (default: {shown})"
        metavar = "{" + ",".join(map(str, meta["choices"])) + "}" if "choices" in meta else "N"
        if "choices" not in meta and base is not int:
            metavar = "NAME" if base is str else "X"
        g.add_argument(flag, type=base, metavar=metavar, help=helptext, **kw, **meta)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m reviewbert",
        description="Fine-tune BERT to predict Amazon review stars; evaluate; predict.")
    sub = parser.add_subparsers(dest="command", required=True)

    t = sub.add_parser("train", help="fine-tune a model on review files",
                       description="Prints the data report, then a progress bar. Writes the run "
                                   "folder --out: reviewbert.json, status.json, metrics.jsonl, "
                                   "steps.jsonl, best/ and last/. Ctrl-C (SIGINT) or SIGTERM "
                                   "stops after the current step and saves last/; --resume "
                                   "continues.")
    t.add_argument("--out", required=True, metavar="DIR",
                   help="run folder, e.g. checkpoints/my-run")
    t.add_argument("--resume", action="store_true",
                   help="continue the stopped or killed run in --out from last/ "
                        f"(may change only: epochs, save-every-steps, eval-batch-size, "
                        f"train-eval-max, num-workers, report-to)")
    t.add_argument("--config", metavar="FILE",
                   help="JSON object of TrainConfig fields (as runs.write_config writes); "
                        "flags given on the command line override it")
    t.add_argument("--queue", action="store_true",
                   help="wait (status 'queued') until no other run trains on this device, "
                        "first come first served; cancel with SIGUSR1 (runs.cancel_run)")
    _add_config_flags(t)
    t.set_defaults(func=cmd_train)

    e = sub.add_parser("evaluate", help="metrics and confusion matrix of a checkpoint",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    e.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="checkpoint folder, or a run folder (then its best/)")
    e.add_argument("--data", action="append", metavar="FILE", default=None,
                   help="review file(s); for --split test they must be the training files "
                        "(default: the files recorded in the checkpoint's reviewbert.json)")
    e.add_argument("--split", choices=("test", "all"), default="test",
                   help="test: rebuild the checkpoint's own test split (same seed and options); "
                        "all: every row of the --data files after deduplication")
    e.add_argument("--batch-size", type=int, default=64)
    e.add_argument("--max-length", type=int, default=None,
                   help="default: the checkpoint's training max_length, else 256")
    e.add_argument("--precision", choices=("auto", "bf16", "fp32"), default="auto",
                   help="auto: bf16 autocast on a CPU with bf16 units (AMX-BF16/AVX512-BF16), "
                        "else fp32; training recorded its metrics in fp32")
    e.add_argument("--save-predictions", metavar="FILE", default=None,
                   help="write every review's text, true and predicted rating, class "
                        "probabilities and token count: Parquet if FILE ends in .parquet, "
                        "else CSV")
    e.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the prediction cache beside the checkpoint")
    e.add_argument("--json", action="store_true",
                   help="print one JSON object as the last line")
    e.set_defaults(func=cmd_evaluate)

    pr = sub.add_parser("predict", help="star rating of a review text",
                        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    pr.add_argument("--checkpoint", required=True, metavar="DIR",
                    help="checkpoint folder, or a run folder (then its best/)")
    pr.add_argument("text", nargs="+", help="review text(s)")
    pr.add_argument("--max-length", type=int, default=None,
                    help="default: the checkpoint's training max_length, else 256")
    pr.add_argument("--json", action="store_true", help="one JSON object per text")
    pr.set_defaults(func=cmd_predict)

    x = sub.add_parser("export", help="compact copy of a checkpoint to ship (e.g. the demo)",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    x.add_argument("--checkpoint", required=True, metavar="DIR",
                   help="checkpoint folder, or a run folder (then its best/)")
    x.add_argument("--out", required=True, metavar="DIR", help="destination folder")
    x.add_argument("--dtype", choices=("float16", "bfloat16", "float32"), default="float16",
                   help="weight dtype on disk (upcast to fp32 when loaded on CPU)")
    x.set_defaults(func=cmd_export)
    from . import search; search.add_parser(sub)
    from . import faithfulness; faithfulness.add_parser(sub)
    from . import report; report.add_parser(sub)
    return parser


# -------------------------------------------------------------------- train
def cmd_train(args) -> int:
    from .runs import device_slot, queue_device, read_status
    from .train import TrainConfig, resume_config, run_has_state, train
    given = {f.name: getattr(args, f.name) for f in fields(TrainConfig) if hasattr(args, f.name)}
    if args.config:
        given = {**_read_config(args.config), **given}  # explicit flags win
    if args.resume:
        cfg, ignored = resume_config(args.out, given)
        if ignored:
            print(f"--resume keeps the run's hyperparameters; ignoring: "
                  f"{', '.join('--' + k.replace('_', '-') for k in ignored)}", file=sys.stderr)
    else:
        if not given.get("data"):
            raise UsageError("train needs --data FILE (or --resume to continue a run)")
        cfg = TrainConfig(**given)
        if run_has_state(args.out):  # before waiting in the queue, not after
            from .model import CheckpointError
            raise CheckpointError(f"{args.out} already holds a run: pass --resume to continue "
                                  "it, or choose another --out")
    # `accelerate launch --mixed_precision bf16` should win over our default "auto"
    env_mp = os.environ.get("ACCELERATE_MIXED_PRECISION", "no")
    if cfg.mixed_precision in ("auto", "no") and env_mp in ("bf16", "fp16"):
        cfg.mixed_precision = env_mp
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if args.queue:
            raise UsageError("--queue is for one process, not under torchrun/accelerate launch")
        slot = contextlib.nullcontext(False)
    else:
        # without --queue: take the slot if free (queued runs then wait for us), never wait
        slot = device_slot(args.out, queue_device(), wait=args.queue)
    with slot:
        meta = train(cfg, args.out, resume=args.resume)
    st = read_status(args.out) or {}
    best = meta.get("best")
    if st.get("state") == "stopped":
        print(f"stopped; continue with: python -m reviewbert train --out {args.out} --resume")
        return 130
    if best and _is_main():
        from .metrics import format_metrics
        print(f"best epoch {best['epoch']} -> {Path(args.out) / 'best'}")
        for split in ("validation", "test"):
            print(f"  {split:10s} {format_metrics(best[split])}")
    return 0


def _read_config(path) -> dict:
    """A --config file: a JSON object of TrainConfig fields (unknown ones are an error)."""
    from .train import TrainConfig
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"--config {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"--config {path}: not JSON ({e})") from None
    if not isinstance(d, dict):
        raise UsageError(f"--config {path}: expected a JSON object of TrainConfig fields")
    unknown = sorted(set(d) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise UsageError(f"--config {path}: unknown field(s) {', '.join(unknown)}")
    return d


def _mark_failed(args, e: BaseException) -> None:
    """A launched train that fails before train() runs (bad config, queue refused) leaves
    status.json saying what launch() wrote for it: record the error instead. Only a
    status of this very process is touched, never a finished run's."""
    from .runs import read_status, write_status
    out = getattr(args, "out", None)
    st = read_status(out) if out and args.command == "train" else None
    if st and st.get("pid") == os.getpid() and st.get("state") in ("queued", "running"):
        write_status(out, {**st, "state": "failed", "eta_seconds": None,
                           "message": f"{type(e).__name__}: {e}"})


def _is_main() -> bool:
    return os.environ.get("RANK", "0") == "0"


# ----------------------------------------------------------------- evaluate
def cmd_evaluate(args) -> int:
    """Under ``accelerate launch`` (or torchrun) every process scores its share of the
    batches and the main process prints and writes; one process needs no Accelerator."""
    import numpy as np

    from . import data
    from .analysis import predict_split
    from .analysis.predictions import ExportWriter, SplitPredictions, build_frame, planned_reviews
    from .analysis.sources import CACHE_MAX_REVIEWS, all_reviews, describe, test_split
    from .evaluate import TqdmProgress, predict_in_order, resolve_precision
    from .metrics import (compute_metrics, confusion, format_confusion, format_metrics,
                          three_label_view)
    from .model import load_checkpoint

    accelerator = _eval_accelerator()
    main = accelerator is None or accelerator.is_main_process
    model, tok, info = load_checkpoint(args.checkpoint,
                                       accelerator.device if accelerator else None)
    meta, scheme = info.meta, info.scheme
    hp = meta.get("hyperparameters") or {}
    max_length = args.max_length or hp.get("max_length") or 256
    precision = resolve_precision(args.precision, accelerator.device if accelerator else model.device)
    if args.split == "test":
        if not meta.get("data"):
            raise UsageError(f"{info.path} records no training data, so its test split cannot be "
                             "rebuilt; use --split all --data FILE")
        reviews, source, warnings = test_split(meta, tok, args.data)
        if main:
            for w in warnings:
                print(f"warning: {w}", file=sys.stderr)
        stream = None
    else:
        if not args.data:
            raise UsageError("--split all needs --data FILE")
        report, stream, source = all_reviews(args.data, scheme, meta)
        reviews = None
        if report.unique_texts <= CACHE_MAX_REVIEWS:   # small enough to hold, score and cache
            reviews, stream = [e for chunk in stream for e in chunk], None
    preds, cached = None, False
    if reviews is not None:
        if not reviews:
            raise data.DataError("no reviews to evaluate")
        with TqdmProgress(planned_reviews(len(reviews), precision), "evaluating",
                          enabled=main) as progress:
            preds = predict_split(model, tok, info.path, reviews, scheme, max_length=max_length,
                                  precision=precision, batch_size=args.batch_size,
                                  progress=progress, source=source, accelerator=accelerator,
                                  use_cache=not args.no_cache)
        y, p, cached = preds.y, preds.probs, preds.cached
        if args.save_predictions and main:
            from .analysis import save_export
            save_export(preds, args.save_predictions)
    else:   # too many to hold: score chunk by chunk, write predictions as they come
        writer = ExportWriter(args.save_predictions) if args.save_predictions and main else None
        ys, ps = [], []
        try:
            with TqdmProgress(report.unique_texts, "evaluating", enabled=main) as progress:
                for chunk in stream:
                    probs, n_tokens, _ = predict_in_order(
                        model, tok, [e.text for e in chunk], max_length=max_length,
                        batch_size=args.batch_size, precision=precision,
                        accelerator=accelerator, progress=progress)
                    part = SplitPredictions(build_frame(chunk, scheme, probs, n_tokens), scheme)
                    if writer is not None:
                        writer.write(part)
                    ys.append(part.y)
                    ps.append(probs)
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is not None:
            writer.close()
        if not ys:
            raise data.DataError("no reviews to evaluate")
        y, p = np.concatenate(ys), np.concatenate(ps)
    if not main:
        return 0
    res = compute_metrics(y, p, scheme.num_labels)
    cm = confusion(y, p, scheme.num_labels)
    three = three_label_view(y, p) if scheme.num_labels == 5 else None
    check = preds.meta.get("fp32_check") if preds is not None else None
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
                          "predictions": args.save_predictions}))
    return 0


def _eval_accelerator():
    """An Accelerator when launched as several processes (accelerate launch, torchrun), else None.

    cpu=True on a machine without a GPU: Accelerate otherwise ignores WORLD_SIZE there
    (see train.py).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import Accelerator

    from .model import pick_device
    return Accelerator(cpu=pick_device().type == "cpu")


# ------------------------------------------------------------------ predict
def cmd_predict(args) -> int:
    from .evaluate import predict_texts
    from .model import load_checkpoint
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


# ------------------------------------------------------------------- export
def cmd_export(args) -> int:
    from . import model
    dest = model.export_checkpoint(args.checkpoint, args.out, dtype=args.dtype)
    size = sum(f.stat().st_size for f in Path(dest).iterdir() if f.is_file())
    print(f"exported {args.checkpoint} -> {dest} ({args.dtype}, {size / 1e6:.1f} MB)")
    return 0


# --------------------------------------------------------------------- main
def main(argv=None) -> int:
    from .data import DataError
    from .model import CheckpointError
    from .runs import RunCancelled
    from .train import ConfigError
    args = build_parser().parse_args(argv)
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # "Loading weights" bars would bury our output
    try:
        return args.func(args)
    except (CheckpointError, DataError, ConfigError, UsageError) as e:
        _mark_failed(args, e)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except RunCancelled as e:  # status.json already says "cancelled"
        print(str(e), file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
