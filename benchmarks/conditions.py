"""Calibration and power of ``tl.condition_fates`` and ``tl.condition_progression`` on
``simulate_trajectory`` with conditions.

For each setting (samples per condition, sample-to-sample variation, shift of the first fate's
share) it generates data sets, fits a principal tree, roots it at the true root, computes fate
probabilities and compares the conditions by samples and, to show what ignoring the samples does,
by cells. It prints one row a setting: the share of p-values below 0.05 (all fates pooled), the
Kolmogorov–Smirnov p-value of one fate a data set against the uniform (the fates of one tree share
a composition, so their p-values are not independent), and under an effect the power: for a
shift of the first fate's share, the share of data sets where the learned fate that follows it
has p < 0.05; for a delay, the share of the lineages with p < 0.05.

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


def one_data_set(seed: int, *, tool: str, samples: int, sample_sd: float, effect: float) -> tuple:
    """By-sample and by-cell p-values of one data set, and the columns that carry the effect."""
    effects = {"fate_shift": effect} if tool == "fates" else {"delay": effect}
    adata = conditions_with_fates(seed, samples_per_condition=samples, sample_sd=sample_sd, **effects)
    function = sks.tl.condition_fates if tool == "fates" else sks.tl.condition_progression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the by-cell comparison warns that it ignores the samples
        function(adata, "rpg", condition="condition", sample="sample", key_added="by_sample")
        function(adata, "rpg", condition="condition", key_added="by_cell")
    by_sample, by_cell = adata.uns["by_sample"]["pval"], adata.uns["by_cell"]["pval"]
    carriers = [following_fate(adata, "fate_1")] if tool == "fates" else list(range(by_sample.size))
    return by_sample, by_cell, carriers


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=40)
    parser.add_argument("--tool", choices=("fates", "progression"), default="fates")
    args = parser.parse_args(argv)
    sc.settings.verbosity = 0
    effect = "fate_shift" if args.tool == "fates" else "delay"
    print(f"| samples | sample_sd | {effect} | FPR or power by sample | by cell | KS p (one column a data set) |")
    print("|---|---|---|---|---|---|")
    for samples in (3, 10):
        for sample_sd in (0.25, 0.5):
            for size in (0.0, 0.05, 0.1, 0.2):
                runs = [one_data_set(seed, tool=args.tool, samples=samples, sample_sd=sample_sd, effect=size)
                        for seed in range(args.datasets)]
                if size == 0:
                    by_sample = np.concatenate([r[0] for r in runs])
                    by_cell = np.concatenate([r[1] for r in runs])
                    ks = stats.kstest([r[0][0] for r in runs], "uniform").pvalue
                    print(f"| {samples} | {sample_sd} | 0 | {np.mean(by_sample < 0.05):.3f} | "
                          f"{np.mean(by_cell < 0.05):.3f} | {ks:.2f} |")
                else:
                    power = np.mean([np.mean(r[0][r[2]] < 0.05) for r in runs])
                    cells = np.mean([np.mean(r[1][r[2]] < 0.05) for r in runs])
                    print(f"| {samples} | {sample_sd} | {size} | {power:.2f} | {cells:.2f} | |")


if __name__ == "__main__":
    main()
