"""Does a gene change anywhere along the tree? One curve per lineage against a constant."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, stats

from ..validation import check_integer, check_positive
from .inference import MIN_VARYING_CELLS, benjamini_hochberg, blank_degenerate, f_test, form_f_pvalues
from .passes import sufficient_statistics
from .splines import (
    adapt_df,
    basis_for_curves,
    check_cells,
    check_df,
    explained_form,
    penalized_fit,
)


@dataclass(frozen=True)
class AssociationResult:
    """Output of :func:`association_test` for G genes and L lineages.

    ``curves`` (G × L × n_grid) is each lineage's curve on ``grid``, NaN
    outside its cells' pseudotime range; ``amplitude`` (G) the largest
    max − min of a gene's curve over any lineage; ``fstat``/``pvals``/``qvals``
    the F test of one curve per lineage against a constant; ``df`` the
    effective degrees of freedom of every curve; ``n_cells`` per lineage (a
    cell on a shared segment counts in each); ``degenerate`` as in
    :class:`TrendResult`.
    """

    grid: np.ndarray
    curves: np.ndarray
    amplitude: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    df: float
    knots: np.ndarray
    n_cells: np.ndarray
    degenerate: np.ndarray


def association_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    membership: np.ndarray,
    *,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    columns: np.ndarray | None = None,
) -> AssociationResult:
    """Test per gene whether it changes anywhere along a tree: one curve per lineage against a constant.

    ``groups`` gives each cell's segment (0…S−1) and ``membership`` (S × L)
    the weight of segment s in lineage l: 1/k_s when s lies on l and k_s
    lineages pass through it, 0 otherwise, so that every cell carries a total
    weight of one (as the trunk in :func:`branch_test`). The alternative fits
    one penalised spline per lineage (root to leaf) with ``df`` effective
    degrees of freedom on a common basis (:func:`~.splines.basis_for_curves`),
    weighted by W_l; the null is one
    constant over all cells. With Q = Σ_l W_l X S_l Xᵀ W_l the lineage fits
    explain yᵀQy; constants pass through every fit unchanged (the penalty
    leaves them free), so Q1 = 1 and the null's projection P₁ = 11ᵀ/n gives
    A = Q − P₁, tr A = tr Q − 1, tr A² = tr Q² − 1, and R = I − Q. The
    traces follow from UᵀU, U = [W_1X, …, W_LX], built from the segments'
    Gram matrices. p-values are the exact Gaussian null of F
    (:func:`~.inference.form_f_pvalues`, a saddlepoint on the eigenvalues
    of A/a − fR/r in span(U)).
    """
    n_grid = check_integer("n_grid", n_grid, low=2)
    lin = fit_lineages(matrix, rows, times, groups, membership, n_knots=n_knots, df=df, columns=columns)
    n_cells = float(lin.rows.size)
    total = lin.stats.cross.sum(axis=(0, 1))  # Σ y (the B-splines sum to one)
    rss0 = np.maximum(lin.stats.sumsq.sum(axis=0) - total**2 / n_cells, 0.0)
    fstat, approximate = f_test(
        rss0, lin.rss,
        lin.q_trace - 1.0, lin.q_trace_sq - 1.0, n_cells - lin.q_trace, n_cells - 2.0 * lin.q_trace + lin.q_trace_sq,
    )
    # the exact null for Gaussian noise (Satterthwaite's where the saddlepoint is singular): the
    # constant is U·1 (the B-splines sum to one and the lineage weights of a cell sum to one),
    # so the null's projection 11ᵀ/n is U (11ᵀ/n) Uᵀ and C_A = C_Q − 11ᵀ/n
    ones = np.full(lin.utu.shape[0], 1.0)
    exact = form_f_pvalues(fstat, lin.utu, lin.forms - np.outer(ones, ones) / n_cells, lin.forms, n_cells)
    pvals = np.where(np.isnan(exact), approximate, exact)
    fstat, pvals = blank_degenerate(lin.degenerate, fstat, pvals)
    grid = np.linspace(lin.basis.knots[0], lin.basis.knots[-1], n_grid)
    curves = lin.curves(grid)
    with np.errstate(invalid="ignore"):
        amplitude = np.nanmax(np.nanmax(curves, axis=2) - np.nanmin(curves, axis=2), axis=1)
    amplitude = np.where(lin.degenerate, 0.0, amplitude)
    return AssociationResult(
        grid=grid, curves=curves, amplitude=amplitude, fstat=fstat, pvals=pvals,
        qvals=benjamini_hochberg(pvals), df=lin.df, knots=lin.basis.knots,
        n_cells=lin.in_lineage.sum(axis=0), degenerate=lin.degenerate,
    )


@dataclass(frozen=True)
class LineageFits:
    """One penalised spline per lineage for every gene (:func:`fit_lineages`).

    ``fits`` (L) hold each lineage's coefficients and RSS; ``rss`` (G) their
    sum; ``q_trace``, ``q_trace_sq`` are tr Q and tr Q² of the lineage fits'
    explained form Q = U C_Q Uᵀ (see :func:`association_test`), ``utu`` = UᵀU
    and ``forms`` = C_Q (both Lm × Lm); ``span`` (L × 2) each
    lineage's time range; ``in_lineage`` (n × L) which cells each lineage holds.
    """

    rows: np.ndarray
    times: np.ndarray
    basis: object
    stats: object
    membership: np.ndarray
    grams: np.ndarray
    fits: list
    rss: np.ndarray
    df: float
    q_trace: float
    q_trace_sq: float
    utu: np.ndarray
    forms: np.ndarray
    span: np.ndarray
    in_lineage: np.ndarray
    degenerate: np.ndarray

    def curves(self, grid: np.ndarray) -> np.ndarray:
        """G × L × len(grid): each lineage's curve, NaN outside its span."""
        design = self.basis.design(grid)
        out = np.full((self.rss.size, len(self.fits), grid.size), np.nan)
        for l, fit in enumerate(self.fits):
            inside = (grid >= self.span[l, 0]) & (grid <= self.span[l, 1])
            out[:, l, inside] = (design[inside] @ fit.coef).T
        return out


