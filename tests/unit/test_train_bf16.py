"""--mixed-precision bf16 on the CPU (issue 12): the training step runs under bf16
autocast through Accelerate, evaluation and the saved checkpoint stay fp32."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from reviewbert.config import TrainConfig
from reviewbert.model import batch_predict, device
from reviewbert.model.checkpoint import load_checkpoint
from reviewbert.training import train
from reviewbert.training.setup import make_accelerator

from toyreviews import write_toy_csv


@pytest.fixture
def linear_outputs():
    """(training?, dtype) of every Linear layer's output while the test runs."""
    seen = []

    def hook(module, args, output):
        if isinstance(module, torch.nn.Linear):
            seen.append((module.training, output.dtype))

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    yield seen
    handle.remove()


def test_bf16_step_under_autocast_and_fp32_checkpoint(tmp_path, tiny_model_dir, linear_outputs,
                                                      monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(device, "cpu_bf16_units", lambda: ())  # the same message on every CPU
    toy = write_toy_csv(tmp_path / "toy.csv", n=100)
    cfg = TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=32, epochs=1,
                      batch_size=8, seed=0, mixed_precision="bf16", save_every_steps=0)
    run = tmp_path / "run"
    meta = train(cfg, run, log=lambda *a: None)
    training = {dtype for is_training, dtype in linear_outputs if is_training}
    evaluating = {dtype for is_training, dtype in linear_outputs if not is_training}
    assert training == {torch.bfloat16}   # the step ran under bf16 autocast
    assert evaluating == {torch.float32}  # evaluation stayed exact fp32
    assert "bf16 autocast (emulated" in meta["device"]
    assert json.loads((run / "reviewbert.json").read_text())["hyperparameters"][
        "mixed_precision"] == "bf16"
    assert meta["best"]["test"]["loss"] > 0
    for sub in ("best", "last"):
        tensors = load_file(str(run / sub / "model.safetensors"))
        assert {t.dtype for t in tensors.values()} == {torch.float32}
    assert not list(run.rglob("*.bin"))
    model, tok, _ = load_checkpoint(run / "best", torch.device("cpu"))
    probs = batch_predict.predict_texts(model, tok, ["excellent phone, excellent battery"], max_length=32)
    assert probs.shape == (1, 5) and abs(float(probs.sum()) - 1) < 1e-5


def test_cpu_bf16_units_are_named_when_present(monkeypatch):
    monkeypatch.setattr(device, "cpu_bf16_units", lambda: ("amx_bf16",))
    acc = make_accelerator(TrainConfig(mixed_precision="bf16"), "unused")
    assert device.describe_mixed_precision(acc) == "bf16 autocast (AMX-BF16)"
    # one process, one Accelerate state: the next run may use another precision
    assert make_accelerator(TrainConfig(mixed_precision="no"), "unused").mixed_precision == "no"


def test_auto_precision_is_bf16_only_where_the_cpu_has_bf16_units(monkeypatch):
    """The default, "auto": bf16 autocast on a CPU with AMX/AVX512-BF16 (measured faster at
    the same accuracy), fp32 on one without (bf16 is emulated there, and slower)."""
    assert TrainConfig().mixed_precision == "auto"
    monkeypatch.setattr(device, "cpu_bf16_units", lambda: ("amx_bf16", "avx512_bf16"))
    assert device.resolve_mixed_precision("auto", "cpu") == "bf16"
    acc = make_accelerator(TrainConfig(), "unused")
    assert acc.mixed_precision == "bf16"
    assert device.describe_mixed_precision(acc) == "bf16 autocast (AMX-BF16, AVX512-BF16)"
    monkeypatch.setattr(device, "cpu_bf16_units", lambda: ())
    assert device.resolve_mixed_precision("auto", "cpu") == "no"
    assert make_accelerator(TrainConfig(), "unused").mixed_precision == "no"
    # an explicit choice is kept as given, whatever the CPU
    assert device.resolve_mixed_precision("bf16", "cpu") == "bf16"
    assert device.resolve_mixed_precision("no", "cpu") == "no"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert device.resolve_mixed_precision("auto", "cuda") == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert device.resolve_mixed_precision("auto", "cuda") == "no"


def test_the_run_records_what_auto_resolved_to(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(device, "cpu_bf16_units", lambda: ())
    toy = write_toy_csv(tmp_path / "toy.csv", n=60)
    cfg = TrainConfig(data=[str(toy)], base_model=str(tiny_model_dir), max_length=32, epochs=1,
                      batch_size=8, seed=0, save_every_steps=0)
    meta = train(cfg, tmp_path / "run", log=lambda *a: None)
    assert meta["hyperparameters"]["mixed_precision"] == "auto"
    assert meta["mixed_precision"] == "no"
    assert "autocast" not in meta["device"]
