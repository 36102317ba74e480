"""The per-review properties table of the failing cohorts (reviewbert/cohorts/properties.py) and
its lexicon (reviewbert/cohorts/lexicon.py): hand-made texts with known answers, the model's
columns on hand-built predictions (5 and 3 labels), hostile texts, the cache beside the
predictions, the lexicon's checks and where it is read from."""
from __future__ import annotations

import json
import math
import sys
import time
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reviewbert.analysis.predictions import SplitPredictions, prob_columns
from reviewbert.cohorts import lexicon as lexicon_mod
from reviewbert.cohorts import properties
from reviewbert.cohorts.keys import review_key
from reviewbert.cohorts.lexicon import LexiconError, load_lexicon, parse_lexicon, save_lexicon
from reviewbert.model.labels import FIVE, THREE

from hostile_texts import LONG

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = [json.loads(line)["text"]
            for line in (ROOT / "reviewbert" / "assets" / "examples.jsonl").read_text().splitlines()
            if line.strip()]
SHIPPED = load_lexicon(lexicon_mod.SHIPPED)


@pytest.fixture(autouse=True)
def _own_lexicon_places(tmp_path, monkeypatch):
    """No user lexicon of the machine running the tests leaks in."""
    monkeypatch.delenv(lexicon_mod.ENV, raising=False)
    monkeypatch.setenv("REVIEWBERT_CACHE", str(tmp_path / "cache"))


def props(texts, **kw):
    return properties.text_properties(texts, lexicon=kw.pop("lexicon", SHIPPED), **kw)


def one(text, **kw):
    return props([text], **kw).iloc[0]


def make_preds(stars, pred, scheme, texts=None, folder=None, conf=0.7) -> SplitPredictions:
    """Predictions of hand-picked classes: ``pred`` gets probability ``conf``."""
    k = scheme.num_labels
    probs = np.full((len(pred), k), (1 - conf) / (k - 1))
    probs[np.arange(len(pred)), pred] = conf
    texts = texts or [f"review number {i} about the phone" for i in range(len(stars))]
    frame = pd.DataFrame({"text": pd.Series(texts, dtype=object),
                          "stars": np.array(stars, dtype=np.int8),
                          "label": np.array([scheme.class_of(s) for s in stars], dtype=np.int8),
                          "pred": np.array(pred, dtype=np.int8)})
    for c, col in enumerate(prob_columns(k)):
        frame[col] = probs[:, c].astype(np.float32)
    frame["n_tokens"] = np.array([10 * (i + 1) for i in range(len(stars))], dtype=np.int32)
    frame["source"] = "toy.csv"
    return SplitPredictions(frame, scheme, {"max_length": 128}, folder)


def no_flags(n):
    return np.zeros(n, dtype=bool)


# ----------------------------------------------------------------- the text's own columns
@pytest.mark.parametrize("text, negations", [
    ("I don't like it, not at all", 2),
    ("Never again. Nothing works and there is no way to reset it", 3),
    ("It isn’t bad and it doesnt crash", 2),          # typographic apostrophe; no apostrophe
    ("A notable phone, nobody's fault, knot", 1),     # whole words: only "nobody" counts
    ("", 0),
])
def test_negations_are_counted_as_whole_words_and_nt_as_a_suffix(text, negations):
    assert one(text)["negations"] == negations


@pytest.mark.parametrize("text, contrast", [
    ("good but slow; however fine", 2),
    ("Although it works, the butter knife is better", 1),     # "though" not inside "although"
    ("Fast. On the other\nhand, the screen is dim", 1),       # a phrase across a line break
    ("BUT it is YET another phone", 2),                       # case does not matter
])
def test_contrast_words_are_counted(text, contrast):
    assert one(text)["contrast"] == contrast


def test_aspects_are_true_only_for_the_aspects_named():
    row = one("the battery and the screen")
    aspects = {c: bool(row[c]) for c in row.index if c.startswith("aspect_")}
    assert aspects == {f"aspect_{a}": a in ("battery", "screen") for a in SHIPPED.aspects}
    assert not one("it discharged itself")["aspect_battery"]      # "charged" only as a word
    assert one("paid $120 for it")["aspect_price"]                 # a literal phrase
    assert one("Customer  Service never answered")["aspect_service"]


