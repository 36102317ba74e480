"""reviewbert.ui.runtime.launcher (``make run``): Streamlit's component scan before the server
listens, with each installed package's METADATA parsed once: the same packages pass its
filter, in the same order, for a quarter of the parses; and the server it starts serves."""
from __future__ import annotations

import email
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from reviewbert.ui.runtime import launcher

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from browser_support import free_port, server_command, wait_healthy  # noqa: E402

LONG = "\n".join(f"A long description, line {i}: it is parsed with the headers." for i in range(400))


def dist_info(root: Path, name: str, headers: dict[str, list[str]]) -> None:
    d = root / f"{name.replace('-', '_')}-1.0.dist-info"
    d.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", "Version: 1.0"]
    lines += [f"{k}: {v}" for k, vs in headers.items() for v in vs]
    (d / "METADATA").write_text("\n".join(lines) + "\n\n" + LONG + "\n")


@pytest.fixture
def packages(tmp_path, monkeypatch):
    """Four installed packages on sys.path: a component by name, one by its summary, one
    that requires streamlit, and one that is none of these."""
    dist_info(tmp_path, "streamlit-fancy-widget", {"Summary": ["A widget"]})
    dist_info(tmp_path, "gadget", {"Summary": ["A Streamlit gadget"]})
    dist_info(tmp_path, "chartkit", {"Summary": ["Charts"],
                                     "Requires-Dist": ["numpy", "streamlit>=1.40"]})
    dist_info(tmp_path, "plainpkg", {"Summary": ["Nothing to do with it"],
                                     "Requires-Dist": ["numpy"]})
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def filtered(count: list) -> list[str]:
    """The names that pass Streamlit's own filter, every package on sys.path read."""
    from streamlit.components.v2.manifest_scanner import _is_likely_streamlit_component_package
    count.clear()
    return [d.name for d in importlib.metadata.distributions()
            if _is_likely_streamlit_component_package(d)]


def test_the_same_packages_pass_streamlits_filter_with_one_parse_each(packages, monkeypatch):
    parses = []
    parse = email.message_from_string
    monkeypatch.setattr(email, "message_from_string", lambda *a, **k: parses.append(1) or parse(*a, **k))
    plain = filtered(parses)
    plain_parses = len(parses)
    original = importlib.metadata.distributions
    with launcher.metadata_parsed_once():
        once = filtered(parses)
        once_parses = len(parses)
        n_dists = len(list(importlib.metadata.distributions()))
    assert once == plain
    assert {"streamlit-fancy-widget", "gadget", "chartkit"} <= set(once)
    assert "plainpkg" not in once
    assert once_parses <= n_dists, (once_parses, n_dists)
    assert plain_parses >= 3 * n_dists, "the standard library parses METADATA once per read"
    assert importlib.metadata.distributions is original, "the standard library's, again"
    assert not any(isinstance(d, launcher.MetadataOnce) for d in importlib.metadata.distributions()), \
        "the scan's cache ends with it"


def test_streamlits_scan_is_the_one_patched(monkeypatch):
    """The first half shows the scan is still there (a Streamlit that renames it fails
    here, and the launcher would silently do nothing); the patched scan finds what the
    plain one finds, and patching twice wraps once."""
    from streamlit.components.v2 import component_manager, manifest_scanner
    manager = component_manager.BidiComponentManager
    monkeypatch.setattr(manager, "discover_and_register_components",
                        manager.discover_and_register_components)
    seen, found = [], []
    scan = manifest_scanner.scan_component_manifests

    def spy(*a, **k):
        seen.append(isinstance(next(iter(importlib.metadata.distributions()), None),
                               launcher.MetadataOnce))
        found.append(scan(*a, **k))
        return found[-1]
    monkeypatch.setattr(manifest_scanner, "scan_component_manifests", spy)
    manager().discover_and_register_components(start_file_watching=False)
    assert launcher.scan_once() is True
    patched = manager.discover_and_register_components
    assert launcher.scan_once() is True and manager.discover_and_register_components is patched
    manager().discover_and_register_components(start_file_watching=False)
    assert seen == [False, True]
    assert found[0] == found[1]


def test_make_run_serves_the_app_through_the_launcher(tmp_path):
    """The command the tests, the benchmarks and ``make run`` use starts the launcher, and
    the server it starts answers and serves the page; `streamlit run` flags pass through."""
    run_rule = (ROOT / "Makefile").read_text().split("\nrun:")[1].split("\n\n")[0]
    assert "reviewbert.ui.runtime.launcher" in run_rule
    port = free_port()
    cmd = server_command(ROOT, port)
    assert cmd[1:3] == ["-m", "reviewbert.ui.runtime.launcher"]
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_healthy(f"http://localhost:{port}", proc, 60, 0.1, exited=lambda: log.read_text())
        import urllib.request
        html = urllib.request.urlopen(f"http://localhost:{port}/", timeout=10).read().decode()
        assert "<noscript>" in html and f"localhost:{port}" in log.read_text()
    finally:
        proc.terminate()
        proc.wait(10)
