"""Wall time and peak memory of ``tl.convex_embedding`` (regularized-MVU loss) by size and regularizer.

The data are ``datasets.sine_surface(N, width=8)``, standardised by
``tl.convex_embedding`` itself (its default), with the paper's α = 1, β = 0.1,
γ = 10⁻³, d = 2 and the 10-nearest-neighbour MVU loss (29). Every
(size, regularizer) pair runs in a fresh subprocess so that its peak RSS is
its own. The work is dense N × N with eigendecompositions per iteration, so
time grows like N³ per iteration.

Usage::

    python benchmarks/convex_embedding.py                          # N = 200, 500, 1000, 2000
    python benchmarks/convex_embedding.py --sizes 300 1000 --maxiter 500
    python benchmarks/convex_embedding.py --regularizers biconjugate completed_square --threads 2
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

REGULARIZERS = ("neg_trace", "partitioned", "completed_square", "biconjugate")


def run_one(n_cells: int, regularizer: str, maxiter: int, tol: float) -> dict:
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata = sks.datasets.sine_surface(n_cells, width=8.0, random_state=0)
    start = time.perf_counter()
    sks.tl.convex_embedding(adata, loss="mvu", regularizer=regularizer, maxiter=maxiter, tol=tol)
    elapsed = time.perf_counter() - start
    entry = adata.uns["convex_embedding"]
    spectrum = entry["eigenvalues"]
    return {
        "n_cells": n_cells,
        "regularizer": regularizer,
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "seconds": elapsed,
        "seconds_per_iter": elapsed / max(int(entry["n_iter"]), 1),
        "reconstruction_loss": float(entry["reconstruction_loss"]),
        "top_share": float(spectrum[:2].sum() / spectrum.sum()),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000, 2000])
    parser.add_argument("--regularizers", nargs="+", default=list(REGULARIZERS), choices=REGULARIZERS)
    parser.add_argument("--maxiter", type=int, default=1000)
    parser.add_argument("--tol", type=float, default=1e-6)
    parser.add_argument("--threads", type=int, default=None,
                        help="BLAS/LAPACK threads of each run (OPENBLAS/OMP/MKL_NUM_THREADS); default: unchanged")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: N and regularizer of a single run
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(int(args.one[0]), args.one[1], args.maxiter, args.tol)))
        return

    rows = []
    for n_cells in args.sizes:
        for regularizer in args.regularizers:
            command = [sys.executable, __file__, "--one", str(n_cells), regularizer,
                       "--maxiter", str(args.maxiter), "--tol", str(args.tol)]
            environment = dict(os.environ)
            if args.threads is not None:
                for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                    environment[variable] = str(args.threads)
            output = subprocess.run(command, check=True, capture_output=True, text=True, env=environment).stdout
            rows.append(json.loads(output.strip().splitlines()[-1]))
            print(f"done N={n_cells} {regularizer}", file=sys.stderr, flush=True)

    threads = "unchanged" if args.threads is None else args.threads
    print(f"Convex embedding, regularized-MVU loss, sine surface (standardised), maxiter={args.maxiter}, "
          f"tol={args.tol}, BLAS threads: {threads}")
    print()
    print("| N | regularizer | iterations (converged) | total (s) | s / iteration | reconstruction loss | "
          "top-2 share of tr K̃ | peak RSS (GB) |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['n_cells']} | `{row['regularizer']}` | {row['n_iter']} ({'yes' if row['converged'] else 'no'}) | "
            f"{row['seconds']:.1f} | {row['seconds_per_iter']:.3f} | {row['reconstruction_loss']:.4g} | "
            f"{row['top_share']:.3f} | {row['peak_rss_gb']:.2f} |"
        )


if __name__ == "__main__":
    main()
