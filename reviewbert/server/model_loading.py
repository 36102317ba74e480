"""A checkpoint loaded in the background: the app's pages draw while it loads.

Loading the demo and warming it up, importing torch (which the load starts with) and
rebuilding the checkpoint's test split for the review sampler take seconds on a small
CPU (``bench/first_second.py``). Done in the page's own script run, that was a blank
page after ``make run``. A :class:`BackgroundLoad` does it in
a thread, started by the first page that names the checkpoint: the page draws its
controls at once, and only an action that needs the model waits (:meth:`predictor`).

The order inside the thread: the Predictor (loaded and warmed up), then the test split;
each is ready, or has failed, as soon as it is done, so a click on *Predict* does not
wait for the split.

With ``hold``, the thread waits up to :data:`HOLD_S` before it loads, or less if told by
:meth:`release`. The frame starts the load at the top of the first script run (its
sidebar shows the load's progress) and releases it, a second later, once the page is
drawn: importing torch (a second of mostly GIL-held work on one core) then does not
compete with the first paint, in the server or in the browser, which still loads the
page's widgets then. Anything that waits for the model releases it at once.

Plotly looks up pandas (and numpy) in ``sys.modules`` without importing them; a pandas
half-imported by this thread once broke the Inside BERT page's figures
(``AttributeError: ... 'pandas' has no attribute 'Series'``). Ordinary ``import``
statements in two threads are safe (each module has a lock), a peek is not. So every
module that builds or draws a Plotly figure imports pandas itself, before plotly
(``tests/unit/test_structure.py`` checks it): its ``import pandas`` waits for this
thread's. numpy (:data:`PEEKED`) is imported before the thread starts; the frame has it
already, and importing pandas there too would have slowed the first paint.
"""
from __future__ import annotations

import importlib
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from reviewbert.errors import CheckpointError

if TYPE_CHECKING:
    from reviewbert.data.examples import Review
    from reviewbert.model.inference import Predictor

# Looked up in sys.modules by plotly (``_plotly_utils.optional_imports.get_module(name,
# should_load=False)``) while a page builds its figures: complete before the thread starts.
# (pandas is imported by the modules that build figures: see the module's docstring.)
PEEKED = ("numpy",)
HOLD_S = 3.0    # the longest a held load waits before it loads anyway


def import_peeked() -> None:
    """Import :data:`PEEKED` in this thread (nothing once the frame has run)."""
    for name in PEEKED:
        importlib.import_module(name)


def cannot_predict(path: str, e: BaseException) -> CheckpointError:
    """A checkpoint that loaded but fails its first prediction is still broken: one line."""
    why = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
    return CheckpointError(f"{path} loaded but cannot predict: {type(e).__name__}: {why}")


def load_predictor(path: str) -> Predictor:
    """The checkpoint's Predictor on the picked device, warmed up. Any failure is a
    CheckpointError (one line, which every page shows instead of a traceback).

    On the CPU the warm-up runs with the threads the app gives one review
    (``device.threads_for_one_review``: half the cores). oneDNN builds its primitives per
    thread count, so these are the ones the app's predictions use; and the load runs while
    the browser draws the first page: with every core's thread the warm-up waited at
    OpenMP barriers for the core the browser held, and took several times as long as
    alone (``bench/first_second.py`` reports when the model is loaded)."""
    from reviewbert.model.device import cpu_threads, pick_device, threads_for_one_review
    from reviewbert.model.inference import Predictor
    predictor = Predictor.from_checkpoint(path, pick_device())
    threads = threads_for_one_review(False) if predictor.device.type == "cpu" else None
    try:
        with cpu_threads(threads):
            predictor.warm_up()
    except Exception as e:  # noqa: BLE001 - it loaded but cannot predict: still broken
        raise cannot_predict(path, e) from e
    return predictor


def load_test_split(path: str, tokenizer) -> tuple[tuple[Review, ...] | None, str]:
    """(reviews, "") of the checkpoint's own test split, rebuilt from its reviewbert.json,
    or (None, why not): no data files named, the files missing, or an empty split."""
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import checkpoint_info
    meta = checkpoint_info(path).meta
    if not meta.get("data"):
        return None, "its reviewbert.json names no data files"
    try:
        reviews = test_split_examples(meta, tokenizer=tokenizer)
    except ImportError as e:
        return None, f"the data module is not available ({e})"
    except Exception as e:  # noqa: BLE001 - DataError (missing files) or a malformed section
        return None, str(e).splitlines()[0][:300]
    if not reviews:
        return None, "its test split is empty"
    return tuple(reviews), ""


