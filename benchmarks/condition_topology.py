"""Calibration and power of ``tl.condition_topology`` on ``simulate_trajectory`` with conditions.

For each setting (samples per condition, an effect on the last condition) it generates data sets
with sample-to-sample variation of the branch shares, fits a principal tree rooted at the true
root and tests every fork between the conditions, by samples and, to show what ignoring them
does, by cells. Under the null it prints the share of forks with p < 0.05 and the KS p-value of the
first fork of each data set against the uniform (discrete: the p-values of 3 samples a condition
take 10 values, which the KS test reads as non-uniform however they are drawn); under
``missing_fate`` (a fate the last condition lacks) the power is the share of data sets where the
fork whose branch the condition's cells reach least has p < 0.05, and under ``fate_shift`` the
share of data sets with some fork at p < 0.05. A learned tree without a fork is left out of the null
and counts as not found under an effect.

    python benchmarks/condition_topology.py --datasets 40
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import scanpy as sc
from scipy import stats

import scskeleton as sks
from scskeleton._testing import conditions_with_fates

#: Cells a sample (the data sets grow with the samples, as experiments do).
CELLS_PER_SAMPLE = 200


def one_data_set(seed: int, *, samples: int, effect: dict) -> tuple:
    adata = conditions_with_fates(seed, n_cells=CELLS_PER_SAMPLE * 2 * samples, n_fates=3,
                                  samples_per_condition=samples, sample_sd=0.3, **effect)
    if not len(adata.uns["rpg"]["branch_points"]):
        return None  # a learned tree without a fork: nothing to test (left out, or counted as not found)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 3 samples: the least p-value is 0.1; by cell: pseudo-replication
        sks.tl.condition_topology(adata, "rpg", condition="condition", sample="sample", key_added="by_sample")
        sks.tl.condition_topology(adata, "rpg", condition="condition", key_added="by_cell")
    entry = adata.uns["by_sample"]
    # the fork of the missing fate: the one with a branch the last condition reaches least
    least_reach = [np.nanmin(entry["reach"][str(node)][-1]) for node in entry["fork_nodes"]]
    return entry["pval"], adata.uns["by_cell"]["pval"], int(np.argmin(least_reach))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=40)
    parser.add_argument("--power-datasets", type=int, default=20)
    args = parser.parse_args(argv)
    sc.settings.verbosity = 0
    print("| samples | effect | FPR or power by sample | by cell | KS p, first fork (null) |")
    print("|---|---|---|---|---|")
    for samples in (3, 5, 10):
        runs = [r for r in (one_data_set(seed, samples=samples, effect={}) for seed in range(args.datasets)) if r]
        by_sample = np.concatenate([r[0] for r in runs])
        by_cell = np.concatenate([r[1] for r in runs])
        ks = stats.kstest([r[0][0] for r in runs], "uniform").pvalue
        print(f"| {samples} | none | {np.nanmean(by_sample < 0.05):.3f} | {np.nanmean(by_cell < 0.05):.3f} | "
              f"{ks:.3f} |", flush=True)
        for label, effect in (("fate_shift 0.1", {"fate_shift": 0.1}), ("fate_shift 0.2", {"fate_shift": 0.2}),
                              ("missing fate_2", {"missing_fate": "fate_2"})):
            runs = [one_data_set(100 + seed, samples=samples, effect=effect) or (np.ones(1), np.ones(1), 0)
                    for seed in range(args.power_datasets)]
            if "missing_fate" in effect:
                power = np.mean([r[0][r[2]] < 0.05 for r in runs])
                cells = np.mean([r[1][r[2]] < 0.05 for r in runs])
            else:
                power = np.mean([np.nanmin(r[0]) < 0.05 for r in runs])
                cells = np.mean([np.nanmin(r[1]) < 0.05 for r in runs])
            print(f"| {samples} | {label} | {power:.2f} | {cells:.2f} | |", flush=True)


if __name__ == "__main__":
    main()
