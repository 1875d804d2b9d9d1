"""Losses between squared-distance matrices for the convex embedding framework.

Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
nonlinear dimensionality reduction", ICML 2012,
§4.2. Every loss compares a reconstruction D̂ = D(K̃) with the target squared
distances D of the data and is convex in D̂, hence (Proposition 1) in K̃.

Each loss is an object built from the target matrix ``D`` (t × t) with a
``value(D̂)`` and a ``gradient(D̂)`` (the t × t matrix ∂L/∂D̂, entries indexed
like D̂, sums over all ordered pairs ij as in the paper). The solver chains the
gradient to K̃ through the adjoint of the linear map (3)
(:func:`scskeleton._core.convex.regularized.distances_adjoint`). ``LOSSES`` maps the
public names to the classes.

Two more quantities fix the loss's scale against the regularizers:

``stretch_curvature()``
    c_L = d²/dε² L((1+ε)D; D) at ε = 0, the curvature of the loss when every
    squared distance of the data is stretched by the same factor. The solver
    measures the loss in units of c_L / tr K(D) (see ``regularized.py``), so that
    -α tr K̃ (17) stretches the data by about α / ``loss_weight`` whatever the
    loss, its σ or the number of points.
``recession_weights()``
    W ≥ 0 with L(D̂ + sE) growing like s⟨W, E⟩ for large s along every distance
    matrix E, for the losses that grow only linearly far away (exponential and
    SNE divergences); ``None`` for the losses that grow quadratically. It
    decides whether (17) is bounded below (``regularized.check_bounded``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
from scipy import special
from scipy.sparse import csgraph

from ..graphs import from_edges, knn_edges


def _centre_both(matrix: np.ndarray) -> np.ndarray:
    """H M H for H = I - 11ᵀ/t from row and column means; unlike ``embed.center_kernel``
    also for non-symmetric M (the losses are functions of any t × t matrix D̂)."""
    centred = matrix - matrix.mean(axis=0, keepdims=True)
    return centred - centred.mean(axis=1, keepdims=True)


class Loss(ABC):
    """A loss L(D̂; D) convex in D̂, with its gradient in D̂.

    Subclasses set ``name`` (the public name) and implement ``value`` and
    ``gradient``; ``target`` is the t × t matrix D of squared distances.
    """

    name = ""
    #: Whether the loss has the scale parameter σ (and so a default taken from the data).
    uses_sigma = False

    def __init__(self, target: np.ndarray):
        self.target = np.asarray(target, dtype=float)

    @classmethod
    def build(cls, target: np.ndarray, *, points: np.ndarray, n_neighbors: int, sigma: float) -> "Loss":
        """Construct from the target and the options every loss may use."""
        return cls(target)

    @abstractmethod
    def value(self, dhat: np.ndarray) -> float:
        """L(D̂; D)."""

    @abstractmethod
    def gradient(self, dhat: np.ndarray) -> np.ndarray:
        """∂L/∂D̂, a t × t matrix."""

    @abstractmethod
    def stretch_curvature(self) -> float:
        """d²/dε² L((1+ε)D; D) at ε = 0 (the loss vanishes to first order at D̂ = D)."""

    def recession_weights(self) -> np.ndarray | None:
        """Weights W of the linear growth far from D, or ``None`` where the loss grows quadratically."""
        return None


class KPCALoss(Loss):
    """Doubly centred squared loss, eq. (22): L₁ = ||H(D - D̂)H||²_F (kernel PCA)."""

    name = "kpca"

    def __init__(self, target):
        super().__init__(target)
        self._centred_target = _centre_both(self.target)

    def value(self, dhat):
        residual = self._centred_target - _centre_both(dhat)
        return float(np.vdot(residual, residual))

    def gradient(self, dhat):
        return 2.0 * (_centre_both(dhat) - self._centred_target)

    def stretch_curvature(self):
        return 2.0 * float(np.vdot(self._centred_target, self._centred_target))


class SquaredLoss(Loss):
    """Squared loss, eq. (23): L₂ = ||D - D̂||²_F (metric MDS)."""

    name = "squared"

    def value(self, dhat):
        residual = self.target - dhat
        return float(np.vdot(residual, residual))

    def gradient(self, dhat):
        return 2.0 * (dhat - self.target)

    def stretch_curvature(self):
        return 2.0 * float(np.vdot(self.target, self.target))


class SammonLoss(Loss):
    """Sammon loss, eq. (26): L₅ = Σ_ij (D_ij - D̂_ij)² / D_ij.

    Pairs with D_ij = 0 (the diagonal and duplicated points) are left out:
    their weight 1 / D_ij is undefined.
    """

    name = "sammon"

    def __init__(self, target):
        super().__init__(target)
        positive = self.target > 0
        self._weight = np.divide(1.0, self.target, out=np.zeros_like(self.target), where=positive)

    def value(self, dhat):
        residual = self.target - dhat
        return float(np.vdot(self._weight * residual, residual))

    def gradient(self, dhat):
        return 2.0 * self._weight * (dhat - self.target)

    def stretch_curvature(self):
        return 2.0 * float(self.target[self.target > 0].sum())


class MVULoss(Loss):
    """Regularized-MVU local loss, eq. (29): L₈ = Σ_ij N(D)_ij (D_ij - D̂_ij)².

    N(D) is the symmetrised k-nearest-neighbour adjacency of the points
    (N_ij = N_ji = 1 when either is among the other's ``n_neighbors``
    nearest), so every neighbour pair is counted twice, as in the sum over ij.
    """

    name = "mvu"

    def __init__(self, target, edges: np.ndarray):
        super().__init__(target)
        self.edges = np.asarray(edges, dtype=np.intp)
        self._heads, self._tails = self.edges[:, 0], self.edges[:, 1]
        self._edge_target = self.target[self._heads, self._tails]

    @classmethod
    def build(cls, target, *, points, n_neighbors, sigma):
        edges = knn_edges(points, n_neighbors)
        graph = from_edges(edges, np.ones(edges.shape[0]), points.shape[0])
        n_parts = csgraph.connected_components(graph, directed=False)[0]
        if n_parts > 1:
            raise ValueError(
                f"The {n_neighbors}-nearest-neighbour graph of the mvu loss (29) has {n_parts} connected "
                "components: their relative placement is not constrained by the loss (and unbounded under "
                "distance-spreading regularizers). Increase n_neighbors or embed the components separately."
            )
        return cls(target, edges)

    def value(self, dhat):
        upper = self._edge_target - dhat[self._heads, self._tails]
        lower = self._edge_target - dhat[self._tails, self._heads]
        return float(upper @ upper + lower @ lower)

    def gradient(self, dhat):
        grad = np.zeros_like(dhat)
        grad[self._heads, self._tails] = 2.0 * (dhat[self._heads, self._tails] - self._edge_target)
        grad[self._tails, self._heads] = 2.0 * (dhat[self._tails, self._heads] - self._edge_target)
        return grad

    def stretch_curvature(self):
        return 4.0 * float(self._edge_target @ self._edge_target)  # ε² D_ij² for ij and ji, differentiated twice


class ExpBregmanLoss(Loss):
    """Reciprocal exponential Bregman divergence with D̂ first, eq. (31):

        Σ_ij exp(-D̂_ij/σ) - exp(-D_ij/σ) + exp(-D_ij/σ)(D̂_ij - D_ij)/σ,

    the divergence of the convex potential F(x) = exp(-x/σ), convex in D̂.
    It forgives errors on pairs that are far apart in both D and D̂, the
    most local of the losses.
    """

    name = "exp_bregman"
    uses_sigma = True

    def __init__(self, target, sigma: float):
        super().__init__(target)
        self.sigma = float(sigma)
        self._target_exp = np.exp(-self.target / self.sigma)

    @classmethod
    def build(cls, target, *, points, n_neighbors, sigma):
        return cls(target, sigma)

    def value(self, dhat):
        terms = np.exp(-dhat / self.sigma) - self._target_exp + self._target_exp * (dhat - self.target) / self.sigma
        return float(terms.sum())

    def gradient(self, dhat):
        return (self._target_exp - np.exp(-dhat / self.sigma)) / self.sigma

    def stretch_curvature(self):
        # the second derivative of exp(-x/σ) is exp(-x/σ)/σ²
        return float(np.vdot(self._target_exp, self.target**2)) / self.sigma**2

    def recession_weights(self):
        # far away exp(-D̂/σ) vanishes and the linear term exp(-D/σ)D̂/σ remains
        return self._target_exp / self.sigma


class SNELoss(Loss):
    """Matrix-wise SNE divergence, eq. (34) with the transfer (35):

        Σ_ij p(D)_ij (log p(D)_ij - log p(D̂)_ij),  p(D) = exp(-D/σ) / 1ᵀexp(-D/σ)1.

    This is the "SNE" loss of the paper's experiments (Table 1). As a function
    of D̂ it is Σ p(D)_ij D̂_ij/σ + logsumexp(-D̂/σ) + const, convex; the
    gradient is (p(D) - p(D̂))/σ. The paper has σ = 1; ``sigma`` rescales the
    distances for data of another scale.

    Unlike the other losses it does not grow with t: p sums to one, so far
    away it rises like ⟨p/σ, D̂⟩ with weights whose Laplacian has λ₂ ≲ 1/(σt),
    while -α tr K̃ (17) falls like α⟨1/(2t), D̂⟩. At a fixed weight such as the
    paper's 10 the pair is unbounded below beyond a few tens of points; the
    stretch-curvature units of the solver (``stretch_curvature``) scale it
    with t like the others.
    """

    name = "sne"
    uses_sigma = True

    def __init__(self, target, sigma: float):
        super().__init__(target)
        self.sigma = float(sigma)
        self._log_p = self._log_transfer(self.target)
        self._p = np.exp(self._log_p)

    @classmethod
    def build(cls, target, *, points, n_neighbors, sigma):
        return cls(target, sigma)

    def _log_transfer(self, distances):
        scaled = -distances / self.sigma
        return scaled - special.logsumexp(scaled)

    def value(self, dhat):
        return float(np.vdot(self._p, self._log_p - self._log_transfer(dhat)))

    def gradient(self, dhat):
        return (self._p - np.exp(self._log_transfer(dhat))) / self.sigma

    def _normalised_sums(self, values):
        """Σ p·values over each normalisation set of the transfer (the whole matrix)."""
        return np.sum(self._p * values)

    def stretch_curvature(self):
        # Hessian (diag p - ppᵀ)/σ² per normalisation set: the p-variance of D, over σ²
        spread = self._normalised_sums(self.target**2) - self._normalised_sums(self.target) ** 2
        return float(np.sum(spread)) / self.sigma**2

    def recession_weights(self):
        # far away the log-normaliser tends to the constant of the diagonal (D̂_ii = 0), leaving Σ p D̂/σ
        return self._p / self.sigma


class RowSNELoss(SNELoss):
    """Row-wise SNE divergence, eq. (32) with the transfer (33), summed over rows i:

        Σ_i Σ_j p(D_i:)_j (log p(D_i:)_j - log p(D̂_i:)_j),  p(D_i:) = exp(-D_i:/σ) / exp(-D_i:)1,

    the original (asymmetric) SNE up to normalising over the whole row.
    Gradient (p(D) - p(D̂))/σ with row-wise transfers.
    """

    name = "sne_rows"

    def _log_transfer(self, distances):
        scaled = -distances / self.sigma
        return scaled - special.logsumexp(scaled, axis=1, keepdims=True)

    def _normalised_sums(self, values):
        return np.sum(self._p * values, axis=1)


#: Public loss names → classes, in the paper's order.
LOSSES: dict[str, type[Loss]] = {
    cls.name: cls for cls in (KPCALoss, SquaredLoss, SammonLoss, MVULoss, ExpBregmanLoss, SNELoss, RowSNELoss)
}


def build_loss(name: str, target: np.ndarray, *, points: np.ndarray, n_neighbors: int, sigma: float) -> Loss:
    """The loss ``name`` for the target squared distances ``target`` of ``points``."""
    if name not in LOSSES:
        raise ValueError(f"Unknown loss {name!r}; choose one of {sorted(LOSSES)}.")
    return LOSSES[name].build(target, points=points, n_neighbors=n_neighbors, sigma=sigma)
