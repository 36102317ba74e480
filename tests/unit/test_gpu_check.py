"""bench/gpu_check.py without a GPU: its no-GPU answer, its report, what can honestly be
checked with CUDA mocked (device choice, the queue's name for the GPU), and every step's
mechanics on the CPU (--cpu-dry-run), so that the one command works the day a GPU is lent."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "bench" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _last_json(capsys) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_says_so_and_exits_0(gpu_check, tmp_path, capsys):
    assert gpu_check.main(["--out", str(tmp_path)]) == 0
    out = _last_json(capsys)
    assert out["gpu"] is False and out["detect"]["cuda_available"] is False
    assert out["checks"] == {} and out["met"] is False and out["targets"]
    assert "No CUDA GPU here" in (tmp_path / "report.md").read_text()


def test_with_cuda_mocked_the_device_and_the_queue_name_the_gpu(gpu_check, monkeypatch):
    from reviewbert.training import runs
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    step = gpu_check.pick_device_step()
    assert step == {"device": "cuda", "described": "CUDA GPU (NVIDIA H100 80GB HBM3)", "ok": True}
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert runs.queue_device() == "cuda:0"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert runs.queue_device() == "cuda:1"


def test_the_report_and_checks_of_a_gpu_run(gpu_check):
    out = {"cpu": "16-core test CPU", "detect": {
        "torch": "2.x", "cuda_available": True, "name": "NVIDIA H100", "capability": [9, 0],
        "memory_gib": 79.1, "bf16": True, "cuda": "13.0"},
        "pick_device": {"ok": True}, "predict": {"ok": False, "max_attention_diff": 3e-5},
        "train": {"ratio_vs_trainer_dynamic": 1.4}, "queue": {"ok": True}}
    out["checks"] = gpu_check.checks(out)
    assert out["checks"] == {"pick_device is cuda": True,
                             "predict attention within 1e-5 of the CPU": False,
                             "train faster than HF Trainer bf16 (dynamic padding)": True,
                             "queue names the GPU": True}
    text = gpu_check.report(out)
    assert "GPU: **NVIDIA H100**" in text and "- FAIL: predict attention within 1e-5" in text
    assert "- PASS: queue names the GPU" in text


def test_every_step_runs_on_the_cpu(gpu_check, tmp_path, capsys, monkeypatch):
    """--cpu-dry-run: each step's code, on the CPU with a small model (figures mean nothing)."""
    monkeypatch.setenv("REVIEWBERT_QUEUE_DIR", str(tmp_path / ".queue"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert gpu_check.main(["--out", str(tmp_path), "--cpu-dry-run", "--quick",
                           "--batch", "8"]) == 0
    out = _last_json(capsys)
    for step in ("pick_device", "predict", "train", "evaluate", "queue"):
        assert "error" not in out[step], (step, out[step])
    assert out["predict"]["max_attention_diff"] == 0.0          # the CPU against itself
    assert out["train"]["reviewbert_samples_per_s"] > 0
    assert out["train"]["trainer_dynamic_samples_per_s"] > 0
    assert out["evaluate"]["demo_bf16_reviews_per_s"] > 0
    assert out["queue"]["status_device"] == "cpu" and out["queue"]["returncode"] == 0
    assert out["queue"]["run_device"].startswith("CPU")
    assert out["cpu_dry_run"] is True and out["met"] is False   # nothing is met without a GPU
