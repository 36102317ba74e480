"""reviewbert.server.model_loading: a checkpoint loaded in a thread while the pages draw."""
from __future__ import annotations

import threading

import pytest

from reviewbert.errors import CheckpointError
from reviewbert.server.model_loading import BackgroundLoad, load_predictor, load_test_split


class FakePredictor:
    tokenizer = "tok"


def gated_load(gate: threading.Event, calls: list):
    def load(path):
        calls.append(("load", path))
        gate.wait(10)
        return FakePredictor()
    return load


def test_the_load_runs_in_a_thread_and_the_caller_does_not_wait():
    gate, calls = threading.Event(), []
    job = BackgroundLoad("ckpt", load=gated_load(gate, calls), split=lambda p, t: ((1, 2), ""))
    assert not job.ready and job.failed is None
    with pytest.raises(TimeoutError, match="still loading"):
        job.predictor(timeout=0.05)
    gate.set()
    assert isinstance(job.predictor(timeout=10), FakePredictor)
    assert job.ready and job.seconds is not None and job.device  # the device was described
    assert job.test_reviews(timeout=10) == ((1, 2), "")
    assert calls == [("load", "ckpt")]


def test_the_split_is_built_with_the_loaded_tokenizer_after_the_model_is_ready():
    seen, after = [], []
    split_gate = threading.Event()

    def split(path, tokenizer):
        seen.append((path, tokenizer))
        split_gate.wait(10)
        return None, "its reviewbert.json names no data files"
    job = BackgroundLoad("p", after_load=lambda: after.append("model"),
                         after_split=lambda: after.append("split"),
                         load=lambda p: FakePredictor(), split=split)
    job.predictor(timeout=10)                 # Predict does not wait for the split
    assert not job.split_ready()
    split_gate.set()
    assert job.test_reviews(timeout=10) == (None, "its reviewbert.json names no data files")
    assert seen == [("p", "tok")]
    job._thread.join(10)
    assert after == ["model", "split"]        # after the model, and after the split


def test_a_checkpoint_error_is_kept_and_raised_to_every_caller():
    def load(path):
        raise CheckpointError("ckpt: config.json is not valid JSON")
    job = BackgroundLoad("ckpt", load=load)
    with pytest.raises(CheckpointError, match="not valid JSON"):
        job.predictor(timeout=10)
    assert isinstance(job.failed, CheckpointError)
    with pytest.raises(CheckpointError):
        job.predictor(timeout=10)
    assert job.test_reviews(timeout=10) == (None, "the checkpoint did not load")


def test_any_other_failure_becomes_one_line_checkpoint_error_not_a_dead_thread():
    def load(path):
        raise RuntimeError("shape mismatch\nlong traceback text")
    job = BackgroundLoad("ckpt", load=load)
    with pytest.raises(CheckpointError) as e:
        job.predictor(timeout=10)
    assert str(e.value) == "ckpt loaded but cannot predict: RuntimeError: shape mismatch"


def test_a_failing_split_falls_back_with_its_reason():
    def split(path, tok):
        raise ValueError("bad split section")
    job = BackgroundLoad("ckpt", load=lambda p: FakePredictor(), split=split)
    assert job.test_reviews(timeout=10) == (None, "ValueError: bad split section")
    assert isinstance(job.predictor(timeout=1), FakePredictor)


def test_the_real_load_and_split_of_a_tiny_checkpoint(tiny_model_dir):
    predictor = load_predictor(str(tiny_model_dir))
    assert predictor.predict("great phone").probs.shape[-1] in (3, 5)
    reviews, why = load_test_split(str(tiny_model_dir), predictor.tokenizer)
    assert reviews is None and why        # the tiny fixture names no data files: said why


def test_a_broken_checkpoint_is_a_checkpoint_error(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    job = BackgroundLoad(tmp_path)
    with pytest.raises(CheckpointError):
        job.predictor(timeout=60)


def test_after_model_runs_between_the_model_and_the_split_and_its_failure_is_harmless():
    order = []

    def after_model():
        order.append("after_model")
        raise ImportError("a view module is broken")

    def split(path, tok):
        order.append("split")
        return None, "none"
    job = BackgroundLoad("p", load=lambda p: order.append("load") or FakePredictor(),
                         after_model=after_model, split=split)
    assert job.test_reviews(timeout=10) == (None, "none")
    assert order == ["load", "after_model", "split"]
    assert isinstance(job.predictor(timeout=1), FakePredictor)


def test_what_libraries_peek_at_is_complete_before_the_thread_starts_and_pandas_is_not_paid_there():
    """Plotly looks up numpy and pandas in sys.modules without importing them. numpy is
    whole once BackgroundLoad() returns, before its load runs; pandas is no longer
    imported there (it cost the first paint 0.3-0.5 s): every module that builds a figure
    imports it itself (test_structure), which waits for the thread's import."""
    import subprocess
    import sys
    code = """
import sys
from reviewbert.server.model_loading import BackgroundLoad
assert "pandas" not in sys.modules, "pandas was imported before: the test proves nothing"
job = BackgroundLoad("p", load=lambda p: object(), split=lambda p, t: (None, "none"), hold=True)
numpy = sys.modules.get("numpy")
print(numpy is not None and hasattr(numpy, "ndarray"), "pandas" in sys.modules)
job.predictor(timeout=30)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False"], out.stdout


def test_a_held_load_waits_for_its_release_or_for_anything_that_needs_the_model():
    calls = []

    def load(path):
        calls.append(path)
        return FakePredictor()
    held = BackgroundLoad("a", load=load, split=lambda p, t: (None, "none"), hold=True)
    held._thread.join(0.3)
    assert calls == [] and not held.ready          # the page is still being drawn
    held.release()
    assert isinstance(held.predictor(timeout=10), FakePredictor) and calls == ["a"]

    waited = BackgroundLoad("b", load=load, split=lambda p, t: (None, "none"), hold=True)
    assert waited.test_reviews(timeout=10) == (None, "none")   # a wait releases it
    assert calls == ["a", "b"]


def test_a_held_load_that_nobody_releases_starts_after_hold_s(monkeypatch):
    import reviewbert.server.model_loading as model_loading
    monkeypatch.setattr(model_loading, "HOLD_S", 0.2)
    job = BackgroundLoad("c", load=lambda p: FakePredictor(), split=lambda p, t: (None, "none"),
                         hold=True)
    job._thread.join(10)        # the page that started it never released it: it loads anyway
    assert job.ready and job.failed is None


def test_the_warm_up_runs_with_the_threads_the_app_gives_one_review(tiny_model_dir, monkeypatch):
    """oneDNN builds its primitives per thread count: warmed up with the app's count for one
    review (one on two cores), the first predictions build none, and the warm-up does not
    wait for a core the browser holds. The process's own count is left as it was."""
    import torch

    from reviewbert.model import device
    from reviewbert.model.inference import Predictor
    seen = []
    real = Predictor.warm_up
    monkeypatch.setattr(Predictor, "warm_up",
                        lambda self: (seen.append(torch.get_num_threads()), real(self))[1])
    monkeypatch.setattr(device, "_threads_before_blocks", lambda: 6)
    before = torch.get_num_threads()
    load_predictor(str(tiny_model_dir))
    assert seen == [device.threads_for_one_review(False)] == [3]
    assert torch.get_num_threads() == before
