"""What the tests of the condition tools share: the null data sets and the check of a test's level."""

import warnings

import numpy as np
from scipy import stats

from scskeleton._testing import conditions_with_fates

#: Data sets a setting: enough for one fate's p-values to show a miscalibration of a few per cent.
N_NULL = 40


def null_data_set(seed: int, samples_per_condition: int = 3):
    return conditions_with_fates(seed, samples_per_condition=samples_per_condition, sample_sd=0.5)


def pvalues(fits, tool, **kwargs) -> np.ndarray:
    """Every column's p-value of ``tool`` on every data set (data sets × 8, NaN where a tree has fewer
    fates)."""
    found = np.full((len(fits), 8), np.nan)
    for row, adata in enumerate(fits):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # without sample= the tools warn that cells stand in for samples
            tool(adata, "rpg", condition="condition", key_added="compared", **kwargs)
        pvals = adata.uns["compared"]["pval"]
        found[row, : pvals.size] = pvals
    return found


def holds_the_level(pvals: np.ndarray) -> None:
    """The false-positive rate at 0.05 within two binomial standard errors of it, and the p-values of
    one column a data set (independent draws; a tree's fates share one composition) uniform."""
    pooled = pvals[np.isfinite(pvals)]
    rate = np.mean(pooled < 0.05)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / pooled.size), rate
    assert stats.kstest(pvals[:, 0], "uniform").pvalue > 0.01


def inflated_without_samples(fits, tool) -> None:
    """Cells as replicates give many false positives where samples differ; samples as replicates few."""
    by_cell, by_sample = pvalues(fits, tool), pvalues(fits, tool, sample="sample")
    by_cell, by_sample = by_cell[np.isfinite(by_cell)], by_sample[np.isfinite(by_sample)]
    assert np.mean(by_cell < 0.05) > 0.3 > 3 * np.mean(by_sample < 0.05)
