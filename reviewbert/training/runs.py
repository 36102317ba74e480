"""Run folders: where a training run keeps its files, how others read them, and the
device queue that lets runs wait their turn without a daemon.

One run = one folder (``checkpoints/NAME``, the ``--out`` of ``train``)::

    checkpoints/NAME/
      reviewbert.json     hyperparameters, data config, data report, best epoch's metrics
      status.json         state + progress, rewritten atomically a few times a second at most:
                          {"state" (queued|running|finished|stopped|failed|cancelled; see below),
                           "pid", "started" (that process's start time, unix seconds: tells a
                           reused pid apart), "updated" (unix seconds), "message",
                           "step", "total_steps", "epoch" (1-based), "epochs", "eta_seconds",
                           "samples_per_s", "train_seconds", "train_cpu_seconds",
                           "device", "queued_at", "wait_seconds" (queued runs), "ahead"
                           (runs before this one in the queue, while queued)}
      metrics.jsonl       one line per (epoch, split), appended with fsync:
                          {"epoch" (1-based), "split" (train|validation|test), "loss",
                           "auc" (None if undefined, then "auc_note"), "accuracy",
                           "relaxed_accuracy" (fractions 0..1; relaxed None for 3 labels),
                           "n", "step" (optimizer steps so far), "time" (unix seconds)}
      steps.jsonl         one line per optimizer step, main process only:
                          {"epoch" (1-based), "step" (optimizer steps so far, 1-based),
                           "loss" (that step's training loss; the main process's batch under DDP),
                           "lr" (the BERT learning rate at that step: lr_bert x schedule),
                           "time" (unix seconds)}
                          appended and flushed about once a second and before every save of
                          last/, fsync'ed at most every few seconds (per-step fsyncs would
                          slow training); rows are strictly increasing in step
      train_config.json   the TrainConfig a launch asked for (``write_config``; the page runs
                          ``train --config RUN/train_config.json --out RUN``)
      train.log           stdout/stderr when launched in the background (``launch``)
      tensorboard/        TensorBoard event files, only with ``--report-to tensorboard``
      best/               HF checkpoint (weights + tokenizer + reviewbert.json) of the best epoch
      last/               HF checkpoint + training_state.{json,safetensors} to resume from
      .best.tmpXXXX/, .last.tmpXXXX/   a save being written (checkpoint.save_checkpoint_atomic);
                          renamed to best/ or last/ when complete. One left by a killed save
                          is removed when the run resumes.
      best.old/, last.old/  the previous checkpoint for the instant between a save's two
                          renames; put back by the resume (or the next save) if it died there

States: ``queued`` (waiting for the device slot), ``running``, ``finished``,
``stopped`` (SIGINT/SIGTERM; ``--resume`` continues), ``failed`` (message = the
error), ``cancelled`` (stopped while queued: it never trained). ``killed`` is
never written: ``read_status`` reports it for a queued or running run whose
process is gone, a zombie, or whose pid now belongs to another process.

Everything here is plain files, so a Streamlit page can poll a run that another
process is writing: ``read_status``, ``read_metrics`` and ``read_steps`` never see
half a write (status.json is replaced atomically; a torn last line of a .jsonl
file, left by a SIGKILL mid-append, is skipped). A resumed run first cuts
metrics.jsonl and steps.jsonl back to the epoch/step that last/ holds, so the
history it continues has no repeats.

A search (``reviewbert/training/search/``) is a folder with ``search.json`` whose trials are run
folders ``trial-NNNN/`` (each with a ``trial.json``); ``list_runs`` finds them.

The device queue (no daemon; a Streamlit restart changes nothing)::

    ROOT/.queue/DEVICE/       ROOT = $REVIEWBERT_QUEUE_DIR, else the run folder's parent
                              (for a trial, the search folder's parent); DEVICE = "cpu",
                              "mps" or "cuda:<$CUDA_VISIBLE_DEVICES or 0>"
      slot.lock               flock'ed (exclusive) by the process training on DEVICE, for its
                              whole run; the OS drops the lock when that process dies, so a
                              crash never blocks the queue
      <queued_at_ns>-<pid>.json   one ticket per waiting process, FIFO by name:
                              {"pid", "started", "run_dir", "queued_at"}; written atomically
                              by ``launch`` at launch time (so launch order is queue order) or
                              by the waiter itself, removed when it gets the slot or gives up;
                              tickets of dead processes are removed by the other waiters

A waiter (``train --queue``, inside :func:`device_slot`) starts when its ticket is
the oldest live one and it gets the lock. It is its own process (detached with
``start_new_session``), so a queued run starts by itself when the one before it
ends, browser or not.
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import weakref
from contextlib import contextmanager
from dataclasses import asdict, dataclass, is_dataclass
from pathlib import Path

from reviewbert.fsio import atomic_write_json, atomic_write_text, read_json
from reviewbert.model.checkpoint import META_FILE, read_meta
from reviewbert.model.device import LAUNCHED_ENV, pick_device

STATUS_FILE = "status.json"
METRICS_FILE = "metrics.jsonl"
STEPS_FILE = "steps.jsonl"
CONFIG_FILE = "train_config.json"
LOG_FILE = "train.log"
SEARCH_FILE = "search.json"
TRIAL_FILE = "trial.json"
STATES = ("queued", "running", "finished", "stopped", "failed", "cancelled")
ACTIVE = ("queued", "running")
QUEUE_DIR_ENV = "REVIEWBERT_QUEUE_DIR"
STOP_WITH_ENV = "REVIEWBERT_STOP_WITH"  # "PID:STARTED": a launched run stops when it dies


class RunBusyError(RuntimeError):
    """The run is queued or running: stop or cancel it first."""


class RunCancelled(Exception):
    """A queued run was cancelled (SIGUSR1, SIGTERM or SIGINT) before it got the device."""


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def status(self) -> Path:
        return self.root / STATUS_FILE

    @property
    def metrics(self) -> Path:
        return self.root / METRICS_FILE

    @property
    def steps(self) -> Path:
        return self.root / STEPS_FILE

    @property
    def config(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def meta(self) -> Path:
        return self.root / META_FILE

    @property
    def log(self) -> Path:
        return self.root / LOG_FILE

    @property
    def tensorboard(self) -> Path:
        return self.root / "tensorboard"

    @property
    def best(self) -> Path:
        return self.root / "best"

    @property
    def last(self) -> Path:
        return self.root / "last"


def run_paths(run_dir: str | os.PathLike) -> RunPaths:
    return RunPaths(Path(run_dir))


# --------------------------------------------------------------------- processes
# Popen objects of launch(): a zombie among them is reaped through its Popen, so the
# caller's proc.returncode stays true (a bare waitpid would leave Popen to report 0).
_LAUNCHED: "weakref.WeakValueDictionary[int, subprocess.Popen]" = weakref.WeakValueDictionary()


def process_started(pid: int | None = None) -> float | None:
    """Start time (unix seconds) of ``pid`` (default: this process), None if it is gone."""
    import psutil
    try:
        return psutil.Process(pid or os.getpid()).create_time()
    except (psutil.Error, ValueError):
        return None


def process_state(pid, started: float | None = None) -> str:
    """"alive", "gone", "zombie" (exited or exiting, not reaped: reaped here if it is
    our child and done) or "reused" (the pid now names a process started at another
    time than ``started``)."""
    import psutil
    try:
        p = psutil.Process(int(pid))
        zombie = p.status() == psutil.STATUS_ZOMBIE
        created = p.create_time()
    except psutil.ZombieProcess:
        zombie, created = True, None
    except (psutil.NoSuchProcess, ValueError, TypeError):
        return "gone"
    except psutil.AccessDenied:  # exists, owned by someone else
        return "alive"
    if zombie:
        _reap(int(pid))
        return "zombie"
    # create_time = boot time (wall clock) + jiffies since boot: the same process gives
    # the same value to ~10 ms, unless the wall clock was stepped in between (NTP after
    # a suspend). A reused pid belongs to a process started later, after the old one
    # died and pids wrapped around: seconds at the very least, so 5 s tells them apart.
    if started is not None and abs(created - float(started)) > 5.0:
        return "reused"
    return "alive"


def _reap(pid: int) -> None:
    proc = _LAUNCHED.get(pid)
    if proc is not None:
        proc.poll()  # reaps and records the exit status on the caller's Popen
        return
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: its parent (or init) reaps it


def _our_child(pid: int) -> bool:
    import psutil
    try:
        return psutil.Process(pid).ppid() == os.getpid()
    except psutil.Error:
        return False


def pid_alive(pid, started: float | None = None) -> bool:
    return process_state(pid, started) == "alive"


# ------------------------------------------------------------------------ status
def write_status(run_dir, status: dict) -> dict:
    """Replace status.json atomically; stamps ``updated`` (unix seconds), ``pid``
    (default: this process) and, for this process's pid, ``started``."""
    status = dict(status)
    status["updated"] = time.time()
    status.setdefault("pid", os.getpid())
    if status["pid"] == os.getpid():  # (a dict carried over may hold an older process's)
        status["started"] = _own_start()
    atomic_write_json(run_paths(run_dir).status, status)
    return status


