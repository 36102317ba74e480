"""reviewbert/store/: one location policy for every cache kept beside a checkpoint (beside
it, else a per-user fallback; found in either, beside first), and the run records of
faithfulness and brittleness, whose files stay byte for byte what earlier versions wrote."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from reviewbert.explain import cache as C
from reviewbert.explain import faithfulness as FA
from reviewbert.explain import methods as E
from reviewbert.fsio import atomic_write_json
from reviewbert.store import location
from reviewbert.whatif import brittleness as B

from trigger_model import UP, make_trigger_model


@pytest.fixture(autouse=True)
def user_cache(tmp_path, monkeypatch) -> Path:
    """The per-user fallback of every kind, in this test's folder (never ~/.cache)."""
    base = tmp_path / "user-cache"
    monkeypatch.setenv(location.BASE_ENV, str(base))
    monkeypatch.delenv("REVIEWBERT_ANALYSIS_CACHE", raising=False)
    return base


@pytest.fixture()
def read_only(monkeypatch):
    """``read_only(folder)`` makes a checkpoint folder unwritable. chmod 0o555 does it for
    any user but root, and these tests run as root here (root writes into a 0o555 folder):
    for root the policy's writability probe, ``location.can_write``, is also made to refuse
    every folder under it, as the real probe does for everyone else."""
    made = []

    def make(folder: Path) -> Path:
        folder.chmod(0o555)
        made.append(folder)
        if os.geteuid() == 0:
            real = location.can_write
            monkeypatch.setattr(location, "can_write",
                                lambda d: not Path(d).is_relative_to(folder) and real(d))
        return folder
    yield make
    for folder in made:
        folder.chmod(0o755)


def tag(folder: Path) -> str:
    return hashlib.sha256(str(folder.absolute()).encode()).hexdigest()[:16]


# ------------------------------------------------------------------ the policy
def test_the_fallback_paths_are_today_s_for_the_analysis_and_follow_its_pattern(
        tmp_path, monkeypatch, user_cache):
    ck = tmp_path / "ckpt"
    monkeypatch.delenv(location.BASE_ENV)
    home = Path.home() / ".cache" / "reviewbert"
    assert location.ANALYSIS.roots(ck) == [ck / ".analysis", home / "analysis" / tag(ck)]
    assert location.FAITHFULNESS.fallback(ck) == home / "faithfulness" / tag(ck)
    monkeypatch.setenv("REVIEWBERT_ANALYSIS_CACHE", str(tmp_path / "an"))
    assert location.ANALYSIS.fallback(ck) == tmp_path / "an" / tag(ck)      # as it always was
    monkeypatch.setenv(location.BASE_ENV, str(user_cache))
    assert location.ANALYSIS.fallback(ck) == tmp_path / "an" / tag(ck)      # the kind's own wins
    monkeypatch.delenv("REVIEWBERT_ANALYSIS_CACHE")
    assert location.ANALYSIS.fallback(ck) == user_cache / "analysis" / tag(ck)
    assert [p.fallback(ck) for p in (location.FAITHFULNESS, location.BRITTLENESS,
                                     location.EXPLANATIONS)] == \
        [user_cache / k / tag(ck) for k in ("faithfulness", "whatif", "explanations")]


def test_written_beside_when_it_can_else_in_the_fallback(tmp_path, user_cache):
    ck = tmp_path / "ckpt"
    ck.mkdir()
    assert location.FAITHFULNESS.writable(ck) == ck / "faithfulness"
    other = tmp_path / "other"
    other.mkdir()
    # a file where the folder would be: unwritable for every user, root included
    (other / "faithfulness").write_text("not a folder")
    fallback = user_cache / "faithfulness" / tag(other)
    assert location.FAITHFULNESS.writable(other) == fallback and fallback.is_dir()
    fallback.rmdir()
    fallback.write_text("not a folder either")
    with pytest.raises(OSError, match="no writable folder for the faithfulness cache"):
        location.FAITHFULNESS.writable(other)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 0o555 folder")