@pytest.mark.parametrize("text, brand", [
    ("My old Samsung lasted twice as long", True),
    ("better than the iPhone 8", True),
    ("Samsungs everywhere", False),
    ("Great phone, works well", False),
])
def test_other_brand(text, brand):
    assert bool(one(text)["other_brand"]) is brand


@pytest.mark.parametrize("text, caps", [
    ("GREAT phone", 0.5), ("great phone", 0.0), ("ÉNORME", 1.0), ("123 !!!", 0.0), ("", 0.0),
])
def test_caps_ratio_is_upper_case_letters_over_letters(text, caps):
    assert one(text)["caps_ratio"] == pytest.approx(caps)


@pytest.mark.parametrize("text, exclamation, question", [
    ("Wow!! Really? Ok.", 1 / 3, 1 / 3),
    ("Love it! :)", 1.0, 0.0),
    ("Great phone", 0.0, 0.0),
    ("Rated 3.5 stars. Why?!", 0.5, 0.5),      # "3.5" ends no sentence; "?!" holds both
    ("Is it worth it? Yes", 0.0, 0.5),         # a last sentence without an ending counts
    ("!!!", 0.0, 0.0),                          # no word, no sentence
])
def test_exclamation_and_question_ratios_are_shares_of_sentences(text, exclamation, question):
    row = one(text)
    assert (row["exclamation_ratio"], row["question_ratio"]) == pytest.approx((exclamation, question))


def test_truncated_compares_the_token_count_with_max_length():
    table = props(["a", "b", "c"], n_tokens=[127, 128, 300], max_length=128)
    assert table["truncated"].tolist() == [False, True, True]
    assert table["n_tokens"].tolist() == [127, 128, 300]
    assert props(["a", "b"], n_tokens=[500, 600])["truncated"].tolist() == [False, False]
    unknown = props(["a"])
    assert math.isnan(unknown["n_tokens"][0]) and not unknown["truncated"][0]


def test_vader_and_readability_point_the_right_way():
    good = one("I love this phone! The camera is amazing and the battery is excellent.")
    bad = one("Terrible phone. It broke in a week, the screen is awful and support was useless.")
    assert good["vader_compound"] > 0.5 and good["vader_pos"] > good["vader_neg"]
    assert bad["vader_compound"] < -0.5 and bad["vader_neg"] > bad["vader_pos"]
    easy = one("The cat sat on the mat. It is a good cat.")
    hard = one("Notwithstanding considerable manufacturing irregularities, the telecommunications "
               "functionality demonstrated unparalleled reliability characteristics.")
    assert easy["readability"] > hard["readability"] and easy["grade"] < hard["grade"]


def test_a_review_without_a_word_has_no_readability_rather_than_a_false_zero():
    row = one("!!! ???")
    assert row["n_words"] == 0 and math.isnan(row["readability"]) and math.isnan(row["grade"])


def test_words_keys_and_sources():
    table = props(["don't  buy it", "Two words"], sources=["a.csv", "b\ud800.csv"])
    assert table["n_words"].tolist() == [3, 2]
    assert table["key"].tolist() == [review_key("don't  buy it"), review_key("Two words")]
    assert table["source"].tolist() == ["a.csv", "b?.csv"]      # parquet cannot hold a surrogate
    assert props(["x"])["source"].tolist() == [""]


def test_the_columns_are_in_order_and_every_one_is_defined():
    table = props(EXAMPLES[:3])
    cols = properties.columns(SHIPPED)
    assert list(table.columns) == cols[:cols.index("source") + 1]
    defs = properties.definitions(SHIPPED)
    assert list(defs) == cols and all(d.endswith(".") and "\n" not in d for d in defs.values())
    assert "battery" in defs["aspect_battery"] and "aspect_<name>" in properties.PROPERTIES
    assert len(props([])) == 0 and list(props([]).columns) == list(table.columns)