class BackgroundLoad:
    """One checkpoint's Predictor, then its test split, loaded in a daemon thread.

    ``after_load`` runs in the thread once the Predictor is loaded, before it is ready
    (the app freezes the long-lived objects out of the garbage collector then:
    ``heap.freeze_long_lived``); ``after_model`` once it is ready (the app imports the
    modules that draw a prediction then); ``after_split`` after the test split
    (``heap.freeze_new``). ``device`` is the device's description once torch is
    imported (None before). With ``hold`` the thread waits for :meth:`release` (or
    :data:`HOLD_S`) before it loads.
    """

    def __init__(self, path: str | Path, after_load: Callable[[], object] | None = None,
                 after_model: Callable[[], object] | None = None,
                 after_split: Callable[[], object] | None = None,
                 load: Callable[[str], Predictor] = load_predictor,
                 split: Callable[[str, object], tuple] = load_test_split,
                 hold: bool = False):
        self.path = str(path)
        self.device: str | None = None
        self.started = time.monotonic()
        self.seconds: float | None = None       # how long the Predictor took, once loaded
        self.finished: float | None = None      # time.monotonic() when it loaded or failed
        self._after, self._after_model, self._after_split = after_load, after_model, after_split
        self._load, self._split = load, split
        self._predictor: Predictor | None = None
        self._error: CheckpointError | None = None
        self._reviews: tuple | None = None
        self._why = ""
        self._loaded, self._split_done = threading.Event(), threading.Event()
        self._go = threading.Event()
        self._go_at = self.started + HOLD_S     # a held load's start, at the latest
        if not hold:
            self._go.set()
        import_peeked()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"reviewbert-load {Path(self.path).name}")
        self._thread.start()

    # ------------------------------------------------------------------ the thread
    def release(self, after: float = 0.0) -> None:
        """Let a held load (``hold=True``) start now, or ``after`` seconds from now if that
        is sooner than it would have."""
        if after <= 0:
            self._go.set()
        else:
            self._go_at = min(self._go_at, time.monotonic() + after)

    def _run(self) -> None:
        while not self._go.is_set() and time.monotonic() < self._go_at:
            self._go.wait(0.05)
        try:
            self._predictor = self._load_model()
            self.seconds = time.monotonic() - self.started
        except CheckpointError as e:
            self._error = e
        except BaseException as e:  # noqa: BLE001 - any failure is reported, none kills the app
            self._error = cannot_predict(self.path, e)
        finally:
            self.finished = time.monotonic()
            self._loaded.set()
        if self._predictor is None:
            self._why = "the checkpoint did not load"
            self._split_done.set()
            return
        if self._after_model is not None:
            try:
                self._after_model()
            except Exception:  # noqa: BLE001, S110 - a head start only: the page imports them itself
                pass
        try:
            self._reviews, self._why = self._split(self.path, self._predictor.tokenizer)
        except BaseException as e:  # noqa: BLE001 - the sampler falls back to the built-in examples
            self._reviews, self._why = None, f"{type(e).__name__}: {e}"[:300]
        finally:
            self._split_done.set()
        if self._after_split is not None:
            self._after_split()

    def _load_model(self) -> Predictor:
        from reviewbert.model.device import describe_device, pick_device  # torch: the thread's first second
        self.device = describe_device(pick_device())
        predictor = self._load(self.path)
        if self._after is not None:
            self._after()
        return predictor

    # ------------------------------------------------------------------ the pages
    @property
    def ready(self) -> bool:
        """The Predictor has loaded, or failed to (then :meth:`predictor` raises)."""
        return self._loaded.is_set()

    @property
    def failed(self) -> CheckpointError | None:
        return self._error if self.ready else None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def failed_for(self) -> float:
        """Seconds since the load failed (0 if it has not failed)."""
        return time.monotonic() - self.finished if self.failed is not None else 0.0

    def predictor(self, timeout: float | None = None) -> Predictor:
        """The loaded Predictor, waiting for it; the load's CheckpointError if it failed.
        TimeoutError if ``timeout`` seconds pass first."""
        self.release()
        if not self._loaded.wait(timeout):
            raise TimeoutError(f"{self.path} is still loading after {timeout} s")
        if self._error is not None:
            raise self._error
        return self._predictor

    def test_reviews(self, timeout: float | None = None) -> tuple[tuple[Review, ...] | None, str]:
        """(the test split's reviews, "") or (None, why not), waiting for the split."""
        self.release()
        if not self._split_done.wait(timeout):
            raise TimeoutError(f"{self.path}'s test split is still being rebuilt after {timeout} s")
        return self._reviews, self._why

    def split_ready(self) -> bool:
        return self._split_done.is_set()
