"""Wall time and peak memory of ``tl.rpg`` and ``tl.rpg_l1`` with landmarks.

The size of the RPG paper's MNIST experiment: 70,000 cells × 154 dimensions,
K = 1,000 landmark nodes (the paper reports 222.75 s in MATLAB for the tree).
The data are ``datasets.branching`` with 154 features (``--data branching``)
or ten Gaussian clusters from ``sklearn.datasets.make_blobs`` scaled like the
paper's MNIST (each dimension divided by its largest absolute value;
``--data blobs``), stored as ``obsm["X_pca"]``. Each method runs in a fresh
subprocess so that its peak RSS is its own.

Usage::

    python benchmarks/rpg.py                       # tree and ℓ1 graph
    python benchmarks/rpg.py --data blobs          # clustered data
    python benchmarks/rpg.py --l1-maxiter 5        # cap the ℓ1 iterations
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def run_one(method: str, n_cells: int, n_dims: int, n_nodes: int, maxiter: int, data: str = "branching") -> dict:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    if data == "blobs":
        from anndata import AnnData
        from sklearn.datasets import make_blobs

        points, _ = make_blobs(n_cells, n_features=n_dims, centers=10, cluster_std=2.0, random_state=0)
        points /= np.abs(points).max(axis=0)
        adata = AnnData(obsm={"X_pca": points})
    else:
        adata = sks.datasets.branching(n_cells, n_leaves=3, n_dims=n_dims, random_state=0)
        adata.obsm["X_pca"] = np.asarray(adata.X, dtype=np.float64)
        adata.X = None
    start = time.perf_counter()
    getattr(sks.tl, method)(adata, n_nodes=n_nodes, maxiter=maxiter)
    elapsed = time.perf_counter() - start
    entry = adata.uns[method]
    return {
        "method": method,
        "n_cells": n_cells,
        "n_dims": n_dims,
        "n_nodes": n_nodes,
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "seconds": elapsed,
        "seconds_per_iter": elapsed / int(entry["n_iter"]),
        "n_edges": int(entry["adjacency"].nnz // 2),
        "n_lp_edges": int(entry["lp_adjacency"].nnz // 2) if "lp_adjacency" in entry else None,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cells", type=int, default=70_000)
    parser.add_argument("--n-dims", type=int, default=154)
    parser.add_argument("--n-nodes", type=int, default=1000)
    parser.add_argument("--tree-maxiter", type=int, default=50)
    parser.add_argument("--l1-maxiter", type=int, default=50)
    parser.add_argument("--data", choices=("branching", "blobs"), default="branching")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run a single method
    args = parser.parse_args()

    if args.one is not None:
        maxiter = args.tree_maxiter if args.one == "rpg" else args.l1_maxiter
        print(json.dumps(run_one(args.one, args.n_cells, args.n_dims, args.n_nodes, maxiter, args.data)))
        return

    rows = []
    for method in ("rpg", "rpg_l1"):
        command = [sys.executable, __file__, "--one", method, "--n-cells", str(args.n_cells), "--n-dims",
                   str(args.n_dims), "--n-nodes", str(args.n_nodes), "--tree-maxiter", str(args.tree_maxiter),
                   "--l1-maxiter", str(args.l1_maxiter), "--data", args.data]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(f"done {method}", file=sys.stderr, flush=True)

    print(f"Regularized principal graphs with landmarks ({args.data}): {args.n_cells:,} cells × {args.n_dims} dims, "
          f"K = {args.n_nodes}")
    print()
    print("| method | iterations (converged) | total (s) | s / iteration | edges (LP's W) | peak RSS (GB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        lp = f" ({row['n_lp_edges']})" if row.get("n_lp_edges") is not None else ""
        print(
            f"| `tl.{row['method']}` | {row['n_iter']} ({'yes' if row['converged'] else 'no'}) | {row['seconds']:.1f} | "
            f"{row['seconds_per_iter']:.2f} | {row['n_edges']}{lp} | {row['peak_rss_gb']:.2f} |"
        )
    tree, graph = rows
    print()
    print(f"ℓ1 graph / principal tree: {graph['seconds'] / tree['seconds']:.1f}×")


if __name__ == "__main__":
    main()