# ------------------------------------------------------------------- the model's columns
def test_model_columns_with_five_labels():
    preds = make_preds([1, 2, 3, 4, 5], [0, 3, 2, 4, 0], FIVE)
    t = properties.build_table(preds, flagged=no_flags(5), near_duplicate=no_flags(5), lexicon=SHIPPED)
    assert t["true_stars"].tolist() == [1, 2, 3, 4, 5]
    assert t["pred_stars"].tolist() == [1.0, 4.0, 3.0, 5.0, 1.0]
    assert t["error_stars"].tolist() == [0.0, 2.0, 0.0, 1.0, -4.0]
    assert t["abs_error"].tolist() == [0.0, 2.0, 0.0, 1.0, 4.0]
    assert t["wrong"].tolist() == [False, True, False, True, True]
    assert t["off_by_2"].tolist() == [False, True, False, False, True]
    assert t["confidence"].to_numpy() == pytest.approx(0.7)
    assert t["truncated"].tolist() == [False] * 5 and t["source"].tolist() == ["toy.csv"] * 5
    assert list(t.columns) == properties.columns(SHIPPED)


def test_model_columns_with_three_labels():
    # classes: stars 1-2 negative, 3 neutral, 4-5 positive
    preds = make_preds([1, 2, 3, 4, 5], [2, 0, 1, 1, 0], THREE)
    t = properties.build_table(preds, flagged=no_flags(5), near_duplicate=no_flags(5), lexicon=SHIPPED)
    assert t["pred_stars"].tolist() == [4.5, 1.5, 3.0, 3.0, 1.5]
    assert t["error_stars"].tolist() == [3.5, -0.5, 0.0, -1.0, -3.5]
    assert t["wrong"].tolist() == [True, False, False, True, True]
    assert t["off_by_2"].tolist() == [True, False, False, False, True]


def test_label_issues_default_to_cleanlab_and_to_none_when_it_cannot_run(monkeypatch):
    from reviewbert.analysis import label_issues
    preds = make_preds([1, 2, 3, 4, 5], [0, 1, 2, 3, 4], FIVE)
    monkeypatch.setattr(label_issues, "find_issues",
                        lambda p: types.SimpleNamespace(flagged=np.array([0, 1, 0, 0, 1], bool)))
    t = properties.build_table(preds, near_duplicate=no_flags(5), lexicon=SHIPPED)
    assert t["label_issue"].tolist() == [False, True, False, False, True]

    def fails(p):
        raise ValueError("cleanlab needs every class in the split")
    monkeypatch.setattr(label_issues, "find_issues", fails)
    t = properties.build_table(preds, near_duplicate=no_flags(5), lexicon=SHIPPED)
    assert t["label_issue"].tolist() == [False] * 5


def test_near_duplicates_default_to_the_hygiene_module(monkeypatch):
    seen = []
    fake = types.ModuleType("reviewbert.cohorts.hygiene")
    fake.near_duplicate_flags = lambda texts: seen.append(list(texts)) or np.array([1, 1, 0], bool)
    monkeypatch.setitem(sys.modules, "reviewbert.cohorts.hygiene", fake)
    preds = make_preds([1, 1, 5], [0, 0, 4], FIVE, texts=["same text", "same  text", "other"])
    t = properties.build_table(preds, flagged=no_flags(3), lexicon=SHIPPED)
    assert seen == [["same text", "same  text", "other"]]
    assert t["near_duplicate"].tolist() == [True, True, False]


def test_flags_of_the_wrong_length_are_refused():
    preds = make_preds([1, 5], [0, 4], FIVE)
    with pytest.raises(ValueError, match="3 values for 2 reviews"):
        properties.build_table(preds, flagged=no_flags(3), near_duplicate=no_flags(2), lexicon=SHIPPED)


# ---------------------------------------------------------------------- hostile texts
HOSTILE = ["", "   \n\t ", "\x00", "\x07\x1b[31mred\x1b[0m", "\ud800", "bad \udfff phone",
           "\u200b\u200b\u200d", "🔥🔥🔥 love it 😍", LONG, "not great but bad " * 6000,
           "!" * 100_000 + "x", "a" * 100_000, "3." * 50_000]


