"""Shared fixtures.

- ``data_dir``: the real review files (../shared/data, or $REVIEWBERT_DATA_DIR).
  On CI (CI=true) a missing folder fails the test instead of skipping it.
- ``tiny_model_dir``: a tiny random BERT (2 layers, 4 heads, hidden 32) saved as a
  ReviewBERT-style HF checkpoint with the real uncased WordPiece tokenizer.
- ``demo_evaluation``: one fp32 evaluation of the shipped demo's test split, shared by
  every xdist worker of the run (tests/demo_support.py).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def real_data_dir() -> Path:
    return Path(os.environ.get("REVIEWBERT_DATA_DIR", ROOT.parent / "shared" / "data"))


# ---- Hypothesis profiles (tests/fuzzing.py): "default" for `make test` (few, fixed
# examples: reproducible and quick), "fuzz" for the `fuzz`-marked twins (`make fuzz`).
# HYPOTHESIS_PROFILE=fuzz also runs the quick twins at fuzz size.
try:
    from hypothesis import HealthCheck
    from hypothesis import settings as _hyp_settings
except ImportError:  # pragma: no cover - hypothesis is in requirements.txt
    _hyp_settings = None
if _hyp_settings is not None:
    _slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
    # deadline=None: timings on a shared 2-core machine are noise; fuzzing.time_limit
    # catches real hangs instead.
    _hyp_settings.register_profile("default", max_examples=40, deadline=None, derandomize=True,
                                   database=None, suppress_health_check=_slow_ok)
    _hyp_settings.register_profile(
        "fuzz", max_examples=int(os.environ.get("REVIEWBERT_FUZZ_EXAMPLES", "1500")),
        deadline=None, suppress_health_check=_slow_ok)
    _hyp_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# The suites: a test marked with one of these runs only in that suite's own command (the
# Makefile target of the same name); every other test runs in `make test`. This is the one
# place the suites are defined: the markers are registered from here, and
# tests/unit/test_suites.py checks that each has its Makefile target and that CI runs
# the ones it should. Folders say a test's kind (unit, app, browser, integration,
# reliability), never its suite.
SUITES = {
    "heads": "the Heads analysis of the demo on 300 test reviews and the Heads page in a browser "
             "(make heads; CI runs it after make test)",
    "e2e": "the longest end-to-end journeys in a browser and on real data, and the demo in bf16 "
           "(make e2e; CI runs it after make test)",
    "umap": "UMAP on a toy set and of 10,000 real reviews, whose numba compile alone takes a "
            "minute (make umap; CI runs it after make test)",
    "faults": "the fault loops: a training run killed at four points, then ten random ones "
              "(make faults; CI runs it after make test)",
    "fuzz": "thousands of generated (Hypothesis) cases per property (make fuzz)",
    "hostile": "the whole hostile-text corpus through three pages, the What if? editor, Fool "
               "the model, the test editor, a CSV import and the Cohorts page in a browser "
               "(make hostile)",
    "load": "many concurrent Streamlit sessions against one server (make load)",
    "distributed": "search workers and the shared store on a real PostgreSQL server "
                   "(make distributed)",
}
CI_SUITES = ("heads", "e2e", "umap", "faults")     # .ci/run, after make test


def pytest_configure(config):
    for name, what in SUITES.items():
        config.addinivalue_line("markers", f"{name}: {what}")


def pytest_collection_modifyitems(config, items):
    """Keep the suites' tests out unless -m names them (``-m heads``, ``-m "fuzz or
    load"``); any other -m (``-m 'not e2e'``) still leaves them out."""
    expr = config.getoption("markexpr") or ""
    out = [m for m in SUITES if m not in expr]

    def in_a_suite(item):
        return any(item.get_closest_marker(m) is not None for m in out)

    dropped = [i for i in items if in_a_suite(i)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if not in_a_suite(i)]


def _files_under(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_size for p in sorted(folder.rglob("*"))
            if p.is_file()} if folder.is_dir() else {}


