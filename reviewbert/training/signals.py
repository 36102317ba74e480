"""SIGINT and SIGTERM ask a run to stop after its current step (and save last/).

So does the death of the process named by ``$REVIEWBERT_STOP_WITH`` ("PID:STARTED",
set by a search worker for its trials): a trial whose worker was SIGKILLed would
otherwise train on, orphaned, for a study that no longer waits for it.
"""
from __future__ import annotations

import os
import signal
import sys
import threading

from reviewbert.training.runs import STOP_WITH_ENV, pid_alive

WATCH_S = 2.0


class StopFlag:
    """SIGINT/SIGTERM set a flag; the loop stops after the current step and saves."""

    def __init__(self):
        self.event = threading.Event()
        self._old = {}

    def install(self):
        if threading.current_thread() is not threading.main_thread():
            return self  # signal handlers only work there (e.g. called from a UI thread)
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        self._watch(os.environ.get(STOP_WITH_ENV))
        return self

    def _watch(self, spec: str | None) -> None:
        """Set the flag once the process ``PID:STARTED`` is gone (checked every WATCH_S)."""
        pid, _, started = (spec or "").partition(":")
        if not pid.isdigit():
            return

        def watch():
            while not self.event.wait(WATCH_S):
                if not pid_alive(int(pid), float(started) if started else None):
                    print(f"\nits search worker (pid {pid}) is gone: stopping after this step "
                          "and saving last/ ...", file=sys.stderr, flush=True)
                    self.event.set()
        threading.Thread(target=watch, name="stop-with-worker", daemon=True).start()

    def _handle(self, signum, frame):
        if self.event.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt  # second Ctrl-C: the user really means it
        self.event.set()
        print(f"\n{signal.Signals(signum).name}: stopping after this step and saving last/ ...",
              file=sys.stderr, flush=True)

    def restore(self):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old = {}

