"""How often the root, given as the true root cell, lands inside the learned tree rather than on a tip.

For each data set × seed × learner (defaults): fit, then ``tl.root(adata, key, cell=<the cell of lowest
true pseudotime>)``; counts the fits whose log warns "not a tip", the ones where the root moved to a tip
past a stub, and, as the control, the fits where the root is given as a cell at the first true fork
(it must warn: the trajectory truly starts inside the tree there; not on DLA trees, whose first walk
ends in a tip). Data: ``simulate_trajectory``
counts (2–3 fates; normalize_total, log1p, 1,000 HVGs, 30 PCs), ``branching`` and ``dla_tree``.

Run: python benchmarks/roots.py --seeds 4 --cells 1000
"""

from __future__ import annotations

import argparse
import io

import numpy as np
import scanpy as sc

import scskeleton as sks


def data_sets(n_cells: int, seed: int):
    for n_fates in (2, 3):
        adata = sks.datasets.simulate_trajectory(n_cells, n_fates=n_fates, random_state=seed)
        sc.pp.normalize_total(adata)
        sc.pp.log1p(adata)
        sc.pp.highly_variable_genes(adata, n_top_genes=1000)
        sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
        yield f"simulate_trajectory {n_fates} fates", adata
    adata = sks.datasets.branching(n_cells, n_leaves=3, random_state=seed)
    sc.pp.pca(adata, n_comps=10)
    yield "branching 3 leaves", adata
    adata = sks.datasets.dla_tree(n_cells, n_branches=4, random_state=seed)
    sc.pp.pca(adata, n_comps=10)
    yield "dla_tree 4 branches", adata


def fork_cell(adata) -> int | None:
    """A cell where the first true branch ends (the first fork), if the truth names branches."""
    if "true_branch" not in adata.obs:
        return None
    time = adata.obs["true_pseudotime"].to_numpy()
    first = adata.obs["true_branch"].to_numpy() == adata.obs["true_branch"].to_numpy()[np.argmin(time)]
    if first.all():
        return None
    return int(np.flatnonzero(first)[np.argmax(time[first])])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--cells", type=int, default=1000)
    args = parser.parse_args()
    log = io.StringIO()
    sc.settings.logfile, sc.settings.verbosity = log, 3
    counts = {"fits": 0, "warned": 0, "moved": 0, "fork fits": 0, "fork warned": 0}
    for seed in range(args.seeds):
        for name, adata in data_sets(args.cells, seed):
            for method in ("ddrtree", "rpg"):
                getattr(sks.tl, method)(adata)
                start = len(log.getvalue())
                sks.tl.root(adata, method, cell=int(np.argmin(adata.obs["true_pseudotime"].to_numpy())))
                text = log.getvalue()[start:]
                warned, moved = "not a tip" in text, "moved from node" in text
                counts["fits"] += 1
                counts["warned"] += warned
                counts["moved"] += moved
                fork = None if name.startswith("dla") else fork_cell(adata)  # DLA's first walk ends in a tip
                fork_warned = None
                if fork is not None:
                    start = len(log.getvalue())
                    sks.tl.root(adata, method, cell=fork)
                    fork_warned = "not a tip" in log.getvalue()[start:]
                    counts["fork fits"] += 1
                    counts["fork warned"] += fork_warned
                print(f"{name:26s} seed {seed} {method:8s} root cell: warned {warned!s:5s} moved {moved!s:5s} "
                      f"| fork cell: warned {fork_warned}", flush=True)
    print(counts)


if __name__ == "__main__":
    main()
