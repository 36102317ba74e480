"""Bad and hostile input to ``reviewbert heads`` and ``heads prune``: every mistake is one
line on stderr and exit status 2; hostile review texts are analysed like any others."""
from __future__ import annotations

import json

import pytest
from hypothesis import strategies as st

from reviewbert.cli import UsageError, main
from reviewbert.cli.heads import parse_fraction

from browser_support import write_reviews
from fuzzing import twins
from hostile_texts import CORPUS
from toyreviews import write_toy_csv


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    err = [e for e in err if not e.startswith(("Loading", "Writing"))]
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def _fraction_contract(text: str) -> None:
    try:
        f = parse_fraction(text)
    except UsageError as e:
        assert "\n" not in str(e) and "--fraction" in str(e)
        return
    assert 0.0 < f < 1.0


test_any_fraction_is_a_share_or_one_line, test_any_fraction_is_a_share_or_one_line_fuzz = twins(
    _fraction_contract, text=st.one_of(st.text(max_size=30), st.floats(allow_nan=True).map(str),
                                       st.integers().map(str)))


@pytest.mark.parametrize("text, want", [("0.3", 0.3), (" 0.25 ", 0.25), ("30%", 0.3),
                                        ("1e-1", 0.1)])
def test_good_fractions(text, want):
    assert parse_fraction(text) == pytest.approx(want)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    return write_toy_csv(tmp_path_factory.mktemp("heads-toy") / "toy.csv", n=120)


@pytest.mark.parametrize("fraction", ["abc", "", "0", "1", "1.5", "-0.2", "nan", "inf", "150%",
                                      "0.001"])
def test_bad_fractions_are_one_line_and_exit_2(tiny_model_dir, toy, tmp_path, capsys, fraction):
    rc = main(["heads", "prune", "--checkpoint", str(tiny_model_dir), "--fraction", fraction,
               "--out", str(tmp_path / "out"), "--split", "all", "--data", str(toy), "--n", "10"])
    assert rc == 2
    line = one_error_line(capsys)
    assert "fraction" in line or "no head at all" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv, says", [
    (["--n", "0"], "--n"),
    (["--draws", "0"], "--draws"),
    (["--split", "all"], "--data"),
    (["--split", "test"], "records no training data"),
])
def test_bad_analysis_options(tiny_model_dir, capsys, argv, says):
    assert main(["heads", "--checkpoint", str(tiny_model_dir), *argv]) == 2
    assert says in one_error_line(capsys)


def test_missing_checkpoint_and_bad_out(tiny_model_dir, toy, tmp_path, capsys):
    assert main(["heads", "--n", "5"]) == 2
    assert "--checkpoint" in one_error_line(capsys)
    assert main(["heads", "--checkpoint", str(tmp_path / "nope")]) == 2
    assert "not found" in one_error_line(capsys)
    common = ["--fraction", "0.25", "--split", "all", "--data", str(toy), "--n", "10"]
    assert main(["heads", "prune", "--checkpoint", str(tiny_model_dir), "--out",
                 str(tiny_model_dir), *common]) == 2
    assert "must not be the checkpoint itself" in one_error_line(capsys)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main(["heads", "prune", "--checkpoint", str(tiny_model_dir), "--out", str(busy),
                 *common]) == 2
    assert "not a checkpoint folder" in one_error_line(capsys)
    assert (busy / "notes.txt").read_text() == "mine"            # nothing lost


def test_hostile_texts_are_analysed_and_pruned_on(tiny_model_dir, tmp_path, capsys):
    rows = [(h.text, 1 + i % 5) for i, h in enumerate(CORPUS) if h.text.strip()]
    data = write_reviews(tmp_path / "hostile.jsonl", rows)
    assert main(["heads", "--checkpoint", str(tiny_model_dir), "--split", "all", "--data",
                 str(data), "--n", "40", "--draws", "1", "--no-cache", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["n"] >= 10 and len(out["importance"]) == 2 and out["finetune_js"] is None
    assert main(["heads", "prune", "--checkpoint", str(tiny_model_dir), "--fraction", "0.25",
                 "--out", str(tmp_path / "pruned"), "--split", "all", "--data", str(data)]) == 0
    assert "removed 2 of 8 heads" in capsys.readouterr().out
    cfg = json.loads((tmp_path / "pruned" / "config.json").read_text())
    assert sum(len(v) for v in cfg["pruned_heads"].values()) == 2
