"""What the code says about itself stays true: the paths it names, its figures, its first lines.

- every repository path and ``reviewbert.x.y`` name in the docs, docstrings and comments
  (the package, the pages, the benchmarks, the scripts, the README, docs/, the Makefile,
  CI) exists in the checkout: a module that moved leaves no stale pointer behind;
- no comment or docstring under ``reviewbert/`` quotes a timing measured on one machine
  ("0.9 s on this 2-core CPU", "3.5x faster here"): such figures live in docs/, beside the
  benchmark that measures them, and the code names the benchmark (settings such as "a
  timeout of 30 s" are not measurements and stay); nor a commit or a plan's stop ("since
  3620edc", "stop 43"), whose story is the commit message's;
- every module of ``reviewbert/`` opens with a docstring whose first line is a sentence.

Each check is first run on sentences that must and must not trip it, so that a detector
that stopped detecting fails here rather than passing everything.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "reviewbert"


# ----------------------------------------------------------------- reading the prose
def python_prose(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every ``#`` comment and every string statement (module, class and
    function docstrings, and the attribute docstrings under constants) of a Python file."""
    src = path.read_text(encoding="utf-8")
    out = [(tok.start[0], tok.string.lstrip("#").strip())
           for tok in tokenize.generate_tokens(io.StringIO(src).readline)
           if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            out.append((node.lineno, node.value.value))
    return sorted(out)


def python_strings(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every other string constant: help texts, messages, cards."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def package_files() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ================================================================ a) paths that exist
TOP = ("reviewbert", "tests", "bench", "docs", "pages", "scripts", "checkpoints", ".ci", ".streamlit")
# not after "host:" (rsync's worker2:reviewbert/...) or "~/", "$X/", "../": another machine's
PATH = re.compile(r"(?<![\w./~$:@-])(?:%s)/[\w./<>{}*\-]*" % "|".join(re.escape(t) for t in TOP))
# "ui/predict.py", "analysis/cache.py": a module named from inside the package
SUBPACKAGES = sorted(p.name for p in PKG.iterdir() if (p / "__init__.py").exists())
PKG_PATH = re.compile(r"(?<![\w./~$:@-])(?:%s)/[\w/]*\w\.py\b" % "|".join(SUBPACKAGES))
MODULE = re.compile(r"(?<![\w./-])reviewbert(?:\.[A-Za-z_]\w*)+")
# "highlight.py", "runs.py": a file named alone must be some file of the repository
BARE_FILE = re.compile(r"(?<![\w./-])[A-Za-z_]\w*\.py\b")
OTHER_PROJECTS_FILES = {"plotly.py", "setup.py", "conftest.py"}
"""Files named alone that are not ours: plotly's Python library, setuptools' and pytest's files."""
RETIRED = re.compile(r"\b(?:anatomy_figures|datafiles|explanation_cache|explain_figures|head_analysis|"
                     r"heads_cache|heads_figures|head_roles|run_cache|search_figures|headview|"
                     r"whatif_figures|error_views)\b(?!\s*=)")
"""Module names retired by the move to feature packages, as words in prose (the code may still
import a module under such a name: ``import cache as heads_cache`` is not prose)."""

NOT_MODULES = {"reviewbert.json", "reviewbert.egg"}
"""``reviewbert.json`` is a checkpoint's settings file, ``reviewbert.egg-info`` pip's."""
GENERATED = (
    "checkpoints/",         # a run's own folder: checkpoints/NAME, checkpoints/demo-pruned, ...
    "bench/out/",           # the benchmarks' generated inputs (gitignored)
)
"""Paths that the code or a command writes at run time (gitignored): named, never shipped."""
SHIPPED = ("checkpoints/demo",)
"""Shipped folders under GENERATED ones: they and what they hold must exist."""
NOT_PATHS = {"reviewbert/1"}
"""Strings that look like paths: ``reviewbert/1`` is a run's metadata format tag."""
SKIPPED_FILES = {"docs/benchmark-history.md"}
"""A historical record: the paths it names were true when each entry was written."""


@functools.lru_cache(maxsize=1)
def file_names() -> frozenset[str]:
    """The name of every file and folder of the repository's own tree."""
    return frozenset(p.name for top in ("app.py", *TOP)
                     for p in [ROOT / top, *(ROOT / top).rglob("*")])


def prose_sources() -> list[tuple[str, list[tuple[int, str, bool]]]]:
    """(file, [(line, text, prose)]) of everything a reader reads as documentation; ``prose``
    is False for the package's non-docstring strings."""
    out = []
    py = [*package_files(), *sorted((ROOT / "pages").glob("*.py")), ROOT / "app.py",
          *sorted((ROOT / "bench").glob("*.py"))]
    for p in py:
        if p.exists():
            # the package's other strings too (help texts, model cards), for their paths;
            # their dotted names are often module names made at run time, not pointers
            out.append((_rel(p), [(n, t, True) for n, t in python_prose(p)]
                        + [(n, t, False) for n, t in (python_strings(p) if p.is_relative_to(PKG) else [])]))
    text = [ROOT / "README.md", ROOT / "Makefile", ROOT / ".ci" / "run",
            *sorted((ROOT / "docs").rglob("*.md")), *sorted((ROOT / "scripts").glob("*"))]
    for p in text:
        if p.is_file() and _rel(p) not in SKIPPED_FILES:
            lines = p.read_text(encoding="utf-8", errors="replace").splitlines()
            out.append((_rel(p), [(n, t, True) for n, t in enumerate(lines, 1)]))
    return out


def _clean(token: str) -> str:
    token = token.split("::")[0].rstrip(".,;:)'`\"-")
    token = re.sub(r":\d+(?:-\d+)?$", "", token)     # file.py:12
    return token.rstrip(".,;:)/'`\"-")


def _placeholder(token: str) -> bool:
    return bool(re.search(r"[<>{}*]|\.\.\.|\bNAME\b|\bDIR\b|/[A-Z]+(?:[/.]|$)", token))


def path_exists(token: str) -> bool:
    """Whether a repository path named in prose exists (or is one the code generates)."""
    token = _clean(token)
    if not token or _placeholder(token) or token in NOT_PATHS:
        return True
    shipped = any(token == s or token.startswith(s + "/") for s in SHIPPED)
    if (token + "/").startswith(GENERATED) and not shipped:
        return True
    if (ROOT / token).exists():
        return True
    # tests/browser_support.StreamlitServer: a module's file, then a name in it
    folder, _, last = token.rpartition("/")
    module, dot, _ = last.partition(".")
    return bool(dot) and (ROOT / folder / (module + ".py")).is_file()


def _top_level_names(tree: ast.Module) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        names[n.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[(a.asname or a.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try)):    # names defined under a guard
            inner = ast.Module(body=[*node.body, *getattr(node, "orelse", []),
                                     *[s for h in getattr(node, "handlers", []) for s in h.body]],
                               type_ignores=[])
            names.update(_top_level_names(inner))
    return names


def _class_has(cls: ast.ClassDef, attr: str) -> bool:
    if attr in _top_level_names(ast.Module(body=cls.body, type_ignores=[])):
        return True
    return any(isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Store)
               for n in ast.walk(cls))


def _module_file(dotted: str) -> Path | None:
    parts = dotted.split(".")
    base = ROOT.joinpath(*parts)
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def module_exists(dotted: str) -> bool:
    """Whether ``reviewbert.a.b`` is a module, or a module and then names defined in it
    (``reviewbert.model.inference.Prediction.values``), read from the source, not imported."""
    dotted = dotted.rstrip(".")
    if dotted in NOT_MODULES or any(dotted.startswith(n + ".") for n in NOT_MODULES):
        return True
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:i]))
        if path is None:
            continue
        rest = parts[i:]
        if not rest:
            return True
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _top_level_names(tree)
        node = names.get(rest[0])
        if node is None:
            # a package's lazy names (``__getattr__``) are listed in its source as strings
            return "__getattr__" in names and f'"{rest[0]}"' in path.read_text(encoding="utf-8")
        for attr in rest[1:]:
            if not isinstance(node, ast.ClassDef):
                return True         # an imported or computed object: not followed further
            if not _class_has(node, attr):
                return False
            node = _top_level_names(ast.Module(body=node.body, type_ignores=[])).get(attr)
        return True
    return importlib.util.find_spec(parts[0]) is not None and parts[0] != "reviewbert"


