"""The whole GPU check in one command: does ReviewBERT's GPU path work, and how fast is it.

    .venv/bin/python bench/gpu_check.py [--out artifacts/gpu_check] [--quick]

On a machine lent through the workplace's device tool (no network there), carry the
wheels made by ``bash scripts/gpu-wheels.sh`` and run ``bash scripts/gpu-check.sh``.

Steps, each recorded with its figures and a pass/fail:

1. ``detect``: torch sees a CUDA GPU (name, capability, memory, bf16 support, versions).
2. ``pick_device``: ``reviewbert.model.device.pick_device()`` chooses CUDA, and
   ``describe_device`` names the GPU.
3. ``predict``: the Predict path (``inference.Predictor``, fp32) on the demo checkpoint
   on CUDA against the same on the CPU, for a short, a 128-token and a 256-token review:
   attention weights within 1e-5 and the same predicted class.
4. ``train``: bf16 autocast training throughput of a randomly initialised bert-base-sized
   model (12 layers, hidden 768, 12 heads; throughput does not depend on the weights) at
   256 tokens, ReviewBERT's loop (``training.train``) against HF ``Trainer`` with
   ``bf16=True`` on the same reviews in the same run, both with batches of 32: Trainer
   with every review padded to 256 (the seed's way) and with ``DataCollatorWithPadding``,
   with PyTorch's default attention backends (as a user runs it), and once more with cuDNN's
   attention off, as ReviewBERT runs (``device.prepare_cuda``).
5. ``evaluate``: bulk evaluation throughput (``batch_predict.predict_in_order``) of the
   demo and of the bert-base-sized model, fp32 and bf16, reviews per second.
6. ``queue``: a queued ``train`` launched as the Train page launches one
   (``runs.launch_training(..., queue=True)``) waits in the queue named ``cuda:N`` and
   records the GPU in its reviewbert.json, which the Train page shows.

Without a CUDA GPU it says so, writes its report and JSON line (``"gpu": false``) and
exits 0. The last stdout line is one JSON object with the figures, ``targets``,
``checks`` (target -> true/false) and ``met``; ``OUT/report.md`` says it in words.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEMO = ROOT / "checkpoints" / "demo"
ATTENTION_TOL = 1e-5
TARGETS = {"pick_device is cuda": True, "predict attention within 1e-5 of the CPU": True,
           "train faster than HF Trainer bf16 (dynamic padding)": 1.0,
           "queue names the GPU": True}
BERT_BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                 intermediate_size=3072)


def log(msg: str) -> None:
    print(f"[gpu-check] {msg}", file=sys.stderr, flush=True)


def detect() -> dict:
    """What torch sees: no GPU is an answer, not an error."""
    import torch
    out = {"torch": torch.__version__, "cuda_available": bool(torch.cuda.is_available())}
    if not out["cuda_available"]:
        return out
    props = torch.cuda.get_device_properties(0)
    out.update(name=torch.cuda.get_device_name(0), capability=list(torch.cuda.get_device_capability(0)),
               memory_gib=round(props.total_memory / 2**30, 1), count=torch.cuda.device_count(),
               bf16=bool(torch.cuda.is_bf16_supported()), cuda=torch.version.cuda)
    return out


def pick_device_step() -> dict:
    from reviewbert.model.device import describe_device, pick_device
    device = pick_device()
    return {"device": str(device), "described": describe_device(device),
            "ok": device.type == "cuda"}


def review_texts(n: int) -> list[str]:
    """Real reviews from the data folder if it is there, else the built-in examples."""
    from reviewbert import data
    from reviewbert.data.examples import builtin_examples
    folder = data.default_data_dir()
    texts: list[str] = []
    if folder.is_dir():
        files = sorted(str(p) for p in folder.iterdir() if p.suffix in (".csv", ".json"))
        if files:
            from reviewbert.model.labels import get_scheme
            _, chunks = data.unique_reviews(files, get_scheme(5))
            for chunk in chunks:
                texts += [e.text for e in chunk]
                if len(texts) >= n:
                    break
    if not texts:
        texts = [r.text for r in builtin_examples()]
    return (texts * (n // len(texts) + 1))[:n]


def _sync(device) -> None:
    import torch
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def predict_step(texts: list[str], device: str = "cuda") -> dict:
    """The Predict page's forward pass on CUDA against the CPU's, same reviews."""
    import numpy as np
    import torch

    from reviewbert.model.inference import Predictor
    cpu = Predictor.from_checkpoint(DEMO, torch.device("cpu"))
    gpu = Predictor.from_checkpoint(DEMO, torch.device(device))
    rows = []
    for want in (16, 128, 256):
        text = next((t for t in texts if len(cpu.tokenizer(t)["input_ids"]) >= want), texts[0])
        a, b = cpu.predict(text), gpu.predict(text)
        rows.append({"tokens": a.n_tokens, "fast_path": gpu.fast is not None,
                     "max_attention_diff": float(np.abs(a.attentions - b.attentions).max()),
                     "max_prob_diff": float(np.abs(a.probs - b.probs).max()),
                     "same_class": a.label_id == b.label_id,
                     "gpu_weights": str(next(gpu.model.parameters()).dtype)})
    t0 = time.perf_counter()
    for _ in range(20):
        gpu.predict(texts[0])
    _sync(device)
    worst = max(r["max_attention_diff"] for r in rows)
    return {"reviews": rows, "max_attention_diff": worst,
            "gpu_predict_ms": round(1000 * (time.perf_counter() - t0) / 20, 2),
            "ok": worst <= ATTENTION_TOL and all(r["same_class"] for r in rows)}


def random_bert(folder: Path, **sizes) -> Path:
    """A randomly initialised BertForSequenceClassification with the demo's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from reviewbert.model.labels import get_scheme
    scheme = get_scheme(5)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=30522, max_position_embeddings=512, num_labels=5,
                     id2label=scheme.id2label, label2id=scheme.label2id, **sizes)
    BertForSequenceClassification(cfg).save_pretrained(folder, safe_serialization=True)
    AutoTokenizer.from_pretrained(DEMO).save_pretrained(folder)
    return folder


