"""Tests of ``_core.stats``: spline algebra against brute force, calibration, recovery, topology."""

import functools

import numpy as np
import pytest
from scipy import interpolate, sparse, stats

import scskeleton as sks
from scskeleton._core.stats import association, branches, comparison, inference, lineages, passes, splines, trends
from scskeleton._core.stats import registration as warps


def _times(n, seed=0, low=0.0, high=2.0):
    return np.sort(np.random.default_rng(seed).uniform(low, high, n))


def test_basis_sums_to_one_and_penalty_is_the_integral_of_curvature():
    times = _times(300)
    basis = splines.spline_basis(times, 8)
    np.testing.assert_allclose(basis.design(times).sum(axis=1), 1.0, atol=1e-12)
    assert basis.n_basis == basis.knots.size + 2
    # brute force: a fine trapezoid rule for ∫ B_j'' B_k''
    fine = np.linspace(basis.knots[0], basis.knots[-1], 200_001)
    second = interpolate.BSpline(basis.vector, np.eye(basis.n_basis), splines.DEGREE).derivative(2)(fine)
    step = fine[1] - fine[0]
    weights = np.full(fine.size, step)
    weights[[0, -1]] /= 2
    brute = second.T @ (weights[:, None] * second)
    np.testing.assert_allclose(basis.penalty, brute, rtol=1e-4, atol=1e-6 * np.abs(brute).max())
    # straight lines are not penalised: the penalty's null space holds 1 and t
    coefficients = np.linalg.lstsq(basis.design(times), np.column_stack([np.ones_like(times), times]), rcond=None)[0]
    np.testing.assert_allclose(coefficients.T @ basis.penalty @ coefficients, 0.0, atol=1e-8)


def test_a_basis_for_several_curves_gives_each_the_knots_of_its_own_cells():
    rng = np.random.default_rng(3)
    times = np.concatenate([rng.uniform(0, 0.2, 100), 0.2 + rng.uniform(0, 0.1, 40), 0.2 + rng.uniform(0, 2, 1800)])
    groups = np.repeat([0, 1, 2], [100, 40, 1800])
    curves = [(groups == 0) | (groups == b) for b in (1, 2)]
    single = splines.spline_basis(times, 10)
    joint = splines.spline_basis(times, 10, curves=curves)
    short = times[curves[0]]
    inside = lambda knots: np.sum((knots > short.min()) & (knots < short.max()))  # noqa: E731
    assert inside(single.knots) <= 2 and inside(joint.knots) >= 7  # the short curve's own quantiles
    assert joint.knots[0] == times.min() and joint.knots[-1] == times.max()
    spacing = np.diff(joint.knots)
    assert spacing.min() >= splines.MIN_KNOT_SPACING * (joint.knots[-1] - joint.knots[0]) / (joint.knots.size - 1)
    # still a partition of unity whose penalty leaves straight lines alone
    np.testing.assert_allclose(joint.design(times).sum(axis=1), 1.0, atol=1e-12)
    coefficients = np.linalg.lstsq(joint.design(times), np.column_stack([np.ones_like(times), times]), rcond=None)[0]
    np.testing.assert_allclose(coefficients.T @ joint.penalty @ coefficients, 0.0, atol=1e-6)
    # curves that share most of their cells put knots almost on top of each other: they merge
    overlapping = [np.arange(times.size) != 0, np.arange(times.size) != 1]
    close = splines.spline_basis(times, 10, curves=overlapping)
    assert close.knots.size <= 11
    # the curves' own knots only where the quantiles of all cells leave one unable to carry df
    weights = [curve.astype(float) for curve in curves]
    np.testing.assert_array_equal(splines.basis_for_curves(times, 10, weights, 6.0).knots, joint.knots)
    even = [np.ones(times.size), (np.arange(times.size) % 2).astype(float)]
    np.testing.assert_array_equal(splines.basis_for_curves(times, 10, even, 6.0).knots, single.knots)


def test_nearly_tied_quantile_knots_merge_so_any_df_stays_reachable():
    """A tenth of the cells at the root's time 0 and one just past it (RPG's tree of 4,000
    simulate_trajectory cells: 9e-5) put two quantile knots that close; the curvature penalty then
    spanned 16 orders of magnitude and no smoothing took a curve below 11 degrees of freedom, so a
    branch test at df = 6 raised. The near tie merges, and df = 6 is reached."""
    rng = np.random.default_rng(4)
    times = np.concatenate([np.zeros(444), [9e-5, 9.1e-5], rng.uniform(0.01, 37, 3554)])  # the 1/9 quantile: 9e-5
    basis = splines.spline_basis(times, 10)
    spacing = np.diff(basis.knots)
    assert spacing.min() >= splines.MIN_KNOT_SPACING * (basis.knots[-1] - basis.knots[0]) / (basis.knots.size - 1)
    assert basis.knots[0] == 0.0 and basis.knots[-1] == times.max()
    design = basis.design(times)
    values = np.sin(times / 6)[:, None] + 0.1 * rng.standard_normal((times.size, 3))
    fit = splines.penalized_fit(design.T @ design, design.T @ values, (values**2).sum(axis=0), basis.penalty, df=6.0)
    np.testing.assert_allclose(fit.edf, 6.0, rtol=1e-6)
    coefficients = np.linalg.lstsq(design, np.column_stack([np.ones_like(times), times]), rcond=None)[0]
    np.testing.assert_allclose(coefficients.T @ basis.penalty @ coefficients, 0.0, atol=1e-6)


@pytest.mark.parametrize("df", [3.5, 6.0, None])
def test_fit_matches_the_dense_penalised_solution(df):
    rng = np.random.default_rng(1)
    times = _times(400, seed=1)
    values = np.column_stack([np.sin(3 * times), times**2, rng.standard_normal(400), np.cos(8 * times)])
    values = values + 0.3 * rng.standard_normal(values.shape)
    basis = splines.spline_basis(times, 10)
    design = basis.design(times)
    stats = passes.sufficient_statistics(values, np.arange(400), design, np.zeros(400, dtype=int), 1)
    fit = splines.penalized_fit(stats.gram[0], stats.cross[0], stats.sumsq[0], basis.penalty, df=df)
    for gene in range(values.shape[1]):
        system = design.T @ design + fit.lam[gene] * basis.penalty
        coef = np.linalg.solve(system, design.T @ values[:, gene])
        hat = design @ np.linalg.solve(system, design.T)
        np.testing.assert_allclose(fit.coef[:, gene], coef, rtol=1e-7, atol=1e-9)
        assert fit.rss[gene] == pytest.approx(((values[:, gene] - design @ coef) ** 2).sum(), rel=1e-9)
        assert fit.edf[gene] == pytest.approx(np.trace(hat), rel=1e-9)
        # the hat eigenvalues give the traces the F test needs
        assert (fit.hat[:, gene] ** 2).sum() == pytest.approx(np.trace(hat @ hat), rel=1e-8)
        if df is not None:
            assert fit.edf[gene] == pytest.approx(df, rel=1e-8)
    if df is None:  # GCV: the chosen λ minimises n·RSS/(n − edf)² over the searched grid
        eigen = splines._eigen(stats.gram[0], basis.penalty)
        for gene in range(values.shape[1]):
            scores = []
            for theta in np.geomspace(*eigen.theta_range(), splines.GCV_POINTS):
                system = design.T @ design + theta * eigen.scale * basis.penalty
                hat = design @ np.linalg.solve(system, design.T)
                residual = values[:, gene] - hat @ values[:, gene]
                scores.append(400 * residual @ residual / (400 - np.trace(hat)) ** 2)
            best = np.geomspace(*eigen.theta_range(), splines.GCV_POINTS)[int(np.argmin(scores))] * eigen.scale
            assert fit.lam[gene] == pytest.approx(best, rel=1e-9)


def test_sufficient_statistics_agree_for_dense_csr_csc_subsets_and_row_order(monkeypatch):
    rng = np.random.default_rng(2)
    matrix = sparse.random(500, 60, density=0.2, random_state=3, format="csr", dtype=np.float32)
    rows = rng.permutation(500)[:350]
    times = rng.uniform(0, 1, rows.size)
    groups = rng.integers(3, size=rows.size)
    design = splines.spline_basis(times, 6).design(times)
    columns = np.array([5, 0, 17, 59])
    dense = matrix.toarray().astype(np.float64)
    expected_cross = np.stack([design[groups == g].T @ dense[rows[groups == g]] for g in range(3)])
    expected_sumsq = np.stack([(dense[rows[groups == g]] ** 2).sum(axis=0) for g in range(3)])
    monkeypatch.setattr(passes, "CHUNK_ELEMENTS", 500)  # many small chunks and gene blocks
    for form in (dense, matrix, matrix.tocsc(), matrix.tocoo()):
        stats = passes.sufficient_statistics(form, rows, design, groups, 3)
        np.testing.assert_allclose(stats.cross, expected_cross, rtol=1e-6, atol=1e-9)
        np.testing.assert_allclose(stats.sumsq, expected_sumsq, rtol=1e-6)
        np.testing.assert_array_equal(stats.n_cells, np.bincount(groups, minlength=3))
        subset = passes.sufficient_statistics(form, rows, design, groups, 3, columns)
        np.testing.assert_allclose(subset.cross, expected_cross[:, :, columns], rtol=1e-6, atol=1e-9)
    order = rng.permutation(rows.size)  # the cells' order does not matter
    shuffled = passes.sufficient_statistics(matrix, rows[order], design[order], groups[order], 3)
    np.testing.assert_allclose(shuffled.cross, expected_cross, rtol=1e-6, atol=1e-9)
    # the cells carrying each gene's variation, where the unexpressed cells share one value and where not
    shifted = dense - 0.01 * rng.random(dense.shape)
    carriers = {}
    for values in (dense, shifted):
        counted = [passes.sufficient_statistics(form, rows, design, groups, 3, count_carriers=True)
                   for form in (values, sparse.csr_matrix(values), sparse.csc_matrix(values))]
        for other in counted[1:]:
            np.testing.assert_array_equal(other.n_carriers_by_group, counted[0].n_carriers_by_group)
        subset = passes.sufficient_statistics(values, rows, design, groups, 3, columns, count_carriers=True)
        np.testing.assert_array_equal(subset.n_carriers_by_group, counted[0].n_carriers_by_group[:, columns])
        carriers[values is dense] = counted[0]
    np.testing.assert_array_equal(carriers[True].n_carriers_by_group.sum(axis=0), carriers[True].n_varying)
    stored = np.stack([(dense[rows[groups == g]] != 0).sum(axis=0) for g in range(3)])
    assert np.abs(carriers[False].n_carriers_by_group - stored).max() <= 3  # a few within the shifted bulk