def test_the_real_probe_refuses_a_read_only_folder(tmp_path, user_cache):
    ck = tmp_path / "ckpt"
    ck.mkdir()
    ck.chmod(0o555)
    try:
        assert not location.can_write(ck / "whatif")
        assert location.BRITTLENESS.writable(ck) == user_cache / "whatif" / tag(ck)
    finally:
        ck.chmod(0o755)


def test_an_entry_beside_the_checkpoint_is_found_first(tmp_path, user_cache):
    ck = tmp_path / "ckpt"
    beside, fallback = location.EXPLANATIONS.roots(ck)
    fallback.mkdir(parents=True)
    (fallback / "k.json").write_text("fallback")
    assert location.EXPLANATIONS.find(ck, "k.json") == fallback / "k.json"
    beside.mkdir(parents=True)
    (beside / "k.json").write_text("beside")
    assert location.EXPLANATIONS.find(ck, "k.json") == beside / "k.json"
    (fallback / "j.json").write_text("only there")
    assert location.EXPLANATIONS.glob(ck, "*.json") == [beside / "k.json", fallback / "j.json"]


# ------------------------------------------------- read-only checkpoints, kind by kind
@pytest.fixture()
def tiny(tmp_path, tiny_model_dir):
    d = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, d)
    return d


def _predictor(path):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(path, torch.device("cpu"))


def test_faithfulness_of_a_read_only_checkpoint_is_kept_in_the_fallback(tiny, read_only,
                                                                        user_cache):
    settings = FA.Settings(methods=("raw_attention",), ks=(50,), random_draws=1)
    texts = ["Great phone, poor battery.", "The screen cracked on day one."]
    predictor = _predictor(tiny)
    read_only(tiny)
    res = FA.measure(predictor, tiny, texts, settings)
    assert res.cache_error == "" and not res.from_cache
    final, partial = FA.cache_paths(tiny, res.key)
    assert final == user_cache / "faithfulness" / tag(tiny) / f"{res.key}.json"
    assert final.is_file() and not partial.exists() and not (tiny / "faithfulness").exists()
    again = FA.measure(predictor, tiny, texts, settings)
    assert again.from_cache and again.reviews == res.reviews
    assert [r.key for r in FA.list_runs(tiny, res.weights_sha256)] == [res.key]


def test_brittleness_of_a_read_only_checkpoint_resumes_and_is_read_from_the_fallback(
        tmp_path, read_only, user_cache):
    ckpt = make_trigger_model(tmp_path / "trig")
    predictor = _predictor(ckpt)
    texts, stars = [f"the {UP} phone", "fine phone"], [4, 3]
    settings = B.Settings("occlusion", 3, precision="fp32")
    read_only(ckpt)

    class Stop(Exception):
        pass

    def stop(n):
        raise Stop
    with pytest.raises(Stop):
        B.measure(predictor, ckpt, texts, stars, settings, progress=stop)
    key = B.cache_key(B.weights_sha256(ckpt), predictor.max_length,
                      B.describe_sample(texts, stars, "test split", 0), settings)
    final, partial = B.cache_paths(ckpt, key)
    assert partial.parent == user_cache / "whatif" / tag(ckpt) and not final.exists()
    assert len(partial.read_text().splitlines()) == 1
    seen = []
    res = B.measure(predictor, ckpt, texts, stars, settings, progress=seen.append)
    assert seen == [1, 1] and [r["k"] for r in res.reviews] == [1, None]   # resumed after one
    assert B.cache_paths(ckpt, key) == (final, partial) and final.is_file()
    assert not partial.exists() and not (ckpt / "whatif").exists()
    assert B.measure(predictor, ckpt, texts, stars, settings).from_cache
    assert [r.key for r in B.list_runs(ckpt)] == [key]


