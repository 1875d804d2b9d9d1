"""Wall time and peak memory of ``tl.mpme`` and ``tl.spl`` (dense log-det learners).

N = 500, 2,000 and 5,000 cells × 50 dimensions (``datasets.branching`` with
three tips, the 50 features stored as ``obsm["X_pca"]``), default
parameters. Both methods factor a dense N × N matrix per iteration (O(N³)),
so this is their supported range (the adapters refuse more than 5,000
cells). Target on 2 cores: N = 2,000 in at most 60 s each. Each run is a
fresh subprocess so that its peak RSS is its own.

Usage::

    python benchmarks/mpme_spl.py                      # N = 500, 2000, 5000
    python benchmarks/mpme_spl.py --sizes 500 2000     # a subset
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

METHODS = ("mpme", "spl")


def run_one(method: str, n_cells: int, n_dims: int) -> dict:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata = sks.datasets.branching(n_cells, n_leaves=3, n_dims=n_dims, random_state=0)
    adata.obsm["X_pca"] = np.asarray(adata.X, dtype=np.float64)
    adata.X = None
    start = time.perf_counter()
    getattr(sks.tl, method)(adata)
    elapsed = time.perf_counter() - start
    entry = adata.uns[method]
    return {
        "method": method,
        "n_cells": n_cells,
        "n_dims": n_dims,
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "seconds": elapsed,
        "seconds_per_iter": elapsed / int(entry["n_iter"]),
        "n_edges": int(entry["n_nonzero"]) // 2,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[500, 2000, 5000], help="numbers of cells")
    parser.add_argument("--n-dims", type=int, default=50)
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--one", nargs=2, metavar=("METHOD", "N"), help=argparse.SUPPRESS)  # internal
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(args.one[0], int(args.one[1]), args.n_dims)))
        return

    rows = []
    for n_cells in args.sizes:
        for method in args.methods:
            command = [sys.executable, __file__, "--one", method, str(n_cells), "--n-dims", str(args.n_dims)]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(output.strip().splitlines()[-1]))
            print(f"done {method} N={n_cells}: {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)

    print(f"MPME and SPL, default parameters: branching data × {args.n_dims} dims")
    print()
    print("| method | N | iterations (converged) | total (s) | s / iteration | edges | peak RSS (GB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| `tl.{row['method']}` | {row['n_cells']:,} | {row['n_iter']} ({'yes' if row['converged'] else 'no'}) | "
            f"{row['seconds']:.1f} | {row['seconds_per_iter']:.2f} | {row['n_edges']:,} | {row['peak_rss_gb']:.2f} |"
        )


if __name__ == "__main__":
    main()
