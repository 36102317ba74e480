"""Broken checkpoints for the fault tests, each made from a good tiny one.

``BROKEN[name] = (break_it(folder), what the one-line message must contain, level)``.
``level`` says where it is caught: "info" (config.json or reviewbert.json cannot
be read: the folder is not offered in the picker, and the sidebar says why) or
"load" (offered, but loading it fails with the message).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from browser_support import write_meta


def _truncate_weights(d: Path) -> None:
    p = d / "model.safetensors"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _pickle_only(d: Path) -> None:
    import torch
    from safetensors.torch import load_file
    torch.save(load_file(str(d / "model.safetensors")), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()


def _no_tokenizer(d: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (d / name).unlink(missing_ok=True)


def _garbage_tokenizer(d: Path) -> None:
    (d / "tokenizer.json").write_text("{ this is not a tokenizer")


def _garbage_config(d: Path) -> None:
    (d / "config.json").write_bytes(b"\x00\xff garbage {")


def _config_not_an_object(d: Path) -> None:
    (d / "config.json").write_text("[1, 2, 3]")


def _garbage_meta(d: Path) -> None:
    (d / "reviewbert.json").write_text("{not json")


def _meta_not_an_object(d: Path) -> None:
    (d / "reviewbert.json").write_text('["hyperparameters"]')


def _labels_differ(d: Path) -> None:
    """config.json says 3 labels; the classifier in the weights has 5 rows."""
    from reviewbert.model.labels import THREE
    cfg = json.loads((d / "config.json").read_text())
    cfg["id2label"] = {str(k): v for k, v in THREE.id2label.items()}
    cfg["label2id"] = THREE.label2id
    (d / "config.json").write_text(json.dumps(cfg))
    write_meta(d, 3)


def _meta_labels_differ(d: Path) -> None:
    meta = json.loads((d / "reviewbert.json").read_text())
    meta["labels"] = 3
    (d / "reviewbert.json").write_text(json.dumps(meta))


BROKEN = {
    "truncated-weights": (_truncate_weights, "truncated or corrupt", "load"),
    "pickle-only": (_pickle_only, "only pickle weights", "load"),
    "no-tokenizer": (_no_tokenizer, "no tokenizer files", "load"),
    "garbage-tokenizer": (_garbage_tokenizer, "cannot load checkpoint", "load"),
    "labels-differ": (_labels_differ, "classifier in the weights has 5 outputs", "load"),
    "garbage-config": (_garbage_config, "config.json is not valid JSON", "info"),
    "config-not-an-object": (_config_not_an_object, "config.json is not a JSON object", "info"),
    "garbage-meta": (_garbage_meta, "reviewbert.json is not valid JSON", "info"),
    "meta-not-an-object": (_meta_not_an_object, "reviewbert.json is not a JSON object", "info"),
    "meta-labels-differ": (_meta_labels_differ, "says 3 labels", "info"),
}


def make_broken(good: Path, dest: Path, name: str) -> Path:
    """A copy of the good checkpoint ``good`` (with its reviewbert.json) broken as ``name``."""
    shutil.copytree(good, dest)
    if not (dest / "reviewbert.json").exists():
        write_meta(dest, 5)
    BROKEN[name][0](dest)
    return dest
