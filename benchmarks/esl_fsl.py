"""Wall time and peak memory of ``tl.esl`` and ``tl.fsl``.

ESL runs on ``datasets.line_and_circle`` (the paper's Fig. 6 data, N/2 cells
per structure) with its defaults: all pairs are candidate edges up to 1,000
cells, the symmetrised 3·perplexity = 90 nearest neighbours above
(``--esl-all-pairs`` forces all pairs). FSL runs on ``datasets.noisy_moons``
with N cells and M features (2 moon features + M - 2 uniform noise features,
the paper's Fig. 9 setting: γ = 100, λ = 10, b = 1). Each size runs in a fresh
subprocess so that its peak RSS is its own.

Usage::

    python benchmarks/esl_fsl.py                                  # the default sizes
    python benchmarks/esl_fsl.py --sizes esl:500 esl:2000 fsl:400x20000
    python benchmarks/esl_fsl.py --blas-threads 1                 # pin BLAS threads
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

DEFAULT_SIZES = ["esl:500", "esl:1000", "esl:2000", "fsl:400x1002", "fsl:400x5000", "fsl:400x20000"]


def run_one(spec: str, all_pairs: bool) -> dict:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    method, size = spec.split(":")
    if method == "esl":
        n_cells = int(size)
        adata = sks.datasets.line_and_circle(n_cells // 2, n_cells - n_cells // 2, random_state=0)
        start = time.perf_counter()
        sks.tl.esl(adata, n_neighbors=n_cells - 1 if all_pairs else None)
        elapsed = time.perf_counter() - start
        entry = adata.uns["esl"]
        extra = {"n_features": 2, "candidates": entry["params"]["n_neighbors"],
                 "result": f"{entry['n_structures']} components"}
    else:
        n_cells, n_features = (int(value) for value in size.split("x"))
        adata = sks.datasets.noisy_moons(n_cells, n_noise=n_features - 2, random_state=0)
        start = time.perf_counter()
        sks.tl.fsl(adata, n_features=2, b=1, lam=10, gamma=100)
        elapsed = time.perf_counter() - start
        entry = adata.uns["fsl"]
        top = adata.var_names[np.argsort(-adata.var["fsl_weight"].to_numpy())[:2]].tolist()
        extra = {"n_features": n_features, "candidates": n_cells,
                 "result": f"top θ: {', '.join(top)}; {entry['n_weighted']} weighted"}
    return {
        "method": method,
        "n_cells": n_cells,
        **extra,
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "seconds": elapsed,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES,
                        help="esl:N or fsl:NxM entries (default: %(default)s)")
    parser.add_argument("--esl-all-pairs", action="store_true", help="ESL with all pairs as candidates at every N")
    parser.add_argument("--blas-threads", type=int, help="set OPENBLAS/OMP/MKL_NUM_THREADS in the subprocesses")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run a single size
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(args.one, args.esl_all_pairs)))
        return

    env = dict(os.environ)
    if args.blas_threads is not None:
        for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[name] = str(args.blas_threads)
    rows = []
    for spec in args.sizes:
        command = [sys.executable, __file__, "--one", spec] + (["--esl-all-pairs"] if args.esl_all_pairs else [])
        output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(f"done {spec}", file=sys.stderr, flush=True)

    threads = env.get("OPENBLAS_NUM_THREADS", "default")
    print(f"ESL / FSL on {os.cpu_count()} CPU(s), BLAS threads: {threads}")
    print()
    print("| method | cells | features | candidates / cell | iterations (converged) | total (s) | peak RSS (GB) "
          "| result |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        print(
            f"| `tl.{row['method']}` | {row['n_cells']} | {row['n_features']} | {row['candidates']} | "
            f"{row['n_iter']} ({'yes' if row['converged'] else 'no'}) | {row['seconds']:.1f} | "
            f"{row['peak_rss_gb']:.2f} | {row['result']} |"
        )


if __name__ == "__main__":
    main()
