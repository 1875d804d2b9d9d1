"""Wall time and peak memory of ``tl.association_test`` and ``tl.branch_test`` on a dense zarr store on disk.

The expression is 10⁶ cells × 2,000 genes of dense float32 (8 GB), generated
chunk by chunk and written to a zarr store (``da.to_zarr``); the tests then open
it lazily (``da.from_zarr``) as ``adata.X`` and read it in one pass over its
chunks (``scskeleton._dask.stats``), on dask's threaded scheduler. The cells lie
on a "Y" (a trunk and two branches, as in ``benchmarks/trends.py``): the first
10 % of the genes rise along pseudotime, the next 5 % rise on one branch only,
the rest are noise. The graph is written directly in the shared schema and
rooted and timed by ``tl.root`` and ``tl.pseudotime`` (in memory: two numbers a
cell); only the ``tl`` call is timed. Each case runs in a fresh subprocess, so
its peak RSS (``ru_maxrss``) is its own and far below the matrix's 8 GB.

Usage::

    python benchmarks/trends_dask.py                            # 10⁶ × 2,000, store in /tmp
    python benchmarks/trends_dask.py --n-cells 100000 --store /tmp/small.zarr
    python benchmarks/trends_dask.py --reuse                    # keep an existing store
    python benchmarks/trends_dask.py --n-cells 100000 --in-memory   # and the same store loaded, for comparison
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

N_NODES = 60
TREND_SHARE = 0.10
BRANCH_SHARE = 0.05


def latent(n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Each cell's time in [0, 1] (the fork at 0.5) and side (±1) of the Y, fixed by the seed."""
    rng = np.random.default_rng(0)
    return rng.uniform(0.0, 1.0, n_cells), np.where(rng.random(n_cells) < 0.5, 1.0, -1.0)


def _expression_block(cells: np.ndarray, n_genes: int, block_info=None) -> np.ndarray:
    """One chunk of expression from its cells' (time, side): trends, branch genes, Gaussian noise."""
    seed = block_info[0]["chunk-location"][0] + 1
    rng = np.random.default_rng(seed)
    time_, side = cells[:, 0], cells[:, 1]
    n_trend, n_branch = int(TREND_SHARE * n_genes), int(BRANCH_SHARE * n_genes)
    values = rng.standard_normal((cells.shape[0], n_genes), dtype=np.float32)
    values *= 0.5
    values += 1.0
    values[:, :n_trend] += 2.0 * time_[:, None].astype(np.float32)
    past_fork = np.clip(2.0 * time_ - 1.0, 0.0, None) * (side > 0)
    values[:, n_trend : n_trend + n_branch] += 2.0 * past_fork[:, None].astype(np.float32)
    return values


def generate(store: str, n_cells: int, n_genes: int, chunk: int) -> None:
    import dask.array as da

    time_, side = latent(n_cells)
    cells = da.from_array(np.column_stack([time_, side]), chunks=(chunk, 2))
    matrix = cells.map_blocks(_expression_block, n_genes, chunks=(cells.chunks[0], (n_genes,)), dtype=np.float32)
    if os.path.exists(store):
        shutil.rmtree(store)
    with __import__("dask").config.set(scheduler="threads"):
        da.to_zarr(matrix, store)