def stale_references() -> list[str]:
    bad = []
    for name, lines in prose_sources():
        for line, text, prose in lines:
            for m in PATH.finditer(text):
                if not path_exists(m.group()):
                    bad.append(f"{name}:{line}: {_clean(m.group())}")
            for m in PKG_PATH.finditer(text):
                if not path_exists("reviewbert/" + m.group()) and not path_exists(m.group()):
                    bad.append(f"{name}:{line}: {m.group()} (no reviewbert/{m.group()})")
            for m in MODULE.finditer(text) if prose else ():
                if not module_exists(m.group()):
                    bad.append(f"{name}:{line}: {m.group()}")
            for m in BARE_FILE.finditer(text) if prose else ():
                if m.group() not in file_names() and m.group() not in OTHER_PROJECTS_FILES:
                    bad.append(f"{name}:{line}: {m.group()} (no file of that name)")
            for m in RETIRED.finditer(text) if prose else ():
                bad.append(f"{name}:{line}: {m.group()} (a retired module name)")
    return bad


def test_the_path_check_knows_a_stale_path_from_a_real_one():
    assert path_exists("reviewbert/training/distill.py")
    assert path_exists("reviewbert/model/")
    assert path_exists("tests/unit/test_card.py::test_something")
    assert path_exists("bench/predict_latency.py:12.")
    assert path_exists("checkpoints/my-run/last")          # written by a run
    assert path_exists("reviewbert/ui/<page>.py")          # a placeholder
    assert path_exists("tests/browser_support.StreamlitServer")     # a name in a module
    assert path_exists("bench/out")
    assert not path_exists("checkpoints/demo/no-such-file")
    assert not path_exists("tests/browser_support.py.NoSuchThing/x")
    assert not path_exists("reviewbert/distill.py")        # the card's old pointer
    assert not path_exists("reviewbert/heads_cache.py")
    assert module_exists("reviewbert.model.inference.Prediction")
    assert module_exists("reviewbert.model.inference.Predictor.model")
    assert module_exists("reviewbert.training.train")      # a lazy name of the package
    assert module_exists("reviewbert.json")
    assert not module_exists("reviewbert.evaluate")
    assert not module_exists("reviewbert.model.inference.NoSuchThing")
    assert not module_exists("reviewbert.model.inference.Predictor.no_such_attribute")
    found = [m.group() for m in PATH.finditer("see `reviewbert/ui/predict.py`, and tests/unit/. "
                                              "rsync worker2:reviewbert/checkpoints/x ~/tests/y")]
    assert found == ["reviewbert/ui/predict.py", "tests/unit/."]
    assert [m.group() for m in PKG_PATH.finditer("(``analysis/cache.py``), not x/ui/a.py")] \
        == ["analysis/cache.py"]
    assert [m.group() for m in BARE_FILE.finditer("(``heads_cache.py``), viz/highlight.py")] \
        == ["heads_cache.py"]
    assert [m.group() for m in RETIRED.finditer("``head_analysis.HeadsResult``; heads_cache = 1")] \
        == ["head_analysis"]


