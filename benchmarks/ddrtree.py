"""Wall time and peak memory of ``tl.ddrtree`` (or ``tl.rpg``) + ``tl.root`` + ``tl.pseudotime``.

Each size runs in a fresh subprocess so that its peak resident set size (RSS)
is its own. The input is ``datasets.branching`` with ``n_dims`` features,
stored directly as ``obsm["X_pca"]`` (a 50-dimensional PCA-like matrix), so
the timing covers the package, not scanpy's PCA. Peak RSS includes the Python
interpreter, the imported libraries and the input data.

Usage::

    python benchmarks/ddrtree.py                 # 1e4, 1e5, 1e6 cells × 50 dims
    python benchmarks/ddrtree.py --sizes 10000 100000
    python benchmarks/ddrtree.py --method rpg    # the principal tree with its defaults
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time


def run_one(n_cells: int, n_dims: int, n_leaves: int, method: str = "ddrtree") -> dict:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata = sks.datasets.branching(n_cells, n_leaves=n_leaves, n_dims=n_dims, random_state=0)
    adata.obsm["X_pca"] = np.asarray(adata.X, dtype=np.float64)
    adata.X = None  # keep only the representation the tool reads
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2

    start = time.perf_counter()
    getattr(sks.tl, method)(adata)
    fitted = time.perf_counter()
    sks.tl.root(adata, method, group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, method)
    done = time.perf_counter()

    from scipy.stats import spearmanr

    entry = adata.uns[method]
    return {
        "n_cells": n_cells,
        "n_dims": n_dims,
        "n_nodes": int(entry["nodes"].shape[0]),
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "fit_s": fitted - start,
        "pseudotime_s": done - fitted,
        "total_s": done - start,
        "rss_input_gb": rss_before,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "branch_points": int(len(entry["branch_points"])),
        "spearman": float(spearmanr(adata.obs[f"{method}_pseudotime"], adata.obs["true_pseudotime"])[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--n-dims", type=int, default=50)
    parser.add_argument("--n-leaves", type=int, default=3)
    parser.add_argument("--method", choices=["ddrtree", "rpg"], default="ddrtree")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: run a single size
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(args.one, args.n_dims, args.n_leaves, args.method)))
        return

    rows = []
    for n_cells in args.sizes:
        command = [sys.executable, __file__, "--one", str(n_cells), "--n-dims", str(args.n_dims), "--n-leaves", str(args.n_leaves),
                   "--method", args.method]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(f"done {n_cells}", file=sys.stderr, flush=True)

    print(f"{args.method} + root + pseudotime, {args.n_dims} dims, {args.n_leaves} tips; {platform.processor() or platform.machine()}")
    print()
    print("| cells | nodes K | iterations (converged) | fit (s) | root + pseudotime (s) | total (s) | peak RSS (GB) | branch points | Spearman |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['n_cells']:,} | {row['n_nodes']} | {row['n_iter']} ({'yes' if row['converged'] else 'no'}) | {row['fit_s']:.1f} | "
            f"{row['pseudotime_s']:.2f} | {row['total_s']:.1f} | {row['peak_rss_gb']:.2f} | "
            f"{row['branch_points']} | {row['spearman']:.3f} |"
        )


if __name__ == "__main__":
    main()