def test_hostile_texts_give_a_row_each_and_quickly():
    t0 = time.perf_counter()
    table = props(HOSTILE, n_tokens=list(range(len(HOSTILE))), max_length=5)
    # VADER alone took 100 s on the "but" text whole: the cap keeps every text cheap
    assert time.perf_counter() - t0 < 30
    assert len(table) == len(HOSTILE)
    assert table["n_words"].tolist()[:5] == [0, 0, 0, 2, 0]      # "31mred" and "0m"
    assert table.loc[6, "n_words"] == 0 and math.isnan(table.loc[6, "readability"])
    assert table["key"].tolist() == [review_key(t) for t in HOSTILE]
    numeric = table.drop(columns=["key", "source", "readability", "grade"]).to_numpy(dtype=float)
    assert np.isfinite(numeric).all()
    assert (table["vader_compound"].abs() <= 1).all()
    assert table.loc[7, "vader_compound"] > 0                      # the emoji are read as words
    assert table.loc[HOSTILE.index(LONG), "aspect_battery"]


def test_vader_and_textstat_read_a_long_review_only_up_to_the_cap(monkeypatch):
    seen = []
    monkeypatch.setattr(properties, "_vader", lambda: types.SimpleNamespace(
        polarity_scores=lambda text: seen.append(text) or {"compound": 0, "pos": 0, "neg": 0}))
    text = "word " * 3000 + "tail"
    props(["short review", text, "x" * 20_000])
    assert seen[0] == "short review"
    assert seen[1] == text[:len(seen[1])] and len(seen[1]) <= properties.SCORED_CHARS
    assert seen[1].endswith("word") and len(seen[1]) > properties.SCORED_CHARS - 10   # at a space
    assert seen[2] == "x" * properties.SCORED_CHARS                                  # no space


def test_hostile_texts_survive_the_cache(tmp_path):
    n = len(HOSTILE)
    preds = make_preds([1 + i % 5 for i in range(n)], [i % 5 for i in range(n)], FIVE,
                       texts=HOSTILE, folder=tmp_path)
    kw = dict(flagged=no_flags(n), near_duplicate=no_flags(n), lexicon=SHIPPED)
    first = properties.cached_table(preds, **kw)
    assert (tmp_path / properties.TABLE).is_file() and (tmp_path / properties.META).is_file()
    pd.testing.assert_frame_equal(properties.cached_table(preds, **kw), first)


# ----------------------------------------------------------------------------- the cache
@pytest.fixture
def cached(tmp_path):
    preds = make_preds([1, 2, 3, 4, 5], [0, 3, 2, 4, 0], FIVE, texts=EXAMPLES[:5], folder=tmp_path)
    kw = dict(flagged=no_flags(5), near_duplicate=no_flags(5), lexicon=SHIPPED)
    return preds, kw, properties.cached_table(preds, **kw)