def test_trends_recover_true_curves_given_true_pseudotime():
    adata = sks.datasets.branching_expression(1000, random_state=0)
    varies = adata.var["true_pattern"].to_numpy() != "null"
    for branch in ("branch_1", "branch_2"):
        rows = np.flatnonzero(adata.obs["true_branch"].isin(["trunk", branch]).to_numpy())
        times = adata.obs["true_pseudotime"].to_numpy()[rows]
        result = trends.trend_test(adata.X, rows, times)
        fitted = np.stack([np.interp(times, result.grid, curve) for curve in result.curves], axis=1)
        truth = adata.layers["true_mean"][rows]
        r2 = 1 - ((fitted - truth) ** 2).mean(axis=0)[varies] / truth.var(axis=0)[varies]
        assert r2.min() >= 0.9, f"{branch}: worst R² {r2.min():.3f}"
        assert (result.qvals[varies] < 1e-6).all()
        assert result.r2.shape == (adata.n_vars,) and np.all((result.r2 >= 0) & (result.r2 <= 1))


#: How far a type-I error rate may stray from its level, relative to the level. The F tests use
#: approximate reference distributions: over 10⁵–10⁶ null genes the rate at 5 % is within 5 % of
#: the level everywhere, at 1 % up to 17 % above it (trend df = 3, uneven times). The null genes
#: below are pooled over replicates so that the binomial standard error of a rate is at most 1.4 %
#: of the level at 5 % and 3.2 % at 1 %: a rate 30 % too high lies ≥ 3 standard errors outside
#: these bounds, a rate as the approximation gives ≥ 2 inside them.
LEVEL_TOLERANCE = {0.05: 0.10, 0.01: 0.20}


class LevelMissed(AssertionError):
    """A type-I error rate outside LEVEL_TOLERANCE (as opposed to the coarse bound failing)."""


def _check_level(pvals, level):
    rate = float(np.mean(pvals < level))
    # the coarse bound of earlier versions; it also holds for cases marked as missing the tight one
    assert abs(rate - level) < 0.25 * level + 0.004, rate
    if abs(rate / level - 1) > LEVEL_TOLERANCE[level]:
        error = np.sqrt(level * (1 - level) / pvals.size) / level
        raise LevelMissed(f"{rate:.5f} of {pvals.size} null genes below {level}: {rate / level - 1:+.1%} off "
                          f"(standard error {error:.1%}, allowed ±{LEVEL_TOLERANCE[level]:.0%})")


