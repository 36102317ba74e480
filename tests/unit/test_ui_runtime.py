"""The UI runtime's fence (reviewbert/ui/runtime/__init__.py), measured from the source:

- a button is never read in a page's body outside ``ui/runtime/clicks.py`` (that form
  loses the click of a run Streamlit stops for a newer one);
- pages and views reach the runtime only through its façade, and the server's machinery
  only through the runtime;
- the runtime sits below the views: it imports none of them.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "reviewbert" / "ui"
RUNTIME = UI / "runtime"
BUTTONS = {"button", "form_submit_button"}


def _ui_sources() -> list[Path]:
    """The views and pages: everything that draws, outside the runtime itself."""
    return [p for p in [*UI.rglob("*.py"), *(ROOT / "pages").glob("*.py"), ROOT / "app.py"]
            if RUNTIME not in p.parents]


def body_read_buttons(source: str) -> list[int]:
    """Lines where a ``.button(...)`` or ``.form_submit_button(...)`` call's result is used
    (assigned, tested, returned, passed on), or where such a call has no ``on_click``: a
    plain button may only run a callback."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    bad = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in BUTTONS):
            continue
        if isinstance(node.func.value, ast.Name) and node.func.value.id == "runtime":
            continue        # runtime.button: recorded in its callback, read from there
        used = not isinstance(parents.get(node), ast.Expr)
        callback = any(k.arg == "on_click" for k in node.keywords)
        if used or not callback:
            bad.append(node.lineno)
    return bad


def test_the_check_finds_a_body_read_button():
    """The scan is only as good as what it catches: each of these reads a click in the
    body, and the callback-only button does not."""
    assert body_read_buttons("if st.button('Go'):\n    run()\n") == [1]
    assert body_read_buttons("clicked = c1.button('Go', key='g')\n") == [1]
    assert body_read_buttons("go = st.form_submit_button('Go', on_click=cb)\n") == [1]
    assert body_read_buttons("st.button('Go')\n") == [1]
    assert body_read_buttons("st.button('Go', key='g', on_click=cb, args=(1,))\n") == []
    assert body_read_buttons("if runtime.button(st, 'Go', key='g'):\n    run()\n") == []


def test_no_button_is_read_in_a_pages_body_outside_the_runtime():
    offenders = [f"{p.relative_to(ROOT)}:{line}" for p in _ui_sources()
                 for line in body_read_buttons(p.read_text(encoding="utf-8"))]
    assert offenders == [], ("read a click with runtime.button / runtime.form_submit, or give "
                             f"the button an on_click and ignore its value: {offenders}")


def _reviewbert_imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names if a.name.startswith("reviewbert")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reviewbert"):
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_views_and_pages_reach_the_runtime_only_through_its_facade():
    offenders = {}
    for path in _ui_sources():
        bad = sorted(n for n in _reviewbert_imports(path)
                     if n.startswith("reviewbert.server")
                     or (n.startswith("reviewbert.ui.runtime.")))
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_the_runtime_imports_no_view():
    """Below the views: the runtime may use ``ui.state`` (the session keys) and itself."""
    offenders = {}
    for path in RUNTIME.rglob("*.py"):
        bad = sorted(n for n in _reviewbert_imports(path)
                     if n.startswith("reviewbert.ui.") and not n.startswith("reviewbert.ui.runtime")
                     and n != "reviewbert.ui.state")
        if bad:
            offenders[str(path.relative_to(ROOT))] = bad
    assert offenders == {}


def test_the_facade_names_what_the_views_use():
    """Every ``runtime.X`` a view or page calls is one of the façade's names."""
    from reviewbert.ui import runtime
    used = set()
    for path in _ui_sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id == "runtime":
                used.add(node.attr)
    assert used, "no view uses the runtime: the scan reads nothing"
    assert used <= set(runtime.__all__), sorted(used - set(runtime.__all__))
