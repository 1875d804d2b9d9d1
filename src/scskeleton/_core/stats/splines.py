"""Penalised regression splines of pseudotime, fitted to all genes at once.

Each gene's expression y is modelled as a smooth function of pseudotime t,
a penalised regression spline (O'Sullivan 1986; Wand & Ormerod 2008):

    f(t) = Σ_j β_j B_j(t),    β̂ = argmin Σ_i w_i (y_i − f(t_i))² + λ ∫ f''(t)² dt,

with cubic B-splines B_j on knots at quantiles of t — the criterion of
``scipy.interpolate.make_smoothing_spline``, on a fixed basis of a few knots
instead of one knot per cell. With the Gram matrix G = BᵀWB and the penalty
P_jk = ∫ B_j'' B_k'', the fit is β̂ = (G + λP)⁻¹ BᵀWy. Everything a gene needs is
in its sufficient statistics BᵀWy (m values) and Σ w y², so all genes are fitted
by one multi-column solve. Those statistics come from one pass over the cells
(:mod:`~.passes`); this module holds the bases and the fit.

One generalized eigendecomposition diagonalises the fit for every λ:
V with Vᵀ(G + cP)V = I and Vᵀ(cP)V = diag(μ), 0 ≤ μ ≤ 1 (c balances the
scales). Then, with θ = λ / c and d_j = 1 − μ_j + θμ_j,

    β̂ = V a,  a = z / d,  z = VᵀBᵀWy,
    RSS = Σ w y² − Σ_j z_j² (1 − μ_j + 2θμ_j) / d_j²,
    edf = tr((G + λP)⁻¹G) = Σ_j (1 − μ_j) / d_j,

so the effective degrees of freedom (trace of the hat matrix) are matched to a
target by a scalar root search, and λ can be chosen per gene by generalised
cross-validation on a grid of θ by one matrix product (vectorised over genes).
G may be singular (a branch that ends early leaves the last B-splines without
cells); the fit is still unique because the penalty's null space (straight
lines) is supported by any two distinct times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, linalg, optimize

from ..validation import check_integer, check_positive

DEGREE = 3
#: Generalized eigenvalues μ (in [0, 1]) closer than this to 0 or 1 count as exactly 0 or 1.
RELATIVE_ZERO = 1e-10
#: Points of the per-gene GCV search over log θ.
GCV_POINTS = 91


@dataclass(frozen=True)
class SplineBasis:
    """Cubic B-spline basis on ``knots`` with its curvature penalty.

    ``knots`` are the distinct knots (boundary included); ``penalty`` is the
    m × m matrix P_jk = ∫ B_j''(t) B_k''(t) dt over the knots' range.
    """

    knots: np.ndarray
    penalty: np.ndarray

    @property
    def vector(self) -> np.ndarray:
        """The full knot vector, boundary knots repeated DEGREE + 1 times."""
        return _knot_vector(self.knots)

    @property
    def n_basis(self) -> int:
        return self.knots.size + DEGREE - 1

    def design(self, times: np.ndarray) -> np.ndarray:
        """The len(times) × m basis matrix; times are clipped to the knots' range."""
        times = np.clip(np.asarray(times, dtype=float), self.knots[0], self.knots[-1])
        return interpolate.BSpline.design_matrix(times, self.vector, DEGREE).toarray()