def test_every_path_and_module_named_in_the_docs_exists():
    """README, docs/, Makefile, CI, scripts, and the docstrings and comments of the package,
    pages, app and benchmarks: each repository path and dotted module name they give."""
    bad = stale_references()
    assert not bad, "named but not in the checkout:\n" + "\n".join(bad)


# ================================================== b) no machine's timings in the code
_NUM = r"~?\d[\d,]*(?:\.\d+)?"
TIMING = re.compile(rf"(?<![\w.]){_NUM}(?:\s*(?:-|–|to|->|→)\s*{_NUM})?\s*"
                    r"(?:ms|µs|us|s|secs?|seconds?|mins?|minutes?)(?![\w-])"
                    r"|\b(?:about|under|over|nearly|almost|within|half|quarter of) an? (?:second|minute)\b"
                    r"|\ba few (?:seconds|minutes)\b")
MEMORY = re.compile(rf"(?<![\w.]){_NUM}\s*(?:MB|GB|MiB|GiB)\b")
MACHINE = re.compile(
    r"\b\d+-core\b|\bon (?:two|2|\d+) cores\b|\bAVX2\b|\bEPYC\b|\bXeon\b|\bZen \d\b|\bpy-spy\b"
    r"|\bcProfile\b", re.IGNORECASE)
