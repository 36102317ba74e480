"""The first second: from `make run` to a page you can type into, and from a click on
Predict to a fully drawn page, in headless Chromium, as a new user meets it.

    .venv/bin/python bench/first_second.py [--runs 3] [--baseline REV]

Each run starts a fresh server as ``make run`` does (browser_support.server_command: the
app's launcher, or ``streamlit run app.py`` in a baseline older than it; the shipped demo
checkpoint)
beside a Chromium that is already running (Debian's; every request off localhost
blocked), opens the Predict page and measures, from the moment the server process is
started:

- ``ready_s``: until the "Review text" box can be typed into;
- ``loaded_s``: until the sidebar says the model is loaded (it loads in the background
  while the page is drawn; in a baseline that loaded it before drawing, ``ready_s``);
- ``first_predict_s``: the first click on Predict (a short review), made once the model is
  loaded, until every view is drawn: the process's first prediction;
- ``early_click_s``: in another fresh start per run, Predict clicked the moment the page is
  ready (the model still loading): click until drawn, and ``early_click_drawn_s`` from
  the server's start;
- ``predict_256_s``: a click on Predict with a 256-token review (after a short one) until
  every view shows it, and ``predict_256_repeat_s`` after another 256-token review;
- ``ws_bytes_256``: the websocket bytes the browser received for that 256-token prediction;
- ``server_cpu_ms_256``: the server process's CPU time (all threads) per Predict run of a
  256-token review: the mean over that click, the next one and one more per CPU_REVIEWS (each a
  new review; the counter moves in 10 ms ticks, and one run varies by +-15 %: with two
  clicks a start, the baseline's figure moved 505-720 ms from start to start);
- ``server_cpu_ms_typed_256``: the same per review typed into the box, then predicted,
  over the CPU_REVIEWS clicks: the rerun that leaving the box causes, then the Predict run
  (before 2026-11-28 that first rerun was the whole page's; the box and Predict are a
  form now, and leaving the box sends nothing);
- ``browser_cpu_ms_256``: the same for the browser (every Chromium process of this run: the
  page, its GPU and network processes), from the click until 0.5 s after it drew. On two
  cores the browser's work decides the click's time as much as the server's, and this
  figure moves far less from run to run than the wall-clock one;
- ``server_idle_cpu_ms_per_s``: the server's CPU time a second over the 3 s after those
  clicks, the session still open and nothing asked of it (its watchers and threads at rest).

The current tree's server starts exactly as ``make run`` starts it, with the tree's own
``.streamlit/config.toml``. A baseline runs with ``--server.fileWatcherType none``, as
every run of this bench did before 2026-11-27 (that config then left Streamlit's watcher
on, and under ``make run`` it burned a core: see the config's comment).

"Drawn" is what tests/browser/test_browser.py waits for (browser_support.wait_drawn): the
open attention view shows the new review, and (since 2026-11-28, stop 45) the prediction
card's stars are there: on the page's first prediction they used to come up to 0.5 s after
the view, HTML in Markdown waiting for its code. Since 2026-11-28 the four views are tabs and
only the open one is built, the highlighted review first: it ends with the text's last
word. A baseline older than that drew all four one under the other, and its click is
drawn when the highlighted review ends with the last word and three attention charts and
the head view hold the first. For the current tree, ``open_view_256_s:VIEW`` is the time
from a click on each other view's tab until it shows the last review (no forward pass),
and ``predict_256_s:VIEW`` a 256-token click with that view open.
Medians over ``--runs`` fresh starts. ``--baseline REV`` measures the same in a checkout of
that revision (a temporary git worktree, same virtualenv) in the same run, alternating,
for the server time's ratio. Run it alone on the machine: the figures are wall-clock.
The last stdout line is one JSON object with the figures, ``targets``, ``checks``, ``met``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

TARGETS = {"ready_s": 4.0, "first_predict_s": 1.5, "predict_256_s": 1.0,  # seconds
           "ws_bytes_256": 200_000, "server_cpu_ratio_vs_baseline": 3.0,
           "server_idle_cpu_ms_per_s": 50}
# a baseline tree runs as every earlier run of this bench (and bench/load.py) did: before
# 2026-11-27 our config left Streamlit's file watcher on (see .streamlit/config.toml)
BASELINE_FLAGS = ("--server.fileWatcherType", "none")
CPU_REVIEWS = (("excellent", "worthless"), ("sadly", "delighted"), ("frankly", "disappointing"),
               ("initially", "satisfied"))     # first and last words of the CPU-only clicks
SHORT = "Battery died after two days and support never answered. Poor quality."
VIEW_REVIEWS = (("truly", "recommendable"), ("notably", "regrettable"),
                ("perhaps", "unremarkable"))   # the 256-token clicks with another view open
# Each first word is one wordpiece that the reviews' shared body (long_review) lacks in its
# first 256 tokens: a chart or head view still showing the previous review cannot hold it.


def log(msg: str) -> None:
    print(f"[first-second] {msg}", file=sys.stderr, flush=True)


def long_review(first: str, last: str) -> str:
    lines = (ROOT / "reviewbert" / "assets" / "examples.jsonl").read_text().splitlines()
    return f"{first} " + " ".join(json.loads(x)["text"] for x in lines) + f" {last}"


def server_cpu_ms(pid: int) -> float:
    import psutil
    t = psutil.Process(pid).cpu_times()
    return 1000 * (t.user + t.system)


def browser_cpu_ms() -> float:
    """CPU milliseconds of every Chromium process started from this process (Playwright's
    driver is our child, the browser its), processes gone meanwhile not counted."""
    import psutil
    total = 0.0
    for p in psutil.Process().children(recursive=True):
        try:
            if "chrom" in p.name().lower():
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            continue
    return 1000 * total


def predict(page, text: str, need, first: str | None = None, timeout=120_000, before=None,
            settle_ms: int = 600, before_typing=None) -> float:
    """Type ``text``, then click Predict: seconds until it is drawn in the views ``need``
    (browser_support.VIEW_NEEDS). ``before()`` runs just before the click (after the rerun
    that typing causes), ``before_typing()`` before the text is typed, to take counters."""
    from browser_support import wait_drawn
    if before_typing is not None:
        before_typing()
    page.locator("textarea").fill(text)
    page.locator("textarea").blur()
    if settle_ms:
        page.wait_for_timeout(settle_ms)
    if before is not None:
        before()
    t0 = time.perf_counter()
    page.get_by_role("button", name="Predict").click()
    wait_drawn(page, text, need, first, timeout)
    return time.perf_counter() - t0


def views_of(tree: Path) -> dict:
    """What a click must draw in ``tree``: the open attention view (the highlighted
    review, first of the tabs) since 2026-11-28, all four views one under the other before."""
    from browser_support import ALL_VIEWS, VIEW_NEEDS
    ui = tree / "reviewbert" / "ui"
    tabs = [ui / "prediction_card.py", ui / "prediction.py"]    # the name before and after 6f9e9aa
    if any(t.exists() and "ATTENTION_VIEWS" in t.read_text() for t in tabs):
        return VIEW_NEEDS["Highlighted review"]
    return ALL_VIEWS


LOADED = """() => {
    const s = document.querySelector("section[data-testid='stSidebar']");
    return s && s.innerText.includes('Device:') && !s.innerText.includes('loading the model');
}"""


def one_run(tree: Path, ckpts: Path, profile: Path, port: int, early: bool = False,
            flags: tuple = ()) -> dict:
    """A fresh server from ``tree``, one browser session: the figures of one start. With
    ``early``, only the click at ready (``early_click_s``, ``early_click_drawn_s``)."""
    from playwright.sync_api import sync_playwright

    from browser_support import offline_context, server_command
    env = {**os.environ, "REVIEWBERT_CHECKPOINTS": str(ckpts)}
    with sync_playwright() as p:
        # The browser is running before the server starts, as a user's is: its own launch
        # (1.1-1.4 s here) is not the app's start-up. Before 2026-11-27 it was started
        # after the server, and that part of its launch which outlasted the server's
        # (0.3-0.5 s) was counted in ready_s.
        ctx, blocked = offline_context(p, profile)
        page = ctx.new_page()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            server_command(tree, port, flags), cwd=tree, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return _measure(page, blocked, proc, port, t0, early, views_of(tree))
        finally:
            ctx.close()
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def _measure(page, blocked, proc, port: int, t0: float, early: bool, need: dict) -> dict:
    """The figures of one start, ``t0`` being the server's start; a click is drawn when
    the views ``need`` show its review."""
    from browser_support import ALL_VIEWS, VIEW_NEEDS, open_view, wait_drawn
    received = []
    page.on("websocket", lambda ws: ws.on(
        "framereceived", lambda payload: received.append(len(payload))))
    _open_when_listening(page, port, proc)
    page.get_by_text("Review text").wait_for(timeout=120_000)
    page.locator("textarea").wait_for(state="visible")
    expect_editable(page)
    out = {"ready_s": time.perf_counter() - t0}
    if early:
        out = {"early_click_s": predict(page, SHORT, need, settle_ms=0),
               "early_click_drawn_s": time.perf_counter() - t0, "blocked": list(blocked)}
        return out
    page.wait_for_function(LOADED, timeout=120_000, polling=100)
    out["loaded_s"] = time.perf_counter() - t0
    out["first_predict_s"] = predict(page, SHORT, need)
    predict(page, SHORT.replace("Battery", "Screen"), need)
    mark = {}

    def before():
        mark.update(cpu=server_cpu_ms(proc.pid), n=len(received), bytes=sum(received),
                    browser=browser_cpu_ms())
    out["predict_256_s"] = predict(page, long_review("honestly", "recommended"), need,
                                   before=before)
    page.wait_for_timeout(500)      # the run's last messages (after the views drew)
    cpu = [server_cpu_ms(proc.pid) - mark["cpu"]]
    browser = [browser_cpu_ms() - mark["browser"]]
    out["ws_bytes_256"] = sum(received) - mark["bytes"]
    out["ws_frames_256"] = len(received) - mark["n"]
    out["predict_256_repeat_s"] = predict(page, long_review("overall", "returned"), need,
                                          before=before)
    page.wait_for_timeout(500)
    cpu.append(server_cpu_ms(proc.pid) - mark["cpu"])
    browser.append(browser_cpu_ms() - mark["browser"])
    typed = []
    for first, last in CPU_REVIEWS:     # the server's CPU only
        predict(page, long_review(first, last), need, before=before,
                before_typing=lambda: mark.update(typing=server_cpu_ms(proc.pid)))
        page.wait_for_timeout(500)
        cpu.append(server_cpu_ms(proc.pid) - mark["cpu"])
        typed.append(server_cpu_ms(proc.pid) - mark["typing"])
    out["server_cpu_ms_256"] = sum(cpu) / len(cpu)
    out["server_cpu_ms_256_each"] = [round(c) for c in cpu]
    out["server_cpu_ms_typed_256"] = sum(typed) / len(typed)
    out["browser_cpu_ms_256"] = browser[0]          # the first: new words, as a new review has
    out["browser_cpu_ms_256_repeat"] = browser[1]
    page.wait_for_timeout(1000)
    at = server_cpu_ms(proc.pid)
    page.wait_for_timeout(3000)
    out["server_idle_cpu_ms_per_s"] = (server_cpu_ms(proc.pid) - at) / 3
    if need is not ALL_VIEWS:
        # each other attention view: opened (the last review redrawn in it, no forward
        # pass), then a new 256-token review predicted with it open
        text = long_review(*CPU_REVIEWS[-1])
        for view, (first, last) in zip(list(VIEW_NEEDS)[1:], VIEW_REVIEWS):
            t = time.perf_counter()
            open_view(page, view)
            wait_drawn(page, text, view, timeout=120_000)
            out[f"open_view_256_s:{view}"] = time.perf_counter() - t
            text = long_review(first, last)
            out[f"predict_256_s:{view}"] = predict(page, text, VIEW_NEEDS[view])
    out["blocked"] = list(blocked)
    return out


def _open_when_listening(page, port: int, proc) -> None:
    """Open the page once, as soon as the server answers its health check, as a user opens
    the address ``make run`` prints once the server listens (or as Streamlit, when not
    headless, opens the browser itself: also once, when it listens). Before
    2026-11-27 this retried ``page.goto`` every 50 ms until one succeeded: 12-16 error
    pages drawn in the 1-1.5 s the server takes to listen, which took a core from the
    starting server and added ~1 s to ``ready_s`` (both trees alike)."""
    from browser_support import wait_healthy
    url = f"http://localhost:{port}"
    wait_healthy(url, proc, 120, 0.05)
    page.goto(url, timeout=60_000)


def expect_editable(page) -> None:
    page.wait_for_function("() => { const t = document.querySelector('textarea'); "
                           "return t && !t.disabled && !t.readOnly; }", timeout=120_000)


MODEL_CPU = """
import statistics, sys, time
sys.path.insert(0, ".")
import torch
from reviewbert.model.inference import Predictor
torch.set_num_threads(1)
p = Predictor.from_checkpoint("checkpoints/demo")
p.warm_up()
text = sys.stdin.read()
times = []
for _ in range(9):
    t = time.thread_time()
    p.predict(text)
    times.append(time.thread_time() - t)
