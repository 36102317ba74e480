"""Sidebar: which checkpoint, on which device; the training guide when there is none."""
from __future__ import annotations

import os
from pathlib import Path

import streamlit as st

from ..model import CheckpointInfo, describe_device, list_checkpoints, pick_device

REPO = Path(__file__).resolve().parents[2]
TRAIN_CMD = ("python -m reviewbert train --data ../shared/data/unlocked_mobile_10k.csv "
             "--labels 5 --out checkpoints/my-run")


def checkpoints_root() -> Path:
    return Path(os.environ.get("REVIEWBERT_CHECKPOINTS") or REPO / "checkpoints")


def default_index(infos: list[CheckpointInfo]) -> int:
    """Newest run's best/ first; else the newest checkpoint (list is newest first)."""
    for i, info in enumerate(infos):
        if info.path.name == "best":
            return i
    return 0


def _metric_line(info: CheckpointInfo) -> str:
    m = info.test_metrics
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


def describe(info: CheckpointInfo) -> str:
    scheme = "5 labels (1–5 stars)" if info.scheme.num_labels == 5 else "3 labels (neg/neu/pos)"
    return (f"`{info.name}` · {scheme} · base `{info.base_model}`  \n"
            f"best test: {_metric_line(info)}")


def pick_checkpoint(root: Path) -> CheckpointInfo | None:
    """Sidebar picker. ``None`` (and the training guide in the page) when there is none."""
    infos = list_checkpoints(root)
    st.sidebar.header("Model")
    st.sidebar.caption(f"Device: {describe_device(pick_device())}")
    if not infos:
        st.sidebar.info(f"No checkpoint under `{root}` yet.")
        return None
    labels = {str(i.path): i for i in infos}
    choice = st.sidebar.selectbox(
        "Checkpoint", list(labels), index=default_index(infos), key="checkpoint",
        format_func=lambda p: f"{labels[p].name} ({labels[p].scheme.num_labels} labels)")
    info = labels[choice]
    st.sidebar.markdown(describe(info))
    return info


def training_guide(root: Path) -> None:
    st.info("**No trained checkpoint yet.** ReviewBERT needs a fine-tuned model to "
            "predict ratings and show attention. Train one (a few minutes on a CPU with "
            "a small `--max-per-class`), then reload this page.")
    st.markdown("Run from the repository root (a training page in the app is planned):")
    st.code(TRAIN_CMD + " --max-per-class 200 --epochs 1", language="bash")
    st.markdown(f"The app lists every checkpoint under `{root}` "
                "(set `REVIEWBERT_CHECKPOINTS` to look elsewhere). The newest run's `best/` "
                "is selected by default.")