_OWN_START: dict[int, float | None] = {}


def fail_own_status(run_dir, message: str) -> None:
    """A launched ``train`` or ``search`` that fails before its work starts (a bad config,
    the queue refused) leaves status.json saying what :func:`launch` wrote for it
    ("queued"/"running", this pid): record the error instead. Only a status of this very
    process is touched, never a finished run's."""
    st = read_status(run_dir) if run_dir and Path(run_dir).is_dir() else None
    if st and st.get("pid") == os.getpid() and st.get("state") in ACTIVE:
        write_status(run_dir, {**st, "state": "failed", "eta_seconds": None, "message": message})


def _own_start() -> float | None:
    pid = os.getpid()  # keyed by pid: a forked child must not inherit its parent's value
    if pid not in _OWN_START:
        _OWN_START[pid] = process_started(pid)
    return _OWN_START[pid]


def read_status(run_dir) -> dict | None:
    """status.json as a dict, or None if the run has none (yet).

    A run whose file still says ``queued`` or ``running`` but whose process is gone
    (SIGKILL, machine crash), a zombie, or whose pid was reused by another process,
    is reported as state ``killed``; ``--resume`` continues it.
    """
    st = read_json(run_paths(run_dir).status)
    if st is None:
        return None
    if st.get("state") in ACTIVE and not pid_alive(st.get("pid"), st.get("started")):
        st["state"] = "killed"
    return st