def _null_times(rng, n, replicate):
    """Pseudotimes of one replicate: uniform, piled up early (as after a fast start), or in three
    clusters with gaps (as a tree through separate states gives); new ones for every replicate."""
    kind = replicate % 3
    if kind == 0:
        times = rng.uniform(0, 2, n)
    elif kind == 1:
        times = 2 * rng.beta(0.7, 1.5, n)
    else:
        times = np.concatenate([rng.normal(c, 0.15, n // 3) for c in (0.3, 1.0, 1.7)]
                               + [rng.uniform(0, 2, n - 3 * (n // 3))])
    return np.sort(times)


@functools.cache
def _trend_null(df, replicates=50, n_cells=300, n_genes=4000):
    """p-values of pure-noise genes against fresh random times per replicate, and per replicate
    whether any gene had q < 0.05."""
    pvals, discoveries = [], []
    for replicate in range(replicates):
        rng = np.random.default_rng([4, replicate])
        times = _null_times(rng, n_cells, replicate)
        result = trends.trend_test(rng.standard_normal((n_cells, n_genes)), np.arange(n_cells), times, df=df)
        pvals.append(result.pvals)
        discoveries.append(int((result.qvals < 0.05).sum()))
    return np.concatenate(pvals), np.array(discoveries)


@pytest.mark.xdist_group("trend_null")  # one worker simulates the cached null once
@pytest.mark.parametrize("level", [0.05, 0.01])
@pytest.mark.parametrize("df", [3.0, 6.0])
def test_trend_p_values_hold_their_level_on_null_genes(df, level):
    pvals, discoveries = _trend_null(df)
    _check_level(pvals, level)
    # (almost) nothing survives the correction: BH on null genes alone finds some gene in 5 % of
    # the replicates (2.5 of 50, 7 is 3 standard errors above), never more than a couple
    assert (discoveries > 0).sum() <= 7 and discoveries.max() <= 2, discoveries


@pytest.mark.xdist_group("trend_null")  # one worker simulates the cached null once
@pytest.mark.parametrize("df", [3.0, 6.0])
def test_trend_p_values_hold_their_level_in_the_far_tail(df):
    """At p < 0.001, where a handful of null genes among thousands decide what BH calls: the
    saddlepoint null keeps the rate within 3 standard errors (±25 % of the level with 2·10⁵ genes);
    the two-moment Satterthwaite reference let 1.4–1.6× as many through at df = 3."""
    pvals, _ = _trend_null(df, replicates=50, n_genes=4000)
    rate = float(np.mean(pvals < 1e-3))
    assert abs(rate / 1e-3 - 1.0) <= 0.25, rate


BRANCH_NULLS = [(300, (300, 300), (1.0, 1.0)), (200, (300, 150), (1.0, 0.5)), (0, (200, 200), (1.0, 1.0)),
                (200, (200, 200, 200), (1.0, 1.0, 1.0))]


@functools.cache
def _branch_null(index, replicates=10, n_genes=4000, registration="fit"):
    """p-values of genes that share one trend on every branch, fresh cell times per replicate: on the
    five-piece warp's axis (``"fit"``: one warp, whose p-values are exact, not the larger of two), the
    largest of the three axes' (``"both"``: both warps and the unregistered axis, as ``branch_test``
    combines them) or unregistered (``"none"``, the F test alone, for the far tail's many genes)."""
    if registration == "none":
        return _branch_null_axis(index, replicates, n_genes, None)
    five = _branch_null_axis(index, replicates, n_genes, warps.WARP_PIECES)
    if registration != "both":
        return five
    return np.fmax.reduce([five, _branch_null_axis(index, replicates, n_genes, warps.FINE_WARP_PIECES),
                           _branch_null_axis(index, replicates, n_genes, None)])


@functools.cache
def _branch_null_axis(index, replicates, n_genes, n_pieces):
    """The p-values of :func:`_branch_null` on one axis: a warp of ``n_pieces`` pieces compared alone (as
    ``"both"`` compares each), or the unregistered axis (``None``)."""
    n_trunk, n_branch, lengths = BRANCH_NULLS[index]
    pvals = []
    for replicate in range(replicates):
        rng = np.random.default_rng([5, index, replicate])
        times = np.concatenate([rng.uniform(0, 1, n_trunk)]
                               + [1 + rng.uniform(0, s, n) for n, s in zip(n_branch, lengths)])
        groups = np.concatenate([np.zeros(n_trunk, int)] + [np.full(n, b + 1) for b, n in enumerate(n_branch)])
        shared = 1 / (1 + np.exp(-4 * (times - 1)))
        values = shared[:, None] + rng.standard_normal((times.size, n_genes))
        with pytest.MonkeyPatch.context() as patch:
            if n_pieces is not None:
                patch.setattr(branches, "_registrations", functools.partial(_one_warp, n_pieces))
            result = branches.branch_test(values, np.arange(times.size), times, groups, df=5.0,
                                          registration="none" if n_pieces is None else "fit")
        pvals.append(result.pvals)
    np.testing.assert_allclose(result.df_branches, 5.0)
    assert result.df_shared == pytest.approx(5.0)
    assert result.curves.shape == (n_genes, len(n_branch), 100) and result.shared.shape == (n_genes, 100)
    return np.concatenate(pvals)


def _one_warp(n_pieces, matrix, rows, times, groups, registration, *, n_knots, df):
    """``branches._registrations`` with one warp of ``n_pieces`` pieces (none at its bound here)."""
    warp = warps.fit_branch_warps(matrix, rows, times, groups, n_knots=n_knots, df=df, n_pieces=n_pieces)
    assert not warp.at_bound
    return [warp]


@pytest.mark.xdist_group("branch_null")  # one worker simulates the cached null once
@pytest.mark.parametrize(
    ("index", "level"),
    [(i, level) for i in range(len(BRANCH_NULLS)) for level in (0.05, 0.01)],
    ids=[f"{'-'.join(map(str, [BRANCH_NULLS[i][0], *BRANCH_NULLS[i][1]]))}@{level}"
         for i in range(len(BRANCH_NULLS)) for level in (0.05, 0.01)],
)
def test_branch_p_values_hold_their_level_when_branches_share_the_trend(index, level):
    _check_level(_branch_null(index), level)


@pytest.mark.xdist_group("branch_null")  # one worker simulates the cached null once
@pytest.mark.parametrize("index", [0, 3])  # two branches and three: the other layouts add 2 min to the suite
def test_both_registrations_are_conservative_where_both_axes_are_right(index):
    """Each gene's largest p-value of three valid comparisons (two warps and the unregistered axis)
    stays below the level: the price of holding it where only one axis is right. With the five-piece
    warp alone beside the unregistered axis, about a quarter below (0.036-0.040 at 0.05, 0.006-0.007 at
    0.01, on 40,000 null genes of each layout); with both warps, on the fourth layout, 0.0053 at 0.01."""
    pvals = _branch_null(index, registration="both")
    for level in (0.05, 0.01):
        assert 0.4 * level <= np.mean(pvals < level) <= level


def _steep_shared_trend(slope, amplitude, replicates=5, n_genes=2000):
    """p-values of genes that follow one sigmoid of the time on both branches, the cells of one
    branch crowded early and the other's late (their fits smooth the switch differently)."""
    pvals = []
    for replicate in range(replicates):
        rng = np.random.default_rng([41, replicate])
        times = np.concatenate([rng.uniform(0, 1, 300), 1 + rng.beta(1, 3, 400), 1 + rng.beta(3, 1, 400)])
        groups = np.repeat([0, 1, 2], [300, 400, 400])
        shared = amplitude / (1 + np.exp(-slope * (times - 1.5)))
        values = shared[:, None] + 0.5 * rng.standard_normal((times.size, n_genes))
        pvals.append(branches.branch_test(values, np.arange(times.size), times, groups, registration="none").pvals)
    return np.concatenate(pvals)


def test_branch_test_counts_the_smoothing_bias_of_a_shared_switch(monkeypatch):
    """The fits of a switch-like shared trend at df = 6 are biased, and differently on branches whose
    cells sit at different times. Referred to pure noise, 8.9 % of these null genes fell below 0.05
    (a sharper switch, slope 12 and twice the height: 94 %); with the shared curve's bias in the null
    (a fit at df + 2 as its mean), 5.0 % (slope 12: 11 %, still above the level: the null's own fit
    cannot follow it either)."""
    assert abs(np.mean(_steep_shared_trend(8.0, 1.0) < 0.05) - 0.05) <= 0.005  # 10,000 genes: SE 0.22 %
    assert np.mean(_steep_shared_trend(12.0, 2.0) < 0.05) <= 0.2
    monkeypatch.setattr(comparison, "_shared_null_means",  # the null of pure noise
                        lambda stats_, *args, **kwargs: [(np.arange(stats_.cross.shape[2]), None)])
    assert np.mean(_steep_shared_trend(8.0, 1.0) < 0.05) >= 0.08


def test_a_null_mean_of_zero_leaves_the_p_values_as_they_were():
    times, groups, basis, design, gram = _small_fork(3, [60, 50, 40], 0.8, 6)
    forms = comparison.branch_forms(gram, basis.penalty, 0.3, [0.1, 0.5])
    fstat = np.array([0.5, 1.0, 2.0, 4.0])
    size = forms[0].shape[0]
    zero = inference.NullMean(coef=np.zeros((size, 4)), variance=np.ones(4), noise=np.zeros((size, size)))
    np.testing.assert_allclose(inference.form_f_pvalues(fstat, *forms, times.size, mean=zero),
                               inference.form_f_pvalues(fstat, *forms, times.size), rtol=1e-10)


@pytest.mark.parametrize("delta", [(2.0, 0.0, 3.0), (8.0, 0.0, 0.0), (0.0, 0.0, 8.0)])
def test_the_noncentral_mixture_tail_matches_simulation(delta):
    """P(Σ w_j (z_j + √δ_j)² + w₀ χ²_ν > 0) by the saddlepoint, against 400,000 draws, from p ≈ 0.3 to
    5·10⁻⁴ (the saddlepoint's error in the bulk, about 3 % there, is the same without δ)."""
    rng = np.random.default_rng(8)
    weights, delta = np.array([1.5, 0.7, -0.4]), np.array(delta)
    quadratic = (weights[:, None] * (rng.standard_normal((3, 400_000)) + np.sqrt(delta)[:, None]) ** 2).sum(axis=0)
    chi2 = rng.chisquare(60, 400_000)
    tails = np.array([-0.08, -0.15, -0.3])
    got = inference.chi2_mixture_positive(np.repeat(weights[:, None], 3, axis=1), tails, 60.0,
                                          noncentrality=np.repeat(delta[:, None], 3, axis=1))
    expected = np.array([np.mean(quadratic + tail * chi2 > 0) for tail in tails])
    np.testing.assert_allclose(got, expected, rtol=0.05, atol=2e-4)


@pytest.mark.parametrize("index", range(len(BRANCH_NULLS)),
                         ids=["-".join(map(str, [n[0], *n[1]])) for n in BRANCH_NULLS])
def test_branch_p_values_hold_their_level_in_the_far_tail(index):
    """At p < 0.001 (10⁵ null genes: 100 expected, ±25 % is 2.5 standard errors). The two-moment
    Satterthwaite reference let 1.3–1.6× as many through (1.24× at 1 % with the short branch):
    the branch fits' explained form is not positive semi-definite, which it cannot represent. The
    F test's tail on the true time, unregistered (the registered level: the tests above)."""
    rate = float(np.mean(_branch_null(index, replicates=25, registration="none") < 1e-3))
    assert abs(rate / 1e-3 - 1.0) <= 0.25, rate


def _small_fork(seed, sizes, short_length, n_knots):
    """Times, groups, basis, design and per-group Gram matrices of a trunk and two branches (one shorter)."""
    rng = np.random.default_rng(seed)
    times = np.concatenate([rng.uniform(0, 1, sizes[0]), 1 + rng.uniform(0, 1, sizes[1]),
                            1 + rng.uniform(0, short_length, sizes[2])])
    groups = np.repeat([0, 1, 2], sizes)
    basis = splines.spline_basis(times, n_knots)
    design = basis.design(times)
    return times, groups, basis, design, np.stack([design[groups == g].T @ design[groups == g] for g in range(3)])


def test_branch_moments_equal_the_traces_of_the_explicit_forms():
    times, groups, basis, design, gram = _small_fork(6, [40, 30, 25], 0.6, 6)
    lam_shared, lam_branches = 0.3, [0.05, 2.0]
    moments = comparison.form_moments(*comparison.branch_forms(gram, basis.penalty, lam_shared, lam_branches), gram.sum())

    def explained(weights, lam):
        weighted = weights[:, None] * design
        inverse = np.linalg.inv(design.T @ weighted + lam * basis.penalty)
        smoother = design @ inverse @ weighted.T  # fitted values = smoother @ y
        residual = np.eye(times.size) - smoother
        return np.eye(times.size) - residual.T @ np.diag(weights) @ residual  # y'Qy = Σ w y² − weighted RSS

    branch_weights = [np.where(groups == 0, 0.5, (groups == b).astype(float)) for b in (1, 2)]
    q_branches = sum(explained(w, lam) for w, lam in zip(branch_weights, lam_branches)) - np.eye(times.size)
    q_shared = explained(np.ones(times.size), lam_shared)
    a, r = q_branches - q_shared, np.eye(times.size) - q_branches
    np.testing.assert_allclose(moments, [np.trace(a), np.trace(a @ a), np.trace(r), np.trace(r @ r)], rtol=1e-8)


def test_branch_test_finds_branch_dependent_genes_and_masks_curves_outside_branches():
    rng = np.random.default_rng(7)
    times = np.concatenate([rng.uniform(0, 1, 200), 1 + rng.uniform(0, 1, 200), 1 + rng.uniform(0, 0.5, 200)])
    groups = np.repeat([0, 1, 2], 200)
    after = np.clip(times - 1, 0, None)
    differ = np.where(groups == 1, after, -after)
    values = np.column_stack([differ, np.sin(2 * times), np.zeros_like(times)]) + 0.2 * rng.standard_normal((600, 3))
    result = branches.branch_test(values, np.arange(600), times, groups)
    assert result.qvals[0] < 1e-10 and result.qvals[1] > 0.05
    assert result.pvals[2] > 0.01
    # the second branch has no cells beyond its reach on the curves' (registered) axis
    short = result.grid > result.times[groups == 2].max() + 1e-9
    assert short.sum() >= 0.2 * short.size
    assert np.isnan(result.curves[:, 1, short]).all() and np.isfinite(result.curves[:, 0, :]).all()
    np.testing.assert_array_equal(result.n_cells, [200, 200, 200])


def test_constant_genes_get_p_one_and_zero_r2():
    times = _times(100)
    values = np.column_stack([np.full(100, 3.0), np.zeros(100), times])
    result = trends.trend_test(sparse.csr_matrix(values), np.arange(100), times)
    np.testing.assert_array_equal(result.pvals[:2], 1.0)
    np.testing.assert_array_equal(result.r2[:2], 0.0)
    assert result.r2[2] == pytest.approx(1.0) and result.pvals[2] < 1e-12


@pytest.mark.parametrize(
    ("call", "fragment"),
    [
        (lambda v, t: trends.trend_test(v, np.arange(50), t, df=2.0), "df must be > 2"),
        (lambda v, t: trends.trend_test(v, np.arange(50), np.zeros(50)), "same pseudotime"),
        (lambda v, t: trends.trend_test(np.where(v > 0.5, np.nan, v), np.arange(50), t), "NaN"),
        (lambda v, t: trends.trend_test(v, np.arange(50), np.where(t > 1, np.nan, t)), "finite"),
        (lambda v, t: trends.trend_test(v, np.arange(50), t, columns=np.array([], dtype=int)), "No genes"),
        (lambda v, t: branches.branch_test(v, np.arange(50), t, np.repeat([0, 1, 2], [20, 25, 5])), "has 5 cells"),
        (lambda v, t: branches.branch_test(v, np.arange(50), t, np.repeat([0, 1], [20, 30])), "at least two branches"),
    ],
)
def test_bad_input_is_rejected(call, fragment):
    rng = np.random.default_rng(8)
    with pytest.raises(ValueError, match=fragment):
        call(rng.uniform(size=(50, 4)), _times(50))


Y_SEGMENTS = {  # root 0; fork at node 3 into 3-5-6 (which forks again at 6) and 3-4
    "0": np.array([0, 1, 2, 3]),
    "1": np.array([3, 4]),
    "2": np.array([3, 5, 6]),
    "3": np.array([6, 7]),
    "4": np.array([6, 8]),
}


def test_branch_cells_walk_the_oriented_tree():
    trunk, branches = lineages.branch_cells(Y_SEGMENTS, 3, 0)
    assert trunk == ["0"] and branches == [["1"], ["2", "3", "4"]]
    trunk, branches = lineages.branch_cells(Y_SEGMENTS, 6, np.array([0]))
    assert trunk == ["0", "2"] and branches == [["3"], ["4"]]
    with pytest.raises(ValueError, match="not a branch point"):
        lineages.branch_cells(Y_SEGMENTS, 5, 0)
    looped = {**Y_SEGMENTS, "5": np.array([4, 9, 7])}  # 4 → 7 closes a cycle between the branches
    with pytest.raises(ValueError, match="cycle"):
        lineages.branch_cells(looped, 3, 0)


def _stretched_fork(stretch, seed=11, n_genes=600):
    """One shared curve of true time per gene on both branches; branch 2's time past the fork stretched."""
    rng = np.random.default_rng(seed)
    true = np.concatenate([rng.uniform(0, 1, 300), 1 + rng.uniform(0, 1, 300), 1 + rng.uniform(0, 1, 300)])
    groups = np.repeat([0, 1, 2], 300)
    centres, amplitude = rng.uniform(0.3, 1.7, n_genes), rng.uniform(1.0, 2.0, n_genes)
    values = amplitude / (1 + np.exp(-(true[:, None] - centres) / 0.15)) + 0.5 * rng.standard_normal((900, n_genes))
    learned = np.where(groups == 2, 1 + (true - 1) * stretch, true)
    return values, learned, groups


def test_registration_removes_a_uniform_stretch_of_one_branch():
    values, learned, groups = _stretched_fork(1.3)
    raw = branches.branch_test(values, np.arange(900), learned, groups, registration="none")
    fitted = branches.branch_test(values, np.arange(900), learned, groups)
    assert (raw.pvals < 0.05).mean() > 0.3  # the stretch alone looks like a branch difference
    assert (fitted.pvals < 0.05).mean() < 0.08 and (fitted.qvals < 0.05).mean() < 0.02
    # registered, the branches agree at equal true times: branch 2's time 1.3·u past the fork meets branch 1's u
    past = np.linspace(0.1, 0.9, 9)
    warp = warps.fit_branch_warps(values, np.arange(900), learned, groups, n_knots=10, df=6.0)
    one, two = warp(1 + past, np.ones(9, int)), warp(1 + 1.3 * past, np.full(9, 2))
    assert np.abs(one - two).max() <= 0.05


def test_registration_bounds_the_branches_relative_pace_but_undoes_a_threefold_stretch():
    """The warp keeps each branch's overall factor within MAX_RELATIVE_STRETCH of the branches' mean
    (it stretched the branches of a three-fate fork 7-fold apart when nearly every gene parted), yet
    a uniform 3-fold stretch of one branch is registered: shared genes keep their level. A 4-fold
    stretch presses against that bound, and the search again within WIDE_RELATIVE_STRETCH finds its
    best warp inside (on the learned axis 60-70 % of the shared genes were flagged)."""
    values, learned, groups = _stretched_fork(3.0)
    result = branches.branch_test(values, np.arange(900), learned, groups)
    assert np.all(np.abs(np.log(result.stretch)) <= np.log(warps.MAX_RELATIVE_STRETCH) + 1e-9)
    assert result.stretch[1] / result.stretch[0] < 0.45  # most of the 3-fold stretch undone
    assert (result.pvals < 0.05).mean() < 0.1 and (result.qvals < 0.05).mean() < 0.02
    values, learned, groups = _stretched_fork(4.0)
    assert warps.fit_branch_warps(values, np.arange(900), learned, groups, n_knots=10, df=6.0).at_bound
    for test in (branches.branch_test, branches.fork_test):
        result = test(values, np.arange(900), learned, groups)
        assert not result.warp_at_bound and result.stretch[1] / result.stretch[0] < 0.3
        assert (result.pvals < 0.05).mean() < 0.1 and (result.qvals < 0.05).mean() < 0.02


def test_registration_keeps_branches_that_stop_early():
    # no stretch, but branch 2 covers only half of the process: equal-reach rescaling would
    # stretch it; the fitted warp stays near 1 and the p-values hold their level
    rng = np.random.default_rng(12)
    true = np.concatenate([rng.uniform(0, 1, 300), 1 + rng.uniform(0, 1, 300), 1 + rng.uniform(0, 0.5, 300)])
    groups = np.repeat([0, 1, 2], 300)
    centres = rng.uniform(0.3, 1.7, 600)
    values = 1.5 / (1 + np.exp(-(true[:, None] - centres) / 0.15)) + 0.5 * rng.standard_normal((900, 600))
    result = branches.branch_test(values, np.arange(900), true, groups)
    past = np.linspace(0.05, 0.45, 9)  # where both branches have cells, the warp keeps them together
    warp = warps.fit_branch_warps(values, np.arange(900), true, groups, n_knots=10, df=6.0)
    assert np.abs(warp(1 + past, np.ones(9, int)) - warp(1 + past, np.full(9, 2))).max() <= 0.05
    assert (result.pvals < 0.05).mean() < 0.08


def test_registration_flattens_a_terminal_pile_of_cells():
    # branch 2 reaches its terminal state at true time 1.5 and half its cells sit there, while the
    # learned time runs on through the pile to 2.0; only a warp whose last piece nearly stops
    # (below SLOPE_RANGE's 0.5) puts those cells back at one time
    rng = np.random.default_rng(13)
    true = np.concatenate([rng.uniform(0, 1, 300), 1 + rng.uniform(0, 1, 300),
                           1 + rng.uniform(0, 0.5, 150), np.full(150, 1.5)])
    learned = true.copy()
    learned[750:] = 1.5 + rng.uniform(0, 0.5, 150)
    groups = np.repeat([0, 1, 2], 300)
    centres = rng.uniform(0.3, 1.7, 600)
    values = 1.5 / (1 + np.exp(-(true[:, None] - centres) / 0.15)) + 0.5 * rng.standard_normal((900, 600))
    raw = branches.branch_test(values, np.arange(900), learned, groups, registration="none")
    fitted = branches.branch_test(values, np.arange(900), learned, groups)
    assert (raw.qvals < 0.05).mean() > 0.2
    # the slopes of [0.5, 2] alone left 27 % at p < 0.05 and 18 % at q < 0.05; the test on the true
    # time itself gives 5-9 % at p < 0.05 here
    assert (fitted.pvals < 0.05).mean() < 0.1 and (fitted.qvals < 0.05).mean() < 0.02
    warp = warps.fit_branch_warps(values, np.arange(900), learned, groups, n_knots=10, df=6.0)
    assert warp.slopes[1, -1] < warps.SLOPE_RANGE[0]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_warp_set_by_its_bounds_says_so(seed):
    """Every gene parts after the fork (a rise on one branch, at a random onset) and the branches run
    at one pace: no gene is shared, so any warp that slides or stretches the branches apart lets one
    "shared" curve follow each over its own stretch of time. The search stretches them 1.74 / 0.57,
    pressed against MAX_RELATIVE_STRETCH, and again against WIDE_RELATIVE_STRETCH: the warp says so
    (``at_bound``), and both tests compare the branches on the learned axis, as ``"none"`` does. A
    uniform 3-fold stretch of one branch, which the warp undoes at 1.73 / 0.58, is not pressed against it."""
    rng = np.random.default_rng(seed)
    times = rng.uniform(0, 2, 1500)
    groups = np.where(times < 0.5, 0, rng.integers(1, 3, 1500))
    past = np.clip(times - 0.5, 0, None)
    onsets, owners = rng.uniform(0.2, 1.2, 200), 1 + np.arange(200) % 2
    parting = np.where(groups[:, None] == owners, 1.5 / (1 + np.exp(-(past[:, None] - onsets) / 0.1)), 0.0)
    trunk = 1.0 / (1 + np.exp(-(times[:, None] - rng.uniform(0.1, 0.4, 40)) / 0.05))
    values = np.hstack([parting, trunk]) + 0.5 * rng.standard_normal((1500, 240))
    rows = np.arange(1500)
    warp = warps.fit_branch_warps(values, rows, times, groups, n_knots=10, df=6.0)
    assert warp.at_bound and np.abs(np.log(warp.stretch)).max() > np.log(1.6)
    for test, default in ((branches.fork_test, "fit"), (branches.branch_test, "both")):
        result, learned = test(values, rows, times, groups), test(values, rows, times, groups, registration="none")
        assert result.warp_at_bound and not learned.warp_at_bound, default
        np.testing.assert_array_equal(result.pvals, learned.pvals)
        np.testing.assert_array_equal(result.times, learned.times)
        assert np.all(result.stretch == 1) and np.all(result.shift == 0) and np.isnan(result.pvals_registered).all()
        assert (result.qvals[:200] < 0.05).mean() > 0.5  # the parting genes, called on the learned axis
    values, learned, groups = _stretched_fork(3.0)
    stretched = warps.fit_branch_warps(values, np.arange(900), learned, groups, n_knots=10, df=6.0)
    assert not stretched.at_bound and np.abs(np.log(stretched.stretch)).max() > np.log(1.6)


def test_a_warp_pressed_against_a_bound_is_told_from_one_that_stops_inside():
    warp = warps.BranchWarp.identity(1.0, np.array([1.0, 1.0]), n_pieces=2)
    stretched = warp.replace(slopes=np.array([[1.7, 1.7], [1 / 1.7, 1 / 1.7]]))
    farther = lambda w: -w.stretch[0]  # noqa: E731  a criterion that keeps improving past the bound
    back = lambda w: abs(w.stretch[0] - 1.7)  # noqa: E731  ... and one whose best lies at 1.7
    assert warps._pressed_against_bounds(stretched, farther)
    assert not warps._pressed_against_bounds(stretched, back)
    assert not warps._pressed_against_bounds(warp.replace(slopes=np.array([[1.2, 1.2], [0.8, 0.8]])), farther)
    assert warps._pressed_against_bounds(warp.replace(shifts=np.array([0.0, 0.52])), back)  # overlap 0.48


def test_a_short_branch_beside_a_long_crowded_one_keeps_its_df_and_the_level():
    """A short trunk and a short branch beside a branch of 1,800 cells: the quantiles of all cells
    left the short curve one or two knot intervals, so the warp's fit raised (df=6 outside 2–4) and,
    unwarped, the df fell to 3.8 and the stiff shared curve flagged 15 % of shared genes at p < 0.05."""
    rng = np.random.default_rng(16)
    true = np.concatenate([rng.uniform(0, 0.2, 100), 0.2 + rng.uniform(0, 0.1, 40), 0.2 + rng.uniform(0, 2, 1800)])
    groups = np.repeat([0, 1, 2], [100, 40, 1800])
    centres = rng.uniform(0.3, 1.7, 300)
    values = 1.5 / (1 + np.exp(-(true[:, None] - centres) / 0.15)) + 0.5 * rng.standard_normal((true.size, 300))
    for registration in ("fit", "none"):
        result = branches.branch_test(values, np.arange(true.size), true, groups, registration=registration)
        assert result.df_shared == pytest.approx(6.0)
        assert (result.pvals < 0.05).mean() < 0.08, registration


def test_the_warp_takes_any_df_the_branch_test_takes():
    """The test adds each branch's own knots where one set of knots cannot carry ``df``; the warp's
    choice of genes used the common knots alone and raised at df = 14 on 10 knots (12 splines)."""
    values, learned, groups = _stretched_fork(1.3, n_genes=40)
    unwarped = branches.branch_test(values, np.arange(900), learned, groups, df=14.0, registration="none")
    warped = branches.branch_test(values, np.arange(900), learned, groups, df=14.0, registration="fit")
    assert unwarped.df_shared == pytest.approx(14.0) and warped.df_shared == pytest.approx(14.0)
    assert (warped.pvals < 0.05).mean() < (unwarped.pvals < 0.05).mean()


def test_both_registrations_give_each_gene_the_larger_p_value(monkeypatch):
    """``"fit"`` (the fork test's default) compares the branches on a five- and a nine-piece warp and
    keeps each gene's larger p-value; ``"both"`` (the branch test's default) makes the same registered
    comparison and one on the pseudotime as it is, and keeps the larger; ``"none"`` reports the axis it
    compared. The curves are always the five-piece warp's."""
    values, learned, groups = _stretched_fork(1.3, n_genes=40)
    rows = np.arange(900)
    both = branches.branch_test(values, rows, learned, groups)
    fit = branches.branch_test(values, rows, learned, groups, registration="fit")
    none = branches.branch_test(values, rows, learned, groups, registration="none")
    with monkeypatch.context() as patch:
        patch.setattr(branches, "WARP_PIECES", warps.FINE_WARP_PIECES)
        fine = branches.branch_test(values, rows, learned, groups).pvals_registered
    np.testing.assert_allclose(both.pvals_registered, fit.pvals)
    assert np.all(fit.pvals >= fine - 1e-12)  # the nine-piece warp's, and the five's
    np.testing.assert_allclose(both.pvals_unregistered, none.pvals)
    np.testing.assert_allclose(both.pvals, np.fmax(both.pvals_registered, none.pvals))
    np.testing.assert_allclose(both.qvals, inference.benjamini_hochberg(both.pvals))
    np.testing.assert_allclose(both.curves, fit.curves)  # the curves are the registered ones
    assert np.isnan(fit.pvals_unregistered).all() and np.isnan(none.pvals_registered).all()
    fork_both = branches.fork_test(values, rows, learned, groups, registration="both")
    fork_fit = branches.fork_test(values, rows, learned, groups)  # the fork test's default
    fork_none = branches.fork_test(values, rows, learned, groups, registration="none")
    np.testing.assert_allclose(fork_both.pvals, np.fmax(fork_both.pvals_registered, fork_none.pvals))
    np.testing.assert_allclose(fork_both.pvals_registered, fork_fit.pvals)  # the same two warps
    assert fork_both.window == pytest.approx(fork_fit.window)  # each axis its own default window


def _root_fork_of_random_walk_tree(seed: int, n_shared: int = 200):
    """A three-fate PROSSTT-like tree (``_testing.random_walk_tree``, 2,000 cells, log-normalised) at its
    root fork, with the TRUE time and the true split, and ``n_shared`` genes on one sigmoid of the true
    time appended last: exact shared genes, on an axis where no warp is needed."""
    from scskeleton._testing import random_walk_tree

    adata = random_walk_tree(3, 2000, seed)
    counts = np.asarray(adata.X)
    counts = counts[:, (counts > 0).sum(axis=0) >= 3]
    logged = np.log1p(counts / counts.sum(axis=1, keepdims=True) * np.median(counts.sum(axis=1)))
    parent = adata.uns["true_parent"]
    children = sorted(child for child, up in parent.items() if up == "0")

    def arm(branch):
        while parent[branch] not in ("0", "-1"):
            branch = parent[branch]
        return 0 if branch == "0" else children.index(branch) + 1

    groups = np.array([arm(branch) for branch in adata.obs["true_branch"].astype(str)])
    time = adata.obs["true_pseudotime"].to_numpy()
    rng = np.random.default_rng([23, seed])
    centres, widths = rng.uniform(0.1, 0.9, n_shared) * time.max(), rng.uniform(0.05, 0.2, n_shared) * time.max()
    amplitudes = rng.uniform(0.5, 2.0, n_shared) * rng.choice([-1, 1], n_shared)
    shared = (2 + amplitudes / (1 + np.exp(-(time[:, None] - centres) / widths))
              + 0.5 * rng.standard_normal((time.size, n_shared)))
    return np.hstack([logged, shared]), time, groups


@pytest.mark.parametrize("seed", [0, 2])
def test_both_registrations_hold_the_level_where_the_warp_mistakes_delays_for_pace(seed):
    """Handed the true time, where no warp is needed, the registered test of a tree whose genes nearly all
    part gradually after the fork flags 33.5 % and 72.5 % of the shared genes (seeds 0 and 2): the warp
    reads the programs' delays as a difference of pace. The unregistered comparison is right here, so
    ``"both"`` holds the level, as it does where only the warp is right (a stretched branch)."""
    matrix, time, groups = _root_fork_of_random_walk_tree(seed)
    shared = np.arange(matrix.shape[1] - 200, matrix.shape[1])
    result = branches.branch_test(matrix, np.arange(time.size), time, groups, columns=shared)
    assert np.mean(result.pvals_registered < 0.05) > 0.3  # the warp alone is fooled
    assert np.mean(result.qvals < 0.05) <= 0.05
    assert np.mean(result.pvals < 0.05) <= 0.08
    values, learned, stretched = _stretched_fork(1.3)
    assert np.mean(branches.branch_test(values, np.arange(900), learned, stretched).qvals < 0.05) < 0.02


def test_registration_is_validated():
    values, learned, groups = _stretched_fork(1.0, n_genes=5)
    with pytest.raises(ValueError, match="registration"):
        branches.branch_test(values, np.arange(900), learned, groups, registration="quantile")


def _degenerate_matrix(n=400, seed=13):
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, 2, n))
    rare = np.full(n, -0.2)
    rare[[5, 6, 7]] = [5.0, 6.0, 7.0]  # three outlying values on a constant: no trend to test
    columns = [
        np.full(n, -0.1234567),  # one single value, as scaled data gives an unexpressed gene
        rare,
        np.zeros(n),
        np.sin(times) + 0.1 * rng.standard_normal(n),  # a real trend
    ]
    return times, np.column_stack(columns)


@pytest.mark.parametrize("kind", ["dense", "csr", "csc", "integer", "float32"])
def test_degenerate_genes_are_never_significant(kind):
    times, values = _degenerate_matrix()
    matrix = {
        "dense": values, "csr": sparse.csr_matrix(values), "csc": sparse.csc_matrix(values),
        "integer": np.round(values * 10).astype(np.int64), "float32": values.astype(np.float32),
    }[kind]
    trend = trends.trend_test(matrix, np.arange(times.size), times)
    np.testing.assert_array_equal(trend.degenerate, [True, True, True, False])
    np.testing.assert_array_equal(trend.pvals[:3], 1.0)
    np.testing.assert_array_equal(trend.r2[:3], 0.0)
    assert trend.pvals[3] < 1e-12
    groups = np.where(times < 1, 0, np.where(np.arange(times.size) % 2 == 0, 1, 2))
    branch = branches.branch_test(matrix, np.arange(times.size), times, groups, df=4.0)
    np.testing.assert_array_equal(branch.pvals[:3], 1.0)
    np.testing.assert_array_equal(branch.fstat[:3], 0.0)


def test_cells_are_counted_per_group_for_dense_and_sparse_input():
    rng = np.random.default_rng(21)
    values = rng.poisson(0.3, (60, 12)).astype(float)
    values[:, 3], values[::7, 5] = 2.0, 1.0
    values[:, 6] = -0.1 - 0.05 * rng.random(60)  # no value shared: a bulk, and a few far from it
    values[::9, 6] = 5.0
    values[:, 7] = rng.standard_normal(60)
    stored = sparse.csr_matrix(values)
    stored.data[::4] = 0.0  # explicit zeros stored
    dense = stored.toarray()
    groups = rng.integers(0, 3, 60)
    references = np.vstack([dense[[0, 30]], passes._bulk(dense)])
    brute = np.stack([[(dense[groups == g] != value).sum(axis=0) for g in range(3)] for value in references[:2]])
    compared = np.isfinite(references[3])  # genes without a value shared by half the sample
    assert 0 < compared.sum() < 12
    squared = (dense - references[2]) ** 2 * compared
    out = squared > np.nan_to_num(references[3]) ** 2
    for matrix in (dense, stored, stored.tocsc(), stored.tocoo()):
        differing, outside, deviations = passes._count_cells(matrix, references, np.eye(3)[groups])
        np.testing.assert_array_equal(differing, brute)
        np.testing.assert_array_equal(outside, [out[groups == g].sum(axis=0) for g in range(3)])
        np.testing.assert_allclose(deviations, [squared.sum(axis=0), (squared * out).sum(axis=0)], rtol=1e-12)
    assert 0 < out.sum() < out.size
    result = passes.sufficient_statistics(stored, np.arange(60), np.ones((60, 1)), groups, 3)
    np.testing.assert_array_equal(result.n_varying, brute.sum(axis=1).min(axis=0))


def test_the_cells_that_carry_a_genes_variation_whatever_its_unexpressed_cells_take():
    """Log counts: the cells off the shared zero. Pearson residuals of the same counts (each unexpressed
    cell its own value): for the sparse genes, the cells with a count, give or take a cell of extreme
    size; the others, within a quarter, or every cell where the cells outside the bulk do not hold most
    of the variation. Gaussian genes: every cell."""
    rng = np.random.default_rng(22)
    n = 900
    groups = np.repeat([0, 1, 2], [400, 450, 50])
    size = np.exp(rng.normal(0.0, 0.4, n))
    mean = size[:, None] * np.exp(rng.uniform(np.log(0.02), np.log(0.3), 40))[None, :]
    counts = rng.poisson(mean)
    with_count = np.array([(counts[groups == g] > 0).sum(axis=0) for g in range(3)])
    def carriers_of(values):
        return passes.sufficient_statistics(values, np.arange(n), np.ones((n, 1)), groups, 3,
                                             count_carriers=True).n_carriers_by_group

    np.testing.assert_array_equal(carriers_of(sparse.csr_matrix(np.log1p(counts))), with_count)
    sparse_genes = with_count.sum(axis=0) <= 0.15 * n
    assert sparse_genes.sum() >= 30
    carriers = carriers_of((counts - mean) / np.sqrt(mean))
    assert np.abs(carriers - with_count)[:, sparse_genes].max() <= 2
    total, expected = carriers[:, ~sparse_genes].sum(axis=0), with_count[:, ~sparse_genes].sum(axis=0)
    assert np.all((np.abs(total - expected) <= 0.25 * expected) | (total == n))
    every_cell = np.bincount(groups)[:, None] * np.ones((1, 5))
    np.testing.assert_array_equal(carriers_of(rng.standard_normal((n, 5))), every_cell)


def test_the_count_test_is_the_binomial_test_of_the_branches_expecting_too_few():
    n_cells = np.array([100, 800, 40])  # trunk, a large and a small branch
    carriers = np.array([[10, 50, 10, 0],  # trunk: cells carrying four genes' variation
                        [80, 400, 20, 3],  # large branch
                        [10, 50, 15, 1]])  # small branch
    pvals = inference.sparse_count_pvalues(carriers, n_cells, np.array([1, 2]))
    assert pvals[1] == 0.0  # 500 carriers: the small branch expects 21, the F test alone decides
    for gene in (0, 2, 3):
        total = carriers[:, gene].sum()
        checked = []  # two-sided binomial p of each branch that expects too few (gene 3: both)
        for branch in (1, 2):
            share = n_cells[branch] / n_cells.sum()
            if share * total < inference.MIN_EXPECTED_CARRIERS:
                held = carriers[branch, gene]
                checked.append(2 * min(stats.binom.sf(held - 1, total, share), stats.binom.cdf(held, total, share)))
        assert pvals[gene] == pytest.approx(min(1.0, min(checked) * len(checked)), rel=1e-9)
    assert pvals[2] < 1e-6  # 15 of 45 where 1.9 are expected: a marker of the small branch stands
    assert 0.01 < pvals[0] < 0.05 and pvals[3] > 0.5  # 10 of 100 where 4.3 are expected; 1 of 4 where 0.2


def test_sparse_genes_in_a_small_branch_hold_the_level_and_its_markers_are_found():
    """A branch of 40 cells beside one of 800: null genes of log counts with a few non-zero values in the
    small branch gave F p-values far below their level (fork test: 5.4 % below 0.01, 2.5 % below 0.001),
    their non-zero values there being too few to be Gaussian; a count test now has to agree. The same
    counts as Pearson residuals (no value shared by the unexpressed cells) gave 11 % below 0.05, 6 %
    below 0.01 before the count test read the cells outside each gene's bulk."""
    rng, times, groups, size = _two_branches(3, 800, 40)
    n, n_null = times.size, 4000
    rates = np.exp(rng.uniform(np.log(0.01), np.log(0.5), n_null))
    markers = np.zeros(50)[None, :] + np.where(groups == 2, 1.0, 0.0)[:, None] * rng.uniform(0.3, 1.0, 50)
    counts = rng.poisson(size[:, None] * np.hstack([np.broadcast_to(rates, (n, n_null)), markers]))
    trunk = rng.uniform(-1, 0, 300)
    trunk_size = np.exp(rng.normal(0.0, 0.4, 300))
    trunk_counts = rng.poisson(trunk_size[:, None] * np.concatenate([rates, np.zeros(50)])[None, :])
    with_trunk, all_size = np.concatenate([trunk, times]), np.concatenate([trunk_size, size])
    all_counts = np.vstack([trunk_counts, counts])
    for name, transform in (("log counts", lambda c, s: sparse.csr_matrix(np.log1p(3.0 * c))),
                            ("Pearson residuals", _pearson_residuals)):
        fork = branches.fork_test(transform(counts, size), np.arange(n), times, groups, registration="none", window=1.0)
        branch = branches.branch_test(transform(all_counts, all_size), np.arange(with_trunk.size), with_trunk,
                                      np.concatenate([np.zeros(300, int), groups]), registration="none")
        for result in (fork, branch):
            tested = result.pvals[:n_null][~result.degenerate[:n_null]]
            assert tested.size > 3500, name
            assert np.mean(tested < 0.05) <= 0.06 and np.mean(tested < 0.01) <= 0.015, name
            assert np.mean(result.pvals[n_null:] < 1e-3) >= 0.95, name


def test_a_branch_expecting_a_few_of_a_genes_counts_more_than_five_holds_the_far_tail():
    """Cochran's 5 was too few: in a branch of 112 of 787 cells, log counts whose cells with a count the
    branch expects 5–10 of put 2.3 % below 0.01 and 0.57 % below 0.001 (over 3 × 2,800 genes)."""
    rng, times, groups, size = _two_branches(5, 675, 112)
    counts = rng.poisson(size[:, None] * rng.uniform(0.045, 0.095, 4000)[None, :])
    expected = (counts > 0).sum(axis=0) * 112 / times.size
    result = branches.fork_test(np.log1p(3.0 * counts), np.arange(times.size), times, groups, registration="none",
                                window=1.0)
    few = (expected >= 5) & (expected < 10) & ~result.degenerate
    assert few.sum() > 2500
    assert np.mean(result.pvals[few] < 0.05) <= 0.05 and np.mean(result.pvals[few] < 0.01) <= 0.012


def _two_branches(seed: int, n_big: int, n_small: int):
    """Cells of two branches (groups 1 and 2) on times uniform in [0, 1], with log-normal library sizes."""
    rng = np.random.default_rng(seed)
    times = np.concatenate([rng.uniform(0, 1, n_big), rng.uniform(0, 1, n_small)])
    return rng, times, np.repeat([1, 2], [n_big, n_small]), np.exp(rng.normal(0.0, 0.4, n_big + n_small))


def _pearson_residuals(counts: np.ndarray, size: np.ndarray) -> np.ndarray:
    """(k − μ)/√μ with μ the gene's rate per unit of size times the cell's size (all-zero genes: 0)."""
    mean = size[:, None] * (counts.sum(axis=0) / size.sum())[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.nan_to_num((counts - mean) / np.sqrt(mean))


def test_df_beyond_what_the_cells_carry_is_lowered_not_refused():
    # 12 basis functions carry at most 12 degrees of freedom; tied pseudotimes carry fewer
    rng = np.random.default_rng(14)
    times = np.repeat(np.linspace(0, 1, 6), 20)  # 6 distinct values
    values = np.sin(3 * times)[:, None] + 0.1 * rng.standard_normal((120, 3))
    result = trends.trend_test(values, np.arange(120), times, df=40.0)
    assert 2.5 <= result.edf[0] < 12 and np.all(result.pvals[:1] < 1e-6)
    default = trends.trend_test(values, np.arange(120), times)  # df=6 may not fit 6 distinct times either
    assert 2.5 <= default.edf[0] <= 6.0
    with pytest.raises(ValueError, match="too few for a curve"):
        trends.trend_test(values[:40], np.arange(40), np.repeat([0.0, 1.0], 20))


def _three_segment_tree(n=300, seed=15):
    rng = np.random.default_rng(seed)
    times = np.concatenate([rng.uniform(0, 1, n), 1 + rng.uniform(0, 1, n), 1 + rng.uniform(0, 0.7, n)])
    groups = np.repeat([0, 1, 2], n)
    membership = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]])  # the trunk is on both lineages
    return rng, times, groups, membership


def test_association_p_values_hold_their_level_and_detect_change_on_one_lineage():
    rng, times, groups, membership = _three_segment_tree()
    noise = rng.standard_normal((times.size, 4000))
    null = association.association_test(noise, np.arange(times.size), times, groups, membership)
    for level in (0.05, 0.01):
        assert abs((null.pvals < level).mean() - level) < 0.25 * level + 0.004
    assert stats.kstest(null.pvals, "uniform").pvalue > 0.01
    # the far tail over 25 replicates (10⁵ genes; Satterthwaite's reference: 1.2–1.4× the level)
    far = np.concatenate([
        association.association_test(np.random.default_rng([16, r]).standard_normal((times.size, 4000)),
                                     np.arange(times.size), times, groups, membership).pvals
        for r in range(25)
    ])
    assert abs(float(np.mean(far < 1e-3)) / 1e-3 - 1.0) <= 0.25
    late = np.where(groups == 2, times - 1, 0.0)  # changes on the second lineage only, after the fork
    signal = np.column_stack([late, np.sin(2 * times)]) + 0.3 * rng.standard_normal((times.size, 2))
    result = association.association_test(sparse.csr_matrix(signal), np.arange(times.size), times, groups, membership)
    assert (result.pvals < 1e-10).all()
    assert result.amplitude[0] == pytest.approx(0.7, abs=0.15) and np.isnan(result.curves[0, 1, result.grid > 1.75]).all()
    dense = association.association_test(signal, np.arange(times.size), times, groups, membership)
    np.testing.assert_allclose(dense.fstat, result.fstat, rtol=1e-9)


def test_a_short_lineage_beside_a_long_crowded_one_keeps_its_df_and_the_level():
    # the quantiles of all cells leave the short lineage one or two knot intervals: its own knots
    # keep df = 6 for every lineage (it was lowered for all of them) and the null holds its level
    rng = np.random.default_rng(17)
    times = np.concatenate([rng.uniform(0, 0.2, 100), 0.2 + rng.uniform(0, 0.1, 40), 0.2 + rng.uniform(0, 2, 1800)])
    groups = np.repeat([0, 1, 2], [100, 40, 1800])
    membership = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]])
    noise = rng.standard_normal((times.size, 2000))
    fits = association.fit_lineages(noise, np.arange(times.size), times, groups, membership, n_knots=10, df=6.0)
    assert fits.df == pytest.approx(6.0)
    null = association.association_test(noise, np.arange(times.size), times, groups, membership)
    assert abs((null.pvals < 0.05).mean() - 0.05) < 0.015


