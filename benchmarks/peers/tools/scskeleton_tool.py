"""scskeleton: ``sks.tl.rpg`` or ``sks.tl.ddrtree``, rooted at the root cell, both pseudotime orders.

Run in the main environment (``.venv/bin/python``). Protocol (see
``_common.py`` for the shared part), all at the package's defaults:

* fit: ``sks.tl.<method>(adata, use_rep="X_pca")``;
* root: ``sks.tl.root(adata, method, cell=root)`` (the node holding most of
  the root cell's assignment);
* pseudotime: ``sks.tl.pseudotime(adata, method, order="tree")``, then, on the
  same fit, ``order="diffusion"`` (through the cells' diffusion space, over
  the prepared kNN graph). Two variants; each one's seconds are fit + root +
  its own pseudotime call (the fit is run and timed once).

Per cell: ``obs[f"{method}_pseudotime"]``, ``obs[f"{method}_segment"]`` and,
untimed after the tree order, the fate = argmax of
``sks.tl.fate_probabilities`` (the same topology serves both orders). Branch
points: ``len(uns[method]["branch_points"])``.
"""

from __future__ import annotations

import time

import numpy as np
from _common import codes, parse_args, read, recording, save, versions, warm_up

import scskeleton as sks

def run(adata, root: int, method: str) -> dict:
    """Fit, root and both orders on ``adata`` (modified); per-variant results and the phases' seconds."""
    with recording() as fit_warnings:
        start = time.perf_counter()
        getattr(sks.tl, method)(adata, use_rep="X_pca")
        sks.tl.root(adata, method, cell=root)
        fit_s = time.perf_counter() - start
    variants = {}
    for order in ("tree", "diffusion"):
        with recording() as order_warnings:
            start = time.perf_counter()
            sks.tl.pseudotime(adata, method, order=order)
            pseudotime_s = time.perf_counter() - start
        if order == "tree":
            sks.tl.fate_probabilities(adata, method)
            fate = np.asarray(adata.obsm[f"{method}_fate_probabilities"]).argmax(axis=1)
        variants[order] = {
            "pseudotime": adata.obs[f"{method}_pseudotime"].to_numpy(float),
            "segment": codes(adata.obs[f"{method}_segment"].astype(object).to_numpy()),
            "fate": fate,
            "n_branch_points": len(adata.uns[method]["branch_points"]),
            "seconds": fit_s + pseudotime_s,
            "warnings": fit_warnings + order_warnings,
            "pseudotime_s": pseudotime_s,
        }
    return {"variants": variants, "fit_and_root_s": fit_s}


def main() -> None:
    args = parse_args(__doc__.splitlines()[0], methods=("rpg", "ddrtree"))
    adata, root = read(args.data)
    info = warm_up(lambda a, r: run(a, r, args.method), adata, root, args.no_warmup)
    result = run(adata, root, args.method)
    info.update(
        fit_and_root_s=result["fit_and_root_s"],
        pseudotime_s={k: v.pop("pseudotime_s") for k, v in result["variants"].items()},
        n_nodes=int(np.asarray(adata.uns[args.method]["nodes"]).shape[0]),
        params=f"sks.tl.{args.method}(use_rep='X_pca'); sks.tl.root(cell=root); sks.tl.pseudotime(order=...)",
        versions=versions("scskeleton", "scanpy", "anndata", "numpy", "scipy"),
    )
    save(args.out, result["variants"], info)


if __name__ == "__main__":
    main()
