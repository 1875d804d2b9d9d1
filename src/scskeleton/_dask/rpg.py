"""Regularized principal graphs (tree and ℓ1 graph) on a dask array of cells, chunk by chunk.

An iteration of :func:`scskeleton._core.trees.rpg.rpg` needs from the cells only PᵀX,
1ᵀP and Σ p log p (:func:`~scskeleton._core.trees.rpg.assignment_sums`), all additive over
cells: one pass over the chunks computes P (eq. 18) per chunk and adds them, and the driver
solves W (eq. 20, or the ℓ1 program on the K landmarks) and C (eq. 22) as in memory.
Landmarks are k-means centroids of the same deterministic subsample, so both paths run the
same iterations. P is never stored: the result's assignment is recomputed chunk by chunk
when read. Pruning and the gap test judge the cells as in :mod:`scskeleton._dask.ddrtree`.
"""

from __future__ import annotations

from collections.abc import Callable

import dask.array as da
import numpy as np

from .._core.trees.assign import kmeans, soft_assignment
from .._core.trees.l1_program import L1Program
from .._core.trees.pruning import MIN_EXTENSION, MIN_MASS
from .._core.trees.rpg import RPGResult, assignment_sums, check_settings, default_sigma, descend, finish_graph, iterate
from .._core.trees.skeleton import adjacent_cells, gap_profiles, shared_mass
from .._core.validation import check_cells_differ, check_positive
from .blocks import block_sum, finite_column_sums, float_block, gather_rows, judged_rows, lazy_assignment, rechunk_rows
from .ddrtree import JUDGED_CELLS


def rpg_chunked(
    data: da.Array,
    *,
    graph: str = "tree",
    n_nodes: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float = 1.0,
    n_neighbors: int = 5,
    maxiter: int = 50,
    tol: float = 1e-5,
    over_relax: bool = False,
    random_state: int = 0,
    prune: bool = False,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    chunk_rows: int | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> RPGResult:
    """:func:`~scskeleton._core.trees.rpg.rpg` on a dask array ``data`` (N × D), one pass over the cells
    per iteration. Same parameters and result; ``assignment`` is a lazy dask array. ``chunk_rows``
    rechunks the cells (``None``: as stored)."""
    data = rechunk_rows(data, chunk_rows)
    settings = check_settings(
        data.shape, graph=graph, n_nodes=n_nodes, gamma=gamma, lam=lam, n_neighbors=n_neighbors, maxiter=maxiter,
        tol=tol, random_state=random_state, min_branch_extension=min_branch_extension,
        min_branch_fraction=min_branch_fraction,
    )
    n_points = data.shape[0]
    finite_column_sums(data)  # a ValueError on NaN or infinite values, before any fit
    if settings.n_nodes == n_points:
        landmarks = gather_rows(data, None)
    else:
        landmarks = kmeans(data.astype(float), settings.n_nodes, random_state=settings.random_state)
    # k-means keeps any spread of the cells; identical cells leave only its averages' round-off
    check_cells_differ(float(np.ptp(landmarks, axis=0).max(initial=0.0) - 1e-10 * np.abs(landmarks).max()), "the data")
    sigma = default_sigma(landmarks) if sigma is None else check_positive(
        "sigma", sigma, role="bandwidth of the soft assignment, eq. 18"
    )
    centers = landmarks.copy()
    program = L1Program(landmarks, settings.n_neighbors, settings.lam) if graph == "l1" else None
    data_norm2 = float(block_sum(_squared_norm, [data]))

    def step(start):
        sums = block_sum(_assignment_block, [data], start, sigma)
        return iterate(start, sums, program, data_norm2=data_norm2, gamma=settings.gamma, lam=settings.lam, sigma=sigma)

    descent = descend(
        centers, step, maxiter=settings.maxiter, tol=settings.tol, over_relax=over_relax, callback=callback
    )
    # P of the last step belongs to the centers that step started from
    return finish_graph(
        judged_rows(data, JUDGED_CELLS, settings.random_state), descent, landmarks, program, settings, sigma,
        prune=prune,
        skeleton_sums=lambda edges: (*block_sum(_shared_mass_block, [data], descent.assigned, sigma, edges),
                                     block_sum(_adjacent_block, [data], descent.centers, edges),
                                     block_sum(_gap_profile_block, [data], descent.centers, edges)),
        assignment=lazy_assignment(data, descent.assigned, sigma),
        reassign=lambda nodes: lazy_assignment(data, nodes, sigma),
    )


def _squared_norm(block) -> float:
    return float(np.sum(float_block(block) ** 2))


def _assignment_block(block, centers: np.ndarray, sigma: float):
    block = float_block(block)
    assignment = soft_assignment(block, centers, sigma)
    return assignment_sums(assignment.matrix, block, assignment.neg_entropy)


def _adjacent_block(block, centers: np.ndarray, candidates: np.ndarray):
    return adjacent_cells(float_block(block), centers, candidates)


def _gap_profile_block(block, centers: np.ndarray, candidates: np.ndarray):
    return gap_profiles(float_block(block), centers, candidates)


def _shared_mass_block(block, centers: np.ndarray, sigma: float, candidates: np.ndarray):
    return shared_mass(soft_assignment(float_block(block), centers, sigma).matrix, candidates)


__all__ = ["rpg_chunked"]
