"""The training loop, top to bottom: :func:`train` -> ``setup`` (training/setup.py: resume
state, data tokenized once, model, optimizer, Accelerate, run folder) -> per epoch
:func:`train_epoch` (steps), :func:`evaluate_epoch` (train subset, validation, test) and
:func:`record_epoch` (metrics.jsonl, best/, last/). The steps share one ``Run``
(training/run.py). ``TrainHooks`` (training/hooks.py) see every step and epoch; the default
ones write steps.jsonl and, with ``--report-to tensorboard``, TensorBoard events.

Why it is fast (bench/train_throughput.py compares it with HF ``Trainer`` padding every
review to 256 tokens in batches of 6, as the seed project did):

- reviews are tokenized once, before the first epoch;
- each batch is padded to its own longest review, not to ``max_length``;
- batches group reviews of similar length (shuffle, cut into mega-batches of
  50 batches, sort each by length rank within its class, shuffle the batch
  order), like HF ``group_by_length`` but with the classes mixed in every
  batch, so little of a batch is padding and accuracy per epoch is kept
  (training/sampler.py);
- attention runs through PyTorch's fused SDPA kernel; evaluation runs under
  ``torch.inference_mode`` and walks reviews sorted by length;
- the per-step loss is read back from the device about once a second, in one
  batch, not at every step.

The model is unchanged: one linear classifier on BERT's pooled [CLS].

The same file runs on one CPU, one GPU, or several processes under
``accelerate launch`` / ``torchrun`` (Accelerate does the device placement, DDP,
mixed precision and gathering; only the main process writes files).
"""
from __future__ import annotations

import math
import os
import time

import numpy as np
import torch

from reviewbert.config import TrainConfig
from reviewbert.errors import CheckpointError, DiskFullError
from reviewbert.fsio import atomic_write_json, fault_point, is_disk_full
from reviewbert.model.batch_predict import predict_probs
from reviewbert.model.checkpoint import save_checkpoint_atomic
from reviewbert.model.metrics import compute_metrics, format_metrics
from reviewbert.training.datamap import INDEX_KEY
from reviewbert.training.hooks import TrainHooks, call_hooks, end_hooks
from reviewbert.training.optim import lr_factor
from reviewbert.training.resume import save_training_state
from reviewbert.training.run import SPLITS, Run, build_meta
from reviewbert.training.runs import append_metrics, read_status, run_has_state, write_status
from reviewbert.training.setup import make_accelerator, setup


def train(cfg: TrainConfig, out_dir, *, resume: bool = False, splits=None, accelerator=None,
          log=print, hooks: list[TrainHooks] | None = None, record_datamap: bool = True) -> dict:
    """Train per ``cfg`` into run folder ``out_dir``; returns the final reviewbert.json dict.

    ``splits`` (a data.Splits) skips reading files (tests); otherwise they are
    built from ``cfg.data``, or, on resume, rebuilt from the run's reviewbert.json.
    ``hooks`` run beside the default ones (steps.jsonl, ``report_to``).
    ``record_datamap`` (default on) writes the data map, datamap.safetensors
    (training/datamap.py); off only for bench/layers_datamap.py's paired baseline.
    A failure before or during training is recorded in status.json ("failed",
    with the error as message) and re-raised.
    """
    if accelerator is None:
        accelerator = make_accelerator(cfg, out_dir)
    if not resume and run_has_state(out_dir):
        raise CheckpointError(f"{out_dir} already holds a run: pass --resume to continue it, "
                              "or choose another --out")
    try:
        return _train(cfg, out_dir, resume, splits, accelerator, log, list(hooks or []),
                      record_datamap)
    except BaseException as e:
        full = not isinstance(e, DiskFullError) and is_disk_full(e)
        if full:  # a full disk outside a checkpoint save (metrics, steps, status): one clear error
            e = DiskFullError(f"the disk is full (no space left on device) while writing "
                              f"{getattr(e, 'filename', None) or out_dir}: last/ keeps the last "
                              "saved state. Free some space, then continue with --resume")
        if accelerator.is_main_process:
            _record_failure(out_dir, e, resume)
        if full:
            raise e from None
        raise


def _record_failure(out_dir, e: BaseException, resume: bool) -> None:
    """status.json says why the run ended: "failed" with the error, "stopped" on Ctrl-C; a
    resume that failed before training leaves the run stopped (resumable) and says why."""
    st = read_status(out_dir) or {}
    if resume and st.get("state") == "stopped" and not isinstance(e, KeyboardInterrupt):
        try:
            write_status(out_dir, {**st, "message": f"resume failed: {type(e).__name__}: {e}"})
        except OSError:
            pass
    elif st.get("state") not in ("stopped", "failed", "finished"):
        interrupted = isinstance(e, KeyboardInterrupt)
        try:  # on a full disk even this small file may not fit
            write_status(out_dir, {**st, "state": "stopped" if interrupted else "failed",
                                   "eta_seconds": None, "pid": os.getpid(),
                                   "message": "interrupted" if interrupted
                                   else f"{type(e).__name__}: {e}"})
        except OSError:
            pass


