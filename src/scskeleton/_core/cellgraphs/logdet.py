"""Log-determinant programs over graph Laplacians (MPME, SPL, ESL, FSL).

All four methods learn non-negative weights w_e on a set of candidate edges
e = (i, j) of a cell graph by optimising an objective whose non-linear part is

    log det Q(w),   Q(w) = shift · I + scale · L(w),   L(w) = diag(W1) - W,

with W symmetric and w_e = W_ij = W_ji. Q is positive definite for w ≥ 0 and
shift > 0. Moving one undirected weight w_e changes Q by scale · A_ij with
A_ij = (e_i - e_j)(e_i - e_j)ᵀ, so (eq. 14 of the MPME paper, eq. 23 of ESL,
the log-det part of eq. 20 of SPL)

    ∂ log det Q / ∂w_e = scale · Tr(Q⁻¹ A_ij) = scale · (Q⁻¹_ii + Q⁻¹_jj - 2 Q⁻¹_ij).

One Cholesky factorisation of Q gives the value (twice the sum of the log
diagonal) and, through LAPACK's ``potri``, the inverse whose entries the
gradient gathers on the candidate edges. Q is dense N × N: these methods are
O(N³) per evaluation by nature (the papers' own complexity), so they are for
up to a few thousand cells; :func:`check_dense_size` says so before any work.
Above that the ``tl`` adapters fit them on k-means landmarks
(:mod:`~scskeleton._core.cellgraphs.landmarks`).
The candidate edges keep the number of variables O(N · k) instead of O(N²).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize

from ..graphs import knn_edges

#: Largest number of cells the dense log-det learners accept.
MAX_DENSE_POINTS = 5_000


def check_dense_size(n_points: int, method: str, *, limit: int = MAX_DENSE_POINTS) -> None:
    """Raise a ValueError naming the alternatives when N is beyond dense O(N³) work."""
    if n_points > limit:
        raise ValueError(
            f"{method} works with dense {n_points} × {n_points} matrices (O(N³) per iteration) and "
            f"supports at most {limit:,} cells; got {n_points:,}. Subsample the cells first "
            "(e.g. sc.pp.subsample(adata, n_obs=...)), fit it on k-means landmarks (the sks.tl function's "
            "n_landmarks=, its default above this size), or learn a principal graph over landmarks "
            "with sks.tl.rpg / sks.tl.rpg_l1, which scale to millions of cells."
        )


def all_pairs(n_points: int) -> np.ndarray:
    """Every undirected pair (i < j) as an E × 2 array, E = N(N-1)/2."""
    heads, tails = np.triu_indices(n_points, k=1)
    return np.column_stack([heads, tails]).astype(np.intp)


def candidate_edges(points: np.ndarray, n_neighbors: int | None) -> np.ndarray:
    """All pairs (``n_neighbors=None``) or the symmetrised k-nearest-neighbour edges."""
    if n_neighbors is None:
        return all_pairs(points.shape[0])
    return knn_edges(points, n_neighbors)


def check_candidate_edges(edges, n_points: int) -> np.ndarray:
    """Given candidate edges (a kNN graph built elsewhere, e.g. by ``sc.pp.neighbors``) as the sorted
    E × 2 array of distinct pairs i < j that the learners take; ValueError when they are not pairs of
    distinct points in [0, n_points)."""
    edges = np.asarray(edges)
    if edges.ndim != 2 or edges.shape[1] != 2 or edges.shape[0] == 0 or not np.issubdtype(edges.dtype, np.integer):
        raise ValueError(f"edges must be a non-empty E × 2 integer array of point pairs; got shape {edges.shape}, "
                         f"dtype {edges.dtype}.")
    if edges.min() < 0 or edges.max() >= n_points or np.any(edges[:, 0] == edges[:, 1]):
        raise ValueError(f"edges must join two distinct points in [0, {n_points - 1}].")
    pairs = np.column_stack([edges.min(axis=1), edges.max(axis=1)])
    return np.unique(pairs, axis=0).astype(np.intp)


def edge_squared_distances(points: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """||p_i - p_j||² for every edge (i, j), as differences squared (no cancellation)."""
    diff = points[edges[:, 0]] - points[edges[:, 1]]
    return np.einsum("ij,ij->i", diff, diff)


def regularized_laplacian(
    edges: np.ndarray, weights: np.ndarray, n_points: int, *, shift: float, scale: float = 1.0
) -> np.ndarray:
    """Dense Q = shift · I + scale · L(w) for edge weights ``w`` on ``edges``."""
    matrix = np.zeros((n_points, n_points))
    heads, tails = edges[:, 0], edges[:, 1]
    matrix[heads, tails] = -scale * weights
    matrix[tails, heads] = -scale * weights
    degree = np.bincount(heads, weights=weights, minlength=n_points) + np.bincount(
        tails, weights=weights, minlength=n_points
    )
    matrix[np.diag_indices(n_points)] = shift + scale * degree
    return matrix


def edge_resistance(inverse: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Tr(Q⁻¹ A_ij) = Q⁻¹_ii + Q⁻¹_jj - 2 Q⁻¹_ij on every edge (i, j)."""
    diagonal = np.diagonal(inverse)
    heads, tails = edges[:, 0], edges[:, 1]
    return diagonal[heads] + diagonal[tails] - 2.0 * inverse[heads, tails]