@pytest.fixture(scope="session", autouse=True)
def _the_shipped_demo_is_left_as_it_was():
    """No test writes into checkpoints/demo: a prediction cache left there by one test
    (``evaluate`` without --no-cache) changed what every later Predict page in the suite
    drew. Tests that need a writable demo use a symlinked copy (demo_support.demo_copy)."""
    demo = ROOT / "checkpoints" / "demo"
    before = _files_under(demo)
    yield
    after = _files_under(demo)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"tests changed the shipped demo checkpoint: {changed[:10]}"


@pytest.fixture(scope="session")
def demo_evaluation(request, tmp_path_factory, data_dir) -> tuple[Path, dict]:
    """(folder, evaluate's JSON): ``folder/demo`` is the demo, symlinked, with its test
    split's fp32 prediction cache; ``folder/preds.csv`` and ``folder/vecs.npy`` were saved
    by the same pass. Read-only: copy it with ``demo_support.demo_copy(root, folder/"demo")``."""
    from demo_support import evaluate_once, shared_root
    from filelock import FileLock
    root = shared_root(request, tmp_path_factory) / "demo-evaluation"
    root.mkdir(exist_ok=True)
    with FileLock(str(root) + ".lock"):
        return root, evaluate_once(root)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    d = real_data_dir()
    if not (d / "unlocked_mobile_10k.csv").exists():
        if os.environ.get("CI"):
            pytest.fail(f"real data folder missing on CI: {d}")
        pytest.skip(f"real data not found at {d} (set REVIEWBERT_DATA_DIR)")
    return d


def make_tiny_model(out: Path, num_labels: int = 5, layers: int = 2, heads: int = 4,
                    hidden: int = 32, seed: int = 0) -> Path:
    """Save a tiny random BertForSequenceClassification + real tokenizer to ``out``."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from reviewbert.model.checkpoint import resolve_base_model
    from reviewbert.model.labels import get_scheme

    scheme = get_scheme(num_labels)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers,
                     num_attention_heads=heads, intermediate_size=hidden * 2,
                     max_position_embeddings=512, num_labels=scheme.num_labels,
                     id2label=scheme.id2label, label2id=scheme.label2id)
    model = BertForSequenceClassification(cfg)
    tok = AutoTokenizer.from_pretrained(resolve_base_model(None))
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-bert")


@pytest.fixture(autouse=True)
def _apptest_like_the_server(monkeypatch):
    """Make AppTest run app.py's st.navigation frame on every run, as the server does.

    AppTest resets ``PagesManager.uses_pages_directory`` before each run, so with a
    ``pages/`` folder beside app.py every rerun after the first runs the page file
    alone, in Streamlit's legacy (v1) multipage mode, without the frame. The
    server sets the flag once per process, at its first ``st.navigation`` call
    (reviewbert/ui/frame.py handles that first run); this does the same here.
    """
    try:
        from streamlit.runtime import pages_manager
    except ImportError:
        return
    init = pages_manager.PagesManager.__init__

    def v2_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        pages_manager.PagesManager.uses_pages_directory = False

    monkeypatch.setattr(pages_manager.PagesManager, "__init__", v2_init)


# ------------------------------------------------------------------ PostgreSQL (make distributed)
@pytest.fixture(scope="module")
def postgres():
    """A throwaway PostgreSQL server (tests/postgres_support.py) for a module's tests."""
    from reviewbert.store import db

    from postgres_support import PostgresServer, bin_dir
    if bin_dir() is None:
        pytest.fail("PostgreSQL is not installed: `make distributed` installs it")
    server = PostgresServer()
    try:
        yield server.start()
    finally:
        db.close_all()
        server.stop()
        assert not server.folder.exists()


@pytest.fixture
def pg_url(postgres) -> str:
    """A fresh database on the module's server, for one test."""
    import uuid

    import sqlalchemy as sa

    from reviewbert.store import db
    name = f"store_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(postgres.url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    yield postgres.url.rsplit("/", 1)[0] + "/" + name
    db.close_all()