print(1000 * statistics.median(times))
"""


def model_cpu_ms(tree: Path) -> float:
    """CPU milliseconds of the 256-token review's prediction alone (tokenizer, forward
    pass, softmax), one torch thread, in ``tree``'s own code: the part of a Predict run
    that is the model's, not the page's. The median of 9, after a warm-up."""
    out = subprocess.run([sys.executable, "-c", MODEL_CPU], cwd=tree, check=True, text=True,
                         input=long_review("honestly", "recommended"), capture_output=True,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    return round(float(out.stdout.strip().splitlines()[-1]), 1)


def median_of(rows: list[dict]) -> dict:
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))]
    return {k: round(statistics.median(r[k] for r in rows), 3) for k in keys}


@contextmanager
def worktree(rev: str, where: Path):
    """``rev`` checked out at ``where`` (a detached git worktree; it runs in this
    virtualenv), removed afterwards. bench/load.py's baseline uses it too."""
    subprocess.run(["git", "worktree", "add", "--detach", str(where), rev], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT,
                       capture_output=True)


def main(argv=None) -> int:
    from reviewbert.model.device import cpu_description

    from browser_support import free_port
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--baseline", metavar="REV", help="also measure this git revision")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        tmp = Path(tmp)
        ckpts = tmp / "ckpts"
        ckpts.mkdir()
        (ckpts / "demo").symlink_to(ROOT / "checkpoints" / "demo")
        trees = {"current": ROOT}
        flags = {"current": (), "baseline": BASELINE_FLAGS}
        if args.baseline:
            trees["baseline"] = stack.enter_context(worktree(args.baseline, tmp / "baseline"))
        rows: dict[str, list[dict]] = {k: [] for k in trees}
        for i in range(args.runs):
            for name, tree in trees.items():     # alternate: drifts hit both alike
                r = one_run(tree, ckpts, tmp / f"profile-{name}-{i}", free_port(),
                            flags=flags[name])
                log(f"{name} run {i + 1}: {json.dumps({k: v for k, v in r.items() if k != 'blocked'})}")
                if name == "current":       # the click while the model loads
                    e = one_run(tree, ckpts, tmp / f"profile-early-{i}", free_port(), early=True)
                    r["blocked"] = r["blocked"] + e.pop("blocked")
                    r.update(e)
                    log(f"early click {i + 1}: {r['early_click_s']:.2f} s")
                rows[name].append(r)
        # the model's share of a run, measured alone in each tree's own code
        models = {name: model_cpu_ms(tree) for name, tree in trees.items()}
        for name in models:
            log(f"{name}: the model alone {models[name]} ms CPU per 256-token prediction")
    out = {"machine": cpu_description(), "runs": args.runs, "current": median_of(rows["current"]),
           "blocked": sorted({u for r in rows["current"] for u in r["blocked"]})}
    out["current"]["model_cpu_ms_256"] = models["current"]
    out["current"]["page_cpu_ms_256"] = round(out["current"]["server_cpu_ms_256"] - models["current"], 1)
    if args.baseline:
        out["baseline"] = {"rev": args.baseline, **median_of(rows["baseline"]),
                           "model_cpu_ms_256": models["baseline"]}
        out["baseline"]["page_cpu_ms_256"] = round(
            out["baseline"]["server_cpu_ms_256"] - models["baseline"], 1)
        out["server_cpu_ratio_vs_baseline"] = round(
            out["baseline"]["server_cpu_ms_256"] / out["current"]["server_cpu_ms_256"], 2)
        # not a target: the same ratio without the model's own forward pass (which the
        # issue's 3x, set where it took 25 ms, did not ask to change)
        out["page_cpu_ratio_vs_baseline"] = round(
            out["baseline"]["page_cpu_ms_256"] / max(out["current"]["page_cpu_ms_256"], 1.0), 2)
        # not a target either: per review typed, then predicted (the rerun that leaving the
        # text box causes, then the Predict run), as a class's browsers ask it of the server
        out["typed_cpu_ratio_vs_baseline"] = round(
            out["baseline"]["server_cpu_ms_typed_256"] / out["current"]["server_cpu_ms_typed_256"], 2)
    cur = out["current"]
    out["targets"] = TARGETS
    out["checks"] = {k: cur[k] <= t for k, t in TARGETS.items() if k in cur}
    if "server_cpu_ratio_vs_baseline" in out:
        out["checks"]["server_cpu_ratio_vs_baseline"] = \
            out["server_cpu_ratio_vs_baseline"] >= TARGETS["server_cpu_ratio_vs_baseline"]
    out["checks"]["offline"] = not out["blocked"]
    out["met"] = all(out["checks"].values())
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
