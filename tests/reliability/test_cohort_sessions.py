"""Twenty people tag reviews on the Cohorts page at the same moment, and no tag is lost.

The failing-cohorts issue asks that a team triage one split at once through the shared
store. Here 20 real Streamlit websocket sessions (bench/st_session.py's StSession: the
protocol a browser speaks) on one server open the Cohorts page on the same checkpoint,
released together by a barrier. Each, under its own name:

1. tags the whole split (the tree's root, the cohort the page opens first) with its own
   tag through "Tag 120 reviews", its name typed in the same run;
2. opens the Triage tab and saves K reviews with "Save and next", each with a tag of its
   own added to what the form shows (as a person adds one in the multiselect).

The sessions start on the same queue, so they save the same reviews at the same moments.
Asserted: no run drew an exception or an error alert; every action was acknowledged (the
page's "Tagged 120 reviews" and "Saved, tagged …" flashes) and each save brought up
another review; and the store afterwards holds every acknowledged tag on its reviews
under its author, no tag that was not acknowledged, and the reviewed mark on every review
saved. The server serves the hand-weighted trigger model (tests/trigger_model.py) on a toy
file whose predictions and properties were cached beforehand (``reviewbert cohorts``), so
the store's concurrent writes are what is tested. Each action's latency goes to
artifacts/load/cohort_sessions.json, never asserted.
"""
from __future__ import annotations

import json
import statistics
import sys
import threading

import pandas as pd
import pytest
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState

from browser_support import ROOT, StreamlitServer, write_meta, write_reviews
from toyreviews import cli, quiet_env, toy_rows
from trigger_model import make_trigger_model

sys.path.insert(0, str(ROOT / "bench"))

from st_session import StSession, all_at_once  # noqa: E402

ART = ROOT / "artifacts" / "load"
SESSIONS, K = 20, 3
SPLIT = 120                             # the checkpoint's test split: 24 reviews a rating
COHORTS_URL_PATH = "cohorts"            # st.Page's url_path of pages/cohorts.py
AUTHOR = "Your name (recorded with every tag, note and relabel)"
RUN_TIMEOUT_S = 240.0                   # one run, 20 sessions queued on two cores


def author(session: int) -> str:
    return f"Reviewer {session:02d} — ‘Ωmega’"


def cohort_tag(session: int) -> str:
    return f"split-s{session:02d}"


def review_tag(session: int, k: int) -> str:
    return f"s{session:02d}-k{k}"


def cohort_env(root) -> dict:
    return {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "OMP_NUM_THREADS": "1",
            "REVIEWBERT_UPLOADS_DIR": str(root / "uploads"),
            "REVIEWBERT_CACHE": str(root / "cache"),
            "REVIEWBERT_DB": f"sqlite:///{root / 'store.db'}"}


def cohort_checkpoint(root, env: dict):
    """The trigger model on a toy file (its test split: SPLIT reviews), its predictions and
    properties cached by ``reviewbert cohorts`` as the page reads them; the split's
    properties table (one row a review, with its store key)."""
    data = write_reviews(root / "data" / "toy.jsonl", toy_rows(700))
    ckpt = write_meta(make_trigger_model(root / "ckpts" / "trig"), 5, data_file=data,
                      max_length=64, max_per_class=SPLIT)
    done = cli("cohorts", "--checkpoint", ckpt, env=quiet_env(**env))
    assert done.returncode == 0, done.stderr[-2000:]
    (table,) = [pd.read_parquet(p) for p in (ckpt / ".analysis").glob("*/properties.parquet")]
    assert len(table) == SPLIT
    return table


@pytest.fixture
def server(tmp_path):
    env = cohort_env(tmp_path)
    table = cohort_checkpoint(tmp_path, env)
    with StreamlitServer(env, tmp_path / "streamlit.log") as srv:
        srv.db_url, srv.table = env["REVIEWBERT_DB"], table
        yield srv


class TabsSeen:
    """The session's websocket, noting the id of the page's st.tabs block (a block is no
    element, so StSession keeps none): a tab is opened by sending its label for that id."""

    def __init__(self, ws):
        self.ws, self.tabs_id = ws, None

    def recv(self, timeout=None):
        raw = self.ws.recv(timeout=timeout)
        fm = ForwardMsg()
        fm.ParseFromString(raw)
        if fm.WhichOneof("type") == "delta" and fm.delta.WhichOneof("type") == "add_block" \
                and fm.delta.add_block.WhichOneof("type") == "tab_container":
            self.tabs_id = fm.delta.add_block.id
        return raw

    def __getattr__(self, name):
        return getattr(self.ws, name)


def _widget(run, kind: str, label: str):
    w = run.find(kind, label)
    if w is None:
        raise AssertionError(f"no {kind} {label!r} on the page; errors: {run.errors}")
    return w


