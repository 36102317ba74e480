"""``reviewbert search``: a hyperparameter search (Optuna), one training run per trial."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from reviewbert import config
from reviewbert.cli import flags
from reviewbert.training import search


def add_parser(sub):
    s = sub.add_parser(
        "search", help="hyperparameter search (Optuna): one training run per trial",
        description="Runs one `train` per trial into --out/trial-NNNN, reporting each epoch's "
                    "validation metric to Optuna. Every train flag applies to all trials. "
                    "Several workers (same command, same --storage) share the trials. "
                    "Ctrl-C or SIGTERM stops the current trial and the search.")
    s.add_argument("--out", required=True, metavar="DIR", help="search folder, e.g. "
                   "checkpoints/my-search (rerun to continue, or to add a worker)")
    search.add_arguments(s)
    s.add_argument("--queue", action="store_true",
                   help="wait for the device (after runs already queued) and hold it for "
                        "every trial")
    flags.json_output(s, "print one JSON summary as the last line")
    config.add_arguments(s)
    return s


def run(args) -> int:
    import optuna

    from reviewbert.errors import ConfigError
    from reviewbert.training.runs import fail_own_status
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # we print our own trial lines
    out = Path(args.out)
    try:
        spec = search.SearchSpec.from_namespace(args)
        worker = search.SearchWorker(spec, out)  # before queueing: a bad --out or --storage fails now
    except ConfigError as e:
        fail_own_status(out, str(e))
        raise
    state = _run_queued(worker) if args.queue else _run(worker)
    if state == "cancelled":
        print("cancelled while queued: no trial ran", file=sys.stderr)
        return 130
    summary = search.read_search(out)
    print(search.format_table(summary))
    if args.json:
        print(json.dumps({"search": summary["name"], "path": summary["path"], "state": state,
                          "objective": spec.objective, "direction": spec.direction,
                          "trials": summary["trials"], "best": summary["best"]}))
    if state == "stopped":
        return 130
    return 0 if summary["best"] else 1


def _run(worker) -> str:
    with search.Signals(worker.stop):
        return worker.run()


def _run_queued(worker) -> str:
    """Wait for the device slot like a queued ``train``, then hold it for every trial
    (the trials themselves are launched without --queue)."""
    from reviewbert.training import runs
    try:
        with runs.device_slot(worker.dir, runs.queue_device()):
            return _run(worker)
    except runs.RunCancelled:  # SIGINT/SIGTERM/cancel_run while queued: status says cancelled
        return "cancelled"
