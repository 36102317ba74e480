"""Brittleness over a sample, on the hand-weighted trigger model (tests/trigger_model.py),
where the words each review needs are known: the numbers, the groups, the cache next to the
checkpoint (keyed, resumed), and the ``whatif`` command in both modes, its counterfactuals
re-checked with plain transformers."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from reviewbert.whatif import brittleness as B

from browser_support import write_meta
from toyreviews import write_toy_csv
from trigger_model import DOWN, UP, make_trigger_model

# (text, true stars): predicted 4 stars with UP, 2 with DOWN, else 3
REVIEWS = [(f"the {UP} phone", 4),                          # right, 1 word
           (f"{UP} screen, {UP} battery", 5),               # wrong, 2 words
           (f"the battery is {DOWN}", 2),                   # right, 1 word
           ("fine phone and fine price", 3),                # right, no flip
           ("the case is okay", 4)]                         # wrong, no flip
TEXTS, STARS = [t for t, _ in REVIEWS], [s for _, s in REVIEWS]
SETTINGS = B.Settings("occlusion", 5, precision="fp32")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_trigger_model(tmp_path_factory.mktemp("trig") / "m")


@pytest.fixture()
def ckpt(tmp_path, model_dir):
    d = tmp_path / "trig"
    shutil.copytree(model_dir, d)
    return d


def predictor_of(path):
    from reviewbert.model.inference import Predictor
    return Predictor.from_checkpoint(path, torch.device("cpu"))


def test_words_needed_shares_and_groups(ckpt):
    res = B.measure(predictor_of(ckpt), ckpt, TEXTS, STARS, SETTINGS)
    assert [r["k"] for r in res.reviews] == [1, 2, 1, None, None]
    assert [r["words"] for r in res.reviews][:3] == [[UP], [UP, UP], [DOWN]]
    assert [r["new_pred"] for r in res.reviews][:3] == [2, 2, 2]
    s = B.summarize(res)
    assert s["all"]["n"] == 5 and s["correct"]["n"] == 3 and s["wrong"]["n"] == 2
    assert (s["all"]["within"][1].count, s["all"]["within"][3].count) == (2, 3)
    assert s["correct"]["within"][1].count == 2 and s["wrong"]["within"][1].count == 0
    assert s["wrong"]["within"][3].count == 1
    assert s["all"]["histogram"] == {1: 2, 2: 1, 3: 0, 4: 0, 5: 0, "none": 2}
    lo, hi = s["all"]["within"][1].lo, s["all"]["within"][1].hi
    assert lo < 0.4 < hi and 0 < lo and hi < 1                  # Wilson, not a point
    js = B.summary_json(res, s)
    assert js["all"]["share_within"] == {"1": 0.4, "3": 0.6, "5": 0.6}
    assert js["example"]["words"] in ([UP], [DOWN]) and js["example"]["to"] == "3 stars"
    assert len(B.table_rows(res, s)) == 3
    assert B.reading(res, s)[0].startswith("Deleting at most 5 words (greedy along the occlusion")


def test_cached_next_to_the_checkpoint_and_resumed(ckpt):
    predictor = predictor_of(ckpt)
    calls = []
    res = B.measure(predictor, ckpt, TEXTS, STARS, SETTINGS, progress=calls.append)
    assert calls == [1, 1, 1, 1, 1]                           # one call per review
    final, partial = B.cache_paths(ckpt, res.key)
    assert final.exists() and not partial.exists() and final.parent == ckpt / "whatif"
    disk = json.loads(final.read_text())
    assert disk["format"] == B.FORMAT and disk["settings"]["precision"] == "fp32"
    again = B.measure(predictor, ckpt, TEXTS, STARS, SETTINGS)
    assert again.from_cache and again.reviews == res.reviews
    assert B.measure(predictor, ckpt, TEXTS, [3] * 5, SETTINGS).key != res.key     # other stars
    assert [r.key for r in B.list_runs(ckpt)][-1] == res.key

    class Stop(Exception):
        pass

    ran = []

    def stop(n):
        ran.append(n)
        if sum(ran) == 2:
            raise Stop
    other = B.Settings("value_norm", 5, precision="fp32")
    with pytest.raises(Stop):
        B.measure(predictor, ckpt, TEXTS, STARS, other, progress=stop)
    key = B.cache_key(B.weights_sha256(ckpt), predictor.max_length,
                      B.describe_sample(TEXTS, STARS, "test split", 0), other)
    assert len(B.cache_paths(ckpt, key)[1].read_text().splitlines()) == 2
    seen = []      # a plain callable has no resumed(): the two done before come as one call
    done = B.measure(predictor, ckpt, TEXTS, STARS, other, progress=seen.append)
    assert seen == [2, 1, 1, 1] and [r["i"] for r in done.reviews] == [0, 1, 2, 3, 4]
    assert [r["k"] for r in done.reviews] == [r["k"] for r in res.reviews]


def test_the_sample_is_the_faithfulness_sample():
    from reviewbert.explain.faithfulness import sample_texts
    texts = [f"review {i}" for i in range(50)]
    assert [texts[i] for i in B.sample(50, 7, 3)] == sample_texts(texts, 7, 3)
    assert B.sample(5, 100) == B.sample(5, 5)


def test_cli_one_review_every_counterfactual_rechecked_with_plain_transformers(model_dir, capsys):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from reviewbert.cli import main
    text = f"The phone is fine. The screen is {UP}! Battery lasts a day."
    assert main(["whatif", "--checkpoint", str(model_dir), text, "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert last["label"] == "4 stars" and last["deletion"]["words"] == [UP]
    assert out[1] == f"Deleting this word turns 4 stars into 3 stars: {UP}."
    kinds = {c["kind"] for c in last["counterfactuals"]}
    assert kinds == {"deletion", "sentence", "hotflip"}
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, use_safetensors=True).eval()
    for c in last["counterfactuals"]:
        with torch.no_grad():
            logits = model(**tok(c["text"], return_tensors="pt")).logits[0]
        probs = torch.softmax(logits, -1).numpy()
        assert int(np.argmax(probs)) == c["label_id"], c
        np.testing.assert_allclose(probs, list(c["probabilities"].values()), atol=1e-5)
        assert (c["label_id"] != last["label_id"]) == c["changed"]


def test_cli_brittleness_and_usage_errors(tmp_path, model_dir, capsys):
    from reviewbert.cli import main
    d = tmp_path / "trig"
    shutil.copytree(model_dir, d)
    write_meta(d, 5, data_file=write_toy_csv(tmp_path / "toy.csv", n=150), max_per_class=10)
    assert main(["whatif", "--checkpoint", str(d), "--n", "6", "--max-words", "3", "--json"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    last = json.loads(out[-1])
    assert last["n"] == 6 and set(last) >= {"all", "correct", "wrong", "settings", "example"}
    assert last["settings"]["method"] == "occlusion" and last["settings"]["max_words"] == 3
    assert sum(last["all"]["histogram"].values()) == 6
    assert any(line.startswith("Deleting at most 3 words") for line in out)
    assert list((d / "whatif").glob("*.json"))
    for bad in (["--n", "3", "some text"], [], ["--n", "0"], ["x", "--max-words", "0"], ["   "]):
        assert main(["whatif", "--checkpoint", str(d), *bad]) == 2, bad
    assert "error:" in capsys.readouterr().err
