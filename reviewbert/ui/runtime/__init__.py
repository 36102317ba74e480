"""The UI runtime: the mechanisms that keep Streamlit's reruns from losing work, behind one façade.

Pages and views use only the names below, as ``from reviewbert.ui import runtime`` and
``runtime.button(...)``; ``tests/unit/test_ui_runtime.py`` holds them to it. The modules:

- ``clicks``        buttons recorded in their callback and read in the body, and requests
                    that outlive a stopped run
- ``runs``          the whole page's runs: numbered, wrapped by the frame, ended stopped
                    when a newer run supersedes them
- ``cached_model``  the sidebar's checkpoint loaded once per server in the background
                    (``reviewbert/server/model_loading.py``), the threads and turns a heavy
                    run takes
- ``prefetch``      hidden elements whose code the browser fetches before a click needs it
- ``launcher``      ``make run``: ``streamlit run app.py`` with its start-up made cheaper

The rules for a page author:

1. A button that starts work is ``runtime.button(where, label, key=...)`` (or
   ``runtime.form_submit``): its click is recorded in its callback and read in the body,
   so a run that Streamlit stops for a newer click does not lose it. A plain
   ``st.button`` may only call an ``on_click`` callback; its return value is never read.
2. Work that must be done even if the run doing it is stopped halfway is a
   ``runtime.Request``: ``ask()`` in a callback (or from another page), ``asked()`` in the
   body, ``done()`` once the work is done.
3. A page that needs the model starts with ``checkpoints.require_predictor()``; one that
   draws first uses ``checkpoints.require_checkpoint()`` and ``runtime.loading(info)``.
4. Work for one review runs ``with runtime.review_threads(predictor):``; a prediction and
   its views take their turn among the sessions ``with runtime.turn(info):``.
5. Long work reports its progress through ``ui/progress_bar.py``: each update is an
   element, where Streamlit stops a run that a newer click replaced.
"""
from __future__ import annotations

from reviewbert.server.heap import freeze_long_lived
from reviewbert.ui.runtime.cached_model import (
    after_model_loads,
    load_predictor,
    load_status,
    load_test_reviews,
    loading,
    mtime,
    rerun_when_loaded,
    review_threads,
    turn,
    wait_for_predictor,
)
from reviewbert.ui.runtime.clicks import Request, button, form_submit, fragment_run
from reviewbert.ui.runtime.prefetch import PREFETCH_CSS, code_fetched, prefetch_code
from reviewbert.ui.runtime.runs import begin, inside_frame, run_page

__all__ = [
    "PREFETCH_CSS", "Request", "after_model_loads", "begin", "button",
    "code_fetched", "form_submit", "fragment_run", "freeze_long_lived", "inside_frame",
    "load_predictor", "load_status", "load_test_reviews", "loading", "mtime", "prefetch_code",
    "rerun_when_loaded", "review_threads", "run_page", "turn", "wait_for_predictor",
]