# ----------------------------------------------------------------------- metrics
def _read_jsonl(path: Path) -> list[dict]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a torn tail (SIGKILL mid-append)
        if isinstance(row, dict):
            rows.append(row)
    return rows


def append_metrics(run_dir, rows: list[dict]) -> None:
    """Append rows to metrics.jsonl and fsync, so a line that was reported is on disk."""
    p = run_paths(run_dir).metrics
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_metrics(run_dir) -> list[dict]:
    """Every complete line of metrics.jsonl as a dict, in order (a torn tail is skipped)."""
    return _read_jsonl(run_paths(run_dir).metrics)


def truncate_metrics(run_dir, through_epoch: int) -> list[dict]:
    """Keep only rows of epochs <= ``through_epoch`` (resume: forget unfinished epochs).

    Also drops duplicates of an (epoch, split), keeping the first, so the history a
    resumed run continues has no gaps and no repeats. Rewritten atomically.
    """
    seen, kept = set(), []
    for r in read_metrics(run_dir):
        key = (r.get("epoch"), r.get("split"))
        if isinstance(r.get("epoch"), int) and r["epoch"] <= through_epoch and key not in seen:
            seen.add(key)
            kept.append(r)
    atomic_write_text(run_paths(run_dir).metrics, "".join(json.dumps(r) + "\n" for r in kept))
    return kept


