"""Perplexity-calibrated conditional affinities (SNE / t-SNE, eq. 1 of ESL).

For every point i a Gaussian bandwidth σ_i is chosen so that the conditional
distribution over its neighbours

    p_{j|i} = exp(-d_ij / 2σ_i²) / Σ_{k≠i} exp(-d_ik / 2σ_i²),   d_ij = ||x_i - x_j||²,

has perplexity exp(H(P_i)) = u (entropy in nats). The binary search runs on
all points at once: one N × K array of squared distances to each point's
neighbours (K = N with the point itself masked for all pairs, or the
candidate neighbours padded with ``inf``), one vectorised entropy per step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.spatial import distance

from ..graphs import from_edges, neighbour_table

#: Entropy tolerance of the bandwidth search, in nats (as in scikit-learn's t-SNE).
ENTROPY_TOL = 1e-5
MAX_SEARCH_STEPS = 200


@dataclass(frozen=True)
class ConditionalAffinities:
    """Result of :func:`calibrate_bandwidths`.

    Attributes
    ----------
    probabilities
        N × K, row i holds p_{j|i} on the slots of row i (rows sum to one;
        masked slots are zero).
    bandwidths
        σ_i per point, in the units of the input distances' square root.
    entropy
        H(P_i) in nats at the returned bandwidths (log u where the search met
        its tolerance).
    """

    probabilities: np.ndarray
    bandwidths: np.ndarray
    entropy: np.ndarray


def calibrate_bandwidths(
    sqdist: np.ndarray, perplexity: float, *, tol: float = ENTROPY_TOL, max_steps: int = MAX_SEARCH_STEPS
) -> ConditionalAffinities:
    """p_{j|i} of eq. (1) with σ_i found by binary search on the perplexity ``u``.

    ``sqdist`` is N × K with ``inf`` in slots that are not neighbours (the
    point itself, padding). Distances are shifted by each row's minimum
    (which cancels in eq. 1 and keeps exp from underflowing) and divided by
    the row's mean shifted distance, so the search starts at precision 1 in
    every row whatever the data's scale; the precision β_i = 1/(2σ_i²) is
    doubled / halved until the target entropy is bracketed, then bisected.
    Rows that meet the tolerance stop moving.
    """
    valid = np.isfinite(sqdist)
    row_min = np.min(np.where(valid, sqdist, np.inf), axis=1, keepdims=True)
    shifted = np.where(valid, sqdist - row_min, 0.0)
    counts = valid.sum(axis=1)
    scale = shifted.sum(axis=1) / np.maximum(counts, 1)
    scale[scale <= 0] = 1.0  # all neighbours equidistant: any precision gives the uniform row
    scaled = shifted / scale[:, None]

    target = np.log(perplexity)
    n_rows = sqdist.shape[0]
    beta = np.ones(n_rows)
    low = np.zeros(n_rows)
    high = np.full(n_rows, np.inf)
    entropy = np.empty(n_rows)
    active = np.arange(n_rows)
    for _ in range(max_steps):
        block_beta = beta[active]
        weights = np.exp(-block_beta[:, None] * scaled[active]) * valid[active]
        total = weights.sum(axis=1)
        block_entropy = np.log(total) + block_beta * np.einsum("ij,ij->i", weights, scaled[active]) / total
        entropy[active] = block_entropy
        gap = block_entropy - target
        moving = np.abs(gap) > tol
        active, gap, block_beta = active[moving], gap[moving], block_beta[moving]
        if active.size == 0:
            break
        # H decreases with β: too flat (gap > 0) → sharpen, too sharp → widen
        sharpen = gap > 0
        low[active] = np.where(sharpen, block_beta, low[active])
        high[active] = np.where(sharpen, high[active], block_beta)
        up = np.where(np.isinf(high[active]), 2.0 * block_beta, (block_beta + high[active]) / 2.0)
        beta[active] = np.where(sharpen, up, (block_beta + low[active]) / 2.0)

    weights = np.exp(-beta[:, None] * scaled) * valid
    probabilities = weights / weights.sum(axis=1, keepdims=True)
    precision = beta / scale  # back to the input's units
    return ConditionalAffinities(
        probabilities=probabilities,
        bandwidths=np.sqrt(1.0 / (2.0 * precision)),
        entropy=entropy,
    )


@dataclass(frozen=True)
class EdgeAffinities:
    """Result of :func:`symmetric_edge_affinities`.

    Attributes
    ----------
    symmetric
        p̄_e = (p_{j|i} + p_{i|j}) / 2 on every edge e = (i, j).
    bandwidths
        σ_i per point.
    """

    symmetric: np.ndarray
    bandwidths: np.ndarray


def symmetric_edge_affinities(
    points: np.ndarray, edges: np.ndarray, perplexity: float, *, all_pairs: bool
) -> EdgeAffinities:
    """Symmetrised perplexity affinities p̄_ij on candidate edges (the targets of ESL's eq. 16).

    With ``all_pairs`` every other point is a neighbour of i in eq. (1) (the
    paper); otherwise the normalisation of eq. (1) runs over i's candidate
    neighbours only, as in Barnes–Hut t-SNE, and distances are computed on
    the candidate edges alone (O(N · K · D), no N × N matrix).
    """
    n_points = points.shape[0]
    heads, tails = edges[:, 0], edges[:, 1]
    if all_pairs:
        sqdist = distance.cdist(points, points, "sqeuclidean")
        np.fill_diagonal(sqdist, np.inf)
        result = calibrate_bandwidths(sqdist, perplexity)
        conditional = result.probabilities
        symmetric = (conditional[heads, tails] + conditional[tails, heads]) / 2.0
        return EdgeAffinities(symmetric=symmetric, bandwidths=result.bandwidths)

    table = neighbour_table(from_edges(edges, np.ones(edges.shape[0]), n_points))
    present = table >= 0
    neighbours = np.where(present, table, 0)
    diff = points[:, None, :] - points[neighbours]
    sqdist = np.where(present, np.einsum("ijk,ijk->ij", diff, diff), np.inf)
    result = calibrate_bandwidths(sqdist, perplexity)
    rows = np.broadcast_to(np.arange(n_points)[:, None], table.shape)
    conditional = sparse.csr_matrix(
        (result.probabilities[present], (rows[present], table[present])), shape=(n_points, n_points)
    )
    forward = np.asarray(conditional[heads, tails]).ravel()
    backward = np.asarray(conditional[tails, heads]).ravel()
    return EdgeAffinities(symmetric=(forward + backward) / 2.0, bandwidths=result.bandwidths)
