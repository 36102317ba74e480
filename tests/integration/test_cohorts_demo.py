"""Failing cohorts of the shipped demo on its real test split: ``reviewbert cohorts`` end to
end (the model's pass, the properties, the tree, the slices), each cohort's query selecting
exactly the reviews its numbers count in the saved properties table, and the cohorts the
docs read (docs/guide/cohorts.md) still there.

The demo is used through a symlinked copy, so the caches are written in a temporary folder
and never into checkpoints/demo. Run with ``-s`` to print the leaves and slices."""
from __future__ import annotations

import json

import pandas as pd
import pytest
from demo_support import demo_copy

from reviewbert.cli import main


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as m:
        yield m


@pytest.fixture(scope="module")
def ck(tmp_path_factory, data_dir, monkeypatch_module):
    monkeypatch_module.setenv("REVIEWBERT_DATA_DIR", str(data_dir))
    return demo_copy(tmp_path_factory.mktemp("cohorts-demo"))


def last_json(argv: list[str]) -> tuple[int, dict | None]:
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(argv)
    lines = buf.getvalue().strip().splitlines()
    return code, (json.loads(lines[-1]) if code == 0 else None)


@pytest.fixture(scope="module")
def result(tmp_path_factory, ck):
    """(the --json line, the saved properties table): the test split rebuilt from the
    recorded files in the real data folder."""
    out = tmp_path_factory.mktemp("cohorts-out") / "properties.csv"
    code, found = last_json(["cohorts", "--checkpoint", str(ck), "--json",
                             "--save-properties", str(out)])
    assert code == 0
    return found, pd.read_csv(out)


def test_every_cohort_is_its_query_on_the_saved_table(result):
    found, table = result
    assert found["n"] == len(table) > 2_000 and 0.2 < found["error_rate"] < 0.7
    assert found["leaves"] and found["slices"]
    for item in found["leaves"] + found["slices"]:
        rows = table.query(item["query"])
        assert (len(rows), int(rows["wrong"].sum())) == (item["n"], item["errors"]), item["query"]
        assert item["ci_low"] <= item["error_rate"] <= item["ci_high"]
    rates = [s["error_rate"] for s in found["leaves"]]
    assert rates == sorted(rates, reverse=True)
    assert all(0 <= s["p_adjusted"] <= 1 for s in found["slices"])
    for item in found["leaves"] + found["slices"]:
        print(f"{item['kind']:>5} n={item['n']:>5} {100 * item['error_rate']:5.1f}% "
              f"p={item.get('p_adjusted')}  {item['query']}")


def test_the_cohorts_the_docs_read(result):
    """What docs/guide/cohorts.md says of the demo: 5-star reviews with a contrast word are
    its worst leaf, far above the split's rate; the middle ratings are where the slices
    are; cleanlab's flag, a model outcome, is no feature."""
    found, _ = result
    worst = found["leaves"][0]
    assert "true_stars > 4" in worst["query"] and "contrast > 0" in worst["query"]
    assert worst["error_rate"] > found["error_rate"] + 0.2 and worst["n"] >= 50
    assert any("true_stars == 3" in s["query"] and s["significant"] for s in found["slices"])
    assert not any("label_issue" in c["query"] or "confidence" in c["query"]
                   for c in found["leaves"] + found["slices"])


def test_the_behavioural_tests_start_from_a_saved_cohort(ck, result, capsys):
    """A cohort saved beside the test split's predictions (as the Cohorts page saves it) is
    what ``behave --slice`` perturbs: as many reviews as its query selects, every one of
    them 5 stars (so no positive sentence can raise one), and an unknown name refused."""
    from reviewbert.analysis import slices
    _, table = result
    query = "true_stars > 4 and contrast > 0"
    folder = next(p.parent for p in (ck / ".analysis").rglob("properties.parquet"))
    slices.save_slice(folder, "5 stars with a contrast", slices.SliceSpec(where=query))
    code, out = last_json(["behave", "--checkpoint", str(ck), "--slice", "5 stars with a contrast",
                           "--json"])
    assert code == 0
    assert out["reviews"] == {"slice": "5 stars with a contrast", "n": len(table.query(query))}
    tests = {t["name"]: t for t in out["tests"]}
    assert tests["Positive sentence added"]["n"] == 0          # nothing above 5 stars
    assert 0 < tests["Negative sentence added"]["n"] <= out["reviews"]["n"]
    capsys.readouterr()
    assert main(["behave", "--checkpoint", str(ck), "--slice", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: --slice: no slice 'nope'") and "5 stars with a contrast" in err
