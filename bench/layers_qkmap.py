"""The Heads page's query–key map: one head of 300 test reviews drawn, against reading the
heads one pass at a time, in one run.

- ours: ``qkmap.collect`` (one forward pass reads every head's queries and keys, hooks on
  the query and key Linears; in the page's precision, bf16 on a CPU with bf16 units), then
  the head's AttentionViz normalisation and PCA (``qkmap.project_head``, no cache) and its
  Plotly figure built and serialised (``qk_figures.qk_figure(...).to_json()``: what the
  page sends). Target: <= 5 s for 300
  test reviews on this 2-core CPU. The matrix of every head's thumbnails is timed beside
  it (``thumbnails_seconds``, not in the target);
- baseline, in the same run, on the same reviews: one forward pass per head, each keeping
  that head only (what reading the matrix's 72 heads one at a time costs), timed over the
  heads of one layer and scaled to all of them (``baseline_heads_timed`` says how many).
  ``ratio_vs_per_head`` = baseline / ours' read.

--quick proves it runs: 30 reviews, two heads timed for the baseline; its figures are not
the benchmark's.

Usage: ``OMP_NUM_THREADS=2 python bench/layers_qkmap.py [--checkpoint checkpoints/demo]
[--n 300] [--layer 4] [--head 10] [--quick]`` (layer and head from 1). The last stdout line
is one JSON object with ``targets``, ``checks`` and ``met``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reviewbert.heads import analysis as head_analysis  # noqa: E402
from reviewbert.heads import qk_figures, qkmap  # noqa: E402
from reviewbert.model.checkpoint import load_checkpoint  # noqa: E402
from reviewbert.model.device import cpu_description, resolve_precision  # noqa: E402

TARGET_SECONDS = 5.0
MAX_LENGTH = 256


def test_reviews(info, tok, n: int) -> list:
    from reviewbert.analysis.sources import named_split
    reviews, _, _ = named_split(info.meta, "test", tok)
    return head_analysis.sample_reviews(reviews, n, seed=0)


def ours(model, tok, texts: list[str], layer: int, head: int) -> dict:
    t0 = time.perf_counter()
    vecs = qkmap.collect(model, tok, texts, max_length=MAX_LENGTH)
    t1 = time.perf_counter()
    proj = qkmap.project_head(vecs, layer, head, "pca")
    t2 = time.perf_counter()
    qk_figures.qk_figure(proj.coords, vecs.tokens, "type", "bench").to_json()
    t3 = time.perf_counter()
    qkmap.thumbnails(vecs)
    t4 = time.perf_counter()
    return {"read_seconds": t1 - t0, "project_seconds": t2 - t1, "figure_seconds": t3 - t2,
            "seconds": t3 - t0, "thumbnails_seconds": t4 - t3, "tokens": vecs.n_tokens,
            "heads": int(vecs.alive_mask().sum()), "alive": vecs.alive}


def per_head(model, tok, texts: list[str], cells: list[tuple[int, int]]) -> float:
    """One pass per head, each keeping that head's queries and keys only."""
    t0 = time.perf_counter()
    for li, h in cells:
        vecs = qkmap.collect(model, tok, texts, max_length=MAX_LENGTH)
        vecs.head(li, h)
    return time.perf_counter() - t0


def measure(checkpoint, n: int = 300, layer: int = 3, head: int = 9, quick: bool = False) -> dict:
    """The benchmark's JSON (module docstring); ``layer`` and ``head`` from 0."""
    model, tok, info = load_checkpoint(checkpoint, torch.device("cpu"), attn_implementation="eager")
    texts = [r.text for r in test_reviews(info, tok, 30 if quick else n)]
    # warm-up: the page's process has torch's kernels, scikit-learn and Plotly loaded
    warm = qkmap.collect(model, tok, texts[:4], max_length=MAX_LENGTH)
    qk_figures.qk_figure(qkmap.project_head(warm, layer, head).coords, warm.tokens, "type", "").to_json()
    got = ours(model, tok, texts, layer, head)
    cells = [(li, h) for li, hs in enumerate(got.pop("alive")) for h in hs]
    timed = [c for c in cells if c[0] == layer][:2 if quick else None]
    baseline = per_head(model, tok, texts, timed) * len(cells) / len(timed)
    checks = {f"seconds <= {TARGET_SECONDS:g}": got["seconds"] <= TARGET_SECONDS}
    return {"bench": "layers_qkmap", "quick": quick, "n": len(texts), "layer": layer + 1,
            "head": head + 1, **{k: round(v, 3) if isinstance(v, float) else v for k, v in got.items()},
            "baseline_per_head_seconds": round(baseline, 2), "baseline_heads_timed": len(timed),
            "ratio_vs_per_head": round(baseline / got["read_seconds"], 1),
            "precision": resolve_precision("auto", "cpu"), "threads": torch.get_num_threads(),
            "cpu": cpu_description(),
            "targets": {"seconds": TARGET_SECONDS}, "checks": checks,
            "met": (not quick) and all(checks.values())}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=str(ROOT / "checkpoints" / "demo"))
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--layer", type=int, default=4)
    ap.add_argument("--head", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    import transformers
    transformers.logging.set_verbosity_error()
    print(json.dumps(measure(args.checkpoint, args.n, args.layer - 1, args.head - 1, args.quick)))


if __name__ == "__main__":
    main()