def test_lineages_follow_segments_from_the_root_to_every_leaf():
    segments = {"0": np.array([0, 1, 2]), "1": np.array([2, 3]), "2": np.array([2, 4, 5]), "3": np.array([5, 6]),
                "4": np.array([5, 7])}
    assert lineages.lineages(segments, 0) == [["0", "1"], ["0", "2", "3"], ["0", "2", "4"]]
    with pytest.raises(ValueError, match="not unique"):
        lineages.lineages({**segments, "5": np.array([3, 5])}, 0)  # a second way into node 5: a cycle


def test_lineage_membership_shares_a_segment_between_the_lineages_through_it():
    on_lineage, membership = lineages.lineage_membership([["0", "1"], ["0", "2", "3"], ["0", "2", "4"]])
    assert on_lineage == ["0", "1", "2", "3", "4"]
    np.testing.assert_allclose(membership.sum(axis=1), 1.0)
    np.testing.assert_allclose(membership[0], 1 / 3)
    np.testing.assert_allclose(membership[2], [0, 0.5, 0.5])


def test_form_f_pvalues_match_the_simulated_null_of_non_commuting_smoothers():
    """P(F > f) of the branch test's F on a small explicit design, against 4·10⁵ draws of pure noise."""
    times, groups, basis, design, gram = _small_fork(17, [20, 15, 8], 0.4, 4)
    cross, explained, fitted = comparison.branch_forms(gram, basis.penalty, 0.5, [0.1, 3.0])
    assert np.linalg.eigvalsh(explained).min() < 0  # A is not positive semi-definite
    weights = [np.where(groups == 0, 0.5, (groups == b).astype(float)) for b in (1, 2)]
    stacked = np.hstack([w[:, None] * design for w in weights] + [design])  # U, n × p
    np.testing.assert_allclose(stacked.T @ stacked, cross, atol=1e-10)
    noise = np.random.default_rng(18).standard_normal((400_000, times.size))
    scores = noise @ stacked
    a, _, r, _ = comparison.form_moments(cross, explained, fitted, times.size)
    fstat = (np.einsum("np,pq,nq->n", scores, explained, scores) / a) / (
        (np.einsum("np,np->n", noise, noise) - np.einsum("np,pq,nq->n", scores, fitted, scores)) / r)
    levels = np.array([0.1, 0.01, 0.001])
    pvals = inference.form_f_pvalues(np.quantile(fstat, 1 - levels), cross, explained, fitted, times.size)
    np.testing.assert_allclose(pvals / levels, 1.0, atol=0.1)