def fit_lineages(matrix, rows, times, groups, membership, *, n_knots: int, df: float, columns=None) -> LineageFits:
    """Sufficient statistics by segment, then one curve per lineage (weights ``membership``), all genes at once."""
    rows, times = check_cells(rows, times)
    df = check_df(df, allow_none=False)
    groups = np.asarray(groups, dtype=np.intp)
    membership = np.asarray(membership, dtype=float)
    n_segments, n_lineages = membership.shape
    if groups.shape != rows.shape or groups.min(initial=0) < 0 or groups.max(initial=0) >= n_segments:
        raise ValueError("groups must give every cell a segment index in [0, number of segments).")
    if not np.allclose(membership.sum(axis=1), 1.0):
        raise ValueError("membership must give every segment weights that sum to 1 over the lineages.")
    in_lineage = membership[groups] > 0  # n × L
    basis = basis_for_curves(times, n_knots, list(membership[groups].T), df)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_segments, columns)
    grams = np.einsum("sl,sij->lij", membership, stats_.gram)
    crosses = np.einsum("sl,sjg->ljg", membership, stats_.cross)
    sumsqs = membership.T @ stats_.sumsq
    df = adapt_df(df, list(grams), basis.penalty, "A lineage")
    fits = [penalized_fit(grams[l], crosses[l], sumsqs[l], basis.penalty, df=df, what=f"Lineage {l + 1}")
            for l in range(n_lineages)]
    # UᵀU: block (l, k) = Σ_s w_sl w_sk G_s
    cross_blocks = np.einsum("sl,sk,sij->likj", membership, membership, stats_.gram)
    m = basis.penalty.shape[0]
    utu = cross_blocks.reshape(n_lineages * m, n_lineages * m)
    forms = linalg.block_diag(*[explained_form(grams[l], basis.penalty, float(fits[l].lam[0]))
                                for l in range(n_lineages)])
    product = forms @ utu
    span = np.array([[times[in_lineage[:, l]].min(), times[in_lineage[:, l]].max()] for l in range(n_lineages)])
    return LineageFits(
        rows=rows, times=times, basis=basis, stats=stats_, membership=membership, grams=grams, fits=fits,
        rss=sum(fit.rss for fit in fits), df=float(fits[0].edf[0]), q_trace=float(np.trace(product)),
        q_trace_sq=float(np.sum(product * product.T)), utu=utu, forms=forms, span=span, in_lineage=in_lineage,
        degenerate=stats_.n_varying < MIN_VARYING_CELLS,
    )


@dataclass(frozen=True)
class ActivationResult:
    """Output of :func:`activation` for G genes and L lineages.

    ``times`` (G × L): the pseudotime at which each gene's curve on each
    lineage first rises significantly above its value at the lineage's start,
    NaN where it never does; ``rise`` (G × L) the curve's largest rise above
    that start value (expression units); ``critical`` the multiplier of the
    standard error a rise must exceed; ``grid``, ``df`` and ``span`` (L × 2,
    each lineage's pseudotime range) as in :class:`LineageFits`.
    """

    times: np.ndarray
    rise: np.ndarray
    critical: float
    grid: np.ndarray
    df: float
    span: np.ndarray
    degenerate: np.ndarray


