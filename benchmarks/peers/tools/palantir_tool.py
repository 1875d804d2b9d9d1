"""Palantir: diffusion maps, multiscale space, ``run_palantir`` from the root cell, terminal states automatic.

Run with ``/work/peers/palantir/bin/python``. Protocol (shared part in
``_common.py``), at Palantir's defaults:

* ``palantir.utils.run_diffusion_maps(adata, pca_key="X_pca")`` (10
  components, its own 30-NN adaptive kernel on X_pca);
* ``palantir.utils.determine_multiscale_space(adata)``;
* ``palantir.core.run_palantir(adata, early_cell=<root cell's name>,
  n_jobs=threads)`` (1,200 waypoints, terminal states found by Palantir).

Per cell: ``obs["palantir_pseudotime"]``; segment and fate are both the
argmax of the fate (branch) probabilities ``obsm["palantir_fate_probabilities"]``
(one segment and no fate when Palantir finds no terminal state).
Palantir has no graph: its branch points are reported as the number of
terminal states minus one (a binary tree with that many fates).
"""

from __future__ import annotations

import time

import numpy as np
from _common import parse_args, read, recording, save, versions, warm_up

import palantir


def run(adata, root: int, threads: int) -> dict:
    with recording() as caught:
        start = time.perf_counter()
        palantir.utils.run_diffusion_maps(adata, pca_key="X_pca")
        palantir.utils.determine_multiscale_space(adata)
        palantir.core.run_palantir(adata, early_cell=adata.obs_names[root], n_jobs=threads)
        seconds = time.perf_counter() - start
    probabilities = np.asarray(adata.obsm["palantir_fate_probabilities"], dtype=float).reshape(adata.n_obs, -1)
    # no terminal state found: one segment, no fate
    branch = probabilities.argmax(axis=1) if probabilities.shape[1] else np.zeros(adata.n_obs, dtype=int)
    return {
        "pseudotime": adata.obs["palantir_pseudotime"].to_numpy(float),
        "segment": branch,
        "fate": branch if probabilities.shape[1] else None,
        "n_branch_points": max(probabilities.shape[1] - 1, 0),
        "seconds": seconds,
        "warnings": caught,
    }


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    adata, root = read(args.data)
    info = warm_up(lambda a, r: run(a, r, args.threads), adata, root, args.no_warmup)
    variant = run(adata, root, args.threads)
    info.update(n_terminal_states=variant["n_branch_points"] + 1,
                versions=versions("palantir", "scanpy", "numpy", "scikit-learn"))
    save(args.out, {"default": variant}, info)


if __name__ == "__main__":
    main()
