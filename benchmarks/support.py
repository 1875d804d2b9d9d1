"""Branch support of the true and the spurious branch points of generated trees.

For each seed × number of fates: ``simulate_trajectory`` counts through the preprocessing of
``benchmarks/topology.py`` → learner with defaults → root at the earliest cells → pseudotime →
``tl.branch_support`` (``n_boot`` refits on 80 % of the cells). A learned branch point counts
as *true* when each of its arms away from the root holds the majority of some fate's committed
cells (the cells of the fate's terminal true branch), which a stub's few cells never do.

Reports per learner, cells and fates: the true branch points, how many have support ≥ 0.9, the
lowest, and the spurious ones with their support. The figures are in ``docs/methods/trust.md``.

Run: python benchmarks/support.py --cells 10000 --fates 2 3 4 5 --seeds 10
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc
from scipy import sparse
from scipy.sparse.csgraph import connected_components

import scskeleton as sks
from topology import prepare


def committed_cells(adata) -> dict:
    """Each fate's committed cells: those on the true branch its latest cells are on."""
    fate = adata.obs["true_fate"].astype(str).to_numpy()
    branch = adata.obs["true_branch"].astype(str).to_numpy()
    time = adata.obs["true_pseudotime"].to_numpy()
    out = {}
    for name in np.unique(fate):
        cells = np.flatnonzero(fate == name)
        terminal = branch[cells[np.argmax(time[cells])]]
        out[name] = np.flatnonzero(branch == terminal)
    return out


def is_true_branch_point(adata, key: str, point: int, committed: dict) -> bool:
    """Whether every arm of ``point`` away from the root holds the majority of some fate's committed cells."""
    adjacency = sparse.csr_matrix(adata.uns[key]["adjacency"])
    keep = np.ones(adjacency.shape[0], dtype=bool)
    keep[point] = False
    rest = adjacency[keep][:, keep]
    _, labels = connected_components(rest, directed=False)
    arm_of_node = np.full(adjacency.shape[0], -1)
    arm_of_node[keep] = labels
    root = int(np.atleast_1d(adata.uns[key]["root"])[0])
    root_arm = arm_of_node[root]
    segment = adata.obs[f"{key}_segment"].astype(str).to_numpy()
    arm_of_cell = np.full(adata.n_obs, -1)
    for name, path in adata.uns[key]["segments"].items():
        arms = {int(arm_of_node[n]) for n in path if int(n) != point}
        if len(arms) == 1:
            arm_of_cell[segment == str(name)] = arms.pop()
    # removing the point leaves one component (arm) per neighbour; the root's is not judged
    arms = set(labels.tolist()) - {root_arm}
    return all(any(np.mean(arm_of_cell[cells] == arm) > 0.5 for cells in committed.values()) for arm in arms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--fates", nargs="+", type=int, default=[2, 3, 4, 5])
    parser.add_argument("--cells", type=int, default=10000)
    parser.add_argument("--n-boot", type=int, default=20)
    parser.add_argument("--out", default=None, help="write every branch point as JSON lines here")
    args = parser.parse_args()
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    sink = open(args.out, "w") if args.out else None
    rows = []
    for method in args.methods:
        for n_fates in args.fates:
            for seed in range(args.seeds):
                adata = prepare(args.cells, n_fates, seed)
                getattr(sks.tl, method)(adata)
                sks.tl.root(adata, method, obs_min="true_pseudotime")
                sks.tl.pseudotime(adata, method)
                sks.tl.branch_support(adata, method, n_boot=args.n_boot)
                support = adata.uns[method]["branch_support"]
                committed = committed_cells(adata)
                for point, value in zip(support["branch_points"], support["branch_point_support"]):
                    row = {"method": method, "fates": n_fates, "seed": seed, "branch_point": int(point),
                           "support": float(value), "true": is_true_branch_point(adata, method, int(point), committed)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    if sink:
                        sink.write(json.dumps(row) + "\n")
    print("\n| learner | true branch points | support ≥ 0.9 | lowest | spurious | their support |")
    print("|---|---:|---:|---:|---:|---|")
    for method in args.methods:
        true = [r["support"] for r in rows if r["method"] == method and r["true"]]
        spurious = [r["support"] for r in rows if r["method"] == method and not r["true"]]
        print(f"| {method} | {len(true)} | {sum(s >= 0.9 for s in true)} | {min(true, default=float('nan')):.2f} | "
              f"{len(spurious)} | {', '.join(f'{s:.2f}' for s in spurious) or '—'} |")


if __name__ == "__main__":
    main()