# ------------------------------------------------------------------------- steps
class StepsWriter:
    """Appends rows to steps.jsonl. ``write`` flushes to the OS (a killed process loses
    nothing it wrote); the fsync, which can take milliseconds, runs at most every
    ``fsync_s`` seconds and on ``close``."""

    def __init__(self, run_dir, fsync_s: float = 5.0):
        p = run_paths(run_dir).steps
        p.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(p, "a", encoding="utf-8")
        self.fsync_s, self._synced = fsync_s, time.monotonic()

    def write(self, rows: list[dict]) -> None:
        if not rows:
            return
        self._f.write("".join(json.dumps(r) + "\n" for r in rows))
        self._f.flush()
        if time.monotonic() - self._synced >= self.fsync_s:
            os.fsync(self._f.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())
            self._f.close()


def read_steps(run_dir, since_step: int = 0) -> list[dict]:
    """Rows of steps.jsonl with step > ``since_step``, in order (a torn tail is skipped).

    Poll with the last step seen to get only what is new.
    """
    return [r for r in _read_jsonl(run_paths(run_dir).steps)
            if isinstance(r.get("step"), int) and r["step"] > since_step]


def truncate_steps(run_dir, through_step: int) -> list[dict]:
    """Keep rows with step <= ``through_step`` and strictly increasing (resume: forget
    steps after last/); rewritten atomically. No file: nothing is created."""
    p = run_paths(run_dir).steps
    if not p.exists():
        return []
    kept, last = [], 0
    for r in read_steps(run_dir):
        if last < r["step"] <= through_step:
            kept.append(r)
            last = r["step"]
    atomic_write_text(p, "".join(json.dumps(r) + "\n" for r in kept))
    return kept


# -------------------------------------------------------------------------- runs
def write_config(run_dir, cfg) -> Path:
    """Write ``run_dir/train_config.json`` (a TrainConfig, or a dict of its fields)
    atomically, for ``train --config``. Returns its path. Data paths are made
    absolute: a launched run works in the repository root, not the caller's folder."""
    d = asdict(cfg) if is_dataclass(cfg) else dict(cfg)
    if d.get("data"):
        d["data"] = [str(Path(p).resolve()) for p in d["data"]]
    p = run_paths(run_dir).config
    atomic_write_json(p, d)
    return p


def list_runs(root: str | os.PathLike = "checkpoints", include_trials: bool = False) -> list[dict]:
    """Run folders under ``root`` (those with a status.json), newest first.

    Each item: ``{"name", "path", "status", "meta", "kind", "search", "trial"}``
    with status from read_status; ``kind`` is "run", "search" (a folder with
    search.json, listed when it has a status.json or a search.json) or "trial";
    ``search`` is the search.json dict (plus ``name`` and ``path`` of the search
    folder) for a search and its trials, else None; ``trial`` the trial.json dict.
    With ``include_trials``, the ``trial-*`` run folders inside each search folder
    are listed too, named ``SEARCH/trial-NNNN``.
    """
    root = Path(root)
    if not root.is_dir():
        return []
    runs = []
    for d in root.iterdir():
        if not d.is_dir() or d.name.startswith("."):
            continue
        search = read_json(d / SEARCH_FILE)
        if search is not None:
            search = {**search, "name": d.name, "path": d}
        if (d / STATUS_FILE).exists() or search is not None:
            runs.append(_run_item(d, d.name, "search" if search is not None else "run",
                                  search, None))
        if include_trials and search is not None:
            for t in sorted(d.iterdir()):
                if t.is_dir() and t.name.startswith("trial-") and (t / STATUS_FILE).exists():
                    runs.append(_run_item(t, f"{d.name}/{t.name}", "trial", search,
                                          read_json(t / TRIAL_FILE)))
    return sorted(runs, key=lambda r: r["status"].get("updated", 0), reverse=True)


