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

import itertools
import math
from collections.abc import Iterable, Iterator
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


def relabellings(unit_condition: np.ndarray, n_permutations: int, rng: np.random.Generator, *,
                 chunk: int = 64) -> tuple[Iterator[np.ndarray], bool]:
    """Assignments of the units to the conditions that keep each condition's number of units: every
    distinct one where there are at most ``n_permutations``, else ``n_permutations`` drawn at random;
    the observed first. Returns (blocks of at most ``chunk`` relabellings × units, exhaustive): held a
    block at a time, so that cells as units (many) cost memory chunk × cells."""
    unit_condition = np.asarray(unit_condition, dtype=np.intp)
    sizes = np.bincount(unit_condition)
    if _n_assignments(sizes) <= n_permutations:
        every = np.array(list(_assignments(unit_condition.size, sizes)), dtype=np.intp)
        others = every[~(every == unit_condition).all(axis=1)]
        labels = np.vstack([unit_condition, others])
        return (labels[lo:lo + chunk] for lo in range(0, labels.shape[0], chunk)), True

    def drawn():
        yield unit_condition[None, :]
        for lo in range(0, n_permutations, chunk):
            yield np.array([rng.permutation(unit_condition) for _ in range(min(chunk, n_permutations - lo))])

    return drawn(), False


def _n_assignments(sizes: np.ndarray) -> int:
    """The multinomial coefficient: ways to deal the units into conditions of these sizes."""
    total, count = 0, 1
    for size in sizes:
        total += int(size)
        count *= math.comb(total, int(size))
    return count


def _assignments(n_units: int, sizes: np.ndarray):
    """Every labelling of ``n_units`` units with ``sizes[c]`` units of condition c."""
    def fill(free: tuple, condition: int, labels: list):
        if condition == len(sizes) - 1:
            for unit in free:
                labels[unit] = condition
            yield list(labels)
            return
        for chosen in itertools.combinations(free, int(sizes[condition])):
            for unit in chosen:
                labels[unit] = condition
            rest = tuple(unit for unit in free if unit not in chosen)
            yield from fill(rest, condition + 1, labels)

    yield from fill(tuple(range(n_units)), 0, [0] * n_units)


def share_spread(shares: np.ndarray, blocks: Iterable[np.ndarray], n_conditions: int) -> np.ndarray:
    """For each labelling (the rows of ``blocks``, relabellings × units) of the units' ``shares``
    (units × branches), the spread of the conditions' mean shares against the spread within them:
    Σ_b Σ_c n_c (m̄_cb − m̄_b)² / Σ_b Σ_u (s_ub − m̄_c(u)b)², over the branches (inf where the
    conditions differ and nothing varies within them, 0 where nothing varies at all).

    Read from each condition's sums alone: Σ s² and the grand sums do not depend on the labels."""
    shares = np.asarray(shares, dtype=float)
    total_sq = float((shares**2).sum())
    grand = float((shares.sum(axis=0) ** 2).sum()) / shares.shape[0]
    explained = []
    for block in blocks:
        part = np.zeros(block.shape[0])
        for c in range(n_conditions):
            member = (block == c).astype(float)
            sums = member @ shares  # labellings × branches
            part += (sums**2).sum(axis=1) / member.sum(axis=1)
        explained.append(part)
    explained = np.concatenate(explained)
    between = np.maximum(explained - grand, 0.0)
    within = np.maximum(total_sq - explained, 0.0)
    tiny = 1e-12 * max(total_sq, np.finfo(float).tiny)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(within > tiny, between / within, np.where(between > tiny, np.inf, 0.0))


def permutation_pvalue(statistics: np.ndarray) -> float:
    """The share of relabellings (``statistics[0]`` the observed) whose statistic is at least the
    observed one: exact over every distinct relabelling, and valid over random ones."""
    # the observed labelling is one of the distinct ones, and the drawn ones count it in beside
    # themselves (Phipson & Smyth 2010): either way (1 + those beyond) / (1 + the others)
    at_least = np.sum(statistics[1:] >= statistics[0] * (1 - 1e-12))
    return float((1 + at_least) / statistics.size)
