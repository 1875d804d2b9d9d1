"""Genes whose trend along a lineage differs between conditions: one curve per condition against a
shared curve, with samples as replicates.

Without samples the cells are the units, and the comparison is that of the branch test
(:func:`~.comparison.compare_branches`) with the conditions in place of the branches and no trunk:
every cell is an independent draw around its condition's curve, which holds only where samples do
not differ.

With samples, each sample's own curve of a gene is its penalised spline on the basis all the cells
share (one pass over the cells gives every sample's sufficient statistics), read on a grid over the
stretch of pseudotime that every sample covers, so that a sample whose cells sit earlier (a delay)
is compared where it has cells and not through a different mixture of times. Each curve is
summarised by its projections on the first ``k`` orthonormal polynomials of that stretch (level,
slope, curvature), and the samples' k-vectors are compared between conditions by Wilks' Λ, the
multivariate analysis of variance, with Rao's F (exact for two conditions, where it is Hotelling's
T², and for k ≤ 2). The sample-to-sample spread of the curves within conditions is the test's
noise: whatever makes samples differ (their cells' sampling, their own expression offsets, their
mix of cells) is counted, and no assumption of equal spread over the grid is needed, since the
covariance of the k projections is estimated freely. The price is ``k`` below the error degrees of
freedom: ``k = min(n_components, n_samples - n_conditions - 1)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from .comparison import compare_branches, curve_weights
from .inference import MIN_VARYING_CELLS, benjamini_hochberg, blank_degenerate
from .passes import sufficient_statistics
from .splines import adapt_df, basis_for_curves, check_cells, check_df, penalized_fit, spline_basis

#: The projections a sample's curve is summarised by, at most: its level and slope (a third, the
#: curvature, halved the power at three samples a condition on late bumps: F(3, 2) against F(2, 3)).
N_COMPONENTS = 2
#: The stretch every sample covers runs between the largest of the samples' low quantiles of
#: pseudotime and the smallest of their high ones (outlying cells do not stretch it).
COVERED_QUANTILE = 0.02


@dataclass(frozen=True, kw_only=True)
class ConditionTrendResult:
    """Output of :func:`condition_trend_test` for G genes and C conditions.

    ``grid`` (n_grid) spans the lineage; ``curves`` (G × C × n_grid) each condition's curve on it
    (NaN outside its cells' range) and ``shared`` (G × n_grid) the curve of all cells;
    ``statistic`` (Rao's F of Wilks' Λ with samples, the branch test's F without), ``pvals``,
    ``qvals``; ``effect`` (G) the largest difference of a condition's curve from the reference's
    over ``covered`` (signed, in expression units); ``covered`` the stretch of pseudotime every
    unit covers (the whole lineage without samples); ``n_components`` the projections compared
    (0 without samples); ``df`` of each curve; ``n_cells`` per condition; ``degenerate`` as in
    the other tests (statistic 0, p = 1).
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    statistic: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    effect: np.ndarray
    covered: np.ndarray
    n_components: int
    df: float
    knots: np.ndarray
    n_cells: np.ndarray
    degenerate: np.ndarray


def condition_trend_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    condition: np.ndarray,
    n_conditions: int,
    *,
    sample: np.ndarray | None = None,
    sample_condition: np.ndarray | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    n_components: int = N_COMPONENTS,
    columns: np.ndarray | None = None,
    names: list[str] | None = None,
) -> ConditionTrendResult:
    """Test, gene by gene, whether its trend along ``times`` differs between conditions.

    ``rows`` are the cells of one lineage, ``times`` their pseudotime, ``condition`` their
    condition code in [0, ``n_conditions``), the reference 0. With ``sample`` (each cell's sample
    code) and ``sample_condition`` (each sample's condition), the samples are the units
    (:func:`_sample_test`); without, the cells (:func:`~.comparison.compare_branches`). ``names``
    name the conditions in messages.
    """
    rows, times = check_cells(rows, times)
    df = check_df(df, allow_none=False)
    condition = np.asarray(condition, dtype=np.intp)
    names = names or [f"condition {c}" for c in range(n_conditions)]
    # the conditions are the branch test's branches, without a trunk (group 0 empty)
    groups = condition + 1
    if sample is None:
        comparison = compare_branches(matrix, rows, times, groups, n_conditions, n_knots=n_knots, df=df,
                                      columns=columns, names=names, trunk_name="no trunk")
        grid = np.linspace(comparison.basis.knots[0], comparison.basis.knots[-1], n_grid)
        curves, shared = comparison.curves(grid, times, groups)
        covered = np.array([times.min(), times.max()])
        effect = _largest_difference(curves, grid, covered)
        return ConditionTrendResult(
            grid=grid, curves=curves, shared=shared, statistic=comparison.fstat, pvals=comparison.pvals,
            qvals=benjamini_hochberg(comparison.pvals), effect=effect, covered=covered, n_components=0,
            df=float(comparison.shared.edf[0]), knots=comparison.basis.knots, n_cells=comparison.counts[1:],
            degenerate=comparison.degenerate,
        )
    basis = basis_for_curves(times, n_knots, curve_weights(groups, n_conditions), df)
    grid = np.linspace(basis.knots[0], basis.knots[-1], n_grid)
    return _sample_test(matrix, rows, times, condition, n_conditions, np.asarray(sample, dtype=np.intp),
                        np.asarray(sample_condition, dtype=np.intp), basis=basis, grid=grid, df=df, n_knots=n_knots,
                        n_components=n_components, columns=columns, names=names)


def _sample_test(matrix, rows, times, condition, n_conditions, sample, sample_condition, *, basis, grid, df,
                 n_knots, n_components, columns, names) -> ConditionTrendResult:
    """The comparison with samples as units (the module's docstring)."""
    n_samples = sample_condition.size
    covered = covered_stretch(times, sample, n_samples)
    within = (times >= covered[0]) & (times <= covered[1])
    # every sample's curve from its cells within the covered stretch, on a basis of that stretch, so
    # that each one's fit ends where the others' do: a delayed sample's cells would otherwise stop
    # there and theirs not, and the fits' different edges read as a difference (level 0.065 at ten
    # samples a condition and a delay of 0.2). Twice the df there cost calibration where samples
    # have few cells (50 a sample: level 0.012, the curves' heavy tails). One pass reads both
    # bases: the lineage's (the conditions' curves) and the stretch's (zero outside it)
    stretch = spline_basis(times[within], n_knots)
    lineage_design = basis.design(times)
    design = np.hstack([lineage_design, stretch.design(np.clip(times, *covered)) * within[:, None]])
    stats_ = sufficient_statistics(matrix, rows, design, sample, n_samples, columns)
    m = lineage_design.shape[1]
    whole = [stats_.gram[:, :m, :m], stats_.cross[:, :m], stats_.sumsq]
    gram, cross = stats_.gram[:, m:, m:], stats_.cross[:, m:]
    what = [f"Sample {s} ({names[sample_condition[s]]}) within the stretch all samples cover" for s in range(n_samples)]
    sample_df = adapt_df(df, list(gram), stretch.penalty,
                         "A sample's cells within the stretch of the lineage that every sample covers")
    inside = np.linspace(*covered, grid.size)
    on_stretch = stretch.design(inside)
    # Σ y² is not read for the coefficients: the whole lineage's stands in
    profiles = np.stack([on_stretch @ penalized_fit(gram[s], cross[s], stats_.sumsq[s], stretch.penalty,
                                                    df=sample_df, what=what[s]).coef for s in range(n_samples)])
    by_condition = [np.flatnonzero(sample_condition == c) for c in range(n_conditions)]
    df = adapt_df(df, [whole[0][group].sum(0) for group in by_condition], basis.penalty, "A condition's cells")
    n_error = n_samples - n_conditions
    k = int(min(n_components, n_error - 1))
    if k < 1:
        raise ValueError(f"{n_samples} samples in {n_conditions} conditions leave {n_error} degree(s) of freedom "
                         "between samples within conditions; the test needs at least 2. Add samples.")
    scores = np.einsum("lk,slg->skg", orthonormal_polynomials(inside.size, k), profiles)
    statistic, pvals = wilks_test(scores, sample_condition, n_conditions)
    degenerate = (stats_.n_varying < MIN_VARYING_CELLS) | ~np.isfinite(pvals)
    statistic, pvals = blank_degenerate(degenerate, statistic, np.nan_to_num(pvals, nan=1.0))
    fits = [penalized_fit(*(part[group].sum(0) for part in whole), basis.penalty, df=df,
                          what=f"Condition {names[c]}") for c, group in enumerate(by_condition)]
    shared = penalized_fit(*(part.sum(0) for part in whole), basis.penalty, df=df, what="The conditions together")
    full = basis.design(grid)
    curves = np.stack([(full @ fit.coef).T for fit in fits], axis=1)
    for c in range(n_conditions):
        span = times[condition == c]
        curves[:, c, (grid < span.min()) | (grid > span.max())] = np.nan
    return ConditionTrendResult(
        grid=grid, curves=curves, shared=(full @ shared.coef).T, statistic=statistic, pvals=pvals,
        qvals=benjamini_hochberg(pvals), effect=_largest_difference(curves, grid, covered), covered=covered,
        n_components=k, df=float(df), knots=basis.knots,
        n_cells=np.bincount(condition, minlength=n_conditions), degenerate=degenerate,
    )


def covered_stretch(times: np.ndarray, unit: np.ndarray, n_units: int) -> np.ndarray:
    """[lo, hi]: the stretch of ``times`` that every unit's cells cover (between their
    :data:`COVERED_QUANTILE` quantiles), where every unit's curve is read."""
    lows = np.array([np.quantile(times[unit == u], COVERED_QUANTILE) for u in range(n_units)])
    highs = np.array([np.quantile(times[unit == u], 1.0 - COVERED_QUANTILE) for u in range(n_units)])
    lo, hi = lows.max(), highs.min()
    if not hi > lo:
        raise ValueError(f"The samples' cells share no stretch of the lineage (one ends at {hi:.3g} before "
                         f"another begins at {lo:.3g}): their curves cannot be compared anywhere.")
    return np.array([lo, hi])


def orthonormal_polynomials(n_points: int, k: int) -> np.ndarray:
    """The first ``k`` polynomials (constant, linear, …) on ``n_points`` evenly spaced points, as
    orthonormal columns (n_points × k): a curve's projections on them are its level, slope and
    curvature over the stretch."""
    u = np.linspace(-1.0, 1.0, n_points)
    q, r = np.linalg.qr(np.vander(u, k, increasing=True))
    return q * np.sign(np.diag(r))


def wilks_test(scores: np.ndarray, unit_condition: np.ndarray, n_conditions: int) -> tuple[np.ndarray, np.ndarray]:
    """Rao's F and p-value of Wilks' Λ = det E / det(E + H) per gene, for units × k × genes
    ``scores`` in ``n_conditions`` groups (Rao 1951; exact for two groups, where it is Hotelling's
    T², and for k ≤ 2). NaN where E is singular (no spread within conditions)."""
    n_units, k, _ = scores.shape
    groups = [scores[unit_condition == c] for c in range(n_conditions)]
    means = np.stack([g.mean(axis=0) for g in groups])  # C × k × G
    residual = scores - means[unit_condition]
    deviation = means - scores.mean(axis=0)
    error = np.einsum("skg,slg->gkl", residual, residual)
    counts = np.array([g.shape[0] for g in groups], dtype=float)
    hypothesis = np.einsum("c,ckg,clg->gkl", counts, deviation, deviation)
    with np.errstate(invalid="ignore", divide="ignore"):
        sign_e, log_e = np.linalg.slogdet(error)
        sign_t, log_t = np.linalg.slogdet(error + hypothesis)
        scale = np.trace(error, axis1=1, axis2=2) / k
        singular = (sign_e <= 0) | (log_e < k * np.log(np.maximum(scale, np.finfo(float).tiny)) + k * np.log(1e-12))
        lam = np.exp(log_e - log_t)
    q, nu = n_conditions - 1, n_units - n_conditions
    t = np.sqrt((k**2 * q**2 - 4.0) / (k**2 + q**2 - 5.0)) if k**2 + q**2 > 5 else 1.0
    df1 = k * q
    df2 = (nu + q - (k + q + 1) / 2.0) * t - (k * q - 2.0) / 2.0
    root = lam ** (1.0 / t)
    with np.errstate(invalid="ignore", divide="ignore"):
        fstat = (1.0 - root) / root * df2 / df1
    pvals = stats.f.sf(fstat, df1, df2)
    fstat[singular], pvals[singular] = np.nan, np.nan
    return fstat, pvals


def _largest_difference(curves: np.ndarray, grid: np.ndarray, covered: np.ndarray) -> np.ndarray:
    """Per gene, the difference of a condition's curve from the reference's (condition 0) that is
    largest in size over ``covered``, with its sign."""
    inside = (grid >= covered[0]) & (grid <= covered[1])
    difference = curves[:, 1:, inside] - curves[:, :1, inside]
    flat = np.nan_to_num(difference, nan=0.0).reshape(difference.shape[0], -1)
    if flat.shape[1] == 0:
        return np.zeros(curves.shape[0])
    return flat[np.arange(flat.shape[0]), np.argmax(np.abs(flat), axis=1)]
