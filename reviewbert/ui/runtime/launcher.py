"""``make run``: Streamlit's own ``streamlit run app.py``, with its start-up made cheaper.

    python -m reviewbert.ui.runtime.launcher [any flag of `streamlit run`, e.g. --server.port 8502]

Before it listens, Streamlit (1.67) looks through every installed package for custom
components (``BidiComponentManager.discover_and_register_components``). Its filter reads
each package's name, summary and requirements through ``importlib.metadata``, which
parses the whole METADATA file (long description included) again on every read: several
parses per package, a large share of the server's time to listen in a profile of
``streamlit run`` (``bench/first_second.py`` counts it in ``ready_s``). Here the scan is
the same scan, over the same packages, with the same filter and result, but each
package's METADATA is parsed once. A Streamlit without that method is run as it is.
"""
from __future__ import annotations

import functools
import importlib.metadata
import sys
from contextlib import contextmanager
from pathlib import Path

APP = Path(__file__).resolve().parents[3] / "app.py"


class MetadataOnce(importlib.metadata.PathDistribution):
    """An installed package whose METADATA is parsed on the first read only (the
    standard library parses it on every ``.metadata``, ``.name``, ``.version``)."""

    @functools.cached_property
    def metadata(self):
        return super().metadata


@contextmanager
def metadata_parsed_once():
    """While inside, ``importlib.metadata.distributions()`` yields :class:`MetadataOnce`
    for each package found on a path (the same packages, in the same order)."""
    original = importlib.metadata.distributions

    def distributions(**kwargs):
        for dist in original(**kwargs):
            yield MetadataOnce(dist._path) if type(dist) is importlib.metadata.PathDistribution else dist

    importlib.metadata.distributions = distributions
    try:
        yield
    finally:
        importlib.metadata.distributions = original


def scan_once() -> bool:
    """Streamlit's component scan, with each package's METADATA parsed once; False (and
    nothing changed) for a Streamlit that has no such scan."""
    from streamlit.components.v2 import component_manager
    manager = getattr(component_manager, "BidiComponentManager", None)
    discover = getattr(manager, "discover_and_register_components", None)
    if discover is None:
        return False
    if getattr(discover, "metadata_parsed_once", False):
        return True

    @functools.wraps(discover)
    def discover_parsing_once(self, *args, **kwargs):
        with metadata_parsed_once():
            return discover(self, *args, **kwargs)
    discover_parsing_once.metadata_parsed_once = True
    manager.discover_and_register_components = discover_parsing_once
    return True


def main(argv: list[str] | None = None) -> None:
    """``streamlit run app.py [argv]`` in this process, with :func:`scan_once`."""
    argv = sys.argv[1:] if argv is None else list(argv)
    scan_once()
    from streamlit.web import cli
    cli.main(["run", str(APP), *argv], prog_name="streamlit")


if __name__ == "__main__":
    main()
