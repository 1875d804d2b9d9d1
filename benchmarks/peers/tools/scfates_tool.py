"""scFates: ``scf.tl.tree`` (SimplePPT or ElPiGraph), ``scf.tl.root`` at the root cell's node, ``scf.tl.pseudotime``.

Run with ``/work/peers/scfates/bin/python``. Protocol (shared part in
``_common.py``), on ``use_rep="X_pca"``, ``device="cpu"``, ``seed=0``:

* ``--method ppt``: scFates' tree tutorial: ``sigma =
  scf.tl.explore_sigma(adata, Nodes, use_rep="X_pca", seed=0)`` (timed, part
  of the fit), then ``scf.tl.tree(method="ppt", Nodes, ppt_sigma=sigma,
  ppt_lambda=100, ppt_nsteps=200)``. ``Nodes = min(2000, N // 2)``: what
  scFates' default ``Nodes=None`` means (its code gives 2000 nodes to any
  N > 1000, more nodes than cells below 2,000 cells, and simpleppt then fails
  drawing them). At the function's defaults (``ppt_lambda=1``,
  ``ppt_nsteps=50``) the tree grows spurious zero-length segments and
  ``scf.tl.pseudotime`` fails (``benchmarks/peers_rpg_scfates.py``).
* ``--method epg``: ``scf.tl.tree(method="epg", Nodes=50)`` (its docstring's
  range for ElPiGraph is 10–100 nodes; the default ``None`` would be 2000),
  ElPiGraph's parameters at scFates' defaults.
* root: the node holding most of the root cell's soft assignment,
  ``argmax(obsm["X_R"][root])``, given to ``scf.tl.root(adata, node)``;
* pseudotime: ``scf.tl.pseudotime(adata, n_jobs=threads, n_map=1, seed=0)``.

Per cell: ``obs["t"]`` and ``obs["seg"]``; no fate assignment. Branch points:
``len(uns["graph"]["forks"])``.
"""

from __future__ import annotations

import time

import numpy as np
from _common import codes, parse_args, read, recording, save, versions, warm_up

import scFates as scf

EPG_NODES = 50


def run(adata, root: int, method: str, threads: int) -> dict:
    """Tree, root and pseudotime on ``adata`` (modified); the result and what was chosen."""
    chosen = {}
    with recording() as caught:
        start = time.perf_counter()
        if method == "ppt":
            nodes = min(2000, adata.n_obs // 2)
            chosen["ppt_sigma"] = float(scf.tl.explore_sigma(adata, Nodes=nodes, use_rep="X_pca", seed=0))
            scf.tl.tree(adata, method="ppt", Nodes=nodes, use_rep="X_pca", ppt_sigma=chosen["ppt_sigma"],
                        ppt_lambda=100, ppt_nsteps=200, device="cpu", seed=0)
        else:
            scf.tl.tree(adata, method="epg", Nodes=EPG_NODES, use_rep="X_pca", device="cpu", seed=0)
        chosen["root_node"] = int(np.asarray(adata.obsm["X_R"][root]).argmax())
        scf.tl.root(adata, chosen["root_node"])
        scf.tl.pseudotime(adata, n_jobs=threads, n_map=1, seed=0)
        seconds = time.perf_counter() - start
    variant = {
        "pseudotime": adata.obs["t"].to_numpy(float),
        "segment": codes(adata.obs["seg"].astype(object).to_numpy()),
        "n_branch_points": len(adata.uns["graph"]["forks"]),
        "seconds": seconds,
        "warnings": caught,
    }
    return {"variant": variant, "chosen": chosen}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], methods=("ppt", "epg"))
    scf.settings.verbosity = 0
    adata, root = read(args.data)
    info = warm_up(lambda a, r: run(a, r, args.method, args.threads), adata, root, args.no_warmup)
    result = run(adata, root, args.method, args.threads)
    info.update(result["chosen"], n_nodes=int(adata.uns["graph"]["F"].shape[1]),
                versions=versions("scFates", "simpleppt", "elpigraph-python", "scanpy", "numpy", "numba"))
    save(args.out, {args.method: result["variant"]}, info)


if __name__ == "__main__":
    main()
