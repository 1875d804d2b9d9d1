"""Writing a fitted graph into AnnData in the shared schema (one place for all learners)."""

from __future__ import annotations

import numbers

import numpy as np
from anndata import AnnData
from scipy import sparse

from .. import __version__
from .._schema import assignment_key, latent_key, pseudotime_key, segment_key


def plain_params(params: dict) -> dict:
    """Parameters as plain Python scalars/strings, so they survive h5ad; no None."""
    out = {}
    for name, value in params.items():
        if value is None:
            raise ValueError(f"Parameter {name!r} must be resolved before it is stored (got None).")
        if isinstance(value, (bool, np.bool_)):
            out[name] = bool(value)
        elif isinstance(value, numbers.Integral):
            out[name] = int(value)
        elif isinstance(value, numbers.Real):
            out[name] = float(value)
        else:
            out[name] = str(value)
    out["version"] = __version__
    return out


def write_graph(
    adata: AnnData,
    key: str,
    *,
    method: str,
    params: dict,
    nodes: np.ndarray,
    space: str,
    adjacency: sparse.spmatrix,
    objective: np.ndarray,
    n_iter: int,
    converged: bool,
    projection: np.ndarray | None = None,
    latent: np.ndarray | None = None,
    assignment=None,
) -> list[str]:
    """Store a fitted graph under ``key``; return the fields written, for logging.

    Replaces everything a previous fit under the same key wrote, including
    trajectory results that referred to the old graph.
    """
    for stale in (pseudotime_key(key), segment_key(key)):
        if stale in adata.obs:
            del adata.obs[stale]
    entry = {
        "method": method,
        "params": plain_params(params),
        "nodes": np.asarray(nodes, dtype=float),
        "space": space,
        "adjacency": sparse.csr_matrix(adjacency, dtype=float),
        "objective": np.asarray(objective, dtype=float),
        "n_iter": int(n_iter),
        "converged": bool(converged),
    }
    written = [f"uns[{key!r}]"]
    if projection is not None:
        entry["projection"] = np.asarray(projection, dtype=float)
    adata.uns[key] = entry
    if latent is not None:
        adata.obsm[latent_key(key)] = np.asarray(latent, dtype=float)
        written.append(f"obsm[{latent_key(key)!r}]")
    if assignment is not None:
        adata.obsm[assignment_key(key)] = sparse.csr_matrix(assignment) if sparse.issparse(assignment) else np.asarray(assignment)
        written.append(f"obsm[{assignment_key(key)!r}]")
    return written
