"""AppTest helpers shared by the app tests."""
from __future__ import annotations

import threading
import time

from reviewbert.ui.runtime import cached_model


def loading(at) -> bool:
    """The sidebar still says the model is loading (its fragment is polling)."""
    return any("loading the model" in str(c.value) for c in at.caption)


def wait_for_loads(timeout: float = 120.0) -> None:
    """Until no background checkpoint load (model_loading.BackgroundLoad's thread) runs."""
    deadline = time.monotonic() + timeout
    for t in threading.enumerate():
        if t.name.startswith("reviewbert-load"):
            t.join(max(0.0, deadline - time.monotonic()))
            assert not t.is_alive(), "a checkpoint was still loading"


def run_loaded(at, timeout: float = 120.0):
    """``at.run()``, then again while the sidebar says the checkpoint is still loading.

    In a browser the sidebar's fragment reruns the page by itself once the background
    load is done (``cached_model.load_status``); AppTest runs no fragment timers, so
    this does what that rerun does. A failed load is then on the page, as a user sees it.
    """
    at.run()
    deadline = time.monotonic() + timeout
    while loading(at) and not at.exception:
        assert time.monotonic() < deadline, "the checkpoint was still loading"
        wait_for_loads(timeout)
        at.run()
    return at


def open_view(at, name: str):
    """Open one of the Predict page's tabs under the prediction (only the open one is
    built), or one of the attention views' tabs (prediction.ATTENTION_VIEWS), as a click
    on it does, and rerun."""
    from reviewbert.ui import prediction_card as prediction
    from reviewbert.ui import state
    assert name in prediction.VIEWS + prediction.ATTENTION_VIEWS, name
    key = state.PREDICT_VIEW if name in prediction.VIEWS else state.ATTENTION_VIEW
    at.session_state[key] = name
    at.run()
    return at


assert cached_model.RETRY_AFTER_S >= 1.0, "run_loaded's reruns must see one failure"
