"""The recipe every learner follows, written once.

A learner resolves its key and seed and reads its representation (:func:`read_input`), checks
that the representation suits a tree (:func:`check_tree_input`, the tree learners), fits inside
a solver run that logs, shows progress and sets the threads (:func:`fit_run`), warns when the
solver stopped early (:func:`warn_unconverged`), and writes its result and logs the end
(:func:`finish`). The dense cell-level learners (MPME, SPL, ESL, FSL, convex embedding) also
share how a fit on landmarks is written (:func:`write_cell_graph`, :func:`cell_graph_summary`).
What differs between learners — the parameters, the core solver, the fields of its own — stays
in each learner's module.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import (
    check_key,
    check_random_state,
    choose_representation,
    detected_genes,
    get_representation,
    warn_if_counts,
    warn_if_diffusion_map,
    warn_if_few_cells,
    warn_if_genes,
    warn_if_scaled,
)
from ..._anndata.progress import SolverRun, solver_run
from ..._anndata.results import write_result
from ..._core.cellgraphs.landmarks import LandmarkGraph
from ..._core.depth import depth_components, sampled_rows
from ..._dask import is_dask
from .landmarks import landmark_summary, write_landmark_graph


@dataclass(frozen=True)
class LearnerInput:
    """What every learner resolves first: where it writes, its seed, and the cells' coordinates."""

    #: The key of the result (``key_added`` or the learner's default).
    key: str
    #: The integer seed used (recorded in ``params``).
    random_state: int
    #: The ``obsm`` key (or ``"X"``) read.
    use_rep: str
    #: N × D coordinates: a numpy array, or a dask array for the learners that fit in chunks.
    data: Any


def read_input(
    adata: AnnData,
    *,
    key_added: str | None,
    method: str,
    use_rep: str | None,
    n_pcs: int | None,
    random_state: int | np.random.Generator | None,
    lazy: bool = False,
) -> LearnerInput:
    """Resolve the key (default ``method``), the seed and the representation of a learner's call.

    ``lazy`` keeps a dask array as it is (for the learners that fit chunk by chunk)."""
    key = check_key(key_added, method)
    seed = check_random_state(random_state)
    use_rep = choose_representation(adata, use_rep)
    data = get_representation(adata, use_rep=use_rep, n_pcs=n_pcs, lazy=lazy, varying=True)
    return LearnerInput(key, seed, use_rep, data)


def check_tree_input(adata: AnnData, inputs: LearnerInput, name: str) -> None:
    """Warn when the representation is not one a tree should be fitted to: raw counts, scaled
    genes, a diffusion map, genes rather than components, or very few cells."""
    warn_if_counts(adata, inputs.use_rep, name)
    warn_if_scaled(adata, inputs.use_rep, name)
    warn_if_diffusion_map(adata, inputs.use_rep, name)
    warn_if_genes(inputs.use_rep, inputs.data.shape[1], name)
    warn_if_few_cells(inputs.data.shape[0], name)


def without_depth(adata: AnnData, inputs: LearnerInput, name: str, *,
                  ignore_depth: bool) -> tuple[LearnerInput, list]:
    """``inputs`` with the components that carry sequencing depth (:mod:`~scskeleton._core.depth`)
    set to their mean, so that the tree ignores them, and those components (0-based).

    A column set to one value adds the same term to a cell's distance from every node, so the
    fit, the cells' assignment and any later projection of cells onto the nodes behave as if the
    column were gone, and the nodes keep the representation's dimensions (plots, ``tl.project``).
    The check needs each cell's number of detected genes (:func:`detected_genes`) and an
    in-memory representation of components (``use_rep`` other than ``"X"``); without them, or with
    ``ignore_depth=False``, ``inputs`` are returned as they are."""
    if not ignore_depth or inputs.use_rep == "X" or is_dask(inputs.data):
        return inputs, []
    rows = sampled_rows(inputs.data.shape[0])
    detected, source = detected_genes(adata, rows)
    if detected is None:
        return inputs, []
    found = depth_components(inputs.data[rows], detected)
    if found.columns.size == 0:
        return inputs, []
    columns = [int(c) for c in found.columns]
    listed = ", ".join(f"{c + 1} (Spearman {r:+.2f} with the genes detected per cell, {p:.2f} of it predicted by "
                       "the other components)" for c, r, p in zip(columns, found.correlation, found.predicted))
    logg.warning(
        f"{name}: component(s) {listed} of adata.obsm[{inputs.use_rep!r}] follow the cells' sequencing depth "
        f"({source}) and no cell state, so the tree ignores them. Normalise the depth away before the PCA (e.g. "
        "sc.experimental.pp.normalize_pearson_residuals), or pass ignore_depth=False to fit them."
    )
    data = np.array(inputs.data, dtype=float, copy=True)
    data[:, columns] = data[:, columns].mean(axis=0)
    return replace(inputs, data=data), columns