def train_step(base: Path, texts: list[str], batch: int) -> dict:
    """Samples/s of ReviewBERT's loop and of HF Trainer (two paddings), bf16, 256 tokens."""
    import numpy as np
    from transformers import AutoTokenizer

    from reviewbert import data
    tok = AutoTokenizer.from_pretrained(base)
    examples = [data.Example(text=t, stars=i % 5 + 1, label=i % 5, source="gpu-check")
                for i, t in enumerate(texts)]
    lengths = [min(256, len(x)) for x in tok(texts, truncation=True, max_length=256)["input_ids"]]
    out = {"reviews": len(texts), "batch": batch, "mean_tokens": round(float(np.mean(lengths)), 1)}
    _reviewbert_samples_per_s(base, examples[:batch * 4], batch)   # warm-up: kernels, allocator
    out["reviewbert_samples_per_s"] = _reviewbert_samples_per_s(base, examples, batch)
    # HF Trainer as a user runs it: PyTorch's default attention backends (cuDNN's first on
    # Hopper). ReviewBERT turns cuDNN's off (device.prepare_cuda); the last figure is
    # Trainer with it off too, the same kernels as ours.
    for pad, cudnn in (("max_length", True), ("dynamic", True), ("dynamic", False)):
        key = f"trainer_{pad}_samples_per_s" + ("" if cudnn else "_without_cudnn_attention")
        with cudnn_attention(cudnn):
            _trainer_samples_per_s(base, tok, examples[:batch * 4], batch, pad)
            out[key] = _trainer_samples_per_s(base, tok, examples, batch, pad)
    out["ratio_vs_trainer_dynamic"] = round(out["reviewbert_samples_per_s"]
                                            / out["trainer_dynamic_samples_per_s"], 2)
    out["ratio_vs_trainer_dynamic_without_cudnn_attention"] = round(
        out["reviewbert_samples_per_s"]
        / out["trainer_dynamic_samples_per_s_without_cudnn_attention"], 2)
    out["ratio_vs_trainer_max_length"] = round(out["reviewbert_samples_per_s"]
                                               / out["trainer_max_length_samples_per_s"], 2)
    return out