def test_form_f_pvalues_equal_the_trend_tests_when_the_smoothers_commute():
    rng = np.random.default_rng(19)
    times = np.sort(rng.uniform(0, 1, 150))
    values = np.sin(4 * times)[:, None] * np.array([0.0, 0.1, 0.2, 0.4]) + rng.standard_normal((150, 4))
    result = trends.trend_test(values, np.arange(150), times, n_knots=6, df=4.0)
    basis = splines.spline_basis(times, 6)
    gram = basis.design(times).T @ basis.design(times)
    fitted = splines.explained_form(gram, basis.penalty, float(result.lam[0]))
    ones = np.ones(gram.shape[0])  # the B-splines sum to one: the constant is X·1
    pvals = inference.form_f_pvalues(result.fstat, gram, fitted - np.outer(ones, ones) / 150, fitted, 150)
    np.testing.assert_allclose(pvals, result.pvals, rtol=1e-6)


def test_branch_warp_is_monotone_and_reports_its_overall_stretch():
    warp = warps.BranchWarp.identity(1.0, np.array([2.0, 1.0]), n_pieces=4)
    times = np.array([0.5, 1.0, 1.5, 2.0, 3.0, 1.5, 2.0])
    groups = np.array([0, 1, 1, 1, 1, 2, 2])
    np.testing.assert_allclose(warp(times, groups), times)  # no warp, trunk untouched
    np.testing.assert_allclose(warp.stretch, [1.0, 1.0])
    slopes = warp.slopes.copy()
    slopes[1] = [0.5, 2.0, 1.0, 1.0]  # branch 2: slow, then fast
    bent = warp.replace(slopes=slopes, shifts=np.array([0.0, 0.1]))
    grid = np.linspace(1.0, 3.0, 41)
    warped = bent(grid, np.full(grid.size, 2))
    assert np.all(np.diff(warped) > 0)
    # branch 2's reach 1 is cut at 0.25, 0.5, 0.75: 0.25·0.5 + 0.25·2 + 0.5·1 = 1.125 over it
    np.testing.assert_allclose(bent.stretch, [1.0, 1.125])
    np.testing.assert_allclose(bent(np.array([1.0]), np.array([2])), [1.1])  # the shift at the fork


