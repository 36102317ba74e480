"""class_balance: undersample / resample / weighted training on the same balanced
validation and test reviews (issue 12).

Split tests run on two small imbalanced files (a CSV and a gzipped JSONL, so the
extra training reviews come through both readers' second pass) and, marked
``integration``, on the real files; training tests on the tiny random BERT.
"""
from __future__ import annotations

import csv
import gzip
import json
import math
from dataclasses import asdict

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_train import one_thread  # noqa: F401 (autouse: one torch thread per test)

from reviewbert import data
from reviewbert.cli.train import _read_config
from reviewbert.config import TrainConfig, add_arguments
from reviewbert.data import CLASS_BALANCE, ClassUse, build_splits, class_weights, splits_from_meta
from reviewbert.model.labels import FIVE, THREE
from reviewbert.training import train
from reviewbert.training.hooks import TrainHooks
from reviewbert.training.losses import class_loss
from reviewbert.training.runs import read_status
from reviewbert.training.sampler import LengthGroupedSampler, balanced_draw

from toyreviews import cli, toy_rows

# stars 1-3: 40 reviews each; 4: 90; 5: 150 (in all, across the two files)
PER_STAR = {1: 40, 2: 40, 3: 40, 4: 90, 5: 150}
SPLITS = ("train", "validation", "test")


def imbalanced_rows() -> list[tuple[str, int]]:
    left = dict(PER_STAR)
    rows = []
    for text, stars in toy_rows(5 * max(PER_STAR.values()), seed=1):
        if left[stars]:
            left[stars] -= 1
            rows.append((text, stars))
    return rows