def run_has_state(run_dir) -> bool:
    """True once a run has trained (or set up) anything worth keeping. A folder with
    only status.json/train.log (a run that failed while reading its data) is reusable."""
    rp = run_paths(run_dir)
    return any(p.exists() for p in (rp.metrics, rp.last, rp.best, rp.meta))


def _run_item(d: Path, name: str, kind: str, search, trial) -> dict:
    return {"name": name, "path": d, "status": read_status(d) or {},
            "meta": read_meta(d, strict=False), "kind": kind, "search": search, "trial": trial}


def read_log_tail(run_dir, max_chars: int = 4000) -> str:
    p = run_paths(run_dir).log
    try:
        with open(p, "rb") as f:
            f.seek(max(0, p.stat().st_size - max_chars))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _busy(run_dir) -> dict | None:
    """The status of ``run_dir`` (or of one of its trials) if queued or running, else None."""
    run_dir = Path(run_dir)
    folders = [run_dir]
    if (run_dir / SEARCH_FILE).exists():
        folders += sorted(t for t in run_dir.glob("trial-*") if t.is_dir())
    for d in folders:
        st = read_status(d)
        if st and st.get("state") in ACTIVE:
            return {**st, "path": str(d)}
    return None


def delete_run(run_dir) -> None:
    """Delete a run (or search) folder. Refuses (RunBusyError) while it, or a trial of
    it, is queued or running, and (ValueError) for a folder that is not a run."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{run_dir} is not a folder")
    if not any((run_dir / f).exists() for f in (STATUS_FILE, META_FILE, SEARCH_FILE)):
        raise ValueError(f"{run_dir} is not a run folder (no {STATUS_FILE}, {META_FILE} "
                         f"or {SEARCH_FILE}): not deleting it")
    busy = _busy(run_dir)
    if busy:
        raise RunBusyError(f"{busy['path']} is {busy['state']} (pid {busy.get('pid')}): "
                           "stop or cancel it before deleting")
    shutil.rmtree(run_dir)


# ------------------------------------------------------------------ device queue
def queue_device() -> str:
    """The device a training started here would use, as the queue names it."""
    kind = pick_device().type
    if kind == "cuda":
        return "cuda:" + (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").replace(" ", "")
    return kind


def queue_dir(run_dir, device: str) -> Path:
    """``ROOT/.queue/DEVICE`` for ``run_dir`` (see the module docstring)."""
    run_dir = Path(run_dir).resolve()
    root = os.environ.get(QUEUE_DIR_ENV)
    if root:
        root = Path(root)
    elif (run_dir.parent / SEARCH_FILE).exists():  # a trial queues with its search's peers
        root = run_dir.parent.parent
    else:
        root = run_dir.parent
    return root / ".queue" / re.sub(r"[^A-Za-z0-9:,._-]", "_", device)


def device_busy(root, device: str = "cpu") -> bool:
    """True while a run trains on ``device`` from the checkpoints folder ``root`` (someone
    holds its slot.lock). Costs one open and one non-blocking flock: the app asks it
    before each prediction."""
    qroot = Path(os.environ.get(QUEUE_DIR_ENV) or Path(root))
    path = qroot / ".queue" / re.sub(r"[^A-Za-z0-9:,._-]", "_", device) / "slot.lock"
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we got
    return False


def _write_ticket(qdir: Path, pid: int, started, run_dir, queued_at: float) -> Path:
    qdir.mkdir(parents=True, exist_ok=True)
    p = qdir / f"{int(queued_at * 1e9):020d}-{pid}.json"
    atomic_write_json(p, {"pid": pid, "started": started, "run_dir": str(run_dir),
                          "queued_at": queued_at})
    return p


def _tickets(qdir: Path) -> list[tuple[Path, dict]]:
    """Tickets of live processes, oldest first; those of dead ones are removed."""
    live = []
    for p in sorted(qdir.glob("[0-9]*.json")):
        t = read_json(p)
        if t is None:
            continue  # vanished between glob and read
        if pid_alive(t.get("pid"), t.get("started")):
            live.append((p, t))
        else:
            p.unlink(missing_ok=True)
    return live


def _try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


_CANCEL_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT)


def _raise_cancelled(signum, frame):
    raise RunCancelled(f"cancelled while queued ({signal.Signals(signum).name})")


@contextmanager
def device_slot(run_dir, device: str, *, wait: bool = True, poll_s: float = 0.2):
    """Hold ``device``'s training slot for the body of the ``with`` (one run per device).

    ``wait=True`` (``train --queue``): writes status ``queued`` for ``run_dir``, waits
    in FIFO order (see the module docstring), then writes ``running`` ("starting")
    and yields True. SIGUSR1 (:func:`cancel_run`), SIGTERM or SIGINT while waiting
    write status ``cancelled`` and raise :class:`RunCancelled`; once the slot is
    taken SIGUSR1 is ignored, so a cancel that races with the start cannot stop
    a run that has begun (stop it with :func:`stop_run`).

    ``wait=False`` (a plain ``train``): takes the slot if it is free, so queued runs
    wait for this one, but never waits; yields whether it got it.

    The lock is an flock on an open file: the OS releases it when the process ends,
    however it ends.
    """
    run_dir = Path(run_dir)
    qdir = queue_dir(run_dir, device)
    qdir.mkdir(parents=True, exist_ok=True)
    fd = os.open(qdir / "slot.lock", os.O_RDWR | os.O_CREAT, 0o666)
    try:
        if not wait:
            yield _try_lock(fd)
            return
        _wait_for_slot(fd, qdir, run_dir, device, poll_s)
        yield True
    finally:
        os.close(fd)  # releases the flock


def _own_ticket(qdir: Path, pid: int, run_dir: Path) -> tuple[Path, float]:
    """(this process's queue ticket, when it was queued): the one launch() wrote at launch
    time (the oldest, so launch order holds), or a new one."""
    mine = [(p, t) for p, t in _tickets(qdir) if t.get("pid") == pid]
    if mine:
        ticket, info = mine[0]
        for p, _ in mine[1:]:
            p.unlink(missing_ok=True)
    else:
        now = time.time()
        ticket = _write_ticket(qdir, pid, _own_start(), run_dir, now)
        info = {"queued_at": now}
    return ticket, info.get("queued_at") or time.time()


def _queued_status(run_dir: Path, pid: int, device: str, queued_at: float) -> dict:
    """status.json while waiting; a stopped run's progress stays visible meanwhile."""
    old = read_status(run_dir) or {}
    if old.get("pid") != pid:
        old = {k: old[k] for k in ("step", "total_steps", "epoch", "epochs") if k in old}
    return {**old, "state": "queued", "pid": pid, "started": _own_start(), "device": device,
            "queued_at": queued_at, "eta_seconds": None}


def _wait_for_slot(fd: int, qdir: Path, run_dir: Path, device: str, poll_s: float) -> None:
    pid = os.getpid()
    ticket, queued_at = _own_ticket(qdir, pid, run_dir)
    base = _queued_status(run_dir, pid, device, queued_at)
    main_thread = _in_main_thread()  # signal handlers can only be set there
    saved = {s: signal.signal(s, _raise_cancelled) for s in _CANCEL_SIGNALS} if main_thread else {}
    try:
        ahead = None
        while True:
            live = [p for p, _ in _tickets(qdir)]
            if ticket not in live:  # removed by someone as dead (a pid check that raced)
                ticket = _write_ticket(qdir, pid, _own_start(), run_dir, queued_at)
                continue
            n = live.index(ticket)
            if n == 0 and _try_lock(fd):
                break
            n += 1  # the run holding the slot, then the waiters before us
            if n != ahead:
                ahead = n
                write_status(run_dir, {**base, "ahead": n, "message":
                                       f"queued for {device}: {n} run{'s' * (n > 1)} ahead"})
            time.sleep(poll_s)
        # Got the slot. Block the cancel signals while we turn into a running run: a
        # SIGUSR1 that arrives from here on is discarded (SIG_IGN), never half-handled.
        if main_thread:
            signal.pthread_sigmask(signal.SIG_BLOCK, _CANCEL_SIGNALS)
        try:
            for s, h in saved.items():
                signal.signal(s, signal.SIG_IGN if s == signal.SIGUSR1 else h)
            saved = {}
            ticket.unlink(missing_ok=True)
            write_status(run_dir, {**base, "state": "running", "message": "starting",
                                   "ahead": 0, "wait_seconds": round(time.time() - queued_at, 2)})
        finally:
            if main_thread:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _CANCEL_SIGNALS)
    except RunCancelled as e:
        signal.pthread_sigmask(signal.SIG_BLOCK, _CANCEL_SIGNALS)  # a second one must not
        try:                                                      # interrupt the bookkeeping
            ticket.unlink(missing_ok=True)
            write_status(run_dir, {**base, "state": "cancelled", "message": str(e),
                                   "ahead": None})
        finally:
            for s, h in saved.items():
                signal.signal(s, h)
            saved = {}
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _CANCEL_SIGNALS)
        raise
    finally:
        for s, h in saved.items():
            signal.signal(s, h)
        ticket.unlink(missing_ok=True)  # whatever happened, we no longer wait


