"""A form generated from TrainConfig: one widget per field, its help text, its error.

The CLI flags, reviewbert.json and this form share one definition (the
dataclass). A field's ``group`` metadata says where it goes: "basic" up front,
"advanced" in an expander; "data" fields are drawn by the data picker;
"internal" ones keep their defaults here (the CLI still has them).
"""
from __future__ import annotations

import typing
from dataclasses import MISSING, Field, fields

import streamlit as st

from ..train import TrainConfig, config_errors, list_fields
from . import state as S

LABELS = {  # shorter labels than the CLI's flag names, in the seed report's words
    "labels": "Labels", "lr_bert": "Learning rate, BERT", "lr_classifier": "Learning rate, classifier",
    "weight_decay": "Weight decay", "lr_decay": "LR decay factor", "lr_step_epochs": "LR step (epochs)",
    "batch_size": "Batch size", "epochs": "Epochs", "max_length": "Max length (tokens)",
    "min_tokens": "Minimum tokens", "max_per_class": "Cap per class",
    "freeze_encoder": "Frozen encoder", "base_model": "Base model", "seed": "Seed",
    "layer_lr_decay": "Layer-wise LR decay", "warmup_ratio": "Warm-up ratio",
    "mixed_precision": "Mixed precision", "ordinal_sigma": "Ordinal soft labels σ",
    "teachers": "Distil from (checkpoint folders)", "distill_weight": "Teachers' share α",
}


def default(f: Field):
    return f.default if f.default is not MISSING else f.default_factory()


def group_fields(group: str) -> list[Field]:
    return [f for f in fields(TrainConfig) if f.metadata.get("group") == group]


def _base_type(f: Field):
    typ = typing.get_type_hints(TrainConfig)[f.name]
    args = [a for a in typing.get_args(typ) if a is not type(None)]
    return (args[0] if args else typ), type(None) in typing.get_args(typ)


def widget(f: Field, where=st, key_prefix: str = S.CONFIG_FIELD, options: list | None = None):
    """One widget for one field; returns its value (None for an empty optional).
    A list field with ``options`` is a multiselect of them that also takes typed values."""
    key = key_prefix + f.name
    label = LABELS.get(f.name, f.name.replace("_", " ").capitalize())
    helptext = f.metadata.get("help", "")
    value = default(f)
    if options is not None:
        return where.multiselect(label, options, key=key, help=helptext, accept_new_options=True,
                                 placeholder="choose, or type a folder")
    if f.name in list_fields():
        got = where.text_area(label, value="\n".join(map(str, value)), key=key, help=helptext,
                              placeholder="one per line", height=68)
        return [line.strip() for line in got.splitlines() if line.strip()]
    base, optional = _base_type(f)
    if "choices" in f.metadata:
        opts = list(f.metadata["choices"])
        return where.selectbox(label, opts, index=opts.index(value), key=key, help=helptext)
    if base is bool:
        return where.checkbox(label, value=bool(value), key=key, help=helptext)
    if base is int:
        return where.number_input(label, value=value, step=1, key=key, help=helptext,
                                  placeholder="none" if optional else None)
    if base is float:
        return where.number_input(label, value=float(value), format="%g", key=key, help=helptext,
                                  step=_float_step(value))
    if base is str:
        got = where.text_input(label, value=value or "", key=key, help=helptext,
                               placeholder="auto" if optional else "")
        return (got.strip() or None) if optional else got.strip()
    return value  # tuples etc.: not drawn, default kept


def _float_step(value: float) -> float:
    """Arrows move a learning rate by its own order of magnitude, a ratio by 0.05."""
    if 0 < abs(value) < 0.01:
        import math
        return 10 ** math.floor(math.log10(abs(value)))
    return 0.05


def config_form(data: list[str], extra: dict | None = None,
                options: dict[str, list] | None = None) -> tuple[dict, dict]:
    """Draw basic fields (4 per row) and the advanced expander.

    Returns (values, errors): ``values`` holds every field drawn plus ``data`` and
    ``extra`` (the data section's settings); ``errors`` maps a field to the
    ConfigError message, also shown under that field. ``options`` offers choices for
    list fields (the Train page: finished runs as distillation teachers).
    """
    options = options or {}
    values = {"data": list(data), **(extra or {})}
    basic, advanced = group_fields("basic"), group_fields("advanced")
    slots = {}
    cols = st.columns(4)
    for i, f in enumerate(basic):
        box = cols[i % 4].container()
        values[f.name] = widget(f, box)
        slots[f.name] = box
    with st.expander("Advanced"):
        cols = st.columns(4)
        for i, f in enumerate(advanced):
            box = cols[i % 4].container()
            values[f.name] = widget(f, box, options=options.get(f.name))
            slots[f.name] = box
    errors = config_errors(values)
    for name, msg in errors.items():
        (slots.get(name) or st).error(msg, icon="⚠️")
    return values, errors
