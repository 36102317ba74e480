"""The training loop on a tiny random BERT: learning, schedule, batching, saving."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from reviewbert.config import TrainConfig
from reviewbert.errors import CheckpointError
from reviewbert.model.checkpoint import list_checkpoints, load_checkpoint
from reviewbert.training import train
from reviewbert.training.hooks import TrainHooks
from reviewbert.training.optim import layer_depth, lr_factor, param_groups
from reviewbert.training.resume import (
    STATE_JSON,
    STATE_TENSORS,
    load_training_state,
    restore_optimizer,
    save_training_state,
)
from reviewbert.training.runs import read_metrics, read_status, read_steps
from reviewbert.training.sampler import LengthGroupedSampler

from toyreviews import ROOT, write_toy_csv


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def toy_csv(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("toy") / "toy.csv", n=500)


def tiny_cfg(tiny_model_dir, toy_csv, **kw) -> TrainConfig:
    base = dict(data=[str(toy_csv)], base_model=str(tiny_model_dir), max_length=32,
                lr_bert=1e-3, lr_classifier=1e-2, epochs=8, batch_size=8, seed=0)
    return TrainConfig(**{**base, **kw})


def test_tiny_bert_learns_separable_toy_set(tmp_path, tiny_model_dir, toy_csv):
    run = tmp_path / "run"
    meta = train(tiny_cfg(tiny_model_dir, toy_csv), run, log=lambda *a: None)

    # a random 2-layer BERT must pick up the one cue word per class
    assert meta["best"]["validation"]["accuracy"] >= 0.9
    assert meta["best"]["test"]["accuracy"] >= 0.9
    assert meta["best"]["test"]["auc"] > 0.95

    # run folder layout and reviewbert.json contents
    saved = json.loads((run / "reviewbert.json").read_text())
    assert saved["format"] == "reviewbert/1" and saved["labels"] == 5
    assert saved["label_names"][0] == "1 star" and saved["label_names"][4] == "5 stars"
    assert saved["hyperparameters"]["base_model"] == str(tiny_model_dir)
    assert saved["hyperparameters"]["lr_bert"] == 1e-3
    assert saved["data"]["files"][0]["name"] == "toy.csv" and saved["data"]["files"][0]["sha256"]
    assert saved["split_sizes"] == {"train": 350, "validation": 50, "test": 100}
    assert saved["data_report"]["per_class"] == 100
    assert set(saved["best"]) >= {"epoch", "train", "validation", "test"}
    assert saved["device"].startswith("CPU") and saved["created"] and saved["reviewbert_version"]
    for sub, kind in (("best", "best"), ("last", "last")):
        inner = json.loads((run / sub / "reviewbert.json").read_text())
        assert inner["checkpoint"]["kind"] == kind
        assert inner["best"]["epoch"] == saved["best"]["epoch"]
    assert (run / "last" / STATE_TENSORS).exists() and (run / "last" / STATE_JSON).exists()
    assert not list(run.rglob("*.bin")) and not list(run.rglob("*.pt"))  # safetensors only

    # best = the epoch with the highest validation accuracy (ties: lower loss)
    rows = read_metrics(run)
    val = [r for r in rows if r["split"] == "validation"]
    top = max(val, key=lambda r: (r["accuracy"], -r["loss"]))
    assert saved["best"]["epoch"] == top["epoch"]
    assert [(r["epoch"], r["split"]) for r in rows] == [
        (e, s) for e in range(1, 9) for s in ("train", "validation", "test")]
    for r in rows:
        assert 0 <= r["accuracy"] <= 1 and 0 <= r["relaxed_accuracy"] <= 1 and r["loss"] > 0
        assert {"epoch", "split", "loss", "auc", "accuracy", "relaxed_accuracy", "step",
                "time"} <= set(r)

    st = read_status(run)
    assert st["state"] == "finished" and st["step"] == st["total_steps"] == 8 * 44  # 350/8
    assert st["samples_per_s"] > 0

    model, tok, info = load_checkpoint(run / "best")
    assert info.scheme.num_labels == 5 and model.config._attn_implementation == "sdpa"
    # a second plain `train` into the same folder must not clobber it
    with pytest.raises(CheckpointError, match="--resume"):
        train(tiny_cfg(tiny_model_dir, toy_csv), run, log=lambda *a: None)


def test_frozen_encoder_trains_only_the_classifier(tmp_path, tiny_model_dir, toy_csv):
    run = tmp_path / "frozen"
    train(tiny_cfg(tiny_model_dir, toy_csv, epochs=1, freeze_encoder=True, max_per_class=40),
          run, log=lambda *a: None)
    before, _, _ = load_checkpoint(tiny_model_dir)
    after, _, _ = load_checkpoint(run / "last")
    b, a = before.state_dict(), after.state_dict()
    assert torch.equal(b["bert.encoder.layer.0.attention.self.query.weight"],
                       a["bert.encoder.layer.0.attention.self.query.weight"])
    assert torch.equal(b["bert.embeddings.word_embeddings.weight"],
                       a["bert.embeddings.word_embeddings.weight"])
    assert not torch.equal(b["classifier.weight"], a["classifier.weight"])


def test_param_groups_layer_decay_and_no_decay(tiny_model_dir):
    model, _, _ = load_checkpoint(tiny_model_dir)
    cfg = TrainConfig(lr_bert=1e-4, lr_classifier=1e-3, layer_lr_decay=0.5, weight_decay=0.01)
    groups = param_groups(model, cfg)
    lr_of = {n: g["lr"] for g in groups for n in g["names"]}
    wd_of = {n: g["weight_decay"] for g in groups for n in g["names"]}
    assert len(lr_of) == sum(1 for _ in model.parameters())  # every parameter, once
    # L = 2 layers: layer l gets lr_bert * 0.5^(2 - l); embeddings are l = 0
    assert lr_of["bert.encoder.layer.1.output.dense.weight"] == pytest.approx(1e-4)
    assert lr_of["bert.encoder.layer.0.output.dense.weight"] == pytest.approx(5e-5)
    assert lr_of["bert.embeddings.word_embeddings.weight"] == pytest.approx(2.5e-5)
    assert lr_of["bert.pooler.dense.weight"] == pytest.approx(1e-4)
    assert lr_of["classifier.weight"] == pytest.approx(1e-3)
    assert wd_of["classifier.weight"] == 0.01
    assert wd_of["classifier.bias"] == 0.0
    assert wd_of["bert.embeddings.LayerNorm.weight"] == 0.0
    assert layer_depth("bert.encoder.layer.11.output.dense.weight", 12) == 12


def test_lr_schedule_is_steplr_per_epoch_with_optional_warmup():
    cfg = TrainConfig(lr_decay=0.5, lr_step_epochs=2)
    spe = 10  # steps per epoch
    assert [lr_factor(s, cfg, spe, 60) for s in (0, 19, 20, 39, 40)] == [1, 1, .5, .5, .25]
    warm = TrainConfig(warmup_ratio=0.1)  # 6 of 60 steps
    assert lr_factor(0, warm, spe, 60) == pytest.approx(1 / 6)
    assert lr_factor(5, warm, spe, 60) == pytest.approx(1.0)


def test_length_grouped_sampler_is_deterministic_and_groups_lengths():
    rng = np.random.default_rng(0)
    lengths = rng.integers(5, 250, size=1000).tolist()
    s = LengthGroupedSampler(lengths, group=16, seed=3)
    s.epoch = 1
    a = list(s)
    assert sorted(a) == list(range(1000))  # a permutation: nothing lost or repeated
    assert list(s) == a  # same (seed, epoch) -> same order, for resume
    s.epoch = 2
    assert list(s) != a  # a fresh shuffle each epoch

    def padded_tokens(order):
        return sum(16 * max(lengths[i] for i in order[k:k + 16]) for k in range(0, 1000, 16))
    random_order = rng.permutation(1000).tolist()
    # grouping cuts the padding of a random order by far (here ~2x fewer tokens)
    assert padded_tokens(a) < 0.6 * padded_tokens(random_order)
    assert padded_tokens(a) < 1.05 * sum(lengths) + 16 * 250


def test_length_grouped_sampler_mixes_classes_when_length_follows_the_label():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 5, size=1600)
    lengths = (rng.lognormal(3.5, 0.6, 1600) * (1 + 0.5 * (4 - labels))).astype(int).clip(5, 256)

    def stats(order):
        steps = [order[k:k + 16] for k in range(0, len(order), 16)]
        top_share = np.mean([np.bincount(labels[s], minlength=5).max() / len(s) for s in steps])
        return top_share, sum(16 * lengths[s].max() for s in steps)

    plain = np.array(list(LengthGroupedSampler(lengths.tolist(), 16, seed=3)))
    mixed_s = LengthGroupedSampler(lengths.tolist(), 16, seed=3, labels=labels.tolist())
    mixed = np.array(list(mixed_s))
    assert sorted(mixed.tolist()) == list(range(1600)) and list(mixed_s) == mixed.tolist()
    share_plain, pad_plain = stats(plain)
    share_mixed, pad_mixed = stats(mixed)
    _, pad_random = stats(rng.permutation(1600))
    assert share_plain > 0.4             # plain length order: one class dominates a step
    assert share_mixed < 0.33            # mixed: close to 16 random draws from 5 classes
    assert pad_mixed < 0.65 * pad_random  # and much of the padding saving is kept (~0.59)


def test_training_state_round_trip_without_pickle(tmp_path, tiny_model_dir):
    model, _, _ = load_checkpoint(tiny_model_dir)
    cfg = TrainConfig()
    opt = torch.optim.AdamW(param_groups(model, cfg))
    x = torch.randint(1000, 2000, (4, 12))
    model.train()
    model(input_ids=x, labels=torch.tensor([0, 1, 2, 3])).loss.backward()
    opt.step()
    save_training_state(tmp_path, opt, {"epochs_done": 0, "batches_done": 1, "step": 1})
    raw = (tmp_path / STATE_TENSORS).read_bytes()
    assert not raw.startswith(b"PK") and b"\x80\x02" not in raw[:2]  # not a torch zip/pickle
    progress, tensors = load_training_state(tmp_path)
    assert progress["step"] == 1 and progress["batches_done"] == 1

    fresh = torch.optim.AdamW(param_groups(model, cfg))
    restore_optimizer(fresh, tensors)
    for p in model.parameters():
        for k in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(fresh.state[p][k], opt.state[p][k])
    with pytest.raises(CheckpointError):
        load_training_state(tmp_path / "nowhere")


def test_crash_mid_save_keeps_previous_last_loadable(tmp_path, tiny_model_dir, toy_csv,
                                                     monkeypatch):
    run = tmp_path / "run"
    train(tiny_cfg(tiny_model_dir, toy_csv, epochs=1, max_per_class=30), run,
          log=lambda *a: None)
    before = (run / "last" / "model.safetensors").read_bytes()

    from transformers import PreTrainedModel
    calls = {"n": 0}
    real = PreTrainedModel.save_pretrained

    def dies_half_way(self, folder, *a, **kw):
        real(self, folder, *a, **kw)  # the weights are written into the temp folder ...
        calls["n"] += 1
        raise OSError("disk full")    # ... and then the save blows up
    monkeypatch.setattr(PreTrainedModel, "save_pretrained", dies_half_way)
    cfg = tiny_cfg(tiny_model_dir, toy_csv, epochs=2, max_per_class=30)
    with pytest.raises(OSError, match="disk full"):
        train(cfg, run, resume=True, log=lambda *a: None)
    assert calls["n"] >= 1
    assert (run / "last" / "model.safetensors").read_bytes() == before  # untouched
    model, _, info = load_checkpoint(run / "last")
    assert info.meta["checkpoint"]["epochs_done"] == 1
    assert read_status(run)["state"] == "failed" and "disk full" in read_status(run)["message"]
    # no half-written folder is offered as a checkpoint
    assert {c.path.name for c in list_checkpoints(tmp_path)} == {"best", "last"}


class Recorder(TrainHooks):
    def __init__(self, stop_after_epoch=None):
        self.stop_after, self.steps, self.epochs, self.saves, self.ends = \
            stop_after_epoch, [], [], [], []

    def after_step(self, info):
        self.steps.append((info["epoch"], info["step"], float(info["loss"]), info["lr"]))

    def after_epoch(self, info):
        self.epochs.append(info)
        return info["epoch"] == self.stop_after  # e.g. a search pruning a bad trial

    def before_save(self, info):
        self.saves.append(info["kind"])

    def on_end(self, info):
        self.ends.append(info["state"])


def test_hooks_see_every_step_and_epoch_and_can_stop_the_run(tmp_path, tiny_model_dir,
                                                             toy_csv):
    run = tmp_path / "hooked"
    cfg = tiny_cfg(tiny_model_dir, toy_csv, epochs=3, max_per_class=20, lr_decay=0.5,
                   lr_step_epochs=1)  # 70 train reviews: 9 steps per epoch
    first = Recorder(stop_after_epoch=1)
    train(cfg, run, hooks=[first], log=lambda *a: None)
    st = read_status(run)
    assert st["state"] == "stopped" and "--resume" in st["message"] and st["step"] == 9
    assert [s[1] for s in first.steps] == list(range(1, 10))
    assert first.saves == ["best", "last"] and first.ends == ["stopped"]
    e = first.epochs[0]
    assert (e["epoch"], e["step"], e["is_best"]) == (1, 9, True)
    assert e["validation"]["n"] == 10 and 0 <= e["test"]["accuracy"] <= 1
    # steps.jsonl (the default hook) holds the very losses the hooks saw
    assert [(r["epoch"], r["step"], r["lr"]) for r in read_steps(run)] == \
        [(ep, s, lr) for ep, s, _, lr in first.steps]
    assert [r["loss"] for r in read_steps(run)] == pytest.approx([s[2] for s in first.steps])

    rest = Recorder()
    train(cfg, run, resume=True, hooks=[rest], log=lambda *a: None)
    assert read_status(run)["state"] == "finished" and rest.ends == ["finished"]
    assert [s[1] for s in rest.steps] == list(range(10, 28))
    assert [s[3] for s in rest.steps if s[0] == 2] == pytest.approx([0.5e-3] * 9)  # StepLR
    assert [r["step"] for r in read_steps(run)] == list(range(1, 28))


def test_report_to_tensorboard_writes_events(tmp_path, tiny_model_dir, toy_csv):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    run = tmp_path / "tb"
    train(tiny_cfg(tiny_model_dir, toy_csv, epochs=1, max_per_class=20, report_to="tensorboard"),
          run, log=lambda *a: None)
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert {"train/step_loss", "train/lr", "validation/accuracy", "test/loss"} <= \
        set(events.Tags()["scalars"])
    assert [e.step for e in events.Scalars("train/step_loss")] == list(range(1, 10))
    assert [e.step for e in events.Scalars("validation/accuracy")] == [9]


def test_launched_cpu_training_leaves_room_for_the_app():
    """runs.launch's children: nice +10 on every thread (also those started before),
    one core fewer for torch and the tokenizers."""
    code = """if True:
        import os, threading, time, torch
        from types import SimpleNamespace
        from reviewbert.model.device import set_training_threads
        early = threading.Thread(target=time.sleep, args=(3,), daemon=True)
        early.start()
        set_training_threads(SimpleNamespace(device=torch.device("cpu"), num_processes=1))
        print(os.nice(0), os.getpriority(os.PRIO_PROCESS, early.native_id),
              torch.get_num_threads(), os.environ["RAYON_NUM_THREADS"],
              os.sched_getscheduler(0) == os.SCHED_IDLE,
              os.sched_getscheduler(early.native_id) == os.SCHED_IDLE)
    """
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "REVIEWBERT_TRAIN_NICE", "REVIEWBERT_TRAIN_THREADS",
                        "RAYON_NUM_THREADS", "REVIEWBERT_TRAIN_SCHED")}
    env["REVIEWBERT_LAUNCHED"] = "1"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    cores = len(os.sched_getaffinity(0))
    nice = min(19, os.nice(0) + 10)
    assert out.stdout.split() == [str(nice), str(nice), str(max(1, cores - 1)),
                                  str(max(1, cores - 1)), "True", "True"]
