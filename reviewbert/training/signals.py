"""SIGINT and SIGTERM ask a run to stop after its current step (and save last/)."""
from __future__ import annotations

import signal
import sys
import threading


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
        return self

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

