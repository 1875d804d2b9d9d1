"""DDRTree (Algorithm 2, objective 31) on a dask array of cells, chunk by chunk.

The in-memory solver (:func:`scskeleton._core.trees.ddrtree.ddrtree`) evaluates
Proposition 5 as sums over cells followed by small solves. Here each sum is taken
block by block over the row chunks of Y and added on the driver, so only K × K,
K × D and D × D arrays live there. One iteration is one pass over the cells: per
chunk,

1. the Z of the last iteration's eq. (33), Z_c = (Y_cW + R_cΨ)/(1 + gamma), from the
   stored Z_c and C (R_c recomputed by eq. 32, never stored: N × K need not fit
   anywhere), kept in (worker) memory;
2. this iteration's R_c from that Z_c and the current C, emitting R_cᵀR_c, R_cᵀY_c,
   1ᵀR_c and Σ r log r.

On the driver: the MST (eq. 28), M and its Cholesky factor, W and Ψ = M⁻¹RᵀYW, and
then C and the objective without a second pass: RᵀZ, ||Z||² and ||YW − Z||² of the
updated Z follow from YᵀY, RᵀR and RᵀY
(:func:`~scskeleton._core.trees.ddrtree.latent_sums_from_assignment`). A last pass
stores the final Z and the cells' own coordinates YW, which place them on the tree.

Before the loop, two passes give the mean and YᵀY, and k-means seeds C on the same
deterministic subsample of Z as the in-memory solver, so both paths run the same
iterations: their objectives agree to round-off, whatever the chunking.
Pruning and the gap test judge YW on all cells up to :data:`JUDGED_CELLS` and on a
uniform sample of that many (drawn from ``random_state``) beyond: both work on
quantiles and shares of cells, which a sample of 200,000 fixes far more finely
than their thresholds.
"""

from __future__ import annotations

from collections.abc import Callable

import dask.array as da
import numpy as np
from dask import delayed

from .._core.embed import principal_directions
from .._core.graphs import laplacian, minimum_spanning_tree
from .._core.trees.assign import kmeans, soft_assignment
from .._core.trees.ddrtree import (
    CENTROID_CELLS,
    DDRTreeResult,
    ProjectionStep,
    assignment_sums,
    check_settings,
    default_sigma,
    latent_sums_from_assignment,
    objective_value,
    record_iteration,
    solve_centers,
    solve_projection,
    update_latent,
)
from .._core.trees.defaults import MAX_CENTERS, default_n_components
from .._core.trees.gaps import bridging_edges
from .._core.trees.pruning import MIN_EXTENSION, MIN_MASS, prune_tree
from .._core.validation import check_cells_differ
from .blocks import (
    block_sum,
    finite_column_sums,
    float_block,
    from_blocks,
    judged_rows,
    lazy_assignment,
    persist,
    rechunk_rows,
    tree_sum,
)

#: Pruning and the gap test see at most this many cells (a uniform sample beyond).
JUDGED_CELLS = 200_000

__all__ = ["ddrtree_chunked", "MAX_CENTERS"]


