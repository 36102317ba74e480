"""The app server SIGKILLed while a class sends "Fool the model" entries: nothing the page
acknowledged is lost, on SQLite and on PostgreSQL.

A student in a real headless Chromium sends entries one after another on the trigger
model (tests/trigger_model.py); an entry is acknowledged when the page says "Entry #N is on
the board", which it says only after the store's transaction committed. The server is
killed (SIGKILL, no clean-up) while the next entry is on its way. Reopened, the store holds
every acknowledged entry with its exact text, and a restarted server shows them on the
board. The PostgreSQL run (a throwaway server, tests/postgres_support.py) carries the
``distributed`` marker.
"""
from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from browser_support import ART, CHROMIUM, StreamlitServer, caption_with, offline_context, write_meta
from postgres_support import PostgresServer, bin_dir
from trigger_model import make_trigger_model

pytest.importorskip("playwright.sync_api")
ACK = re.compile(r"Entry #(\d+) is on the board")
ENTRIES = 6


def _env(root: Path, url: str) -> dict:
    return {"REVIEWBERT_CHECKPOINTS": str(root / "ckpts"), "OMP_NUM_THREADS": "1",
            "REVIEWBERT_SUITES": str(root / "suites"), "REVIEWBERT_CACHE": str(root / "cache"),
            "REVIEWBERT_DB": url}


def _send(page, text: str, previous: int | None) -> int:
    """Send one entry; the id the page acknowledged (a new one, not ``previous``)."""
    page.get_by_label("Your review").fill(text)
    page.get_by_role("button", name="Send").click()
    page.wait_for_function("prev => { const m = document.body.innerText.match("
                           "/Entry #(\\d+) is on the board/); return m && m[1] !== prev; }",
                           arg=str(previous), timeout=60_000)
    return int(ACK.search(page.locator("body").inner_text()).group(1))


def kill_while_sending(tmp_path, url: str):
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium missing (make browser)")
    from playwright.sync_api import sync_playwright

    from reviewbert.store import db
    write_meta(make_trigger_model(tmp_path / "ckpts" / "trig"), 5, max_length=64)
    ART.mkdir(parents=True, exist_ok=True)
    acked: dict[int, str] = {}
    srv = StreamlitServer(_env(tmp_path, url), ART / "streamlit_fool_kill.log").__enter__()
    try:
        with sync_playwright() as p:
            ctx, blocked = offline_context(p, tmp_path / "profile")
            page = ctx.new_page()
            page.goto(srv.url + "/fool?room=kill")
            page.get_by_label("Your review").wait_for(timeout=120_000)
            last = None
            for i in range(ENTRIES):
                text = f"entry {i}: it's <b>not</b> bad — 'quoted' \"twice\" 🎭"
                last = _send(page, text, last)
                acked[last] = text
            page.get_by_label("Your review").fill("sent as the server dies")
            page.get_by_role("button", name="Send").click()
            srv.proc.send_signal(signal.SIGKILL)
            srv.proc.wait(10)
            ctx.close()
            assert not blocked
    finally:
        srv.__exit__(None, None, None)
    db.close_all()
    stored = {e.id: e.text for e in db.open_store(url).entries("kill")}
    missing = {i: t for i, t in acked.items() if stored.get(i) != t}
    assert not missing, f"acknowledged entries lost or changed: {missing}"
    # the entry sent as the server died was either stored whole or not at all
    assert len(stored) in (len(acked), len(acked) + 1)
    with StreamlitServer(_env(tmp_path, url), ART / "streamlit_fool_kill_2.log") as again, \
            sync_playwright() as p:
        ctx, _ = offline_context(p, tmp_path / "profile2")
        page = ctx.new_page()
        page.goto(again.url + "/fool?room=kill")
        page.get_by_role("tab", name="The class's board").click(timeout=120_000)
        caption_with(page, "Fooled the model", timeout=60_000)
        ctx.close()


def test_a_killed_server_loses_no_acknowledged_entry_sqlite(tmp_path):
    kill_while_sending(tmp_path, f"sqlite:///{tmp_path / 'class.db'}")


@pytest.mark.distributed
def test_a_killed_server_loses_no_acknowledged_entry_postgres(tmp_path):
    if bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (make distributed installs it)")
    with PostgresServer() as pg:
        kill_while_sending(tmp_path, pg.url)