@pytest.fixture(scope="module")
def imbalanced(tmp_path_factory) -> list[str]:
    """Two files: even rows as CSV, odd rows as gzipped JSON lines."""
    folder = tmp_path_factory.mktemp("imbalanced")
    rows = imbalanced_rows()
    with open(folder / "a.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["review", "rating"])
        w.writerows(rows[0::2])
    with gzip.open(folder / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        for text, stars in rows[1::2]:
            f.write(json.dumps({"reviewText": text, "overall": float(stars)}) + "\n")
    return [str(folder / "a.csv"), str(folder / "b.jsonl.gz")]


def texts(examples) -> list[str]:
    return [e.text for e in examples]


def splits_by_mode(files, scheme=FIVE, **kw) -> dict[str, data.Splits]:
    return {mode: build_splits(files, scheme, class_balance=mode, **kw) for mode in CLASS_BALANCE}


def check_same_evaluation_splits(by_mode: dict[str, data.Splits]) -> None:
    """Validation and test identical (same reviews, same order); train a superset of
    undersample's, holding its reviews in the same order."""
    under = by_mode["undersample"]
    for mode in ("resample", "weighted"):
        got = by_mode[mode]
        for split in ("validation", "test"):
            assert texts(got[split]) == texts(under[split]), (mode, split)
        balanced = set(texts(under.train))
        assert [t for t in texts(got.train) if t in balanced] == texts(under.train)
        held_out = set(texts(got.validation)) | set(texts(got.test))
        assert not held_out & set(texts(got.train))


# ------------------------------------------------------------------ splits
def test_validation_and_test_are_undersample_s_on_a_fixture(imbalanced):
    by_mode = splits_by_mode(imbalanced, seed=7)
    check_same_evaluation_splits(by_mode)
    # undersample: 40 per class in all (28 / 4 / 8); the others keep every other review
    assert by_mode["undersample"].report.split_counts["train"] == dict.fromkeys(FIVE.names, 28)
    for mode in ("resample", "weighted"):
        report = by_mode[mode].report
        assert report.per_class == 40
        assert list(report.split_counts["train"].values()) == [28, 28, 28, 78, 138]
        assert report.split_counts["test"] == dict.fromkeys(FIVE.names, 8)
        every = texts(by_mode[mode].train) + texts(by_mode[mode].validation) + \
            texts(by_mode[mode].test)
        assert sorted(every) == sorted(t for t, _ in imbalanced_rows())  # nothing lost
        assert report.training["mode"] == mode
        assert report.training["train_counts"] == report.split_counts["train"]
    resample = by_mode["resample"].report
    assert resample.training["per_epoch"] == dict.fromkeys(FIVE.names, 28)
    assert "each epoch draws a fresh 28 reviews per class" in resample.format()
    weighted = by_mode["weighted"].report.to_dict()["training"]
    total = 28 * 3 + 78 + 138
    assert weighted["class_weights"]["5 stars"] == pytest.approx(total / (5 * 138), abs=1e-6)
    assert weighted["class_weights"]["1 star"] == pytest.approx(total / (5 * 28), abs=1e-6)


def test_max_per_class_caps_every_class_and_keeps_evaluation_splits(imbalanced):
    by_mode = splits_by_mode(imbalanced, seed=7, max_per_class=60)
    check_same_evaluation_splits(by_mode)
    # n = 40 (the rarest class) -> 4 validation + 8 test; train up to 60 - 12 per class
    assert list(by_mode["weighted"].report.split_counts["train"].values()) == [28, 28, 28, 48, 48]
    # a cap below the rarest class: all three modes are the same balanced split
    small = splits_by_mode(imbalanced, seed=7, max_per_class=20)
    check_same_evaluation_splits(small)
    assert texts(small["weighted"].train) == texts(small["undersample"].train)


def test_three_labels_and_rebuild_from_meta(imbalanced):
    by_mode = splits_by_mode(imbalanced, THREE, seed=3)
    check_same_evaluation_splits(by_mode)
    assert list(by_mode["weighted"].report.split_counts["train"].values()) == [68, 28, 228]
    cfg = data.data_config(imbalanced, THREE, seed=3, class_balance="resample")
    assert cfg["class_balance"] == "resample"
    again = splits_from_meta({"data": cfg})
    for split in SPLITS:
        assert texts(again[split]) == texts(by_mode["resample"][split])
    old = {k: v for k, v in cfg.items() if k != "class_balance"}  # a checkpoint from before
    assert texts(splits_from_meta({"data": old}).train) == texts(by_mode["undersample"].train)


@pytest.mark.parametrize("cap,titles", [(None, False), (2500, True)],
                         ids=["all", "capped-with-titles"])
def test_validation_and_test_are_undersample_s_on_the_real_files(data_dir, cap, titles):
    files = sorted(str(p) for p in data_dir.iterdir() if p.suffix in (".csv", ".json"))
    by_mode = splits_by_mode(files, seed=42, max_per_class=cap,
                             options=data.ReadOptions(prepend_title=titles))
    check_same_evaluation_splits(by_mode)
    counts = by_mode["weighted"].report.split_counts
    under = by_mode["undersample"].report.split_counts["train"]
    more = counts["train"]
    assert more["2 stars"] == under["2 stars"]  # the rarest class has nothing more
    held_out = counts["validation"]["5 stars"] + counts["test"]["5 stars"]
    if cap is None:  # every other 5-star review: about 15,000 of the 15,600
        assert more["5 stars"] == by_mode["weighted"].report.classes_before["5 stars"] - held_out
    else:
        assert more["5 stars"] == cap - held_out  # the cap, less validation and test
    assert [e.label for e in by_mode["resample"].train].count(4) == more["5 stars"]


def test_class_balance_is_checked():
    with pytest.raises(data.DataError, match="class_balance"):
        build_splits([], FIVE, class_balance="oversample")
    assert TrainConfig.validate_field("class_balance", "oversample") == \
        "class_balance must be undersample, resample or weighted, got 'oversample'"


# ---------------------------------------------------------------- resample
def test_balanced_draw_changes_by_epoch_and_is_deterministic():
    labels = np.array([0] * 10 + [1] * 35 + [2] * 100)
    rng = np.random.default_rng(0)
    labels = labels[rng.permutation(len(labels))]
    draws = [balanced_draw(labels, 10, seed=5, epoch=e) for e in range(4)]
    for d in draws:
        assert np.bincount(labels[d]).tolist() == [10, 10, 10]
        assert len(set(d.tolist())) == 30  # no review twice in an epoch
    assert all(np.array_equal(balanced_draw(labels, 10, seed=5, epoch=e), d)
               for e, d in enumerate(draws))  # a pure function of (seed, epoch): resumable
    assert not np.array_equal(balanced_draw(labels, 10, seed=6, epoch=0), draws[0])
    of = [{int(i) for i in d if labels[i] == c} for c in range(3) for d in draws]
    rare = of[0:4]
    assert rare[0] == rare[1] == rare[2] == rare[3]  # the rarest class: all of it, every epoch
    mid, big = of[4:8], of[8:12]
    assert not (mid[0] & mid[1]) and not (mid[1] & mid[2])  # 35 // 10 = 3 disjoint draws
    for a in range(4):
        for b in range(a + 1, 4):
            assert not big[a] & big[b]  # 100 // 10 = 10 disjoint draws


def test_resampling_sampler_yields_one_balanced_draw_per_epoch():
    labels = [0] * 12 + [1] * 40 + [2] * 70
    lengths = np.random.default_rng(1).integers(5, 200, len(labels)).tolist()
    s = LengthGroupedSampler(lengths, 4, seed=2, labels=labels, resample_per_class=12)
    assert len(s) == 36
    seen = []
    for epoch in range(3):
        s.epoch = epoch
        order = list(s)
        assert list(s) == order and len(order) == 36
        assert sorted(order) == sorted(balanced_draw(labels, 12, 2, epoch).tolist())
        seen.append(set(order))
    assert seen[0] != seen[1] != seen[2]


# ---------------------------------------------------------------- weighted
def test_class_weights_and_the_weighted_loss_by_hand():
    assert class_weights([1, 3]) == pytest.approx([2.0, 2 / 3])
    assert class_weights([28, 28, 28, 78, 138]) == pytest.approx(
        [300 / (5 * n) for n in (28, 28, 28, 78, 138)])
    loss_fn = class_loss(2, ClassUse.of("weighted", [1, 3]).weights)
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)], [math.log(4.0), 0.0]])
    labels = torch.tensor([0, 1, 1])
    # -log p(true): ln 2, ln(4/3), ln 5; weights w0 = 2, w1 = 2/3; mean weighted by w[y]
    by_hand = (2 * math.log(2) + 2 / 3 * math.log(4 / 3) + 2 / 3 * math.log(5)) / (2 + 4 / 3)
    assert loss_fn(logits, labels).item() == pytest.approx(by_hand, rel=1e-6)
    plain = class_loss(2, ClassUse.of("resample", [1, 3]).weights)
    assert plain(logits, labels).item() == pytest.approx(
        (math.log(2) + math.log(4 / 3) + math.log(5)) / 3, rel=1e-6)


