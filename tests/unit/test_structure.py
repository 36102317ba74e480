"""The package's structure, measured from its own source (the redesign's promises):

- no import cycle between reviewbert's modules (imports inside functions included);
- no library module imports the command line (``reviewbert.cli`` or ``__main__``);
- Streamlit only in ``reviewbert/ui/`` and the page scripts; pages import only the ui;
- no function longer than 60 lines; the training loop's file at most 400 lines;
- modules are imported under their names, not one- or two-letter aliases.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "reviewbert"
MAX_FUNCTION_LINES = 60
MAX_LOOP_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PKG.rglob("*.py")}


def _imports(path: Path, modules: dict[str, Path], nodes=None) -> set[str]:
    """The reviewbert modules ``path`` imports, anywhere in it, or in ``nodes`` of it
    (relative ones resolved; ``from pkg import sub`` counts as an import of the submodule)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    if nodes is None:
        nodes = ast.walk(ast.parse(path.read_text(encoding="utf-8")))
    for node in nodes:
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "reviewbert")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "reviewbert":
                continue
            subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            out.update(subs or [target])
    return {m for m in out if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: _imports(p, modules) for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_import_graph_is_read_correctly():
    """The checks below are only as good as the graph: it must see relative imports,
    imports inside functions and `from package import submodule`."""
    g = _graph()
    assert "reviewbert.cli.train" in g["reviewbert.cli"] or "reviewbert.cli" in g["reviewbert.__main__"]
    assert "reviewbert.training.losses" in g["reviewbert.training.setup"]   # from . import losses
    assert "reviewbert.model.checkpoint" in g["reviewbert.data.splits"]           # inside a function
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_no_library_module_imports_the_command_line():
    offenders = {m: sorted(d for d in deps if d == "reviewbert.__main__"
                           or d == "reviewbert.cli" or d.startswith("reviewbert.cli."))
                 for m, deps in _graph().items()
                 if not (m == "reviewbert.__main__" or m == "reviewbert.cli"
                         or m.startswith("reviewbert.cli."))}
    assert {m: d for m, d in offenders.items() if d} == {}


def _third_party_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_streamlit_stays_in_the_ui_and_pages_import_only_the_ui():
    outside = [p.relative_to(ROOT) for p in PKG.rglob("*.py")
               if "ui" not in p.relative_to(PKG).parts and "streamlit" in _third_party_imports(p)]
    assert outside == []
    for page in (ROOT / "pages").glob("*.py"):
        tree = ast.parse(page.read_text(encoding="utf-8"))
        mods = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert mods <= {"streamlit", "reviewbert.ui"}, (page.name, mods)
        assert not any(isinstance(n, (ast.FunctionDef, ast.ClassDef)) for n in ast.walk(tree)), \
            f"{page.name} defines logic: it belongs in reviewbert/"


def test_no_function_is_longer_than_60_lines():
    long = []
    for path in [*PKG.rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert long == []


def test_the_training_loop_reads_on_a_few_screens():
    lines = (PKG / "training" / "loop.py").read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LOOP_LINES


def test_modules_are_imported_under_their_names():
    """`from .. import figures as F` hid which module a name came from (T was training or
    teaching, A attention or anatomy): our own modules keep their names."""
    short = []
    for path in [*PKG.rglob("*.py"), *(ROOT / "pages").glob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "")
                                                     .startswith("reviewbert")):
                short += [f"{path.relative_to(ROOT)}: {a.name} as {a.asname}" for a in node.names
                          if a.asname and len(a.asname) <= 2]
    assert short == []


def test_the_predict_page_imports_its_views_after_the_panel_and_the_load_preimports_them():
    """The first paint waits for no view module (torch, figures, scikit-learn), and the
    background load imports exactly the modules the page imports once it has a result."""
    import ast

    from reviewbert.ui.frame import VIEW_MODULES
    tree = ast.parse((ROOT / "pages" / "predict.py").read_text())
    top, late = set(), set()
    seen_panel = False
    # in source order, nested blocks included (the panel and the views share a `with`)
    for node in sorted((n for n in ast.walk(tree) if isinstance(n, ast.stmt)),
                       key=lambda n: (n.lineno, n.col_offset)):
        if isinstance(node, (ast.Expr, ast.Assign)) and "input_panel" in ast.unparse(node):
            seen_panel = True
        if isinstance(node, ast.ImportFrom) and node.module == "reviewbert.ui":
            names = {f"reviewbert.ui.{a.name}" for a in node.names}
            (late if seen_panel else top).update(names)
    assert late == set(VIEW_MODULES), (late, VIEW_MODULES)
    assert not top & set(VIEW_MODULES)


def test_the_predict_pages_views_import_neither_scipy_nor_scikit_learn():
    """Those are the Error analysis page's (0.7 s of imports): the load's thread imports
    the views while the first click on Predict may already be waiting for the GIL."""
    import subprocess
    import sys

    from reviewbert.ui.frame import VIEW_MODULES
    code = ("import sys\n" + "".join(f"import {m}\n" for m in VIEW_MODULES) +
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'sklearn'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_the_explanations_reading_and_agreement_need_neither_scipy_nor_scikit_learn():
    """The stop words come from scikit-learn's data file alone and the ranks from pandas:
    the same values, without the 0.6 s import on the first prediction's explanations."""
    import subprocess
    import sys
    code = ("import sys\nfrom types import SimpleNamespace as S\n"
            "from reviewbert.explain import methods as explain\n"
            "words = explain.stop_words()\n"
            "rho = explain.spearman_matrix([S(scores=[3, 1, 2, 2, 5]), S(scores=[1, 2, 3, 4, 5])])\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'scipy', 'sklearn'}), len(words),"
            " round(float(rho[0, 1]), 6))\n"
            "from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS\n"
            "from scipy.stats import spearmanr\n"
            "assert words == ENGLISH_STOP_WORDS\n"
            "print(round(float(spearmanr([3, 1, 2, 2, 5], [1, 2, 3, 4, 5])[0]), 6))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = out.stdout.strip().splitlines()
    assert first.split()[0] == "[]" and first.split()[-1] == second, out.stdout


def _module_level_imports(path: Path, modules: dict[str, Path]) -> tuple[bool, set[str]]:
    """(whether ``path`` imports pandas in its module body, the reviewbert modules it
    imports there), relative imports resolved as :func:`_imports` does."""
    body = [n for n in ast.parse(path.read_text(encoding="utf-8")).body
            if isinstance(n, (ast.Import, ast.ImportFrom))]
    pandas = any(isinstance(n, ast.Import) and any(a.name == "pandas" for a in n.names)
                 for n in body)
    return pandas, _imports(path, modules, nodes=body)


def _plotly_uses(tree: ast.AST):
    """Nodes that build or draw a Plotly figure: an import of plotly (or of optuna's
    figures) and a call of ``plotly_chart``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(
                a.name.split(".")[0] == "plotly" or a.name.startswith("optuna.visualization")
                for a in node.names):
            yield node
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "plotly":
            yield node
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("optuna.visualization"):
            yield node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "plotly_chart":
            yield node


def test_every_module_that_builds_plotly_figures_imports_pandas_first():
    """Plotly peeks at ``sys.modules["pandas"]`` without importing it. The model's loading
    thread may be importing pandas at that moment (a half-initialised module: the Inside
    BERT page once failed with "'pandas' has no attribute 'Series'"), so a module that
    imports plotly or calls ``plotly_chart`` must have pandas whole first: an ``import
    pandas`` in its module body (or in a reviewbert module it imports there), or one
    earlier in the same function. A real import waits for another thread's."""
    modules = _modules()
    files = dict(modules)
    files.update({f"pages.{p.stem}": p for p in (ROOT / "pages").glob("*.py")})
    memo: dict[str, bool] = {}

    def has_pandas(name: str, seen=()) -> bool:
        if name not in memo:
            direct, mods = _module_level_imports(files[name], modules)
            memo[name] = direct or any(has_pandas(m, (*seen, name)) for m in mods
                                       if m not in seen)
        return memo[name]

    bad = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        uses = list(_plotly_uses(tree))
        if not uses or has_pandas(name):
            continue
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for use in uses:
            inner = [f for f in funcs if f.lineno <= use.lineno <= f.end_lineno]
            ok = any(isinstance(n, ast.Import) and any(a.name == "pandas" for a in n.names)
                     and n.lineno < use.lineno for f in inner for n in ast.walk(f))
            if not ok:
                bad.append(f"{path.relative_to(ROOT)}:{use.lineno}")
    assert not bad, f"Plotly used without pandas imported first: {bad}"
    assert memo, "no module builds a Plotly figure: the test reads nothing"


ROOT_MODULES = {"__init__", "__main__", "config", "errors", "fsio", "progress"}
"""What everything shares; anything else lives in the package named for what it is."""


def test_the_root_holds_only_what_everything_shares():
    root = {p.stem for p in PKG.glob("*.py")}
    assert root == ROOT_MODULES, f"move {sorted(root - ROOT_MODULES)} into a package"
    packages = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert {"model", "data", "training", "explain", "whatif", "heads", "anatomy", "analysis",
            "viz", "store", "server", "cli", "ui"} <= packages, packages
