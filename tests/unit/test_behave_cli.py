"""``reviewbert behave`` on a tiny random model: the table, the --json last line, the gate's
exit status, --cases alone or beside a suite, one-line errors; and the report's section."""
from __future__ import annotations

import json
import shutil

import pytest

from reviewbert.cli import main

from browser_support import write_meta
from toyreviews import write_toy_csv

SUITE = """
name: tiny
seed: 0
lexicons:
  product: [phone, case, charger]
tests:
  - name: Praise is 4-5
    capability: Vocabulary
    type: MFT
    templates: ["The {product} is great."]
    stars: [4, 5]
  - name: Anything is 1-5
    capability: Vocabulary
    type: MFT
    templates: ["The {product} arrived."]
    stars: [1, 5]
  - name: Uppercase
    capability: Robustness
    type: INV
    source: reviews
    perturbation: uppercase
    max_cases: 20
"""


@pytest.fixture
def checkpoint(tmp_path, tiny_model_dir):
    d = tmp_path / "tiny"
    shutil.copytree(tiny_model_dir, d)
    write_meta(d, 5, data_file=write_toy_csv(tmp_path / "toy.csv", n=150), max_per_class=10)
    return d


def run(capsys, *argv) -> tuple[int, list[str], str]:
    code = main(["behave", *map(str, argv)])
    out = capsys.readouterr()
    return code, out.out.strip().splitlines(), out.err


def test_the_table_the_json_line_and_the_cache(tmp_path, checkpoint, capsys):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    code, out, _ = run(capsys, "--checkpoint", checkpoint, "--suite", suite, "--json")
    assert code == 0
    last = json.loads(out[-1])
    assert last["suite"] == "tiny" and last["checkpoint"] == str(checkpoint)
    assert [t["name"] for t in last["tests"]] == ["Praise is 4-5", "Anything is 1-5", "Uppercase"]
    fields = {"name", "capability", "type", "n", "filtered", "failed", "fail_rate", "ci_low",
              "ci_high"}
    assert all(fields <= set(t) for t in last["tests"])
    anything = last["tests"][1]
    assert anything["n"] == 3 and anything["failed"] == 0 and anything["fail_rate"] == 0.0
    assert any("Anything is 1-5" in line for line in out[:-1])      # the table
    assert last["cached"] is False and (checkpoint / ".behave").is_dir()
    code, out, _ = run(capsys, "--checkpoint", checkpoint, "--suite", suite, "--json")
    assert json.loads(out[-1])["cached"] is True


def test_the_gate_fails_only_above_its_rate(tmp_path, checkpoint, capsys):
    cases = tmp_path / "cases.csv"
    cases.write_text("text,min_stars,max_stars\nfine,1,5\nalso fine,1,5\nnever,9,9\n",
                     encoding="utf-8")
    code, _, err = run(capsys, "--checkpoint", checkpoint, "--cases", cases)
    assert code == 2 and "cases.csv line 4" in err and len(err.strip().splitlines()) == 1
    cases.write_text("text,min_stars,max_stars,name\nfine,1,5,open\nalso fine,1,5,open\n"
                     "one star,1,1,narrow\nstill one,1,1,narrow\n", encoding="utf-8")
    code, out, err = run(capsys, "--checkpoint", checkpoint, "--cases", cases, "--json",
                         "--fail-above", "1")
    assert code == 0
    tests = {t["name"]: t for t in json.loads(out[-1])["tests"]}
    assert set(tests) == {"open", "narrow"}                # --cases alone: only its cases
    assert tests["open"]["fail_rate"] == 0.0
    narrow = tests["narrow"]["fail_rate"]
    code, out, err = run(capsys, "--checkpoint", checkpoint, "--cases", cases, "--json",
                         "--fail-above", "0")
    assert code == (1 if narrow > 0 else 0)
    assert json.loads(out[-1])["gate"] == ("failed" if narrow > 0 else "passed")
    if narrow > 0:
        assert "gate: 'narrow' fails" in err


def test_bad_input_is_one_line(tmp_path, checkpoint, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntests:\n  - name: a\n    capability: c\n    type: WAT\n",
                   encoding="utf-8")
    for argv, says in [(("--suite", bad), "WAT"),
                       (("--suite", tmp_path / "missing.yaml"), "no such file"),
                       (("--fail-above", "2"), "between 0 and 1")]:
        code, _, err = run(capsys, "--checkpoint", checkpoint, *argv)
        assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_report_section_escapes_what_a_suite_names(tmp_path, checkpoint):
    from reviewbert.analysis.html_report import behaviour_section
    from reviewbert.behave.runner import run_suite
    from reviewbert.behave.suite import parse_suite
    from reviewbert.model.inference import Predictor
    text = SUITE.replace("Praise is 4-5", "<script>alert(1)</script>")
    result = run_suite(Predictor.from_checkpoint(checkpoint), parse_suite(text), [])
    html = "\n".join(behaviour_section(result, lambda fig: "<div>fig</div>"))
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Behavioural tests: tiny" in html
