"""DDRTree + ``tl.root`` + ``tl.pseudotime`` on a zarr store of 10⁷ cells, on a 2-worker LocalCluster.

The cells are generated chunk by chunk (the 3-tip tree of ``datasets.branching``,
rotated into ``--dims`` dimensions by one fixed orthonormal map, with Gaussian
noise) and written to a zarr store on disk; the fit then opens the store lazily
and never loads it. Reports wall time, the driver's peak resident memory
(``resource.getrusage``) and each worker's, the number of branch points and the
pseudotime Spearman correlation against the generating tree (on a sample).

Usage::

    python benchmarks/distributed.py --cells 10000000 --store /tmp/cells.zarr
    python benchmarks/distributed.py --cells 1000000 --workers 2 --chunk 250000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time

# this file is named like the dask.distributed package: keep its folder off the import path
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]

import numpy as np  # noqa: E402

N_LEAVES = 3
NOISE = 0.05


def _chunk(block_id_seed: np.ndarray, size: int, dims: int, rotation: np.ndarray) -> np.ndarray:
    """One chunk of cells and, in the last column, their true pseudotime."""
    from scskeleton.datasets._branching import branch_skeleton

    rng = np.random.default_rng(int(block_id_seed[0, 0]))
    starts, directions, start_times, names = branch_skeleton(N_LEAVES)
    segment = rng.integers(len(names), size=size)
    position = rng.uniform(0.0, 1.0, size=size)
    plane = starts[segment] + position[:, None] * directions[segment]
    bow = 0.15 * np.sin(np.pi * position) * np.where(segment % 2 == 0, 1.0, -1.0)
    values = np.column_stack([plane, bow]) @ rotation.T + NOISE * rng.standard_normal((size, dims))
    return np.column_stack([values, start_times[segment] + position]).astype(np.float32)


def generate(store: str, n_cells: int, dims: int, chunk: int) -> None:
    import dask.array as da

    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((dims, 3)))
    n_chunks = -(-n_cells // chunk)
    sizes = [min(chunk, n_cells - i * chunk) for i in range(n_chunks)]
    seeds = da.from_array(np.arange(1, n_chunks + 1).reshape(-1, 1), chunks=(1, 1))
    cells = da.concatenate(
        [
            seeds[i : i + 1].map_blocks(_chunk, sizes[i], dims, rotation, chunks=(sizes[i], dims + 1), dtype=np.float32)
            for i in range(n_chunks)
        ]
    )
    da.to_zarr(cells[:, :dims], os.path.join(store, "X_pca"), overwrite=True)
    da.to_zarr(cells[:, dims], os.path.join(store, "true_pseudotime"), overwrite=True)


def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def run(store: str, workers: int, memory_limit: str) -> dict:
    import anndata as ad
    import dask.array as da
    import pandas as pd
    import scanpy as sc
    from distributed import Client, LocalCluster
    from scipy.stats import spearmanr

    import scskeleton as sks

    sc.settings.verbosity = 1
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, memory_limit=memory_limit, dashboard_address=None
    )
    client = Client(cluster)
    cells = da.from_zarr(os.path.join(store, "X_pca"))
    truth = da.from_zarr(os.path.join(store, "true_pseudotime")).compute().astype(float)
    n_cells = cells.shape[0]
    adata = ad.AnnData(obs=pd.DataFrame({"true_pseudotime": truth}, index=pd.RangeIndex(n_cells).astype(str)))
    adata.obsm["X_pca"] = cells
    del truth
    rss_input = _peak_rss_gb()

    start = time.perf_counter()
    sks.tl.ddrtree(adata)
    fitted = time.perf_counter()
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    done = time.perf_counter()

    sample = np.random.default_rng(0).choice(n_cells, size=min(n_cells, 200_000), replace=False)
    rho = spearmanr(adata.obs["ddrtree_pseudotime"].to_numpy()[sample], adata.obs["true_pseudotime"].to_numpy()[sample])[0]
    worker_rss = client.run(_peak_rss_gb)
    entry = adata.uns["ddrtree"]
    result = {
        "n_cells": int(n_cells),
        "dims": int(cells.shape[1]),
        "chunks": int(cells.numblocks[0]),
        "workers": workers,
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "fit_s": round(fitted - start, 1),
        "root_pseudotime_s": round(done - fitted, 1),
        "total_s": round(done - start, 1),
        "driver_rss_before_fit_gb": round(rss_input, 2),
        "driver_peak_rss_gb": round(_peak_rss_gb(), 2),
        "worker_peak_rss_gb": [round(value, 2) for value in worker_rss.values()],
        "branch_points": int(len(entry["branch_points"])),
        "spearman": round(float(rho), 4),
    }
    client.close()
    cluster.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=10_000_000)
    parser.add_argument("--dims", type=int, default=30)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-limit", default="3GB", help="per worker (distributed spills and pauses above it)")
    parser.add_argument("--store", default="/tmp/scskeleton_cells.zarr")
    parser.add_argument("--reuse", action="store_true", help="keep an existing store of the right size")
    args = parser.parse_args()
    if not (args.reuse and os.path.exists(os.path.join(args.store, "X_pca"))):
        start = time.perf_counter()
        generate(args.store, args.cells, args.dims, args.chunk)
        print(f"generated {args.cells} cells in {time.perf_counter() - start:.0f} s", flush=True)
    print(json.dumps(run(args.store, args.workers, args.memory_limit)), flush=True)


if __name__ == "__main__":
    main()
