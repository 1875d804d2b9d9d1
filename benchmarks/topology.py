"""Topology recovery with default parameters on `sks.datasets.simulate_trajectory`.

For each seed × number of fates × number of cells: counts → normalize_total → log1p →
highly variable genes (1,000) → PCA (30, or ``--n-pcs``) → learner with defaults → root at the cells of
lowest true pseudotime → pseudotime. Reports branch points (truth: fates − 1),
pseudotime Spearman, segment ARI against the true branches, the gap-edge count and
wall time, and beside the ARI a *supervised ceiling*: a 30-nearest-neighbour classifier
handed the true branch labels and scored by 5-fold cross-validation on the same PCA. Near a fork the branches are still one cloud of noise, so no method,
supervised or not, can tell their cells apart; the ceiling says how much ARI the data allow.

Run: python benchmarks/topology.py --seeds 10 --fates 2 3 4 5 --cells 1000 10000
Small deep counts (full-length-like): --cells 100 200 300 500 --fates 1 2 3 --seeds 5 --library-size 1e6 --dispersion 0.05
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import scanpy as sc
from scipy.stats import spearmanr
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import cross_val_predict
from sklearn.neighbors import KNeighborsClassifier

import scskeleton as sks


def prepare(n_cells: int, n_fates: int, seed: int, n_pcs: int = 30, scale: bool = False, **counts):
    # the default uneven density needs at least 125 cells
    density = "uniform" if n_cells < 125 else "uneven"
    adata = sks.datasets.simulate_trajectory(n_cells, n_fates=n_fates, random_state=seed, density=density, **counts)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    if scale:  # scanpy's tutorials scale the highly variable genes to unit variance before PCA
        adata = adata[:, adata.var["highly_variable"]].copy()
        sc.pp.scale(adata, max_value=10)
    sc.pp.pca(adata, n_comps=n_pcs, mask_var="highly_variable")
    return adata


def ceiling(adata) -> dict:
    """The segment ARI a supervised 30-NN classifier reaches, cross-validated, on the same PCA."""
    x = adata.obsm["X_pca"]
    branch = adata.obs["true_branch"].astype(str).to_numpy()
    predicted_branch = cross_val_predict(KNeighborsClassifier(30), x, branch, cv=5)
    return {"ceiling_ari": float(adjusted_rand_score(branch, predicted_branch))}


def evaluate(adata, method: str) -> dict:
    start = time.perf_counter()
    getattr(sks.tl, method)(adata)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    seconds = time.perf_counter() - start
    entry = adata.uns[method]
    return {
        "branch_points": int(len(entry["branch_points"])),
        "spearman": float(spearmanr(adata.obs["true_pseudotime"], adata.obs[f"{method}_pseudotime"], nan_policy="omit")[0]),
        "ari": float(adjusted_rand_score(adata.obs["true_branch"], adata.obs[f"{method}_segment"])),
        "gap_edges": int(len(entry.get("gap_edges", []))),
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--fates", nargs="+", type=int, default=[2, 3, 4, 5])
    parser.add_argument("--cells", nargs="+", type=int, default=[1000, 10000])
    parser.add_argument("--n-pcs", type=int, default=30, help="principal components computed (scanpy's default: 50)")
    parser.add_argument("--scale", action="store_true", help="scale the genes before PCA (sc.pp.scale)")
    parser.add_argument("--library-size", type=float, default=None,
                        help="mean counts per cell (full-length-like deep data: 1e6)")
    parser.add_argument("--dispersion", type=float, default=None, help="negative-binomial dispersion of the counts")
    parser.add_argument("--out", default=None, help="write every run as JSON lines here")
    args = parser.parse_args()
    counts = {name: value for name, value in (("library_size", args.library_size), ("dispersion", args.dispersion))
              if value is not None}
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    rows = []
    for n_cells in args.cells:
        for n_fates in args.fates:
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                adata = prepare(n_cells, n_fates, seed, args.n_pcs, args.scale, **counts)
                best = ceiling(adata)
                for method in args.methods:
                    result = evaluate(adata.copy(), method)
                    result.update(method=method, cells=n_cells, fates=n_fates, seed=seed, **best)
                    rows.append(result)
                    print(json.dumps(result), flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.writelines(json.dumps(r) + "\n" for r in rows)
    print(
        "\n| method | cells | fates | exact branch points | median Spearman | median ARI (ceiling) "
        "| runs with gap edges | median s |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for method in args.methods:
        for n_cells in args.cells:
            for n_fates in args.fates:
                group = [r for r in rows if (r["method"], r["cells"], r["fates"]) == (method, n_cells, n_fates)]
                exact = sum(r["branch_points"] == n_fates - 1 for r in group)
                print(
                    f"| {method} | {n_cells:,} | {n_fates} | {exact}/{len(group)} | "
                    f"{np.median([r['spearman'] for r in group]):.3f} | "
                    f"{np.median([r['ari'] for r in group]):.3f} ({np.median([r['ceiling_ari'] for r in group]):.3f}) | "
                    f"{sum(r['gap_edges'] > 0 for r in group)} | {np.median([r['seconds'] for r in group]):.1f} |"
                )


if __name__ == "__main__":
    main()