# ---------------------------------------------------------- the config field
def test_class_balance_round_trips_flag_config_and_meta(tmp_path):
    import argparse
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert vars(p.parse_args(["--class-balance", "weighted"])) == {"class_balance": "weighted"}
    with pytest.raises(SystemExit):
        p.parse_args(["--class-balance", "oversample"])
    cfg_file = tmp_path / "config.json"
    cfg_file.write_text(json.dumps({"class_balance": "resample", "data": ["x.csv"]}))
    assert TrainConfig(**_read_config(cfg_file)).class_balance == "resample"
    stored = json.loads(json.dumps(asdict(TrainConfig(class_balance="weighted"))))
    assert TrainConfig.from_dict(stored).class_balance == "weighted"
    assert TrainConfig().class_balance == "undersample"
    assert TrainConfig.from_dict({k: v for k, v in stored.items()
                                  if k != "class_balance"}).class_balance == "undersample"


# ---------------------------------------------------------------- training
def tiny_cfg(tiny_model_dir, files, **kw) -> TrainConfig:
    base = dict(data=list(files), base_model=str(tiny_model_dir), max_length=32, lr_bert=1e-3,
                lr_classifier=1e-2, epochs=2, batch_size=8, seed=0, save_every_steps=0,
                train_eval_max=50)
    return TrainConfig(**{**base, **kw})