"""Words that name the machine a figure was measured on, or the profiler that measured it."""
SPEED_UP = re.compile(r"\d(?:\.\d+)?\s*(?:x|×|%)\s*(?:faster|slower|quicker)\b", re.IGNORECASE)
HERE = re.compile(r"\bon this (?:CPU|machine)\b|\bhere\b(?=\s*[).,;:]|$)|\bAVX-?512\b|\bAMX\b",
                  re.IGNORECASE)
"""Words that make a nearby figure one machine's ("AVX-512" alone is a CPU feature the code
detects, "AVX-512, 40 ms" a timing)."""
MEASURED = re.compile(
    r"\b(?:took|takes?|cost(?:s|ing)?|spent|spends?|paid|pays|faster|slower|quicker|"
    r"instead of|against|versus|vs\b|went|fell|grew|rose|profiled?|getrusage|"
    r"p50|p95|median|alone|idle|per click|of (?:a|its|the|every) [\w-]+ (?:run|click|rerun|pass))\b"
    r"|->|→", re.IGNORECASE)
"""Words that make a duration a measurement ("took 0.9 s", "35 -> 19 ms", "~6 ms of a
Predict run") rather than a setting ("sleeps 60 s", "a timeout of 30 s")."""
SETTING = re.compile(r"\b(?:timeout|time-?out|sleeps?|deadline|interval|limit|every \d|at most|"
                     r"at least|up to|poll(?:s|ed)?|retr(?:y|ies)|budget|e\.g\.)\b", re.IGNORECASE)
