"""The seed report's grid search (its Table 1) as a search preset, sized to a budget.

The seed (``shared/seeds/000_…``, section 6.1, Table 1) searched the classifier's and
BERT's learning rates, the LR decay and the number of labels, with weight decay 0.01
and the learning rate multiplied by the decay every 5 epochs ("step size, fixed to 5
after some experiments"). Its table lists the combinations of

    labels 5, 3 · LR classifier 0.001, 0.01, 0.1 · LR BERT 0.00001, 0.0001, 0.001 · LR decay 0.5

A grid sampler runs every combination of the axes: 2 x 3 x 3 x 1 = 18 trials (the
seed's table shows 8 of them; it calls the others unstable). The seed trained
bert-base for many epochs on a GTX 1070; a budget here is the user's: epochs,
reviews per class and max length. The step stays the seed's 5 epochs when the budget
has at least 10 epochs; below that it is half the epochs (at least 1), so the decay
still acts once within the budget, as it did within the seed's runs.

    reviewbert search --preset seed --epochs 4 --max-per-class 60 --max-length 128 \\
        --data FILE --out checkpoints/seed-grid
"""
from __future__ import annotations

from reviewbert import config

NAME = "seed"
GRID = {"labels": [5, 3], "lr_classifier": [1e-3, 1e-2, 1e-1],
        "lr_bert": [1e-5, 1e-4, 1e-3], "lr_decay": [0.5]}
WEIGHT_DECAY = 0.01
STEP_EPOCHS = 5
BUDGET_FIELDS = ("epochs", "max_per_class", "max_length")


def step_epochs(epochs: int) -> int:
    """The LR step for a budget of ``epochs``: the seed's 5, or half a shorter budget."""
    return STEP_EPOCHS if epochs >= 2 * STEP_EPOCHS else max(1, epochs // 2)


def fixed(epochs: int, max_per_class: int | None, max_length: int) -> dict:
    """The fixed TrainConfig fields of the preset for a budget (the grid is :data:`GRID`)."""
    return {"epochs": int(epochs), "max_per_class": max_per_class, "max_length": int(max_length),
            "weight_decay": WEIGHT_DECAY, "lr_step_epochs": step_epochs(int(epochs))}


def editor_rows() -> list[dict]:
    """The grid as the Train page's "What to search" table rows."""
    return [{"hyperparameter": name, "values": ", ".join(map(config.format_value, values))}
            for name, values in GRID.items()]


def describe(epochs: int) -> str:
    size = 1
    for values in GRID.values():
        size *= len(values)
    return (f"{size} trials: labels × LR classifier × LR BERT × LR decay as in the seed's "
            f"Table 1, weight decay {WEIGHT_DECAY}, LR × decay every "
            f"{step_epochs(epochs)} epoch(s)"
            + ("" if step_epochs(epochs) == STEP_EPOCHS else
               f" (the seed's {STEP_EPOCHS}, halved to fit {epochs} epochs)"))


def apply(base: dict, grid: dict) -> tuple[dict, dict]:
    """``search --preset seed``: the preset's grid and fixed fields, under what the user
    gave (a field given as a flag or searched with --grid/--range wins)."""
    epochs = int(base.get("epochs", config.TrainConfig.__dataclass_fields__["epochs"].default))
    preset = fixed(epochs, base.get("max_per_class"),
                   base.get("max_length", config.TrainConfig.__dataclass_fields__[
                       "max_length"].default))
    new_grid = {**{k: v for k, v in GRID.items() if k not in base}, **grid}
    new_base = {**{k: v for k, v in preset.items() if k not in new_grid and v is not None},
                **base}
    return new_base, new_grid
