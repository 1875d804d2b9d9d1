"""Feature selection via structure learning (FSL): Algorithm 2 of Wang & Li.

Wang & Li, "Learning low-dimensional latent graph structures: a density
estimation approach", IEEE Transactions on Neural Networks and Learning Systems,
2020, §IV. With data X (N points ×
M features, column r = feature x^r), feature weights θ and a directed graph W,
Proposition 4 reduces the maximin problem (33) to

    min_{W ∈ 𝒲} min_{θ ∈ Θ} g(W, θ),                                         (34)
    g(W, θ) = -½ Σ_r log det(γI + 4θ_r L_W) + Σ_{i,j} w_ij ψ(x_i, x_j; θ),
    ψ(x_i, x_j; θ) = Σ_r θ_r (x_ri - x_rj)²                                  (29)
    𝒲 = {W : Σ_j w_ij = λ, w_ij ≥ 0},   Θ = {θ : Σ_r θ_r = b, 0 ≤ θ_r ≤ 1}     (30)

with L_W = D - (W + Wᵀ)/2. The sums run over all j, the diagonal included:
w_ii is the multiplier of the constraint (33) for j = i, which reads ρ_i ≥ 0.
A self-loop changes neither L_W nor ψ (its gradient is zero), so a row keeps
on w_ii the mass that no edge can use with a negative gradient: in effect
Σ_{j≠i} w_ij ≤ λ, and a pair is joined only where ψ_ij falls below the
expected squared distance K_ii + K_jj - 2K_ij of the learned density.

Everything goes through one eigendecomposition L_W = U V Uᵀ per accepted W
(v_k ≥ 0):

    Σ_r log det(γI + 4θ_r L_W) = Σ_r Σ_k log(γ + 4θ_r v_k)                  (N × M numbers)
    ∂g/∂w_ij = -(K_ii + K_jj - 2K_ij) + ψ_ij,   K = Σ_r θ_r Q_r⁻¹ = U diag(h) Uᵀ,
                                                 h_k = Σ_r θ_r / (γ + 4θ_r v_k)
    ∂g/∂θ_r = -2 Σ_k v_k / (γ + 4θ_r v_k) + 2 (x^r)ᵀ L_W x^r,
    Σ_{i,j} w_ij ψ_ij = 2 Σ_r θ_r (x^r)ᵀ L_W x^r,

so an iteration costs O(N³ + N²·M) time and O(N² + N·M) memory; features
with θ_r = 0 contribute the constant N log γ to the log-determinants and
nothing to ψ, so once θ is sparse only ``diag(Xᵀ L_W X)`` still touches every
feature.

The solver is projected gradient descent, alternating a θ step and a W step
(block coordinate descent on (34)). Each step starts from a Barzilai–Borwein
step size and backtracks along the projection arc until the Armijo condition
g(new) ≤ g(old) + σ ⟨∇g, new - old⟩ holds (Bertsekas' rule), so g never
increases. W's rows are projected onto the simplex by sorting, θ onto Θ by
the bisection of Proposition 5 (``projections``). g is not jointly convex
(θ_r L_W is bilinear) and the start carries no information but the
features' spread, so the step sizes decide which stationary point is
reached: the first step of each block moves its largest coordinate by the
mean entry (b/M for θ, λ/N for W), and a step may at most double from one
iteration to the next. Without that cap, the θ block jumps to the single
feature that is smoothest on the start graph, or the W block sends all mass
to the self-loops while θ is still spread out (every ψ_ij then exceeds the
expected distance, and g has a stationary point at L_W = 0).

The learned density is p(y^r) = N(0, Q_r⁻¹), Q_r = γI + 4θ_r L_W (Proposition
4), so E ψ(y_i, y_j; θ) = K_ii + K_jj - 2K_ij: kernel PCA of the centred K
embeds the cells (as eq. 28 does for ESL).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse

from ..embed import kernel_pca
from .logdet import check_dense_size
from ..projections import project_rows_to_simplex, project_to_capped_simplex
from ..validation import as_float_matrix, check_integer, check_positive

#: Armijo sufficient-decrease constant and backtracking factor.
ARMIJO = 1e-4
BACKTRACK = 0.5
MAX_BACKTRACKS = 40
#: Largest growth of a block's step from one iteration to the next.
STEP_GROWTH = 2.0


@dataclass(frozen=True)
class FSLResult:
    """Output of :func:`fsl`.

    Attributes
    ----------
    theta
        θ, M feature weights in [0, 1] summing to b.
    weights
        W, dense N × N directed graph; each row sums to λ (self-loops included).
    adjacency
        (W + Wᵀ) / 2 without its diagonal, as a symmetric CSR matrix (the graph of L_W).
    coordinates
        N × m kernel PCA embedding of K = Σ_r θ_r (γI + 4θ_r L_W)⁻¹.
    eigenvalues
        The m kernel eigenvalues kept.
    objective
        g(W, θ) of (34) at the start and after every iteration.
    n_iter, converged
        Iterations run; whether the relative decrease fell below ``tol``.
    """

    theta: np.ndarray
    weights: np.ndarray
    adjacency: sparse.csr_matrix
    coordinates: np.ndarray
    eigenvalues: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool


def check_fsl_parameters(n_points: int, n_features: int, *, b: float, lam: float, gamma: float,
                         n_components: int) -> None:
    """Validate FSL's parameters against the data's shape, before any work."""
    check_dense_size(n_points, "FSL")
    if n_points < 3:
        raise ValueError(f"FSL needs at least 3 cells; got {n_points}.")
    check_positive("b", b, role="Σ_r θ_r, eq. (30)")
    if b > n_features:
        raise ValueError(
            f"b (= Σ_r θ_r with 0 ≤ θ_r ≤ 1, eq. 30) cannot exceed the number of features M = {n_features}; "
            f"got {b!r}. Lower b or n_features."
        )
    check_positive("lam", lam, role="λ, the row sum of W in (34)")
    check_positive("gamma", gamma, role="γ, precision of the prior; larger values give sparser θ")
    check_integer("n_components", n_components, low=1, high=n_points, role="dimension of the embedding")


def objective(features: np.ndarray, weights: np.ndarray, theta: np.ndarray, gamma: float) -> float:
    """g(W, θ) of (34), straight from the definition (one eigendecomposition)."""
    laplacian = _laplacian(weights)
    spectrum = np.clip(linalg.eigvalsh(laplacian, check_finite=False), 0.0, None)
    smoothness = _smoothness(features, laplacian)
    return _value(spectrum, theta, smoothness, gamma)


def gradients(features: np.ndarray, weights: np.ndarray, theta: np.ndarray,
              gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """(∂g/∂W, ∂g/∂θ) of (34) at (W, θ); ∂g/∂W has a zero diagonal."""
    laplacian = _laplacian(weights)
    spectrum, basis = _eigen(laplacian)
    grad_weights = _weight_gradient(_weighted_distances(features, theta), theta, spectrum, basis, gamma)
    return grad_weights, _theta_gradient(spectrum, theta, _smoothness(features, laplacian), gamma)


def fsl(
    features: np.ndarray,
    *,
    b: float,
    lam: float = 10.0,
    gamma: float = 100.0,
    n_components: int = 2,
    maxiter: int = 300,
    tol: float = 1e-6,
    callback: Callable[[int, float], None] | None = None,
) -> FSLResult:
    """Algorithm 2: θ and W of (34) by projected gradient descent, then the embedding.

    ``features`` is N × M. Starts from θ = b1/M and the uniform graph
    W = λ11ᵀ/N (Algorithm 2's 11ᵀ/N scaled onto 𝒲: no prior on features or
    graph). Stops when an iteration lowers g by less than ``tol`` times the
    decrease since the start (the constant -½ M N log γ in g makes a test
    relative to |g| meaningless), when neither block can decrease g, or after
    ``maxiter`` iterations. Raises ValueError when the learned graph keeps no
    edge between different points.
    """
    features = as_float_matrix(features, "features")
    n_points, n_features = features.shape
    check_fsl_parameters(n_points, n_features, b=b, lam=lam, gamma=gamma, n_components=n_components)
    check_integer("maxiter", maxiter, low=1)
    check_positive("tol", tol)

    weights = np.full((n_points, n_points), lam / n_points)
    theta = np.full(n_features, b / n_features)

    laplacian = _laplacian(weights)
    spectrum, basis = _eigen(laplacian)
    smoothness = _smoothness(features, laplacian)
    current = _value(spectrum, theta, smoothness, gamma)
    trace = [current]
    theta_step = weight_step = None
    previous_theta = previous_theta_grad = previous_weights = previous_weight_grad = None
    converged = False
    for iteration in range(1, maxiter + 1):
        start = current

        # θ block: W (hence its spectrum and every (x^r)ᵀ L_W x^r) stays fixed, so trials are O(N·M).
        theta_grad = _theta_gradient(spectrum, theta, smoothness, gamma)
        theta_step = _initial_step(theta_step, theta, previous_theta, theta_grad, previous_theta_grad,
                                   scale=b / n_points)
        previous_theta, previous_theta_grad = theta, theta_grad

        def theta_trial(step):
            candidate = project_to_capped_simplex(theta - step * theta_grad, b)
            return candidate, _value(spectrum, candidate, smoothness, gamma), None

        theta_move = _armijo(theta_trial, theta, theta_grad, current, theta_step)
        if theta_move is not None:
            theta, current, _, theta_step = theta_move

        # W block: θ fixed; each trial needs the spectrum of the trial graph's Laplacian.
        distances = _weighted_distances(features, theta)
        active = theta > 0
        weight_grad = _weight_gradient(distances, theta, spectrum, basis, gamma)
        weight_step = _initial_step(weight_step, weights, previous_weights, weight_grad, previous_weight_grad,
                                    scale=lam / n_points)
        previous_weights, previous_weight_grad = weights, weight_grad

        def weight_trial(step):
            candidate = project_rows_to_simplex(weights - step * weight_grad, lam)
            eigen = _eigen(_laplacian(candidate))
            value = _log_det_term(eigen[0], theta[active], n_features, gamma) + float(np.vdot(candidate, distances))
            return candidate, value, eigen

        weight_move = _armijo(weight_trial, weights, weight_grad, current, weight_step)
        if weight_move is not None:
            weights, current, (spectrum, basis), weight_step = weight_move
            smoothness = _smoothness(features, _laplacian(weights))

        trace.append(current)
        if callback is not None:
            callback(iteration, current)
        if theta_move is None and weight_move is None:
            converged = True
            break
        if start - current <= tol * (trace[0] - current):
            converged = True
            break

    symmetric = (weights + weights.T) / 2.0
    np.fill_diagonal(symmetric, 0.0)
    if not symmetric.any():
        raise ValueError(
            "FSL's graph kept no edge: every weighted squared distance ψ_ij exceeded the expected distance "
            f"under the prior (about 2b/γ = {2 * b / gamma:.3g}), so all of W went to self-loops. Raise b, "
            "lower gamma, or bring the features to a smaller scale."
        )
    kernel = (basis * _kernel_spectrum(spectrum, theta, gamma)) @ basis.T
    embedding = kernel_pca(kernel, n_components)
    return FSLResult(
        theta=theta,
        weights=weights,
        adjacency=sparse.csr_matrix(symmetric),
        coordinates=embedding.coordinates,
        eigenvalues=embedding.eigenvalues,
        objective=np.asarray(trace),
        n_iter=len(trace) - 1,
        converged=converged,
    )


def _laplacian(weights: np.ndarray) -> np.ndarray:
    """L_W = D - (W + Wᵀ)/2 with D the row sums of (W + Wᵀ)/2."""
    symmetric = (weights + weights.T) / 2.0
    laplacian = -symmetric
    laplacian[np.diag_indices_from(laplacian)] += symmetric.sum(axis=1)
    return laplacian


def _eigen(laplacian: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = linalg.eigh(laplacian, check_finite=False)
    return np.clip(values, 0.0, None), vectors  # L_W is PSD; clip round-off below zero


def _smoothness(features: np.ndarray, laplacian: np.ndarray) -> np.ndarray:
    """c_r = Σ_ij w_ij (x_ri - x_rj)² = 2 (x^r)ᵀ L_W x^r for every feature r."""
    return 2.0 * np.einsum("ir,ir->r", features, laplacian @ features)


def _log_det_term(spectrum: np.ndarray, active_theta: np.ndarray, n_features: int, gamma: float) -> float:
    """-½ Σ_r log det(γI + 4θ_r L_W); features with θ_r = 0 give N log γ each."""
    inactive = n_features - active_theta.size
    total = np.log(gamma + 4.0 * np.multiply.outer(spectrum, active_theta)).sum()
    return -0.5 * (float(total) + inactive * spectrum.size * np.log(gamma))


def _value(spectrum: np.ndarray, theta: np.ndarray, smoothness: np.ndarray, gamma: float) -> float:
    return _log_det_term(spectrum, theta[theta > 0], theta.size, gamma) + float(theta @ smoothness)


def _theta_gradient(spectrum: np.ndarray, theta: np.ndarray, smoothness: np.ndarray, gamma: float) -> np.ndarray:
    """∂g/∂θ_r = -2 Tr[Q_r⁻¹ L_W] + 2 (x^r)ᵀ L_W x^r = -2 Σ_k v_k / (γ + 4θ_r v_k) + c_r."""
    trace = (spectrum[:, None] / (gamma + 4.0 * np.multiply.outer(spectrum, theta))).sum(axis=0)
    return -2.0 * trace + smoothness


def _kernel_spectrum(spectrum: np.ndarray, theta: np.ndarray, gamma: float) -> np.ndarray:
    """h_k = Σ_r θ_r / (γ + 4θ_r v_k): K = Σ_r θ_r Q_r⁻¹ = U diag(h) Uᵀ."""
    active = theta[theta > 0]
    return (active / (gamma + 4.0 * np.multiply.outer(spectrum, active))).sum(axis=1)


def _weight_gradient(distances: np.ndarray, theta: np.ndarray, spectrum: np.ndarray, basis: np.ndarray,
                     gamma: float) -> np.ndarray:
    """∂g/∂w_ij = -(K_ii + K_jj - 2K_ij) + ψ_ij, zero on the diagonal."""
    kernel = (basis * _kernel_spectrum(spectrum, theta, gamma)) @ basis.T
    diagonal = np.diagonal(kernel)
    resistance = diagonal[:, None] + diagonal[None, :] - 2.0 * kernel
    gradient = distances - resistance
    np.fill_diagonal(gradient, 0.0)
    return gradient


def weighted_features(features: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The features with θ_r > 0, each scaled by √θ_r: Euclidean distances between these rows are ψ (eq. 29)."""
    active = theta > 0
    return features[:, active] * np.sqrt(theta[active])


