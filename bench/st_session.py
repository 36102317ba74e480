"""A real Streamlit browser session without a browser: the websocket protocol, in Python.

:class:`StSession` speaks what Streamlit's frontend speaks on ``/_stcore/stream``
(streamlit 1.67, its Starlette server): it takes the XSRF cookie from ``GET /``,
opens the websocket with the frontend's subprotocol list (``streamlit``, the
XSRF token), sends ``BackMsg.rerun_script`` with the widget states, and reads
``ForwardMsg`` deltas until ``script_finished``. The elements of each script run
are kept (:class:`RunResult`), so a caller finds widgets by their label, reads
their element ids, and sends values for them in the next run, as a browser does.

On the Predict page (:meth:`StSession.predict`): fill "Review text", trigger
"Predict", wait for the run to finish, and check that the prediction card
("Predicted: …") appeared. Exception elements and error alerts in a run are
reported as errors. Every ForwardMsg is read in full: the client announces no
cached message hashes, so the server never sends a reference instead.

Another page than the default opens with :meth:`StSession.open_page` (its URL path).

:func:`all_at_once` runs one worker per session in threads, their actions started together.

Used by bench/load.py, bench/memory.py, tests/reliability/test_load.py,
tests/reliability/test_fool_sessions.py and tests/reliability/test_cohort_sessions.py.
Traffic goes only
to the given localhost URL (the HTTP/websocket proxy settings are ignored).
"""
from __future__ import annotations

import re
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState
from websockets.sync.client import connect

XSRF_COOKIE = "_streamlit_xsrf"
EARLY = ForwardMsg.FINISHED_EARLY_FOR_RERUN
PREDICTED = re.compile(r"\*\*Predicted: (.+?)\*\*")


class SessionError(RuntimeError):
    """The session could not do what was asked (no widget, no prediction, timeout)."""


@dataclass
class RunResult:
    """One script run as the browser saw it."""
    seconds: float                          # rerun sent -> script_finished received
    status: int                             # ForwardMsg.ScriptFinishedStatus
    elements: list = field(default_factory=list)   # every Element proto of the run, in order
    spinners: list[str] = field(default_factory=list)  # texts of the spinners shown (transient)
    nbytes: int = 0                         # websocket bytes received for this run
    bytes_by_element: dict = field(default_factory=dict)  # element type -> bytes of its deltas

    def find(self, kind: str, label: str):
        """The first element of type ``kind`` ("text_area", "button", ...) with ``label``."""
        for e in self.elements:
            if e.WhichOneof("type") == kind and getattr(e, kind).label == label:
                return getattr(e, kind)
        return None

    def texts(self, kind: str = "markdown") -> list[str]:
        return [getattr(e, kind).body for e in self.elements if e.WhichOneof("type") == kind]

    @property
    def errors(self) -> list[str]:
        """Exception elements and st.error alerts, one line each."""
        out = []
        for e in self.elements:
            kind = e.WhichOneof("type")
            if kind == "exception" and not e.exception.is_warning:
                out.append(f"exception {e.exception.type}: {e.exception.message[:300]}")
            elif kind == "alert" and e.alert.format == e.alert.ERROR:
                out.append(f"error alert: {e.alert.body[:300]}")
        return out


@dataclass
class PredictResult:
    ms: float                  # "Predict" pressed -> script_finished
    label: str | None          # the card's "Predicted: …" label (None: no card)
    run: RunResult

    @property
    def errors(self) -> list[str]:
        return self.run.errors


def _get(url: str, timeout: float):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost only
    return opener.open(url, timeout=timeout)


METRIC = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def server_metrics(base_url: str, timeout: float = 30.0) -> dict[tuple, float]:
    """Streamlit's own counters (``/_stcore/metrics``, OpenMetrics text), as
    {(name, (("label", "value"), ...)): value}; e.g. ``cache_lookups_total`` per
    cached function and result (hit/miss): how often the app loaded a checkpoint."""
    with _get(base_url.rstrip("/") + "/_stcore/metrics", timeout) as r:
        text = r.read().decode("utf-8")
    out = {}
    for line in text.splitlines():
        m = METRIC.match(line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2))))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def cache_count(metrics: dict, function: str, name: str = "cache_lookups_total",
                **labels) -> float:
    """Sum of metric ``name`` for the cached ``function`` (its qualified name's tail)
    whose labels include ``labels``, e.g. ``result="miss"``."""
    return sum(v for (n, lab), v in metrics.items()
               if n == name and dict(lab).get("cache", "").endswith(function)
               and all(dict(lab).get(k) == v2 for k, v2 in labels.items()))


def _xsrf_cookie(base_url: str, timeout: float) -> str | None:
    """The XSRF cookie Streamlit sets on its index page, as a browser gets it first."""
    with _get(base_url + "/", timeout) as r:
        for header in r.headers.get_all("Set-Cookie") or []:
            c = SimpleCookie()
            c.load(header)
            if XSRF_COOKIE in c:
                return c[XSRF_COOKIE].value
    return None


