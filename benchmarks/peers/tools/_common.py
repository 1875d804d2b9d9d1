"""What every adapter in this folder shares; imports only numpy and anndata, so it runs in every peer's venv.

An adapter is run as ``<venv python> tools/X.py --data prepared.h5ad --out
result.npz [--method M] [--threads N]`` in a fresh process, and:

1. reads the prepared file (``datasets.py``): ``obsm["X_pca"]``, the kNN graph
   in ``obsp``, and the root cell, the first cell with ``obs["root_cell"]``;
2. runs its tool once, untimed, on a warm-up subsample of at most 300 cells
   (the root among them, the kNN graph restricted to them), so that imports
   finishing their work, numba compilation and first-call caches are not timed;
   a failed warm-up is recorded, not fatal;
3. runs the tool on all cells, timing fit + root + pseudotime with
   ``time.perf_counter`` and recording the Python warnings raised;
4. writes one or more *variants* (e.g. scskeleton's two pseudotime orders from
   one fit) with :func:`save`: per cell a pseudotime (float, NaN where none), a
   segment label and a fate label (ints, -1 where none), the number of branch
   points of the tool's graph, the seconds and the warnings.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
import warnings
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version

import numpy as np

WARMUP_CELLS = 300


def parse_args(description: str, methods: tuple[str, ...] = ("default",)) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", required=True, help="prepared h5ad (datasets.py)")
    parser.add_argument("--out", required=True, help="result .npz")
    parser.add_argument("--method", choices=methods, default=methods[0])
    parser.add_argument("--threads", type=int, default=1, help="n_jobs for tools that take one")
    parser.add_argument("--no-warmup", action="store_true")
    return parser.parse_args()


def read(path: str):
    """The prepared AnnData and the integer position of its root cell."""
    import anndata as ad

    adata = ad.read_h5ad(path)
    return adata, int(np.flatnonzero(adata.obs["root_cell"].to_numpy(bool))[0])


def warm_up(run, adata, root: int, skip: bool) -> dict:
    """``run(subsample, root)`` on ≤ 300 cells, untimed in the result; its seconds and error, if any."""
    if skip:
        return {"warmup_s": None}
    if adata.n_obs > WARMUP_CELLS:
        others = np.random.default_rng(0).choice(np.delete(np.arange(adata.n_obs), root), WARMUP_CELLS - 1,
                                                 replace=False)
        cells = np.sort(np.append(others, root))
        sub, sub_root = adata[cells].copy(), int(np.searchsorted(cells, root))
    else:
        sub, sub_root = adata.copy(), root
    start = time.perf_counter()
    error = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            run(sub, sub_root)
        except Exception as exc:  # the warm-up only loads and compiles; its result is not used
            error = f"{type(exc).__name__}: {exc}"[:300]
    return {"warmup_s": time.perf_counter() - start, "warmup_error": error}


@contextmanager
def recording():
    """Collects the warnings raised inside, as unique strings, into the yielded list.

    Python warnings become ``"Category: message"``; where scanpy is imported
    (scskeleton, scanpy's tools and the peers built on it warn through
    scanpy's logger, not ``warnings``), its logged warnings are caught too, as
    ``"scanpy log: message"``.
    """
    messages: list[str] = []
    scanpy = sys.modules.get("scanpy")
    log = io.StringIO()
    if scanpy is not None:
        logfile, verbosity = scanpy.settings.logfile, scanpy.settings.verbosity
        scanpy.settings.logfile, scanpy.settings.verbosity = log, 1
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield messages
    finally:
        if scanpy is not None:
            scanpy.settings.logfile, scanpy.settings.verbosity = logfile, verbosity
    found = [f"{w.category.__name__}: {str(w.message)[:300]}" for w in caught]
    found += [f"scanpy log: {line.strip()[:300]}" for line in log.getvalue().splitlines() if "WARNING" in line]
    messages.extend(dict.fromkeys(found))


def codes(labels) -> np.ndarray:
    """Integer codes of a label array (order of first appearance); -1 for missing labels."""
    labels = np.asarray(labels, dtype=object)
    missing = np.array([x is None or (isinstance(x, float) and np.isnan(x)) for x in labels], dtype=bool)
    out = np.full(len(labels), -1, dtype=np.int64)
    if (~missing).any():
        _, first, inverse = np.unique(labels[~missing].astype(str), return_index=True, return_inverse=True)
        rank = np.argsort(np.argsort(first))
        out[~missing] = rank[inverse]
    return out


def graph_segments(n_nodes: int, edges) -> tuple[np.ndarray, np.ndarray, int]:
    """Segments of an undirected graph: its maximal unbranched paths between nodes of degree ≠ 2.

    Returns the segment of each node, of each edge, and the number of branch
    points (nodes of degree ≥ 3). An edge belongs to the chain it lies on; a
    node of degree 2 or 1 to the chain through it; a branch point or an
    isolated node is a segment of its own (a cluster at a fork holds cells of
    the fork). A cycle without such nodes is one segment.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    incident = [[] for _ in range(n_nodes)]
    for e, (a, b) in enumerate(edges):
        incident[a].append(e)
        incident[b].append(e)
    degree = np.array([len(x) for x in incident])
    edge_segment = np.full(len(edges), -1, dtype=np.int64)
    n_segments = 0

    def walk(node: int, edge: int, label: int) -> None:
        while edge_segment[edge] < 0:
            edge_segment[edge] = label
            a, b = edges[edge]
            node = b if a == node else a
            if degree[node] != 2:
                return
            edge = next(x for x in incident[node] if x != edge)

    for start in [n for n in range(n_nodes) if degree[n] != 2] + list(range(n_nodes)):
        for edge in incident[start]:
            if edge_segment[edge] < 0:
                walk(start, edge, n_segments)
                n_segments += 1
    node_segment = np.full(n_nodes, -1, dtype=np.int64)
    for node in range(n_nodes):
        if degree[node] in (1, 2):
            node_segment[node] = edge_segment[incident[node][0]]
        else:
            node_segment[node] = n_segments
            n_segments += 1
    return node_segment, edge_segment, int((degree >= 3).sum())


def versions(*names: str) -> dict:
    out = {}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def save(path: str, variants: dict[str, dict], info: dict) -> None:
    """Write the variants (name → pseudotime, segment, fate or None, n_branch_points, seconds, warnings) and info."""
    arrays = {"variants": np.array(list(variants), dtype=str), "info": np.array(json.dumps(info, default=str))}
    for name, v in variants.items():
        n = len(v["pseudotime"])
        pseudotime = np.asarray(v["pseudotime"], dtype=float)
        arrays[f"{name}.pseudotime"] = np.where(np.isfinite(pseudotime), pseudotime, np.nan)
        arrays[f"{name}.segment"] = np.asarray(v["segment"], dtype=np.int64)
        arrays[f"{name}.fate"] = np.full(n, -1, np.int64) if v.get("fate") is None else np.asarray(v["fate"], np.int64)
        arrays[f"{name}.n_branch_points"] = np.array(int(v["n_branch_points"]))
        arrays[f"{name}.seconds"] = np.array(float(v["seconds"]))
        arrays[f"{name}.warnings"] = np.array(json.dumps(list(v["warnings"])))
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def main_default(run, description: str, *, packages: tuple[str, ...], moved: tuple[str, ...] = (), **info_fields) -> None:
    """The command line of a tool with one variant: read, warm up, run, and save; the ``moved`` fields of the
    variant go to the run's info, with ``info_fields`` and the versions of ``packages``."""
    args = parse_args(description)
    adata, root = read(args.data)
    info = warm_up(run, adata, root, args.no_warmup)
    variant = run(adata, root)
    info.update({name: variant.pop(name) for name in moved}, **info_fields, versions=versions(*packages))
    save(args.out, {"default": variant}, info)

