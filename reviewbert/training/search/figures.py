"""A search's dashboard: Optuna's own Plotly figures of its study, in the app's theme.

    study = figures.load_study("checkpoints/lr-grid")
    imp = figures.importances(study)       # fANOVA, with how many trials it rests on
    figs = figures.dashboard(study, imp)    # name -> plotly Figure

The figures are ``optuna.visualization``'s (optimisation history, parallel
coordinates, parameter importances, contour and slice of the two most important
parameters, intermediate values); this module only chooses what they show, marks
the pruned trials, and dresses them in the theme of ``.streamlit/config.toml``, so
the page, the PNG and the HTML export look the same. No Streamlit here.

Importances are fANOVA's (``FanovaImportanceEvaluator``, a random forest over the
finished trials' parameters and values; a fixed seed, so a page refresh does not
reorder them). Optuna made fANOVA its default in 3.x; Optuna 5 defaults to
PED-ANOVA, so the evaluator is named here. With few trials a forest can rank noise:
below ``trusted_minimum(n_params)`` finished trials the page says so.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pandas  # noqa: F401 - whole before plotly peeks at it (reviewbert/server/model_loading.py)
import plotly.graph_objects as go

from reviewbert.fsio import read_json
from reviewbert.training.runs import SEARCH_FILE
from reviewbert.training.search.folders import storage_url
from reviewbert.training.search.spec import SearchSpec
from reviewbert.training.search.study import open_storage, storage_errors

FIGURES = ("history", "importances", "parallel", "contour", "slice", "intermediate")
TITLES = {"history": "Optimisation history", "importances": "Parameter importances (fANOVA)",
          "parallel": "Parallel coordinates", "contour": "Contour of the two most important",
          "slice": "Slice of the two most important", "intermediate": "Validation per epoch"}
CLICKABLE = ("history", "intermediate")  # figures whose points name one trial
TRUST_MIN = 10            # finished trials below which fANOVA's ranking is a guess
TRUST_PER_PARAM = 5       # ... and at least this many per searched parameter
FANOVA_SEED = 0
THEME_FILE = Path(__file__).resolve().parents[3] / ".streamlit" / "config.toml"
PRUNED_COLOR = "#d9822b"


# ------------------------------------------------------------------------ study
def load_study(search_dir):
    """The Optuna study of a search folder (its search.json names storage and study)."""
    import optuna
    record = read_json(Path(search_dir) / SEARCH_FILE)
    if not record:
        raise ValueError(f"{search_dir} is not a search folder (no {SEARCH_FILE})")
    url = storage_url(SearchSpec.from_dict(record), search_dir)
    with storage_errors(url):
        return optuna.load_study(study_name=record["study"], storage=open_storage(url))


def study_signature(study) -> tuple:
    """Changes whenever a figure would: trial states, values and reported epochs."""
    return tuple((t.number, t.state.name, t.value, len(t.intermediate_values))
                 for t in study.get_trials(deepcopy=False))


def _complete(study) -> list:
    from optuna.trial import TrialState
    return study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))


def varied_params(study) -> list[str]:
    """Searched parameters that took more than one value among the finished trials."""
    seen: dict[str, set] = {}
    for t in _complete(study):
        for name, value in t.params.items():
            seen.setdefault(name, set()).add(repr(value))
    return [name for name, values in seen.items() if len(values) > 1]


def trusted_minimum(n_params: int) -> int:
    return max(TRUST_MIN, TRUST_PER_PARAM * n_params)


@dataclass
class Importances:
    """fANOVA importances (sum 1, most important first) and what they rest on."""
    values: dict[str, float] = field(default_factory=dict)
    n_trials: int = 0          # finished (COMPLETE) trials the forest was fitted to
    note: str = ""             # why not to trust them ("" when there are enough trials)

    @property
    def top(self) -> list[str]:
        return list(self.values)[:2]


def importances(study) -> Importances:
    """fANOVA over the finished trials' varied parameters; a note when they are too few."""
    import optuna
    n, params = len(_complete(study)), varied_params(study)
    if n < 2 or not params:
        return Importances({}, n, f"{n} finished trial(s) and no parameter that varied among "
                                  "them: nothing to rank yet")
    try:
        values = optuna.importance.get_param_importances(
            study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=FANOVA_SEED),
            params=params)
    except RuntimeError:  # "zero total variance": every finished trial scored the same
        return Importances({}, n, f"all {n} finished trials have the same value: no "
                                  "parameter explains a difference")
    need = trusted_minimum(len(params))
    note = "" if n >= need else (
        f"only {n} finished trials for {len(params)} parameter(s): fANOVA's random forest "
        f"can rank noise this early; trust the order from about {need} trials on")
    return Importances(dict(values), n, note)


# ---------------------------------------------------------------------- figures
def dashboard(study, imp: Importances | None = None, theme: dict | None = None) -> dict:
    """name -> themed figure, for every name in FIGURES (a placeholder where a figure
    has nothing to show yet, saying why)."""
    import optuna.visualization as vis
    imp = imp or importances(study)
    theme = theme or app_theme()
    n_done = len(_complete(study))
    top = imp.top or varied_params(study)[:2]
    builders = {
        "history": lambda: vis.plot_optimization_history(study),
        "importances": lambda: _importance_figure(study, imp),
        "parallel": lambda: vis.plot_parallel_coordinate(study, params=varied_params(study)),
        "contour": lambda: (vis.plot_contour(study, params=top) if len(top) == 2 else
                            _empty("a contour needs two parameters that varied")),
        "slice": lambda: vis.plot_slice(study, params=top),
        "intermediate": lambda: mark_pruned(vis.plot_intermediate_values(study), study),
    }
    figs = {}
    for name in FIGURES:
        needs_done = name not in ("intermediate",) and n_done == 0
        fig = _empty("no finished trial yet") if needs_done else builders[name]()
        fig.update_layout(title=_title(name, imp, top))
        figs[name] = apply_theme(fig, theme)
    return figs


