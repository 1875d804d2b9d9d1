"""Regularized loss minimisation plus truncation: the convex embedding framework.

Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
nonlinear dimensionality reduction", Proceedings of the 29th International
Conference on Machine Learning (ICML), 2012.
Given t points with squared distances D, solve problem (14),

    min_{K̃ = K̃ᵀ, K̃ ⪰ 0, K̃1 = 0}  w · L(D(K̃); D) + R(K̃),

for a loss L between squared-distance matrices (``losses.py``, §4.2) and a
regularizer R (``regularizers.py``, §4.1 and §5), then truncate to the top d
eigenvalues, X̂ = Q_{1:d} Λ_{1:d}^½ (kernel PCA of K̃). (The paper prints the
constraint as K̃1 = 1; the centring constraint K̃1 = 0 is the one under which
Proposition 1 makes K̃ ↔ D(K̃) a bijection.)

Loss scale. Table 1 of the paper "scaled the losses by 10" without saying in
which units. Here the loss weight is w = ``loss_weight`` · tr K(D) / c_L, with
c_L the loss's curvature under a uniform stretch of the data
(``Loss.stretch_curvature``): then -α tr K̃ (17) stretches the data by a
factor of about 1 + α/``loss_weight`` for every loss, whatever its own scale,
σ or the number of points. In these units the SNE divergence (34), a KL
divergence that stays O(1) as t grows, weighs as much as the extensive losses;
at the raw weight 10 it is unbounded below with (17) for every data set of
more than about 20 points (``check_bounded``), so that the paper's SNE
reference column cannot be a converged minimum.

Solver. The paper uses accelerated projected (sub)gradient descent (footnote
5). On these problems it needs thousands of steps (the local losses leave the
unfolding directions almost without curvature) and its relative-change test
stops it early while it is still creeping. Here K̃ = YYᵀ with Y centred and t × r
(Burer & Monteiro), minimised over Y by L-BFGS-B: no projection, an
eigendecomposition of the small r × r problem instead of the t × t one, and a
quasi-Newton model of the flat directions. The problem in K̃ is convex, so a
stationary Y is a global minimiser exactly when the certificate
S = H ∇F(K̃) H ⪰ 0 holds (S Y = 0 is stationarity). If S has a negative
eigenvalue the rank r was too small: its eigenvectors are added as new columns
of Y and the descent goes on (``factored_lbfgs``). The partitioned regularizer
(41), which is not convex, is minimised the same way, to a local minimum: its
gradient γK̃ + βI - (α+β)P* (P* the projector on the top d eigenvectors, the
minimiser over 𝒫) is that of the convex problem at fixed P, so each step is one
of Shaw & Jebara's (2007) alternating K̃-steps with P updated continuously.

Everything is dense t × t: O(t²r) per iteration plus one t × t partial
eigendecomposition per certificate, so the framework supports at most
``MAX_POINTS`` points.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import linalg, optimize
from scipy.spatial import distance

from ..cellgraphs.logdet import check_dense_size
from ..embed import center_kernel, kernel_pca, top_eigenpairs
from ..validation import as_float_matrix, check_integer, check_positive
from .losses import LOSSES, Loss, build_loss
from .regularizers import (
    REGULARIZERS,
    Regularizer,
    SpectralRegularizer,
    build_regularizer,
    descending_eigh,
)

#: Largest number of points the dense solver accepts (t × t matrices at every step).
MAX_POINTS = 2_000
#: Spectral gradients fetch only their top eigenvectors (LAPACK syevr) when at most
#: 1/LOW_RANK_FRACTION of them are needed; beyond that the full divide-and-conquer solver is faster.
LOW_RANK_FRACTION = 4
#: The stopping test compares the decrease over this many iterations with ``tol``.
WINDOW = 10
#: Rank of the start factor (at most t - 1); the certificate raises it where the solution needs more.
START_RANK = 32
#: While the factor's rank can still grow, the certificate is checked at least this often.
SEGMENT = 250
#: The exponential and SNE losses weigh at least this many times the least weight that keeps (17) bounded.
BOUNDED_MARGIN = 1.5


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


# --- scale and boundedness of the loss -------------------------------------------------------


def recession_connectivity(loss: Loss) -> float | None:
    """λ₂ of the Laplacian of the loss's symmetrised recession weights W
    (``Loss.recession_weights``), or ``None`` for the losses that grow quadratically.

    Far from D the loss grows like ⟨W, D(E)⟩ = 2⟨L_W, E⟩ along a kernel direction E,
    so λ₂ is its slowest growth per unit tr E.
    """
    weights = loss.recession_weights()
    if weights is None:
        return None
    symmetric = (weights + weights.T) / 2.0
    np.fill_diagonal(symmetric, 0.0)
    laplacian = np.diag(symmetric.sum(axis=1)) - symmetric
    return float(linalg.eigvalsh(laplacian, subset_by_index=[1, 1], check_finite=False)[0])


def loss_scale(loss: Loss, loss_weight: float, alpha: float = 0.0) -> float:
    """The weight w on the loss: ``loss_weight`` · tr K(D) / c_L, the loss in units of its
    uniform-stretch curvature c_L, raised where needed to BOUNDED_MARGIN times the
    smallest weight that keeps -α tr K̃ (17) bounded below.

    For K̃ = (1+ε)K(D) the loss is about w c_L ε²/2 and -α tr K̃ gains α ε tr K(D),
    so (17) alone stretches the data by ε ≈ α/``loss_weight`` whatever the loss.
    The exponential and SNE losses grow only linearly far away, and (17) with
    them is bounded below iff 2wλ₂ ≥ α (:func:`check_bounded`); on data near
    that edge (the sine surface at its default σ) the floor keeps the
    reference of Table 1 finite. It depends on α, not on the regularizer, so
    every regularizer is compared under the same loss.
    """
    curvature = loss.stretch_curvature()
    size = float(np.trace(kernel_from_distances(loss.target)))
    if not (curvature > 0 and size > 0):
        raise ValueError(
            f"The {loss.name!r} loss has no curvature on these data (all points coincide, or no "
            "neighbour pair has a positive distance); there is nothing to embed."
        )
    scale = loss_weight * size / curvature
    connectivity = recession_connectivity(loss)
    if connectivity is not None and connectivity > 0 and alpha > 0:
        scale = max(scale, BOUNDED_MARGIN * alpha / (2.0 * connectivity))
    return scale


def check_bounded(loss: Loss, scale: float, regularizer: Regularizer) -> None:
    """Raise if w · L + R is unbounded below, before any work.

    The exponential and SNE divergences grow only linearly far away:
    w L(D(K̃ + sE)) ≈ s ⟨2wL_W, E⟩ (:func:`recession_connectivity`). The
    distance-spreading regularizers, -α tr K̃ (17) and (19) = (41) with γ = 0,
    gain at most α tr E along E, so the objective is bounded below exactly
    when 2w λ₂(L_W) ≥ α (for (19) the worst direction is rank one). The other
    regularizers grow quadratically. :func:`loss_scale` keeps w above this
    edge whenever λ₂ > 0; what is left is data that the weights W split into
    parts (λ₂ = 0).
    """
    spreading = regularizer.name == "neg_trace" or (regularizer.name == "partitioned" and regularizer.gamma == 0)
    if not spreading or regularizer.alpha == 0:
        return
    connectivity = recession_connectivity(loss)
    if connectivity is not None and 2.0 * scale * connectivity < regularizer.alpha:
        needed = regularizer.alpha / (2.0 * scale * max(connectivity, 1e-300))
        raise ValueError(
            f"The {loss.name!r} loss grows only linearly between far-apart points, and with the "
            f"{regularizer.name!r} regularizer the objective is unbounded below here (points would be "
            f"pushed apart forever): it needs a loss_weight at least {needed:.3g} times larger, or a "
            "larger sigma (more pairs held together), or a regularizer with gamma > 0 "
            "(partitioned, completed_square, biconjugate)."
        )


# --- objective (14) --------------------------------------------------------------------------


class _Objective:
    """F(K) = w L(D(K); D) + R(K) with its gradient in K (the loss chained through D*)."""

    def __init__(self, loss: Loss, regularizer: Regularizer, scale: float = 1.0):
        self.loss = loss
        self.regularizer = regularizer
        self.scale = float(scale)
        self.spectral = isinstance(regularizer, SpectralRegularizer)

    def value(self, kernel: np.ndarray, spectrum: np.ndarray | None = None) -> float:
        """F at a feasible K; ``spectrum`` (descending eigenvalues of K) saves a decomposition."""
        value = self.scale * self.loss.value(distances_from_kernel(kernel))
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

    def _with_spectrum(self, kernel, values, vectors) -> tuple[float, np.ndarray]:
        dhat = distances_from_kernel(kernel)
        value = self.scale * self.loss.value(dhat)
        gradient = self.scale * distances_adjoint(self.loss.gradient(dhat))
        if self.spectral:
            value += self.regularizer.value_from_spectrum(values)
            gradient += self.regularizer.gradient_from_eigh(kernel, values, vectors)
        else:
            value += self.regularizer.value(kernel)
            gradient += self.regularizer.gradient(kernel)
        return value, gradient

    def value_and_gradient(self, kernel: np.ndarray) -> tuple[float, np.ndarray]:
        """F(K) and ∇F(K), a symmetric t × t matrix."""
        if not self.spectral:
            return self._with_spectrum(kernel, None, None)
        values = descending_eigh(kernel, vectors=False)
        return self._with_spectrum(kernel, values, self._top_vectors(kernel, values))

    def factored(self, factor: np.ndarray) -> tuple[float, np.ndarray]:
        """F(YYᵀ) and ∇F(YYᵀ) for a centred t × r factor Y; the eigenpairs of YYᵀ come
        from the thin SVD of Y, O(tr²)."""
        kernel = factor @ factor.T
        if not self.spectral:
            return self._with_spectrum(kernel, None, None)
        left, singular, _ = linalg.svd(factor, full_matrices=False, check_finite=False)
        values = np.zeros(factor.shape[0])
        values[: singular.size] = singular**2
        return self._with_spectrum(kernel, values, left)


# --- the factored solver ---------------------------------------------------------------------


@dataclass(frozen=True)
class SolverResult:
    """Result of :func:`factored_lbfgs`."""

    factor: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool

    @property
    def kernel(self) -> np.ndarray:
        return self.factor @ self.factor.T


def start_factor(kernel: np.ndarray, rank: int) -> np.ndarray:
    """A t × r start Y with YYᵀ ≈ K for a centred PSD K: Q_r Λ_r^½, with the eigenvalues
    below 10⁻³ λ₁/t raised to that floor so that every column can move (a zero
    column has zero gradient)."""
    values, vectors = descending_eigh((kernel + kernel.T) / 2.0)
    floor = 1e-3 * max(values[0], 1e-300) / kernel.shape[0]
    return vectors[:, :rank] * np.sqrt(np.maximum(values[:rank], floor))


def _stalled(trace: list[float], tol: float) -> bool:
    """The last WINDOW iterations lowered F by at most ``tol`` per iteration, relative to
    |F| or, when F is near 0, to the whole decrease so far."""
    if len(trace) <= WINDOW:
        return False
    scale = max(abs(trace[-1]), trace[0] - trace[-1])
    return trace[-1 - WINDOW] - trace[-1] <= tol * WINDOW * scale


def _negative_directions(objective: _Objective, factor: np.ndarray, count: int, tol: float) -> np.ndarray:
    """Eigenvectors of S = H∇F(YYᵀ)H with eigenvalues below -√tol·‖S‖₂ (at most ``count``):
    the directions along which a larger rank lowers F; none at a global minimum."""
    gradient = objective.factored(factor)[1]
    certificate = center_kernel((gradient + gradient.T) / 2.0)
    size = certificate.shape[0]
    low, vectors = linalg.eigh(certificate, subset_by_index=[0, count - 1], check_finite=False)
    high = linalg.eigvalsh(certificate, subset_by_index=[size - 1, size - 1], check_finite=False)[0]
    norm = max(abs(low[0]), abs(high))
    return vectors[:, low < -np.sqrt(tol) * norm]


def factored_lbfgs(
    objective: _Objective,
    factor: np.ndarray,
    *,
    maxiter: int,
    tol: float,
    callback: Callable[[int, float], None] | None = None,
) -> SolverResult:
    """Minimise F(YYᵀ) over centred t × r factors Y by L-BFGS-B, raising r until
    the certificate S = H∇F H ⪰ 0 proves the minimum global.

    ``factor`` is the start (:func:`start_factor`). The descent stops when the
    last WINDOW iterations lowered F by at most ``tol`` per iteration
    (relative), when L-BFGS-B can make no more progress, or after ``maxiter``
    iterations over all ranks. While r < t - 1 the certificate is checked at
    every stop and every SEGMENT iterations: eigenvectors v of S with
    eigenvalues below -√tol·‖S‖ are appended as columns √τ·v with τ small
    enough that F drops (F changes by τ vᵀSv < 0 to first order), and the
    descent goes on. The recorded objective, F after each iteration, never
    increases.
    """
    size = factor.shape[0]
    factor = factor - factor.mean(axis=0)
    trace: list[float] = [objective.factored(factor)[0]]
    converged = False
    state = {"stalled": False}

    def value_and_gradient(flat, rank):
        current = flat.reshape(size, rank)
        current = current - current.mean(axis=0)
        value, gradient = objective.factored(current)
        step = 2.0 * (gradient @ current)
        return value, (step - step.mean(axis=0)).ravel()

    def record(intermediate_result):
        trace.append(float(intermediate_result.fun))
        if callback is not None:
            callback(len(trace) - 1, trace[-1])
        if _stalled(trace, tol):
            state["stalled"] = True
            raise StopIteration

    while len(trace) - 1 < maxiter:
        rank = factor.shape[1]
        budget = maxiter - (len(trace) - 1)
        segment = budget if rank >= size - 1 else min(budget, SEGMENT)
        before = len(trace)
        state["stalled"] = False
        result = optimize.minimize(
            value_and_gradient, factor.ravel(), args=(rank,), jac=True, method="L-BFGS-B", callback=record,
            options={"maxiter": segment, "maxfun": 4 * segment, "ftol": 0.0, "gtol": 0.0, "maxcor": 20},
        )
        factor = result.x.reshape(size, rank)
        factor = factor - factor.mean(axis=0)
        if not np.isfinite(trace[-1]):
            break
        done = state["stalled"] or len(trace) - before < segment  # stalled, or L-BFGS-B could go no further
        if rank < size - 1:
            directions = _negative_directions(objective, factor, min(size - 1 - rank, max(rank, 1), 32), tol)
            grown = _grow(objective, factor, directions, trace[-1]) if directions.shape[1] else None
            if grown is not None:
                factor = grown
                continue
        if done:
            converged = True
            break
    return SolverResult(factor=factor, objective=np.asarray(trace[1:] or trace), n_iter=len(trace) - 1,
                        converged=converged)


def _grow(objective: _Objective, factor: np.ndarray, directions: np.ndarray, value: float) -> np.ndarray | None:
    """[Y, √τ·V] for the largest τ = 10⁻³ tr(YYᵀ)/k · 10^(-j) that lowers F."""
    directions = directions - directions.mean(axis=0)
    size = max(float(np.sum(factor**2)), 1e-12) * 1e-3 / directions.shape[1]
    for _ in range(12):
        grown = np.hstack([factor, np.sqrt(size) * directions])
        if objective.factored(grown)[0] < value:
            return grown
        size /= 10.0
    return None


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
        Objective w L + R of (14) after each iteration.
    n_iter, converged
        Iterations taken; whether the stopping test and the certificate S ⪰ 0
        were met before ``maxiter`` (for ``partitioned``, not convex, S ⪰ 0
        shows a local minimum only).
    reconstruction_loss
        L(D(X̂X̂ᵀ); D), the paper's quality figure for the truncated solution
        (the loss itself, without the weight w).
    loss_value, regularizer_value
        L(D(K̃); D) and R(K̃) at the solution, before truncation.
    sigma
        The σ used by the exponential and SNE losses (resolved default; NaN
        for the losses without one).
    loss_scale
        The weight w = ``loss_weight`` · tr K(D) / c_L on the loss.
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
    sigma: float
    loss_scale: float


def reconstruction_loss(loss: Loss, embedding: np.ndarray) -> float:
    """L(D(X̂X̂ᵀ); D): how well the truncated points reproduce the target (§6)."""
    return loss.value(distances_from_data(embedding))


def neighbour_scale(target: np.ndarray, n_neighbors: int) -> float:
    """The median squared distance from a point to its ``n_neighbors``-th nearest
    neighbour: the default σ of the exponential and SNE losses, so that their
    transfer exp(-D/σ) spans a neighbourhood whatever the units."""
    kth = np.partition(target, n_neighbors, axis=1)[:, n_neighbors]  # column 0 is the point itself
    scale = float(np.median(kth))
    if scale <= 0:
        scale = float(kth[kth > 0].mean()) if np.any(kth > 0) else 0.0
    if scale <= 0:
        raise ValueError("All points coincide with their neighbours; sigma cannot be chosen from the data.")
    return scale


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
    sigma: float | None = None,
    loss_weight: float = 10.0,
    maxiter: int = 1000,
    tol: float = 1e-6,
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
        k of the neighbourhood N(D) of the ``"mvu"`` loss (29), symmetrised,
        and of the default σ.
    alpha, beta, gamma
        α ≥ 0 spreads the top d directions (17, 19, 41–44), β ≥ 0 shrinks the
        rest (16, 19, 41–44), γ the quadratic smoother of (41)–(44) (> 0 for
        ``completed_square`` and ``biconjugate``, ≥ 0 for ``partitioned``).
        The spectral regularizers pull the top d eigenvalues of K̃ towards α/γ.
    sigma
        σ > 0, the scale of the exponential in ``"exp_bregman"`` (31) and of the
        transfers p ∝ exp(-D/σ) of ``"sne"``/``"sne_rows"``. Default: the median
        squared distance from a point to its ``n_neighbors``-th neighbour.
    loss_weight
        The loss weight in units of its uniform-stretch curvature
        (:func:`loss_scale`): (17) alone stretches the data by about
        α/``loss_weight``. Default 10, the "losses scaled by 10" of Table 1. For
        the exponential and SNE losses it is raised where needed to keep (17)
        bounded with a margin (BOUNDED_MARGIN).
    maxiter, tol
        At most ``maxiter`` L-BFGS iterations; stop when the last 10 lowered the
        objective by at most ``tol`` per iteration (relative) and the
        optimality certificate holds.
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
    uses_sigma = LOSSES[loss].uses_sigma
    n_neighbors = check_integer(
        "n_neighbors", n_neighbors, low=1, high=n_points - 1 if loss == "mvu" or (uses_sigma and sigma is None) else None,
        role="neighbourhood size of the mvu loss and of the default sigma",
    )
    alpha = check_positive("alpha", alpha, role="weight spreading the top d directions", allow_zero=True)
    beta = check_positive("beta", beta, role="weight shrinking the other directions", allow_zero=True)
    gamma = check_positive("gamma", gamma, role="quadratic smoother of eq. (41)", allow_zero=True)
    if sigma is not None:
        sigma = check_positive("sigma", sigma, role="scale of the exponential losses")
    loss_weight = check_positive("loss_weight", loss_weight, role="weight of the loss in stretch-curvature units")
    maxiter = check_integer("maxiter", maxiter, low=1)
    tol = check_positive("tol", tol)

    target = distances_from_data(points)
    if not uses_sigma:
        sigma = np.nan
    elif sigma is None:
        sigma = neighbour_scale(target, n_neighbors)
    loss_function = build_loss(loss, target, points=points, n_neighbors=n_neighbors, sigma=sigma)
    penalty = build_regularizer(regularizer, n_components, alpha=alpha, beta=beta, gamma=gamma)
    scale = loss_scale(loss_function, loss_weight, alpha)
    check_bounded(loss_function, scale, penalty)
    # the data's own centred kernel H X Xᵀ H, plus small room in START_RANK directions
    start = start_factor(kernel_from_distances(target), min(n_points - 1, max(START_RANK, 4 * n_components)))
    solved = factored_lbfgs(_Objective(loss_function, penalty, scale), start, maxiter=maxiter, tol=tol,
                            callback=callback)
    if not np.all(np.isfinite(solved.objective)):
        raise ValueError(
            f"The objective of {loss!r} + {regularizer!r} became non-finite; the problem may be unbounded. "
            "Raise loss_weight or sigma, or choose a regularizer with gamma > 0."
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
        sigma=float(sigma),
        loss_scale=float(scale),
    )