def _train(cfg, out_dir, resume, splits, accelerator, log, hooks, record_datamap) -> dict:
    run = setup(cfg, out_dir, resume, splits, accelerator, log, hooks, record_datamap)
    end = "failed"
    run.stop.install()
    try:
        for epoch in range(run.epochs_done, cfg.epochs):
            if train_epoch(run, epoch):  # stopped mid-epoch; last/ holds this step
                end = "stopped"
                return build_meta(run)
            results = evaluate_epoch(run, epoch)
            record_epoch(run, epoch, results)
            if stop_requested(run) and run.epochs_done < cfg.epochs:
                run.progress.status(
                    "stopped", run.step, run.epochs_done,
                    f"stopped after epoch {run.epochs_done}; continue with --resume")
                end = "stopped"
                return build_meta(run)
        end = "finished"
        end_hooks(run, end)  # steps.jsonl complete before status says finished
    finally:
        run.stop.restore()
        run.progress.bar.close()
        if end != "finished":
            end_hooks(run, end)

    best = run.best
    run.progress.status("finished", run.step, cfg.epochs,
                        f"best epoch {best['epoch']}: validation accuracy "
                        f"{100 * (best['validation'].get('accuracy') or 0):.1f}%"
                        if best else "done")
    run.accelerator.wait_for_everyone()
    return build_meta(run)


def save_last(run: Run, epochs_done: int, batches_done: int) -> None:
    """last/: weights, tokenizer, AdamW moments, RNG and counters (the resume point)."""
    call_hooks(run, "before_save", {"kind": "last", "epoch": epochs_done, "step": run.step})
    # every process: the data map's sums so far are reduced over processes
    partial = run.datamap.partial_writer(run.accelerator, batches_done) if run.datamap \
        else (lambda d: None)
    if run.main:
        counters = {"epochs_done": epochs_done, "batches_done": batches_done, "step": run.step,
                    "num_processes": run.accelerator.num_processes, "best": run.best}
        save_checkpoint_atomic(
            run.unwrapped, run.tokenizer, run.paths.last,
            meta=build_meta(run, {"kind": "last", "epochs_done": epochs_done, "step": run.step}),
            write_extra=lambda d: (save_training_state(d, run.optimizer, counters,
                                                       run.accelerator.scaler), partial(d)))
    run.accelerator.wait_for_everyone()


def save_best(run: Run, epoch: int) -> None:
    """best/: the weights of the best epoch so far (``epoch`` 0-based)."""
    call_hooks(run, "before_save", {"kind": "best", "epoch": epoch + 1, "step": run.step})
    if run.main:
        save_checkpoint_atomic(run.unwrapped, run.tokenizer, run.paths.best,
                               meta=build_meta(run, {"kind": "best", "epoch": epoch + 1,
                                                     "step": run.step}))


def stop_requested(run: Run) -> bool:
    flag = run.stop.event.is_set()
    if run.accelerator.num_processes == 1:
        return flag
    # every process must stop at the same step, or DDP would wait forever
    t = torch.tensor([1.0 if flag else 0.0], device=run.accelerator.device)
    return run.accelerator.reduce(t, reduction="max").item() > 0


def training_loss(run: Run, batch: dict) -> torch.Tensor:
    """One batch's loss, the forward under the Accelerator's autocast (bf16/fp16 when
    mixed precision is on, a no-op otherwise); the loss itself in fp32."""
    labels = batch.pop("labels")
    rows = batch.pop(INDEX_KEY, None)
    with run.accelerator.autocast():
        logits = run.model(**batch).logits
    if rows is not None and run.datamap is not None:  # the data map, from this very forward
        run.datamap.observe(logits, rows)
    return run.loss_fn(logits.float(), labels)


def set_train_mode(run: Run) -> None:
    run.model.train()
    if run.cfg.freeze_encoder:  # features, not fine-tuning: no dropout inside BERT
        run.unwrapped.base_model.eval()