def _in_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


# ------------------------------------------------------------ background launch
def launch(subcommand: str, args: list[str], run_dir, *, queue: bool = False,
           log_name: str = LOG_FILE, python: str | None = None,
           env: dict | None = None) -> subprocess.Popen:
    """Start ``python -m reviewbert SUBCOMMAND ARGS --out RUN_DIR [--queue]`` in the background.

    Output goes to ``RUN_DIR/LOG_NAME`` (never a pipe to the caller), stdin is
    /dev/null, and the child gets its own session, so a Ctrl-C in the terminal
    running Streamlit, a page rerun, a Streamlit restart or a SIGKILLed server
    (the run, orphaned, trains on) does not end it; stop it with :func:`stop_run`,
    cancel a queued one with :func:`cancel_run`. status.json says ``queued`` or
    ``running`` from the moment this returns (the child then keeps it up to date).
    With ``queue``, the queue ticket is written here, so runs start in the order
    they were launched. ``env`` adds variables to the child's environment.
    Raises RunBusyError if ``run_dir`` is queued or running already, and
    FileExistsError if it holds a run and ``args`` do not say ``--resume`` (the
    child would refuse, and its finished run's status must stay as it is).
    """
    run_dir = Path(run_dir)
    busy = _busy(run_dir)
    if busy:
        raise RunBusyError(f"{busy['path']} is {busy['state']} already (pid {busy.get('pid')})")
    if run_has_state(run_dir) and "--resume" not in map(str, args):
        raise FileExistsError(f"{run_dir} already holds a run: resume it or choose another folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [str(a) for a in args]
    if "--out" not in args:
        args += ["--out", str(run_dir)]
    if queue and "--queue" not in args:
        args.append("--queue")
    device = queue_device() if queue else None
    cmd = [python or sys.executable, "-m", "reviewbert", subcommand, *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **{LAUNCHED_ENV: "1"}, **(env or {}))
    # -m reviewbert must resolve to this checkout even if the page runs elsewhere
    pkg_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = pkg_root + os.pathsep + env.get("PYTHONPATH", "")
    queued_at = time.time()
    log = open(run_dir / log_name, "ab")
    try:
        # stdin from /dev/null: a run that outlives its launcher (a killed server) must
        # not hold, or ever read, the terminal or pipe the launcher was started from
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, env=env, cwd=pkg_root,
                                start_new_session=True)
    finally:
        log.close()  # the child holds its own descriptor
    _LAUNCHED[proc.pid] = proc
    started = process_started(proc.pid)
    status = {"state": "running", "pid": proc.pid, "started": started, "message": "starting"}
    if queue:
        _write_ticket(queue_dir(run_dir, device), proc.pid, started, run_dir, queued_at)
        status.update(state="queued", device=device, queued_at=queued_at,
                      message=f"queued for {device}")
    old = read_status(run_dir) or {}
    keep = {k: old[k] for k in ("step", "total_steps", "epoch", "epochs") if k in old}
    write_status(run_dir, {**keep, **status})
    return proc


