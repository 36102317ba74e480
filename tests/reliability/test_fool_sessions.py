"""Twenty students send entries to Fool the model at the same moment, and none is lost.

Issue 48 asks that Fool the model work for 20 sessions at once, in classroom mode too,
and that 20 sessions writing at once lose nothing. Here 20 real Streamlit websocket
sessions (bench/st_session.py's StSession: the protocol a browser speaks) on one server
open the Fool the model page in one room, released together by a barrier, and each sends
K entries through the page's form, as a browser submits it: the review, the stars meant
and the Send trigger in one rerun. One of them has "Classroom mode" on.

Asserted: no run drew an exception or an error alert, every send was acknowledged with
its own "Entry #N is on the board", and the store afterwards holds exactly the sent
entries, each acknowledged id with the text that session sent. The server serves the
hand-weighted trigger model (tests/trigger_model.py), so predictions are cheap and the
store's concurrent writes are what is tested. Each send's latency goes to
artifacts/load/fool_sessions.json, never asserted: timings on a shared machine are noise.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import threading
from urllib.parse import quote

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from browser_support import ROOT, StreamlitServer, write_meta
from trigger_model import DOWN, UP, make_trigger_model

sys.path.insert(0, str(ROOT / "bench"))

from st_session import StSession, all_at_once  # noqa: E402

ART = ROOT / "artifacts" / "load"
SESSIONS, K = 20, 3
ROOM = "reliability class"
CLASSROOM = 0                           # the session with "Classroom mode" on
FOOL_URL_PATH = "fool"                  # st.Page's url_path of pages/fool.py
ACK = re.compile(r"Entry #(\d+) is on the board")
CLASSROOM_MARK = "font-size: 3.2rem"    # a rule only reviewbert.ui.inside_bert.CLASSROOM_CSS has
RUN_TIMEOUT_S = 240.0                   # one run, 20 sessions queued on two cores


@pytest.fixture
def server(tmp_path):
    ckpts = tmp_path / "ckpts"
    write_meta(make_trigger_model(ckpts / "trig"), 5, max_length=64)
    (tmp_path / "suites").mkdir()
    env = {"REVIEWBERT_CHECKPOINTS": str(ckpts), "OMP_NUM_THREADS": "1",
           "REVIEWBERT_UPLOADS_DIR": str(tmp_path / "uploads"),
           "REVIEWBERT_SUITES": str(tmp_path / "suites"),
           "REVIEWBERT_CACHE": str(tmp_path / "cache"),
           "REVIEWBERT_DB": f"sqlite:///{tmp_path / 'store.db'}"}
    with StreamlitServer(env, tmp_path / "streamlit.log") as srv:
        srv.db_url = env["REVIEWBERT_DB"]
        yield srv


def review(session: int, k: int) -> str:
    """A text no other send has; the trigger words make some entries fool the model."""
    verdict = ("the case is fine", f"it is {UP}", f"it is {DOWN}")[(session + k) % 3]
    return f"student {session:02d}, entry {k}: {verdict}, believe me"


def model_stars(text: str) -> int:
    """What the trigger model rates ``text``: 4 stars with UP, 2 with DOWN, else 3."""
    return 4 if UP in text else 2 if DOWN in text else 3


def meant(session: int, k: int) -> tuple[int, int]:
    lo = 1 + (session + 2 * k) % 5
    return lo, min(5, lo + k % 2)


def _widget(run, kind: str, label: str):
    w = run.find(kind, label)
    if w is None:
        raise AssertionError(f"no {kind} {label!r} on the page; errors: {run.errors}")
    return w


def open_fool(s: StSession, classroom: bool) -> list:
    """The Fool page in the shared room (the teacher's ``?room=`` link), Classroom mode
    switched on if asked: the runs it took."""
    runs = [s.open_page(FOOL_URL_PATH, "room=" + quote(ROOM))]
    if classroom:
        toggle = _widget(runs[-1], "checkbox", "Classroom mode")
        runs.append(s.rerun([WidgetState(id=toggle.id, bool_value=True)]))
    return runs


def send(s: StSession, text: str, stars: tuple[int, int]):
    """Write ``text`` and the stars meant into the form and press Send: one rerun with the
    form's values and its submit trigger, as a browser submits a form."""
    box = _widget(s.last, "text_area", "Your review")
    slider = _widget(s.last, "slider", "The stars you meant")
    button = _widget(s.last, "button", "Send")
    values = WidgetState(id=slider.id)
    values.string_array_value.data.extend([str(stars[0]), str(stars[1])])
    return s.rerun([WidgetState(id=box.id, string_value=text), values,
                    WidgetState(id=button.id, trigger_value=True)])


def acknowledged(run) -> list[int]:
    return [int(m.group(1)) for body in run.texts("alert") for m in ACK.finditer(body)]


def student(url: str, session: int, barrier: threading.Barrier, out: dict) -> None:
    """One browser tab: open the page, wait for the others, send K entries back to back.
    Anything that goes wrong is recorded in ``out`` for the test to report."""
    rec = out[session] = {"runs": [], "sends": [], "error": None}
    try:
        with StSession(url, timeout=RUN_TIMEOUT_S) as s:
            rec["runs"] += open_fool(s, session == CLASSROOM)
            barrier.wait(RUN_TIMEOUT_S)
            for k in range(K):
                text, stars = review(session, k), meant(session, k)
                run = send(s, text, stars)
                rec["runs"].append(run)
                rec["sends"].append({"session": session, "k": k, "text": text,
                                     "stars": stars, "ids": acknowledged(run),
                                     "ms": round(run.seconds * 1000, 1), "run": run})
    except Exception as e:          # noqa: BLE001 - reported by the test, with the session
        rec["error"] = f"{type(e).__name__}: {e}"
        barrier.abort()             # the others must not wait for a session that is gone


def run_class(url: str) -> tuple[dict, float]:
    """All SESSIONS students at once; ({session: its record}, wall seconds of the sends)."""
    return all_at_once(student, url, SESSIONS, RUN_TIMEOUT_S, RUN_TIMEOUT_S * (K + 1))


def record_latencies(sends: list[dict], wall_s: float) -> None:
    ms = sorted(x["ms"] for x in sends)
    summary = {"sessions": SESSIONS, "entries_per_session": K, "sends": len(ms),
               "wall_s": round(wall_s, 2), "median_ms": statistics.median(ms),
               "p95_ms": ms[int(0.95 * (len(ms) - 1))], "max_ms": ms[-1],
               "sends_detail": [{k: v for k, v in x.items() if k != "run"} for x in sends]}
    ART.mkdir(parents=True, exist_ok=True)
    (ART / "fool_sessions.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def test_twenty_sessions_sending_at_once_lose_nothing(server):
    from reviewbert.store import db

    out, wall_s = run_class(server.url)
    failed = {i: rec["error"] for i, rec in out.items() if rec["error"]}
    assert failed == {}, failed
    sends = [x for i in range(SESSIONS) for x in out[i]["sends"]]
    record_latencies(sends, wall_s)

    problems = [(i, e) for i in range(SESSIONS) for run in out[i]["runs"] for e in run.errors]
    assert problems == [], problems[:10]
    assert all(run.status == 0 for i in range(SESSIONS) for run in out[i]["runs"])
    assert len(sends) == SESSIONS * K
    # each send, its own acknowledgement: exactly one id, and no id acknowledged twice
    assert [(x["session"], x["k"]) for x in sends if len(x["ids"]) != 1] == []
    ids = {x["ids"][0]: x for x in sends}
    assert len(ids) == SESSIONS * K

    store = db.open_store(server.db_url)
    try:
        stored = store.entries(ROOM)
    finally:
        store.engine.dispose()
    assert len(stored) == SESSIONS * K
    assert {e.id: e.text for e in stored} == {n: x["text"] for n, x in ids.items()}
    assert {e.id: (e.min_stars, e.max_stars) for e in stored} == \
        {n: x["stars"] for n, x in ids.items()}
    # and the model's answer stored with each is its own text's, not another session's
    assert [e.id for e in stored if (e.pred_min, e.pred_max) != (model_stars(e.text),) * 2
            or e.fooled != (not e.min_stars <= model_stars(e.text) <= e.max_stars)] == []

    # classroom mode: its page was drawn with the large type, and its sends went the same way
    def large_type(x) -> bool:
        return any(CLASSROOM_MARK in e.html.body for e in x["run"].elements
                   if e.WhichOneof("type") == "html")
    assert [large_type(x) for x in out[CLASSROOM]["sends"]] == [True] * K
    assert not any(large_type(x) for x in out[CLASSROOM + 1]["sends"])
    assert "Traceback" not in server.log.read_text(encoding="utf-8", errors="replace")