def _title(name: str, imp: Importances, top: list[str]) -> str:
    if name == "importances":
        return f"{TITLES[name]}, {imp.n_trials} finished trials"
    if name in ("contour", "slice") and top:
        return f"{TITLES[name].rsplit(' of ', 1)[0]}: {' × '.join(top)}"
    return TITLES[name]


def _importance_figure(study, imp: Importances) -> go.Figure:
    import optuna
    import optuna.visualization as vis
    if not imp.values:
        return _empty(imp.note)
    fig = vis.plot_param_importances(
        study, evaluator=optuna.importance.FanovaImportanceEvaluator(seed=FANOVA_SEED),
        params=list(imp.values))
    if imp.note:
        fig.add_annotation(text="⚠ too few trials to trust", showarrow=False, xref="paper",
                           yref="paper", x=1, y=0, xanchor="right", yanchor="bottom",
                           font=dict(color=PRUNED_COLOR))
    return fig


def mark_pruned(fig: go.Figure, study) -> go.Figure:
    """Optuna draws every trial's curve alike: pruned ones become dotted, end in a ✕ and
    say so in their name and hover."""
    from optuna.trial import TrialState
    pruned = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.PRUNED,))}
    for trace in fig.data:
        number = trial_number(trace.name)
        is_pruned = number in pruned
        label = f"trial {number}" + (" (pruned)" if is_pruned else "")
        trace.update(hovertemplate=f"{label}<br>epoch %{{x}}: %{{y:.4f}}<extra></extra>",
                     showlegend=False)
        if is_pruned:
            n = len(trace.x or ())
            trace.update(line=dict(dash="dot", color=PRUNED_COLOR),
                         marker=dict(symbol=["circle"] * (n - 1) + ["x"], size=[6] * (n - 1) + [13],
                                     color=PRUNED_COLOR, maxdisplayed=0))
    if pruned:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines+markers", name="pruned",
                                 line=dict(dash="dot", color=PRUNED_COLOR),
                                 marker=dict(symbol="x", color=PRUNED_COLOR)))
    fig.update_layout(showlegend=bool(pruned), xaxis_title="epoch",
                      yaxis_title="validation objective")
    return fig


def trial_number(name) -> int | None:
    """The trial a trace of Optuna's intermediate-values plot draws ("Trial12" -> 12)."""
    text = str(name or "")
    return int(text[5:]) if text.startswith("Trial") and text[5:].isdigit() else None


def clicked_trials(name: str, fig: go.Figure, points: list[dict]) -> list[int]:
    """Trial numbers of clicked points: the history's x is the trial number; an
    intermediate-values curve is named after its trial."""
    out = []
    for p in points or []:
        if name == "history":
            x = p.get("x")
            number = int(x) if isinstance(x, (int, float)) and math.isfinite(x) else None
        elif name == "intermediate" and p.get("curve_number") is not None:
            number = trial_number(fig.data[int(p["curve_number"])].name)
        else:
            number = None
        if number is not None and number not in out:
            out.append(number)
    return out


def _empty(why: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=why, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


# ------------------------------------------------------------------------- theme
def app_theme(path: Path = THEME_FILE) -> dict:
    """The app's [theme] (primaryColor, backgroundColor, secondaryBackgroundColor,
    textColor, font) from .streamlit/config.toml, with Streamlit's light defaults."""
    theme = {"primaryColor": "#ff4b4b", "backgroundColor": "#ffffff",
             "secondaryBackgroundColor": "#f0f2f6", "textColor": "#31333f", "font": "sans serif"}
    try:
        theme.update(tomllib.loads(path.read_text(encoding="utf-8")).get("theme", {}))
    except (OSError, tomllib.TOMLDecodeError):
        pass
    return theme


FONTS = {"sans serif": "Source Sans Pro, Helvetica, Arial, sans-serif",
         "serif": "Source Serif Pro, Georgia, serif", "monospace": "Source Code Pro, monospace"}


def apply_theme(fig: go.Figure, theme: dict) -> go.Figure:
    """Background, text, font, grid and the first trace colour from the app's theme;
    Optuna's continuous scales run from the secondary background to the primary colour."""
    text, primary = theme.get("textColor"), theme.get("primaryColor")
    grid = theme.get("secondaryBackgroundColor")
    fig.update_layout(template="plotly_white", paper_bgcolor=theme.get("backgroundColor"),
                      plot_bgcolor=theme.get("backgroundColor"),
                      font=dict(family=FONTS.get(theme.get("font"), theme.get("font")), color=text),
                      colorway=[primary, "#7c3aed", "#0f9d58", PRUNED_COLOR, "#db2777", "#0891b2"],
                      margin=dict(l=60, r=20, t=50, b=50), height=380)
    fig.update_xaxes(gridcolor=grid, zerolinecolor=grid)
    fig.update_yaxes(gridcolor=grid, zerolinecolor=grid)
    scale = [[0.0, grid], [1.0, primary]]
    for trace in fig.data:
        if trace.type == "parcoords" and trace.line.colorscale is not None:
            trace.line.colorscale = scale
        elif trace.type == "contour":
            trace.colorscale = scale
        elif trace.type == "scatter" and trace.marker.colorscale is not None:
            trace.marker.colorscale = scale
        elif trace.type == "bar":
            trace.marker.color = primary
    return fig


# ------------------------------------------------------------------------ export
def figure_html(fig: go.Figure) -> str:
    """A standalone page with plotly.js inside: opens offline, no CDN."""
    return fig.to_html(include_plotlyjs=True, full_html=True)