def _button(run, starts: str):
    for e in run.elements:
        if e.WhichOneof("type") == "button" and e.button.label.startswith(starts):
            return e.button
    raise AssertionError(f"no button {starts}…; errors: {run.errors}")


def open_cohorts(s: StSession):
    s.ws = TabsSeen(s.ws)
    return s.open_page(COHORTS_URL_PATH)


def tag_split(s: StSession, who: str, tag: str):
    """The name typed, the tag typed into the cohort's tag box (a new option), "Tag N
    reviews" pressed: one run, as a browser sends them after the name box loses focus."""
    name = _widget(s.last, "text_input", AUTHOR)
    box = _widget(s.last, "selectbox", "Tag every review of the cohort")
    button = _button(s.last, "Tag ")
    return s.rerun([WidgetState(id=name.id, string_value=who),
                    WidgetState(id=box.id, string_value=tag),
                    WidgetState(id=button.id, trigger_value=True)])


def open_tab(s: StSession, label: str):
    assert s.ws.tabs_id, "the page drew no tabs"
    return s.rerun([WidgetState(id=s.ws.tabs_id, string_value=label)])


def shown_review(run) -> str:
    texts = run.texts("text")
    assert texts, f"no review shown; errors: {run.errors}"
    return texts[0]


def save_review(s: StSession, tag: str, note: str | None = None, stars: int | None = None):
    """The form as drawn, ``tag`` added to its tags (and the note written, the stars moved,
    when given), "Save and next" pressed: one rerun with the form's values and its submit
    trigger, as a browser submits a form."""
    tags = _widget(s.last, "multiselect", "Tags")
    save = _widget(s.last, "button", "Save and next")
    values = WidgetState(id=tags.id)
    values.string_array_value.data.extend([*(tags.options[i] for i in tags.default), tag])
    states = [values]
    if note is not None:
        states.append(WidgetState(id=_widget(s.last, "text_area", "Note").id, string_value=note))
    if stars is not None:
        rating = WidgetState(id=_widget(s.last, "slider", "Its true rating").id)
        rating.string_array_value.data.append(str(stars))
        states.append(rating)
    return s.rerun([*states, WidgetState(id=save.id, trigger_value=True)])


def alerts(run, starts: str) -> list[str]:
    return [body for body in run.texts("alert") if body.startswith(starts)]


def reviewer(url: str, session: int, barrier: threading.Barrier, out: dict) -> None:
    """One browser tab: open the page, wait for the others, tag the split, then save K
    reviews of the queue. Anything that goes wrong is recorded in ``out``."""
    from reviewbert.cohorts.keys import review_key
    rec = out[session] = {"runs": [], "actions": [], "error": None}
    try:
        with StSession(url, timeout=RUN_TIMEOUT_S) as s:
            rec["runs"].append(open_cohorts(s))
            barrier.wait(RUN_TIMEOUT_S)
            run = tag_split(s, author(session), cohort_tag(session))
            rec["runs"].append(run)
            rec["actions"].append({"kind": "split", "tag": cohort_tag(session), "key": None,
                                   "ack": alerts(run, "Tagged"), "ms": round(run.seconds * 1000, 1)})
            rec["runs"].append(open_tab(s, "Triage"))
            for k in range(K):
                key = review_key(shown_review(s.last))
                run = save_review(s, review_tag(session, k))
                rec["runs"].append(run)
                rec["actions"].append({"kind": "save", "tag": review_tag(session, k), "key": key,
                                       "next": review_key(shown_review(run)),
                                       "ack": alerts(run, "Saved"), "ms": round(run.seconds * 1000, 1)})
    except Exception as e:          # noqa: BLE001 - reported by the test, with the session
        rec["error"] = f"{type(e).__name__}: {e}"
        barrier.abort()             # the others must not wait for a session that is gone


def run_team(url: str) -> tuple[dict, float]:
    """All SESSIONS reviewers at once; ({session: its record}, wall seconds of the actions)."""
    return all_at_once(reviewer, url, SESSIONS, RUN_TIMEOUT_S, RUN_TIMEOUT_S * (K + 3))


