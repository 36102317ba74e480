"""The split map on the shipped demo checkpoint and its real test split (2,105 reviews):
``evaluate --save-embeddings`` against ``--save-predictions``, the projector, neighbours,
the map's reading, slices, IG drivers on a sample, and ``report --json``'s map section.
UMAP on 10,000 reviews of a real data file is marked ``umap`` (``make umap``: minutes).

The demo folder is copied as symlinks, so every cache lands in a temporary folder.
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from demo_support import demo_copy

from reviewbert.analysis import drivers, embeddings, lookup, map_reading, neighbours, projection
from reviewbert.analysis import slices as slices_mod
from reviewbert.model.device import cpu_bf16_units, cpu_description

from toyreviews import cli

# the run's shared fp32 evaluation (conftest.demo_evaluation); UMAP's 10,000 reviews in
# bf16 where the CPU has bf16 units (there it is the default and fast)
PRECISION = "fp32"
UMAP_PRECISION = "bf16" if cpu_bf16_units() else "fp32"


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_evaluation):
    """The run's one ``evaluate`` of the test split (saving predictions and sentence
    vectors: ``shared``), and this module's copy of the demo with its prediction cache."""
    shared, res = demo_evaluation
    root = tmp_path_factory.mktemp("map-demo")
    d = demo_copy(root, shared / "demo")
    from reviewbert.data.examples import test_split_examples
    from reviewbert.model.checkpoint import load_checkpoint
    model, tok, info = load_checkpoint(d)
    reviews = test_split_examples(info.meta, tokenizer=tok)
    preds = lookup(d, reviews, info.scheme, 256)
    assert preds is not None
    return {"dir": d, "root": root, "shared": shared, "json": res,
            "model": model, "tok": tok, "preds": preds}


def test_saved_embeddings_follow_the_predictions_rows(demo):
    vecs = np.load(demo["shared"] / "vecs.npy", allow_pickle=False)
    table = pd.read_csv(demo["shared"] / "preds.csv", keep_default_na=False)
    assert vecs.dtype == np.float16 and vecs.shape == (2105, 384) and len(table) == 2105
    assert demo["json"]["embeddings"].endswith("vecs.npy")
    # the same rows as the cache (which came free with the evaluation's own pass)
    cached = embeddings.vectors_for(demo["preds"], demo["model"], demo["tok"], compute=False)
    assert cached is not None and np.array_equal(cached, vecs)
    # row i is review i of the CSV: re-embed a few of its texts alone and compare
    rows = [0, 7, 500, 1234, 2104]
    again = embeddings.embed_texts(demo["model"], demo["tok"], [table["text"][i] for i in rows],
                                   max_length=256, precision="fp32")
    for j, i in enumerate(rows):
        a, b = again[j].astype(np.float32), vecs[i].astype(np.float32)
        cos = a @ b / (np.linalg.norm(a) * np.linalg.norm(b))
        assert cos > 0.995, (i, cos)            # the saved fp16 vector vs a fresh one
        other = vecs[(i + 1) % 2105].astype(np.float32)
        assert cos > a @ other / (np.linalg.norm(a) * np.linalg.norm(other))


