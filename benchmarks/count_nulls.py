"""Calibration of ``tl.branch_test`` and ``tl.fork_test`` on the null genes of the counts themselves.

``benchmarks/branch_calibration.py`` reads appended Gaussian curves of the true time as its shared
genes. Here the null genes are those of ``sks.datasets.simulate_trajectory`` that change on neither
fate branch (``varm["true_lfc"]`` and ``varm["true_transient"]`` zero on both branches below the
fork; 2 fates): count genes, lowly and highly expressed, among them the "trunk genes" that change
before the fork and keep their level past it. The tree is learned by the documented protocol
(:func:`scskeleton._testing.fit_on_counts`), both tests run at their defaults at the learned fork.

Per tree: the share of the null genes flagged at FDR 0.05 and the share with p < 0.05, over the
expressed ones (true base mean ≥ 1 count) and over the trunk genes. Trees without exactly one
branch point are reported and skipped. The figures are in ``docs/methods/trends.md`` (*Genes of
the counts that do not part*).

Run: python benchmarks/count_nulls.py --methods ddrtree rpg --seeds 3 [--dropout 0.3]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc

import scskeleton as sks
from scskeleton._testing import fit_on_counts

TESTS = {"branch": sks.tl.branch_test, "fork": sks.tl.fork_test}


def null_genes(adata) -> tuple[np.ndarray, np.ndarray]:
    """Genes unchanged on every branch below the fork, and those of them that change on the trunk."""
    parent = np.asarray(adata.uns["simulate_trajectory"]["branch_parent"])
    below, trunk = parent >= 0, parent < 0
    changes = (adata.varm["true_lfc"] != 0) | (adata.varm["true_transient"] != 0)
    null = ~changes[:, below].any(axis=1)
    return null, null & changes[:, trunk].any(axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--dropout", type=float, default=0.0, help="simulate_trajectory's dropout")
    args = parser.parse_args()
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    for method in args.methods:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            adata = sks.datasets.simulate_trajectory(2000, n_fates=2, dropout=args.dropout, random_state=seed)
            null, trunk = null_genes(adata)
            expressed = null & (adata.var["true_base_mean"].to_numpy() >= 1)
            fit_on_counts(adata, method)
            forks = adata.uns[method]["branch_points"]
            row = {"method": method, "seed": seed, "dropout": args.dropout}
            if len(forks) != 1:
                print(json.dumps({**row, "skipped": f"{len(forks)} branch points"}), flush=True)
                continue
            row.update(n_null=int(null.sum()), n_expressed=int(expressed.sum()), n_trunk=int(trunk.sum()))
            for name, test in TESTS.items():
                test(adata, method, branch_point=int(forks[0]), key_added="null_check")
                pvals = adata.var["null_check_pval"].to_numpy()
                qvals = adata.var["null_check_qval"].to_numpy()
                for label, mask in (("expressed", expressed), ("trunk", trunk)):
                    row[f"{name}_{label}_flagged"] = round(float(np.mean(qvals[mask] < 0.05)), 4)
                    tested = pvals[mask][np.isfinite(pvals[mask])]  # NaN: a gene with no cell on a branch
                    row[f"{name}_{label}_p_below_0.05"] = round(float(np.mean(tested < 0.05)), 4)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