@dataclass(frozen=True)
class LaplacianLogDet:
    """log det Q and what its gradient and the decoders need.

    Attributes
    ----------
    value
        log det Q.
    edge_gradient
        ∂ log det Q / ∂w_e for every candidate edge (both entries of W move).
    inverse
        Q⁻¹, dense and symmetric (the MPME/ESL kernel before centring).
    factor
        Lower Cholesky factor of Q, as returned by ``scipy.linalg.cho_factor``,
        for further solves (``linalg.cho_solve(factor, B)``).
    """

    value: float
    edge_gradient: np.ndarray
    inverse: np.ndarray
    factor: tuple


def laplacian_logdet(
    edges: np.ndarray, weights: np.ndarray, n_points: int, *, shift: float, scale: float = 1.0
) -> LaplacianLogDet:
    """log det(shift · I + scale · L(w)) and its gradient on the edges, by one Cholesky."""
    matrix = regularized_laplacian(edges, weights, n_points, shift=shift, scale=scale)
    try:
        factor = linalg.cho_factor(matrix, lower=True, check_finite=False, overwrite_a=True)
    except linalg.LinAlgError as err:  # only reachable with negative weights or shift ≤ 0
        raise ValueError(
            "The regularised Laplacian shift·I + scale·L is not positive definite; "
            "edge weights must be non-negative and the shift positive."
        ) from err
    lower = factor[0]
    value = 2.0 * float(np.sum(np.log(np.diagonal(lower))))
    inverse, info = linalg.lapack.dpotri(lower, lower=1)
    if info != 0:
        raise ValueError(f"Inverting the regularised Laplacian failed (LAPACK dpotri info={info}).")
    # dpotri fills the lower triangle only; mirror it.
    inverse = np.tril(inverse) + np.tril(inverse, -1).T
    return LaplacianLogDet(
        value=value,
        edge_gradient=scale * edge_resistance(inverse, edges),
        inverse=inverse,
        factor=factor,
    )


@dataclass(frozen=True)
class BoxProgramResult:
    """Result of :func:`minimize_box`.

    Attributes
    ----------
    weights
        The minimiser, one value per variable.
    objective
        Objective value after each L-BFGS-B iteration.
    n_iter
        Number of iterations.
    converged
        Whether L-BFGS-B met its stopping rule (not the iteration limit).
    message
        L-BFGS-B's own message.
    """

    weights: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    message: str


def minimize_box(
    value_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    start: np.ndarray,
    *,
    upper: float | np.ndarray,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], None] | None = None,
) -> BoxProgramResult:
    """Minimise a smooth function of edge weights over 0 ≤ w ≤ ``upper`` by L-BFGS-B.

    The box-constrained form is what makes MPME (13) and ESL (20) tractable:
    L is positive semidefinite for any w ≥ 0, so no semidefinite constraint is
    needed. ``upper`` may be ``inf``, or one bound per variable (an array,
    entries may be ``inf``). L-BFGS-B stops when the relative
    decrease of the objective falls below ``tol`` (its ``ftol``), when the
    projected gradient vanishes, or after ``maxiter`` iterations.
    """
    trace: list[float] = []

    def record(intermediate_result) -> None:
        trace.append(float(intermediate_result.fun))
        if callback is not None:
            callback(len(trace), trace[-1])

    result = optimize.minimize(
        value_and_gradient,
        np.asarray(start, dtype=float),
        jac=True,
        method="L-BFGS-B",
        bounds=optimize.Bounds(0.0, upper),
        callback=record,
        options={"maxiter": int(maxiter), "ftol": float(tol), "gtol": 1e-10, "maxcor": 20},
    )
    if not trace:  # stopped before its first iteration (already optimal at the start)
        trace.append(float(result.fun))
    return BoxProgramResult(
        weights=np.clip(result.x, 0.0, upper),
        objective=np.asarray(trace),
        n_iter=len(trace),
        converged=bool(result.status == 0),
        message=str(result.message),
    )