def record_latencies(actions: list[dict], wall_s: float) -> None:
    ms = sorted(x["ms"] for x in actions)
    summary = {"sessions": SESSIONS, "saves_per_session": K, "actions": len(ms),
               "wall_s": round(wall_s, 2), "median_ms": statistics.median(ms),
               "p95_ms": ms[int(0.95 * (len(ms) - 1))], "max_ms": ms[-1], "detail": actions}
    ART.mkdir(parents=True, exist_ok=True)
    (ART / "cohort_sessions.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def acknowledged(out: dict) -> tuple[list, list]:
    """(split tags, review saves) of every session, each checked for its acknowledgement."""
    splits = [(i, x) for i in range(SESSIONS) for x in out[i]["actions"] if x["kind"] == "split"]
    saves = [(i, x) for i in range(SESSIONS) for x in out[i]["actions"] if x["kind"] == "save"]
    assert len(splits) == SESSIONS and len(saves) == SESSIONS * K
    want = {i: [f"Tagged {SPLIT} reviews `{cohort_tag(i)}` (0 had it already)."] for i in range(SESSIONS)}
    assert {i: x["ack"] for i, x in splits} == want
    unsaid = [(i, x["tag"], x["ack"]) for i, x in saves
              if len(x["ack"]) != 1 or f"`{x['tag']}`" not in x["ack"][0]]
    assert unsaid == [], unsaid[:5]
    # "next": each save brought another review up, and no session saw one twice
    assert [(i, x["tag"]) for i, x in saves if x["next"] == x["key"]] == []
    assert all(len({x["key"] for x in out[i]["actions"] if x["kind"] == "save"}) == K
               for i in range(SESSIONS))
    return splits, saves


def test_twenty_sessions_tagging_at_once_lose_no_tag(server):
    from reviewbert.store import db

    out, wall_s = run_team(server.url)
    failed = {i: rec["error"] for i, rec in out.items() if rec["error"]}
    assert failed == {}, failed
    record_latencies([{k: v for k, v in x.items()} for i in range(SESSIONS)
                      for x in out[i]["actions"]], wall_s)
    problems = [(i, e) for i in range(SESSIONS) for run in out[i]["runs"] for e in run.errors]
    assert problems == [], problems[:10]
    assert all(run.status == 0 for i in range(SESSIONS) for run in out[i]["runs"])
    splits, saves = acknowledged(out)

    keys = server.table["key"].tolist()
    store = db.open_store(server.db_url)
    try:
        records = {(t.review_key, t.tag): t.author for t in store.tag_records()}
        reviewed = store.reviewed()
    finally:
        store.engine.dispose()
    # every review of the split carries every session's split tag, under its author
    want = {(k, cohort_tag(i)): author(i) for i in range(SESSIONS) for k in keys}
    # and each saved review the tag its session added, under its author: nothing else
    want.update({(x["key"], x["tag"]): author(i) for i, x in saves})
    assert len(want) == SESSIONS * SPLIT + SESSIONS * K
    missing = {k: v for k, v in want.items() if records.get(k) != v}
    assert missing == {}, f"{len(missing)} acknowledged tags lost or misattributed: " \
                          f"{list(missing.items())[:5]}"
    assert set(records) == set(want), sorted(set(records) - set(want))[:5]
    assert {x["key"] for _, x in saves} <= set(reviewed)
    assert "Traceback" not in server.log.read_text(encoding="utf-8", errors="replace")


def test_a_save_keeps_what_others_wrote_after_its_form_was_drawn(server):
    """Two reviewers on the same head of the queue, a third tagging the whole split once
    both forms are drawn. The first saves a tag, a note and a relabel; the second, whose
    form still shows the review (another session has marked it reviewed: it is no longer
    the queue's head), saves only a tag. Both saves land and are acknowledged, and neither
    removes what the others wrote: the review keeps the three tags, the first's note and
    relabel. (The page once diffed a form against the store's tags at save time, removing
    a tag stored since the form was drawn, dropped the second save without a word, and
    wrote the untouched note and stars over the first's.)"""
    from reviewbert.cohorts.keys import review_key
    from reviewbert.store import db
    with StSession(server.url, timeout=RUN_TIMEOUT_S) as a, \
            StSession(server.url, timeout=RUN_TIMEOUT_S) as b, \
            StSession(server.url, timeout=RUN_TIMEOUT_S) as c:
        for s in (a, b, c):
            open_cohorts(s)
        for s in (a, b):
            open_tab(s, "Triage")
        key = review_key(shown_review(a.last))
        assert review_key(shown_review(b.last)) == key
        true = int(server.table.set_index("key").loc[key, "true_stars"])
        assert alerts(tag_split(c, "C", "by-c"), "Tagged")
        said = alerts(save_review(a, "by-a", "A's note", true % 5 + 1), "Saved")
        assert len(said) == 1 and "`by-a`" in said[0], said
        run = save_review(b, "by-b")
        said = alerts(run, "Saved")
        assert len(said) == 1 and "`by-b`" in said[0], (said, run.errors)
        assert review_key(shown_review(run)) != key
    store = db.open_store(server.db_url)
    try:
        assert store.tags([key]) == {key: ["by-a", "by-b", "by-c"]}
        assert store.note(key) == "A's note"
        assert (store.relabels([key])[key].stars, store.relabels([key])[key].author) == \
            (true % 5 + 1, "")
    finally:
        store.engine.dispose()
