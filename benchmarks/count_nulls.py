"""Calibration of ``tl.branch_test`` and ``tl.fork_test`` on the null genes of the counts themselves.

``benchmarks/branch_calibration.py`` reads appended Gaussian curves of the true time as its shared
genes. Here the null genes are those of ``sks.datasets.simulate_trajectory`` that change on neither
fate branch (``varm["true_lfc"]`` and ``varm["true_transient"]`` zero on both branches below the
fork; 2 fates): count genes, lowly and highly expressed, among them the "trunk genes" that change
before the fork and keep their level past it. The tree is learned by the documented protocol
(:func:`scskeleton._testing.fit_on_counts`), both tests run at their defaults at the learned fork.

Per tree: the share of the null genes flagged at FDR 0.05 and the share with p < 0.05, over the
expressed ones (true base mean ≥ 1 count) and over the trunk genes, how many branches the
learned fork has (the truth: 2), and the power: the share of the expressed genes that change on a
fate branch (``true_program`` "branch") called at FDR 0.05. Unlike ``branch_calibration.py``, no
genes that follow the true time are appended, so the warp reads the counts' own genes alone. Trees
without exactly one branch point are reported and skipped.

The genes are null in their counts' mean, not in every scale they are tested on, so each tree is
tested on five layers (``--layers``):

- ``lognorm``: ``normalize_total`` + ``log1p``, the protocol's values;
- ``lognorm_depth``: the same with each gene's linear dependence on the log total count removed
  (least squares over the cells, mean kept): the log of a few counts depends on the cell's depth,
  and a learned pseudotime may too;
- ``own_total``: counts scaled by the cell's total over the null genes alone, then ``log1p``: the
  null genes' share of a cell's counts falls where other genes rise (the generator's docstring),
  and here it cannot;
- ``own_total_depth``: both;
- ``pearson``: analytic Pearson residuals of the counts (``sc.experimental.pp.normalize_pearson_residuals``,
  the README's advice for gene tests on counts; a gene without a count gets 0), whose expected
  count follows the cell's total, so the depth is taken out but not the composition.

The figures are in ``docs/methods/trends.md`` (*Genes of the counts that do not part*).

Run: python benchmarks/count_nulls.py --methods ddrtree rpg --seeds 3 [--dropout 0.3]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc
from scipy import sparse

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


def depth_free(values, log_depth: np.ndarray) -> np.ndarray:
    """``values`` (cells × genes) less each gene's least-squares line in ``log_depth``, means kept."""
    dense = values.toarray() if sparse.issparse(values) else np.asarray(values, dtype=np.float64)
    centred = log_depth - log_depth.mean()
    slope = centred @ (dense - dense.mean(axis=0)) / (centred @ centred)
    return dense - np.outer(centred, slope)


def log_scaled(counts, totals: np.ndarray):
    """``log1p`` of the counts scaled to the median of ``totals``."""
    scaled = sparse.diags(np.median(totals) / totals) @ sparse.csr_matrix(counts, dtype=np.float64)
    scaled.data = np.log1p(scaled.data)
    return sparse.csr_matrix(scaled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--dropout", type=float, default=0.0, help="simulate_trajectory's dropout")
    parser.add_argument("--layers", nargs="+",
                        default=["lognorm", "lognorm_depth", "own_total", "own_total_depth", "pearson"])
    args = parser.parse_args()
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    for method in args.methods:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            adata = sks.datasets.simulate_trajectory(2000, n_fates=2, dropout=args.dropout, random_state=seed)
            null, trunk = null_genes(adata)
            expressed = null & (adata.var["true_base_mean"].to_numpy() >= 1)
            fate_genes = (adata.var["true_program"].eq("branch") & ~adata.var["true_branch"].isin(["", "branch_0"])
                          & (adata.var["true_base_mean"] >= 1)).to_numpy()
            counts = sparse.csr_matrix(adata.X)
            totals = np.asarray(counts.sum(axis=1)).ravel()
            own_totals = np.asarray(counts[:, null].sum(axis=1)).ravel()
            fit_on_counts(adata, method)
            layers = {"lognorm": None, "lognorm_depth": depth_free(adata.X, np.log(totals)),
                      "own_total": log_scaled(counts, own_totals)}
            layers["own_total_depth"] = depth_free(layers["own_total"], np.log(own_totals))
            residuals = sc.experimental.pp.normalize_pearson_residuals(
                sc.AnnData(counts.astype(np.float64)), inplace=False)["X"]
            layers["pearson"] = np.nan_to_num(residuals, nan=0.0)
            for name in args.layers:
                if layers[name] is not None:
                    adata.layers[name] = layers[name]
            forks = adata.uns[method]["branch_points"]
            row = {"method": method, "seed": seed, "dropout": args.dropout}
            if len(forks) != 1:
                print(json.dumps({**row, "skipped": f"{len(forks)} branch points"}), flush=True)
                continue
            row.update(n_null=int(null.sum()), n_expressed=int(expressed.sum()), n_trunk=int(trunk.sum()))
            for layer in args.layers:
                for name, test in TESTS.items():
                    test(adata, method, branch_point=int(forks[0]), key_added="null_check",
                         layer=None if layer == "lognorm" else layer)
                    row["fork_branches"] = len(adata.uns["null_check"]["branches"])
                    pvals = adata.var["null_check_pval"].to_numpy()
                    qvals = adata.var["null_check_qval"].to_numpy()
                    row[f"{layer}_{name}_power"] = round(float(np.mean(qvals[fate_genes] < 0.05)), 4)
                    for label, mask in (("expressed", expressed), ("trunk", trunk)):
                        row[f"{layer}_{name}_{label}_flagged"] = round(float(np.mean(qvals[mask] < 0.05)), 4)
                        tested = pvals[mask][np.isfinite(pvals[mask])]  # NaN: a gene with no cell on a branch
                        row[f"{layer}_{name}_{label}_p_below_0.05"] = round(float(np.mean(tested < 0.05)), 4)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
