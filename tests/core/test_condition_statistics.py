"""``_core.stats.conditions``: per-unit means, the comparison of conditions, weighted densities."""

import numpy as np
from scipy import stats

from scskeleton._core.stats.conditions import compare_conditions, kernel_width, unit_means, weighted_density


def test_unit_means_weight_the_cells_and_leave_out_those_without_a_unit_or_a_value():
    rng = np.random.default_rng(0)
    values, weights = rng.normal(size=(50, 3)), rng.random((50, 3))
    unit = rng.integers(-1, 4, size=50)
    values[7, 1] = np.nan
    means, totals = unit_means(values, unit, 4, weights=weights)
    keep = (unit >= 0) & np.isfinite(values).all(axis=1)
    for u in range(4):
        rows = keep & (unit == u)
        np.testing.assert_allclose(means[u], (weights[rows] * values[rows]).sum(0) / weights[rows].sum(0))
        np.testing.assert_allclose(totals[u], weights[rows].sum(0))
    plain, counts = unit_means(values, unit, 4)
    np.testing.assert_array_equal(counts[:, 0], [np.sum(keep & (unit == u)) for u in range(4)])


def test_two_conditions_are_compared_by_students_t_and_flat_equal_columns_get_one():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(8, 2))
    values[:, 1] = 0.3  # no spread anywhere, equal means
    groups = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    result = compare_conditions(values, groups, 2)
    expected = stats.ttest_ind(values[groups == 1, 0], values[groups == 0, 0], equal_var=True)
    np.testing.assert_allclose([result.statistic[0], result.pvals[0]], [expected.statistic, expected.pvalue])
    assert result.pvals[1] == 1.0 and result.test == "student_t"
    np.testing.assert_allclose(result.effect[0], values[groups == 1, 0].mean() - values[groups == 0, 0].mean())


def test_a_weighted_density_holds_one_unit_of_area_whatever_its_chunks():
    rng = np.random.default_rng(2)
    values, weights = rng.normal(size=5000), rng.random(5000)
    grid = np.linspace(-6, 6, 400)
    width = kernel_width(values, weights)
    whole = weighted_density(values, weights, grid, width)
    np.testing.assert_allclose(weighted_density(values, weights, grid, width, chunk=333), whole)
    assert abs(np.trapezoid(whole, grid) - 1.0) < 1e-3
    assert not weighted_density(values[:0], weights[:0], grid, width).any()


def test_every_distinct_relabelling_is_enumerated_with_the_observed_first():
    from scskeleton._core.stats.conditions import relabellings

    observed = np.array([1, 0, 2, 0, 1, 2])
    blocks, exhaustive = relabellings(observed, 1000, np.random.default_rng(0))
    labels = np.vstack(list(blocks))
    assert exhaustive and labels.shape == (90, 6)  # 6! / (2! 2! 2!)
    np.testing.assert_array_equal(labels[0], observed)
    assert np.unique(labels, axis=0).shape[0] == 90
    assert (np.sort(labels, axis=1) == np.sort(observed)).all()
    drawn, exhaustive = relabellings(np.repeat([0, 1], 10), 99, np.random.default_rng(0))
    drawn = np.vstack(list(drawn))
    assert not exhaustive and drawn.shape == (100, 20) and (drawn.sum(axis=1) == 10).all()


def test_the_share_spread_is_the_ratio_of_between_to_within_sums_of_squares():
    from scskeleton._core.stats.conditions import share_spread

    rng = np.random.default_rng(2)
    shares = rng.dirichlet([2, 3, 1], 9)
    labels = np.array([rng.permutation(np.repeat([0, 1, 2], 3)) for _ in range(5)])
    found = share_spread(shares, [labels[:2], labels[2:]], 3)
    for row, spread in zip(labels, found):
        means = np.vstack([shares[row == c].mean(axis=0) for c in range(3)])
        between = sum(3 * ((means[c] - shares.mean(axis=0)) ** 2).sum() for c in range(3))
        within = ((shares - means[row]) ** 2).sum()
        np.testing.assert_allclose(spread, between / within)


def test_permutation_p_values_hold_their_level_for_exchangeable_units():
    from scskeleton._core.stats.conditions import permutation_pvalue, relabellings, share_spread

    pvals = []
    for seed in range(400):
        rng = np.random.default_rng(seed)
        shares = rng.dirichlet([3, 2, 1], 10)
        blocks, _ = relabellings(np.repeat([0, 1], 5), 999, rng)
        pvals.append(permutation_pvalue(share_spread(shares, blocks, 2)))
    pvals = np.array(pvals)
    # 126 distinct splits of 5 + 5 units, each seen twice (its mirror): p in steps of 1/126
    for level in (0.05, 0.2, 0.5):
        assert abs(np.mean(pvals <= level) - level) < 3 * np.sqrt(level * (1 - level) / pvals.size)


def test_wilks_test_is_hotellings_t2_for_two_groups():
    from scskeleton._core.stats.condition_trends import wilks_test

    rng = np.random.default_rng(3)
    scores = rng.normal(size=(9, 2, 50))
    labels = np.array([0] * 4 + [1] * 5)
    fstat, pvals = wilks_test(scores, labels, 2)
    for g in (0, 7):
        a, b = scores[labels == 0, :, g], scores[labels == 1, :, g]
        pooled = ((a - a.mean(0)).T @ (a - a.mean(0)) + (b - b.mean(0)).T @ (b - b.mean(0))) / 7
        d = a.mean(0) - b.mean(0)
        t2 = (4 * 5 / 9) * d @ np.linalg.solve(pooled, d)
        f = t2 * (9 - 2 - 1) / (2 * 7)
        np.testing.assert_allclose(fstat[g], f, rtol=1e-10)
        np.testing.assert_allclose(pvals[g], stats.f.sf(f, 2, 6), rtol=1e-10)
    scores[:, :, 3] = 1.0  # no spread: no test
    assert np.isnan(wilks_test(scores, labels, 2)[1][3])


def test_orthonormal_polynomials_are_orthonormal_and_start_with_the_level():
    from scskeleton._core.stats.condition_trends import orthonormal_polynomials

    basis = orthonormal_polynomials(50, 3)
    np.testing.assert_allclose(basis.T @ basis, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(basis[:, 0], 1 / np.sqrt(50))
    assert basis[-1, 1] > 0 > basis[0, 1]
