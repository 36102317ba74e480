"""The embeddings projector: a whole split's sentence vectors in 2-D or 3-D.

Methods are the field's: scikit-learn's ``PCA`` and umap-learn's ``UMAP`` (nothing
written here but the call). Vectors are first scaled to unit length, so both see
the cosine geometry the neighbours use (``analysis/neighbours.py``); UMAP's metric
is cosine too. PCA is exact and all but instant. UMAP keeps local neighbourhoods
better and costs far more (bench/split_map.py times both, and UMAP's first compile);
umap-learn compiles its numba kernels on first use in a process (numba caches them on
disk, so the compile is paid once per installation), and its import is slow: it is
imported only here.

Projections are cached beside the vectors they project
(``projection-<V>-<method>-<d>d-<P>.npy``, layout in ``analysis/cache.py``), so a
second look, or a second user, costs a file read.
"""
from __future__ import annotations

import hashlib
import json
import time
import warnings
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from reviewbert.analysis import cache
from reviewbert.fsio import atomic_write_json

FORMAT = "reviewbert-projection/1"
METHODS = ("pca", "umap")
UMAP_DEFAULTS = {"n_neighbors": 15, "min_dist": 0.1, "metric": "cosine", "random_state": 42}


@dataclass
class Projection:
    coords: np.ndarray                     # float32 [n, dims]
    method: str
    dims: int
    params: dict = field(default_factory=dict)
    seconds: float = 0.0                   # compute time (when cached: of the first time)
    explained: list | None = None          # PCA: share of variance per axis
    cached: bool = False

    @property
    def title(self) -> str:
        what = "PCA" if self.method == "pca" else "UMAP"
        return f"{what} {self.dims}-D"


def unit_rows(vectors) -> np.ndarray:
    """float32 rows scaled to length 1 (a zero row stays zero)."""
    v = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms > 0, norms, 1.0)


def pca(vectors, dims: int = 2, seed: int = 0) -> tuple[np.ndarray, list[float]]:
    """(coords [n, dims], explained variance ratio per axis) of the unit vectors."""
    from sklearn.decomposition import PCA
    x = unit_rows(vectors)
    dims = int(min(dims, x.shape[1], max(1, x.shape[0])))
    model = PCA(n_components=dims, random_state=seed)
    coords = model.fit_transform(x)
    return coords.astype(np.float32), [float(r) for r in model.explained_variance_ratio_]


def umap(vectors, dims: int = 2, **params) -> np.ndarray:
    """UMAP coordinates [n, dims] of the unit vectors (umap-learn, cosine metric)."""
    import umap as umap_learn  # heavy (numba): only when asked for
    kw = {**UMAP_DEFAULTS, **params}
    x = unit_rows(vectors)
    if len(x) <= kw["n_neighbors"]:
        raise ValueError(f"UMAP needs more reviews than its {kw['n_neighbors']} neighbours "
                         f"(got {len(x)}); use PCA")
    with warnings.catch_warnings():
        # "n_jobs value 1 overridden to 1 by setting random_state": reproducible on purpose
        warnings.simplefilter("ignore", UserWarning)
        coords = umap_learn.UMAP(n_components=dims, **kw).fit_transform(x)
    return np.asarray(coords, dtype=np.float32)


def params_tag(method: str, params: dict) -> str:
    blob = json.dumps({"method": method, **params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:8]


def _paths(folder, vectors_name: str, method: str, dims: int, params: dict) -> tuple[Path, Path]:
    stem = f"projection-{vectors_name}-{method}-{dims}d-{params_tag(method, params)}"
    return Path(folder) / f"{stem}.npy", Path(folder) / f"{stem}.json"


def _params(method: str, params: dict) -> dict:
    return {**UMAP_DEFAULTS, **params} if method == "umap" else {"seed": params.get("seed", 0)}


def cached(vectors, method: str, dims: int, *, folder=None, vectors_name: str = "cls",
           **params) -> Projection | None:
    """The cached projection, or None; never computes."""
    if folder is None:
        return None
    params = _params(method, params)
    got = cache.read_array(*_paths(folder, vectors_name, method, dims, params), FORMAT)
    if got is None or len(got[0]) != len(vectors):
        return None
    meta = got[1]
    return Projection(got[0], method, dims, params, float(meta.get("seconds") or 0.0),
                      meta.get("explained"), True)


def project(vectors, method: str = "pca", dims: int = 2, *, folder=None,
            vectors_name: str = "cls", use_cache: bool = True, **params) -> Projection:
    """The projection of ``vectors`` by ``method`` ("pca" or "umap") in ``dims`` (2 or 3),
    from ``folder``'s cache when it was computed before, else computed and cached there."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if dims not in (2, 3):
        raise ValueError("dims must be 2 or 3")
    params = _params(method, params)
    paths = _paths(folder, vectors_name, method, dims, params) if folder is not None else None
    if use_cache:
        got = cached(vectors, method, dims, folder=folder, vectors_name=vectors_name, **params)
        if got is not None:
            return got
    t0 = time.perf_counter()
    explained = None
    if method == "pca":
        coords, explained = pca(vectors, dims, params["seed"])
    else:
        coords = umap(vectors, dims, **params)
    out = Projection(coords, method, dims, params, time.perf_counter() - t0, explained)
    if use_cache and paths is not None:
        _store(paths, out)
    return out


def _store(paths: tuple[Path, Path], p: Projection) -> None:
    try:
        paths[1].unlink(missing_ok=True)
        cache.write_array(paths[0], p.coords)
        atomic_write_json(paths[1], {
            "format": FORMAT, "method": p.method, "dims": p.dims, "params": p.params,
            "seconds": round(p.seconds, 3), "explained": p.explained,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    except OSError:
        pass        # not kept; still drawn
