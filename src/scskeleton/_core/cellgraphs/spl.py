"""Structured projection learning (SPL).

L. Wang, "Probabilistic dimensionality reduction via structure learning"
(shared/papers/ddrtree-spl_…), §3.3, Algorithm 1. The posterior (16) of the
embedding couples a PPCA likelihood y_i = W x_i + ε (noise precision γ) with
expected-distance constraints on a neighbourhood graph; its dual (17) is

    max_{S ≥ 0} min_{WᵀW = I}  (d/2) log det(4Q) - Σ_{i, j∈N_i} s_ij φ_ij - ‖S‖²_F / (4C)
                                - (γ²/8) Tr(WᵀYᵀQ⁻¹YW),
    Q = diag(S1) - S + (γ + 1)/4 · I,

with S symmetric and supported on the symmetrised kNN graph. The inner
minimum is W* = the top-d eigenvectors of YᵀQ⁻¹Y (D × D, Algorithm 1 lines
5–6), so the outer objective is f(S) of §3.3,

    f(S) = (d/2) log det Q - 2 Σ_e s_e φ_e - Σ_e s_e² / (2C) - (γ²/8) Tr(W*ᵀYᵀQ⁻¹YW*),

over one weight s_e per undirected edge e = (i, j) (each edge appears twice
in the sums of (17), once per direction; f drops the constant (d/2)·N·log 4).

Subgradient. log det Q is concave and Tr(WᵀYᵀQ⁻¹YW) convex in S for fixed W,
so -max_W h is concave and f is concave. By Danskin's (envelope) theorem,
with x̃ = Q⁻¹YW* (N × d) and ∂Q⁻¹/∂s_e = -Q⁻¹A_eQ⁻¹,

    ∂f/∂s_e = (d/2) Tr(Q⁻¹A_e) + (γ²/8) ‖x̃_i - x̃_j‖² - 2 φ_e - s_e / C,

where Tr(Q⁻¹A_e) = Q⁻¹_ii + Q⁻¹_jj - 2Q⁻¹_ij. This is the printed eq. (20),
(1/2)Tr(Q⁻ᵀ(dI + (γ²/4)P)A_ij) - s_ij/C - 2‖y_i - y_j‖² with
P = YW*W*ᵀYᵀQ⁻¹, because Tr(Q⁻¹PA_ij) = ‖x̃_i - x̃_j‖²: (20) agrees with
(17) once the sums of (17) run over both directions of each edge. The
low-rank form never builds the N × N matrix P. It is the gradient wherever
the d-th and (d+1)-th eigenvalues of YᵀQ⁻¹Y differ (W* unique).

Embedding. The posterior (16) is exp(-½Tr(Xᵀ(4Q)X) + γTr(XᵀYW)) (its
normaliser is the appendix's Z(W, S)), so the MAP estimate is
X = γ(4Q)⁻¹YW = (γ/4)Q⁻¹YW, eq. (22). Problem (21) as printed has
+γTr(XᵀYW), whose minimiser would be -(γ/4)Q⁻¹YW; the sign in (21) is a
misprint and (22) follows the algebra. For γ = 0, (22) vanishes and the
embedding is kernel PCA of the posterior covariance (4L + I)⁻¹ = (4Q)⁻¹
(eq. 23).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..embed import kernel_pca, principal_directions
from ..graphs import from_edges, knn_edges
from .logdet import LaplacianLogDet, check_dense_size, edge_squared_distances, laplacian_logdet
from ..validation import as_float_matrix, check_integer, check_positive, check_positive_or_inf

#: Default divisor of φ, in multiples of the median squared length of the candidate edges.
PHI_SCALE_FACTOR = 30.0


@dataclass(frozen=True)
class SPLEvaluation:
    """f(S) of §3.3 at one S, with what the subgradient and the embedding need.

    Attributes
    ----------
    value
        f(S).
    gradient
        ∂f/∂s_e on every edge (eq. 20, derived from 17).
    projection
        W*, D × d, the top-d eigenvectors of YᵀQ⁻¹Y.
    latent
        x̃ = Q⁻¹YW*, N × d.
    logdet
        log det Q, its gradient, Q⁻¹ and the Cholesky factor.
    """

    value: float
    gradient: np.ndarray
    projection: np.ndarray
    latent: np.ndarray
    logdet: LaplacianLogDet


def spl_objective(
    data: np.ndarray,
    edges: np.ndarray,
    weights: np.ndarray,
    phi: np.ndarray,
    *,
    gamma: float,
    C: float,
    n_components: int,
) -> SPLEvaluation:
    """f(S) and its subgradient at edge weights ``weights`` (``data`` centred, N × D)."""
    n_points = data.shape[0]
    logdet = laplacian_logdet(edges, weights, n_points, shift=(gamma + 1.0) / 4.0)
    solved = logdet.inverse @ data  # Q⁻¹Y, N × D
    gram = data.T @ solved
    projection = principal_directions((gram + gram.T) / 2.0, n_components)
    latent = solved @ projection
    explained = float(np.sum(projection * (gram @ projection)))  # Tr(WᵀYᵀQ⁻¹YW)
    penalty = 0.0 if np.isinf(C) else float(weights @ weights) / (2.0 * C)
    value = n_components / 2.0 * logdet.value - 2.0 * float(phi @ weights) - penalty - gamma**2 / 8.0 * explained
    spread = edge_squared_distances(latent, edges)  # ‖x̃_i - x̃_j‖² = Tr(Q⁻¹PA_ij)
    gradient = n_components / 2.0 * logdet.edge_gradient + gamma**2 / 8.0 * spread - 2.0 * phi - weights / C
    return SPLEvaluation(value=value, gradient=gradient, projection=projection, latent=latent, logdet=logdet)


@dataclass(frozen=True)
class SPLResult:
    """Output of :func:`spl`.

    Attributes
    ----------
    embedding
        X, N × d: (γ/4)Q⁻¹YW (eq. 22) in the units of Y, or KPCA of
        (4L + I)⁻¹ when γ = 0.
    projection
        W, D × d with orthonormal columns.
    similarity
        S, symmetric N × N CSR (exact zeros dropped).
    edges
        The candidate edges (i < j), E × 2: the symmetrised kNN graph.
    weights
        s_e on ``edges``.
    objective
        f(S_t) of every iterate S_1 = 0, S_2, … (not monotone).
    n_iter
        Number of iterates evaluated.
    converged
        Whether the stopping rule was met before ``maxiter``.
    best_iteration
        0-based index into ``objective`` of the returned S (the best iterate).
    phi_scale
        The divisor of the squared distances.
    mean
        Per-feature mean subtracted from Y (length D).
    """

    embedding: np.ndarray
    projection: np.ndarray
    similarity: sparse.csr_matrix
    edges: np.ndarray
    weights: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    best_iteration: int
    phi_scale: float
    mean: np.ndarray

    @property
    def n_nonzero(self) -> int:
        """Non-zeros of the symmetric S (both triangles)."""
        return int(self.similarity.nnz)


def default_phi_scale(squared_lengths: np.ndarray) -> float:
    """:data:`PHI_SCALE_FACTOR` × the median squared length of the candidate edges.

    Algorithm 1 takes steps of 1/t from S = 0; the first one sets every weight
    to about 4d/(γ + 1) - 2φ_e. With φ of the order of 1/30 on a typical
    neighbour, that step stays below the optimum weights and f rises from the
    start on the generated curves, loops and trees (with φ ~ 1 it overshoots,
    f falls below f(0) and α_t = 1/t is too small to come back within
    hundreds of iterations). The smoothing length of the model, √(d ·
    phi_scale), is then a few neighbour distances, whatever the units or the
    density of the data.
    """
    return float(PHI_SCALE_FACTOR * np.median(squared_lengths))


def spl(
    data,
    *,
    n_components: int = 2,
    n_neighbors: int = 10,
    gamma: float = 1e-3,
    C: float = 1e3,
    phi_scale: float | None = None,
    maxiter: int = 100,
    tol: float = 1e-4,
    callback: Callable[[int, float], None] | None = None,
) -> SPLResult:
    """Fit SPL (Algorithm 1) to ``data`` (N × D) on its symmetrised kNN graph.

    Projected subgradient ascent on the edge weights from S = 0:
    s ← max(0, s + α_t ∂f(s)) with α_t = 1/t, W* recomputed at every
    iterate. f is not monotone along the iterates; every f(S_t) is recorded
    and the iterate with the largest f is returned (with its W* and
    embedding). Stopping rule: |f(S_t) - f(S_{t-1})| ≤ tol · max(1, |f(S_{t-1})|)
    (steps of 1/t shrink, so f settles), or ``maxiter`` iterates.

    Parameters
    ----------
    data
        N × D matrix Y of cells × features; centred column-wise first (the
        prior of x_i and the noise have mean zero).
    n_components
        d, dimension of the embedding (≤ D and < N).
    n_neighbors
        k of the symmetrised kNN graph that supports S (1 ≤ k < N).
    gamma
        γ ≥ 0, noise precision of the PPCA likelihood (eq. 5); 0 drops the
        likelihood and embeds by KPCA of (4L + I)⁻¹.
    C
        C > 0 (``np.inf`` allowed), error tolerance: ξ_ij = s_ij/(2C); larger
        C allows less violation of the distances.
    phi_scale
        φ_ij = ‖y_i - y_j‖² / phi_scale, i.e. (17) is fitted to
        Y / √phi_scale. ``None``: :func:`default_phi_scale`. Pass 1 for the
        paper's raw distances.
    maxiter, tol
        Stopping rule (see above).
    callback
        Called as ``callback(iteration, f)`` after every iterate.
    """
    data = as_float_matrix(data, "data")
    n_points, n_features = data.shape
    if n_points < 3:
        raise ValueError(f"SPL needs at least 3 cells; got {n_points}.")
    check_dense_size(n_points, "SPL")
    n_components = check_integer("n_components", n_components, low=1, high=min(n_features, n_points - 1),
                                 role="dimension of the embedding, at most the number of features and below "
                                 "the number of cells")
    n_neighbors = check_integer("n_neighbors", n_neighbors, low=1, high=n_points - 1,
                                role="neighbours per cell of the graph supporting S, below the number of cells")
    gamma = check_positive("gamma", gamma, role="noise precision γ", allow_zero=True)
    C = check_positive_or_inf("C", C, role="error tolerance ξ = s/(2C); np.inf for none")
    if phi_scale is not None:
        phi_scale = check_positive("phi_scale", phi_scale, role="divisor of the distances φ")
    maxiter = check_integer("maxiter", maxiter, low=1)
    tol = check_positive("tol", tol)

    mean = data.mean(axis=0)
    centred = data - mean
    edges = knn_edges(centred, n_neighbors)
    squared = edge_squared_distances(centred, edges)
    if phi_scale is None:
        phi_scale = default_phi_scale(squared)
    if phi_scale <= 0:
        raise ValueError("Most neighbouring cells coincide (median distance 0); pass phi_scale explicitly.")
    # (17) is fitted to Y/√phi_scale, distances and likelihood alike
    scaled = centred / np.sqrt(phi_scale)
    phi = squared / phi_scale

    weights = np.zeros(edges.shape[0])
    trace: list[float] = []
    best, best_weights, best_iteration = None, weights, 0
    converged = False
    for iteration in range(1, maxiter + 1):
        evaluation = spl_objective(scaled, edges, weights, phi, gamma=gamma, C=C, n_components=n_components)
        trace.append(evaluation.value)
        if callback is not None:
            callback(iteration, evaluation.value)
        if best is None or evaluation.value > best.value:
            best, best_weights, best_iteration = evaluation, weights, iteration - 1
        if iteration > 1 and abs(trace[-1] - trace[-2]) <= tol * max(1.0, abs(trace[-2])):
            converged = True
            break
        weights = np.maximum(weights + evaluation.gradient / iteration, 0.0)

    if gamma > 0:  # back in the units of Y: (γ/4)Q⁻¹YW, eq. (22)
        embedding = gamma / 4.0 * np.sqrt(phi_scale) * best.latent
    else:
        embedding = kernel_pca(best.logdet.inverse / 4.0, n_components).coordinates
    learned = best_weights > 0
    return SPLResult(
        embedding=embedding,
        projection=best.projection,
        similarity=from_edges(edges[learned], best_weights[learned], n_points),
        edges=edges,
        weights=best_weights,
        objective=np.asarray(trace),
        n_iter=len(trace),
        converged=converged,
        best_iteration=best_iteration,
        phi_scale=float(phi_scale),
        mean=mean,
    )
