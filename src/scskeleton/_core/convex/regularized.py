"""Regularized loss minimisation plus truncation: the convex embedding framework.

Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
nonlinear dimensionality reduction" (shared/papers/regularizers-vs-losses_…).
Given t points with squared distances D, solve problem (14),

    min_{K̃ = K̃ᵀ, K̃ ⪰ 0, K̃1 = 0}  L(D(K̃); D) + R(K̃),

for a loss L between squared-distance matrices (``losses.py``, §4.2) and a
regularizer R (``regularizers.py``, §4.1 and §5), then truncate to the top d
eigenvalues, X̂ = Q_{1:d} Λ_{1:d}^½ (kernel PCA of K̃). (The paper prints the
constraint as K̃1 = 1; the centring constraint K̃1 = 0 is the one under which
Proposition 1 makes K̃ ↔ D(K̃) a bijection.)

The solver is accelerated projected gradient descent (the paper's footnote 5,
Tseng 2008; the variant of Auslender & Teboulle, whose iterates are convex
combinations of feasible points, so the spectral regularizers are only ever
evaluated at positive semidefinite matrices) with backtracking on the step
size and a monotone restart. The projection onto {K̃ ⪰ 0, K̃1 = 0} centres the
matrix and clips its negative eigenvalues. Loss gradients are taken in D̂ and
chained to K̃ by the adjoint of the linear map (3). The partitioned
regularizer (41), which is not convex, is minimised by alternating between P
and K̃ as in Shaw & Jebara (2007).

Everything is dense t × t with an eigendecomposition per step: O(t³) per
iteration, so the framework supports at most ``MAX_POINTS`` points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg
from scipy.spatial import distance

from ..embed import center_kernel, kernel_pca, top_eigenpairs
from ..cellgraphs.logdet import check_dense_size
from .losses import LOSSES, Loss, build_loss
from .regularizers import (
    REGULARIZERS,
    PartitionedRegularizer,
    Regularizer,
    SpectralRegularizer,
    build_regularizer,
    descending_eigh,
)
from ..validation import as_float_matrix, check_integer, check_positive

#: Largest number of points the dense solver accepts (one t × t eigendecomposition per step).
MAX_POINTS = 2_000
#: Decompositions compute only the wanted top eigenpairs (LAPACK syevr) when at most
#: 1/LOW_RANK_FRACTION of them are wanted; beyond that the full divide-and-conquer solver is faster.
LOW_RANK_FRACTION = 4


# --- maps between data, kernel and distance matrices, eqs. (1)–(4) ---------------------------


def kernel_from_data(points: np.ndarray) -> np.ndarray:
    """K(X) = XXᵀ, eq. (1)."""
    return points @ points.T


def distances_from_data(points: np.ndarray) -> np.ndarray:
    """D(X) = δ(XXᵀ)1ᵀ + 1δ(XXᵀ)ᵀ - 2XXᵀ, eq. (2): squared Euclidean distances,
    computed as squared differences (no cancellation between near points)."""
    return distance.squareform(distance.pdist(points, "sqeuclidean"))


def distances_from_kernel(kernel: np.ndarray) -> np.ndarray:
    """D(K) = δ(K)1ᵀ + 1δ(K)ᵀ - 2K, eq. (3); linear in K."""
    diagonal = np.diagonal(kernel)
    return diagonal[:, None] + diagonal[None, :] - 2.0 * kernel


def distances_adjoint(gradient: np.ndarray) -> np.ndarray:
    """The adjoint D*(G) = Diag(G1 + Gᵀ1) - G - Gᵀ of the map (3).

    ⟨G, D(K)⟩ = ⟨D*(G), K⟩, so the gradient of K ↦ L(D(K)) is D*(∂L/∂D̂).
    For symmetric G this is twice the graph Laplacian of G, hence centred.
    """
    adjoint = -(gradient + gradient.T)
    adjoint[np.diag_indices_from(adjoint)] += gradient.sum(axis=0) + gradient.sum(axis=1)
    return adjoint


def kernel_from_distances(distances: np.ndarray) -> np.ndarray:
    """K(D) = -½ HDH, eq. (4): the centred kernel of a Euclidean distance matrix."""
    return -0.5 * center_kernel(distances)


# --- projection onto {K ⪰ 0, K1 = 0} ---------------------------------------------------------


@dataclass(frozen=True)
class Projection:
    """A point of the feasible set with its eigendecomposition.

    ``values`` are all t eigenvalues in descending order (clipped at 0);
    ``vectors`` the eigenvectors of the positive ones.
    """

    kernel: np.ndarray
    values: np.ndarray
    vectors: np.ndarray


def project_centered_psd(matrix: np.ndarray, *, rank_hint: int | None = None) -> Projection:
    """Euclidean projection of a symmetric matrix onto {K ⪰ 0, K1 = 0}.

    With V an orthonormal basis of 1⊥, the set is {V S Vᵀ : S ⪰ 0}, and
    ||A - VSVᵀ||² is minimised by S = [VᵀAV]₊; V[VᵀAV]₊Vᵀ = [HAH]₊ since HAH
    has the same eigenpairs plus (0, 1/√t). So: centre, then clip the negative
    eigenvalues (one eigendecomposition). When ``rank_hint`` (the number of
    positive eigenvalues expected, e.g. at the previous step) is small, only
    the positive eigenpairs are computed (LAPACK syevr by value), which
    costs little more than the tridiagonal reduction.
    """
    centred = center_kernel(matrix)
    centred = (centred + centred.T) / 2.0
    size = centred.shape[0]
    if rank_hint is not None and rank_hint <= size // LOW_RANK_FRACTION:
        positive_values, kept = linalg.eigh(centred, subset_by_value=[0.0, np.inf], check_finite=False)
        positive_values, kept = positive_values[::-1], kept[:, ::-1]
        values = np.concatenate([positive_values, np.zeros(size - positive_values.size)])
    else:
        values, vectors = descending_eigh(centred)
        positive = int(np.count_nonzero(values > 0))
        values = np.maximum(values, 0.0)
        kept = vectors[:, :positive]
        positive_values = values[:positive]
    return Projection(kernel=(kept * positive_values) @ kept.T, values=values, vectors=kept)


# --- objective (14) --------------------------------------------------------------------------


class _Objective:
    """F(K) = L(D(K); D) + R(K) with its gradient in K (the loss chained through D*)."""

    def __init__(self, loss: Loss, regularizer: Regularizer):
        self.loss = loss
        self.regularizer = regularizer
        self.spectral = isinstance(regularizer, SpectralRegularizer)

    def value(self, kernel: np.ndarray, spectrum: np.ndarray | None = None) -> float:
        """F at a feasible K; ``spectrum`` (descending eigenvalues of K) saves a decomposition."""
        value = self.loss.value(distances_from_kernel(kernel))
        if self.spectral:
            if spectrum is None:
                spectrum = descending_eigh(kernel, vectors=False)
            return value + self.regularizer.value_from_spectrum(spectrum)
        return value + self.regularizer.value(kernel)

    def _top_vectors(self, kernel: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The top eigenvectors the regularizer's gradient uses: a few by index
        (about the cost of the eigenvalues alone), or all when many are needed."""
        needed = self.regularizer.vectors_needed(values)
        if needed == 0:
            return np.empty((kernel.shape[0], 0))
        if needed <= kernel.shape[0] // LOW_RANK_FRACTION:
            return top_eigenpairs(kernel, needed)[1]
        return descending_eigh(kernel)[1]

    def value_and_gradient(self, kernel: np.ndarray) -> tuple[float, np.ndarray]:
        dhat = distances_from_kernel(kernel)
        value = self.loss.value(dhat)
        gradient = distances_adjoint(self.loss.gradient(dhat))
        if self.spectral:
            values = descending_eigh(kernel, vectors=False)
            value += self.regularizer.value_from_spectrum(values)
            gradient += self.regularizer.gradient_from_eigh(kernel, values, self._top_vectors(kernel, values))
        else:
            value += self.regularizer.value(kernel)
            gradient += self.regularizer.gradient(kernel)
        return value, gradient


