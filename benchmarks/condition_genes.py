"""Calibration and power of ``tl.condition_test`` on ``simulate_trajectory`` with conditions.

For each setting (samples per condition, each sample's own expression offsets) it generates data
sets, fits a principal tree rooted at the true root and tests the genes along a lineage between the
conditions, by samples and, to show what ignoring them does, by cells. Under the null (no gene
changed) it prints the share of p-values below 0.05 over every gene of the first lineage of every
data set (its longest lineage), and their Kolmogorov–Smirnov p-value against the uniform; with ``condition_genes`` the
power: the share of changed genes with p < 0.05 on a lineage through their branch (the learned
lineage that most of the branch's cells lie on), by the size of the change (its log-fold amplitude).

    python benchmarks/condition_genes.py --datasets 20
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import scanpy as sc
from scipy import stats

import scskeleton as sks
from scskeleton._testing import conditions_with_fates
from scskeleton.tl.genes.selection import lineage_cells

#: Cells a sample (the data sets grow with the samples, as experiments do).
CELLS_PER_SAMPLE = 200
#: Bins of the changed genes' log-fold amplitude, for the power curve.
SIZES = ((0.0, 1.0), (1.0, 1.5), (1.5, np.inf))


def tested(adata, lineage: str, *, sample: bool) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the by-cell comparison warns that it ignores the samples
        sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample" if sample else None,
                              lineage=lineage, key_added="test")
    return adata.var["test_pval"].to_numpy()


def lineage_of_branch(adata, branch: str) -> str:
    """The learned lineage (its tip) through the segment that most cells of the true ``branch`` lie on."""
    segments = adata.obs.loc[adata.obs["true_branch"] == branch, "rpg_segment"].astype(str)
    segment = segments.value_counts().index[0]
    for chain in adata.uns["rpg_condition_tips"]:
        if segment in chain[1]:
            return chain[0]
    return adata.uns["rpg_condition_tips"][0][0]


def one_data_set(seed: int, *, samples: int, offsets: float, changed: float):
    adata = conditions_with_fates(seed, n_cells=CELLS_PER_SAMPLE * 2 * samples, n_genes=300, n_fates=2,
                                  samples_per_condition=samples,
                                  sample_expression_sd=offsets, condition_genes=changed)
    entry = adata.uns["rpg"]
    chains = lineage_cells(adata, "rpg").chains
    ends = {int(np.asarray(entry["segments"][c[-1]])[-1]): c for c in chains}
    names = dict(zip(np.asarray(entry["milestones"]["nodes"]).tolist(), entry["milestones"]["names"]))
    segment = adata.obs["rpg_segment"].astype(str)
    size = {node: int(segment.isin(chain).sum()) for node, chain in ends.items()}
    # the longest lineages first: a root inside the tree leaves a short one towards its nearest tip
    adata.uns["rpg_condition_tips"] = [(names[node], ends[node]) for node in sorted(ends, key=lambda n: -size[n])]
    if not changed:
        tip = adata.uns["rpg_condition_tips"][0][0]
        return tested(adata, tip, sample=True), tested(adata, tip, sample=False)
    genes = np.flatnonzero(adata.var["true_condition_branch"].to_numpy() != "")
    found = {}
    out = []
    for gene in genes:
        tip = lineage_of_branch(adata, adata.var["true_condition_branch"].iloc[gene])
        if tip not in found:
            try:
                found[tip] = tested(adata, tip, sample=True)
            except ValueError:  # a lineage too short for every sample's curve (counted as not found)
                found[tip] = np.ones(adata.n_vars)
        out.append((abs(adata.var["true_condition_effect"].iloc[gene]), found[tip][gene]))
    return np.array(out).reshape(-1, 2)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=20)
    parser.add_argument("--power-datasets", type=int, default=10)
    args = parser.parse_args(argv)
    sc.settings.verbosity = 0
    print("| samples | offsets sd | FPR by sample | by cell | KS p by sample (pooled) |")
    print("|---|---|---|---|---|")
    for samples in (3, 10):
        for offsets in (0.0, 0.1):
            runs = [one_data_set(seed, samples=samples, offsets=offsets, changed=0.0) for seed in range(args.datasets)]
            by_sample = np.concatenate([r[0] for r in runs])
            by_cell = np.concatenate([r[1] for r in runs])
            ks = stats.kstest(by_sample, "uniform").pvalue
            print(f"| {samples} | {offsets} | {np.mean(by_sample < 0.05):.3f} | {np.mean(by_cell < 0.05):.3f} | "
                  f"{ks:.3f} |", flush=True)
    print()
    print("| samples | offsets sd | " + " | ".join(f"power, amplitude {lo}–{hi}" for lo, hi in SIZES) + " |")
    print("|---|---|" + "---|" * len(SIZES))
    for samples in (3, 5, 10):
        for offsets in (0.0, 0.1):
            found = np.vstack([one_data_set(100 + seed, samples=samples, offsets=offsets, changed=0.1)
                               for seed in range(args.power_datasets)])
            cells = []
            for lo, hi in SIZES:
                inside = (found[:, 0] >= lo) & (found[:, 0] < hi)
                cells.append(f"{np.mean(found[inside, 1] < 0.05):.2f} ({inside.sum()})" if inside.any() else "–")
            print(f"| {samples} | {offsets} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