def ddrtree_chunked(
    data: da.Array,
    *,
    n_components: int | None = None,
    n_centers: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float | None = None,
    maxiter: int = 100,
    tol: float = 1e-3,
    random_state: int = 0,
    prune: bool = False,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    chunk_rows: int | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> DDRTreeResult:
    """:func:`~scskeleton._core.trees.ddrtree.ddrtree` on a dask array ``data`` (N × D), chunked over cells.

    Same parameters and result; ``latent`` (Z) and ``cells`` (YW) are dask
    arrays held in (worker) memory and ``assignment`` (R) a lazy dask array
    recomputed from YW and C chunk by chunk when read. ``chunk_rows`` rechunks the cells
    (``None``: as stored). Runs on whatever dask scheduler is active, e.g. a
    ``dask.distributed`` client.
    """
    data = rechunk_rows(data, chunk_rows)
    settings = check_settings(
        data.shape, n_components=n_components, n_centers=n_centers, sigma=sigma, gamma=gamma, lam=lam,
        maxiter=maxiter, tol=tol, random_state=random_state,
        min_branch_extension=min_branch_extension, min_branch_fraction=min_branch_fraction,
    )
    sigma, gamma, lam = settings.sigma, settings.gamma, settings.lam
    n_cells = data.shape[0]
    sizes = data.chunks[0]

    mean = finite_column_sums(data) / n_cells
    gram = block_sum(_centred_gram, [data], mean)  # YᵀY of the centred Y
    data_norm2 = float(np.trace(gram))
    # identical cells leave only the round-off of the chunked mean, (1e-16 · |mean|)² per cell
    check_cells_differ(data_norm2 - 1e-20 * n_cells * float(mean @ mean), "the data")
    n_components = default_n_components(gram) if settings.n_components is None else settings.n_components

    projection = principal_directions(gram, n_components)
    latent_blocks = persist(*[delayed(_project)(block, mean, projection) for block in data.to_delayed().ravel()])
    latent = from_blocks(latent_blocks, sizes, n_components)
    if settings.n_centers == n_cells:
        centers = np.asarray(latent.compute(), dtype=float)
    else:
        centers = kmeans(latent, settings.n_centers, random_state=settings.random_state)
    if sigma is None:
        sigma = default_sigma(centers)

    objective: list[float] = []
    converged = False
    data_blocks = list(data.to_delayed().ravel())
    advance = None  # (W, Ψ, C) of the last iteration: what turns the stored Z into the updated one
    for iteration in range(1, settings.maxiter + 1):
        tree = minimum_spanning_tree(centers)  # eq. (28)
        graph_laplacian = laplacian(tree)
        if advance is None:
            sums = tree_sum(
                [delayed(_assignment_block)(y, z, mean, centers, sigma) for y, z in zip(data_blocks, latent_blocks)]
            ).compute()
        else:  # Z of the last iteration's eq. (33), then this iteration's R: one pass over the cells
            parts = [
                delayed(_advance_and_assign, nout=2)(y, z, mean, *advance, gamma, centers)
                for y, z in zip(data_blocks, latent_blocks)
            ]
            *latent_blocks, total = persist(*[part[0] for part in parts], tree_sum([part[1] for part in parts]))
            sums = total.compute()
        step = solve_projection(gram, sums, graph_laplacian, gamma=gamma, lam=lam, n_components=n_components)
        latent_part = latent_sums_from_assignment(sums, gram, step, gamma=gamma)
        advance = (centers, sigma, step.projection, step.latent_rhs)
        projection, centers = step.projection, solve_centers(step, latent_part)
        value = objective_value(
            projection, centers, sums, latent_part,
            data_norm2=data_norm2, gram=gram, graph_laplacian=graph_laplacian, sigma=sigma, gamma=gamma, lam=lam,
        )
        if record_iteration(objective, value, iteration, callback, settings.tol):
            converged = True
            break
    # the last Z of eq. (33) and the cells' own coordinates YW, which place them on the tree as in
    # memory (see core.ddrtree), in one pass over the cells
    parts = [delayed(_cells_and_latent, nout=2)(y, z, mean, *advance, gamma) for y, z in zip(data_blocks, latent_blocks)]
    blocks = persist(*[part[0] for part in parts], *[part[1] for part in parts])
    cell_blocks, latent_blocks = blocks[: len(parts)], blocks[len(parts):]

    tree = minimum_spanning_tree(centers)
    judged = (judged_rows(data, JUDGED_CELLS, settings.random_state) - mean) @ projection  # YW of the judged cells
    n_pruned = 0
    if prune:
        pruned = prune_tree(
            judged, centers, tree, min_extension=settings.min_branch_extension, min_mass=settings.min_branch_fraction,
            centroid_cells=CENTROID_CELLS,
        )
        centers, tree, n_pruned = centers[pruned.keep], pruned.adjacency, pruned.removed_branches
    latent = from_blocks(latent_blocks, sizes, n_components)
    cells = from_blocks(cell_blocks, sizes, n_components)
    assignment = lazy_assignment(cells, centers, sigma)
    return DDRTreeResult(
        projection=projection,
        latent=latent,
        cells=cells,
        centers=centers,
        tree=tree,
        assignment=assignment,
        objective=np.asarray(objective),
        n_iter=len(objective),
        converged=converged,
        mean=mean,
        sigma=sigma,
        n_pruned=n_pruned,
        gap_edges=bridging_edges(judged, centers, tree),
    )


# Block functions: numpy in, numpy out, run on the workers.


def _centred_gram(block, mean: np.ndarray) -> np.ndarray:
    centred = float_block(block) - mean
    return centred.T @ centred


def _project(block, mean: np.ndarray, projection: np.ndarray) -> np.ndarray:
    return (float_block(block) - mean) @ projection


def _assignment_block(block, latent: np.ndarray, mean: np.ndarray, centers: np.ndarray, sigma: float):
    assignment = soft_assignment(latent, centers, sigma)
    return assignment_sums(assignment.matrix, float_block(block) - mean, assignment.neg_entropy)


def _cells_and_latent(block, latent, mean, centers, sigma, projection, latent_rhs, gamma):
    """YW and Z = (YW + RΨ)/(1 + gamma) (eq. 33), with R (eq. 32) recomputed from the previous Z and C."""
    resp = soft_assignment(latent, centers, sigma).matrix
    step = ProjectionStep(projection=projection, latent_rhs=latent_rhs, smoothing_factor=())
    return update_latent(float_block(block) - mean, resp, step, gamma=gamma)


def _advance_and_assign(block, latent, mean, old_centers, sigma, projection, latent_rhs, gamma, centers):
    """The new Z of :func:`_cells_and_latent`, then its assignment sums to the current centers."""
    new_latent = _cells_and_latent(block, latent, mean, old_centers, sigma, projection, latent_rhs, gamma)[1]
    assignment = soft_assignment(new_latent, centers, sigma)
    return new_latent, assignment_sums(assignment.matrix, float_block(block) - mean, assignment.neg_entropy)
