"""Fine-tune BERT to predict review stars: the hyperparameters and the training loop.

Read ``train()`` top to bottom: data -> tokenize once -> model -> optimizer ->
Accelerate -> epochs of (steps, evaluation on train/validation/test, save).

Why it is fast (the benchmark compares it with HF ``Trainer`` padding every
review to 256 tokens in batches of 6, as the seed project did):

- reviews are tokenized once, before the first epoch;
- each batch is padded to its own longest review, not to ``max_length``;
- batches group reviews of similar length (shuffle, cut into mega-batches of
  50 batches, sort each by length rank within its class, shuffle the batch
  order), like HF ``group_by_length`` but with the classes mixed in every
  batch, so little of a batch is padding and accuracy per epoch is kept;
- attention runs through PyTorch's fused SDPA kernel; evaluation runs under
  ``torch.inference_mode`` and walks reviews sorted by length.

The model is unchanged: one linear classifier on BERT's pooled [CLS].

The same file runs on one CPU, one GPU, or several processes under
``accelerate launch`` / ``torchrun`` (Accelerate does the device placement, DDP,
mixed precision and gathering; only the main process writes files).
"""
from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from . import __version__
from .evaluate import EncodedDataset, PadCollator, encode_texts, eval_loader, predict_probs
from .labels import get_scheme
from .metrics import compute_metrics, format_metrics
from .model import (DEFAULT_BASE_MODEL, META_FILE, CheckpointError, atomic_write_json,
                    describe_device, load_for_training, pick_device, recover_checkpoint,
                    save_checkpoint_atomic)
from .runs import (append_metrics, read_meta, read_status, run_paths, truncate_metrics,
                   write_status)

STATE_JSON = "training_state.json"
STATE_TENSORS = "training_state.safetensors"
META_FORMAT = "reviewbert/1"
SPLITS = ("train", "validation", "test")


class ConfigError(ValueError):
    """Hyperparameters that cannot work (the CLI prints the message, exit status 2)."""


def _h(text: str, **kw) -> dict:
    return {"help": text, **kw}