def _initial_lipschitz(objective: _Objective, start: np.ndarray, gradient: np.ndarray) -> float:
    """Secant estimate of the gradient's Lipschitz constant near ``start``.

    Backtracking corrects it; a good first guess saves projections."""
    size = np.linalg.norm(gradient)
    if size == 0:
        return 1.0
    step = 1e-3 * max(np.linalg.norm(start), 1.0) / size
    moved = project_centered_psd(start - step * gradient).kernel
    shift = np.linalg.norm(moved - start)
    if shift == 0:
        return 1.0
    change = np.linalg.norm(objective.value_and_gradient(moved)[1] - gradient)
    return max(change / shift, 1e-12)


def _relative_change(previous: float, current: float) -> float:
    scale = max(abs(previous), abs(current))
    return 0.0 if scale == 0 else abs(previous - current) / scale


@dataclass(frozen=True)
class SolverResult:
    """Result of :func:`accelerated_projected_gradient`."""

    kernel: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool


def accelerated_projected_gradient(
    objective: _Objective,
    start: np.ndarray,
    *,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], None] | None = None,
) -> SolverResult:
    """Minimise F over {K ⪰ 0, K1 = 0} by accelerated projected gradient descent.

    Auslender–Teboulle's variant in Tseng (2008): with θ₀ = 1 and x₀ = z₀ the
    (feasible) start, each step is

        y = (1-θ)x + θz,   z⁺ = Π(z - ∇F(y)/(θℓ)),   x⁺ = (1-θ)x + θz⁺,
        θ⁺ = (√(θ⁴ + 4θ²) - θ²)/2,

    so x, y and z stay feasible. ℓ is doubled until the quadratic upper bound
    F(x⁺) ≤ F(y) + ⟨∇F(y), x⁺-y⟩ + ℓ/2||x⁺-y||² holds and relaxed by 10 %
    after each accepted step. If a step would raise F, the momentum is reset
    (θ = 1, z = x): a plain projected gradient step then follows, which
    never raises F, so the recorded objective is non-increasing. Stops when
    the relative change of F falls below ``tol`` or after ``maxiter`` steps.
    """
    x = z = start
    x_value = objective.value(start)
    rank = None
    theta = 1.0
    lipschitz = None
    trace: list[float] = []
    converged = False
    for step in range(maxiter):
        y = z if theta == 1.0 else (1.0 - theta) * x + theta * z
        y_value, y_gradient = objective.value_and_gradient(y)
        if lipschitz is None:
            lipschitz = _initial_lipschitz(objective, y, y_gradient)
        while True:
            projected = project_centered_psd(z - y_gradient / (theta * lipschitz), rank_hint=rank)
            if theta == 1.0:
                x_new = projected.kernel
                new_value = objective.value(x_new, projected.values)
            else:
                x_new = (1.0 - theta) * x + theta * projected.kernel
                new_value = objective.value(x_new)
            move = x_new - y
            bound = y_value + float(np.vdot(y_gradient, move)) + 0.5 * lipschitz * float(np.vdot(move, move))
            if new_value <= bound + 1e-12 * max(abs(y_value), abs(new_value)):
                break
            lipschitz *= 2.0
        if new_value > x_value and theta < 1.0:
            theta, z = 1.0, x  # restart: momentum has overshot
            continue
        previous = x_value
        x, z, x_value = x_new, projected.kernel, new_value
        rank = projected.vectors.shape[1]
        theta = (np.sqrt(theta**4 + 4.0 * theta**2) - theta**2) / 2.0
        lipschitz *= 0.9
        trace.append(x_value)
        if callback is not None:
            callback(len(trace), x_value)
        if _relative_change(previous, x_value) < tol:
            converged = True
            break
    if not trace:
        trace.append(x_value)
    return SolverResult(kernel=x, objective=np.asarray(trace), n_iter=step + 1, converged=converged)


