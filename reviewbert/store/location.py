"""Where a cache kept beside a checkpoint lives: beside it when the checkpoint folder can be
written, else in a per-user folder, and found again in either.

Every kind of cache that belongs to one checkpoint follows this one policy::

    <checkpoint>/<folder>/          first: beside the weights, so it travels with them
    <base>/<kind>/<P>/              then: when the checkpoint folder cannot be written (a
                                    read-only mount, a shared install)

    P     = the first 16 hex digits of sha256(the checkpoint's absolute path)
    base  = $REVIEWBERT_CACHE, else ~/.cache/reviewbert
    kind  = the folder's name without its leading dot

=================  ======================  =============================================
kind               beside the checkpoint   per-user fallback
=================  ======================  =============================================
analysis           ``.analysis/``          ``$REVIEWBERT_ANALYSIS_CACHE/<P>/`` when set
                                           (it replaces ``<base>/analysis``), else
                                           ``<base>/analysis/<P>/``
faithfulness       ``faithfulness/``       ``<base>/faithfulness/<P>/``
whatif             ``whatif/``             ``<base>/whatif/<P>/`` (brittleness runs)
explanations       ``explanations/``       ``<base>/explanations/<P>/``
behave             ``.behave/``            ``<base>/behave/<P>/`` (behavioural suite runs,
                                           ``reviewbert/behave/runner.py``)
=================  ======================  =============================================

(The Heads cache is the ``heads/`` sub-folder of the analysis kind's folders.)

Writers take :meth:`Place.writable` (the first folder a file can be created in); readers
look in :meth:`Place.roots` in order, so an entry beside the checkpoint wins over one in
the fallback. The analysis fallback's path and variable are the ones the prediction cache
always used, so what earlier versions wrote there is still found.
"""
from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BASE_ENV = "REVIEWBERT_CACHE"


def can_write(folder: Path) -> bool:
    """Whether a file can be created in ``folder`` (made if missing). A real probe, not
    ``os.access``: a read-only mount, missing permissions or a file in the folder's place
    fail here as they would fail the write itself (and root, whom permission bits do not
    stop, passes as its write would)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe", delete=True):
            pass
    except OSError:
        return False
    return True


def checkpoint_tag(checkpoint) -> str:
    """P: the per-user fallback's name for one checkpoint folder."""
    return hashlib.sha256(str(Path(checkpoint).absolute()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Place:
    """One kind of cache kept beside a checkpoint (see the module docstring)."""

    folder: str                     # its folder beside the checkpoint
    env: str | None = None          # a variable that replaces <base>/<kind> for this kind

    @property
    def kind(self) -> str:
        return self.folder.lstrip(".")

    def fallback(self, checkpoint) -> Path:
        own = os.environ.get(self.env) if self.env else None
        base = own or Path(os.environ.get(BASE_ENV) or Path.home() / ".cache" / "reviewbert") / self.kind
        return Path(base) / checkpoint_tag(checkpoint)

    def roots(self, checkpoint) -> list[Path]:
        """Where this checkpoint's entries may be, in the order they are looked for."""
        return [Path(checkpoint) / self.folder, self.fallback(checkpoint)]

    def writable(self, checkpoint) -> Path:
        """The first of :meth:`roots` a file can be written in (created if needed);
        OSError when none can."""
        roots = self.roots(checkpoint)
        for root in roots:
            if can_write(root):
                return root
        raise OSError(errno.EACCES, f"no writable folder for the {self.kind} cache of "
                                    f"{checkpoint} ({', '.join(map(str, roots))})")

    def find(self, checkpoint, name: str,
             done: Callable[[Path], bool] = Path.exists) -> Path | None:
        """``<root>/<name>`` in the first root where ``done`` of it holds, or None."""
        for root in self.roots(checkpoint):
            if done(root / name):
                return root / name
        return None

    def glob(self, checkpoint, pattern: str) -> list[Path]:
        """Every root's entries matching ``pattern``; a name found in two roots counts once,
        from the first (beside the checkpoint wins)."""
        seen: dict[str, Path] = {}
        for root in self.roots(checkpoint):
            for p in sorted(root.glob(pattern)):
                seen.setdefault(p.name, p)
        return list(seen.values())


ANALYSIS = Place(".analysis", env="REVIEWBERT_ANALYSIS_CACHE")
FAITHFULNESS = Place("faithfulness")
BRITTLENESS = Place("whatif")
EXPLANATIONS = Place("explanations")
