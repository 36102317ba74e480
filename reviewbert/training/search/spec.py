"""What a search runs: :class:`SearchSpec` (the grid, the ranges, the sampler, the
objective, pruning, the storage; the training flags every trial shares), the parsing
of ``--grid`` and ``--range`` items, and the search flags of the command line.

The CLI (``reviewbert search``), search.json (``folders.py``) and the training page
share one SearchSpec: :meth:`SearchSpec.from_namespace` reads the flags,
:meth:`SearchSpec.to_args` writes them back, :meth:`SearchSpec.from_dict` reads
search.json.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from reviewbert import config
from reviewbert.config import TrainConfig
from reviewbert.errors import ConfigError
from reviewbert.training.search import seed_grid

OBJECTIVES = ("accuracy", "relaxed_accuracy", "auc", "loss")
SAMPLERS = ("grid", "tpe")
PRUNE_STARTUP = 3


# ---------------------------------------------------------------- parsing
def _field_name(raw: str, where: str, cls: type = TrainConfig) -> str:
    name = raw.strip().replace("-", "_")
    searchable = config.searchable(cls)
    if name not in searchable:
        known = name in {f.name for f in fields(cls)}  # data, fractions
        raise ConfigError(f"{where}: " + (f"{name} cannot be searched" if known else
                          "unknown hyperparameter; searchable: " + ", ".join(searchable)))
    return name


def parse_value(name: str, text: str, flag: str = "--grid", cls: type = TrainConfig):
    """``text`` as a value of config field ``name``, checked by the field's own rule."""
    spec = config.searchable(cls)[name]
    where = f"{flag} {name}={text}"
    try:
        value = spec.parse(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a valid {spec.type.__name__}") from None
    if spec.choices and value not in spec.choices:
        raise ConfigError(f"{where}: must be one of {', '.join(map(str, spec.choices))}")
    error = spec.error(value)  # the field's own rule (epochs >= 1, labels 5 or 3, ...)
    if error:
        raise ConfigError(f"{where}: {error}")
    return value


def parse_grid(item: str, cls: type = TrainConfig) -> tuple[str, list]:
    """``NAME=V1,V2,...`` -> (field, [values])."""
    raw, sep, values = item.partition("=")
    if not sep or not values.strip():
        raise ConfigError(f"--grid expects NAME=V1,V2,..., got {item!r}")
    name = _field_name(raw, f"--grid {item}", cls)
    parsed = [parse_value(name, v, cls=cls) for v in values.split(",")]
    if len(set(map(repr, parsed))) != len(parsed):
        raise ConfigError(f"--grid {item}: a value is repeated")
    return name, parsed


def parse_range(item: str, cls: type = TrainConfig) -> tuple[str, dict]:
    """``NAME=LOW:HIGH[:log]`` -> (field, {"low", "high", "log"}) for int and float fields."""
    raw, sep, rest = item.partition("=")
    parts = rest.split(":")
    if not sep or len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] != "log"):
        raise ConfigError(f"--range expects NAME=LOW:HIGH or NAME=LOW:HIGH:log, got {item!r}")
    name = _field_name(raw, f"--range {item}", cls)
    if config.searchable(cls)[name].type not in (int, float):
        raise ConfigError(f"--range {item}: {name} is not a number; use --grid for its values")
    low, high = (parse_value(name, p, "--range", cls) for p in parts[:2])
    log = len(parts) == 3
    if low is None or high is None or not low < high:
        raise ConfigError(f"--range {item}: needs LOW < HIGH")
    if log and low <= 0:
        raise ConfigError(f"--range {item}: a log range needs LOW > 0")
    return name, {"low": low, "high": high, "log": log}