def _top_projector(kernel: np.ndarray, n_components: int) -> np.ndarray:
    """The projector on the top d eigenvectors: the minimising P ∈ 𝒫 in (19)/(41)."""
    vectors = top_eigenpairs(kernel, n_components)[1]
    return vectors @ vectors.T


def alternating_partition(
    loss: Loss,
    regularizer: PartitionedRegularizer,
    start: np.ndarray,
    *,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], None] | None = None,
) -> SolverResult:
    """Minimise L + R₅ (41) by alternating minimisation over P and K̃.

    P-step: P = projector on the top d eigenvectors of K̃ (the exact minimiser
    over 𝒫). K̃-step: the convex problem with P fixed, by
    :func:`accelerated_projected_gradient` from the previous K̃. Each round
    cannot raise L + R₅, but the result is only a local solution (R₅ is not
    convex; Shaw & Jebara 2007). ``maxiter`` bounds the gradient steps of all
    rounds together; the recorded objective is L + R₅ after each round, and
    ``n_iter`` counts the gradient steps.
    """
    full = _Objective(loss, regularizer)
    kernel = start
    value = full.value(kernel)
    trace: list[float] = []
    steps, converged = 0, False
    while steps < maxiter:
        inner = accelerated_projected_gradient(
            _Objective(loss, regularizer.fixed(_top_projector(kernel, regularizer.n_components))),
            kernel,
            maxiter=maxiter - steps,
            tol=tol,
        )
        steps += inner.n_iter
        kernel, previous, value = inner.kernel, value, full.value(inner.kernel)
        trace.append(value)
        if callback is not None:
            callback(steps, value)
        if _relative_change(previous, value) < tol:
            converged = True
            break
    if not trace:
        trace.append(value)
    return SolverResult(kernel=kernel, objective=np.asarray(trace), n_iter=steps, converged=converged)