def test_branch_overlap_reads_how_far_the_warped_branches_run_side_by_side():
    warp = warps.BranchWarp.identity(1.0, np.array([1.0, 2.0]), n_pieces=2)
    assert warps.branch_overlap(warp) == 1.0  # both leave the fork; the shorter lies within the longer
    assert warps.branch_overlap(warp.replace(shifts=np.array([0.5, 0.0]))) == 1.0  # [1.5, 2.5] within [1, 3]
    assert warps.branch_overlap(warp.replace(shifts=np.array([0.0, 0.5]))) == pytest.approx(0.5)  # [1, 2], [1.5, 3.5]
    assert warps.branch_overlap(warp.replace(shifts=np.array([0.0, 1.0]))) == 0.0  # one starts where the other ends
    slower = warp.slopes.copy()
    slower[0] = 0.5  # the first squeezed to [1, 1.5] beside [1.25, 3.25]
    assert warps.branch_overlap(warp.replace(slopes=slower, shifts=np.array([0.0, 0.25]))) == pytest.approx(0.5)
    three = warps.BranchWarp.identity(1.0, np.ones(3))
    assert warps.branch_overlap(three.replace(shifts=np.array([0.0, 0.5, 0.0]))) == pytest.approx(0.5)
    assert warps.branch_overlap(three.replace(shifts=np.array([0.0, 0.0, 2.0]))) == 0.0  # the third apart


