"""A form made from TrainConfig's field descriptions: one widget per field, its help text,
its error.

The CLI flags, reviewbert.json and this form share one definition
(:mod:`reviewbert.config`). A field's group says where it goes: "basic" up front,
"advanced" in an expander; "data" fields are drawn by the data picker; "internal" ones
keep their defaults here (the CLI still has them).
"""
from __future__ import annotations

import math

import streamlit as st

from reviewbert import config
from reviewbert.config import FieldSpec
from reviewbert.ui import state


def widget(spec: FieldSpec, where=st, key_prefix: str = state.CONFIG_FIELD,
           options: list | None = None):
    """One widget for one field; returns its value (None for an empty optional).
    A list field with ``options`` is a multiselect of them that also takes typed values."""
    key = key_prefix + spec.name
    label, helptext, value = spec.label, spec.help, spec.default
    if options is not None:
        return where.multiselect(label, options, key=key, help=helptext, accept_new_options=True,
                                 placeholder="choose, or type a folder")
    if spec.kind == "list":
        got = where.text_area(label, value="\n".join(map(str, value)), key=key, help=helptext,
                              placeholder="one per line", height=68)
        return [line.strip() for line in got.splitlines() if line.strip()]
    if spec.kind == "tuple":
        return value  # not drawn, default kept
    if spec.choices:
        opts = list(spec.choices)
        return where.selectbox(label, opts, index=opts.index(value), key=key, help=helptext)
    if spec.type is bool:
        return where.checkbox(label, value=bool(value), key=key, help=helptext)
    if spec.type is int:
        return where.number_input(label, value=value, step=1, key=key, help=helptext,
                                  placeholder="none" if spec.optional else None)
    if spec.type is float:
        return where.number_input(label, value=float(value), format="%g", key=key, help=helptext,
                                  step=_float_step(value))
    got = where.text_input(label, value=value or "", key=key, help=helptext,
                           placeholder="auto" if spec.optional else "")
    return (got.strip() or None) if spec.optional else got.strip()


def _float_step(value: float) -> float:
    """Arrows move a learning rate by its own order of magnitude, a ratio by 0.05."""
    if 0 < abs(value) < 0.01:
        return 10 ** math.floor(math.log10(abs(value)))
    return 0.05


def config_form(data: list[str], extra: dict | None = None,
                options: dict[str, list] | None = None, cls: type = config.TrainConfig):
    """Draw basic fields (4 per row) and the advanced expander.

    Returns (values, config, errors): ``values`` holds every field drawn plus ``data``
    and ``extra`` (the data section's settings); ``config`` is the TrainConfig they make,
    or None while ``errors`` maps a field to its message, also shown under that field.
    ``options`` offers choices for list fields (the Train page: finished runs as
    distillation teachers). ``cls``: TrainConfig, or a subclass with more fields.
    """
    options = options or {}
    values = {"data": list(data), **(extra or {})}
    slots = {}
    cols = st.columns(4)
    for i, spec in enumerate(config.group_fields("basic", cls)):
        box = cols[i % 4].container()
        values[spec.name] = widget(spec, box)
        slots[spec.name] = box
    with st.expander("Advanced"):
        cols = st.columns(4)
        for i, spec in enumerate(config.group_fields("advanced", cls)):
            box = cols[i % 4].container()
            values[spec.name] = widget(spec, box, options=options.get(spec.name))
            slots[spec.name] = box
    cfg, errors = config.check(values, cls=cls)
    for name, msg in errors.items():
        (slots.get(name) or st).error(msg, icon="⚠️")
    return values, cfg, errors
