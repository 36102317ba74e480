"""The data map of a short real run: the embedded MiniLM fine-tuned for two epochs on a few
hundred real reviews records every training review per epoch; its statistics, figure and
Error analysis slices line up with the training split rebuilt from the data file."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from reviewbert.analysis.slices import load_saved
from reviewbert.config import TrainConfig
from reviewbert.datamap import figures as datamap_figures
from reviewbert.datamap import read_datamap, stats
from reviewbert.datamap import slices as datamap_slices
from reviewbert.training import train

pytestmark = [pytest.mark.e2e]   # a real training run: CI's e2e suite, not make test


def test_a_short_real_run_draws_its_data_map(tmp_path, data_dir, monkeypatch):
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "cache"))
    torch.set_num_threads(2)
    # small, and the encoder frozen (no backward through it): a data map, not a good model
    cfg = TrainConfig(data=[str(data_dir / "unlocked_mobile_10k.csv")], max_per_class=20,
                      max_length=32, epochs=2, batch_size=16, seed=0, train_eval_max=20,
                      freeze_encoder=True, lr_classifier=5e-2)
    meta = train(cfg, tmp_path / "run", log=lambda *a: None)
    n = meta["split_sizes"]["train"]

    dm, why = read_datamap(tmp_path / "run")
    assert why == "" and (dm.epochs, dm.n) == (2, n) and (dm.seen == 1).all()
    assert np.isfinite(dm.probability).all()
    frame = stats.cartography(dm.probability, dm.correct)
    assert len(frame) == n and frame["region"].isin(stats.REGIONS).all()
    # after two epochs the model has moved: confidences are not all at chance (1/5)
    assert frame["confidence"].std() > 0.01

    texts, note = datamap_slices.hover_texts(dm, tmp_path / "run")
    assert note == "" and len(texts) == n
    fig = datamap_figures.datamap_figure(frame, dm.labels, texts, meta["label_names"])
    assert len(fig.data[0].hovertext) == n

    preds = datamap_slices.train_predictions(tmp_path / "run")
    assert preds.n == n and preds.folder is not None
    saved = datamap_slices.save_region_slices(dm, frame, preds)
    on_disk = load_saved(preds.folder)
    for name, count in saved.items():
        assert len(on_disk[name].rows) == count
        region = {v: k for k, v in datamap_slices.SLICE_NAMES.items()}[name]
        assert (frame["region"].to_numpy()[list(on_disk[name].rows)] == region).all()