# ---------------------------------------------------------------- the spec
@dataclass
class SearchSpec:
    """What to search. The CLI, search.json and the training page share it."""
    base: dict[str, Any] = field(default_factory=dict)   # train flags given, for every trial
    grid: dict[str, list] = field(default_factory=dict)  # field -> values
    ranges: dict[str, dict] = field(default_factory=dict)  # field -> {"low","high","log"}
    sampler: str = "grid"
    trials: int | None = None  # cap on trials (TPE: required; grid: default all points)
    objective: str = "accuracy"
    prune: bool = False
    prune_startup: int = PRUNE_STARTUP
    storage: str | None = None  # Optuna database URL; None = study.db in the search folder
    study_name: str | None = None  # None = the search folder's name
    sampler_seed: int | None = None

    # -- CLI round trip -----------------------------------------------------------
    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> "SearchSpec":
        base = config.given(args)
        grid, ranges = {}, {}
        for flag, items, parse, into in (("--grid", args.grid, parse_grid, grid),
                                         ("--range", args.range, parse_range, ranges)):
            for item in items or []:
                name, value = parse(item)
                if name in grid or name in ranges:
                    raise ConfigError(f"{flag} {item}: {name} is already searched")
                into[name] = value
        if getattr(args, "preset", None) == seed_grid.NAME:
            base, preset_grid = seed_grid.apply(base, grid)
            grid = {k: v for k, v in preset_grid.items() if k not in ranges}
        spec = cls(base=base, grid=grid, ranges=ranges, sampler=args.sampler,
                   trials=args.trials, objective=args.objective, prune=args.prune,
                   prune_startup=args.prune_startup, storage=args.storage,
                   study_name=args.study_name, sampler_seed=args.sampler_seed)
        spec.check()
        return spec

    @classmethod
    def from_args(cls, argv: list[str]) -> "SearchSpec":
        """Parse what :meth:`to_args` wrote (no --out, --queue, --json)."""
        p = argparse.ArgumentParser(prog="search", exit_on_error=False)
        add_arguments(p)
        config.add_arguments(p)
        try:
            return cls.from_namespace(p.parse_args([str(a) for a in argv]))
        except argparse.ArgumentError as e:
            raise ConfigError(str(e)) from None

    def to_args(self) -> list[str]:
        """argv after ``search`` for this spec; the caller adds --out (and --queue)."""
        args = config.to_argv(self.base)
        for name, values in self.grid.items():
            args += ["--grid", f"{name}={','.join(map(config.format_value, values))}"]
        for name, r in self.ranges.items():
            args += ["--range", f"{name}={config.format_value(r['low'])}:{config.format_value(r['high'])}"
                     + (":log" if r["log"] else "")]
        defaults = SearchSpec()
        for name in ("sampler", "trials", "objective", "prune_startup", "storage",
                     "study_name", "sampler_seed"):
            if getattr(self, name) != getattr(defaults, name):
                args += ["--" + name.replace("_", "-"), str(getattr(self, name))]
        if self.prune:
            args.append("--prune")
        return args

    @classmethod
    def from_dict(cls, d: dict) -> "SearchSpec":
        """From search.json (extra keys ignored)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})

    # -- meaning --------------------------------------------------------------------
    def check(self) -> None:
        """Raise ConfigError (one line) for a spec that cannot run."""
        if self.objective not in OBJECTIVES:
            raise ConfigError(f"--objective must be one of {', '.join(OBJECTIVES)}")
        if self.sampler not in SAMPLERS:
            raise ConfigError(f"--sampler must be one of {', '.join(SAMPLERS)}")
        if not self.base.get("data"):
            raise ConfigError("search needs --data FILE")
        missing = [p for p in self.base["data"] if not Path(p).is_file()]
        if missing:
            raise ConfigError(f"--data {missing[0]}: no such file")
        if not self.grid and not self.ranges:
            raise ConfigError("nothing to search: give --grid NAME=V1,V2 (or --range with "
                              "--sampler tpe)")
        if self.sampler == "grid" and self.ranges:
            raise ConfigError("--range needs --sampler tpe (a grid sampler only takes --grid)")
        if self.sampler == "tpe" and not self.trials:
            raise ConfigError("--sampler tpe needs --trials N")
        if self.trials is not None and self.trials < 1:
            raise ConfigError("--trials must be >= 1")
        if self.prune_startup < 0:
            raise ConfigError("--prune-startup must be >= 0")
        both = sorted(set(self.base) & (set(self.grid) | set(self.ranges)))
        if both:
            raise ConfigError(f"--{both[0].replace('_', '-')} is both fixed and searched; "
                              "drop one")
        TrainConfig(**self.base)  # the fixed part alone must be a valid config
        if self.objective == "relaxed_accuracy" and 3 in self.grid.get(
                "labels", [self.base.get("labels", 5)]):
            raise ConfigError("--objective relaxed_accuracy is undefined for 3 labels")

    @property
    def direction(self) -> str:
        return "minimize" if self.objective == "loss" else "maximize"

    @property
    def size(self) -> int:
        """How many trials this search runs."""
        if self.sampler == "grid":
            points = math.prod(len(v) for v in self.grid.values())
            return min(points, self.trials) if self.trials else points
        return int(self.trials)

    def trial_args(self, params: dict) -> list[str]:
        """``train`` flags of one trial; paths absolute, as trials run from the repository root."""
        values = {**self.base, **params}
        values["data"] = [str(Path(f).resolve()) for f in values["data"]]
        if values.get("base_model") and Path(values["base_model"]).exists():
            values["base_model"] = str(Path(values["base_model"]).resolve())
        return config.to_argv(values)

    def trial_epochs(self, params: dict) -> int:
        return TrainConfig(**{**self.base, **params}).epochs

    def distributions(self) -> dict:
        from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
        dist = {n: CategoricalDistribution(v) for n, v in self.grid.items()}
        for n, r in self.ranges.items():
            kind = IntDistribution if config.searchable()[n].type is int else FloatDistribution
            dist[n] = kind(r["low"], r["high"], log=r["log"])
        return dist


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of a SearchSpec (what to search and how), beside TrainConfig's."""
    p.add_argument("--grid", action="append", metavar="NAME=V1,V2",
                   help="values of a TrainConfig field to try (repeat for more fields); the "
                        "grid sampler runs every combination, TPE picks among them")
    p.add_argument("--preset", choices=(seed_grid.NAME,), default=None,
                   help="seed: the seed report's Table 1 grid (labels 5,3 x LR classifier "
                        "1e-3,1e-2,1e-1 x LR BERT 1e-5,1e-4,1e-3 x LR decay 0.5; weight decay "
                        "0.01, LR step 5 epochs or half a shorter --epochs); flags and "
                        "--grid/--range given override it")
    p.add_argument("--range", action="append", metavar="NAME=LOW:HIGH[:log]",
                   help="a numeric field's range, for --sampler tpe (int fields stay int)")
    p.add_argument("--sampler", choices=SAMPLERS, default="grid",
                   help="grid: every combination of --grid; tpe: Optuna TPE (needs --trials)")
    p.add_argument("--trials", type=int, default=None, metavar="N",
                   help="how many trials in all, over every worker (grid default: all)")
    p.add_argument("--objective", choices=OBJECTIVES, default="accuracy",
                   help="validation metric to optimise, of each trial's best/ epoch "
                        "(loss is minimised; test is only reported)")
    p.add_argument("--prune", action="store_true",
                   help="stop trials whose validation curve is below the median of "
                        "completed trials at the same epoch (Optuna MedianPruner)")
    p.add_argument("--prune-startup", type=int, default=PRUNE_STARTUP, metavar="N",
                   help=f"prune only once N trials have completed (default: {PRUNE_STARTUP})")
    p.add_argument("--storage", metavar="URL", default=None,
                   help="Optuna database (e.g. postgresql://host/db) shared by workers on "
                        "several machines (default: sqlite study.db in --out)")
    p.add_argument("--study-name", metavar="NAME", default=None,
                   help="study in --storage (default: the --out folder's name)")
    p.add_argument("--sampler-seed", type=int, default=None, metavar="N",
                   help="seed of the sampler (TPE default: random, so workers differ)")


def params_text(params: dict) -> str:
    """One trial's parameters for a log line or the table: ``name=value, ...``."""
    return ", ".join(f"{k}={config.format_value(v)}" for k, v in params.items())
