"""The sidebar's checkpoint: the picker, and what a page needs of it (the model, or the
training guide when there is none, or a broken checkpoint's message).

Its device and load are shown by the runtime (``runtime.load_status``), which also waits
for the model: a page asks here (:func:`require_predictor`), and stops with the right
message when there is nothing to predict with."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import CheckpointInfo, list_checkpoints
from reviewbert.training import catalog
from reviewbert.training.catalog import checkpoints_root
from reviewbert.ui import runtime, state
from reviewbert.viz.markdown import md_escape

if TYPE_CHECKING:
    from reviewbert.model.inference import Predictor

TRAIN_CMD = ("python -m reviewbert train --data ../shared/data/unlocked_mobile_10k.csv "
             "--labels 5 --out checkpoints/my-run")


def default_index(infos: list[CheckpointInfo]) -> int:
    """Newest run's best/ first; else the newest checkpoint (list is newest first)."""
    for i, info in enumerate(infos):
        if info.path.name == "best":
            return i
    return 0


def _metric_line(info: CheckpointInfo) -> str:
    # only numbers are formatted: a hand-edited reviewbert.json must not break every page
    m = {k: v for k, v in info.test_metrics.items()
         if isinstance(v, (int, float)) and not isinstance(v, bool)}
    parts = []
    if m.get("accuracy") is not None:
        parts.append(f"accuracy {m['accuracy']:.1%}")
    if m.get("relaxed_accuracy") is not None and info.scheme.ordinal:
        parts.append(f"±1 star {m['relaxed_accuracy']:.1%}")
    if m.get("auc") is not None:
        parts.append(f"AUC {m['auc']:.3f}")
    if m.get("loss") is not None:
        parts.append(f"loss {m['loss']:.3f}")
    return ", ".join(parts) if parts else "no test metrics recorded"


def _broken_note(problems: list, root: Path) -> None:
    """Say which checkpoint folders are not offered, and why (their config or
    reviewbert.json is unreadable); the app keeps serving the others."""
    if not problems:
        return
    with st.sidebar.expander(f"⚠️ {len(problems)} checkpoint folder(s) cannot be opened"):
        for path, why in problems:
            st.caption(f"{_plain(_rel(path, root))}: {_plain(why)}")


_plain = md_escape


def load_error(e: Exception) -> None:
    """Every page's message for a checkpoint that cannot be loaded (the text is escaped:
    it can hold label names and paths from the checkpoint's own files)."""
    st.error(f"This checkpoint cannot be loaded: {md_escape(str(e))}\n\n"
             "Pick another one in the sidebar, or train a new one.")


def _rel(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def _refuse_pending(problems: list, infos: list[CheckpointInfo]) -> None:
    """A checkpoint asked for by another page (the Train page's "Open on the main
    page") that cannot be opened: say why, rather than silently showing another."""
    want = st.session_state.get(state.PENDING_CHECKPOINT)
    if want is None or want in {str(i.path) for i in infos}:
        return  # readable (if the picker hides it, a search trial, it is ignored as before)
    st.session_state.pop(state.PENDING_CHECKPOINT, None)
    why = next((m for p, m in problems if str(p) == want), None)
    st.error(f"**{_plain(Path(want).parent.name + '/' + Path(want).name)}** cannot be opened: "
             f"{_plain(why or 'it is not a readable checkpoint')}. "
             "Showing the one picked in the sidebar.")


def describe(info: CheckpointInfo) -> str:
    scheme = "5 labels (1–5 stars)" if info.scheme.num_labels == 5 else "3 labels (neg/neu/pos)"
    return (f"`{info.name}` · {scheme} · base `{info.base_model}`  \n"
            f"best test: {_metric_line(info)}")


def pick_checkpoint(root: Path) -> CheckpointInfo | None:
    """The frame's sidebar picker; also stores the choice for the pages (state.CHECKPOINT_INFO).

    One entry per run (its ``best/``; never ``last/``, which a training run rewrites),
    plain checkpoints such as the demo, and search trials only when asked.
    """
    problems: list = []
    infos = list_checkpoints(root, problems)
    n_trials = catalog.count_trials(infos)
    show_trials = False
    if n_trials:
        show_trials = st.sidebar.checkbox(f"Show search trials ({n_trials})", key=state.SHOW_TRIALS,
                                           persist_state=state.KEEP)
    items = catalog.entries(infos, show_trials)
    by_path = {e.path: e for e in items}
    _refuse_pending(problems, infos)
    if not items:
        st.sidebar.info(f"No trained checkpoint under `{root}` yet.")
        _broken_note(problems, root)
        st.session_state[state.CHECKPOINT_INFO] = None
        return None
    state.apply_pending_checkpoint(list(by_path))
    if st.session_state.get(state.CHECKPOINT) not in by_path:
        st.session_state.pop(state.CHECKPOINT, None)  # e.g. deleted, or a trial now hidden
    choice = st.sidebar.selectbox(
        "Checkpoint", list(by_path), index=default_index([e.info for e in items]),
        key=state.CHECKPOINT, format_func=lambda p: by_path[p].label)
    info = by_path[choice].info
    st.sidebar.markdown(describe(info))
    _broken_note(problems, root)
    st.session_state[state.CHECKPOINT_INFO] = info
    return info


def training_guide(root: Path) -> None:
    st.info("**No trained checkpoint yet.** ReviewBERT needs a fine-tuned model to "
            "predict ratings and show attention. Train one on the **Train** page (a few "
            "minutes on a CPU with a small cap per class); it then appears in the sidebar.")
    if runtime.button(st, "Open the training page", key="guide_to_train", type="primary"):
        st.switch_page(state.TRAIN_PAGE)
    st.markdown("Or run from the repository root:")
    st.code(TRAIN_CMD + " --max-per-class 200 --epochs 1", language="bash")
    st.markdown(f"The app lists every checkpoint under `{root}` "
                "(set `REVIEWBERT_CHECKPOINTS` to look elsewhere). The newest run's `best/` "
                "is selected by default.")


def require_checkpoint() -> CheckpointInfo:
    """The sidebar's checkpoint; with none the page shows the training guide and stops."""
    info = state.current_checkpoint()
    if info is None:
        training_guide(checkpoints_root())
        st.stop()
    return info


def require_predictor() -> tuple[CheckpointInfo, Predictor]:
    """The sidebar's checkpoint and its cached predictor, for a page that needs a model
    (waiting for the background load); with none (the training guide) or a broken one (its
    message) the page stops here."""
    info = require_checkpoint()
    try:
        return info, runtime.wait_for_predictor(info)
    except CheckpointError as e:
        load_error(e)
        st.stop()


def stop_if_failed(info: CheckpointInfo) -> None:
    """For a page that draws before the model is ready instead of waiting for it: a
    checkpoint whose background load failed gets its message, and the page stops here;
    while it loads, the page is rerun once the load is done."""
    job = runtime.rerun_when_loaded(info)
    if job.failed is not None:
        load_error(job.failed)
        st.stop()