# --- the public core entry point -------------------------------------------------------------


@dataclass(frozen=True)
class ConvexEmbeddingResult:
    """Output of :func:`convex_embedding`.

    Attributes
    ----------
    embedding
        X̂, t × d: the top d eigenvectors of K̃ scaled by the root eigenvalues.
    kernel
        K̃, t × t, symmetric positive semidefinite and centred.
    eigenvalues
        All t eigenvalues of K̃, descending (round-off below 0 clipped).
    objective
        Objective (14) after each iteration (for ``partitioned``: after each
        alternating round).
    n_iter, converged
        Gradient steps taken; whether the relative change fell below ``tol``.
    reconstruction_loss
        L(D(X̂X̂ᵀ); D), the paper's quality figure for the truncated solution.
    loss_value, regularizer_value
        L(D(K̃); D) and R(K̃) at the solution, before truncation.
    """

    embedding: np.ndarray
    kernel: np.ndarray
    eigenvalues: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    reconstruction_loss: float
    loss_value: float
    regularizer_value: float


def reconstruction_loss(loss: Loss, embedding: np.ndarray) -> float:
    """L(D(X̂X̂ᵀ); D): how well the truncated points reproduce the target (§6)."""
    return loss.value(distances_from_data(embedding))


def convex_embedding(
    data,
    *,
    n_components: int = 2,
    loss: str = "mvu",
    regularizer: str = "biconjugate",
    n_neighbors: int = 10,
    alpha: float = 1.0,
    beta: float = 0.1,
    gamma: float = 1e-3,
    sigma: float = 1.0,
    maxiter: int = 300,
    tol: float = 1e-5,
    callback: Callable[[int, float], None] | None = None,
) -> ConvexEmbeddingResult:
    """Solve (14) for K̃ and truncate it to d dimensions.

    Parameters
    ----------
    data
        t × n points X; the target is D = D(X), eq. (2).
    n_components
        d, the target dimension (1 ≤ d < t): the truncation rank and the d of
        the partitioned regularizers (19)–(20), (41)–(44).
    loss
        One of ``LOSSES``: ``"kpca"`` (22), ``"squared"`` (23), ``"sammon"``
        (26), ``"mvu"`` (29), ``"exp_bregman"`` (31), ``"sne"`` (34)–(35),
        ``"sne_rows"`` (32)–(33).
    regularizer
        One of ``REGULARIZERS``: ``"trace"`` (16), ``"neg_trace"`` (17),
        ``"partitioned"`` (41; γ = 0 gives 19), ``"completed_square"`` (42),
        ``"biconjugate"`` (44).
    n_neighbors
        k of the neighbourhood N(D) of the ``"mvu"`` loss (29), symmetrised
        (ignored by the other losses).
    alpha, beta, gamma
        α ≥ 0 spreads the top d directions (17, 19, 41–44), β ≥ 0 shrinks the
        rest (16, 19, 41–44), γ the quadratic smoother of (41)–(44) (> 0 for
        ``completed_square`` and ``biconjugate``, ≥ 0 for ``partitioned``).
    sigma
        σ > 0, the scale of the exponential in ``"exp_bregman"`` (31) and of the
        transfers in ``"sne"``/``"sne_rows"`` (p ∝ exp(-D/σ); the paper has σ = 1).
    maxiter, tol
        At most ``maxiter`` projected gradient steps; stop when the relative
        change of the objective falls below ``tol``.
    callback
        Called as ``callback(iteration, objective)`` after each iteration.
    """
    points = as_float_matrix(data, "data")
    n_points = points.shape[0]
    if n_points < 3:
        raise ValueError(f"convex_embedding needs at least 3 points; got {n_points}.")
    check_dense_size(n_points, "convex_embedding", limit=MAX_POINTS)
    if loss not in LOSSES:
        raise ValueError(f"Unknown loss {loss!r}; choose one of {sorted(LOSSES)}.")
    if regularizer not in REGULARIZERS:
        raise ValueError(f"Unknown regularizer {regularizer!r}; choose one of {sorted(REGULARIZERS)}.")
    n_components = check_integer(
        "n_components", n_components, low=1, high=n_points - 1, role="target dimension d, below the number of points"
    )
    n_neighbors = check_integer(
        "n_neighbors", n_neighbors, low=1, high=n_points - 1 if loss == "mvu" else None, role="k of the mvu loss"
    )
    alpha = check_positive("alpha", alpha, role="weight spreading the top d directions", allow_zero=True)
    beta = check_positive("beta", beta, role="weight shrinking the other directions", allow_zero=True)
    gamma = check_positive("gamma", gamma, role="quadratic smoother of eq. (41)", allow_zero=True)
    sigma = check_positive("sigma", sigma, role="scale of the exponential losses")
    maxiter = check_integer("maxiter", maxiter, low=1)
    tol = check_positive("tol", tol)

    target = distances_from_data(points)
    loss_function = build_loss(loss, target, points=points, n_neighbors=n_neighbors, sigma=sigma)
    penalty = build_regularizer(regularizer, n_components, alpha=alpha, beta=beta, gamma=gamma)
    start = kernel_from_distances(target)  # the data's own centred kernel, H X Xᵀ H
    if isinstance(penalty, PartitionedRegularizer):
        solved = alternating_partition(loss_function, penalty, start, maxiter=maxiter, tol=tol, callback=callback)
    else:
        solved = accelerated_projected_gradient(
            _Objective(loss_function, penalty), start, maxiter=maxiter, tol=tol, callback=callback
        )
    if not np.all(np.isfinite(solved.objective)):
        raise ValueError(
            f"The objective of {loss!r} + {regularizer!r} became non-finite; the problem may be unbounded "
            "(e.g. a disconnected neighbourhood graph with a distance-spreading regularizer). "
            "Increase n_neighbors or lower alpha."
        )
    kernel = solved.kernel
    spectrum = np.maximum(descending_eigh(kernel, vectors=False), 0.0)
    embedding = kernel_pca(kernel, n_components).coordinates
    return ConvexEmbeddingResult(
        embedding=embedding,
        kernel=kernel,
        eigenvalues=spectrum,
        objective=solved.objective,
        n_iter=solved.n_iter,
        converged=solved.converged,
        reconstruction_loss=reconstruction_loss(loss_function, embedding),
        loss_value=loss_function.value(distances_from_kernel(kernel)),
        regularizer_value=penalty.value(kernel),
    )
