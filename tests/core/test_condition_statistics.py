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