def spline_basis(times: np.ndarray, n_knots: int, *, curves=None) -> SplineBasis:
    """Cubic B-splines with knots at ``n_knots`` quantiles of ``times`` (the minimum
    and maximum included; knots closer than :data:`MIN_KNOT_SPACING` of the mean
    spacing merge), and their curvature penalty.

    Quantile knots give every basis function cells to rest on wherever the
    cells are spread unevenly in pseudotime. Nearly tied quantiles merge too: a
    tenth of the cells at the root's time 0 and one cell at 9·10⁻⁵ put two knots
    that close, and the penalty's eigenvalues then spanned 10¹⁶, so that no
    smoothing brought a curve below 11 degrees of freedom (a branch test on
    RPG's tree of 4,000 ``simulate_trajectory`` cells raised at df = 6).
    ``curves`` (boolean masks over ``times``, one per curve to be fitted on the
    basis) takes the union of ``n_knots`` quantiles of each curve's own cells
    instead (:func:`basis_for_curves` chooses between the two).
    """
    n_knots = check_integer("n_knots", n_knots, low=2)
    times = np.asarray(times, dtype=float)
    levels = np.linspace(0.0, 1.0, n_knots)
    if curves is None:
        knots = _spaced(np.unique(np.quantile(times, levels)))
    else:
        knots = _spaced(np.unique(np.concatenate([np.quantile(times[mask], levels) for mask in curves if np.any(mask)])))
    if knots.size < 2:
        raise ValueError("All cells have the same pseudotime; a trend needs cells at two or more times.")
    second = interpolate.BSpline(_knot_vector(knots), np.eye(knots.size + DEGREE - 1), DEGREE).derivative(2)
    penalty = _curvature_products(second, knots)
    return SplineBasis(knots=knots, penalty=(penalty + penalty.T) / 2.0)


def basis_for_curves(times: np.ndarray, n_knots: int, weights: list[np.ndarray], df: float) -> SplineBasis:
    """The common basis of several curves fitted to weighted cells (``weights``: one vector over
    ``times`` per curve), each to carry ``df`` effective degrees of freedom.

    Knots at quantiles of all the cells, unless some curve's cells then touch
    too few basis functions to carry ``df`` (a short branch beside a long,
    crowded one falls within one or two knot intervals); then the union of each
    curve's own quantiles (:func:`spline_basis` with ``curves``). Lowering the
    df instead, for every curve alike, left the shared curve of a branch test
    too stiff for switch-like genes on the long branch: 15 % of shared genes
    below p = 0.05 on the true time, against 4 % with the curves' own knots.
    Only where needed (:func:`needs_own_knots`): the union's extra knots moved
    the warp a branch test fits on PROSSTT-like trees and cost calibration
    elsewhere.
    """
    if not needs_own_knots(times, n_knots, weights, df):
        return spline_basis(times, n_knots)
    return spline_basis(times, n_knots, curves=[weight > 0 for weight in weights])


def needs_own_knots(times: np.ndarray, n_knots: int, weights: list[np.ndarray], df: float) -> bool:
    """Whether some curve's weighted cells cannot carry ``df`` on knots at quantiles of all ``times``."""
    basis = spline_basis(times, n_knots)
    design = basis.design(times)
    grams = [(design * weight[:, None]).T @ design for weight in weights]
    least, most = _df_range(grams, basis.penalty)
    return not least < df < most - 1e-6


#: Knots of several curves closer than this share of the mean knot spacing merge: curves that share
#: cells (the trunk) put quantiles almost on top of each other, and a basis function a hundredth of
#: the spacing wide makes the curvature penalty so ill-conditioned (∝ 1/width³) that it loses its
#: straight-line null space numerically.
MIN_KNOT_SPACING = 0.1


def _spaced(knots: np.ndarray) -> np.ndarray:
    """``knots`` (sorted, distinct) without those closer than :data:`MIN_KNOT_SPACING` of the
    mean spacing to the previous one kept; both ends stay."""
    if knots.size < 3:
        return knots
    least = MIN_KNOT_SPACING * (knots[-1] - knots[0]) / (knots.size - 1)
    kept = [knots[0]]
    for knot in knots[1:-1]:
        if knot - kept[-1] >= least and knots[-1] - knot >= least:
            kept.append(knot)
    kept.append(knots[-1])
    return np.asarray(kept)


@dataclass(frozen=True)
class PeriodicSplineBasis:
    """Cyclic cubic B-splines of a phase in [0, 1) with their curvature penalty.

    ``knots`` are the m distinct knots in [0, 1) followed by the first plus one (the
    period closes there); the m basis functions wrap round (each B-spline that runs
    past 1 continues from 0), sum to one at every phase, and the penalty
    P_jk = ∫₀¹ B_j''(t) B_k''(t) dt leaves only the constant unpenalised: a trend of a
    phase has no straight line to fall back on, it returns where it started.
    """

    knots: np.ndarray
    penalty: np.ndarray

    @property
    def n_basis(self) -> int:
        return self.knots.size - 1

    def design(self, times: np.ndarray) -> np.ndarray:
        """The len(times) × m basis matrix; times are taken modulo 1 from the first knot."""
        start = self.knots[0]
        times = start + np.mod(np.asarray(times, dtype=float) - start, 1.0)
        return _fold(interpolate.BSpline.design_matrix(times, _periodic_vector(self.knots), DEGREE).toarray(),
                     self.n_basis)


