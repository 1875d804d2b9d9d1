"""New cells on a cell graph, through their nearest reference cells.

A cell-level learner fitted on every cell (MPME, SPL, ESL, FSL, convex
embedding) learns an embedding of its own cells and a graph over them, but no
map that takes a new cell: the embedding is the solution of a program over
all cells at once. A new cell is placed through its neighbours instead, as
``sc.tl.ingest`` places cells on a UMAP: its ``k`` nearest reference cells in
the representation the learner was fitted on, each with a weight, and every
quantity the reference has per cell (embedding, pseudotime, fates, segment)
is their weighted mean or weighted vote. The weights are a sparse
N_new × N_ref matrix with ``k`` non-zeros per row summing to one: the new
cells' soft assignment to the reference cells, which are the cell graph's
nodes.

Weights. Those of UMAP's fuzzy neighbourhood (McInnes et al. 2018, §3.1;
``smooth_knn_dist`` of umap-learn, the weights of ``sc.pp.neighbors``):

    w_ij = exp(-(d_ij - ρ_i) / σ_i),   Σ_j w_ij = log₂ k,

with ρ_i the distance to the nearest reference cell and σ_i found by
bisection for each cell. The nearest neighbour weighs 1 and the rest decay
at a rate set by the cell's own neighbourhood, so the weights need no
bandwidth in the data's units and keep their shape whatever ``k`` is: a
Gaussian whose bandwidth is the distance to the k-th neighbour flattens
towards a plain mean as k grows, these do not (at small k the two
agree). A cell that coincides with a reference cell takes the
largest share of its weight from it, 1/log₂ k (a quarter at k = 15), not
all: neighbours are averaged, never interpolated exactly, so that a noisy
cell does not take one reference cell's value outright, and the reference's
own cells re-projected land close to, not exactly at, their places.

Everything is a pass over blocks of new cells: the neighbour search, the
weights and the products with them; nothing N_new × N_ref is ever dense.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.neighbors import NearestNeighbors

#: New cells searched at once; bounds the block × k arrays of neighbours (sklearn chunks its own distances).
CHUNK_ROWS = 8_192
#: Bisection steps for σ: halves the bracket each time, so 64 reach float resolution from any start.
BISECTION_STEPS = 64
#: σ never falls below this fraction of the cell's mean neighbour distance (umap-learn's MIN_K_DIST_SCALE),
#: so that a cell whose neighbours are all nearly as close as its nearest keeps finite weights.
MIN_SIGMA_SCALE = 1e-3


def neighbour_weights(
    points: np.ndarray, reference: np.ndarray, n_neighbors: int, *, chunk_rows: int = CHUNK_ROWS
) -> sparse.csr_matrix:
    """Each point's weights on its ``n_neighbors`` nearest reference points.

    Parameters
    ----------
    points
        N × D new points.
    reference
        M × D reference points, in the same space.
    n_neighbors
        k, 1 ≤ k ≤ M.
    chunk_rows
        Points searched at once.

    Returns
    -------
    N × M CSR matrix, ``k`` non-zeros per row (the neighbours, by increasing
    distance), rows summing to one (:func:`fuzzy_weights` of the distances).
    """
    n_points, n_reference = points.shape[0], reference.shape[0]
    if not 1 <= n_neighbors <= n_reference:
        raise ValueError(f"n_neighbors must be between 1 and {n_reference} (the reference points); got {n_neighbors}.")
    if points.shape[1] != reference.shape[1]:
        raise ValueError(f"points have {points.shape[1]} columns and the reference {reference.shape[1]}.")
    search = NearestNeighbors(n_neighbors=n_neighbors).fit(reference)
    indices = np.empty((n_points, n_neighbors), dtype=np.intp)
    weights = np.empty((n_points, n_neighbors))
    for lo in range(0, n_points, chunk_rows):
        distance, nearest = search.kneighbors(points[lo : lo + chunk_rows])
        indices[lo : lo + chunk_rows] = nearest
        weights[lo : lo + chunk_rows] = fuzzy_weights(distance)
    indptr = np.arange(0, n_points * n_neighbors + 1, n_neighbors)
    return sparse.csr_matrix((weights.ravel(), indices.ravel(), indptr), shape=(n_points, n_reference))


def fuzzy_weights(distances: np.ndarray) -> np.ndarray:
    """UMAP's neighbourhood weights of each row of neighbour distances, normalised to sum to one.

    ``distances`` is N × k, each row increasing (as a neighbour search
    returns it). Row i gets w_ij = exp(-(d_ij - d_i1) / σ_i) with σ_i such
    that Σ_j w_ij = log₂ k (see the module docstring), found for all rows at
    once by bisection, then divided by its sum. For k ≤ 2 the target is at
    most the nearest neighbour's own weight: all weight goes to it (both
    when they tie).
    """
    distances = np.asarray(distances, dtype=float)
    n_rows, k = distances.shape
    excess = distances - distances[:, :1]
    target = np.log2(k) if k > 1 else 1.0
    floor = MIN_SIGMA_SCALE * distances.mean(axis=1)
    low, high = np.zeros(n_rows), np.full(n_rows, np.inf)
    sigma = np.maximum(excess.mean(axis=1), np.finfo(float).tiny)
    # σ may reach 0 on rows whose neighbours tie with the nearest (0/0): those rows end at the floor below
    with np.errstate(divide="ignore", invalid="ignore"):
        for _ in range(BISECTION_STEPS):
            total = np.exp(-excess / sigma[:, None]).sum(axis=1)
            # the sum grows with σ: too much weight means σ is too large
            too_wide = total > target
            high = np.where(too_wide, sigma, high)
            low = np.where(too_wide, low, sigma)
            sigma = np.where(np.isinf(high), 2.0 * sigma, 0.5 * (low + high))
        sigma = np.maximum(sigma, floor)
        weights = np.exp(-excess / sigma[:, None])
    # σ = 0 only where every distance is 0 (floor 0): the excesses are 0/0, and the neighbours all coincide
    weights[~np.isfinite(weights)] = 1.0
    return weights / weights.sum(axis=1, keepdims=True)


def weighted_mean(weights: sparse.csr_matrix, values: np.ndarray, *, chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """Each row's weighted mean of the reference's ``values`` (M or M × m), ignoring NaN.

    A reference row with a NaN (a cell the reference left without a value,
    e.g. outside every rooted component) drops out of the mean and the other
    neighbours' weights are renormalised, as fate probabilities leave out
    nodes without a fate; a point none of whose neighbours has a value gets
    NaN.
    """
    values = np.asarray(values, dtype=float)
    flat = values.ndim == 1
    table = values[:, None] if flat else values
    known = np.isfinite(table).all(axis=1)
    filled = np.where(known[:, None], table, 0.0)
    out = np.empty((weights.shape[0], table.shape[1]))
    for lo in range(0, weights.shape[0], chunk_rows):
        block = weights[lo : lo + chunk_rows]
        total = block @ known.astype(float)
        mean = np.asarray(block @ filled)
        out[lo : lo + chunk_rows] = np.divide(
            mean, total[:, None], out=np.full_like(mean, np.nan), where=total[:, None] > 1e-12
        )
    return out[:, 0] if flat else out


def weighted_vote(weights: sparse.csr_matrix, codes: np.ndarray, n_categories: int) -> np.ndarray:
    """Each row's category of largest total weight among its neighbours' ``codes``.

    ``codes`` are the reference's category codes (M), -1 for none; those
    neighbours do not vote. Ties go to the lowest code; a point none of whose
    neighbours has a category gets -1. The votes stay sparse (at most k
    categories per row), whatever ``n_categories`` is: a cell graph's
    trajectory has hundreds of segments.
    """
    codes = np.asarray(codes, dtype=np.intp)
    voters = np.flatnonzero(codes >= 0)
    member = sparse.csr_matrix(
        (np.ones(voters.size), (voters, codes[voters])), shape=(codes.size, max(int(n_categories), 1))
    )
    votes = sparse.csr_matrix(weights @ member)
    winner = np.asarray(votes.argmax(axis=1)).ravel().astype(np.intp)
    winner[np.diff(votes.indptr) == 0] = -1
    return winner