class StSession:
    """One browser tab's session. Use as a context manager; not thread-safe (one per thread)."""

    def __init__(self, base_url: str, timeout: float = 300.0):
        if not base_url.startswith(("http://localhost:", "http://127.0.0.1:")):
            raise ValueError(f"only a localhost server: {base_url}")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.ws = None
        self.session_id = None
        self.page_script_hash = ""
        # the page a run asks for by its URL path (st.Page's url_path, "" the default page),
        # until the server names its hash, and the URL's query (a browser sends it each run)
        self.page_name = ""
        self.query_string = ""
        self.last: RunResult | None = None

    # ------------------------------------------------------------ connection
    def __enter__(self) -> "StSession":
        xsrf = _xsrf_cookie(self.base_url, self.timeout)
        headers = {"Cookie": f"{XSRF_COOKIE}={xsrf}"} if xsrf else {}
        protocols = ["streamlit", xsrf] if xsrf else ["streamlit"]
        self.ws = connect("ws" + self.base_url[len("http"):] + "/_stcore/stream",
                          subprotocols=protocols, additional_headers=headers, proxy=None,
                          max_size=None, compression=None, open_timeout=self.timeout)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        if self.ws is not None:
            self.ws.close()
            self.ws = None

    # ------------------------------------------------------------ script runs
    def rerun(self, widgets: list[WidgetState] = ()) -> RunResult:
        """Ask for a script run with these widget values; wait until it has finished.

        A run that ends early because the script asked for another (``st.rerun``)
        is followed to the run that finishes."""
        msg = BackMsg()
        cs = msg.rerun_script
        cs.query_string = self.query_string
        cs.page_script_hash = self.page_script_hash
        cs.page_name = self.page_name
        cs.widget_states.widgets.extend(widgets)
        cs.context_info.timezone = "UTC"
        cs.context_info.locale = "en-US"
        cs.context_info.url = (self.base_url + "/" + self.page_name
                               + (f"?{self.query_string}" if self.query_string else ""))
        t0 = time.perf_counter()
        self.ws.send(msg.SerializeToString())
        result = RunResult(0.0, -1)
        deadline = time.monotonic() + self.timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SessionError(f"no script_finished in {self.timeout:.0f} s")
            try:
                raw = self.ws.recv(timeout=left)
            except TimeoutError:
                continue
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            kind = fm.WhichOneof("type")
            result.nbytes += len(raw)
            if kind == "new_session":
                self.session_id = fm.new_session.initialize.session_id or self.session_id
                if fm.new_session.page_script_hash:
                    self.page_script_hash = fm.new_session.page_script_hash
                result.elements.clear()        # a fresh run (also after an early finish)
                result.spinners.clear()
            elif kind == "navigation" and fm.navigation.page_script_hash:
                self.page_script_hash = fm.navigation.page_script_hash
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
                result.elements.append(fm.delta.new_element)
                etype = fm.delta.new_element.WhichOneof("type")
                result.bytes_by_element[etype] = result.bytes_by_element.get(etype, 0) + len(raw)
            elif kind == "delta" and fm.delta.WhichOneof("type") == "new_transient":
                result.spinners += [e.spinner.text for e in fm.delta.new_transient.elements
                                    if e.WhichOneof("type") == "spinner"]
            elif kind == "ref_hash":
                raise SessionError("the server sent a cached-message reference")
            elif kind == "script_finished":
                if fm.script_finished == EARLY:
                    continue
                result.seconds = time.perf_counter() - t0
                result.status = fm.script_finished
                self.last = result
                return result

    def open(self) -> RunResult:
        """The first run, as a browser tab opening the app's default page."""
        return self.rerun()

    def open_page(self, url_path: str, query_string: str = "") -> RunResult:
        """A run of another page, as a browser tab opening ``/url_path?query_string``
        (``url_path``: the page's ``st.Page`` url_path, e.g. "fool" for pages/fool.py).
        The server resolves the page by that name, since no hash is sent, and names its
        hash in the run's navigation message; later runs stay on it by that hash."""
        self.page_script_hash = ""
        self.page_name = url_path.strip("/")
        self.query_string = query_string.lstrip("?")
        return self.rerun()

    # ------------------------------------------------------------ the Predict page
    def _widget(self, kind: str, label: str):
        w = self.last.find(kind, label) if self.last else None
        if w is None:
            raise SessionError(f"no {kind} {label!r} on the page; errors: "
                               f"{self.last.errors if self.last else 'no run yet'}")
        return w

    def predict(self, text: str) -> PredictResult:
        """Type ``text`` into "Review text", press "Predict", wait for the page."""
        box = self._widget("text_area", "Review text")
        button = self._widget("button", "Predict")
        run = self.rerun([WidgetState(id=box.id, string_value=text),
                          WidgetState(id=button.id, trigger_value=True)])
        label = None
        for body in run.texts("markdown"):
            m = PREDICTED.search(body)
            if m:
                label = m.group(1)
        return PredictResult(run.seconds * 1000, label, run)


def all_at_once(worker, url: str, sessions: int, open_s: float,
                join_s: float) -> tuple[dict, float]:
    """``worker(url, i, barrier, out)`` for every session i in its own thread; each opens its
    page, then waits at ``barrier`` (up to ``open_s``) so the actions start together, and
    puts its record in ``out[i]`` (a worker that fails aborts the barrier, so the others do
    not wait for it). Returns (out, wall seconds from the start of the actions)."""
    out: dict = {}
    barrier = threading.Barrier(sessions + 1)
    threads = [threading.Thread(target=worker, args=(url, i, barrier, out), daemon=True)
               for i in range(sessions)]
    for t in threads:
        t.start()
    try:
        barrier.wait(open_s)            # every page is open: the actions start now
    except threading.BrokenBarrierError:
        pass                            # a session failed to open: its record says why
    t0 = time.perf_counter()
    for t in threads:
        t.join(join_s)
    if any(t.is_alive() for t in threads):
        raise SessionError("a session never finished")
    return out, time.perf_counter() - t0
