"""Comparing conditions with samples as replicates: per-unit summaries of the cells and a test of
their means between conditions.

The unit of replication is what varies independently between conditions: the sample (a mouse, a
donor, a culture), not the cell, whose neighbours in one sample share that sample's deviation.
Each unit's summary is the mean of its cells' values; under the null of exchangeable conditions
the units' summaries of one condition are draws from one distribution, and their means are
compared by Student's t test (two conditions) or the one-way analysis of variance (more). Both
pool the variance within conditions, which is what exchangeable conditions imply; Welch's
unpooled t is conservative at three units a condition (level 0.034 for 0.05).
With as few as three units a condition the test leans on the units' summaries being roughly
normal, which holds for means over many cells (central limit) and is checked by the calibration
tests. The weighted kernel densities at the end draw a condition's cells along a lineage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse, stats


def unit_means(values: np.ndarray, unit_of_cell: np.ndarray, n_units: int,
               weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Mean of ``values`` (cells × columns) over the cells of every unit, weighted by ``weights``
    (cells × columns, e.g. each cell's probability of a lineage) when given; and each unit's total
    weight (its cell count without weights), per column.

    Cells with a unit code below 0, or with a missing value or weight in any column, count for no
    unit; a unit without weight in a column has a NaN mean there.
    """
    values = np.asarray(values, dtype=float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)
    keep = (unit_of_cell >= 0) & np.isfinite(values).all(axis=1) & np.isfinite(weights).all(axis=1)
    rows = np.flatnonzero(keep)
    member = sparse.csr_matrix((np.ones(rows.size), (unit_of_cell[rows], rows)), shape=(n_units, values.shape[0]))
    weights = np.where(keep[:, None], weights, 0.0)
    totals = member @ weights
    sums = member @ (weights * np.where(keep[:, None], values, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, sums / totals, np.nan), totals


@dataclass(frozen=True)
class ConditionComparison:
    """The comparison of the units' means between conditions, one entry per column."""

    #: Conditions × columns: the mean of the units' values in each condition.
    means: np.ndarray
    #: Student's t (two conditions, the second minus the first) or the ANOVA F.
    statistic: np.ndarray
    pvals: np.ndarray
    #: The second condition's mean minus the first's (two conditions), else the largest minus the smallest.
    effect: np.ndarray
    #: ``"student_t"`` or ``"anova_f"``.
    test: str


def compare_conditions(values: np.ndarray, condition_of_unit: np.ndarray, n_conditions: int) -> ConditionComparison:
    """Test, column by column, whether the units' ``values`` (units × columns) have one mean in every
    condition. A column without any spread within the conditions gets p = 1 when its means agree."""
    values = np.asarray(values, dtype=float)
    groups = [values[condition_of_unit == c] for c in range(n_conditions)]
    means = np.vstack([g.mean(axis=0) for g in groups])
    # a column without any spread within the conditions has no test statistic: equal means are no
    # evidence of a difference (p = 1), unequal ones are (p = 0)
    spread = ~np.all([g.std(axis=0) == 0 for g in groups], axis=0)
    differ = np.ptp(means, axis=0) > 0
    statistic = np.where(differ, np.inf, 0.0)
    pvals = np.where(differ, 0.0, 1.0)
    test = "student_t" if n_conditions == 2 else "anova_f"
    if spread.any():
        varying = [g[:, spread] for g in groups]
        with np.errstate(invalid="ignore", divide="ignore"):
            if n_conditions == 2:
                result = stats.ttest_ind(varying[1], varying[0], axis=0, equal_var=True)
            else:
                result = stats.f_oneway(*varying, axis=0)
        statistic[spread], pvals[spread] = result.statistic, result.pvalue
    effect = means[1] - means[0] if n_conditions == 2 else means.max(axis=0) - means.min(axis=0)
    return ConditionComparison(means, statistic, pvals, effect, test)


def weighted_density(values: np.ndarray, weights: np.ndarray, grid: np.ndarray, width: float,
                     *, chunk: int = 50_000) -> np.ndarray:
    """The weighted Gaussian kernel density of ``values`` on ``grid``, kernel width ``width``; zero
    without weight. Summed over ``chunk`` values at a time, so memory stays grid × chunk."""
    total = weights.sum()
    if values.size == 0 or total <= 0:
        return np.zeros_like(grid)
    density = np.zeros_like(grid, dtype=float)
    for lo in range(0, values.size, chunk):
        kernel = np.exp(-0.5 * ((grid[:, None] - values[None, lo:lo + chunk]) / width) ** 2)
        density += kernel @ weights[lo:lo + chunk]
    return density / (total * width * np.sqrt(2 * np.pi))


def kernel_width(values: np.ndarray, weights: np.ndarray) -> float:
    """Scott's rule for weighted values: their weighted spread times n_eff^(-1/5), n_eff Kish's size."""
    total = weights.sum()
    mean = weights @ values / total
    spread = np.sqrt(weights @ (values - mean) ** 2 / total)
    n_eff = total**2 / (weights @ weights)
    return float(max(spread, 1e-12) * n_eff ** (-0.2))