def _forbid_computing(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("computed instead of read from the cache")
    monkeypatch.setattr(properties, "text_properties", boom)


def test_the_second_call_reads_the_cache(cached, monkeypatch):
    preds, kw, first = cached
    meta = json.loads((preds.folder / properties.META).read_text())
    assert meta == {"format": properties.FORMAT, "code_version": properties.CODE_VERSION,
                    "lexicon": SHIPPED.fingerprint, "inputs": meta["inputs"], "n": 5}
    _forbid_computing(monkeypatch)
    done = []
    again = properties.cached_table(preds, progress=lambda d, t: done.append((d, t)), **kw)
    pd.testing.assert_frame_equal(again, first)
    assert done == [(5, 5)]


def test_a_changed_lexicon_recomputes(cached, monkeypatch):
    preds, kw, first = cached
    other = parse_lexicon("aspects: {wifi: [wifi]}\nbrands: []\nnegations: [not]\ncontrast: [but]")
    table = properties.cached_table(preds, **{**kw, "lexicon": other})
    assert "aspect_wifi" in table.columns and "aspect_battery" not in table.columns
    _forbid_computing(monkeypatch)                 # and that table is now the one kept
    assert "aspect_wifi" in properties.cached_table(preds, **{**kw, "lexicon": other}).columns


def test_other_flags_recompute(cached):
    preds, kw, first = cached
    flagged = np.array([1, 0, 0, 0, 0], bool)
    table = properties.cached_table(preds, **{**kw, "flagged": flagged})
    assert table["label_issue"].tolist() == [True, False, False, False, False]


@pytest.mark.parametrize("damage", ["garbage", "truncate", "meta", "other texts"])
def test_a_damaged_or_stale_cache_is_recomputed(cached, damage):
    preds, kw, first = cached
    path, meta = preds.folder / properties.TABLE, preds.folder / properties.META
    if damage == "garbage":
        path.write_bytes(b"not a parquet file")
    elif damage == "truncate":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "meta":
        meta.write_text("{not json")
    else:                       # the same folder, other reviews: the keys tell
        preds.frame.loc[0, "text"] = "a different review"
        first = properties.build_table(preds, **kw)
    pd.testing.assert_frame_equal(properties.cached_table(preds, **kw), first)
    assert json.loads(meta.read_text())["format"] == properties.FORMAT


def test_without_a_folder_or_a_writable_one_the_table_is_still_returned(tmp_path):
    preds = make_preds([1, 5], [0, 4], FIVE)
    kw = dict(flagged=no_flags(2), near_duplicate=no_flags(2), lexicon=SHIPPED)
    assert len(properties.cached_table(preds, **kw)) == 2
    blocker = tmp_path / "a file"
    blocker.write_text("x")
    preds.folder = blocker              # the cache's files cannot be made under a file
    assert len(properties.cached_table(preds, **kw)) == 2


@pytest.mark.parametrize("name", ["props.csv", "props.parquet"])
def test_save_properties_round_trips(cached, tmp_path, name):
    _, _, table = cached
    path = properties.save_properties(table, tmp_path / "out" / name)
    back = pd.read_csv(path) if name.endswith(".csv") else pd.read_parquet(path)
    assert back["key"].tolist() == table["key"].tolist()
    assert back["aspect_battery"].tolist() == table["aspect_battery"].tolist()
    assert not list((tmp_path / "out").glob(".*tmp"))


# ---------------------------------------------------------------------------- progress
def test_progress_is_told_every_chunk_and_raising_stops_the_work(monkeypatch):
    monkeypatch.setattr(properties, "CHUNK", 4)
    texts = (EXAMPLES * 2)[:10]
    calls = []
    props(texts, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(4, 10), (8, 10), (10, 10)]

    chunks = []
    real = properties._chunk
    monkeypatch.setattr(properties, "_chunk", lambda t, lex: chunks.append(len(t)) or real(t, lex))

    class Left(Exception):
        pass

    def leave(done, total):
        raise Left
    with pytest.raises(Left):
        props(texts, progress=leave)
    assert chunks == [4]


# ------------------------------------------------------------------------ the lexicon
GOOD = "aspects: {wifi: [wifi, wi-fi]}\nbrands: [acme]\nnegations: [\"no\", \"n't\"]\ncontrast: [but]\n"


@pytest.mark.parametrize("text, field", [
    ("aspects: {Battery: [x]}\nbrands: []\nnegations: []\ncontrast: []", "aspects"),
    ("aspects: {a: []}\nbrands: []\nnegations: []\ncontrast: []", "aspects.a"),
    ("aspects: {a: [x]}\nbrands: [no]\nnegations: []\ncontrast: []", "brands[0]"),
    ("aspects: {a: [x]}\nbrands: []\nnegations: [\"" + "x" * 61 + "\"]\ncontrast: []", "negations[0]"),
    ("aspects: {a: [x]}\nbrands: []\nnegations: []\ncontrast: [[1, 2]]", "contrast[0]"),
    ("aspects: {a: [x]}\nbrands: []\nnegations: []", "contrast"),
    ("aspects: {a: [x]}\nbrands: []\nnegations: []\ncontrast: []\nnegation: []", "negation"),
    ("aspects: {a: [x]}\nbrands: " + json.dumps(["b"] * 201) + "\nnegations: []\ncontrast: []",
     "brands"),
    ("aspects: " + json.dumps({f"a{i}": ["x"] for i in range(21)})
     + "\nbrands: []\nnegations: []\ncontrast: []", "aspects"),
    ("aspects: {a: [x]\nbrands: [", "YAML"),
    ("- just\n- a list", "mapping"),
])
def test_lexicon_errors_are_one_line_naming_the_file_and_the_field(text, field):
    with pytest.raises(LexiconError) as e:
        parse_lexicon(text, "my.yaml")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("my.yaml: ") and field in msg, msg


def test_a_lexicon_is_normalised_and_fingerprinted():
    lex = parse_lexicon(GOOD.replace("acme", "ACME,  acme").replace("\"n't\"", "\"n’t\""))
    assert lex.brands == ("acme",) and lex.negations == ("no", "n't")
    assert lex.fingerprint == parse_lexicon(GOOD).fingerprint
    assert lex.fingerprint != parse_lexicon(GOOD.replace("acme", "acme2")).fingerprint
    assert len(SHIPPED.aspects) <= 20 and {"battery", "screen", "shipping", "seller", "price",
                                           "service", "sound"} <= set(SHIPPED.aspects)


def test_the_lexicon_is_read_from_the_variable_then_the_cache_then_the_shipped_file(tmp_path, monkeypatch):
    assert load_lexicon().fingerprint == SHIPPED.fingerprint
    user = tmp_path / "cache" / "lexicon.yaml"
    save_lexicon(GOOD)                                  # to the user's place
    assert user.read_text() == GOOD and lexicon_mod.user_path() == user
    assert "aspect_wifi" in properties.text_properties(["good wifi"]).columns
    mine = tmp_path / "mine.yaml"
    mine.write_text(GOOD.replace("wifi", "speed"))
    monkeypatch.setenv(lexicon_mod.ENV, str(mine))
    table = properties.text_properties(["good speed"])
    assert table["aspect_speed"].tolist() == [True] and "aspect_wifi" not in table.columns
    assert lexicon_mod.user_path() == mine
    monkeypatch.setenv(lexicon_mod.ENV, str(tmp_path / "missing.yaml"))
    with pytest.raises(LexiconError, match="missing.yaml: cannot read it"):
        load_lexicon()


def test_an_invalid_lexicon_is_not_saved(tmp_path):
    path = tmp_path / "lex.yaml"
    save_lexicon(GOOD, path)
    with pytest.raises(LexiconError, match="aspects"):
        save_lexicon("aspects: 3\nbrands: []\nnegations: []\ncontrast: []", path)
    assert path.read_text() == GOOD


def test_the_word_index_counts_what_the_lexicons_regexes_find():
    texts = EXAMPLES + ["I don't know, but the customer service, on the other hand... fine",
                        "wi-fi and wi fi; $5 for a SIM card, isn’t that cheap?", "n't", ""]
    for text in texts:
        counts = dict(zip(SHIPPED.matcher.names, SHIPPED.matcher.count(text)))
        found = {name: len(p.findall(text)) if p else 0 for name, p in SHIPPED.patterns.items()}
        assert counts == found, text


def test_a_longer_phrase_is_taken_whole_before_its_first_word():
    lex = parse_lexicon("aspects: {a: [x]}\nbrands: []\nnegations: [not, not at all, all]\n"
                        "contrast: []")
    text = "Not at all good, not good at all"
    assert one(text, lexicon=lex)["negations"] == 3     # "Not at all", then "not" and "all"
    assert len(lex.patterns["negations"].findall(text)) == 3
    assert one("not at all", lexicon=lex)["negations"] == 1


def test_the_windowed_vader_scores_as_vader_does():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer
    stock = SentimentIntensityAnalyzer()
    texts = EXAMPLES + ["never so good", "without a doubt the best", "not bad at all, kind of great",
                        "the bomb, but yeah right", "at least it works", "NOT good but not bad"]
    assert [properties._vader().polarity_scores(t) for t in texts] == \
        [stock.polarity_scores(t) for t in texts]
