"""Maximum posterior manifold embedding (MPME).

Mao, Wang & Tsang, "A unified probabilistic framework for robust manifold
learning and embedding", Machine Learning 106, 627–650, 2017. The posterior of the
embedding is the matrix normal N(0, (L + λI)⁻¹, I) (eqs. 8, 11, 17) whose
graph Laplacian L = diag(W1) - W comes from the box-constrained convex dual
problem (13):

    max_w  log det(diag(W1) - W + λI) - (1/d) Σ_{j<i} w_ij φ_ij,   0 ≤ w_ij ≤ 4C,

with gradient (14): Tr(Q⁻¹A_ij) - φ_ij / d, Q = L + λI. It is solved by
L-BFGS-B (:func:`.logdet.minimize_box`), the log det and the gradient by one
Cholesky factorisation of Q (:func:`.logdet.laplacian_logdet`). The embedding
is kernel PCA of (L + λI)⁻¹ (eq. 17, the paper's experimental setting) or the
generalised eigenproblem (16).

Three exact devices make the solver practical without changing problem (13):

* Screening. Q ⪰ λI, so Tr(Q⁻¹A_ij) ≤ ‖e_i - e_j‖²/λ = 2/λ and a pair with
  φ_ij ≥ 2d/λ has a non-positive gradient of (13) for every W: its optimal
  weight is 0 and it is left out.
* Scaling. Every active pair satisfies Tr(Q⁻¹A_ij) = φ_ij / d at the optimum,
  so the curvature of (13) along w_ij is about (φ_ij / d)², which spans
  orders of magnitude between near and far pairs. L-BFGS-B works on
  u_ij = w_ij / c_ij with c_ij = min(d/φ_ij, 4C), where every direction has
  unit curvature; the iterates, bounds and objective are those of (13).
  (On the distorted S with C = ∞ this takes 30 iterations instead of more
  than 5,000.)
* Candidate pairs. All pairs up to :data:`ALL_PAIRS_MAX` cells, above that the
  symmetrised :data:`DEFAULT_NEIGHBORS`-nearest-neighbour graph; the learned
  W is sparse and its edges join near cells, so on the generated data the
  30-NN solution reaches the all-pairs objective to 1e-8 (relative).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..embed import kernel_pca, smallest_generalized_eigenvectors
from ..graphs import fewest_neighbours, from_edges
from .logdet import (
    BoxProgramResult,
    LaplacianLogDet,
    candidate_edges,
    check_candidate_edges,
    check_dense_size,
    edge_squared_distances,
    laplacian_logdet,
    minimize_box,
    regularized_laplacian,
)
from ..validation import as_float_matrix, check_integer, check_positive, check_positive_or_inf

#: Up to this many cells every pair of cells is a candidate edge.
ALL_PAIRS_MAX = 500
#: Neighbours per cell of the candidate graph above ``ALL_PAIRS_MAX`` cells.
DEFAULT_NEIGHBORS = 30
#: Decoders of the embedding: kernel PCA of (L + λI)⁻¹ (eq. 17) or eq. (16).
DECODERS = ("kpca", "eigenmap")


@dataclass(frozen=True)
class MPMEResult:
    """Output of :func:`mpme`.

    Attributes
    ----------
    embedding
        X, N × d embedded points (eq. 17 or 16).
    similarity
        W, symmetric N × N CSR with the learned positive weights (exact zeros
        dropped).
    edges
        Candidate pairs (i < j) that were optimised, E × 2 (after screening).
    weights
        w_ij on ``edges``, in [0, 4C].
    phi
        φ_ij on ``edges``, divided by ``phi_scale``.
    objective
        Value of (13) after each L-BFGS-B iteration (non-decreasing).
    n_iter
        Number of L-BFGS-B iterations.
    converged
        Whether L-BFGS-B met its stopping rule before ``maxiter``.
    message
        L-BFGS-B's message.
    phi_scale
        The divisor of the squared distances.
    n_neighbors
        Neighbours per cell of the candidate graph; N - 1 means all pairs.
    eigenvalues
        Top d eigenvalues of the centred kernel (``"kpca"``) or the d smallest
        generalised eigenvalues of (16) (``"eigenmap"``).
    """

    embedding: np.ndarray
    similarity: sparse.csr_matrix
    edges: np.ndarray
    weights: np.ndarray
    phi: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    message: str
    phi_scale: float
    n_neighbors: int
    eigenvalues: np.ndarray

    @property
    def n_nonzero(self) -> int:
        """Non-zeros of the symmetric W (both triangles, as 'nz' in Fig. 2 of the paper)."""
        return int(self.similarity.nnz)


def default_phi_scale(data: np.ndarray) -> float:
    """Mean squared Euclidean distance over all pairs of distinct cells.

    Equal to 2N/(N - 1) times the total variance, so it costs O(N·D). Dividing
    φ by it makes λ and C dimensionless: λ is then measured against the
    spread of the whole data set, not its units.
    """
    n_points = data.shape[0]
    return float(2.0 * n_points / (n_points - 1) * data.var(axis=0).sum())


def duplicate_weight_bound(phi: np.ndarray, n_components: int) -> float:
    """Bound on the weight of a pair of coinciding cells (φ = 0) when C = ∞.

    With C = ∞, (13) rewards such a weight without limit (log det grows like
    log w_ij and nothing costs), so the problem has no maximum; in the limit
    the two cells merge. Capping their weight at 10·d/φ_min, with φ_min the
    smallest positive φ, ties them as firmly as distinct cells 1/√10 of the
    closest distinct distance apart (active pairs satisfy
    Tr(Q⁻¹A_ij) = φ_ij/d, i.e. w_ij of the order of d/φ_ij), and leaves
    every other pair with C = ∞, as asked for.
    """
    return float(10.0 * n_components / phi[phi > 0].min())


def pair_distances(data: np.ndarray, edges: np.ndarray, sigma: float | None) -> np.ndarray:
    """φ_ij on ``edges``: ‖y_i - y_j‖², or the Gaussian-kernel distance
    K_ii + K_jj - 2K_ij = 2 - 2·exp(-‖y_i - y_j‖² / sigma) when ``sigma`` is given (§3.2)."""
    squared = edge_squared_distances(data, edges)
    if sigma is None:
        return squared
    return -2.0 * np.expm1(-squared / sigma)


def mpme_objective(
    edges: np.ndarray, weights: np.ndarray, phi: np.ndarray, n_points: int, *, lam: float, n_components: int
) -> tuple[float, np.ndarray, LaplacianLogDet]:
    """Value of (13) and its gradient (14) at ``weights``, with the log-det factorisation."""
    logdet = laplacian_logdet(edges, weights, n_points, shift=lam)
    value = logdet.value - float(phi @ weights) / n_components
    return value, logdet.edge_gradient - phi / n_components, logdet


def mpme(
    data,
    *,
    n_components: int = 2,
    lam: float = 0.3,
    C: float = 10.0,
    n_neighbors: int | None = None,
    sigma: float | None = None,
    phi_scale: float | None = None,
    decoder: str = "kpca",
    maxiter: int = 1000,
    tol: float = 1e-12,
    edges: np.ndarray | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> MPMEResult:
    """Fit MPME (Algorithm 1 of the paper) to ``data`` (N × D).

    Parameters
    ----------
    data
        N × D matrix of cells × features.
    n_components
        d, dimension of the embedding; it also weights φ in (13) by 1/d.
    lam
        λ > 0, precision of the prior N(0, λ⁻¹I) (eq. 8), in units of 1/φ.
    C
        Bound 4C on every weight (eq. 13); ``np.inf`` for none. Larger C
        gives a sparser W (§3.3).
    n_neighbors
        Candidate pairs: ``None`` for all pairs up to :data:`ALL_PAIRS_MAX`
        cells and the :data:`DEFAULT_NEIGHBORS`-NN graph above; an integer k
        for the symmetrised k-NN graph (k = N - 1 is all pairs).
    sigma
        ``None``: φ is the squared Euclidean distance. A positive value: the
        Gaussian-kernel distance 2 - 2·exp(-‖y_i - y_j‖²/sigma), sigma in
        squared units of ``data``.
    phi_scale
        φ is divided by it. ``None``: :func:`default_phi_scale` for the
        Euclidean φ, 1 for the Gaussian-kernel φ (already in [0, 2)). Pass 1
        for the paper's raw distances.
    decoder
        ``"kpca"``: kernel PCA of (L + λI)⁻¹ (eq. 17). ``"eigenmap"``: the
        d smallest solutions of (L + λI)F = D_λFΛ, D_λ = diag((W + λI)1)
        (eq. 16).
    maxiter, tol
        L-BFGS-B stops after ``maxiter`` iterations or when the relative
        decrease of the objective falls below ``tol``.
    edges
        The candidate pairs given directly, as E × 2 point pairs (e.g. the
        kNN graph of ``sc.pp.neighbors``); ``n_neighbors`` is then not used and
        the result's ``n_neighbors`` is the fewest candidates of any cell.
    callback
        Called as ``callback(iteration, objective)`` after every iteration.
    """
    data = as_float_matrix(data, "data")
    n_points = data.shape[0]
    if n_points < 3:
        raise ValueError(f"MPME needs at least 3 cells; got {n_points}.")
    check_dense_size(n_points, "MPME")
    n_components = check_integer("n_components", n_components, low=1, high=n_points - 1,
                                 role="dimension of the embedding, below the number of cells")
    lam = check_positive("lam", lam, role="precision λ of the prior")
    C = check_positive_or_inf("C", C, role="the weights are bounded by 4C; np.inf for no bound")
    if n_neighbors is not None:
        n_neighbors = check_integer("n_neighbors", n_neighbors, low=1, high=n_points - 1,
                                    role="candidate neighbours per cell, below the number of cells")
    if sigma is not None:
        sigma = check_positive("sigma", sigma, role="bandwidth of the Gaussian kernel")
    if phi_scale is not None:
        phi_scale = check_positive("phi_scale", phi_scale, role="divisor of the distances φ")
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {DECODERS}; got {decoder!r}.")
    maxiter = check_integer("maxiter", maxiter, low=1)
    tol = check_positive("tol", tol)

    if edges is not None:
        edges = check_candidate_edges(edges, n_points)
        n_neighbors = fewest_neighbours(edges, n_points)
    else:
        if n_neighbors is None:
            n_neighbors = n_points - 1 if n_points <= ALL_PAIRS_MAX else DEFAULT_NEIGHBORS
        edges = candidate_edges(data, None if n_neighbors == n_points - 1 else n_neighbors)
    if phi_scale is None:
        phi_scale = default_phi_scale(data) if sigma is None else 1.0
    if phi_scale <= 0:  # all cells identical
        raise ValueError("All cells are identical (zero spread): MPME needs distinct cells.")
    phi = pair_distances(data, edges, sigma) / phi_scale
    keep = phi < 2.0 * n_components / lam  # screening: other pairs have w = 0 at the optimum
    edges, phi = edges[keep], phi[keep]
    bound = np.full(phi.shape, 4.0 * C)
    coincide = phi == 0
    if not np.isfinite(C) and np.any(coincide):
        if np.all(coincide):
            raise ValueError("All cells coincide (φ = 0 on every pair): MPME needs distinct cells.")
        bound[coincide] = duplicate_weight_bound(phi, n_components)

    with np.errstate(divide="ignore"):
        unit = np.minimum(n_components / phi, bound)

    def value_and_gradient(scaled: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient, _ = mpme_objective(edges, unit * scaled, phi, n_points, lam=lam, n_components=n_components)
        return -value, -gradient * unit

    if edges.shape[0] == 0:  # every pair screened out: W = 0 is the optimum, nothing to solve
        weights = np.zeros(0)
        solution = BoxProgramResult(weights=weights, objective=np.array([-n_points * np.log(lam)]), n_iter=1,
                                    converged=True, message="every pair screened out (phi >= 2d/lam): W = 0")
    else:
        report = None if callback is None else (lambda iteration, value: callback(iteration, -value))
        solution = minimize_box(value_and_gradient, np.zeros(edges.shape[0]), upper=bound / unit,
                                maxiter=maxiter, tol=tol, callback=report)
        weights = np.minimum(unit * solution.weights, bound)
    embedding, eigenvalues = _decode(edges, weights, n_points, lam=lam, n_components=n_components, decoder=decoder)
    learned = weights > 0
    return MPMEResult(
        embedding=embedding,
        similarity=from_edges(edges[learned], weights[learned], n_points),
        edges=edges,
        weights=weights,
        phi=phi,
        objective=-solution.objective,
        n_iter=solution.n_iter,
        converged=solution.converged,
        message=solution.message,
        phi_scale=float(phi_scale),
        n_neighbors=int(n_neighbors),
        eigenvalues=eigenvalues,
    )


def _decode(edges, weights, n_points, *, lam, n_components, decoder) -> tuple[np.ndarray, np.ndarray]:
    """Embedding from the learned W: KPCA of (L + λI)⁻¹ (eq. 17) or eq. (16)."""
    if decoder == "kpca":
        kernel = laplacian_logdet(edges, weights, n_points, shift=lam).inverse
        decoded = kernel_pca(kernel, n_components)
        return decoded.coordinates, decoded.eigenvalues
    precision = regularized_laplacian(edges, weights, n_points, shift=lam)
    metric = np.diag(np.diagonal(precision).copy())  # diag(W1) + λI = D_λ
    values, vectors = smallest_generalized_eigenvectors(precision, metric, n_components)
    return vectors, values