def periodic_spline_basis(phases: np.ndarray, n_knots: int) -> PeriodicSplineBasis:
    """Cyclic cubic B-splines with knots at ``n_knots`` quantiles of ``phases`` (in [0, 1);
    tied quantiles merge), and their curvature penalty over one period."""
    n_knots = check_integer("n_knots", n_knots, low=4)
    phases = np.mod(np.asarray(phases, dtype=float), 1.0)
    knots = np.unique(np.quantile(phases, np.linspace(0.0, 1.0, n_knots, endpoint=False)))
    if knots.size < 4:
        raise ValueError("The cells' phases take too few distinct values for a periodic trend (4 knots at least).")
    knots = np.append(knots, knots[0] + 1.0)
    vector = _periodic_vector(knots)
    n_basis = knots.size - 1
    second = interpolate.BSpline(vector, np.eye(vector.size - DEGREE - 1), DEGREE).derivative(2)
    penalty = _fold(_fold(_curvature_products(second, knots), n_basis).T, n_basis)
    return PeriodicSplineBasis(knots=knots, penalty=(penalty + penalty.T) / 2.0)


def _periodic_vector(knots: np.ndarray) -> np.ndarray:
    """The knot vector of one period (``knots`` closing at the first plus one) extended periodically by DEGREE
    knots on each side."""
    spacing = np.diff(knots)
    before = knots[0] - np.cumsum(spacing[::-1][:DEGREE])[::-1]
    after = knots[-1] + np.cumsum(spacing[:DEGREE])
    return np.concatenate([before, knots, after])


def _fold(columns: np.ndarray, n_basis: int) -> np.ndarray:
    """Add the B-splines past the period's end onto the first ones they continue (the last DEGREE columns)."""
    folded = columns[:, :n_basis].copy()
    folded[:, : columns.shape[1] - n_basis] += columns[:, n_basis:]
    return folded


_GAUSS_LEGENDRE_2 = np.polynomial.legendre.leggauss(2)


def _curvature_products(second, knots: np.ndarray) -> np.ndarray:
    """∫ B_j'' B_k'' over ``knots``' range, exact: B'' is linear on each knot interval, so 2-point
    Gauss–Legendre integrates the products exactly."""
    nodes, weights = _GAUSS_LEGENDRE_2
    half = np.diff(knots) / 2.0
    middle = (knots[:-1] + knots[1:]) / 2.0
    points = (middle[:, None] + half[:, None] * nodes[None, :]).ravel()
    point_weights = (half[:, None] * weights[None, :]).ravel()
    values = second(points)
    return values.T @ (point_weights[:, None] * values)


def _knot_vector(knots: np.ndarray) -> np.ndarray:
    return np.concatenate([np.repeat(knots[0], DEGREE), knots, np.repeat(knots[-1], DEGREE)])


