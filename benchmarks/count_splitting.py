"""Genes that shaped the tree, with and without ``pp.split_counts``.

Counts of :func:`scskeleton._testing.share_balanced_counts` (2,000 cells, two fates, 300 genes
that change in pairs of opposite shares and 700 of constant share: exact null genes of
``normalize_total`` values). Each tree is learned by the README's protocol (``normalize_total``,
``log1p``, 300 highly variable genes, 30 principal components, ``method`` at its defaults, rooted
at the earliest cells) and ``tl.association_test`` runs on the log-normalised values (or, with
``--test-layer pearson``, on the analytic Pearson residuals) of the tested counts:

- ``full``: the tree and the test on all the counts;
- ``split``: the tree on the first half of ``pp.split_counts`` and the test on the second
  (``--dispersion`` passes the generator's φ to the split; ``--binomial`` splits binomially even
  then, to measure what a wrong φ leaves).

Per tree: among the null genes that were among the highly variable genes of the PCA, and among
the others, the share with p < 0.05 and the Kolmogorov–Smirnov p of their p-values against the
uniform; the power (the changing genes with q < 0.05). The figures are in
``docs/methods/trends.md`` (*Genes that shaped the tree*).

Run: python benchmarks/count_splitting.py --methods ddrtree rpg --seeds 10 [--test-layer pearson]
     [--dispersion 0.2 [--binomial]]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc
from scipy import stats

import scskeleton as sks
from scskeleton._testing import fit_on_counts, share_balanced_counts


def lognorm(counts):
    adata = sc.AnnData(counts.copy())
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    return adata.X


def pearson(counts):
    residuals = sc.experimental.pp.normalize_pearson_residuals(sc.AnnData(counts.astype(np.float64)), inplace=False)
    return np.nan_to_num(residuals["X"], nan=0.0)  # a gene without a count in this half has no residual


def null_p_values(seed: int, method: str, *, split: bool, dispersion: float, binomial: bool,
                  test_layer: str) -> dict:
    """The association test's p-values of the null genes in and out of the PCA, and the power."""
    adata = share_balanced_counts(seed, dispersion=dispersion)
    adata.layers["counts"] = adata.X.copy()
    if split:
        sks.pp.split_counts(adata, layer="counts", random_state=seed,
                            dispersion=None if binomial or dispersion == 0 else dispersion)
        tree, test = adata.layers["counts_tree"], adata.layers["counts_test"]
    else:
        tree = test = adata.layers["counts"]
    adata.X = tree.copy()
    fit_on_counts(adata, method, n_top_genes=300)
    adata.layers["test"] = lognorm(test) if test_layer == "lognorm" else pearson(test)
    sks.tl.association_test(adata, method, layer="test")
    pvals = adata.var[f"{method}_association_pval"].to_numpy()
    qvals = adata.var[f"{method}_association_qval"].to_numpy()
    null, in_pca = adata.var["null"].to_numpy(), adata.var["highly_variable"].to_numpy()
    row = {}
    for label, mask in (("in_pca", null & in_pca), ("other", null & ~in_pca)):
        tested = pvals[mask][np.isfinite(pvals[mask])]
        row[f"{label}_n"] = int(tested.size)
        row[f"{label}_p_below_0.05"] = round(float(np.mean(tested < 0.05)), 4)
        row[f"{label}_ks"] = float(f"{stats.kstest(tested, 'uniform').pvalue:.3g}")
    row["power"] = round(float(np.mean(qvals[~null] < 0.05)), 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--dispersion", type=float, default=0.0, help="the generator's negative-binomial φ")
    parser.add_argument("--binomial", action="store_true", help="split binomially whatever the dispersion")
    parser.add_argument("--test-layer", choices=["lognorm", "pearson"], default="lognorm",
                        help="the values tested: log-normalised or Pearson residuals of the tested counts")
    args = parser.parse_args()
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for method in args.methods:
            for split in (False, True):
                row = {"seed": seed, "method": method, "split": split, "dispersion": args.dispersion,
                       "binomial": args.binomial, "test_layer": args.test_layer}
                row.update(null_p_values(seed, method, split=split, dispersion=args.dispersion,
                                         binomial=args.binomial, test_layer=args.test_layer))
                print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