@contextlib.contextmanager
def cudnn_attention(on: bool):
    """cuDNN's backend of scaled_dot_product_attention on or off inside, as it was after."""
    import torch
    was = torch.backends.cuda.cudnn_sdp_enabled()
    torch.backends.cuda.enable_cudnn_sdp(on)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


def _reviewbert_samples_per_s(base: Path, examples, batch: int) -> float:
    from reviewbert import data
    from reviewbert.config import TrainConfig
    from reviewbert.training import train
    cfg = TrainConfig(base_model=str(base), epochs=1, batch_size=batch, max_length=256,
                      mixed_precision="bf16", train_eval_max=64, save_every_steps=0,
                      eval_batch_size=128)
    small = data.Splits(train=examples, validation=examples[:64], test=examples[:64],
                        report=None)
    with tempfile.TemporaryDirectory() as tmp:
        train(cfg, Path(tmp) / "run", splits=small, log=lambda *a: None)
        status = json.loads((Path(tmp) / "run" / "status.json").read_text())
    return round(len(examples) / status["train_seconds"], 1)


def _trainer_samples_per_s(base: Path, tok, examples, batch: int, pad: str) -> float:
    import torch
    from transformers import (
        AutoModelForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        default_data_collator,
    )
    texts = [e.text for e in examples]
    if pad == "max_length":
        enc = tok(texts, truncation=True, max_length=256, padding="max_length")
        collator = default_data_collator
    else:
        enc = tok(texts, truncation=True, max_length=256)
        collator = DataCollatorWithPadding(tok)
    rows = [{"input_ids": ids, "attention_mask": m, "labels": e.label}
            for ids, m, e in zip(enc["input_ids"], enc["attention_mask"], examples)]
    model = AutoModelForSequenceClassification.from_pretrained(base, attn_implementation="sdpa")
    with tempfile.TemporaryDirectory() as tmp:
        args = TrainingArguments(output_dir=tmp, per_device_train_batch_size=batch, bf16=True,
                                 num_train_epochs=1, save_strategy="no", eval_strategy="no",
                                 logging_strategy="no", report_to="none",
                                 use_cpu=not torch.cuda.is_available())
        out = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator).train()
    return round(len(examples) / out.metrics["train_runtime"], 1)


def evaluate_step(base: Path, texts: list[str], device: str = "cuda") -> dict:
    """Reviews/s of bulk evaluation on the GPU, fp32 and bf16, the demo and bert-base."""
    import torch

    from reviewbert.model.batch_predict import predict_in_order
    from reviewbert.model.checkpoint import load_checkpoint
    out = {"reviews": len(texts)}
    for name, folder in (("demo", DEMO), ("bert_base", base)):
        model, tok, _ = load_checkpoint(folder, torch.device(device))
        for precision in ("fp32", "bf16"):
            predict_in_order(model, tok, texts[:256], max_length=256, batch_size=128,
                             precision=precision)            # warm-up
            _sync(device)
            t0 = time.perf_counter()
            predict_in_order(model, tok, texts, max_length=256, batch_size=128,
                             precision=precision)
            _sync(device)
            out[f"{name}_{precision}_reviews_per_s"] = round(len(texts) / (time.perf_counter()
                                                                           - t0), 1)
        del model
    return out


def queue_step(base_small: Path, workdir: Path) -> dict:
    """A queued train, launched as the Train page does: its queue and its record name the GPU."""
    from reviewbert.data.examples import builtin_examples
    from reviewbert.training import runs
    csv = workdir / "reviews.csv"
    csv.write_text("review,rating\n" + "".join(
        '"{}",{}\n'.format(r.text.replace('"', '""'), r.stars) for r in builtin_examples()))
    run = workdir / "queued-run"
    proc = runs.launch_training(["--data", str(csv), "--base-model", str(base_small),
                                 "--epochs", "1", "--max-length", "64"], run, queue=True)
    seen = (runs.read_status(run) or {}).get("device")
    rc = proc.wait(timeout=600)
    meta = json.loads((run / "reviewbert.json").read_text()) if (run / "reviewbert.json").exists() \
        else {}
    expected = runs.queue_device()
    return {"queue_device": expected, "status_device": seen, "returncode": rc,
            "run_device": meta.get("device"),
            "ok": expected.startswith("cuda:") and seen == expected and rc == 0
            and str(meta.get("device", "")).startswith("CUDA GPU")}


