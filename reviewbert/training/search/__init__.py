"""Hyperparameter search: an Optuna study over TrainConfig, one ``train`` process per trial.

    python -m reviewbert search --data FILE --grid lr_bert=1e-5,5e-5 \\
        --grid lr_classifier=1e-3,1e-2 --epochs 3 --out checkpoints/NAME
    python -m reviewbert search --data FILE --sampler tpe --trials 20 \\
        --range lr_bert=1e-6:1e-4:log --range batch_size=4:16 --grid labels=5,3 \\
        --prune --out checkpoints/NAME

Every ``train`` flag is accepted and applies to all trials. The objective is a
*validation* metric of the trial's best/ checkpoint; the test split is only
reported, never used to choose or prune.

- ``spec``       what a search runs (SearchSpec), the parsing of --grid/--range, its flags
- ``folders``    the search folder's layout (search.json, status.json, trial-NNNN/), its lock
- ``study``      the Optuna study: opened in its storage, the grid sampler, heartbeats,
                 re-runs of trials whose worker died
- ``trials``     one trial as its own ``train`` process; the signals that stop a search
- ``worker``     SearchWorker: takes trials until none is left, keeps status.json
- ``reading``    a search as the pages and the CLI read it, and its final table
- ``figures``    the dashboard's Plotly figures; ``seed_grid`` the seed report's grid

The names other modules use are re-exported here (``search.SearchSpec``...). The
timings a test shortens, ``HEARTBEAT_S`` and ``GRACE_S``, are read from ``study``:
patch them there.
"""
from __future__ import annotations

from reviewbert.training.search.folders import is_search_dir, storage_url, trial_dir
from reviewbert.training.search.reading import format_table, group_status, read_search, study_groups
from reviewbert.training.search.spec import (
    OBJECTIVES,
    SAMPLERS,
    SearchSpec,
    add_arguments,
    parse_grid,
    parse_range,
    parse_value,
)
from reviewbert.training.search.trials import Signals, TrainingTrial
from reviewbert.training.search.worker import SearchWorker, study_counts

__all__ = ["OBJECTIVES", "SAMPLERS", "SearchSpec", "SearchWorker", "Signals", "TrainingTrial",
           "add_arguments", "format_table", "group_status", "is_search_dir", "parse_grid",
           "parse_range", "parse_value", "read_search", "storage_url", "study_counts",
           "study_groups", "trial_dir"]
