"""Everything a run needs before its first step, as named steps that :func:`setup` calls in
order: resume state -> data (balanced splits, tokenized once) -> teachers -> model ->
optimizer -> batches -> Accelerate -> the run folder. The order is also the order of
RNG use, which an exact resume relies on: change it and a resumed run no longer gives
the weights of one that never stopped (tests/reliability/test_resume.py)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from reviewbert import data
from reviewbert.config import TrainConfig
from reviewbert.errors import CheckpointError, ConfigError
from reviewbert.fsio import atomic_write_json
from reviewbert.model.batch_predict import EncodedDataset, PadCollator, encode_texts, eval_loader
from reviewbert.model.checkpoint import (
    clean_failed_saves,
    load_checkpoint,
    load_for_training,
    load_tokenizer,
    read_meta,
    recover_checkpoint,
)
from reviewbert.model.device import (
    describe_device,
    describe_mixed_precision,
    pick_device,
    prepare_cuda,
    resolve_mixed_precision,
    set_training_threads,
)
from reviewbert.model.labels import get_scheme
from reviewbert.training import datamap, distill, losses
from reviewbert.training.hooks import default_hooks
from reviewbert.training.optim import param_groups
from reviewbert.training.resume import STATE_JSON, load_training_state, restore_optimizer
from reviewbert.training.run import SPLITS, Run, build_meta
from reviewbert.training.runs import run_paths, truncate_metrics, truncate_steps
from reviewbert.training.sampler import LengthGroupedSampler
from reviewbert.training.status import PhaseStatus, Progress


def make_accelerator(cfg: TrainConfig, out_dir):
    """The run's Accelerator: device, processes, ``mixed_precision``, ``report_to``.

    cpu=True on a machine with no GPU: without it Accelerate ignores torchrun's
    WORLD_SIZE there and every process would train alone (gloo needs the hint).
    Accelerate keeps one state per process and refuses a second, different mixed
    precision; a search or a test trains several configs in one process, so that
    state is dropped first (as transformers' Trainer does; the process group stays).
    """
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    device = pick_device()
    mp = resolve_mixed_precision(cfg.mixed_precision, device)
    if AcceleratorState._shared_state.get("_mixed_precision", mp) != mp:
        AcceleratorState._reset_state()
    tracking = {} if cfg.report_to == "none" else \
        {"log_with": cfg.report_to, "project_dir": str(out_dir)}
    try:
        return Accelerator(mixed_precision=mp, cpu=device.type == "cpu", **tracking)
    except ValueError as e:  # e.g. fp16 without a GPU
        raise ConfigError(f"mixed_precision={cfg.mixed_precision}: {e}",
                          {"mixed_precision": str(e)}) from None


def setup(cfg: TrainConfig, out_dir, resume: bool, splits, accelerator, log,
          hooks: list | None = None, record_datamap: bool = True) -> Run:
    """Resume state -> data (tokenized once) -> model -> optimizer -> Accelerate ->
    the run folder (status "running", default hooks). RNG use is in this order."""
    from accelerate.utils import set_seed
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside ours at every save

    main = accelerator.is_main_process
    say = log if main else (lambda *a, **k: None)
    set_training_threads(accelerator)
    prepare_cuda(accelerator.device)
    scheme = get_scheme(cfg.labels)
    state, tensors, old_meta = read_resume_state(out_dir, resume, accelerator, say)

    set_seed(cfg.seed)
    tokenizer = load_tokenizer(str(run_paths(out_dir).last) if state else cfg.base_model)
    splits, data_cfg = load_splits(cfg, splits, scheme, tokenizer, state, old_meta)
    report = getattr(splits, "report", None)
    if report is not None and not state:
        say(report.format())
    if not splits.train:
        raise ConfigError("the training split is empty")
    datasets, eval_sets = encode_splits(cfg, splits, tokenizer, say)
    class_use = data.ClassUse.of(
        cfg.class_balance, np.bincount(datasets["train"].labels, minlength=scheme.num_labels))
    teachers, soft = teacher_targets(cfg, data_cfg, scheme, splits, accelerator, say, out_dir)

    model = build_model(cfg, scheme, run_paths(out_dir).last if state else None)
    optimizer = torch.optim.AdamW(param_groups(model, cfg))
    if tensors is not None:  # AdamW's moments, on resume
        restore_optimizer(optimizer, tensors)
    sampler, train_dl, eval_dls = build_loaders(cfg, datasets, eval_sets, tokenizer, accelerator,
                                                class_use, soft, record_datamap)

    # Accelerate: device, DDP, mixed precision, sharded loaders
    model, optimizer, train_dl = accelerator.prepare(model, optimizer, train_dl)
    # prepare() patched forward with autocast (when mixed); take it off, so evaluation
    # stays fp32: training_loss runs the step under accelerator.autocast() instead
    unwrapped = accelerator.unwrap_model(model, keep_fp32_wrapper=False)
    eval_dls = {k: accelerator.prepare(v) for k, v in eval_dls.items()}
    step = state["step"] if state else 0
    restore_rng_and_scaler(cfg, accelerator, state, tensors, step)

    run = Run(cfg=cfg, out_dir=Path(out_dir), accelerator=accelerator, say=say, scheme=scheme,
              tokenizer=tokenizer, datasets=datasets, eval_dls=eval_dls, data_cfg=data_cfg,
              report=report, old_meta=old_meta, model=model, unwrapped=unwrapped,
              optimizer=optimizer, sampler=sampler, class_use=class_use,
              loss_fn=losses.class_loss(
                  scheme.num_labels, class_use.weights, cfg.ordinal_sigma, accelerator.device,
                  teacher_probs=soft, train_labels=datasets["train"].labels,
                  distill_weight=cfg.distill_weight),
              teachers=teachers, train_dl=train_dl, steps_per_epoch=len(train_dl),
              total_steps=len(train_dl) * cfg.epochs, device_desc=device_line(accelerator),
              epochs_done=state["epochs_done"] if state else 0,
              batches_done=state["batches_done"] if state else 0, step=step,
              best=(state or {}).get("best") or (old_meta.get("best") if state else None))
    run.datamap = datamap.open_recorder(run, state, splits.train) if record_datamap else None
    open_run_folder(run, bool(state), hooks)
    return run


def read_resume_state(out_dir, resume: bool, accelerator, say) -> tuple[dict | None,
                                                                          dict | None, dict]:
    """(counters, tensors, the run's reviewbert.json) from last/ on resume, else
    (None, None, {}). First undoes what a killed save left: a crash between a save's two
    renames, or a half-written temporary folder (a model's size each)."""
    if not resume:
        return None, None, {}
    rp = run_paths(out_dir)
    for folder in (rp.last, rp.best):
        recover_checkpoint(folder)
        if accelerator.is_main_process:
            clean_failed_saves(folder)
    old_meta = read_meta(out_dir, strict=False)
    state = tensors = None
    if (rp.last / STATE_JSON).exists():
        state, tensors = load_training_state(rp.last)
    else:
        say(f"{rp.last} has no resume state: starting {out_dir} from the beginning")
    if state and state.get("num_processes", 1) != accelerator.num_processes:
        raise CheckpointError(
            f"run was saved with {state['num_processes']} processes, resuming with "
            f"{accelerator.num_processes}: the mid-epoch position would not match")
    return state, tensors, old_meta


def load_splits(cfg, splits, scheme, tokenizer, state, old_meta):
    """(splits, reviewbert.json "data"): given, the resumed run's own, or read from cfg.data."""
    if splits is not None:
        return splits, None
    if state and old_meta.get("data"):  # the very split the run started with
        return data.splits_from_meta(old_meta, tokenizer=tokenizer), old_meta["data"]
    if not cfg.data:
        raise data.DataError("no data files given (--data FILE)")
    kw = dict(seed=cfg.split_seed, fractions=cfg.fractions, class_balance=cfg.class_balance,
              max_per_class=cfg.max_per_class, min_tokens=cfg.min_tokens,
              options=data.ReadOptions(text_column=cfg.text_column,
                                       rating_column=cfg.rating_column,
                                       title_column=cfg.title_column,
                                       prepend_title=cfg.prepend_title))
    return (data.build_splits(cfg.data, scheme, tokenizer=tokenizer, **kw),
            data.data_config(cfg.data, scheme, **kw))


def encode_splits(cfg, splits, tokenizer, say) -> tuple[dict, dict]:
    """Every split tokenized once; plus the evaluation sets (train: a fixed subset)."""
    def encode(examples):
        return EncodedDataset(encode_texts(tokenizer, [e.text for e in examples], cfg.max_length),
                              [e.label for e in examples])

    t0 = time.time()
    datasets = {name: encode(getattr(splits, name)) for name in SPLITS}
    if cfg.train_eval_max and len(datasets["train"]) > cfg.train_eval_max:
        # a fixed subset, so the train curve compares like with like across epochs
        pick = np.random.default_rng(cfg.seed).choice(len(datasets["train"]), cfg.train_eval_max,
                                                      replace=False)
        tr = datasets["train"]
        eval_sets = {"train": EncodedDataset([tr.ids[i] for i in pick],
                                             [tr.labels[i] for i in pick])}
    else:
        eval_sets = {"train": datasets["train"]}
    eval_sets.update(validation=datasets["validation"], test=datasets["test"])
    say(f"tokenized {sum(len(d) for d in datasets.values())} reviews in {time.time() - t0:.1f}s "
        f"(mean {np.mean(datasets['train'].lengths):.0f} tokens, max_length {cfg.max_length})")
    return datasets, eval_sets


def teacher_targets(cfg, data_cfg, scheme, splits, accelerator, say, out_dir):
    """(describe_teachers(), [n_train, labels] mean teacher probabilities), or (None, None)
    without teachers. Teachers on another split are a ConfigError (training.distill)."""
    if not cfg.teachers:
        return None, None
    try:
        infos = distill.check_teachers(cfg.teachers, data_cfg, scheme.num_labels)
    except distill.TeacherError as e:
        raise ConfigError(str(e), {"teachers": str(e)}) from e
    t0 = time.time()
    texts = [e.text for e in splits.train]
    status = PhaseStatus(out_dir, len(texts) * len(infos),
                         f"distillation: {len(infos)} teacher(s) scoring the training reviews",
                         enabled=accelerator.is_main_process)
    with distill.fork_rng():  # scoring must not move the run's RNG (dropout, shuffles)
        probs = distill.teacher_probs(infos, texts, accelerator.device,
                                      batch_size=cfg.eval_batch_size,
                                      show_progress=accelerator.is_main_process,
                                      on_progress=status)
    say(f"distillation: {len(infos)} teacher(s) scored {len(probs)} training reviews in "
        f"{time.time() - t0:.0f}s; target = {cfg.distill_weight:g} x teachers + "
        f"{1 - cfg.distill_weight:g} x label")
    return distill.describe_teachers(infos), probs


def build_model(cfg: TrainConfig, scheme, last: Path | None):
    """The classifier: last/'s weights on resume, else a fresh head on the base encoder
    (its initialisation draws from the RNG seeded above)."""
    if last is not None:
        model, _, _ = load_checkpoint(last, device=torch.device("cpu"))
    else:
        model, _ = load_for_training(cfg.base_model, scheme)
    # training_loss computes the loss, not the model: record the kind it would have set
    model.config.problem_type = "single_label_classification"
    if cfg.freeze_encoder:
        for p in model.base_model.parameters():
            p.requires_grad_(False)
    return model


def build_loaders(cfg, datasets, eval_sets, tokenizer, accelerator, class_use, soft,
                  indexed: bool = False):
    """(sampler, training loader, evaluation loaders): length-grouped, class-mixed steps;
    with distillation the batches carry review indices (DistillLoss holds labels and
    targets); ``indexed`` adds each review's row as ``review_index`` (the data map)."""
    sampler = LengthGroupedSampler(datasets["train"].lengths,
                                   cfg.batch_size * accelerator.num_processes,
                                   seed=cfg.seed, grouped=cfg.group_by_length,
                                   labels=datasets["train"].labels,
                                   resample_per_class=class_use.draw_per_class)
    train_set = datasets["train"]
    if soft is not None:
        train_set = EncodedDataset(train_set.ids, range(len(train_set)))
    # Each iteration over a DataLoader draws a worker seed from its generator; a
    # private one keeps the global RNG (dropout) identical between a resumed run
    # and one that never stopped.
    collate = PadCollator(tokenizer.pad_token_id)
    if indexed:
        train_set, collate = datamap.indexed_loader_parts(train_set, collate)
    train_dl = DataLoader(train_set, batch_size=cfg.batch_size, sampler=sampler,
                          collate_fn=collate,
                          num_workers=cfg.num_workers,
                          generator=torch.Generator().manual_seed(cfg.seed))
    eval_dls = {k: eval_loader(v, cfg.eval_batch_size, tokenizer.pad_token_id, cfg.num_workers)
                for k, v in eval_sets.items() if len(v)}
    return sampler, train_dl, eval_dls


def restore_rng_and_scaler(cfg, accelerator, state, tensors, step: int) -> None:
    """The RNG where last/ left it (exact resume), else a seed per process (different
    dropout on each); the fp16 loss scaler's state."""
    if state and accelerator.is_main_process and "rng/torch_cpu" in tensors:
        torch.set_rng_state(tensors["rng/torch_cpu"])
        if "rng/cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng/cuda"])
    else:
        torch.manual_seed(cfg.seed + 1000 * accelerator.process_index + step)
    if state and state.get("scaler") and accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(state["scaler"])


def device_line(accelerator) -> str:
    """reviewbert.json's "device": e.g. "CPU (2 threads), bf16 autocast (AMX-BF16)"."""
    desc = describe_device(accelerator.device)
    if accelerator.num_processes > 1:
        desc += f" x {accelerator.num_processes} processes"
    if accelerator.mixed_precision != "no":
        desc += f", {describe_mixed_precision(accelerator)}"
    return desc


def open_run_folder(run: Run, resumed: bool, hooks: list | None) -> None:
    """metrics.jsonl and steps.jsonl cut back to last/ (resume), reviewbert.json written,
    the hooks in place, status "running"."""
    rp, cfg = run.paths, run.cfg
    if run.main:
        rp.root.mkdir(parents=True, exist_ok=True)
        truncate_metrics(run.out_dir, run.epochs_done)  # resume: forget epochs not in last/
        truncate_steps(run.out_dir, run.step)           # ... and steps
        atomic_write_json(rp.meta, build_meta(run))
        run.say(f"device: {run.device_desc}; {len(run.datasets['train'])} train reviews, "
                f"{run.steps_per_epoch} steps/epoch x {cfg.epochs} epochs")
        if resumed:
            run.say(f"resuming {run.out_dir} at step {run.step} (epoch {run.epochs_done + 1}, "
                    f"batch {run.batches_done}/{run.steps_per_epoch})")
    run.hooks = default_hooks(run) + list(hooks or [])
    run.progress = Progress(run.out_dir, run.main, run.total_steps, run.step, cfg.epochs,
                            cfg.batch_size * run.accelerator.num_processes)
    run.progress.status("running", run.step, run.epochs_done, "starting")
