"""Reading a run's data map (``datamap.safetensors``, format in reviewbert/training/datamap.py)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reviewbert.training.datamap import FILE, FORMAT
from reviewbert.training.runs import read_metrics

NOT_RECORDED = "this run was trained before the data map was recorded"
NO_EPOCH = "no epoch has finished yet: the data map appears after the first one"


class DataMapError(ValueError):
    """A data map that cannot be used as asked (unreadable, or rows that do not align)."""


@dataclass
class DataMap:
    """One run's record: [epochs, n] arrays, rows in the training split's order."""
    probability: np.ndarray      # float32, the true rating's probability; NaN = not seen
    correct: np.ndarray          # float32, fraction of that epoch's views the argmax was right
    seen: np.ndarray             # int32, times seen in that epoch
    labels: np.ndarray           # int64 [n], true class
    text_hash: np.ndarray        # int64 [n], blake2b-64 of each text (training/datamap.py)
    epochs_planned: int
    path: Path

    @property
    def epochs(self) -> int:
        return int(self.probability.shape[0])

    @property
    def n(self) -> int:
        return int(self.probability.shape[1])


def run_folder(path) -> Path:
    """The run folder of ``path``: itself, or the run above a best/ or last/ checkpoint."""
    p = Path(path)
    if not (p / FILE).is_file() and p.name in ("best", "last") and (p.parent / FILE).is_file():
        return p.parent
    return p


def read_datamap(path) -> tuple[DataMap | None, str]:
    """(the data map, "") or (None, why there is none): a run trained before the data map
    was recorded (:data:`NOT_RECORDED`), no finished epoch yet, or an unreadable file."""
    from safetensors import safe_open

    folder = run_folder(path)
    f = folder / FILE
    if not f.is_file():
        return None, NOT_RECORDED if read_metrics(folder) else NO_EPOCH
    try:
        with safe_open(str(f), framework="np") as st:
            meta = st.metadata() or {}
            if meta.get("format") != FORMAT:
                return None, f"{f.name} is not a ReviewBERT data map ({meta.get('format')!r})"
            t = {k: st.get_tensor(k) for k in ("probability", "correct", "seen", "labels",
                                                "text_hash")}
        dm = DataMap(t["probability"].astype(np.float32), t["correct"].astype(np.float32),
                     t["seen"].astype(np.int32), t["labels"].astype(np.int64),
                     t["text_hash"].astype(np.int64), int(meta.get("epochs_planned") or 0),
                     f)
    except Exception as e:  # noqa: BLE001 - a foreign or torn file (SafetensorError too)
        return None, f"{f.name} is unreadable: {e}"
    if dm.epochs == 0:
        return None, NO_EPOCH
    return dm, ""