def test_periodic_basis_wraps_round_and_penalises_all_but_the_constant():
    phases = np.random.default_rng(1).uniform(0, 1, 400)
    basis = splines.periodic_spline_basis(phases, 10)
    assert basis.n_basis == basis.knots.size - 1 == 10
    np.testing.assert_allclose(basis.design(phases).sum(axis=1), 1.0, atol=1e-12)
    # one turn later the basis is the same: continuous across the seam
    seam = basis.knots[0]
    np.testing.assert_allclose(basis.design(np.array([seam - 1e-9])), basis.design(np.array([seam + 1e-9])), atol=1e-6)
    np.testing.assert_allclose(basis.design(phases + 1.0), basis.design(phases), atol=1e-12)
    # the penalty is ∫ f''² over one period (a fine periodic second difference), and only constants are free
    coef = np.random.default_rng(2).normal(size=basis.n_basis)
    fine = np.linspace(seam, seam + 1, 100_001)[:-1]
    curve = basis.design(fine) @ coef
    step = fine[1] - fine[0]
    curvature = (np.roll(curve, -1) - 2 * curve + np.roll(curve, 1)) / step**2
    assert coef @ basis.penalty @ coef == pytest.approx(np.sum(curvature**2) * step, rel=1e-4)
    eigenvalues = np.linalg.eigvalsh(basis.penalty)
    assert abs(eigenvalues[0]) < 1e-9 * eigenvalues[-1] and eigenvalues[1] > 1e-6 * eigenvalues[-1]
    np.testing.assert_allclose(basis.penalty @ np.ones(basis.n_basis), 0, atol=1e-9 * eigenvalues[-1])
    with pytest.raises(ValueError, match="too few distinct"):
        splines.periodic_spline_basis(np.r_[np.zeros(50), np.full(50, 0.5)], 10)


