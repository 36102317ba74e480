"""The per-layer probes on the shipped demo checkpoint (fine-tuned MiniLM, 6 layers) and on its
embedded base model: N seeded reviews of the real training split and N of the test split
(the page and the CLI use the whole test split; this keeps `make test` under its limit),
plus the ``layers`` command's JSON on a tiny checkpoint. ``-s`` prints the demo's table."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from demo_support import demo_copy

from reviewbert.data.splits import splits_from_meta
from reviewbert.heads.analysis import sample_reviews
from reviewbert.layers import analysis as layer_analysis
from reviewbert.layers import probes as layer_probes
from reviewbert.model.checkpoint import load_checkpoint

from browser_support import write_meta
from conftest import make_tiny_model
from toyreviews import cli, write_toy_csv

N = int(os.environ.get("REVIEWBERT_LAYERS_DEMO_N", "300"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory, data_dir):
    ck = demo_copy(tmp_path_factory.mktemp("layers-demo"))
    model, tok, info = load_checkpoint(ck, torch.device("cpu"), attn_implementation="eager")
    splits = splits_from_meta(info.meta, data_dir=data_dir, tokenizer=tok)
    test = sample_reviews(list(splits.test), N, seed=0)
    return model, tok, info, list(splits.train), test


@pytest.fixture(scope="module")
def result(demo):
    model, tok, info, train, test = demo
    return layer_analysis.analyze(model, tok, info.path, train, test, info.scheme, max_length=256,
                                  base_model=info.base_model,
                                  settings=layer_probes.Settings(train_cap=N, precision="fp32"))


def _print(title: str, rows: list[dict]) -> None:
    print(title)
    for r in rows:
        ci = r["accuracy_ci"]
        print(f"  layer {r['layer']}: accuracy {r['accuracy']:.3f} [{ci[0]:.3f}, {ci[1]:.3f}], "
              f"relaxed {r['relaxed_accuracy']:.3f}, AUC {r['auc']:.3f}")


def test_the_demos_probe_table_and_its_base_models(result):
    _print(f"demo, probes on {result.n_train} training reviews, {result.n_test} test reviews:",
           result.layers)
    _print(f"base model {result.base_model}:", result.base_layers or [])
    print(f"the demo's own accuracy on them: {result.model_accuracy:.3f}; settled at layer "
          f"{result.settled}")
    assert [r["layer"] for r in result.layers] == list(range(7))
    assert result.base_note == "" and [r["layer"] for r in result.base_layers] == list(range(7))
    first, last = result.layers[0], result.layers[-1]
    assert first["auc"] == pytest.approx(0.5)         # one [CLS] vector for every review
    assert last["accuracy"] > first["accuracy"] + 0.2
    # the last layer's probe reads about what the classifier reads: not more, and, fitted on
    # N reviews where the classifier was trained on the whole split, some points less
    assert result.model_accuracy - 0.15 < last["accuracy"] < result.model_accuracy + 0.05
    # fine-tuning put the rating into [CLS]: the base model's [CLS] holds less of it
    assert last["accuracy"] > result.base_layers[-1]["accuracy"]


def test_the_demos_layer_probabilities_of_one_review(demo, result):
    model, tok, _, _, test = demo
    probs = layer_probes.layer_probabilities(model, test[0].text, result.probes, tokenizer=tok,
                                  max_length=256)
    assert probs.shape == (7, 5)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-9)
    other = layer_probes.layer_probabilities(model, test[1].text, result.probes, tokenizer=tok,
                                  max_length=256)
    np.testing.assert_allclose(other[0], probs[0], atol=1e-6)    # layer 0: the same [CLS]
    assert np.abs(other[-1] - probs[-1]).max() > 1e-3            # the last: this review's


def test_the_layers_command_prints_the_table_and_json(tmp_path):
    toy = write_toy_csv(tmp_path / "toy.csv", n=150)
    ck = write_meta(make_tiny_model(tmp_path / "ck", layers=2), 5, data_file=toy, max_length=64,
                    max_per_class=10)
    res = cli("layers", "--checkpoint", ck, "--json", "--train-cap", "40")
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert [r["layer"] for r in out["layers"]] == [0, 1, 2]
    assert set(out["layers"][0]) >= {"layer", "accuracy", "relaxed_accuracy", "auc"}
    assert out["base_layers"] is None and 0 <= out["model_accuracy"] <= 1
    assert "the checkpoint's probes:" in res.stdout and "embeddings" in res.stdout
    bad = cli("layers", "--checkpoint", ck, "--train-cap", "1")
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0