def launch_training(args: list[str], run_dir, python: str | None = None, *,
                    queue: bool = False, env: dict | None = None) -> subprocess.Popen:
    """``launch("train", ARGS, RUN_DIR)``; progress is in status.json, metrics.jsonl and
    steps.jsonl."""
    return launch("train", args, run_dir, queue=queue, python=python, env=env)


def resume_run(run_dir, queue: bool = True, python: str | None = None) -> subprocess.Popen:
    """Continue a stopped, killed or failed run: ``train --out RUN_DIR --resume``."""
    if not run_paths(run_dir).meta.exists():
        raise ValueError(f"{run_dir} has no {META_FILE}: nothing to resume")
    return launch("train", ["--out", str(run_dir), "--resume"], run_dir, queue=queue,
                  python=python)


def stop_run(run_dir, sig: int = signal.SIGINT) -> bool:
    """Ask a running training to stop: it finishes its step, saves last/, exits "stopped".
    A queued run is cancelled instead (:func:`cancel_run`).

    Returns False if the run is neither running nor queued (no status, finished, gone).
    """
    st = read_status(run_dir)
    if st and st.get("state") == "queued":
        return cancel_run(run_dir)
    if not st or st.get("state") != "running":
        return False
    try:
        os.kill(int(st["pid"]), sig)
    except (ProcessLookupError, KeyError, ValueError):
        return False
    return True


