"""Wall time and peak memory of ``tl.trends``, ``tl.branch_test``, ``tl.fork_test``, ``tl.association_test``
and ``tl.activation`` on sparse expression.

The issue's target: 20,000 genes × 100,000 cells on one path in ≤ 60 s on 2
cores, sparse X accepted without densifying it. The expression is a CSR matrix
with a fixed number of non-zeros per cell (``--density``, default 10 %),
float32, whose first 10 % of genes rise along pseudotime (the table counts
the genes found, q < 0.05: about 10 % for trends; for the branch test, where
both branches share every trend, the few found are rising genes whose noise
grows with their mean, against the model's constant variance). The graph is written
directly in the shared schema — nodes on a line (for ``tl.trends``, every cell
on the path) or on a "Y" (for ``tl.branch_test`` and ``tl.association_test``, the trunk and two branches) in
``obsm["X_pca"]`` — and rooted and timed by ``tl.root`` and ``tl.pseudotime``;
only the ``tl`` call itself is timed. Each case runs in a fresh subprocess, so
its peak RSS (``ru_maxrss``) is its own: the matrix plus what the call needs.

Usage::

    python benchmarks/trends.py                         # all five, 100,000 × 20,000
    python benchmarks/trends.py --n-cells 20000 --n-genes 5000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

N_NODES = 60


def make_data(n_cells: int, n_genes: int, density: float, shape: str):
    """AnnData with sparse X and a line- or Y-shaped graph stored as ``uns["bench"]``."""
    import numpy as np
    import pandas as pd
    from anndata import AnnData
    from scipy import sparse

    rng = np.random.default_rng(0)
    time_ = np.sort(rng.uniform(0.0, 1.0, n_cells))
    per_row = max(1, int(round(density * n_genes)))
    indices = np.empty(n_cells * per_row, dtype=np.int32)
    data = np.empty(n_cells * per_row, dtype=np.float32)
    trend = np.arange(n_genes) < n_genes // 10
    chunk = max(1, (1 << 24) // n_genes)
    for lo in range(0, n_cells, chunk):
        hi = min(lo + chunk, n_cells)
        picked = np.sort(rng.random((hi - lo, n_genes), dtype=np.float32).argpartition(per_row, axis=1)[:, :per_row])
        scale = 1.0 + 2.0 * np.where(trend[picked], time_[lo:hi, None], 0.0)
        indices[lo * per_row : hi * per_row] = picked.ravel()
        data[lo * per_row : hi * per_row] = (rng.exponential(1.0, size=picked.shape) * scale).ravel()
    matrix = sparse.csr_matrix((data, indices, np.arange(n_cells + 1, dtype=np.int64) * per_row),
                               shape=(n_cells, n_genes))

    if shape == "line":
        nodes = np.column_stack([np.linspace(0.0, 1.0, N_NODES), np.zeros(N_NODES)])
        edges = [(k, k + 1) for k in range(N_NODES - 1)]
        coords = np.column_stack([time_, np.zeros(n_cells)])
    else:  # a Y: trunk of N_NODES // 3 nodes, then two arms
        arm = N_NODES // 3
        s = np.linspace(0.0, 1.0, arm + 1)
        trunk = np.column_stack([s, np.zeros_like(s)])
        up = np.column_stack([1.0 + s[1:], s[1:]])
        down = np.column_stack([1.0 + s[1:], -s[1:]])
        nodes = np.vstack([trunk, up, down])
        edges = [(k, k + 1) for k in range(arm)]
        edges += [(arm, arm + 1)] + [(k, k + 1) for k in range(arm + 1, 2 * arm)]
        edges += [(arm, 2 * arm + 1)] + [(k, k + 1) for k in range(2 * arm + 1, 3 * arm)]
        position = 2.0 * time_
        side = np.where(rng.random(n_cells) < 0.5, 1.0, -1.0)
        after = np.clip(position - 1.0, 0.0, None)
        coords = np.column_stack([position, side * after])
    rows, cols = np.array(edges).T
    adjacency = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(len(nodes), len(nodes)))
    adata = AnnData(X=matrix, obs=pd.DataFrame(index=[f"c{i}" for i in range(n_cells)]),
                    var=pd.DataFrame(index=[f"g{j}" for j in range(n_genes)]))
    adata.obsm["X_pca"] = coords
    adata.uns["bench"] = {"method": "bench", "nodes": nodes, "space": "X_pca", "adjacency": adjacency + adjacency.T}
    return adata, len(nodes)


def run_one(case: str, n_cells: int, n_genes: int, density: float) -> dict:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    adata, n_nodes = make_data(n_cells, n_genes, density, "line" if case == "trends" else "y")
    sks.tl.root(adata, "bench", node=0)
    sks.tl.pseudotime(adata, "bench")
    matrix_gb = (adata.X.data.nbytes + adata.X.indices.nbytes + adata.X.indptr.nbytes) / 1024**3
    before_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    start = time.perf_counter()
    if case == "trends":
        sks.tl.trends(adata, "bench", path=(0, n_nodes - 1))
        key, significant = "bench_trends", "bench_trends_qval"
    elif case == "branch_test":
        sks.tl.branch_test(adata, "bench", branch_point=N_NODES // 3)
        key, significant = "bench_branch_test", "bench_branch_test_qval"
    elif case == "fork_test":
        sks.tl.fork_test(adata, "bench", branch_point=N_NODES // 3)
        key, significant = "bench_fork_test", "bench_fork_test_qval"
    elif case == "activation":
        sks.tl.activation(adata, "bench")
        key, significant = "bench_activation", None
    else:
        sks.tl.association_test(adata, "bench")
        key, significant = "bench_association", "bench_association_qval"
    elapsed = time.perf_counter() - start
    if f"{key}_time" in adata.obs:
        n_cells_used = int(np.isfinite(adata.obs[f"{key}_time"]).sum())
    else:  # the association test uses every cell with a pseudotime
        n_cells_used = int(np.isfinite(adata.obs["bench_pseudotime"]).sum())
    return {
        "case": case,
        "n_cells": n_cells,
        "n_cells_used": n_cells_used,
        "n_genes": n_genes,
        "nnz": int(adata.X.nnz),
        "matrix_gb": matrix_gb,
        "seconds": elapsed,
        "q_below_0.05": int((adata.var[significant] < 0.05).sum()) if significant else
        int(np.isfinite(adata.var["bench_activation_time"]).sum()),
        "peak_rss_before_gb": before_gb,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-cells", type=int, default=100_000)
    parser.add_argument("--n-genes", type=int, default=20_000)
    parser.add_argument("--density", type=float, default=0.1)
    parser.add_argument("--cases", default="trends,branch_test,fork_test,association_test,activation")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: run a single case
    args = parser.parse_args()

    if args.one is not None:
        print(json.dumps(run_one(args.one, args.n_cells, args.n_genes, args.density)))
        return

    rows = []
    for case in args.cases.split(","):
        command = [sys.executable, __file__, "--one", case, "--n-cells", str(args.n_cells), "--n-genes",
                   str(args.n_genes), "--density", str(args.density)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(output.strip().splitlines()[-1]))
        print(f"done {case}", file=sys.stderr, flush=True)

    print(f"Gene trends on sparse CSR float32 expression: {args.n_cells:,} cells × {args.n_genes:,} genes, "
          f"{args.density:.0%} non-zeros")
    print()
    print("| call | cells fitted | non-zeros | matrix (GB) | wall time (s) | peak RSS before / after the call (GB) "
          "| genes with q < 0.05 (activation: genes timed) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| `tl.{row['case']}` | {row['n_cells_used']:,} | {row['nnz']:,} | {row['matrix_gb']:.2f} | "
            f"{row['seconds']:.1f} | {row['peak_rss_before_gb']:.2f} / {row['peak_rss_gb']:.2f} | "
            f"{row['q_below_0.05']:,} |"
        )


if __name__ == "__main__":
    main()