def run_checks(args, out: dict, device: str = "cuda") -> None:
    """Every step on ``device``; ``cpu`` only for --cpu-dry-run (the steps' mechanics, with a
    small model: its figures mean nothing)."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        texts = review_texts(64 if args.quick else 4096)
        steps = [("pick_device", pick_device_step),
                 ("predict", lambda: predict_step(texts, device))]
        sizes = BERT_BASE if device == "cuda" else dict(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128)
        base = random_bert(tmp / "bert-base", **sizes)
        small = random_bert(tmp / "bert-small", hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128)
        steps += [("train", lambda: train_step(base, texts, args.batch)),
                  # on the CPU 8 reviews: the demo in bf16 is emulated where the CPU has no
                  # bf16 units (1.4 reviews/s on one AVX2 core: 112 s for 64 reviews)
                  ("evaluate", lambda: evaluate_step(
                      base, texts if device == "cuda" else texts[:8], device)),
                  ("queue", lambda: queue_step(small, tmp))]
        for name, step in steps:
            log(f"{name} ...")
            try:
                out[name] = step()
            except Exception as e:  # noqa: BLE001 - a failed step is a finding, not a crash
                out[name] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            log(f"{name}: {json.dumps(out[name])[:300]}")


def checks(out: dict) -> dict:
    if not out["detect"].get("cuda_available"):
        return {}
    train = out.get("train") or {}
    return {"pick_device is cuda": bool(out.get("pick_device", {}).get("ok")),
            "predict attention within 1e-5 of the CPU": bool(out.get("predict", {}).get("ok")),
            "train faster than HF Trainer bf16 (dynamic padding)":
                bool((train.get("ratio_vs_trainer_dynamic") or 0) >= 1.0),
            "queue names the GPU": bool(out.get("queue", {}).get("ok"))}


def report(out: dict) -> str:
    """The check in words (OUT/report.md)."""
    det = out["detect"]
    lines = ["# ReviewBERT GPU check", "", f"torch {det['torch']}; machine: {out['cpu']}", ""]
    if not det.get("cuda_available"):
        return "\n".join(lines + ["**No CUDA GPU here**: nothing to check. Run this command on "
                                  "a machine with one (see the module docstring).", ""])
    lines += [f"GPU: **{det['name']}** (capability {det['capability']}, {det['memory_gib']} GiB, "
              f"bf16 {'yes' if det['bf16'] else 'no'}, CUDA {det['cuda']}).", ""]
    for name, ok in out["checks"].items():
        lines.append(f"- {'PASS' if ok else 'FAIL'}: {name}")
    for step in ("pick_device", "predict", "train", "evaluate", "queue"):
        lines += ["", f"## {step}", "", "```json", json.dumps(out.get(step), indent=1), "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "gpu_check")
    ap.add_argument("--batch", type=int, default=32, help="training batch size (both sides)")
    ap.add_argument("--quick", action="store_true", help="64 reviews instead of 4,096")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="without a GPU, run every step on the CPU with a small model, to test "
                         "the steps themselves (tests/unit/test_gpu_check.py); no figure counts")
    args = ap.parse_args(argv)
    from reviewbert.model.device import cpu_description
    out = {"gpu": False, "cpu": cpu_description(), "detect": detect(), "quick": args.quick}
    if out["detect"]["cuda_available"]:
        out["gpu"] = True
        run_checks(args, out)
    elif args.cpu_dry_run:
        out["cpu_dry_run"] = True
        run_checks(args, out, device="cpu")
    else:
        log("no CUDA GPU: nothing to check here (exit 0)")
    out["checks"] = checks(out)
    out["targets"] = TARGETS
    out["met"] = bool(out["checks"]) and all(out["checks"].values())
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "report.md").write_text(report(out), encoding="utf-8")
    print(json.dumps(out, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
