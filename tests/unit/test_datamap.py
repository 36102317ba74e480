"""The data map: its statistics and regions by hand, the recorder on handmade batches, a tiny
training run through the real loop (one row per review per epoch; a resumed run records what
an unbroken one does), the figure and the Error analysis slices."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from reviewbert.config import TrainConfig
from reviewbert.datamap import NOT_RECORDED, DataMapError, read_datamap, stats
from reviewbert.datamap import figures as datamap_figures
from reviewbert.datamap import slices as datamap_slices
from reviewbert.training import train
from reviewbert.training.datamap import DataMapRecorder, text_hashes
from reviewbert.training.hooks import TrainHooks
from reviewbert.training.runs import append_metrics

from toyreviews import write_toy_csv

NAN = float("nan")


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# ------------------------------------------------------------------ statistics
def test_statistics_match_a_hand_computation():
    p = [[0.9, 0.2, 0.1], [0.7, 0.8, 0.3]]
    c = [[1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]
    f = stats.cartography(p, c)
    assert f["confidence"].tolist() == pytest.approx([0.8, 0.5, 0.2])
    # population std of two values = half their distance
    assert f["variability"].tolist() == pytest.approx([0.1, 0.3, 0.1])
    assert f["correctness"].tolist() == pytest.approx([1.0, 0.5, 0.0])
    assert f["epochs_seen"].tolist() == [2, 2, 2]
    assert f["region"].tolist() == [stats.EASY, stats.AMBIGUOUS, stats.HARD]


def test_regions_follow_the_documented_thresholds():
    v, c = stats.AMBIGUOUS_VARIABILITY, stats.EASY_CONFIDENCE
    got = stats.regions([0.9, c, c - 1e-6, 0.1, NAN], [v, v - 1e-6, 0.0, v + 0.1, 0.0])
    assert got.tolist() == [stats.AMBIGUOUS, stats.EASY, stats.HARD, stats.AMBIGUOUS,
                            stats.UNSEEN]


def test_unseen_epochs_are_left_out_and_one_epoch_has_no_variability():
    p = [[0.7, NAN, NAN], [NAN, 0.1, NAN], [0.1, 0.3, NAN]]
    c = [[1.0, NAN, NAN], [NAN, 0.0, NAN], [0.5, 0.0, NAN]]
    f = stats.cartography(p, c)
    assert f["confidence"].tolist()[:2] == pytest.approx([0.4, 0.2])
    assert f["variability"].tolist()[:2] == pytest.approx([0.3, 0.1])
    assert f["correctness"].tolist()[:2] == pytest.approx([0.75, 0.0])
    assert f["epochs_seen"].tolist() == [2, 2, 0]
    assert f["region"].iloc[2] == stats.UNSEEN and np.isnan(f["confidence"].iloc[2])
    assert stats.region_counts(f) == {stats.EASY: 0, stats.AMBIGUOUS: 1, stats.HARD: 1,
                                      stats.UNSEEN: 1}
    one = stats.cartography([[0.9, 0.1]], [[1.0, 0.0]])
    assert one["variability"].tolist() == [0.0, 0.0]
    assert one["region"].tolist() == [stats.EASY, stats.HARD]


def test_bad_shapes_and_values_are_a_clear_error():
    with pytest.raises(DataMapError, match="epochs, reviews"):
        stats.cartography([[0.1, 0.2]], [[1.0]])
    with pytest.raises(DataMapError, match=r"\[0, 1\]"):
        stats.cartography([[1.5]], [[1.0]])


# ------------------------------------------------------------------ the recorder
def test_recorder_averages_repeats_and_leaves_unseen_reviews_nan(tmp_path):
    acc = SimpleNamespace(num_processes=1)
    rec = DataMapRecorder(tmp_path, [0, 1, 2, 1], text_hashes(list("abcd")), "cpu", 1)
    logits = torch.log(torch.tensor([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]]))
    rec.observe(logits, torch.tensor([0, 1, 0]))          # review 0 twice, review 1 once
    rec.observe(logits[2:].to(torch.bfloat16), torch.tensor([2]))  # autocast logits
    rec.finish_epoch(acc, main=True)
    dm, why = read_datamap(tmp_path)
    assert why == "" and dm.epochs == 1 and dm.epochs_planned == 1
    # review 0: p(true=0) 0.7 (right) and 0.2 (wrong: argmax 2) -> 0.45, half right
    assert dm.probability[0].tolist()[:3] == pytest.approx([0.45, 0.3, 0.6], abs=1e-2)
    assert dm.correct[0].tolist()[:3] == pytest.approx([0.5, 0.0, 1.0])
    assert dm.seen[0].tolist() == [2, 1, 1, 0]
    assert np.isnan(dm.probability[0, 3]) and np.isnan(dm.correct[0, 3])
    assert dm.labels.tolist() == [0, 1, 2, 1]
    assert float(rec.sums.abs().sum()) == 0.0   # the next epoch starts from zero


def test_a_run_without_the_file_says_it_was_trained_before_the_data_map(tmp_path):
    assert read_datamap(tmp_path)[0] is None and "first" in read_datamap(tmp_path)[1]
    append_metrics(tmp_path, [{"epoch": 1, "split": "train", "accuracy": 0.5}])
    assert read_datamap(tmp_path) == (None, NOT_RECORDED)
    (tmp_path / "datamap.safetensors").write_bytes(b"not a safetensors file")
    dm, why = read_datamap(tmp_path)
    assert dm is None and "unreadable" in why


# ------------------------------------------------------------------ through the real loop
@pytest.fixture(scope="module")
def toy_csv(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=300)


def tiny_cfg(tiny_model_dir, toy_csv, **kw) -> TrainConfig:
    base = dict(data=[str(toy_csv)], base_model=str(tiny_model_dir), max_length=32,
                lr_bert=1e-3, lr_classifier=1e-2, epochs=2, batch_size=8, seed=0,
                max_per_class=16)
    return TrainConfig(**{**base, **kw})


class StopAtStep(TrainHooks):
    def __init__(self, step):
        self.step = step

    def after_step(self, info):
        return info["step"] == self.step


@pytest.fixture(scope="module")
def whole_run(tmp_path_factory, tiny_model_dir, toy_csv):
    """An unbroken 2-epoch run: (run folder, reviewbert.json)."""
    run = tmp_path_factory.mktemp("datamap") / "whole"
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return run, train(tiny_cfg(tiny_model_dir, toy_csv), run, log=lambda *a: None)
    finally:
        torch.set_num_threads(old)


def test_the_loop_records_every_training_review_each_epoch(whole_run):
    run, meta = whole_run
    dm, why = read_datamap(run)
    n = meta["split_sizes"]["train"]
    assert why == "" and (dm.epochs, dm.n, dm.epochs_planned) == (2, n, 2)
    assert (dm.seen == 1).all()                          # each review once per epoch
    assert np.isfinite(dm.probability).all()
    assert ((dm.probability > 0) & (dm.probability < 1)).all()
    assert set(np.unique(dm.correct)) <= {0.0, 1.0}
    # the rows are the training split's reviews, in its order
    reviews, _ = datamap_slices.training_reviews(run)
    datamap_slices.check_aligned(dm, [r.text for r in reviews])
    assert dm.labels.tolist() == [r.label for r in reviews]
    # best/ is read as its run's
    assert read_datamap(run / "best")[0].n == n


def test_a_run_resumed_mid_epoch_records_what_an_unbroken_run_does(tmp_path, tiny_model_dir,
                                                                   toy_csv, whole_run):
    cfg = tiny_cfg(tiny_model_dir, toy_csv)               # 56 reviews: 7 steps per epoch
    train(cfg, tmp_path / "broken", hooks=[StopAtStep(10)], log=lambda *a: None)
    mid = json.loads((tmp_path / "broken" / "last" / "training_state.json").read_text())
    assert (mid["epochs_done"], mid["batches_done"]) == (1, 3)
    assert (tmp_path / "broken" / "last" / "datamap_partial.safetensors").is_file()
    train(cfg, tmp_path / "broken", resume=True, log=lambda *a: None)
    whole, broken = read_datamap(whole_run[0])[0], read_datamap(tmp_path / "broken")[0]
    assert broken.epochs == 2 and (broken.seen == 1).all()
    np.testing.assert_allclose(broken.probability, whole.probability, atol=1e-5)
    np.testing.assert_array_equal(broken.correct, whole.correct)


def test_recording_can_be_switched_off(tmp_path, tiny_model_dir, toy_csv):
    train(tiny_cfg(tiny_model_dir, toy_csv, epochs=1), tmp_path / "run", log=lambda *a: None,
          record_datamap=False)
    assert read_datamap(tmp_path / "run") == (None, NOT_RECORDED)


# ------------------------------------------------------------------ figure and slices
def test_the_figure_escapes_and_cuts_the_hover_and_outlines_the_regions():
    f = stats.cartography([[0.9, 0.2, 0.1], [0.7, 0.8, 0.3]], [[1, 0, 0], [1, 1, 0]])
    texts = ["<script>alert(1)</script> fine", "x" * 500, "plain"]
    fig = datamap_figures.datamap_figure(f, labels=[0, 1, 2], texts=texts,
                                         names=["1 star", "2 stars", "3 stars"])
    hover = list(fig.data[0].hovertext)
    assert "<script>" not in hover[0] and "&lt;script&gt;" in hover[0]
    assert "x" * datamap_figures.HOVER_CHARS not in hover[1] and "…" in hover[1]
    assert "true: 3 stars" in hover[2]
    assert list(fig.data[0].x) == pytest.approx([0.1, 0.3, 0.1])
    assert len(fig.layout.shapes) == 3
    labels = " ".join(a.text for a in fig.layout.annotations)
    assert "ambiguous</b> (1)" in labels and "hard-to-learn</b> (1)" in labels


def test_region_slices_are_saved_only_when_the_rows_align(tmp_path):
    from reviewbert.analysis.slices import load_saved
    texts = ["good", "bad", "meh", "fine"]
    dm = SimpleNamespace(n=4, text_hash=text_hashes(texts))
    frame = pd.DataFrame({"region": [stats.EASY, stats.HARD, stats.AMBIGUOUS, stats.HARD]})
    preds = SimpleNamespace(folder=tmp_path, frame=pd.DataFrame({"text": texts}))
    saved = datamap_slices.save_region_slices(dm, frame, preds)
    assert saved == {"data map: hard to learn": 2, "data map: ambiguous": 1}
    specs = load_saved(tmp_path)
    assert specs["data map: hard to learn"].rows == (1, 3)
    assert specs["data map: ambiguous"].rows == (2,)
    moved = SimpleNamespace(folder=tmp_path / "other", frame=pd.DataFrame({"text": texts[::-1]}))
    with pytest.raises(DataMapError, match="differ"):
        datamap_slices.save_region_slices(dm, frame, moved)
    assert not (tmp_path / "other").exists()
