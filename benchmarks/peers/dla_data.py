"""PHATE's diffusion-limited-aggregation tree (``phate.tree.gen_dla``) with its ground truth.

Run with the interpreter of a virtual environment that has ``phate`` and
``anndata`` (never the main one)::

    python3 -m venv /work/peers/phate && /work/peers/phate/bin/pip install phate anndata
    /work/peers/phate/bin/python benchmarks/peers/dla_data.py --seed 37 --out dla-37.h5ad

The data are ``phate.tree.gen_dla``'s own, at its defaults unless told
(``--dims 100 --branches 20 --branch-length 100 --multiplier 2 --sigma 4``,
seed 37). gen_dla (phate 2.0.0) draws, from numpy's global stream after
``np.random.seed(seed)``: a first random walk of ``branch-length`` points in
``dims`` dimensions (the cumulative sum of steps uniform in [-1, 1] for the
default multiplier 2), then, for each further branch, an index ``ind`` drawn
uniformly from ``0 … branch-length - 1`` and a walk of its own, added to the
point ``M[ind]``. Since ``ind`` indexes the first ``branch-length`` rows, every
branch hangs from the *first* walk (the backbone): the tree is a comb, never a
deeper hierarchy. Last, Gaussian noise of standard deviation ``sigma`` is added
to every point; the labels gen_dla returns are the branch of each row (row
``k`` is point ``k % branch-length`` of branch ``k // branch-length``).

gen_dla does not return the attachment indices, so they are recovered by
replaying its draws on the same seed, and the replay is checked against
gen_dla's output bit for bit (the script stops if phate's generator changed).

Truth written (one cell per row, in gen_dla's order):

* ``obs["time"]``: steps from the backbone's first point along the tree:
  ``j`` for point ``j`` of the backbone, ``ind + 1 + j`` for point ``j`` of a
  side branch attached at backbone point ``ind`` (its first point is one step
  from ``M[ind]``).
* ``obs["edge"]``: the segment: the backbone is cut at its attachment points
  (``"backbone a-b"``, steps ``a`` (excluded, except 0) to ``b``), each side
  branch is one segment (``"branch i"``).
* ``obs["fate"]``: for cells of a terminal segment (one that ends in a node of
  degree 1: every side branch, and the backbone's last stretch unless a branch
  continues it) that segment's name, else ``"trunk"``; ``obs["tip"]``: cells
  of a terminal segment in its last 30 %.
* ``obs["root_cell"]``: True for the backbone's first point only.
* ``uns["truth"]["n_branch_points"]``: backbone points of degree ≥ 3 (degree:
  2 inside the backbone, 1 at its ends, plus one per branch attached there).
"""

from __future__ import annotations

import argparse

import anndata as ad
import numpy as np
import pandas as pd
import phate


def attachment_points(*, dims: int, branches: int, length: int, multiplier: float, sigma: float, seed: int,
                      data: np.ndarray) -> np.ndarray:
    """The backbone index each side branch starts from, by replaying gen_dla's draws; checked against ``data``."""
    np.random.seed(seed)
    clean = [np.cumsum(-1 + multiplier * np.random.rand(length, dims), 0)]
    attach = []
    for _ in range(branches - 1):
        attach.append(np.random.randint(length))
        clean.append(np.cumsum(-1 + multiplier * np.random.rand(length, dims), 0) + clean[0][attach[-1]])
    replayed = np.concatenate(clean) + np.random.normal(0, sigma, (branches * length, dims))
    if not np.array_equal(replayed, data):
        raise SystemExit("replaying phate.tree.gen_dla's draws does not give its output: its generator changed; "
                         "update attachment_points().")
    return np.asarray(attach, dtype=int)


def truth(attach: np.ndarray, *, branches: int, length: int) -> tuple[pd.DataFrame, int]:
    """Per-cell truth (see the module docstring) and the number of branch points."""
    n_attached = np.bincount(attach, minlength=length)
    degree = np.full(length, 2) + n_attached
    degree[0] -= 1
    degree[-1] -= 1
    cuts = np.unique(np.concatenate([[0], attach, [length - 1]]))

    step = np.tile(np.arange(length), branches)
    branch = np.repeat(np.arange(branches), length)
    time = np.where(branch == 0, step, np.concatenate([[0], attach + 1])[branch] + step).astype(float)

    # backbone segments: (cuts[k], cuts[k + 1]], the first one from step 0 included
    backbone_segment = np.clip(np.searchsorted(cuts, np.arange(length), side="left") - 1, 0, None)
    seg_lo, seg_hi = cuts[:-1], cuts[1:]
    segment_names = [f"backbone {lo}-{hi}" for lo, hi in zip(seg_lo, seg_hi)]
    on_backbone = branch == 0
    k = backbone_segment[step]
    edge = np.where(on_backbone, np.array(segment_names, dtype=object)[k], [f"branch {b}" for b in branch])
    # fraction along the segment and whether it is terminal (its end node has degree 1)
    fraction = np.where(on_backbone, (step - seg_lo[k]) / np.maximum(seg_hi[k] - seg_lo[k], 1), step / (length - 1))
    terminal = np.where(on_backbone, (seg_hi[k] == length - 1) & (degree[length - 1] == 1), True)
    obs = pd.DataFrame({
        "time": time,
        "edge": pd.Categorical(edge),
        "fate": pd.Categorical(np.where(terminal, edge, "trunk")),
        "tip": terminal & (fraction >= 0.7),
        "root_cell": on_backbone & (step == 0),
        "dla_branch": branch,
    })
    return obs, int((degree >= 3).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, default=100)
    parser.add_argument("--branches", type=int, default=20)
    parser.add_argument("--branch-length", type=int, default=100)
    parser.add_argument("--multiplier", type=float, default=2.0)
    parser.add_argument("--sigma", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    data, labels = phate.tree.gen_dla(n_dim=args.dims, n_branch=args.branches, branch_length=args.branch_length,
                                      rand_multiplier=args.multiplier, seed=args.seed, sigma=args.sigma)
    attach = attachment_points(dims=args.dims, branches=args.branches, length=args.branch_length,
                               multiplier=args.multiplier, sigma=args.sigma, seed=args.seed, data=data)
    obs, n_branch_points = truth(attach, branches=args.branches, length=args.branch_length)
    if not np.array_equal(obs["dla_branch"].to_numpy(), labels):
        raise SystemExit("gen_dla's branch labels are not row // branch_length: its layout changed.")
    obs.index = [f"cell{i}" for i in range(len(obs))]
    adata = ad.AnnData(data.astype(np.float32), obs=obs)
    adata.var_names = [f"dim{i}" for i in range(args.dims)]
    adata.uns["truth"] = {
        "n_branch_points": n_branch_points,
        "attachment_steps": attach,
        "simulator": f"phate {phate.__version__} tree.gen_dla",
        "params": {"n_dim": args.dims, "n_branch": args.branches, "branch_length": args.branch_length,
                   "rand_multiplier": args.multiplier, "sigma": args.sigma, "seed": args.seed},
    }
    adata.write_h5ad(args.out)
    print(f"{args.out}: {adata.n_obs} cells × {adata.n_vars} dims, {n_branch_points} branch points")


if __name__ == "__main__":
    main()
