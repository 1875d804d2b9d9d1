"""Dense cell-level learners on k-means landmarks: wall time, peak memory and tree recovery.

``tl.mpme`` / ``tl.esl`` (or ``tl.spl``) with ``n_landmarks`` (default: the learner's own,
1,000 above 5,000 cells) + ``tl.root(obs_min="true_pseudotime")`` + ``tl.pseudotime``, on

- ``branching``: ``sks.datasets.branching(n, n_leaves=3)``, 50 features, PCA to 10 components;
- ``simulated``: ``sks.datasets.simulate_trajectory(n, n_fates=3)`` counts, normalize_total,
  log1p, 1,000 highly variable genes, PCA to 30 components (as ``benchmarks/topology.py``).

Each (data, size, method) runs in a fresh subprocess so that its peak resident set size
(``resource.getrusage``) is its own; it includes the interpreter, the libraries and the
input. Timed: the learner (k-means landmarks, the fit on them, the skeleton, the cells'
assignment) and root + pseudotime; not the data generation and preprocessing.
Reports the branch points found (truth: 2) and the Spearman correlation of the
pseudotime with ``obs["true_pseudotime"]``.

Usage::

    python benchmarks/landmarks.py                                  # 50,000 cells, both data sets
    python benchmarks/landmarks.py --data branching --sizes 1000000
    python benchmarks/landmarks.py --methods mpme --n-landmarks 500
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import subprocess
import sys
import time


def prepare(data: str, n_cells: int, seed: int = 0):
    import scanpy as sc

    import scskeleton as sks

    if data == "branching":
        adata = sks.datasets.branching(n_cells, n_leaves=3, random_state=seed)
        sc.pp.pca(adata, n_comps=10)
    else:
        adata = sks.datasets.simulate_trajectory(n_cells, n_fates=3, random_state=seed)
        sc.pp.normalize_total(adata)
        sc.pp.log1p(adata)
        sc.pp.highly_variable_genes(adata, n_top_genes=1000)
        sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    adata.X = None  # keep only what the learner reads
    for name in list(adata.layers):
        del adata.layers[name]
    return adata


def run_one(data: str, n_cells: int, method: str, n_landmarks: int | None, seed: int = 0) -> dict:
    import scanpy as sc
    from scipy.stats import spearmanr

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata = prepare(data, n_cells, seed)
    rss_input = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2

    start = time.perf_counter()
    getattr(sks.tl, method)(adata, n_landmarks=n_landmarks)
    fitted = time.perf_counter()
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    done = time.perf_counter()

    entry = adata.uns[method]
    times = adata.obs[f"{method}_pseudotime"]
    return {
        "data": data,
        "seed": seed,
        "method": method,
        "n_cells": n_cells,
        "n_landmarks": int(entry["params"]["n_landmarks"]),
        "n_nodes": int(entry["nodes"].shape[0]),
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "fit_s": fitted - start,
        "total_s": done - start,
        "rss_input_gb": rss_input,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
        "branch_points": int(len(entry["branch_points"])),
        "spearman": float(spearmanr(times, adata.obs["true_pseudotime"], nan_policy="omit")[0]),
        "nan": int(times.isna().sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", choices=["branching", "simulated"], default=["branching", "simulated"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[50_000])
    parser.add_argument("--methods", nargs="+", choices=["mpme", "esl", "spl"], default=["mpme", "esl"])
    parser.add_argument("--n-landmarks", type=int, default=None, help="default: the learner's own")
    parser.add_argument("--seeds", type=int, default=1, help="data sets per size (random_state 0, 1, ...)")
    parser.add_argument("--out", default=None, help="also append every run as a JSON line here")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)  # internal: data, size, method, seed
    args = parser.parse_args()

    if args.one is not None:
        data, size, method, seed = args.one
        print(json.dumps(run_one(data, int(size), method, args.n_landmarks, int(seed))))
        return

    rows = []
    runs = [(d, n, s, m) for d in args.data for n in args.sizes for s in range(args.seeds) for m in args.methods]
    for data, n_cells, seed, method in runs:
        command = [sys.executable, __file__, "--one", data, str(n_cells), method, str(seed)]
        if args.n_landmarks is not None:
            command += ["--n-landmarks", str(args.n_landmarks)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        row = json.loads(output.strip().splitlines()[-1])
        rows.append(row)
        if args.out:
            with open(args.out, "a") as handle:
                handle.write(json.dumps(row) + "\n")
        print(f"done {data} {n_cells} seed {seed} {method}: {row['total_s']:.1f} s", file=sys.stderr, flush=True)

    print(f"learner on landmarks + root + pseudotime; {platform.processor() or platform.machine()}")
    print()
    print("| method | data (seed) | cells | landmarks (nodes kept) | iterations (converged) | fit (s) | total (s) "
          "| peak RSS (GB; input) | branch points (true 2) | Spearman |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| `tl.{row['method']}` | {row['data']} ({row['seed']}) | {row['n_cells']:,} | {row['n_landmarks']:,} ({row['n_nodes']}) | "
            f"{row['n_iter']} ({'yes' if row['converged'] else 'no'}) | {row['fit_s']:.1f} | {row['total_s']:.1f} | "
            f"{row['peak_rss_gb']:.2f} ({row['rss_input_gb']:.2f}) | {row['branch_points']} | {row['spearman']:.3f} |"
        )


if __name__ == "__main__":
    main()
