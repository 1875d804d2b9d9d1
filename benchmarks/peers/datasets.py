"""Prepared data sets for the peers benchmark: one h5ad per data set, the same input for every tool.

Run in the main environment::

    .venv/bin/python benchmarks/peers/datasets.py --out /work/peers/bench/prepared \\
        --counts /work/peers/data2/fork-1.h5ad /work/peers/data2/split_chain-1.h5ad \\
        --continuous /work/peers/bench/raw/dla-37.h5ad \\
        --bundled krumsiek11 toggleswitch pbmc68k_reduced --simulate 100 300 1000 10000 100000

Every written file holds only what the tools read: ``obsm["X_pca"]``, the kNN
graph of ``sc.pp.neighbors(n_neighbors=15, use_rep="X_pca", random_state=0,
transformer="sklearn")`` (``obsp["distances"]``, ``obsp["connectivities"]``,
``uns["neighbors"]``), and the truth. The exact (sklearn) kNN is what scanpy
computes below 4,096 cells anyway; above, its default pynndescent path fails
with scanpy 1.11.5 and scipy 1.17 (``'csr_array' object has no attribute
'getnnz'``). Truth fields:

* ``obs["time"]`` true pseudotime, ``obs["edge"]`` true
  segment (categorical), ``obs["fate"]`` the terminal state of a cell's
  segment or ``"trunk"``, ``obs["tip"]`` (bool: cells in the last 30 % of a
  terminal segment), ``obs["root_cell"]`` (bool; the tools start from the
  first such cell), ``uns["truth"]["n_branch_points"]`` and
  ``uns["truth"]["source"]``. Without truth (pbmc68k_reduced) only
  ``root_cell`` and ``source`` are written.

``obs["n_genes_by_counts"]`` (counts only): the genes detected per cell, as
``sc.pp.calculate_qc_metrics`` writes it. ``X_pca``: for counts, 30 PCs (``sc.pp.pca(random_state=0)``) after
``normalize_total`` and ``log1p``; for continuous data, 30 PCs of the data as
given, or the data themselves when they have at most 30 dimensions.

Sources:

* ``--counts FILE``: raw counts that already carry the truth fields above,
  e.g. SERGIO files from ``sergio_data.py``.
* ``--continuous FILE``: continuous data with the truth fields, e.g. PHATE's
  DLA trees from ``dla_data.py``.
* ``--bundled krumsiek11``: scanpy's Krumsiek et al. (2011) simulation via
  ``sks.datasets.krumsiek11()``: 4 runs of 160 steps of a boolean-network
  model (obs names ``i``, ``i-1``, ``i-2``, ``i-3``), each 80 progenitor steps
  then 80 steps of one fate (Mo, Ery, Mk, Neu). ``time`` = step in the run,
  ``edge`` = ``cell_type`` (the labels do not split the progenitors, so the
  4 runs' progenitor stretches are one segment), ``fate`` = the fate for fate
  cells, ``root_cell`` = step 0. ``n_branch_points`` = 3: the model's
  hierarchy, progenitor → MEP (Ery, Mk) and GMP (Mo, Neu); the data show it
  (at the last progenitor step the Ery and Mk runs are 0.5 apart, every other
  pair 1.5–2.2).
* ``--bundled toggleswitch``: scanpy's two-gene toggle switch, 2 runs of 100
  steps from the same state, one won by each gene. ``time`` = step,
  ``fate`` = the winning gene, ``edge`` = ``"trunk"`` while the two genes are
  within 0.2 of each other, else the fate (the commitment threshold of the
  package's tests), ``root_cell`` = step 0, ``n_branch_points`` = 1.
* ``--bundled pbmc68k_reduced``: scanpy's 700 PBMCs (scaled log expression,
  not a trajectory): no truth; ``root_cell`` = the first CD34+ cell
  (``bulk_labels``), so tools can run; only branch points, time and memory
  are reported.
* ``--simulate N``: ``sks.datasets.simulate_trajectory(N, n_fates=3,
  density="uniform", random_state=0)``, 2,000 genes of counts, 2 branch
  points; the seed fixes the tree, so every N has the same one. ``uniform``
  (cells spread along the tree) because the default ``"uneven"`` needs at
  least 125 cells. ``time`` =
  ``true_pseudotime``, ``edge`` = ``true_branch``, ``fate`` = ``true_fate`` on
  fate branches, ``tip`` = last 30 % of a fate branch, ``root_cell`` = the
  cell with the smallest true pseudotime.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import anndata as ad
import numpy as np
import pandas as pd
import scanpy as sc

import scskeleton as sks

N_PCS = 30
N_NEIGHBORS = 15
TIP_FRACTION = 0.7
SIMULATE_FATES = 3
TRUTH_OBS = ("time", "edge", "fate", "tip", "root_cell")


def prepare(adata: ad.AnnData, *, counts: bool) -> ad.AnnData:
    """X_pca (see the module docstring) and the kNN graph; returns a slim copy with truth, X_pca and the graph only."""
    adata = adata.copy()
    if counts:
        adata.X = adata.X.astype(np.float32)
        # scanpy's quality metrics, as any workflow computes them: the genes detected per cell
        adata.obs["n_genes_by_counts"] = np.asarray((adata.X > 0).sum(axis=1)).ravel()
        sc.pp.normalize_total(adata)
        sc.pp.log1p(adata)
    if counts or adata.n_vars > N_PCS:
        sc.pp.pca(adata, n_comps=min(N_PCS, adata.n_vars - 1, adata.n_obs - 1), random_state=0)
    else:
        adata.obsm["X_pca"] = np.asarray(adata.X.toarray() if hasattr(adata.X, "toarray") else adata.X, dtype=np.float32)
    sc.pp.neighbors(adata, n_neighbors=N_NEIGHBORS, use_rep="X_pca", random_state=0, transformer="sklearn")
    obs = adata.obs[[c for c in (*TRUTH_OBS, "n_genes_by_counts") if c in adata.obs]].copy()
    for column in ("edge", "fate"):
        if column in obs:
            obs[column] = pd.Categorical(obs[column].astype(str))
    return ad.AnnData(obs=obs, obsm={"X_pca": np.ascontiguousarray(adata.obsm["X_pca"], dtype=np.float32)},
                      obsp={k: adata.obsp[k] for k in ("distances", "connectivities")},
                      uns={"neighbors": adata.uns["neighbors"], "truth": dict(adata.uns.get("truth", {}))})


def check_truth(adata: ad.AnnData, source: str) -> None:
    missing = [c for c in TRUTH_OBS if c not in adata.obs]
    if missing or "n_branch_points" not in adata.uns.get("truth", {}):
        raise SystemExit(f"{source}: lacks truth fields {missing or ['uns[truth][n_branch_points]']} (see --help).")
    if not adata.obs["root_cell"].to_numpy(bool).any():
        raise SystemExit(f"{source}: no cell has root_cell True.")


def from_file(path: str) -> ad.AnnData:
    adata = ad.read_h5ad(path)
    check_truth(adata, path)
    adata.uns["truth"] = {k: v for k, v in adata.uns["truth"].items() if np.isscalar(v)}
    adata.uns["truth"]["source"] = str(path)
    return adata


def krumsiek11() -> ad.AnnData:
    adata = sks.datasets.krumsiek11()
    run_length = 160
    step = np.arange(adata.n_obs) % run_length
    label = adata.obs["cell_type"].astype(str).to_numpy()
    committed = label != "progenitor"
    fate_start = step[committed].min()
    adata.obs["time"] = step.astype(float)
    adata.obs["edge"] = label
    adata.obs["fate"] = np.where(committed, label, "trunk")
    adata.obs["tip"] = committed & ((step - fate_start) / (run_length - 1 - fate_start) >= TIP_FRACTION)
    adata.obs["root_cell"] = step == 0
    adata.uns = {"truth": {"n_branch_points": 3, "source": "scanpy krumsiek11 (sks.datasets.krumsiek11)"}}
    return adata


def toggleswitch() -> ad.AnnData:
    adata = sks.datasets.toggleswitch()
    run_length = 100
    x = np.asarray(adata.X, dtype=float)
    step = np.arange(adata.n_obs) % run_length
    run = np.arange(adata.n_obs) // run_length
    winner = np.array([f"gene {int(x[run == r][-1].argmax())}" for r in range(run.max() + 1)])[run]
    committed = np.abs(x[:, 0] - x[:, 1]) > 0.2
    adata.obs["time"] = step.astype(float)
    adata.obs["edge"] = np.where(committed, winner, "trunk")
    adata.obs["fate"] = winner
    adata.obs["tip"] = step / (run_length - 1) >= TIP_FRACTION
    adata.obs["root_cell"] = step == 0
    adata.uns = {"truth": {"n_branch_points": 1, "source": "scanpy toggleswitch (sks.datasets.toggleswitch)"}}
    return adata


def pbmc68k_reduced() -> ad.AnnData:
    adata = sc.datasets.pbmc68k_reduced()
    adata.obs["root_cell"] = (adata.obs["bulk_labels"] == "CD34+").to_numpy()
    adata.obs = adata.obs[["root_cell"]]
    adata.uns = {"truth": {"source": "scanpy pbmc68k_reduced (no truth; root: first CD34+ cell)"}}
    return adata


def simulated(n_cells: int) -> ad.AnnData:
    adata = sks.datasets.simulate_trajectory(n_cells, n_fates=SIMULATE_FATES, density="uniform", random_state=0)
    tree = adata.uns["simulate_trajectory"]
    branch = adata.obs["true_branch"].astype(str).to_numpy()
    index = {name: i for i, name in enumerate(tree["branches"])}
    b = np.array([index[name] for name in branch])
    to_fate = np.isin(np.asarray(tree["branch_end_node"]), np.asarray(tree["fates"]))[b]
    time_ = adata.obs["true_pseudotime"].to_numpy(float)
    fraction = (time_ - np.asarray(tree["branch_start_time"])[b]) / np.asarray(tree["branch_length"])[b]
    adata.obs["time"] = time_
    adata.obs["edge"] = branch
    adata.obs["fate"] = np.where(to_fate, adata.obs["true_fate"].astype(str), "trunk")
    adata.obs["tip"] = to_fate & (fraction >= TIP_FRACTION)
    adata.obs["root_cell"] = np.arange(adata.n_obs) == time_.argmin()
    adata.uns = {"truth": {"n_branch_points": int(tree["n_branch_points"]),
                           "source": f"sks.datasets.simulate_trajectory({n_cells}, n_fates={SIMULATE_FATES}, "
                                     "density='uniform', random_state=0)"}}
    return adata


BUNDLED = {"krumsiek11": krumsiek11, "toggleswitch": toggleswitch, "pbmc68k_reduced": pbmc68k_reduced}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the prepared h5ad files")
    parser.add_argument("--counts", nargs="*", default=[], help="raw-count h5ad files with truth (SERGIO)")
    parser.add_argument("--continuous", nargs="*", default=[], help="continuous h5ad files with truth (DLA trees)")
    parser.add_argument("--bundled", nargs="*", default=[], choices=sorted(BUNDLED))
    parser.add_argument("--simulate", nargs="*", type=int, default=[], help="cell counts for simulate_trajectory")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    jobs = ([(Path(p).stem, lambda p=p: from_file(p), True) for p in args.counts]
            + [(Path(p).stem, lambda p=p: from_file(p), False) for p in args.continuous]
            + [(name, BUNDLED[name], False) for name in args.bundled]
            + [(f"simulate-{n}", lambda n=n: simulated(n), True) for n in args.simulate])
    sc.settings.verbosity = 0
    for name, load, counts in jobs:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            prepared = prepare(load(), counts=counts)
        path = out / f"{name}.h5ad"
        prepared.write_h5ad(path)
        truth = prepared.uns["truth"].get("n_branch_points", "unknown")
        print(f"{path}: {prepared.n_obs} cells, X_pca {prepared.obsm['X_pca'].shape[1]} dims, "
              f"{truth} branch points ({time.perf_counter() - start:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
