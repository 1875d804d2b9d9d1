"""Writing fitted results into AnnData in the shared schema (one place for all learners)."""

from __future__ import annotations

import numbers
from copy import deepcopy

import numpy as np
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from .._dask import is_dask
from .._version import __version__
from .schema import assignment_key, connectivities_key, latent_key, result_fields


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


def write_result(
    adata: AnnData,
    key: str,
    *,
    method: str,
    params: dict,
    objective: np.ndarray,
    n_iter: int,
    converged: bool,
    uns: dict | None = None,
    latent: np.ndarray | None = None,
    assignment=None,
    connectivities: sparse.spmatrix | None = None,
    obs: dict | None = None,
    var: dict | None = None,
) -> list[str]:
    """Store what a learner fitted under ``key``; return the fields written, for logging.

    ``adata.uns[key]`` gets ``method``, ``params``, ``objective``, ``n_iter``,
    ``converged`` and the method's own ``uns`` fields; ``latent`` goes to
    ``obsm[f"X_{key}"]``, ``assignment`` to ``obsm[f"{key}_assignment"]``,
    ``connectivities`` (a learned cell graph) to ``obsp[f"{key}_connectivities"]``
    with explicit zeros dropped, and ``obs`` / ``var`` columns as named.
    ``uns[key]["n_obs"]`` records the number of cells fitted, so that a
    subset can be told apart later. Replaces everything a previous fit under
    the same key wrote, by whichever learner, including trajectory results
    that referred to the old fit (:func:`clear_result`).
    """
    clear_result(adata, key, keep=params.get("use_rep"))
    entry = {
        "method": method,
        "params": plain_params(params),
        "objective": np.asarray(objective, dtype=float),
        "n_iter": int(n_iter),
        "converged": bool(converged),
        "n_obs": adata.n_obs,
        **(uns or {}),
    }
    adata.uns[key] = entry
    written = [f"uns[{key!r}]"]
    # dask arrays (fits on dask input) stay lazy: they are computed chunk by chunk when read or written
    if latent is not None:
        adata.obsm[latent_key(key)] = latent if is_dask(latent) else np.asarray(latent, dtype=float)
        written.append(f"obsm[{latent_key(key)!r}]")
    if assignment is not None:
        if is_dask(assignment):
            adata.obsm[assignment_key(key)] = assignment
        elif sparse.issparse(assignment):
            adata.obsm[assignment_key(key)] = sparse.csr_matrix(assignment)
        else:
            adata.obsm[assignment_key(key)] = np.asarray(assignment)
        written.append(f"obsm[{assignment_key(key)!r}]")
    if connectivities is not None:
        graph = sparse.csr_matrix(connectivities, dtype=float)
        graph.eliminate_zeros()
        adata.obsp[connectivities_key(key)] = graph
        written.append(f"obsp[{connectivities_key(key)!r}]")
    for name, values in (obs or {}).items():
        adata.obs[name] = values
        written.append(f"obs[{name!r}]")
    for name, values in (var or {}).items():
        adata.var[name] = values
        written.append(f"var[{name!r}]")
    return written


def clear_result(adata: AnnData, key: str, *, keep: str | None = None) -> None:
    """Remove ``uns[key]`` and every field of :func:`~scskeleton._anndata.schema.result_fields` under ``key``.

    A learner reusing a key must not inherit another learner's fields: a
    stale ``obsm[f"{key}_assignment"]`` beside a new cell graph makes
    ``tl.root`` read the old node assignment. ``keep`` is the ``obsm`` key
    the new fit read its cells from (``use_rep``), which may be named like a
    latent field of the old result (``tl.rpg(use_rep="X_g", key_added="g")``
    after ``tl.mpme(key_added="g")``) and is still the space of the new graph.
    """
    for attribute, names in result_fields(key).items():
        stored = getattr(adata, attribute)
        for name in names:
            if name != keep and name in stored:
                del stored[name]
    if key in adata.uns:
        del adata.uns[key]


def update_entry(adata: AnnData, key: str, **fields) -> None:
    """Add ``fields`` to ``adata.uns[key]``, also on a view.

    A view shares its parent's nested dicts, so writing into
    ``adata.uns[key]`` of a view would change the parent while the view stays
    a view. Assigning a fresh entry instead makes anndata turn the view into
    an AnnData of its own (with its ``ImplicitModificationWarning``) and leaves
    the parent untouched.
    """
    if adata.is_view:
        adata.uns[key] = {**deepcopy(dict(adata.uns[key])), **fields}
    else:
        adata.uns[key].update(fields)


def write_graph(
    adata: AnnData,
    key: str,
    *,
    nodes: np.ndarray,
    space: str,
    adjacency: sparse.spmatrix,
    projection: np.ndarray | None = None,
    mean: np.ndarray | None = None,
    gap_edges: np.ndarray | None = None,
    n_pruned: int | None = None,
    lp_adjacency: sparse.spmatrix | None = None,
    uns: dict | None = None,
    **fields,
) -> list[str]:
    """Store a fitted node graph under ``key`` in the shared schema.

    ``uns[key]`` gets ``nodes`` (K × d), ``space`` (the obsm key of the cell
    coordinates in the nodes' space), ``adjacency`` (K × K CSR), for
    learners with one the ``projection`` W and the per-feature ``mean`` it was
    centred with (what ``tl.project`` maps new cells through), and for trees ``gap_edges``
    (E × 2 edges that cross a gap in the data, with a warning when there are
    any) and ``n_pruned`` (terminal branches the pruning removed), for the ℓ1
    graph ``lp_adjacency`` (W of the linear program, of which ``adjacency`` is
    the skeleton), and the learner's own ``uns`` fields; everything else is as
    in :func:`write_result`.
    """
    graph = {
        **(uns or {}),
        "nodes": np.asarray(nodes, dtype=float),
        "space": space,
        "adjacency": sparse.csr_matrix(adjacency, dtype=float),
    }
    if n_pruned is not None:
        graph["n_pruned"] = int(n_pruned)
    if lp_adjacency is not None:
        graph["lp_adjacency"] = sparse.csr_matrix(lp_adjacency, dtype=float)
    if gap_edges is not None:
        graph["gap_edges"] = np.asarray(gap_edges, dtype=np.int64).reshape(-1, 2)
        if len(graph["gap_edges"]):
            use_rep = str((fields.get("params") or {}).get("use_rep", ""))
            # measured: connected simulated trees on X_umap were flagged in 4 and 6 of 15 runs
            embedding = any(name in use_rep.lower() for name in ("umap", "tsne"))
            logg.warning(
                f"{len(graph['gap_edges'])} edge(s) of the tree {key!r} cross a gap where no cells lie, so the "
                "tree bridges separate groups of cells and pseudotime across those edges "
                f"(adata.uns[{key!r}]['gap_edges'], drawn dashed by sks.pl.tree) is not a trajectory"
                + (f"; but the tree was fitted on {use_rep!r}: UMAP and t-SNE open gaps between cells that are "
                   "continuous in the data, so refit on 'X_pca' to tell" if embedding else "")
                + ". For separate lineages or cell types, fit sks.tl.rpg_l1, whose graph can have several "
                "components, or analyse each cluster apart."
            )
    if projection is not None:
        graph["projection"] = np.asarray(projection, dtype=float)
    if mean is not None:
        graph["mean"] = np.asarray(mean, dtype=float)
    return write_result(adata, key, uns=graph, **fields)
