"""Knowledge distillation: train one model on the averaged probabilities of several.

An ensemble of fine-tuned runs (other seeds, other settings) scores better than any
one of them, but the app serves one model, and the demo checkpoint must stay small.
Distillation (Hinton, Vinyals & Dean, 2015) trains one model of the same size (the
student) on a target that mixes each training review's own label with the
probabilities its teachers give that review:

    q(x, y) = α · mean_t p_t(x) + (1 − α) · onehot(y)

(the ordinal soft label in place of the one-hot when ``ordinal_sigma`` > 0), with the
cross-entropy against q as the loss (:class:`reviewbert.training.losses.DistillLoss`).

The teachers are checkpoints of earlier runs. They must have been trained on the
same split (same files and contents, split seed, fractions, read options, labels),
so that none of them has seen the student's validation or test reviews: a teacher
that had would leak them into the student's training target. :func:`check_teachers`
refuses any other. Their class balance may differ, because validation and test are
the same reviews for every ``class_balance``.

The teachers' probabilities are computed once per run, at its start, on the
training split (bf16 where the CPU or GPU has bf16 units: a training target, not a
reported figure). There is no trainer-side library for this: transformers'
``Trainer`` has no distillation loss, and the loss is four lines.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from reviewbert.errors import CheckpointError
from reviewbert.model.batch_predict import predict_in_order
from reviewbert.model.checkpoint import checkpoint_info, load_checkpoint
from reviewbert.progress import TqdmProgress
from reviewbert.training import runs

# reviewbert.json "data" keys that fix the validation and test reviews
SPLIT_KEYS = ("labels", "seed", "fractions", "max_per_class", "min_tokens", "options", "hash")


class TeacherError(ValueError):
    """A teacher that cannot teach this run (the message says which and why)."""


def _files(data_cfg: dict) -> list[tuple[str, str]]:
    return sorted((f.get("name", "?"), f.get("sha256", "?")) for f in data_cfg.get("files") or [])


def split_mismatch(teacher_data: dict | None, data_cfg: dict) -> str | None:
    """Why a teacher's recorded split differs from this run's (None when it is the same)."""
    if not teacher_data:
        return "it records no training data, so its split cannot be checked"
    if _files(teacher_data) != _files(data_cfg):
        names = ", ".join(n for n, _ in _files(teacher_data)) or "none"
        return f"it was trained on other files (or other contents): {names}"
    for key in SPLIT_KEYS:
        if teacher_data.get(key) != data_cfg.get(key):
            return f"its split differs in {key}: {teacher_data.get(key)!r}, " \
                   f"this run {data_cfg.get(key)!r}"
    return None


def check_teachers(paths: list[str], data_cfg: dict | None, num_labels: int) -> list:
    """The teachers' CheckpointInfo, or TeacherError naming the first that cannot teach."""
    if not data_cfg:
        raise TeacherError("distillation needs a run that reads its data from files, so "
                           "that the teachers' splits can be checked against it")
    infos = []
    for p in paths:
        try:
            info = checkpoint_info(p)
        except CheckpointError as e:
            raise TeacherError(f"teacher {p}: {e}") from e
        if info.scheme.num_labels != num_labels:
            raise TeacherError(f"teacher {p} predicts {info.scheme.num_labels} labels, this "
                               f"run {num_labels}")
        why = split_mismatch(info.meta.get("data"), data_cfg)
        if why:
            raise TeacherError(f"teacher {p} cannot teach this run: {why}. A teacher must "
                               "be trained on the same split, or it may have seen this run's "
                               "validation and test reviews")
        infos.append(info)
    return infos


def candidate_teachers(root, data_paths, labels: int | None = None) -> list[str]:
    """Run folders under ``root`` (trials included) that could teach a run on
    ``data_paths``: finished, with a best/ checkpoint, trained on files of the same
    names (and the same label count, when given). Their contents and split settings
    are checked at launch (:func:`check_teachers`); this is the Train page's list."""
    names = sorted(Path(p).name for p in data_paths)
    if not names:
        return []
    out = []
    for run in runs.list_runs(root, include_trials=True):
        meta = run.get("meta") or {}
        files = [name for name, _ in _files(meta.get("data") or {})]
        if (run.get("kind") != "search" and (run.get("status") or {}).get("state") == "finished"
                and (Path(run["path"]) / "best").is_dir() and files == names
                and (labels is None or meta.get("labels") == labels)):
            out.append(str(run["path"]))
    return out


def teacher_max_length(info) -> int:
    return int((info.meta.get("hyperparameters") or {}).get("max_length") or 256)


def teacher_probs(infos: list, texts: list[str], device, *, batch_size: int = 64,
                  show_progress: bool = True, on_progress=None) -> np.ndarray:
    """[n, labels] float32: the mean of the teachers' probabilities for ``texts``, each
    teacher reading them at its own max_length, under bf16 where that is fast; a
    progress bar with ETA per teacher, and ``on_progress(n)`` after each batch."""
    total = np.zeros((len(texts), infos[0].scheme.num_labels), dtype=np.float64)
    for i, info in enumerate(infos, 1):
        model, tok, _ = load_checkpoint(info.path, device=device)
        with TqdmProgress(len(texts), f"teacher {i}/{len(infos)} ({info.name})",
                          enabled=show_progress) as bar:
            def progress(n, bar=bar):
                bar(n)
                if on_progress is not None:
                    on_progress(n)
            probs, _, _ = predict_in_order(model, tok, texts,
                                           max_length=teacher_max_length(info),
                                           batch_size=batch_size, precision="auto",
                                           progress=progress)
        total += probs
        del model
    return (total / len(infos)).astype(np.float32)


def describe_teachers(infos: list) -> list[dict]:
    """For reviewbert.json: each teacher's folder and its best epoch's figures."""
    out = []
    for info in infos:
        best = info.meta.get("best") or {}
        out.append({"path": str(Path(info.path)), "name": info.name,
                    "validation": best.get("validation"), "test": best.get("test"),
                    "max_length": teacher_max_length(info),
                    "seed": (info.meta.get("hyperparameters") or {}).get("seed")})
    return out


def fork_rng():
    """Teacher scoring must not move the run's RNG (dropout, shuffles)."""
    return torch.random.fork_rng(devices=[])