def test_periodic_trend_test_is_calibrated_and_finds_a_cycle():
    """Null genes on a phase: uniform p-values; a gene peaking once per turn: found, and its curve
    returns to where it started."""
    rng = np.random.default_rng(3)
    phases = rng.uniform(0, 1, 1500)
    null = rng.normal(size=(phases.size, 400))
    cycling = np.cos(2 * np.pi * (phases - 0.3))[:, None] * 0.4 + rng.normal(size=(phases.size, 1))
    matrix = np.hstack([null, cycling])
    result = trends.trend_test(matrix, np.arange(phases.size), phases, periodic=True)
    assert stats.kstest(result.pvals[:400], "uniform").pvalue > 0.01
    assert 0.02 <= np.mean(result.pvals[:400] < 0.05) <= 0.08
    assert result.qvals[400] < 1e-10
    curve = result.curves[400]
    assert result.grid.size == 100 and result.grid[-1] - result.grid[0] < 1.0
    peak = result.grid[np.argmax(curve)]
    assert abs(np.mod(peak - 0.3 + 0.5, 1.0) - 0.5) < 0.05


def test_a_warp_criterion_is_computed_once_per_warp():
    """The warp search's rounds try many warps again (a slope's factor 1, a shift a branch already
    has): each is scored once, and a warp that differs in any slope, shift or break is scored anew."""
    calls = []
    score = warps._remembered(lambda warp: calls.append(warp) or float(warp.slopes.sum()))
    warp = warps.BranchWarp.identity(1.0, np.array([1.0, 2.0]), 3)
    assert score(warp) == score(warp.replace(slopes=warp.slopes.copy())) == 6.0 and len(calls) == 1
    assert score(warp.replace(shifts=np.array([0.0, 0.1]))) == 6.0 and len(calls) == 2
    assert score(warps.BranchWarp.identity(1.0, np.array([1.0, 3.0]), 3)) == 6.0 and len(calls) == 3


def _sharp_trunk_genes(seed, n_genes=100):
    """Genes that bump sharply on the trunk and keep their value at the fork on both branches (a shared
    course, so null genes of the branch test), on the TRUE time of a fork with branches of unequal
    length and size: trunk [0, 1.2] (850 cells), branches to 2.5 (1,250 cells) and to 1.83 (480)."""
    rng = np.random.default_rng([61, seed])
    times = np.concatenate([rng.uniform(0, 1.2, 850), rng.uniform(1.2, 2.5, 1250), rng.uniform(1.2, 1.83, 480)])
    groups = np.repeat([0, 1, 2], [850, 1250, 480])
    centre, width = rng.uniform(0.1, 0.9, n_genes) * 1.2, rng.uniform(0.05, 0.3, n_genes) * 1.2
    amplitude = rng.uniform(1, 3, n_genes) * rng.choice([-1, 1], n_genes)
    held = np.minimum(times, 1.2)[:, None]
    mean = amplitude * np.exp(-0.5 * ((held - centre) / width) ** 2)
    return mean + 0.34 * rng.standard_normal(mean.shape), times, groups


def test_genes_with_a_sharp_course_on_the_trunk_are_null_genes_of_the_branch_test():
    """Found on an independent generator (2026-11-29): genes that bump sharply on the trunk and keep their
    value past the fork on both branches were called branch genes on the TRUE time: 98-100 % below
    p = 0.05 (registration="both": 20-28 %), when the null's variance was the branch model's residual
    one, which the smoothers' bias inflates, and its mean a fit at df + 2 that cannot follow the bump.
    With the local variance and a null mean as flexible as each gene needs: 6-7 % (both: 2 %), none
    at FDR 0.05 (_shared_null_means)."""
    values, times, groups = _sharp_trunk_genes(0)
    result = branches.branch_test(values, np.arange(times.size), times, groups, registration="none")
    assert np.mean(result.pvals < 0.05) <= 0.08
    assert np.mean(result.qvals < 0.05) <= 0.05


def _sharp_fork_genes(seed):
    """A fork on its TRUE time whose genes switch (logistic), bump (Gaussian) or ramp over U(0.05, 0.3)
    of the time's range: 150 shared by both branches, 100 on the trunk only (held past the fork), 100
    on one branch only (zero on the other); trunk [0, 1] (856 cells), branches to 2.49 (1,244) and to
    1.83 (478), cells spread unevenly, noise sd 0.34. Returns values, times, groups, labels."""
    rng = np.random.default_rng([67, seed])

    def spread(n, start, end):
        return start + (end - start) * rng.uniform(size=n) ** rng.uniform(0.6, 1.6)

    times = np.concatenate([spread(856, 0, 1), spread(1244, 1, 2.49), spread(478, 1, 1.83)])
    groups = np.repeat([0, 1, 2], [856, 1244, 478])

    def course(t, centre, width):
        kind = rng.integers(3)
        z = (t - centre) / width
        return [1 / (1 + np.exp(-z)), np.exp(-0.5 * z**2), np.clip(z + 0.5, 0, 1)][kind]

    columns, labels = [], []
    for label, n_genes in (("shared", 150), ("trunk", 100), ("branch", 100)):
        for _ in range(n_genes):
            width, sign = rng.uniform(0.05, 0.3) * 2.49, rng.choice([-1, 1])
            amplitude = rng.uniform(0.5, 2) * sign
            if label == "shared":
                columns.append(amplitude * course(times, rng.uniform(0, 2.49), width))
            elif label == "trunk":
                columns.append(amplitude * course(np.minimum(times, 1.0), rng.uniform(0, 1), width))
            else:
                branch = rng.integers(1, 3)
                centre = rng.uniform(1, 2.49 if branch == 1 else 1.83)
                columns.append(amplitude * np.where(groups == branch, course(times, centre, width)
                                                    - course(np.array(1.0), centre, width), 0.0))
            labels.append(label)
    values = np.column_stack(columns) + 0.34 * rng.standard_normal((times.size, len(columns)))
    return values, times, groups, np.array(labels)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_sharp_shared_courses_do_not_pull_the_warp(seed):
    """Found on an independent generator (2026-11-29): on the TRUE time of a fork whose genes switch and
    bump sharply, the warp stretched the branches 0.72-0.76 / 1.32-1.39 (their ends aligned) and the
    registered test flagged 58-64 % of the shared genes at FDR 0.05 on seeds 0-3 (unregistered: 1-7 %):
    the warp's criterion, like the test's null before it, read the branch and shared curves' different
    smoothing of a sharp course as a difference between the branches, and the search shrank it. The
    final choice, among no warp too, is now made with that smoothing taken out (fit_branch_warps):
    no stretch, flagged as unregistered. Branch genes are called."""
    values, times, groups, labels = _sharp_fork_genes(seed)
    rows = np.arange(times.size)
    registered = branches.branch_test(values, rows, times, groups, registration="fit")
    unregistered = branches.branch_test(values, rows, times, groups, registration="none")
    for label in ("shared", "trunk"):
        flagged = np.mean(registered.qvals[labels == label] < 0.05)
        assert flagged <= max(0.05, np.mean(unregistered.qvals[labels == label] < 0.05) + 0.01)
    assert np.all(np.abs(np.log(registered.stretch)) < np.log(1.2))
    assert np.mean(registered.qvals[labels == "branch"] < 0.05) >= 0.85


def test_local_variance_is_the_noise_where_a_spline_misses_a_sharp_course():
    """The null's variance (SufficientStatistics.local_variance): within runs of consecutive cells in
    time, a sharp switch hardly counts; a df = 6 spline's residual variance holds it. The same from
    dense, CSR and CSC input, in runs of at least MIN_BIN_CELLS cells and at most MAX_TIME_BINS runs."""
    rng = np.random.default_rng(3)
    times = rng.uniform(0, 2, 3000)
    groups = (times > 1).astype(int) + (times > 1) * rng.integers(0, 2, times.size)
    values = 2.0 / (1 + np.exp(-(times - 0.9) / 0.02))[:, None] + 0.3 * rng.standard_normal((times.size, 40))
    bins = passes.time_bins(times, groups)
    counts = np.bincount(bins)
    assert counts.min() >= passes.MIN_BIN_CELLS and counts.size <= passes.MAX_TIME_BINS
    for b in range(counts.size):  # a run holds one group's cells, consecutive in time
        members = bins == b
        assert np.unique(groups[members]).size == 1
        others = (groups == groups[members][0]) & ~members
        inside = (times[others] > times[members].min()) & (times[others] < times[members].max())
        assert not inside.any()
    basis = splines.spline_basis(times, 10)
    found = [passes.sufficient_statistics(matrix, np.arange(times.size), basis.design(times), groups, 3,
                                           bins=bins).local_variance
             for matrix in (values, sparse.csr_matrix(values), sparse.csc_matrix(values))]
    np.testing.assert_allclose(found[1], found[0], rtol=1e-10)
    np.testing.assert_allclose(found[2], found[0], rtol=1e-10)
    assert np.all(np.abs(found[0] / 0.09 - 1) < 0.1)
    fit = trends.trend_test(values, np.arange(times.size), times, df=6.0)
    residual = np.mean((values - np.stack([np.interp(times, fit.grid, c) for c in fit.curves], axis=1)) ** 2, axis=0)
    assert np.all(residual > 1.3 * 0.09)  # what the null divided the bias by before