SCORES = [E.TokenScores(method="lime", label="LIME", signed=True, scores=np.array([0.1, 0.5]),
                        token_scores=np.array([0.0, 0.1, 0.5, 0.0]), target=0)]


def test_explanations_of_a_read_only_checkpoint_are_kept_in_the_fallback(tmp_path, read_only,
                                                                         user_cache):
    ck = tmp_path / "ckpt"
    ck.mkdir()
    read_only(ck)
    C._MEMORY.clear()
    out = C.cached_or_computed(ck, "k1", lambda: SCORES)
    assert out.cache_error is None and not out.from_cache
    stored = user_cache / "explanations" / tag(ck) / "k1.json"
    assert stored.is_file() and C.path(ck, "k1") == stored and not (ck / C.FOLDER).exists()
    C._MEMORY.clear()                                              # a restarted server
    again = C.cached_or_computed(ck, "k1", lambda: pytest.fail("computed twice"))
    assert again.from_cache
    np.testing.assert_allclose(again.results[0].scores, [0.1, 0.5])
    C._MEMORY.clear()


def test_an_explanation_beside_the_checkpoint_wins_over_the_fallback(tmp_path, user_cache):
    ck = tmp_path / "ckpt"
    ck.mkdir()
    C._MEMORY.clear()
    other = [E.TokenScores(**{**vars(SCORES[0]), "scores": np.array([0.9, 0.9])})]
    atomic_write_json(user_cache / "explanations" / tag(ck) / "k2.json", C.to_json(other))
    assert C.load(ck, "k2")[0].scores.tolist() == pytest.approx([0.9, 0.9])
    C._MEMORY.clear()
    atomic_write_json(ck / C.FOLDER / "k2.json", C.to_json(SCORES))
    assert C.load(ck, "k2")[0].scores.tolist() == pytest.approx([0.1, 0.5])
    C._MEMORY.clear()


# ------------------------------------------------- files written by earlier versions
# Written by the code before RunRecord (bc7cd44), as they came out: a one-review
# faithfulness run of a tiny random BERT and a one-review brittleness run of the
# trigger model.
OLD_FAITHFULNESS = """{
  "format": "reviewbert-faithfulness/1",
  "key": "c55ca3b268e502f81f62",
  "weights_sha256": "32f120299b9b126a060f0c29d608b13fe6fcf11ec7d110b9f6209466852381f9",
  "checkpoint": "/tmp/mywork/oldruns/tiny",
  "max_length": 512,
  "sample": {
    "source": "test split",
    "seed": 0,
    "n": 1,
    "texts_sha256": "87802bf4a79b01619b7680367765952d86f9eb6fd4946df45a604423b665b175"
  },
  "settings": {
    "methods": [
      "raw_attention",
      "occlusion"
    ],
    "ks": [
      10,
      50
    ],
    "random_draws": 1,
    "seed": 0,
    "layer": null,
    "head": null,
    "ig_steps": 16,
    "ig_max_steps": 64,
    "lime_samples": 200
  },
  "labels": {
    "raw_attention": "Raw attention",
    "occlusion": "Occlusion",
    "random": "Random ranking"
  },
  "reviews": [
    {
      "i": 0,
      "n_words": 6,
      "n_tokens": 8,
      "target": 3,
      "p": 0.20339906215667725,
      "comprehensiveness": {
        "raw_attention": [
          -8.791685104370117e-07,
          1.1354684829711914e-05
        ],
        "occlusion": [
          3.0100345611572266e-06,
          1.8283724784851074e-05
        ],
        "random": [
          -6.794929504394531e-06,
          8.225440979003906e-06
        ]
      },
      "sufficiency": {
        "raw_attention": [
          3.2275915145874023e-05,
          9.700655937194824e-06
        ],
        "occlusion": [
          1.9878149032592773e-05,
          2.771615982055664e-06
        ],
        "random": [
          4.3973326683044434e-05,
          1.7017126083374023e-05
        ]
      },
      "ig_relative_delta": null,
      "ig_steps": null,
      "seconds": 1.664874103999864
    }
  ],
  "created": 1795928535.1695113,
  "seconds": 1.664874103999864
}
"""