@dataclass
class TrainConfig:
    """Every knob of a run. The CLI flags, the training page and reviewbert.json
    ("hyperparameters") are all generated from / stored as this one dataclass."""
    # --- data (passed to data.build_splits) ---
    data: list[str] = field(default_factory=list, metadata=_h(
        "review file(s): JSON, JSONL or CSV; repeat the flag for several files"))
    labels: int = field(default=5, metadata=_h("5 (1-5 stars) or 3 (negative/neutral/positive)",
                                               choices=(5, 3)))
    text_column: str | None = field(default=None, metadata=_h("text column (default: guessed)"))
    rating_column: str | None = field(default=None, metadata=_h("rating column (default: guessed)"))
    title_column: str | None = field(default=None, metadata=_h("title column (default: guessed)"))
    prepend_title: bool = field(default=False, metadata=_h("prepend the review title to its text"))
    min_tokens: int = field(default=0, metadata=_h(
        "drop reviews shorter than this many tokens (the seed report used 100)"))
    max_per_class: int | None = field(default=None, metadata=_h(
        "cap on reviews per class before splitting (default: all of the smallest class)"))
    fractions: tuple[float, float, float] = field(default=(0.7, 0.1, 0.2), metadata=_h(
        "train/validation/test fractions", nargs=3))
    split_seed: int = field(default=42, metadata=_h("seed of the balanced split"))
    # --- model ---
    base_model: str = field(default=DEFAULT_BASE_MODEL, metadata=_h(
        "base encoder: HF hub name or local folder; the default is embedded (no network)"))
    max_length: int = field(default=256, metadata=_h("truncate reviews to this many tokens"))
    freeze_encoder: bool = field(default=False, metadata=_h(
        "train only the classifier on frozen BERT features (feature-based approach)"))
    # --- optimisation ---
    epochs: int = field(default=3, metadata=_h("training epochs"))
    batch_size: int = field(default=8, metadata=_h(
        "reviews per step and process (the seed used 6)"))
    # 5e-5, the usual BERT fine-tuning rate (the seed's 1e-5 was for the 5x larger
    # bert-base). bench/train_throughput.py, one epoch on 700 reviews, 3 seeds each,
    # 1,000 test reviews: batch 8 at 5e-5 with class-mixed length groups 42.7% (the
    # HF Trainer baseline at batch 6, 5e-5: 42.9%); batch 16 at 1e-4 36.4%, batch 8
    # at 1e-4 36.5%, batch 6 at 5e-5 without class mixing 39.7%.
    lr_bert: float = field(default=5e-5, metadata=_h("learning rate of the BERT encoder"))
    lr_classifier: float = field(default=1e-3, metadata=_h(
        "learning rate of the (freshly initialised) classifier, as in the seed"))
    weight_decay: float = field(default=0.01, metadata=_h(
        "AdamW weight decay (not applied to biases and LayerNorm weights)"))
    lr_decay: float = field(default=0.5, metadata=_h("multiply learning rates by this ..."))
    lr_step_epochs: int = field(default=5, metadata=_h("... every this many epochs (StepLR)"))
    layer_lr_decay: float = field(default=1.0, metadata=_h(
        "layer-wise LR decay: layer l of L gets lr_bert*decay^(L-l), embeddings l=0; 1.0 = off"))
    warmup_ratio: float = field(default=0.0, metadata=_h(
        "linear warm-up over this fraction of all steps (0 = none, as in the seed)"))
    max_grad_norm: float = field(default=1.0, metadata=_h("gradient clipping norm (0 = off)"))
    seed: int = field(default=42, metadata=_h("seed for initialisation, shuffling and dropout"))
    # --- speed / bookkeeping ---
    eval_batch_size: int = field(default=64, metadata=_h("batch size for evaluation"))
    train_eval_max: int = field(default=2000, metadata=_h(
        "evaluate the train split on a fixed random subset of at most this many reviews "
        "(0 = all); validation and test are always evaluated in full"))
    group_by_length: bool = field(default=True, metadata=_h(
        "batch reviews of similar length together (less padding)"))
    num_workers: int = field(default=0, metadata=_h(
        "DataLoader worker processes (batches are pre-tokenized, so 0 is usually best)"))
    mixed_precision: str = field(default="no", metadata=_h(
        "no, bf16 or fp16 (fp16 needs a GPU)", choices=("no", "bf16", "fp16")))
    save_every_steps: int = field(default=200, metadata=_h(
        "also save last/ every this many steps, so --resume continues mid-epoch (0 = epoch ends only)"))

    def __post_init__(self):
        self.data = [str(p) for p in (self.data or [])]
        self.fractions = tuple(float(f) for f in self.fractions)
        try:
            get_scheme(self.labels)  # only 5 or 3
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if self.mixed_precision not in ("no", "bf16", "fp16"):
            raise ConfigError(f"mixed_precision must be no, bf16 or fp16, got {self.mixed_precision!r}")
        if len(self.fractions) != 3 or abs(sum(self.fractions) - 1) > 1e-6:
            raise ConfigError(f"fractions must be three numbers summing to 1, got {self.fractions}")
        if self.epochs < 1 or self.batch_size < 1 or self.eval_batch_size < 1 \
                or self.max_length < 8:
            raise ConfigError("epochs and batch sizes must be >= 1, max_length >= 8")

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        """From reviewbert.json's "hyperparameters" (unknown keys from other versions ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


# Flags that may differ on --resume; everything else must match the stopped run.
RESUME_OVERRIDABLE = ("epochs", "save_every_steps", "eval_batch_size", "train_eval_max",
                      "num_workers")


# ------------------------------------------------------------------ batching
class LengthGroupedSampler(Sampler[int]):
    """Indices in a random order where consecutive batches have similar lengths.

    The order is a pure function of (seed, epoch): a resumed run replays the same
    epoch and skips the batches it already did. Set ``.epoch`` before iterating.
    ``group`` = batch_size * num_processes, the samples of one optimizer step
    across all processes, so every process gets a batch of similar length.

    With ``labels``, each step also mixes the classes. Review length goes with
    the rating (1-star reviews run longer than 5-star ones), so batches of
    neighbours in plain length order are mostly one class, and a run of such
    steps pulls the classifier from class to class: after one epoch on 700
    reviews that cost ~3 accuracy points against random batches of the same size
    (bench/train_throughput.py). Here a mega-batch is ordered by each review's
    length *rank within its class* (0 = shortest of its class ... 1 = longest),
    so a step takes the classes in proportion, each at a similar length quantile:
    nearly the padding saving, without the class runs.
    """

    def __init__(self, lengths: list[int], group: int, seed: int, grouped: bool = True,
                 mega_batches: int = 50, labels: list[int] | None = None):
        self.lengths, self.group, self.seed = lengths, group, seed
        self.grouped, self.mega = grouped, mega_batches
        self.labels = None if labels is None else np.asarray(labels)
        self.epoch = 0

    def __len__(self):
        return len(self.lengths)

    def _by_length(self, part: np.ndarray) -> np.ndarray:
        lengths = np.asarray(self.lengths)[part]
        if self.labels is None:
            return part[np.argsort(-lengths, kind="stable")]
        key = np.zeros(len(part))
        labels = self.labels[part]
        for c in np.unique(labels):
            members = np.flatnonzero(labels == c)
            ranks = np.argsort(np.argsort(-lengths[members], kind="stable"), kind="stable")
            key[members] = (ranks + 0.5) / len(members)
        return part[np.argsort(key, kind="stable")]

    def __iter__(self):
        rng = np.random.default_rng([self.seed, self.epoch])
        idx = rng.permutation(len(self.lengths))
        if self.grouped:
            size = self.group * self.mega
            idx = np.concatenate([self._by_length(idx[i:i + size])
                                  for i in range(0, len(idx), size)] or [idx])
            steps = [idx[i:i + self.group] for i in range(0, len(idx), self.group)]
            # sorted mega-batches would run long->short; shuffle the steps so the
            # model does not see a length (and so label) trend inside an epoch.
            # A short last step stays last.
            full = [s for s in steps if len(s) == self.group]
            tail = steps[len(full):]
            idx = np.concatenate([full[i] for i in rng.permutation(len(full))] + tail) \
                if steps else idx
        return iter(idx.tolist())


# ------------------------------------------------------------- optimisation
def layer_depth(name: str, num_layers: int) -> int:
    """0 for embeddings, l (1..L) for encoder layer l-1, L for the pooler."""
    if ".encoder.layer." in name:
        return int(name.split(".encoder.layer.")[1].split(".")[0]) + 1
    if ".embeddings." in name:
        return 0
    return num_layers


def param_groups(model, cfg: TrainConfig) -> list[dict]:
    """AdamW groups: classifier vs BERT (per layer if layer_lr_decay != 1).

    Biases and LayerNorm weights get no weight decay: decaying a LayerNorm gain
    toward 0 (or a bias toward 0) is not the "small weights" prior decay is for.
    Each group carries its ``names`` so optimizer state can be saved by name.
    """
    prefix = model.base_model_prefix + "."
    num_layers = model.config.num_hidden_layers
    groups: dict[tuple, dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if name.startswith(prefix):
            lr = cfg.lr_bert * cfg.layer_lr_decay ** (num_layers - layer_depth(name, num_layers))
        else:
            lr = cfg.lr_classifier
        no_decay = name.endswith("bias") or "LayerNorm" in name or "layer_norm" in name
        wd = 0.0 if no_decay else cfg.weight_decay
        g = groups.setdefault((lr, wd), {"params": [], "names": [], "lr": lr, "base_lr": lr,
                                         "weight_decay": wd})
        g["params"].append(p)
        g["names"].append(name)
    return list(groups.values())


def lr_factor(step: int, cfg: TrainConfig, steps_per_epoch: int, total_steps: int) -> float:
    """StepLR (x lr_decay every lr_step_epochs epochs) times an optional linear warm-up.

    Computed from the step alone (as nanoGPT's get_lr): no scheduler object whose
    state would need saving, and a mid-epoch resume gets the right rate for free.
    """
    epoch = step // max(1, steps_per_epoch)
    f = cfg.lr_decay ** (epoch // cfg.lr_step_epochs)
    warm = int(cfg.warmup_ratio * total_steps)
    if warm and step < warm:
        f *= (step + 1) / warm
    return f


# ------------------------------------------------------- resume state (no pickle)
def save_training_state(folder: Path, optimizer, progress: dict, scaler=None) -> None:
    """AdamW moments + RNG into safetensors, counters into JSON. No pickle anywhere,
    so loading a resume state can never execute code."""
    from safetensors.torch import save_file
    opt = getattr(optimizer, "optimizer", optimizer)  # unwrap Accelerate's AcceleratedOptimizer
    tensors = {}
    for g in opt.param_groups:
        for name, p in zip(g["names"], g["params"]):
            for k, v in opt.state.get(p, {}).items():
                t = v if torch.is_tensor(v) else torch.tensor(v)
                tensors[f"optimizer/{name}/{k}"] = t.detach().cpu().contiguous()
    tensors["rng/torch_cpu"] = torch.get_rng_state()
    if torch.cuda.is_available():
        tensors["rng/cuda"] = torch.cuda.get_rng_state()
    save_file(tensors, str(folder / STATE_TENSORS))
    groups = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
    atomic_write_json(folder / STATE_JSON, {
        "format": "reviewbert-train-state/1", **progress, "param_groups": groups,
        "scaler": scaler.state_dict() if scaler is not None else None})


def load_training_state(folder: Path) -> tuple[dict, dict]:
    """(progress JSON, tensors) from last/; CheckpointError if missing or broken."""
    import json

    from safetensors.torch import load_file
    try:
        progress = json.loads((folder / STATE_JSON).read_text(encoding="utf-8"))
        tensors = load_file(str(folder / STATE_TENSORS))
    except FileNotFoundError as e:
        raise CheckpointError(f"{folder} has no resume state ({e.filename})") from e
    except Exception as e:  # noqa: BLE001 - a torn or foreign file
        raise CheckpointError(f"{folder}: unreadable resume state: {e}") from e
    return progress, tensors


def restore_optimizer(optimizer, tensors: dict) -> None:
    """Put saved AdamW moments back, matched to parameters by name."""
    index, i = {}, 0
    for g in optimizer.param_groups:
        for name in g["names"]:
            index[name] = i
            i += 1
    state: dict[int, dict] = {}
    for key, t in tensors.items():
        if key.startswith("optimizer/"):
            name, k = key[len("optimizer/"):].rsplit("/", 1)
            if name not in index:
                raise CheckpointError(f"resume state has optimizer state for unknown parameter {name}")
            state.setdefault(index[name], {})[k] = t
    sd = optimizer.state_dict()
    sd["state"] = state
    optimizer.load_state_dict(sd)  # casts moments to each parameter's device/dtype


# ------------------------------------------------------------- stop signals
class StopFlag:
    """SIGINT/SIGTERM set a flag; the loop stops after the current step and saves."""

    def __init__(self):
        self.event = threading.Event()
        self._old = {}

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers only work there (e.g. called from a UI thread)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: the user really means it
        self.event.set()
        print(f"\n{signal.Signals(signum).name}: stopping after this step and saving last/ ...",
              file=sys.stderr, flush=True)

    def restore(self):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}


# ------------------------------------------------------------- status / ETA
class Progress:
    """tqdm bar + status.json (main process only), with one ETA for both.

    ETA = remaining steps x seconds per training step (measured in this session)
    + remaining evaluations x the duration of the last one.
    """

    def __init__(self, run_dir, enabled: bool, total_steps: int, step: int, epochs: int,
                 global_batch: int):
        from tqdm.auto import tqdm
        self.run_dir, self.enabled, self.total, self.epochs = run_dir, enabled, total_steps, epochs
        self.global_batch = global_batch
        self.start_step, self.train_s, self.eval_s, self.last_write = step, 0.0, None, 0.0
        self.train_cpu_s = 0.0  # process CPU time in steps: a load-independent speed measure
        self.bar = tqdm(total=total_steps, initial=step, unit="step", disable=not enabled,
                        file=sys.stderr, dynamic_ncols=True)

    def eta(self, step: int, epochs_done: int) -> float | None:
        done = step - self.start_step
        if done <= 0:
            return None
        evals = (self.epochs - epochs_done) * (self.eval_s or 0.0)
        return (self.total - step) * self.train_s / done + evals

    def samples_per_s(self, step: int) -> float | None:
        done = step - self.start_step
        return done * self.global_batch / self.train_s if done > 0 and self.train_s > 0 else None

    def status(self, state: str, step: int, epochs_done: int, message: str = "",
               force: bool = True, extra: dict | None = None):
        if not self.enabled or (not force and time.time() - self.last_write < 2.0):
            return
        self.last_write = time.time()
        eta = self.eta(step, epochs_done) if state == "running" else 0.0
        sps = self.samples_per_s(step)
        write_status(self.run_dir, {
            "state": state, "step": step, "total_steps": self.total,
            "epoch": min(epochs_done + 1, self.epochs), "epochs": self.epochs,
            "eta_seconds": None if eta is None else round(eta, 1),
            "samples_per_s": None if sps is None else round(sps, 2),
            "message": message, "pid": os.getpid(),
            "train_seconds": round(self.train_s, 2), "train_cpu_seconds": round(self.train_cpu_s, 2),
            **(extra or {})})


# ------------------------------------------------------------------ helpers
def _set_threads(accelerator) -> None:
    """On CPU, give each process its share of the cores, unless OMP_NUM_THREADS says
    otherwise (torchrun sets it to 1 per process, which is right there too)."""
    if accelerator.device.type != "cpu" or os.environ.get("OMP_NUM_THREADS"):
        return
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", accelerator.num_processes))
    torch.set_num_threads(max(1, (cores or 1) // max(1, local)))


def _better(new: dict, old: dict | None) -> bool:
    """Best = higher validation accuracy; a tie goes to the lower validation loss."""
    if old is None:
        return True
    na, oa = new.get("accuracy") or -1.0, old.get("accuracy") or -1.0
    if na != oa:
        return na > oa
    return (new.get("loss") or math.inf) < (old.get("loss") or math.inf)


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _metric_fields(m: dict) -> dict:
    keep = ("loss", "auc", "accuracy", "relaxed_accuracy", "n", "auc_note")
    return {k: m[k] for k in keep if k in m}


def resume_config(run_dir, overrides: dict | None = None) -> tuple[TrainConfig, list[str]]:
    """The stopped run's TrainConfig, with the few overridable flags applied.

    Returns (config, ignored flag names): other hyperparameters cannot change
    mid-run (the optimizer groups and the data split would no longer match).
    """
    meta = read_meta(run_dir)
    if not meta.get("hyperparameters"):
        raise CheckpointError(f"{run_dir} has no {META_FILE} with hyperparameters: nothing to resume")
    cfg = TrainConfig.from_dict(meta["hyperparameters"])
    ignored = []
    for k, v in (overrides or {}).items():
        if k in RESUME_OVERRIDABLE:
            setattr(cfg, k, v)
        elif getattr(cfg, k, None) != v and not (k == "fractions" and tuple(v) == cfg.fractions):
            ignored.append(k)
    return cfg, ignored


def run_has_state(run_dir) -> bool:
    """True once a run has trained (or set up) anything worth keeping. A folder with
    only status.json/train.log (a run that failed while reading its data) is reusable."""
    rp = run_paths(run_dir)
    return any(p.exists() for p in (rp.metrics, rp.last, rp.best, rp.meta))


# ==================================================================== train
def train(cfg: TrainConfig, out_dir, *, resume: bool = False, splits=None, accelerator=None,
          log=print) -> dict:
    """Train per ``cfg`` into run folder ``out_dir``; returns the final reviewbert.json dict.

    ``splits`` (a data.Splits) skips reading files (tests); otherwise they are
    built from ``cfg.data``, or, on resume, rebuilt from the run's reviewbert.json.
    A failure before or during training is recorded in status.json ("failed",
    with the error as message) and re-raised.
    """
    from accelerate import Accelerator

    # cpu=True on a machine with no GPU: without it Accelerate ignores torchrun's
    # WORLD_SIZE there and every process would train alone (gloo needs the hint).
    if accelerator is None:
        try:
            accelerator = Accelerator(mixed_precision=cfg.mixed_precision,
                                      cpu=pick_device().type == "cpu")
        except ValueError as e:  # e.g. fp16 without a GPU
            raise ConfigError(f"mixed_precision={cfg.mixed_precision}: {e}") from None
    if not resume and run_has_state(out_dir):
        raise CheckpointError(f"{out_dir} already holds a run: pass --resume to continue it, "
                              "or choose another --out")
    try:
        return _train(cfg, out_dir, resume, splits, accelerator, log)
    except BaseException as e:
        if accelerator.is_main_process:
            st = read_status(out_dir) or {}
            if st.get("state") not in ("stopped", "failed", "finished"):
                interrupted = isinstance(e, KeyboardInterrupt)
                write_status(out_dir, {**st, "state": "stopped" if interrupted else "failed",
                                       "eta_seconds": None, "pid": os.getpid(),
                                       "message": "interrupted" if interrupted
                                       else f"{type(e).__name__}: {e}"})
        raise


def _train(cfg, out_dir, resume, splits, accelerator, log) -> dict:
    from accelerate.utils import set_seed

    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()  # no "Writing model shards" bar inside ours at every save

    main = accelerator.is_main_process
    say = log if main else (lambda *a, **k: None)
    _set_threads(accelerator)
    rp = run_paths(out_dir)
    scheme = get_scheme(cfg.labels)
    stop = StopFlag()

    # ---- 1. resume state (last/ holds weights + optimizer + counters) -------
    state, tensors, old_meta = None, None, {}
    if resume:
        recover_checkpoint(rp.last)  # a crash between save's two renames
        old_meta = read_meta(out_dir)
        if (rp.last / STATE_JSON).exists():
            state, tensors = load_training_state(rp.last)
        else:
            say(f"{rp.last} has no resume state: starting {out_dir} from the beginning")
    epochs_done = state["epochs_done"] if state else 0
    batches_done = state["batches_done"] if state else 0
    step = state["step"] if state else 0
    if state and state.get("num_processes", 1) != accelerator.num_processes:
        raise CheckpointError(
            f"run was saved with {state['num_processes']} processes, resuming with "
            f"{accelerator.num_processes}: the mid-epoch position would not match")

    # ---- 2. data: balanced splits, tokenized once --------------------------
    set_seed(cfg.seed)
    from .model import load_tokenizer
    tokenizer = load_tokenizer(str(rp.last) if state else cfg.base_model)
    data_cfg = None
    if splits is None:
        from . import data
        if state and old_meta.get("data"):  # the very split the run started with
            splits = data.splits_from_meta(old_meta, tokenizer=tokenizer)
            data_cfg = old_meta["data"]
        else:
            if not cfg.data:
                raise data.DataError("no data files given (--data FILE)")
            kw = dict(seed=cfg.split_seed, fractions=cfg.fractions,
                      max_per_class=cfg.max_per_class, min_tokens=cfg.min_tokens,
                      options=data.ReadOptions(text_column=cfg.text_column,
                                               rating_column=cfg.rating_column,
                                               title_column=cfg.title_column,
                                               prepend_title=cfg.prepend_title))
            splits = data.build_splits(cfg.data, scheme, tokenizer=tokenizer, **kw)
            data_cfg = data.data_config(cfg.data, scheme, **kw)
    report = getattr(splits, "report", None)
    if report is not None and not state:
        say(report.format())
    if not splits.train:
        raise ConfigError("the training split is empty")

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
        eval_sets = {"train": EncodedDataset([tr.ids[i] for i in pick], [tr.labels[i] for i in pick])}
    else:
        eval_sets = {"train": datasets["train"]}
    eval_sets.update(validation=datasets["validation"], test=datasets["test"])
    say(f"tokenized {sum(len(d) for d in datasets.values())} reviews in {time.time() - t0:.1f}s "
        f"(mean {np.mean(datasets['train'].lengths):.0f} tokens, max_length {cfg.max_length})")

    # ---- 3. model -------------------------------------------------------------
    if state:
        from .model import load_checkpoint
        model, _, _ = load_checkpoint(rp.last, device=torch.device("cpu"))
    else:
        model, _ = load_for_training(cfg.base_model, scheme)
    if cfg.freeze_encoder:
        for p in model.base_model.parameters():
            p.requires_grad_(False)

    # ---- 4. optimizer (moments restored on resume) ----------------------------
    optimizer = torch.optim.AdamW(param_groups(model, cfg))
    if tensors is not None:
        restore_optimizer(optimizer, tensors)

    # ---- 5. batches ----------------------------------------------------------
    pad = PadCollator(tokenizer.pad_token_id)
    sampler = LengthGroupedSampler(datasets["train"].lengths,
                                   cfg.batch_size * accelerator.num_processes,
                                   seed=cfg.seed, grouped=cfg.group_by_length,
                                   labels=datasets["train"].labels)
    # Each iteration over a DataLoader draws a worker seed from its generator; a
    # private one keeps the global RNG (dropout) identical between a resumed run
    # and one that never stopped.
    train_dl = DataLoader(datasets["train"], batch_size=cfg.batch_size, sampler=sampler,
                          collate_fn=pad, num_workers=cfg.num_workers,
                          generator=torch.Generator().manual_seed(cfg.seed))
    eval_dls = {k: eval_loader(v, cfg.eval_batch_size, tokenizer.pad_token_id, cfg.num_workers)
                for k, v in eval_sets.items() if len(v)}

    # ---- 6. Accelerate: device, DDP, mixed precision, sharded loaders ---------
    model, optimizer, train_dl = accelerator.prepare(model, optimizer, train_dl)
    eval_dls = {k: accelerator.prepare(v) for k, v in eval_dls.items()}
    unwrapped = accelerator.unwrap_model(model)
    if state and main and "rng/torch_cpu" in tensors:
        torch.set_rng_state(tensors["rng/torch_cpu"])
        if "rng/cuda" in tensors and torch.cuda.is_available():
            torch.cuda.set_rng_state(tensors["rng/cuda"])
    else:  # different dropout per process
        torch.manual_seed(cfg.seed + 1000 * accelerator.process_index + step)
    if state and state.get("scaler") and accelerator.scaler is not None:
        accelerator.scaler.load_state_dict(state["scaler"])

    steps_per_epoch = len(train_dl)
    total_steps = steps_per_epoch * cfg.epochs
    best = (state or {}).get("best") or (old_meta.get("best") if state else None)
    device_desc = describe_device(accelerator.device)
    if accelerator.num_processes > 1:
        device_desc += f" x {accelerator.num_processes} processes"
    if cfg.mixed_precision != "no":
        device_desc += f", {cfg.mixed_precision}"

    def build_meta(checkpoint: dict | None = None) -> dict:
        meta = {
            "format": META_FORMAT, "labels": scheme.num_labels, "label_names": list(scheme.names),
            "hyperparameters": asdict(cfg), "data": data_cfg,
            "split_sizes": {k: len(datasets[k]) for k in SPLITS},
            "data_report": report.to_dict() if report is not None else None,
            "best": best, "device": device_desc,
            "created": old_meta.get("created") or _now_iso(),
            "reviewbert_version": __version__,
        }
        if checkpoint:
            meta["checkpoint"] = checkpoint
        return meta

    def save_last(epochs_done: int, batches_done: int):
        if main:
            counters = {"epochs_done": epochs_done, "batches_done": batches_done, "step": step,
                        "num_processes": accelerator.num_processes, "best": best}
            save_checkpoint_atomic(
                unwrapped, tokenizer, rp.last,
                meta=build_meta({"kind": "last", "epochs_done": epochs_done, "step": step}),
                write_extra=lambda d: save_training_state(d, optimizer, counters,
                                                          accelerator.scaler))
        accelerator.wait_for_everyone()

    def stop_requested() -> bool:
        flag = stop.event.is_set()
        if accelerator.num_processes == 1:
            return flag
        # every process must stop at the same step, or DDP would wait forever
        t = torch.tensor([1.0 if flag else 0.0], device=accelerator.device)
        return accelerator.reduce(t, reduction="max").item() > 0

    def set_train_mode():
        model.train()
        if cfg.freeze_encoder:  # features, not fine-tuning: no dropout inside BERT
            unwrapped.base_model.eval()

    # ---- 7. the run folder ----------------------------------------------------
    if main:
        rp.root.mkdir(parents=True, exist_ok=True)
        truncate_metrics(out_dir, epochs_done)  # resume: forget epochs not in last/
        atomic_write_json(rp.meta, build_meta())
        say(f"device: {device_desc}; {len(datasets['train'])} train reviews, "
            f"{steps_per_epoch} steps/epoch x {cfg.epochs} epochs")
        if state:
            say(f"resuming {out_dir} at step {step} (epoch {epochs_done + 1}, "
                f"batch {batches_done}/{steps_per_epoch})")
    progress = Progress(out_dir, main, total_steps, step, cfg.epochs,
                        cfg.batch_size * accelerator.num_processes)
    progress.status("running", step, epochs_done, "starting")
    stop.install()

    # ---- 8. the loop ----------------------------------------------------------
    try:
        for epoch in range(epochs_done, cfg.epochs):
            sampler.epoch = epoch  # the shuffle is a function of (seed, epoch)
            set_train_mode()
            loader = train_dl
            if batches_done:  # resumed mid-epoch: same order, skip what was done
                loader = accelerator.skip_first_batches(train_dl, batches_done)
            progress.bar.set_description(f"epoch {epoch + 1}/{cfg.epochs}")
            loss_sum, loss_n = torch.zeros((), device=accelerator.device), 0
            t_step, c_step = time.time(), time.process_time()
            for batch in loader:
                f = lr_factor(step, cfg, steps_per_epoch, total_steps)
                for g in optimizer.param_groups:
                    g["lr"] = g["base_lr"] * f
                loss = model(**batch).loss
                accelerator.backward(loss)
                if cfg.max_grad_norm:
                    accelerator.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                batches_done += 1
                loss_sum += loss.detach()
                loss_n += 1
                now = time.time()
                progress.train_s += now - t_step
                progress.train_cpu_s += time.process_time() - c_step
                progress.bar.update(1)
                if loss_n % 10 == 0:
                    progress.bar.set_postfix(loss=f"{loss_sum.item() / loss_n:.3f}", refresh=False)
                progress.status("running", step, epoch, f"training epoch {epoch + 1}", force=False)
                if stop_requested():
                    save_last(epoch, batches_done)
                    progress.status("stopped", step, epoch,
                                    f"stopped at step {step}; continue with --resume")
                    say(f"stopped at step {step}; saved {rp.last}")
                    return build_meta()
                if cfg.save_every_steps and step % cfg.save_every_steps == 0 \
                        and batches_done < steps_per_epoch:
                    save_last(epoch, batches_done)
                t_step, c_step = time.time(), time.process_time()
            batches_done = 0

            # -- evaluate on train (subset), validation and test ------------------
            progress.status("running", step, epoch, f"evaluating epoch {epoch + 1}")
            t_eval = time.time()
            results = {}
            for name in SPLITS:
                if name in eval_dls:
                    y, p = predict_probs(unwrapped, eval_dls[name], accelerator)
                    results[name] = _metric_fields(compute_metrics(y, p, scheme.num_labels))
                else:
                    results[name] = _metric_fields(compute_metrics([], np.zeros((0, scheme.num_labels)),
                                                                   scheme.num_labels))
            progress.eval_s = time.time() - t_eval
            if main:
                append_metrics(out_dir, [{"epoch": epoch + 1, "split": name, **results[name],
                                          "step": step, "time": round(time.time(), 3)}
                                         for name in SPLITS])
                progress.bar.write(f"epoch {epoch + 1}: " + "  |  ".join(
                    f"{n} {format_metrics(results[n])}" for n in SPLITS))
            # metrics first, then checkpoints: if we die in between, resume redoes the
            # epoch and truncate_metrics drops its line, so the history has no holes.
            if _better(results["validation"], (best or {}).get("validation")):
                best = {"epoch": epoch + 1, "step": step, **results}
                if main:
                    save_checkpoint_atomic(unwrapped, tokenizer, rp.best,
                                           meta=build_meta({"kind": "best", "epoch": epoch + 1,
                                                            "step": step}))
            save_last(epoch + 1, 0)
            if main:
                atomic_write_json(rp.meta, build_meta())
            epochs_done = epoch + 1
            if stop_requested() and epochs_done < cfg.epochs:
                progress.status("stopped", step, epochs_done,
                                f"stopped after epoch {epochs_done}; continue with --resume")
                progress.bar.close()
                return build_meta()
    finally:
        stop.restore()
        progress.bar.close()

    progress.status("finished", step, cfg.epochs,
                    f"best epoch {best['epoch']}: validation accuracy "
                    f"{100 * (best['validation'].get('accuracy') or 0):.1f}%" if best else "done")
    accelerator.wait_for_everyone()
    return build_meta()
