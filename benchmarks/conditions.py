"""Calibration and power of ``tl.condition_fates`` on ``simulate_trajectory`` with conditions.

For each setting (samples per condition, sample-to-sample variation, shift of the first fate's
share) it generates data sets, fits a principal tree, roots it at the true root, computes fate
probabilities and compares the conditions by samples and, to show what ignoring the samples does,
by cells. It prints one row a setting: the share of p-values below 0.05 (all fates pooled), the
Kolmogorov–Smirnov p-value of one fate a data set against the uniform (the fates of one tree share
a composition, so their p-values are not independent), and under a shift the power for the
learned fate that follows the shifted one.

    python benchmarks/conditions.py --datasets 40
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import scanpy as sc
from scipy import stats

import scskeleton as sks
from scskeleton._testing import conditions_with_fates, following_fate


def one_data_set(seed: int, *, samples: int, sample_sd: float, fate_shift: float) -> tuple:
    """By-sample and by-cell p-values of one data set, and the learned fate that follows the shifted one."""
    adata = conditions_with_fates(seed, samples_per_condition=samples, sample_sd=sample_sd, fate_shift=fate_shift)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the by-cell comparison warns that it ignores the samples
        sks.tl.condition_fates(adata, "rpg", condition="condition", sample="sample", key_added="by_sample")
        sks.tl.condition_fates(adata, "rpg", condition="condition", key_added="by_cell")
    return adata.uns["by_sample"]["pval"], adata.uns["by_cell"]["pval"], following_fate(adata, "fate_1")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=40)
    args = parser.parse_args(argv)
    sc.settings.verbosity = 0
    print("| samples | sample_sd | fate_shift | FPR or power by sample | by cell | KS p (one fate a data set) |")
    print("|---|---|---|---|---|---|")
    for samples in (3, 10):
        for sample_sd in (0.25, 0.5):
            for fate_shift in (0.0, 0.05, 0.1, 0.2):
                runs = [one_data_set(seed, samples=samples, sample_sd=sample_sd, fate_shift=fate_shift)
                        for seed in range(args.datasets)]
                if fate_shift == 0:
                    by_sample = np.concatenate([r[0] for r in runs])
                    by_cell = np.concatenate([r[1] for r in runs])
                    ks = stats.kstest([r[0][0] for r in runs], "uniform").pvalue
                    print(f"| {samples} | {sample_sd} | 0 | {np.mean(by_sample < 0.05):.3f} | "
                          f"{np.mean(by_cell < 0.05):.3f} | {ks:.2f} |")
                else:
                    power = np.mean([r[0][r[2]] < 0.05 for r in runs])
                    cells = np.mean([r[1][r[2]] < 0.05 for r in runs])
                    print(f"| {samples} | {sample_sd} | {fate_shift} | {power:.2f} | {cells:.2f} | |")


if __name__ == "__main__":
    main()