def test_projector_neighbours_and_reading(demo):
    preds = demo["preds"]
    vecs = embeddings.vectors_for(preds, demo["model"], demo["tok"], compute=False)
    t0 = time.perf_counter()
    p = projection.project(vecs, "pca", 2, folder=preds.folder, vectors_name="cls-L6")
    assert p.coords.shape == (2105, 2) and time.perf_counter() - t0 < 10
    assert projection.project(vecs, "pca", 2, folder=preds.folder, vectors_name="cls-L6").cached
    nb = neighbours.split_neighbours(vecs, preds.y, preds.pred, 5)
    # exact: for a few rows, the neighbours are the brute-force cosine ranking
    x = vecs.astype(np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    for r in (3, 999, 2000):
        sims = x @ x[r]
        sims[r] = -np.inf
        assert list(nb.idx[r]) == list(np.argsort(-sims, kind="stable")[:10])
    r = map_reading.read_map(vecs, preds.y, preds.pred, preds.names, nb)
    # the model's own space separates the ratings well above chance (20 % on balanced data)
    assert 0.40 < r.knn_accuracy < 0.75 and 0.40 < nb.mean_agreement < 0.80
    assert "k-NN" in r.text and np.allclose(r.purity.sum(1), 1)
    print(f"\ndemo map: agreement {nb.mean_agreement:.3f}, k-NN {r.knn_accuracy:.3f}, "
          f"silhouette {r.silhouette:.3f}; {r.plain}")


def test_slices_on_the_demo(demo):
    from reviewbert.analysis.label_issues import find_issues
    preds = demo["preds"]
    flagged = find_issues(preds).flagged
    table = slices_mod.slice_table(preds, flagged, n_resamples=400)
    files = {s for s in table["slice"] if s.startswith("file ")}
    assert len(files) == 5                                  # the five data files
    assert list(table["gap"]) == sorted(table["gap"])
    assert ((table["gap_low"] <= table["gap"]) & (table["gap"] <= table["gap_high"])).all()
    # file slices partition the split: their sizes add up, weighted accuracy = overall
    f = table[table["attribute"] == "source file"]
    assert f["n"].sum() == 2105
    assert (f["n"] * f["accuracy"]).sum() / 2105 == pytest.approx(preds.correct.mean())
    print("\nworst slices:\n" + "\n".join(slices_mod.worst_reading(table)))


def test_ig_drivers_on_a_sample(demo):
    from reviewbert.model.inference import Predictor
    preds = demo["preds"]
    predictor = Predictor.from_checkpoint(demo["dir"])
    t0 = time.perf_counter()
    d = drivers.compute_drivers(preds, predictor, sample=6)
    seconds = time.perf_counter() - t0
    assert len(d.rows) == 6 and d.computed == 6 and set(d.table["review"]) <= set(d.rows)
    sums = d.table.groupby("review")[["value_norm", "raw_attention"]].sum()
    assert np.allclose(sums.to_numpy(), 1.0, atol=1e-3)
    gid, names = drivers.groups(d, preds, "predicted")
    tops = drivers.top_drivers(d, gid, 5, "integrated_gradients", min_count=2)
    assert any(len(t) for t in tops.values())
    assert drivers.compute_drivers(preds, predictor, sample=6).computed == 0    # cached
    print(f"\nIG drivers: 6 reviews in {seconds:.1f} s ({6 / seconds:.2f} reviews/s) on "
          f"{cpu_description()}")


def test_report_json_has_the_map(demo):
    out = demo["root"] / "report.html"
    res = cli("report", "--checkpoint", demo["dir"], "--out", out, "--precision", PRECISION,
              "--no-attention", "--drivers-sample", "6", "--json", timeout=900)  # cached above
    assert res.returncode == 0, res.stderr[-3000:]
    sm = json.loads(res.stdout.strip().splitlines()[-1])["split_map"]
    assert sm["projection"]["method"] == "pca" and sm["neighbours"]["k"] == 10
    assert 0 < sm["neighbours"]["mean_agreement"] < 1
    assert set(sm["drivers"]["top"]) == {"Integrated Gradients", "Attention × value norm",
                                         "Raw attention (last layer)"}
    assert len(sm["worst_slices"]) == 10
    assert sm["image"]["png"] is None or Path(sm["image"]["png"]).stat().st_size > 10_000
    html = out.read_text(encoding="utf-8")
    assert "<h2>The map of the split</h2>" in html and "scattergl" in html
    assert "The slices it fails on" in html


@pytest.mark.umap
def test_umap_of_ten_thousand_reviews(tmp_path, data_dir):
    """UMAP of 10,000 reviews of a real data file (earphone_reviews_in.csv), embedded by
    the demo checkpoint: it completes, with finite coordinates, and is cached. Slow on a
    shared CPU: run alone with `make umap`."""
    from reviewbert.analysis import predict_split
    from reviewbert.analysis.sources import all_reviews
    from reviewbert.model.checkpoint import load_checkpoint
    d = demo_copy(tmp_path)
    model, tok, info = load_checkpoint(d)
    _, chunks, source = all_reviews([data_dir / "earphone_reviews_in.csv"], info.scheme, info.meta)
    reviews = [e for c in chunks for e in c][:10_000]
    assert len(reviews) == 10_000
    preds = predict_split(model, tok, d, reviews, info.scheme, max_length=256,
                          precision=UMAP_PRECISION, source=source)
    vecs = embeddings.vectors_for(preds, model, tok, compute=False)
    t0 = time.perf_counter()
    p = projection.project(vecs, "umap", 2, folder=preds.folder, vectors_name="cls-L6")
    seconds = time.perf_counter() - t0
    assert p.coords.shape == (10_000, 2) and np.isfinite(p.coords).all()
    assert projection.project(vecs, "umap", 2, folder=preds.folder, vectors_name="cls-L6").cached
    print(f"\nUMAP of 10,000 reviews: {seconds:.1f} s on {cpu_description()}")