#: Default share of its largest rise a curve must reach before it counts as activated.
MIN_RISE = 0.2
#: What :func:`activation` times: the first significant rise or the first significant fall.
DIRECTIONS = ("up", "down")


def activation(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    membership: np.ndarray,
    *,
    alpha: float = 0.05,
    min_rise: float = MIN_RISE,
    direction: str = "up",
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 200,
    columns: np.ndarray | None = None,
) -> ActivationResult:
    """When does each gene switch on along each lineage?

    The lineage curves f̂_l are those of :func:`association_test`. Along
    lineage l, with t₀ its first time (the root), the rise
    r(t) = f̂_l(t) − f̂_l(t₀) = (b(t) − b(t₀))ᵀ β̂_l is a linear function of the
    data, with variance σ² (b(t) − b(t₀))ᵀ M⁻¹ G̃ M⁻¹ (b(t) − b(t₀)), where
    M = G_l + λP and G̃ = Σ_s w_sl² G_s (a weighted fit's sandwich; σ² from the
    lineage fits' residuals, RSS / (n − tr Q)). The activation time is the
    first grid time at which r(t) exceeds ``critical`` standard errors and
    reaches ``min_rise`` of the curve's largest rise on that lineage. The
    critical value is Scheffé's, sqrt(k · F⁻¹_{k,ν}(1 − α)) with
    k = df − 1 (the curve's directions other than the constant) and ν the
    residual degrees of freedom, so that with probability 1 − α no point of
    a curve that does not rise is called a rise (ignoring smoothing bias).
    ``min_rise`` keeps a rise of no biological size, significant only
    because there are many cells, from counting. With ``direction="up"``
    genes that only fall get NaN; ``direction="down"`` times the first
    significant fall instead (r(t) replaced by −r(t): the band is symmetric),
    and ``rise`` is then the largest fall.
    """
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}.")
    sign = 1.0 if direction == "up" else -1.0
    alpha = check_positive("alpha", alpha, role="false-positive rate of the band")
    if alpha >= 1:
        raise ValueError(f"alpha must be below 1; got {alpha!r}.")
    min_rise = check_positive("min_rise", min_rise, allow_zero=True, role="share of the largest rise")
    if min_rise > 1:
        raise ValueError(f"min_rise is a share of the largest rise, at most 1; got {min_rise!r}.")
    n_grid = check_integer("n_grid", n_grid, low=2)
    lin = fit_lineages(matrix, rows, times, groups, membership, n_knots=n_knots, df=df, columns=columns)
    n_cells = float(lin.rows.size)
    residual_df = max(n_cells - lin.q_trace, 1.0)
    sigma2 = lin.rss / residual_df  # G
    k = max(lin.df - 1.0, 1.0)
    critical = float(np.sqrt(k * stats.f.ppf(1.0 - alpha, k, residual_df)))
    grid = np.linspace(lin.basis.knots[0], lin.basis.knots[-1], n_grid)
    design = lin.basis.design(grid)
    penalty = lin.basis.penalty
    squared_weights = lin.membership**2
    out = np.full((lin.rss.size, len(lin.fits)), np.nan)
    largest = np.zeros_like(out)
    for l, fit in enumerate(lin.fits):
        inside = np.flatnonzero((grid >= lin.span[l, 0]) & (grid <= lin.span[l, 1]))
        start = lin.basis.design(lin.span[l, :1])[0]
        contrast = design[inside] - start  # P × m
        inverse = linalg.pinvh(lin.grams[l] + float(fit.lam[0]) * penalty)
        sandwich = inverse @ np.einsum("s,sij->ij", squared_weights[:, l], lin.stats.gram) @ inverse
        scale = np.sqrt(np.maximum(np.einsum("pi,ij,pj->p", contrast, sandwich, contrast), 0.0))  # P
        rise = sign * (contrast @ fit.coef)  # P × G
        top = rise.max(axis=0)
        largest[:, l] = np.maximum(top, 0.0)
        called = (rise > critical * scale[:, None] * np.sqrt(sigma2)[None, :]) & (rise >= min_rise * top[None, :])
        called &= (top > 0)[None, :]
        first = called.argmax(axis=0)
        out[:, l] = np.where(called.any(axis=0), grid[inside][first], np.nan)
    out[lin.degenerate] = np.nan
    largest[lin.degenerate] = 0.0
    return ActivationResult(times=out, rise=largest, critical=critical, grid=grid, df=lin.df, span=lin.span,
                            degenerate=lin.degenerate)
