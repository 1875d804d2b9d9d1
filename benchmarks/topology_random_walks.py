"""Topology recovery on a second generator, written apart from ``sks.datasets``.

``benchmarks/topology.py`` measures the learners on the package's own ``simulate_trajectory``,
on which the pruning thresholds were chosen. This script draws trees of another kind, in the
manner of PROSSTT (Papadopoulos et al., Bioinformatics 2019): a random binary tree of
``fates`` leaves, each branch 40–100 steps long; a dozen gene programs that move along every
branch as random walks with momentum (continuing from where the parent branch ended), so
branches curve and diverge at their own pace; genes as sparse mixtures of the programs
(log-means); branch sizes drawn log-normally and cells crowded towards either end of their
branch; library sizes log-normal; negative-binomial counts with mean-dependent dispersion and
dropout. Truth: ``fates - 1`` branch points, the step count from the root as pseudotime, the
branch of every cell.

Each run: counts → filter_genes(min_cells=3) → normalize_total → log1p → 1,000 highly variable
genes → 30 PCs → learner with defaults → root at the earliest cells → pseudotime. Reports exact
branch points, the counts drawn, median pseudotime Spearman and median segment ARI.

Run: python benchmarks/topology_random_walks.py --fates 2 3 4 5 6 --seeds 10 --cells 2000
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc
from scipy.stats import spearmanr
from sklearn.metrics import adjusted_rand_score

from scskeleton._testing import fit_on_counts, random_walk_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--fates", nargs="+", type=int, default=[2, 3, 4, 5, 6])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--cells", nargs="+", type=int, default=[2000])
    args = parser.parse_args()
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    print("| method | cells | fates | exact branch points | branch points drawn | median Spearman (lowest) | median ARI |")
    print("|---|---:|---:|---:|---|---:|---:|")
    for method in args.methods:
        for n_cells in args.cells:
            for n_fates in args.fates:
                runs = []
                for seed in range(args.seeds):
                    adata = random_walk_tree(n_fates, n_cells, seed)
                    sc.pp.filter_genes(adata, min_cells=3)
                    fit_on_counts(adata, method)
                    runs.append({
                        "branch_points": len(adata.uns[method]["branch_points"]),
                        "spearman": spearmanr(adata.obs["true_pseudotime"], adata.obs[f"{method}_pseudotime"])[0],
                        "ari": adjusted_rand_score(adata.obs["true_branch"], adata.obs[f"{method}_segment"]),
                    })
                drawn = [r["branch_points"] for r in runs]
                print(f"| {method} | {n_cells:,} | {n_fates} | {sum(d == n_fates - 1 for d in drawn)}/{len(runs)} | "
                      f"{json.dumps(drawn)} | {np.median([r['spearman'] for r in runs]):.3f} ({min(r['spearman'] for r in runs):.3f}) | "
                      f"{np.median([r['ari'] for r in runs]):.3f} |", flush=True)


if __name__ == "__main__":
    main()