@dataclass(frozen=True)
class SplineFit:
    """Penalised spline fits of G genes on one basis.

    ``coef`` (m × G) are the B-spline coefficients β̂, ``rss`` the (weighted)
    residual sums of squares, ``lam`` the penalty λ of each gene and ``hat``
    (m × G) the non-zero eigenvalues h_j = (1 − μ_j) / d_j of each gene's hat
    matrix, from which the degrees of freedom of the tests follow.
    """

    coef: np.ndarray
    rss: np.ndarray
    lam: np.ndarray
    hat: np.ndarray

    @property
    def edf(self) -> np.ndarray:
        """Effective degrees of freedom, tr H."""
        return self.hat.sum(axis=0)

    def moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Σ_j a_j, Σ_j a_j² with a_j = 1 − (1 − h_j)², and Σ_j (1 − (1 − h_j)⁴).

        ``I − (I − H)²`` (the part of the variance a fit explains) has the
        eigenvalues a_j, and ``(I − H)²`` (its residual form) has
        1 − a_j ≠ 1 only on these m dimensions.
        """
        gain = 1.0 - (1.0 - self.hat) ** 2
        return gain.sum(axis=0), (gain**2).sum(axis=0), (1.0 - (1.0 - self.hat) ** 4).sum(axis=0)


@dataclass(frozen=True)
class _Eigen:
    vectors: np.ndarray  # V, m × m
    mu: np.ndarray  # m, in [0, 1]
    scale: float  # c: λ = θ c

    def edf(self, theta):
        theta = np.asarray(theta, dtype=float)[..., None]
        return ((1.0 - self.mu) / (1.0 - self.mu + theta * self.mu)).sum(axis=-1)

    def theta_range(self) -> tuple[float, float]:
        """θ from where no supported direction is shrunk yet to where all penalised ones are.

        Direction j is halved at θ = (1 − μ_j) / μ_j; the range spans those of
        the directions that are both penalised and supported by cells, with
        six decades of margin, since uneven knots spread them over many decades.
        """
        active = (self.mu > RELATIVE_ZERO) & (1.0 - self.mu > RELATIVE_ZERO)
        if not active.any():
            return 1.0, 1.0
        halves = (1.0 - self.mu[active]) / self.mu[active]
        return float(halves.min()) * 1e-6, float(halves.max()) * 1e6


def _eigen(gram: np.ndarray, penalty: np.ndarray) -> _Eigen:
    scale = np.trace(gram) / np.trace(penalty)
    try:
        mu, vectors = linalg.eigh(scale * penalty, gram + scale * penalty)
    except linalg.LinAlgError:
        raise ValueError("The cells' pseudotimes do not determine a trend (fewer than two distinct values).") from None
    return _Eigen(vectors=vectors, mu=np.clip(mu, 0.0, 1.0), scale=float(scale))


def _theta_for_df(eigen: _Eigen, df: float, what: str) -> float:
    """θ at which the fit uses ``df`` effective degrees of freedom (edf falls with θ)."""
    low, high = eigen.theta_range()
    most, least = float(eigen.edf(low)), float(eigen.edf(high))
    if not least < df < most:
        raise ValueError(
            f"{what}: its cells support between {least:.3f} and {most:.3f} effective degrees of freedom, and "
            f"df={df:g} is outside. Too few cells, or cells covering only part of the knots (a branch that "
            "ends early): lower df, or raise n_knots so that more knots fall within its pseudotime range."
        )
    return float(np.exp(optimize.brentq(
        lambda log_theta: float(eigen.edf(np.exp(log_theta))) - df, np.log(low), np.log(high), xtol=1e-10
    )))


def lam_for_df(gram: np.ndarray, penalty: np.ndarray, df: float, what: str) -> float:
    """The penalty λ at which a fit with this Gram matrix uses ``df`` effective degrees of freedom."""
    eigen = _eigen(gram, penalty)
    return _theta_for_df(eigen, df, what) * eigen.scale


def adapt_df(df: float, grams: list[np.ndarray], penalty: np.ndarray, what: str) -> float:
    """The ``df`` every fit in ``grams`` can use: ``df`` itself, or less when the cells cannot carry it.

    The effective degrees of freedom a set of cells supports run from 2 (a
    straight line, the penalty's null space) up to the number of basis
    functions its cells touch. Cells with many tied pseudotimes (many cells
    projected onto one node) or a branch that ends early touch few, so a
    default of 6 can exceed what they carry. Then the largest usable value is
    taken, 90 % of the way from the least to the most the cells support (the
    caller reports the change); only when even that leaves no room for a curve
    (under 2.5) does it raise, saying what would work.
    """
    least, most = _df_range(grams, penalty)
    if least < df < most - 1e-6:
        return float(df)
    usable = least + 0.9 * (most - least)
    if usable < 2.5:
        raise ValueError(
            f"{what}: its cells support at most {most:.2f} effective degrees of freedom, too few for a curve "
            "(a straight line takes 2). Its pseudotimes take too few distinct values: choose a longer path or "
            "segment, or raise n_knots."
        )
    return float(min(df, usable))


def _df_range(grams: list[np.ndarray], penalty: np.ndarray) -> tuple[float, float]:
    """The effective degrees of freedom every fit in ``grams`` can use: (least, most)."""
    bounds = [_edf_bounds(_eigen(gram, penalty)) for gram in grams]
    return max(low for low, _ in bounds), min(high for _, high in bounds)


def _edf_bounds(eigen: _Eigen) -> tuple[float, float]:
    low, high = eigen.theta_range()
    return float(eigen.edf(high)), float(eigen.edf(low))


def penalized_fit(
    gram: np.ndarray,
    cross: np.ndarray,
    sumsq: np.ndarray,
    penalty: np.ndarray,
    *,
    df: float | None,
    what: str = "The path",
) -> SplineFit:
    """Fit every gene by the penalised spline, from its sufficient statistics.

    ``df`` fixes the effective degrees of freedom, the same for all genes
    (λ solved from it); ``None`` chooses λ per gene by generalised
    cross-validation, GCV(λ) = n · RSS(λ) / (n − edf(λ))², over a grid of λ.
    ``what`` names the data in error messages.
    """
    eigen = _eigen(gram, penalty)
    z = eigen.vectors.T @ cross  # m × G
    n_obs = float(gram.sum())  # Σ_jk G_jk = Σ_i w_i, since the B-splines sum to one
    one_minus = 1.0 - eigen.mu
    if df is None:
        thetas = np.geomspace(*eigen.theta_range(), GCV_POINTS)
        d = one_minus[None, :] + thetas[:, None] * eigen.mu[None, :]  # L × m
        shrink = (one_minus[None, :] + 2.0 * thetas[:, None] * eigen.mu[None, :]) / d**2
        rss = np.maximum(sumsq[None, :] - shrink @ z**2, 0.0)  # L × G
        edf = eigen.edf(thetas)  # L
        with np.errstate(divide="ignore", invalid="ignore"):
            gcv = n_obs * rss / np.maximum(n_obs - edf[:, None], 1e-12) ** 2
        theta = thetas[np.argmin(gcv, axis=0)]  # G
    else:
        theta = np.full(z.shape[1], _theta_for_df(eigen, df, what))
    d = one_minus[:, None] + theta[None, :] * eigen.mu[:, None]  # m × G
    coef = eigen.vectors @ (z / d)
    shrink = (one_minus[:, None] + 2.0 * theta[None, :] * eigen.mu[:, None]) / d**2
    rss = np.maximum(sumsq - (shrink * z**2).sum(axis=0), 0.0)
    return SplineFit(coef=coef, rss=rss, lam=theta * eigen.scale, hat=one_minus[:, None] / d)


def check_df(df: float | None, *, allow_none: bool) -> float | None:
    """Effective degrees of freedom of a curve: > 2 (a straight line has 2)."""
    if df is None and allow_none:
        return None
    df = check_positive("df", df, role="effective degrees of freedom of each curve")
    if df <= 2.0:
        raise ValueError(f"df must be > 2 (a straight line already has 2 degrees of freedom); got {df:g}.")
    return df


def explained_form(gram: np.ndarray, penalty: np.ndarray, lam: float) -> np.ndarray:
    """S = 2M⁻¹ − M⁻¹GM⁻¹, M = G + λP: a fit explains the form (Xᵀy)ᵀ S (Xᵀy) of Σ y²."""
    inverse = linalg.pinvh(gram + lam * penalty)
    return 2.0 * inverse - inverse @ gram @ inverse


def check_cells(rows, times) -> tuple[np.ndarray, np.ndarray]:
    rows = np.asarray(rows, dtype=np.intp).ravel()
    times = np.asarray(times, dtype=float).ravel()
    if rows.shape != times.shape:
        raise ValueError(f"rows and times must have the same length; got {rows.size} and {times.size}.")
    if not np.isfinite(times).all():
        raise ValueError("Pseudotimes must be finite; leave out cells without a pseudotime.")
    if rows.size < 3:
        raise ValueError(f"A trend needs at least 3 cells; got {rows.size}.")
    if np.unique(rows).size != rows.size:
        raise ValueError("rows must not repeat a cell.")
    return rows, times