def make_adata(store: str):
    """AnnData with the lazy store as X and a Y-shaped graph ``uns["bench"]``, rooted and timed."""
    import anndata as ad
    import dask.array as da
    import pandas as pd
    from scipy import sparse

    import scskeleton as sks

    matrix = da.from_zarr(store)
    n_cells, n_genes = matrix.shape
    time_, side = latent(n_cells)
    arm = N_NODES // 3
    s = np.linspace(0.0, 1.0, arm + 1)
    nodes = np.vstack([np.column_stack([s, np.zeros_like(s)]), np.column_stack([1.0 + s[1:], s[1:]]),
                       np.column_stack([1.0 + s[1:], -s[1:]])])
    edges = [(k, k + 1) for k in range(arm)]
    edges += [(arm, arm + 1)] + [(k, k + 1) for k in range(arm + 1, 2 * arm)]
    edges += [(arm, 2 * arm + 1)] + [(k, k + 1) for k in range(2 * arm + 1, 3 * arm)]
    rows, cols = np.array(edges).T
    adjacency = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(len(nodes), len(nodes)))
    position = 2.0 * time_
    adata = ad.AnnData(obs=pd.DataFrame(index=pd.RangeIndex(n_cells).astype(str)),
                       var=pd.DataFrame(index=[f"g{j}" for j in range(n_genes)]))
    adata.X = matrix
    adata.obsm["X_pca"] = np.column_stack([position, side * np.clip(position - 1.0, 0.0, None)])
    adata.uns["bench"] = {"method": "bench", "nodes": nodes, "space": "X_pca", "adjacency": adjacency + adjacency.T}
    sks.tl.root(adata, "bench", node=0)
    sks.tl.pseudotime(adata, "bench")
    return adata, matrix


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def run_one(case: str, store: str, in_memory: bool = False) -> dict:
    import dask
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata, matrix = make_adata(store)
    if in_memory:  # the baseline: the same store loaded whole as numpy (only where it fits)
        adata.X = matrix.compute()
    before = _peak_rss_gb()
    start = time.perf_counter()
    with dask.config.set(scheduler="threads"):
        if case == "branch_test":
            sks.tl.branch_test(adata, "bench", branch_point=N_NODES // 3)
            name = "bench_branch_test"
        else:
            sks.tl.association_test(adata, "bench")
            name = "bench_association"
    elapsed = time.perf_counter() - start
    n_genes = matrix.shape[1]
    qvals = adata.var[f"{name}_qval"].to_numpy()
    n_trend, n_branch = int(TREND_SHARE * n_genes), int(BRANCH_SHARE * n_genes)
    planted = slice(n_trend, n_trend + n_branch) if case == "branch_test" else slice(0, n_trend + n_branch)
    return {
        "case": case,
        "X": "numpy (loaded)" if in_memory else "dask (zarr)",
        "n_cells": int(matrix.shape[0]),
        "n_genes": int(n_genes),
        "chunks": f"{matrix.chunksize[0]:,} × {matrix.chunksize[1]:,}",
        "matrix_gb": matrix.nbytes / 1024**3,
        "seconds": elapsed,
        "planted_found": f"{int((qvals[planted] < 0.05).sum())}/{planted.stop - planted.start}",
        "others_called": int((qvals < 0.05).sum() - (qvals[planted] < 0.05).sum()),
        "peak_rss_before_gb": before,
        "peak_rss_gb": _peak_rss_gb(),
        "threads": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cells", type=int, default=1_000_000)
    parser.add_argument("--n-genes", type=int, default=2_000)
    parser.add_argument("--chunk", type=int, default=10_000, help="cells per zarr chunk")
    parser.add_argument("--store", default="/tmp/scskeleton_trends_dask.zarr")
    parser.add_argument("--reuse", action="store_true", help="keep an existing store")
    parser.add_argument("--cases", default="association_test,branch_test")
    parser.add_argument("--in-memory", action="store_true",
                        help="also run each case on the store loaded into memory (the baseline; needs the RAM)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run a single case
    args = parser.parse_args()

    if args.one is not None:
        case, _, mode = args.one.partition(":")
        print(json.dumps(run_one(case, args.store, in_memory=mode == "memory")))
        return
    if not (args.reuse and os.path.exists(args.store)):
        start = time.perf_counter()
        generate(args.store, args.n_cells, args.n_genes, args.chunk)
        print(f"wrote {args.n_cells:,} × {args.n_genes:,} float32 to {args.store} in "
              f"{time.perf_counter() - start:.0f} s", file=sys.stderr, flush=True)

    rows = []
    for case in args.cases.split(","):
        for mode in ("dask", "memory") if args.in_memory else ("dask",):
            command = [sys.executable, __file__, "--one", f"{case}:{mode}", "--store", args.store]
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(output.strip().splitlines()[-1]))
            print(f"done {case} ({mode})", file=sys.stderr, flush=True)

    first = rows[0]
    print(f"Gene tests on a dask X read from a zarr store: {first['n_cells']:,} cells × {first['n_genes']:,} genes, "
          f"dense float32 ({first['matrix_gb']:.1f} GB), chunks of {first['chunks']}, threaded scheduler "
          f"({first['threads']} cores)")
    print()
    print("| call | X | wall time (s) | peak RSS before / after the call (GB) | planted genes with q < 0.05 "
          "| other genes with q < 0.05 |")
    print("|---|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| `tl.{row['case']}` | {row['X']} | {row['seconds']:.1f} | {row['peak_rss_before_gb']:.2f} / "
              f"{row['peak_rss_gb']:.2f} | {row['planted_found']} | {row['others_called']} |")


if __name__ == "__main__":
    main()