MEMORY_MEASURED = re.compile(r"\b(?:grew|growth|RSS|peak|took)\b", re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    flat = " ".join(text.split())
    return [s for s in re.split(r"(?<=[.;!?])\s+(?=[A-Z(`*\"'])", flat) if s]


def machine_timings(text: str) -> list[str]:
    """The sentences of ``text`` that quote a figure measured on one machine."""
    out = []
    for s in _sentences(text):
        timed = TIMING.search(s)
        if MACHINE.search(s) or SPEED_UP.search(s) \
                or (timed and (MEASURED.search(s) or HERE.search(s)) and not SETTING.search(s)) \
                or (MEMORY.search(s) and (MEMORY_MEASURED.search(s) or HERE.search(s))
                    and not SETTING.search(s)):
            out.append(s)
    return out


MEASUREMENTS = [   # lines the code held before the figures moved to docs/
    "0.9 s on this 2-core CPU",
    "LIME and occlusion ask the model about a few hundred shortened copies of one review "
    "(22 s at 256 tokens on a 2-core AVX2 CPU).",
    "About 3.2-3.6 s a figure on a 2-core AVX2 EPYC (it starts the browser each time).",
    "The spinner and cache lookup, ~3 ms of a Predict run's ~45 ms (py-spy).",
    "validating their traces was half of their build time (heads figure 35 -> 19 ms at 256 tokens).",
    "(make_subplots and per-row updates took ~40 ms of every Predict rerun).",
    "in bf16 autocast (3.5× faster per 256-token row here)",
    "oneDNN with weights reordered once: same fp32 math, ~25% faster GEMMs on CPU.",
    "200 forward passes of a shortened review: about a second at 128 tokens here.",
    "the server's idle CPU (1,005 ms of CPU a second) went to the watcher.",
    "100 reviews of 100 lengths grew the process by 118 MB.",
    "Loading the demo costs about 2.5 s on a 2-core CPU.",
    "a step took 40 ms with AVX-512.",
]
SETTINGS = [       # figures that are the code's own: settings, sizes, arithmetic
    "writes the point's name to the mark file and sleeps 60 s, so the test can SIGKILL it.",
    "A request waits at most 30 s for its turn, then gives up.",
    "A timeout of 30 s: a server that has not answered by then is not coming.",
    "the same process gives the same value to ~10 ms, unless the wall clock was stepped.",
    "A 20,000-row memo holds about 5 MB.",
    "a 256-token heatmap is ~6,700 px wide.",
    "the [L, H, T, T] attention array of a 256-token review is 19 MB.",
    "A gzipped upload may expand to at most this (1 GiB; a 50 MB upload of review text is ~500 MB).",
    "A bf16 autocast only on CPUs with AMX-BF16 or AVX512-BF16 units.",
    'torch says "AVX512" on CPUs with and without bf16, so the kernel\'s flags decide.',
    "Here zlib counts: a 1 MB file that expands to gigabytes is stopped after ~8 MiB, with one buffer held.",
    "averaged in the input's dtype: 12x less to convert to float64.",
    "Seconds per token of the last runs, so the page can say how long the button takes on this machine.",
    "the base model is not on this machine.",
]


@pytest.mark.parametrize("text", MEASUREMENTS)
def test_the_timing_check_flags_a_measurement(text):
    assert machine_timings(text), text


@pytest.mark.parametrize("text", SETTINGS)
def test_the_timing_check_lets_settings_and_sizes_be(text):
    assert not machine_timings(text), text


def test_no_comment_or_docstring_quotes_a_machine_timing():
    """Timings measured on one machine go to docs/ with their benchmark command; the code
    says why, and names the benchmark (bench/*.py) or test that measures it."""
    bad = [f"{_rel(p)}:{line}: {s}" for p in package_files()
           for line, text in python_prose(p) for s in machine_timings(text)]
    assert not bad, "measurement logs in the code (move the figures to docs/):\n" + "\n".join(bad)


HISTORY = re.compile(r"\bstops? \d+\b|\b(?:since|in|before|after|commit|see|by|until)\s+"
                     r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", re.IGNORECASE)
"""A pointer into the project's history ("since 3620edc", "stop 43"): the story of a change
lives in its commit message, where ``git log`` and ``git blame`` find it."""


def test_the_history_check_flags_commit_pointers():
    assert HISTORY.search("(bench/gpu_check.py and its diagnosis, stop 34)")
    assert HISTORY.search("unchanged since 3620edc, when the cache moved")
    assert not HISTORY.search("a colour such as #1f2430, or 10,000 reviews since the start")
    assert not HISTORY.search("the seed's 1e-5 was for the 5x larger bert-base")


def test_no_comment_or_docstring_points_into_the_history():
    bad = [f"{_rel(p)}:{line}: {m.group()}" for p in package_files()
           for line, text in python_prose(p) for m in HISTORY.finditer(text)]
    assert not bad, "history pointers in the code (say it in the commit message):\n" + "\n".join(bad)


# ======================================================= c) first lines that say what
def first_line_problem(doc: str | None) -> str | None:
    """Why a module docstring's first line is not a sentence saying what the module holds
    (None if it is one)."""
    if doc is None:
        return "no module docstring"
    first = doc.split("\n", 1)[0].strip()
    if not first:
        return "the docstring's first line is empty"
    if len(re.findall(r"[\w`'\"]+", first)) < 3:
        return f"{first!r} is a label, not a sentence"
    if not re.match(r"[A-Z0-9`\"'“(\[]|[a-z]\w*'s\b", first):
        return f"{first!r} does not start a sentence"
    return None


def test_the_first_line_check_knows_a_sentence():
    assert first_line_problem("Reading one review file: format sniffing, decoding, columns.") is None
    assert first_line_problem("``reviewbert predict``: the star rating of review texts.") is None
    assert first_line_problem("bertviz's head view as self-contained HTML.") is None
    assert first_line_problem(None) == "no module docstring"
    assert first_line_problem("\nHelpers for the page.") == "the docstring's first line is empty"
    assert first_line_problem("Utilities.")
    assert first_line_problem("helpers for the page")


def test_every_module_opens_with_a_sentence_saying_what_it_holds():
    bad = []
    for p in package_files():
        problem = first_line_problem(ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")),
                                                       clean=False))
        if problem:
            bad.append(f"{_rel(p)}: {problem}")
    assert not bad, "\n".join(bad)