@pytest.mark.parametrize("mode", CLASS_BALANCE)
def test_training_runs_end_to_end_with_each_option(tmp_path, tiny_model_dir, imbalanced, mode):
    run = tmp_path / mode
    meta = train(tiny_cfg(tiny_model_dir, imbalanced, class_balance=mode), run,
                 log=lambda *a: None)
    saved = json.loads((run / "reviewbert.json").read_text())
    assert saved["hyperparameters"]["class_balance"] == mode
    assert saved["data"]["class_balance"] == mode
    assert saved["data_report"]["training"]["mode"] == mode
    use = saved["class_balance"]
    assert use["mode"] == mode and use == meta["class_balance"]
    train_counts = {"undersample": [28] * 5}.get(mode, [28, 28, 28, 78, 138])
    assert list(use["train_counts"].values()) == train_counts
    per_epoch = [28] * 5 if mode != "weighted" else train_counts
    assert list(use["per_epoch"].values()) == per_epoch
    assert ("class_weights" in use) == (mode == "weighted")
    assert saved["split_sizes"] == {"train": sum(train_counts), "validation": 20, "test": 40}
    st = read_status(run)
    assert st["state"] == "finished" and st["total_steps"] == 2 * math.ceil(sum(per_epoch) / 8)
    assert saved["best"]["test"]["n"] == 40


def test_cli_config_file_trains_with_resample(tmp_path, tiny_model_dir, imbalanced):
    cfg = tiny_cfg(tiny_model_dir, imbalanced, epochs=1, class_balance="resample")
    cfg_file = tmp_path / "config.json"
    cfg_file.write_text(json.dumps(asdict(cfg)))
    run = tmp_path / "run"
    res = cli("train", "--config", cfg_file, "--out", run)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Class balance: resample: each epoch draws a fresh 28 reviews per class" in res.stdout
    saved = json.loads((run / "reviewbert.json").read_text())
    assert saved["hyperparameters"]["class_balance"] == "resample"
    # the evaluate command rebuilds the very same test split from reviewbert.json
    res = cli("evaluate", "--checkpoint", run, "--json", "--no-cache", "--precision", "fp32")
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["n"] == 40
    assert out["metrics"]["accuracy"] == pytest.approx(saved["best"]["test"]["accuracy"])
    assert set(out["three_label"]) >= {"accuracy", "auc", "n"} and out["three_label"]["n"] == 40


class StopAt(TrainHooks):
    def __init__(self, step: int):
        self.step = step

    def after_step(self, info):
        return info["step"] == self.step


def test_resume_mid_epoch_with_resample_matches_an_unbroken_run(tmp_path, tiny_model_dir,
                                                                imbalanced):
    cfg = tiny_cfg(tiny_model_dir, imbalanced, epochs=3, class_balance="resample")
    ref = tmp_path / "unbroken"
    train(cfg, ref, log=lambda *a: None)
    run = tmp_path / "resumed"
    train(cfg, run, hooks=[StopAt(25)], log=lambda *a: None)  # 18 steps/epoch: in epoch 2
    assert read_status(run)["state"] == "stopped" and read_status(run)["step"] == 25
    train(cfg, run, resume=True, log=lambda *a: None)
    assert read_status(run)["state"] == "finished"
    a = load_file(str(run / "last" / "model.safetensors"))
    b = load_file(str(ref / "last" / "model.safetensors"))
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=1e-6, msg=k)