def _weighted_distances(features: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """ψ_ij = Σ_r θ_r (x_ri - x_rj)² (eq. 29) over the features with θ_r > 0, by one Gram matrix."""
    scaled = weighted_features(features, theta)
    squared = np.einsum("ij,ij->i", scaled, scaled)
    distances = squared[:, None] + squared[None, :] - 2.0 * (scaled @ scaled.T)
    np.maximum(distances, 0.0, out=distances)
    np.fill_diagonal(distances, 0.0)
    return distances


def _initial_step(last_step, current, previous, gradient, previous_gradient, *, scale: float) -> float:
    """Barzilai–Borwein step ⟨s, s⟩ / ⟨s, y⟩, at most STEP_GROWTH times the last
    accepted step; the first step moves the largest coordinate by ``scale``."""
    if previous is None:
        return scale / max(float(np.abs(gradient).max()), 1e-300)
    move = current - previous
    curvature = float(np.vdot(move, gradient - previous_gradient))
    if curvature <= 0:
        return STEP_GROWTH * last_step
    return min(float(np.vdot(move, move)) / curvature, STEP_GROWTH * last_step)


def _armijo(trial, point, gradient, value, step, max_move=np.inf):
    """Backtrack along the projection arc P(x - α∇g) until Armijo's condition holds.

    Steps that move some coordinate by more than ``max_move`` are shortened
    first (‖P(x - α∇g) - x‖ / α does not increase with α, so scaling α by
    max_move / move overshoots by little). Returns (new point, new value,
    what ``trial`` computed alongside, step), or None when no step in
    MAX_BACKTRACKS trials decreases g (x is stationary to working precision).
    """
    for _ in range(MAX_BACKTRACKS):
        candidate, candidate_value, extra = trial(step)
        move = float(np.abs(candidate - point).max())
        if move > max_move:
            step *= max_move / move
            continue
        decrease = float(np.vdot(gradient, candidate - point))
        if decrease < 0 and candidate_value <= value + ARMIJO * decrease:
            return candidate, candidate_value, extra, step
        step *= BACKTRACK
    return None
