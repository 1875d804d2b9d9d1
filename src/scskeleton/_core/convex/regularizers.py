"""Regularizers of the reconstruction kernel K̃ for the convex embedding framework.

Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
nonlinear dimensionality reduction", ICML 2012,
§4.1 and §5. With d the target dimension, α the weight that spreads the top d
directions, β the weight that shrinks the others and γ a quadratic smoother:

    trace             (16)  β tr K̃                                   shrinks all distances
    neg_trace         (17)  -α tr K̃                                  maximum variance unfolding
    partitioned       (41)  min_{P∈𝒫} γ/2 tr K̃² + β tr K̃ - (α+β) tr(PK̃)   (γ = 0: eq. 19), not convex
    completed_square  (42)  min_{P∈𝒫} β tr K̃ + γ/2 ||K̃ - (α+β)/γ · P||²_F   convex, R6 ≥ R5
    biconjugate       (44)  R5**(K̃), the tightest convex minorant of (41)

with 𝒫 = {P = Pᵀ, 0 ⪯ P ⪯ I, tr P = d} (20). All but the two trace
regularizers are spectral: with u the eigenvalues of K̃ (descending) and Q its
eigenvectors they are functions of u, and their gradients are Q diag(·) Qᵀ.
Each regularizer is an object with ``value`` and ``gradient`` (a subgradient
where the function is not differentiable), spectral ones also from a given
eigendecomposition; ``REGULARIZERS`` maps the public names to the classes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from scipy import linalg


def descending_eigh(kernel: np.ndarray, *, vectors: bool = True):
    """Eigenvalues (descending) and, if ``vectors``, eigenvectors (columns) of a symmetric matrix."""
    if not vectors:
        return linalg.eigvalsh(kernel, check_finite=False)[::-1]
    values, basis = linalg.eigh(kernel, check_finite=False, driver="evd")
    return values[::-1], basis[:, ::-1]


def capped_simplex_threshold(values: np.ndarray, total: float) -> float:
    """θ of the Euclidean projection clip(v - θ, 0, 1) of a vector onto
    {p : 0 ≤ p ≤ 1, Σp = total}, for 0 < total < len(v).

    The eigenvalue part of the projection onto 𝒫 (20) (the Fantope).
    Σ clip(v - θ, 0, 1) is continuous, non-increasing and piecewise linear in
    θ with breakpoints v and v - 1; all breakpoints are evaluated at once from
    prefix sums of the sorted values and θ is interpolated on the bracketing
    segment.
    """
    ordered = np.sort(values)
    cumulative = np.concatenate([[0.0], np.cumsum(ordered)])

    def mass(theta):
        low = np.searchsorted(ordered, theta, side="right")
        high = np.searchsorted(ordered, theta + 1.0, side="left")
        return (ordered.size - high) + (cumulative[high] - cumulative[low]) - theta * (high - low)

    breaks = np.unique(np.concatenate([ordered - 1.0, ordered]))
    masses = mass(breaks)
    right = int(np.searchsorted(-masses, -total, side="left"))  # first break with mass ≤ total
    if masses[right] == total or right == 0:
        return float(breaks[right])
    left = right - 1
    return float(breaks[left] + (masses[left] - total) * (breaks[right] - breaks[left]) / (masses[left] - masses[right]))


def capped_simplex_projection(values: np.ndarray, total: float) -> np.ndarray:
    """Euclidean projection of a vector onto {p : 0 ≤ p ≤ 1, Σp = total}."""
    values = np.asarray(values, dtype=float)
    if total <= 0:
        return np.zeros_like(values)
    if total >= values.size:
        return np.ones_like(values)
    return np.clip(values - capped_simplex_threshold(values, total), 0.0, 1.0)


class Regularizer(ABC):
    """R(K̃) with its (sub)gradient.

    ``n_components`` is d; ``alpha``, ``beta``, ``gamma`` are the paper's α,
    β, γ; ``convex`` says whether the solver's answer is a global minimum
    of (14).
    """

    name = ""
    convex = True

    def __init__(self, n_components: int, *, alpha: float, beta: float, gamma: float):
        self.n_components = int(n_components)
        self.alpha, self.beta, self.gamma = float(alpha), float(beta), float(gamma)

    @abstractmethod
    def value(self, kernel: np.ndarray) -> float:
        """R(K̃) of a symmetric positive semidefinite matrix."""

    @abstractmethod
    def gradient(self, kernel: np.ndarray) -> np.ndarray:
        """A (sub)gradient of R at K̃, a symmetric matrix."""


class SpectralRegularizer(Regularizer):
    """A regularizer that is a function of the eigenvalues u of K̃ (descending).

    Every gradient here has the form a·K̃ + b·I + Σ_i w_i q_i q_iᵀ with
    w_i ≠ 0 only for the top few eigenvectors q_i (:meth:`gradient_parts`),
    so the solver needs only those eigenvectors (:meth:`vectors_needed`) and
    forms the gradient as a low-rank update, O(t²) per eigenvector instead of
    the O(t³) product Q diag(·) Qᵀ. ``value`` and ``gradient`` decompose K̃
    themselves.
    """

    def value(self, kernel):
        return self.value_from_spectrum(descending_eigh(kernel, vectors=False))

    def gradient(self, kernel):
        return self.gradient_from_eigh(kernel, *descending_eigh(kernel))

    @abstractmethod
    def value_from_spectrum(self, values: np.ndarray) -> float:
        """R from the eigenvalues of K̃ in descending order."""

    @abstractmethod
    def gradient_parts(self, values: np.ndarray) -> tuple[float, float, np.ndarray]:
        """(a, b, w) with gradient a·K̃ + b·I + Σ_i w_i q_i q_iᵀ, from the eigenvalues (descending)."""

    def vectors_needed(self, values: np.ndarray) -> int:
        """How many top eigenvectors the gradient at a K̃ with these eigenvalues uses."""
        nonzero = np.flatnonzero(self.gradient_parts(values)[2])
        return int(nonzero[-1]) + 1 if nonzero.size else 0

    def gradient_from_eigh(self, kernel: np.ndarray, values: np.ndarray, vectors: np.ndarray) -> np.ndarray:
        """(Sub)gradient at K̃ from all its eigenvalues and (at least) its top
        :meth:`vectors_needed` eigenvectors, as columns in descending order."""
        scale, shift, weights = self.gradient_parts(values)
        used = np.flatnonzero(weights)
        if used.size and used[-1] >= vectors.shape[1]:
            raise ValueError(f"{self.name}: the gradient needs {used[-1] + 1} eigenvectors; got {vectors.shape[1]}.")
        gradient = scale * kernel if scale != 0 else np.zeros_like(kernel)
        gradient[np.diag_indices_from(gradient)] += shift
        if used.size:
            columns = vectors[:, used]
            gradient += (columns * weights[used]) @ columns.T
        return gradient


class _LinearTrace(Regularizer):
    """c · tr K̃ for a constant c (set by the subclass from α or β)."""

    @property
    @abstractmethod
    def coefficient(self) -> float:
        """The constant c."""

    def value(self, kernel):
        return self.coefficient * float(np.trace(kernel))

    def gradient(self, kernel):
        return self.coefficient * np.eye(kernel.shape[0])


class TraceRegularizer(_LinearTrace):
    """Trace norm, eq. (16): R₂ = β tr K̃. For centred K̃, tr K̃ = 1ᵀD(K̃)1/(2t):
    minimising it shrinks all distances."""

    name = "trace"

    @property
    def coefficient(self):
        return self.beta


class NegTraceRegularizer(_LinearTrace):
    """Negated trace, eq. (17): R₃ = -α tr K̃, the distance-spreading term of
    maximum variance unfolding."""

    name = "neg_trace"

    @property
    def coefficient(self):
        return -self.alpha


class PartitionedRegularizer(SpectralRegularizer):
    """Partitioned regularizer with the quadratic smoother, eq. (41):

        R₅(K̃) = min_{P∈𝒫} γ/2 tr K̃² + β tr K̃ - (α+β) tr(PK̃)
              = γ/2 Σ u_i² + β Σ u_i - (α+β) Σ_{i≤d} u_i,

    which with γ = 0 is Shaw & Jebara's (19): spread the top d directions,
    shrink the rest. Not convex; the minimising P is the projector on the top
    d eigenvectors, and the gradient is that of the objective at this fixed P
    (Danskin), so the solver reaches a local minimum.
    """

    name = "partitioned"
    convex = False

    def value_from_spectrum(self, values):
        top = values[: self.n_components].sum()
        return 0.5 * self.gamma * float(values @ values) + self.beta * float(values.sum()) - (self.alpha + self.beta) * top

    def gradient_parts(self, values):
        # γK̃ + βI - (α+β) Q_d Q_dᵀ (a subgradient where u_d = u_{d+1})
        weights = np.zeros(values.size)
        weights[: self.n_components] = -(self.alpha + self.beta)
        return self.gamma, self.beta, weights


class CompletedSquareRegularizer(SpectralRegularizer):
    """Completed-square relaxation of (41), eq. (42):

        R₆(K̃) = min_{P∈𝒫} β tr K̃ + γ/2 ||K̃ - (α+β)/γ · P||²_F,

    jointly convex in (K̃, P), so its partial minimum over P is convex in K̃.
    The minimising P is the projection of K̃/c (c = (α+β)/γ) onto the Fantope
    𝒫: same eigenvectors, eigenvalues projected onto the capped simplex. By
    Danskin's theorem R₆ is differentiable with gradient βI + γ(K̃ - cP*), so
    the solver minimises over K̃ and P jointly to a global optimum. Bounds
    (§5.1): R₆ - d(α+β)²/(2γ) ≤ R₅ ≤ R₆.

    Where the eigenvalues of K̃ stay below about c, P* spreads over all t
    directions (θ < 0 below) and R₆ = β tr K̃ + γ/(2t)(cd - tr K̃)² up to the
    capped terms: a trace penalty of slope β - (α+β)d/t, which shrinks K̃ like
    (16) whenever t > (α+β)d/β (22 points for Table 1's parameters). Only
    eigenvalues near c make it spread the top d directions.
    """

    name = "completed_square"

    def _scale(self) -> float:
        return (self.alpha + self.beta) / self.gamma

    def projector_weights(self, values: np.ndarray) -> np.ndarray:
        """Eigenvalues of the minimising P ∈ 𝒫 for a K̃ with eigenvalues ``values``."""
        return capped_simplex_projection(values / self._scale(), self.n_components)

    def value_from_spectrum(self, values):
        residual = values - self._scale() * self.projector_weights(values)
        return self.beta * float(values.sum()) + 0.5 * self.gamma * float(residual @ residual)

    def gradient_parts(self, values):
        # βI + γK̃ - (α+β)P*, P* = Σ p_i q_i q_iᵀ, p_i = clip(u_i/c - θ, 0, 1). If θ < 0
        # every p_i > 0 and the uncapped ones, u_i/c - θ, cancel γK̃ = (α+β)U/c,
        # leaving the capped (top) eigenvectors; otherwise P* lives on the top
        # eigenvectors with p_i > 0.
        scale = self._scale()
        theta = capped_simplex_threshold(values / scale, self.n_components)
        weights = np.clip(values / scale - theta, 0.0, 1.0)
        spread = self.alpha + self.beta
        if theta < 0:
            excess = np.where(weights >= 1.0, values / scale - theta - 1.0, 0.0)
            return 0.0, self.beta + spread * theta, spread * excess
        return self.gamma, self.beta, -spread * weights


def biconjugate_dual(values: np.ndarray, n_components: int, alpha: float, beta: float, gamma: float) -> np.ndarray:
    """Solve the vector problem (50) for the eigenvalues z of the optimal Z in (44).

        min_{z₁ ≥ … ≥ z_t}  -2γ uᵀz + Σ_{i≤d} [z_i + α]₊² + Σ_{i>d} [z_i - β]₊²

    for u ≥ 0 in descending order. Without the order constraint the solution is
    (51): ẑ_i = γu_i - α (i ≤ d), γu_i + β (i > d), ordered within each block;
    when ẑ_d < ẑ_{d+1} the blocks are joined at a crossing value λ by (52):
    z_i = max(ẑ_i, λ) for i ≤ d, min(ẑ_i, λ) for i > d, with λ the minimiser of
    the convex piecewise-quadratic objective in λ. Its derivative is piecewise
    linear, continuous and non-decreasing with breakpoints at the ẑ_i, -α and β;
    all of them in [ẑ_d, ẑ_{d+1}] are evaluated at once (prefix sums of u over
    the blocks, searchsorted for the members) and λ is the root on the
    bracketing segment: O(t log t) after the eigendecomposition.
    """
    u = np.maximum(np.asarray(values, dtype=float), 0.0)  # round-off below 0 on a PSD matrix
    d = int(n_components)
    first = gamma * u[:d] - alpha
    second = gamma * u[d:] + beta
    if d == 0 or d == u.size or first[-1] >= second[0]:
        return np.concatenate([first, second])

    # Members raised to λ in the first block: a suffix (ẑ descending); lowered in the second: a prefix.
    first_ascending = first[::-1]
    first_u_suffix = np.concatenate([[0.0], np.cumsum(u[:d][::-1])])  # sums of the k smallest-ẑ members
    second_ascending = second[::-1]
    second_u_prefix = np.concatenate([[0.0], np.cumsum(u[d:])])

    def slope(lam):
        raised = np.searchsorted(first_ascending, lam, side="left")  # #{i ≤ d : ẑ_i < λ}
        lowered = second.size - np.searchsorted(second_ascending, lam, side="right")  # #{i > d : ẑ_i > λ}
        return 2.0 * (
            raised * np.maximum(lam + alpha, 0.0)
            - gamma * first_u_suffix[raised]
            + lowered * np.maximum(lam - beta, 0.0)
            - gamma * second_u_prefix[lowered]
        )

    low, high = first[-1], second[0]
    breaks = np.concatenate([first, second, [-alpha, beta, low, high]])
    breaks = np.unique(breaks[(breaks >= low) & (breaks <= high)])
    slopes = slope(breaks)
    right = int(np.searchsorted(slopes, 0.0, side="left"))  # first break with slope ≥ 0
    if right == 0 or slopes[right] == 0.0:
        lam = breaks[right]
    else:
        left = right - 1
        lam = breaks[left] - slopes[left] * (breaks[right] - breaks[left]) / (slopes[right] - slopes[left])
    return np.concatenate([np.maximum(first, lam), np.minimum(second, lam)])


def biconjugate_dual_objective(z, values, n_components, alpha, beta, gamma) -> float:
    """The objective of (50) at z (for checks against a generic solver)."""
    d = int(n_components)
    penalty = np.sum(np.maximum(z[:d] + alpha, 0.0) ** 2) + np.sum(np.maximum(z[d:] - beta, 0.0) ** 2)
    return float(-2.0 * gamma * np.dot(values, z) + penalty)


class BiconjugateRegularizer(SpectralRegularizer):
    """Fenchel biconjugate of (41), eqs. (43)–(44) (Theorem 1):

        R₇(K̃) = R₅**(K̃) = max_{Z=Zᵀ} tr(K̃Z) - 1/(2γ) max_{P∈𝒫} ||[Z - βI + (α+β)P]₊||²_F,

    the tightest convex lower bound of R₅. By von Neumann's trace inequality
    the optimal Z shares K̃'s eigenvectors, and its eigenvalues z solve the
    vector problem (50) (:func:`biconjugate_dual`), so

        R₇ = uᵀz - 1/(2γ) (Σ_{i≤d} [z_i + α]₊² + Σ_{i>d} [z_i - β]₊²),

    with subgradient Q diag(z) Qᵀ — one eigendecomposition per evaluation.
    R₇ = R₅ where the eigengap u_d - u_{d+1} ≥ (α+β)/γ; as γ → 0 it tends to
    -α tr K̃ (17) for d > 0.
    """

    name = "biconjugate"

    def dual(self, values: np.ndarray) -> np.ndarray:
        """Eigenvalues of the optimal Z in (44) for eigenvalues ``values`` (descending) of K̃."""
        return biconjugate_dual(values, self.n_components, self.alpha, self.beta, self.gamma)

    def value_from_spectrum(self, values):
        values = np.maximum(values, 0.0)
        z = self.dual(values)
        d = self.n_components
        penalty = np.sum(np.maximum(z[:d] + self.alpha, 0.0) ** 2) + np.sum(np.maximum(z[d:] - self.beta, 0.0) ** 2)
        return float(values @ z - penalty / (2.0 * self.gamma))

    def gradient_parts(self, values):
        # Q diag(z) Qᵀ. Past the pooled block z_i = γu_i + β (the free tail: γK̃ + βI
        # there), or, when the pooled value λ < β, z_i = λ on the whole tail (λI).
        z = self.dual(np.maximum(values, 0.0))
        free = z - (self.gamma * np.maximum(values, 0.0) + self.beta)
        d = self.n_components
        if d < z.size and np.all(free[d:] != 0):
            return 0.0, float(z[-1]), z - z[-1]
        return self.gamma, self.beta, free


#: Public regularizer names → classes, in the paper's order.
REGULARIZERS: dict[str, type[Regularizer]] = {
    cls.name: cls
    for cls in (
        TraceRegularizer,
        NegTraceRegularizer,
        PartitionedRegularizer,
        CompletedSquareRegularizer,
        BiconjugateRegularizer,
    )
}


def build_regularizer(name: str, n_components: int, *, alpha: float, beta: float, gamma: float) -> Regularizer:
    """The regularizer ``name`` for target dimension d = ``n_components``."""
    if name not in REGULARIZERS:
        raise ValueError(f"Unknown regularizer {name!r}; choose one of {sorted(REGULARIZERS)}.")
    if name in ("completed_square", "biconjugate") and gamma <= 0:
        raise ValueError(f"The {name} regularizer needs gamma > 0 (the smoother of eq. 41); got {gamma!r}.")
    return REGULARIZERS[name](n_components, alpha=alpha, beta=beta, gamma=gamma)