def depth_list(columns: list) -> str:
    """The ignored depth components as ``params`` stores them: their 0-based indices, comma-separated."""
    return ",".join(str(int(c)) for c in columns)


def stored_depth(params) -> np.ndarray:
    """The depth components a fit ignored, from its ``params`` (:func:`depth_list`; none for older fits)."""
    return np.array([int(c) for c in str(params.get("depth_components", "")).split(",") if c], dtype=np.intp)


def landmark_detail(n_landmarks: int | None) -> str:
    """The start-of-run log's note that a dense learner fits on k-means landmarks."""
    return "" if n_landmarks is None else f" over {n_landmarks} k-means landmarks"


def fit_run(
    name: str, inputs: LearnerInput, *, maxiter: int, size: int, detail: str = "", **options
) -> AbstractContextManager[SolverRun]:
    """:func:`~scskeleton._anndata.progress.solver_run` for ``inputs``; a dask array is fitted in
    chunks, and the log says over how many blocks of cells."""
    chunked = is_dask(inputs.data)
    if chunked:
        detail = f" chunked over {inputs.data.numblocks[0]} blocks of cells"
    return solver_run(name, use_rep=repr(inputs.use_rep), shape=inputs.data.shape, maxiter=maxiter, size=size,
                      chunked=chunked, detail=detail, **options)


def warn_unconverged(name: str, *, after: str, what: str, note: str = "") -> None:
    """The warning of a solver that stopped at its iteration limit: ``what`` may not be final."""
    logg.warning(f"{name} stopped after {after} before converging{note}, so {what} may not be final. Rerun with a "
                 "larger maxiter.")


def fit_params(inputs: LearnerInput, n_pcs: int, own: dict, *, maxiter: int, tol: float,
               neighbors_key: str | None = None) -> dict:
    """The ``params`` a learner records: the representation, its own parameters, the solver's limits,
    the seed and the neighbour graph it reused, if any."""
    return {
        "use_rep": inputs.use_rep,
        "n_pcs": n_pcs,
        **own,
        "maxiter": maxiter,
        "tol": tol,
        "random_state": inputs.random_state,
        **({} if neighbors_key is None else {"neighbors_key": neighbors_key}),
    }


def write_cell_graph(
    adata: AnnData,
    key: str,
    *,
    method: str,
    graph: LandmarkGraph | None,
    space: str,
    latent: np.ndarray,
    connectivities=None,
    obs: dict | None = None,
    landmark_obs: dict | None = None,
    **fields,
) -> list[str]:
    """Write a dense learner's result: its cell graph and embedding (``graph`` None, the exact fit),
    or the node graph over its landmarks (``space``: where those nodes live), with ``obs`` columns
    for the cells of each."""
    if graph is None:
        return write_result(adata, key, method=method, latent=latent, connectivities=connectivities, obs=obs,
                            **fields)
    return write_landmark_graph(adata, key, method=method, graph=graph, space=space, obs=landmark_obs, **fields)


def cell_graph_summary(exact: str, graph: LandmarkGraph | None, *, on_landmarks: str | None = None) -> str:
    """The end-of-run log of a dense learner: ``exact``, or for a landmark fit ``on_landmarks``
    (default ``exact``) and the node graph's description."""
    if graph is None:
        return exact
    return f"{exact if on_landmarks is None else on_landmarks}; {landmark_summary(graph)}"


def finish(adata: AnnData, *, copy: bool, run: SolverRun, summary: str,
           write: Callable[[AnnData], list[str]]) -> AnnData | None:
    """Write the result into ``adata`` (or its copy), log the end of the run with the fields written,
    and return what the learner returns."""
    adata = adata.copy() if copy else adata
    run.finished(summary, write(adata))
    return adata if copy else None
