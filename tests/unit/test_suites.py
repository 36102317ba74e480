"""The test suites are defined once (tests/conftest.py's SUITES) and every command agrees:

- each suite has the Makefile target of its name, which selects its marker;
- CI (.ci/run) runs `make test` and exactly the suites CI_SUITES names;
- no test carries a marker that is not a suite (folders say a test's kind), and no folder
  is named after a suite.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import CI_SUITES, SUITES

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# markers pytest itself or its plugins define
BUILTIN = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout"}


def _targets() -> dict[str, str]:
    """{Makefile target: its recipe}."""
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    out = {}
    for m in re.finditer(r"^([\w-]+):[^\n=]*\n((?:\t[^\n]*\n?)*)", text, flags=re.M):
        out[m.group(1)] = m.group(2)
    return out


def test_each_suite_has_its_make_target_selecting_its_marker():
    targets = _targets()
    assert "test" in targets and "pytest" in targets["test"]
    missing = {s for s in SUITES if s not in targets}
    assert missing == set(), f"suites without a make target: {missing}"
    for suite in SUITES:
        recipe = targets[suite]
        assert re.search(rf'-m "?[^"\n]*\b{suite}\b', recipe), (suite, recipe)


def test_the_make_test_target_deselects_nothing_itself():
    """`make test` leaves the suites out through conftest alone: a -m of its own would be
    a second definition."""
    assert " -m " not in _targets()["test"].replace("$(PY) -m pytest", "")
    addopts = (ROOT / "pytest.ini").read_text(encoding="utf-8").split("addopts")[1].split("\n")[0]
    assert not re.search(r"(^|\s)-m\b", addopts), addopts


def test_ci_runs_make_test_then_exactly_its_suites():
    steps = re.findall(r"^make ([\w-]+)", (ROOT / ".ci" / "run").read_text(encoding="utf-8"), flags=re.M)
    assert steps[0] == "test"
    assert set(steps[1:]) == set(CI_SUITES)


def _markers_used() -> dict[str, set[str]]:
    used: dict[str, set[str]] = {}
    for path in TESTS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "mark" and isinstance(node.value.value, ast.Name) \
                    and node.value.value.id == "pytest":
                used.setdefault(node.attr, set()).add(str(path.relative_to(ROOT)))
    return used


def test_every_marker_a_test_carries_is_a_suite():
    used = _markers_used()
    assert set(SUITES) & set(used), "no suite marker found: the scan reads nothing"
    stray = {m: sorted(files) for m, files in used.items() if m not in SUITES and m not in BUILTIN}
    assert stray == {}


def test_no_test_folder_is_named_after_a_suite():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))}
    assert folders & set(SUITES) == set(), folders & set(SUITES)
