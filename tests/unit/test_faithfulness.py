"""ERASER comprehensiveness/sufficiency: a toy model whose important word is known,
the cache next to the checkpoint (keyed by the weights), resume, summaries, CLI."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from reviewbert.explain import faithfulness as FA

from browser_support import write_meta
from conftest import make_tiny_model
from toyreviews import write_toy_csv

CLS, SEP, KEY = 101, 102, 7


def toy_review(n_words=10, key_word=3, pieces=2):
    """[CLS] w0 … [SEP]; word ``key_word`` has ``pieces`` wordpieces, the first being KEY."""
    ids, word_ids = [CLS], [None]
    for w in range(n_words):
        for p in range(pieces if w == key_word else 1):
            ids.append(KEY if (w == key_word and p == 0) else 1000 + 10 * w + p)
            word_ids.append(w)
    return ids + [SEP], word_ids + [None]


def toy_prob(ids) -> float:
    """p(predicted class): high with the key word, low without; the other words barely
    matter (a little, so that every deletion changes something)."""
    return (0.9 if KEY in ids else 0.2) + 0.001 * sum(1 for t in ids if t >= 1000)


def test_top_k_percent_of_the_words():
    assert [FA.n_top(10, k) for k in FA.KS] == [1, 1, 2, 5]
    assert FA.n_top(3, 50) == 2 and FA.n_top(1, 5) == 1 and FA.n_top(200, 5) == 10


def test_erasing_removes_every_piece_and_keeps_specials():
    ids, wids = toy_review(4, key_word=1, pieces=3)
    assert FA.erased(ids, wids, {1}, keep=False) == [CLS, 1000, 1020, 1030, SEP]
    assert FA.erased(ids, wids, {1}, keep=True) == [CLS, KEY, 1011, 1012, SEP]


def test_the_right_ranking_beats_random_and_the_reversed_one_loses():
    ids, wids = toy_review(10, key_word=3)
    right = np.array([3, 0, 1, 2, 4, 5, 6, 7, 8, 9])
    reverse = right[::-1]
    c_right, s_right = FA.erasure_curves(toy_prob, ids, wids, right)
    c_rev, s_rev = FA.erasure_curves(toy_prob, ids, wids, reverse)
    c_rnd, s_rnd = FA.random_curves(toy_prob, ids, wids, 10, FA.KS, draws=200,
                                    rng=np.random.default_rng(0))
    # deleting the key word drops p by 0.7, plus 0.001 per other piece deleted (its own
    # second piece included)
    np.testing.assert_allclose(c_right, [0.701, 0.701, 0.702, 0.705], atol=1e-9)
    np.testing.assert_allclose(s_right, [0.009, 0.009, 0.008, 0.005], atol=1e-9)
    aopc = {k: np.mean(v) for k, v in dict(cr=c_right, crev=c_rev, crnd=c_rnd, sr=s_right,
                                             srev=s_rev, srnd=s_rnd).items()}
    assert aopc["cr"] > aopc["crnd"] > aopc["crev"]          # comprehensiveness: higher is better
    assert aopc["sr"] < aopc["srnd"] < aopc["srev"]          # sufficiency: lower is better
    # random at 50 %: the key word is among the 5 deleted about half the time
    assert c_rnd[-1] == pytest.approx(0.5 * 0.7, abs=0.1)


# ------------------------------------------------------------- a real run
@pytest.fixture()
def ckpt(tmp_path, tiny_model_dir):
    d = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, d)
    return d


@pytest.fixture(scope="module")
def texts():
    return ["The battery died after two days, poor quality.", "Great phone, fair price!",
            "Okay screen but the speaker is weak and the case cracked.",
            "Terrible support. Never again."]


SMALL = FA.Settings(ig_steps=4, ig_max_steps=8, random_draws=2)


class Counted:
    """A progress bar as the pages' and the CLI's: ``progress(n)`` and ``resumed(n)``."""

    def __init__(self, total):
        self.total, self.calls, self.resumed_from = total, [], 0

    def __call__(self, n):
        self.calls.append(n)

    def resumed(self, n):
        assert not self.calls, "resumed is said before any review is done"
        self.resumed_from += n


def predictor_of(path):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(path, torch.device("cpu"))


def test_run_is_cached_next_to_the_checkpoint_and_keyed_by_the_weights(ckpt, texts):
    bar = Counted(4)
    res = FA.measure(predictor_of(ckpt), ckpt, texts, SMALL, progress=bar)
    assert bar.calls == [1, 1, 1, 1] and bar.resumed_from == 0        # one call per review
    assert res.n == 4 and not res.from_cache and res.methods[-1] == "random"
    final, partial = FA.cache_paths(ckpt, res.key)
    assert final.exists() and not partial.exists() and final.parent == ckpt / "faithfulness"
    on_disk = json.loads(final.read_text())
    assert on_disk["format"] == FA.FORMAT and on_disk["weights_sha256"] == FA.weights_sha256(ckpt)
    assert set(on_disk["reviews"][0]["comprehensiveness"]) == set(FA.Settings().methods) | {"random"}
    assert on_disk["reviews"][0]["ig_relative_delta"] is not None

    again = FA.measure(predictor_of(ckpt), ckpt, texts, SMALL)
    assert again.from_cache and again.reviews == res.reviews
    assert FA.measure(predictor_of(ckpt), ckpt, texts[:3], SMALL).key != res.key   # another sample

    # the same folder, re-saved with other weights: another key, nothing stale is read
    make_tiny_model(ckpt, seed=5)
    fresh = FA.measure(predictor_of(ckpt), ckpt, texts, SMALL)
    assert not fresh.from_cache and fresh.key != res.key
    assert fresh.weights_sha256 != res.weights_sha256
    assert [r.key for r in FA.list_runs(ckpt, fresh.weights_sha256)] == [fresh.key]
    assert len(FA.list_runs(ckpt)) == 3


def test_an_interrupted_run_resumes_where_it_stopped(ckpt, texts):
    class Stop(Exception):
        pass

    done = []

    def stop_after_two(n):
        done.append(n)
        if sum(done) == 2:
            raise Stop
    predictor = predictor_of(ckpt)
    with pytest.raises(Stop):
        FA.measure(predictor, ckpt, texts, SMALL, progress=stop_after_two)
    key = FA.cache_key(FA.weights_sha256(ckpt), predictor.max_length,
                       {"source": "test split", "seed": 0, "n": 4,
                        "texts_sha256": FA.texts_sha256(texts)}, SMALL)
    final, partial = FA.cache_paths(ckpt, key)
    assert not final.exists() and len(partial.read_text().splitlines()) == 2
    with open(partial, "a") as f:
        f.write('{"i": 3, "n_wo')                               # a torn line from a crash
    bar = Counted(4)
    res = FA.measure(predictor, ckpt, texts, SMALL, progress=bar)
    assert bar.resumed_from == 2 and bar.calls == [1, 1]      # only the two missing ones ran
    assert [r["i"] for r in res.reviews] == [0, 1, 2, 3] and final.exists()
    assert not partial.exists()
    whole = FA.measure(predictor, ckpt, texts, SMALL, use_cache=False)
    assert [r["comprehensiveness"] for r in whole.reviews] == \
        [r["comprehensiveness"] for r in res.reviews]        # resumed = computed in one go


def test_summary_verdict_and_json(ckpt, texts):
    res = FA.measure(predictor_of(ckpt), ckpt, texts, SMALL, use_cache=False)
    summary = FA.summarize(res, n_boot=200)
    out = FA.summary_json(res, summary)
    assert list(out) == list(FA.Settings().methods) + ["random"]
    for entry in out.values():
        for m in FA.MEASURES:
            assert list(entry[m]) == ["5", "10", "20", "50", "aopc"]
            assert entry[m]["aopc"] == pytest.approx(np.mean([entry[m][k] for k in
                                                              ("5", "10", "20", "50")]), abs=1e-4)
            lo, hi = entry["ci95"][m]["aopc"]
            assert lo <= entry[m]["aopc"] <= hi
    lines = FA.verdict(res, summary)
    assert "most faithful method on this model" in lines[0]
    assert any("Raw attention" in line and "random" in line for line in lines)
    assert any("its score of a word *is* the comprehensiveness" in line for line in lines)
    only = FA.FaithfulnessRun(**{**res.__dict__, "settings": {**res.settings,
                                                              "methods": ["raw_attention"]}})
    assert not any("comprehensiveness of deleting" in line for line in FA.verdict(only))
    assert len(FA.table_rows(res, summary)) == 2 * 8           # 7 methods and random


def test_cli_prints_a_table_and_a_json_last_line(tmp_path, tiny_model_dir, capsys):
    from reviewbert.cli import main
    d = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, d)
    write_meta(d, 5, data_file=write_toy_csv(tmp_path / "toy.csv", n=150), max_per_class=10)
    assert main(["faithfulness", "--checkpoint", str(d), "--n", "3", "--ig-steps", "4",
                 "--ig-max-steps", "8", "--random-draws", "2", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert set(last) == set(FA.Settings().methods) | {"random"}
    assert last["random"]["n"] == 3 and "aopc" in last["integrated_gradients"]["sufficiency"]
    assert "aopc" in last["lime"]["comprehensiveness"] and "occlusion" in last
    assert any("Comprehensiveness" in line or "comprehensiveness" in line for line in out)
    assert (d / "faithfulness").is_dir()
    assert main(["faithfulness", "--checkpoint", str(d), "--methods", "nope"]) == 2
    assert main(["faithfulness", "--checkpoint", str(d), "--lime-samples", "1"]) == 2
    with pytest.raises(SystemExit) as e:
        main(["faithfulness", "--help"])
    assert e.value.code == 0 and "--ig-max-steps" in capsys.readouterr().out