def train_epoch(run: Run, epoch: int) -> bool:
    """The optimizer steps of epoch ``epoch`` (0-based; after a mid-epoch resume, the
    rest of it). Returns True if it stopped on request: last/ then holds this step."""
    cfg, acc, progress = run.cfg, run.accelerator, run.progress
    run.sampler.epoch = epoch  # the shuffle is a function of (seed, epoch)
    set_train_mode(run)
    loader = run.train_dl
    if run.batches_done:  # resumed mid-epoch: same order, skip what was done
        loader = acc.skip_first_batches(run.train_dl, run.batches_done)
    progress.bar.set_description(f"epoch {epoch + 1}/{cfg.epochs}")
    loss_sum, loss_n = torch.zeros((), device=acc.device), 0
    t_step, c_step = time.time(), time.process_time()
    for batch in loader:
        f = lr_factor(run.step, cfg, run.steps_per_epoch, run.total_steps)
        for g in run.optimizer.param_groups:
            g["lr"] = g["base_lr"] * f
        loss = training_loss(run, batch)
        acc.backward(loss)
        if cfg.max_grad_norm:
            acc.clip_grad_norm_(run.model.parameters(), cfg.max_grad_norm)
        run.optimizer.step()
        run.optimizer.zero_grad(set_to_none=True)
        run.step += 1
        run.batches_done += 1
        loss = loss.detach()
        loss_sum += loss
        loss_n += 1
        now = time.time()
        progress.train_s += now - t_step
        progress.train_cpu_s += time.process_time() - c_step
        progress.bar.update(1)
        if loss_n % 10 == 0:
            progress.bar.set_postfix(loss=f"{loss_sum.item() / loss_n:.3f}", refresh=False)
        progress.status("running", run.step, epoch, f"training epoch {epoch + 1}", force=False)
        call_hooks(run, "after_step", {
            "epoch": epoch + 1, "step": run.step, "batch": run.batches_done,
            "steps_per_epoch": run.steps_per_epoch, "total_steps": run.total_steps,
            "loss": loss, "lr": cfg.lr_bert * f, "time": now})
        if stop_requested(run):
            save_last(run, epoch, run.batches_done)
            progress.status("stopped", run.step, epoch,
                            f"stopped at step {run.step}; continue with --resume")
            run.say(f"stopped at step {run.step}; saved {run.paths.last}")
            return True
        if cfg.save_every_steps and run.step % cfg.save_every_steps == 0 \
                and run.batches_done < run.steps_per_epoch:
            save_last(run, epoch, run.batches_done)
        t_step, c_step = time.time(), time.process_time()
    run.batches_done = 0
    if run.datamap is not None:
        run.datamap.finish_epoch(run.accelerator, run.main)
    return False


def evaluate_epoch(run: Run, epoch: int) -> dict:
    """{split: metrics} on the train subset, validation and test."""
    run.progress.status("running", run.step, epoch, f"evaluating epoch {epoch + 1}")
    fault_point("evaluate")  # (tests only: a kill inside the evaluation)
    t_eval = time.time()
    k = run.scheme.num_labels
    results = {}
    for name in SPLITS:
        if name in run.eval_dls:
            y, p = predict_probs(run.unwrapped, run.eval_dls[name], run.accelerator)
            results[name] = metric_fields(compute_metrics(y, p, k))
        else:
            results[name] = metric_fields(compute_metrics([], np.zeros((0, k)), k))
    run.progress.eval_s = time.time() - t_eval
    return results


def record_epoch(run: Run, epoch: int, results: dict) -> None:
    """metrics.jsonl, then best/ (if better), last/ and reviewbert.json; then the hooks."""
    if run.main:
        append_metrics(run.out_dir, [{"epoch": epoch + 1, "split": name, **results[name],
                                      "step": run.step, "time": round(time.time(), 3)}
                                     for name in SPLITS])
        run.progress.bar.write(f"epoch {epoch + 1}: " + "  |  ".join(
            f"{n} {format_metrics(results[n])}" for n in SPLITS))
    # metrics first, then checkpoints: if we die in between, resume redoes the
    # epoch and truncate_metrics drops its line, so the history has no holes.
    is_best = better(results["validation"], (run.best or {}).get("validation"))
    if is_best:
        run.best = {"epoch": epoch + 1, "step": run.step, **results}
        save_best(run, epoch)
    save_last(run, epoch + 1, 0)
    if run.main:
        atomic_write_json(run.paths.meta, build_meta(run))
    run.epochs_done = epoch + 1
    # the rate of the epoch's last step
    f = lr_factor(max(run.step - 1, 0), run.cfg, run.steps_per_epoch, run.total_steps)
    call_hooks(run, "after_epoch", {"epoch": epoch + 1, "epochs": run.cfg.epochs,
                                    "step": run.step, "lr": run.cfg.lr_bert * f,
                                    "time": time.time(), **results, "best": run.best,
                                    "is_best": is_best})


def better(new: dict, old: dict | None) -> bool:
    """Best = higher validation accuracy; a tie goes to the lower validation loss."""
    if old is None:
        return True
    na, oa = new.get("accuracy") or -1.0, old.get("accuracy") or -1.0
    if na != oa:
        return na > oa
    return (new.get("loss") or math.inf) < (old.get("loss") or math.inf)


def metric_fields(m: dict) -> dict:
    keep = ("loss", "auc", "accuracy", "relaxed_accuracy", "n", "auc_note")
    return {k: m[k] for k in keep if k in m}