OLD_BRITTLENESS = """{
  "format": "reviewbert-brittleness/1",
  "key": "7c1b9eef6a0cd52ab7a5",
  "weights_sha256": "4432357d416acbd652965aea7f5ec48f2e01e6995d367bdbd09691e04519e71e",
  "checkpoint": "/tmp/mywork/oldruns/trig",
  "max_length": 512,
  "labels": [
    "1 star",
    "2 stars",
    "3 stars",
    "4 stars",
    "5 stars"
  ],
  "sample": {
    "source": "test split",
    "seed": 0,
    "n": 1,
    "texts_sha256": "e47d6873610f1db7ca1625c5dacfc168f18bc553a2fe99266703c056f6da9b26",
    "stars_sha256": "4b227777d4dd1fc61c6f884f48641d02b4d121d3fd328cb08b5531fcacdabf8a"
  },
  "settings": {
    "method": "occlusion",
    "max_words": 3,
    "precision": "fp32"
  },
  "reviews": [
    {
      "i": 0,
      "n_tokens": 5,
      "n_words": 3,
      "true": 3,
      "pred": 3,
      "p": 0.9690341353416443,
      "found": true,
      "k": 1,
      "words": [
        "excellent"
      ],
      "new_pred": 2,
      "new_p": 0.6487856442839393,
      "passes": 2,
      "seconds": 0.15966029599985632
    }
  ],
  "created": 1795928535.4453218,
  "seconds": 0.15966029599985632
}
"""

OLD = [(FA, OLD_FAITHFULNESS, FA.Settings(methods=("raw_attention", "occlusion"), ks=(10, 50),
                                          random_draws=1)),
       (B, OLD_BRITTLENESS, B.Settings("occlusion", 3, "fp32"))]


@pytest.mark.parametrize("module, text, settings", OLD, ids=["faithfulness", "brittleness"])
def test_a_run_written_by_the_old_code_is_read_and_written_back_byte_for_byte(
        tmp_path, module, text, settings):
    ck = tmp_path / "ckpt"
    old = json.loads(text)
    path = ck / module.CACHE_DIR / f"{old['key']}.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    assert module.cache_paths(ck, old["key"])[0] == path
    run = module.load_run(path)
    assert run is not None and run.from_cache and run.reviews == old["reviews"]
    assert [r.key for r in module.list_runs(ck, old["weights_sha256"])] == [old["key"]]
    assert module.list_runs(ck, "other weights") == []
    # the key is computed as it was: the same settings find the same file
    assert module.cache_key(old["weights_sha256"], 512, old["sample"], settings) == old["key"]
    again = tmp_path / "again.json"
    atomic_write_json(again, run.to_json())                # what the run code writes
    assert again.read_text() == text
    path.write_text(json.dumps({**old, "format": "reviewbert-other/1"}))
    assert module.load_run(path) is None                   # another format: not ours
    path.write_text(json.dumps({k: v for k, v in old.items() if k != "created"}))
    assert module.load_run(path) is None                   # a field missing: not read


def test_a_run_beside_the_checkpoint_is_found_before_the_fallback_s(tmp_path, user_cache):
    ck = tmp_path / "ckpt"
    old = json.loads(OLD_BRITTLENESS)
    fallback = user_cache / "whatif" / tag(ck) / f"{old['key']}.json"
    atomic_write_json(fallback, {**old, "seconds": 99.0})
    assert B.BrittlenessRun.find(ck, old["key"]).seconds == 99.0
    atomic_write_json(ck / "whatif" / f"{old['key']}.json", old)
    assert B.BrittlenessRun.find(ck, old["key"]).seconds == pytest.approx(0.15966029599985632)
    assert [r.seconds for r in B.list_runs(ck)] == [pytest.approx(0.15966029599985632)]