def cancel_run(run_dir, timeout: float = 30.0) -> bool:
    """Cancel a queued run: its waiting process exits and status becomes ``cancelled``.

    Sends SIGUSR1, which a waiter takes as "cancel" and a run that has just got the
    slot ignores. Returns True once the run is cancelled, False if it was not queued
    (or started before the signal arrived).
    """
    st = read_status(run_dir)
    if not st or st.get("state") != "queued":
        return False
    pid, started = int(st["pid"]), st.get("started")
    try:
        os.kill(pid, signal.SIGUSR1)
    except ProcessLookupError:
        pass
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = read_status(run_dir) or {}
        if st.get("state") != "queued" or not pid_alive(pid, started):
            break
        time.sleep(0.05)
    if st.get("state") == "cancelled":
        # let it exit, and reap it if it is our child; a zombie can still be exiting
        # (the main thread is gone, others are being torn down) and not yet reapable
        while time.time() < deadline:
            s = process_state(pid, started)
            if s != "alive" and not (s == "zombie" and _our_child(pid)):
                break
            time.sleep(0.05)
    elif st.get("state") == "killed" or (st.get("state") == "queued"
                                          and not pid_alive(pid, started)):
        # it died before its handler was installed (still importing): say so ourselves
        write_status(run_dir, {**st, "state": "cancelled", "pid": pid, "started": started,
                               "message": "cancelled while queued"})
    return (read_status(run_dir) or {}).get("state") == "cancelled"
