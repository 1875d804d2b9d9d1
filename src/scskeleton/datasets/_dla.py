"""A diffusion-limited-aggregation tree of random walks (the PHATE paper's test data)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._docs import dataset_doc


@dataset_doc
def dla_tree(
    n_cells: int = 2000,
    *,
    n_dims: int = 50,
    n_branches: int = 5,
    branch_length: int = 100,
    noise: float = 4.0,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Cells along a tree of Gaussian random walks, as in PHATE's DLA tree.

    In the spirit of the artificial tree of Moon et al. (PHATE, Nat.
    Biotechnol. 2019): a backbone random walk of ``branch_length`` steps
    starts at the origin of ``n_dims`` dimensions (each step i.i.d.
    N(0, 1) per dimension, so the walk is the cumulative sum of the steps).
    Each of the ``n_branches - 1`` side branches then starts at a random
    vertex of the tree grown so far (uniform over the vertices that are not
    the root, a tip or an earlier branch's start, so all branch points are
    distinct) and walks ``branch_length`` steps of its own. The tree thus has
    ``n_branches - 1`` branch points (each of degree 3), ``n_branches`` tips
    and the root: with a backbone and 4 side branches, 4 branch points and
    5 tips besides the root.

    Cells are split evenly over the branches; a cell sits at a uniform
    position ``t`` in [0, ``branch_length``] steps along its branch (linearly
    interpolated between the walk's vertices) and gets isotropic Gaussian
    noise of standard deviation ``noise`` in every dimension. Its true
    pseudotime is the geodesic distance, in steps, from the backbone's start
    along the tree: the pseudotime of its branch's start vertex plus ``t``.

    Parameters
    ----------
    n_cells
        Number of cells (at least 2 per branch).
    n_dims
        Number of dimensions (≥ 2).
    n_branches
        Number of branches: the backbone and ``n_branches - 1`` side branches
        (≥ 1).
    branch_length
        Steps per branch (≥ 2). A walk of ``n`` steps spreads by about
        √n per dimension.
    noise
        Standard deviation of the Gaussian noise per dimension, in units of
        the step's standard deviation. The default 4 blurs each walk over
        about 30 steps, so a kNN graph joins the cells of a branch into one
        connected, noisy curve while every branch stays resolved (a kNN
        classifier on 20 PCs recovers ``true_branch`` for nearly every cell);
        below about 2 the kNN graph breaks the walks into pieces.
        PHATE's own generator uses about 7 in these units, in 100
        dimensions.
    {random_state_stored}

    Returns
    -------
    AnnData with ``X`` (cells × dimensions, dense float32);
    ``obs["true_pseudotime"]`` (float, in steps), ``obs["true_branch"]``
    (categorical ``"branch_0"`` (the backbone), ``"branch_1"``, …);
    ``uns["dla_tree"]`` with ``n_branches``, ``n_branch_points``
    (``n_branches - 1``), ``n_tips`` (``n_branches``), ``branch_parent``
    (−1 for the backbone), ``branch_start_step`` (the vertex of the parent
    where a branch starts), ``branch_start_time`` (its pseudotime),
    ``branch_length`` and the generating parameters.
    """
    n_branches = check_integer("n_branches", n_branches, low=1)
    n_cells = check_integer("n_cells", n_cells, low=2 * n_branches, role="at least 2 cells per branch")
    n_dims = check_integer("n_dims", n_dims, low=2)
    branch_length = check_integer("branch_length", branch_length, low=2, role="random-walk steps per branch")
    noise = check_positive("noise", noise, allow_zero=True)
    random_state = check_random_state(random_state)
    rng = np.random.default_rng(random_state)

    # The walks: vertices[b] is (branch_length + 1) × n_dims, vertex 0 its start point.
    vertices = np.zeros((n_branches, branch_length + 1, n_dims))
    parent = np.full(n_branches, -1, dtype=np.int64)
    start_step = np.zeros(n_branches, dtype=np.int64)
    start_time = np.zeros(n_branches)
    free = np.zeros((n_branches, branch_length + 1), dtype=bool)  # vertices a side branch may start at
    for b in range(n_branches):
        if b > 0:
            candidates = np.flatnonzero(free[:b].ravel())
            pick = candidates[rng.integers(candidates.size)]
            parent[b], start_step[b] = divmod(int(pick), branch_length + 1)
            free[parent[b], start_step[b]] = False
            start_time[b] = start_time[parent[b]] + start_step[b]
            vertices[b, 0] = vertices[parent[b], start_step[b]]
        vertices[b, 1:] = vertices[b, 0] + np.cumsum(rng.standard_normal((branch_length, n_dims)), axis=0)
        free[b, 1:branch_length] = True  # not the start (the parent's vertex) nor the tip

    # The cells: evenly split over branches, uniform along each, plus noise.
    per_branch = np.full(n_branches, n_cells // n_branches)
    per_branch[: n_cells % n_branches] += 1
    branch = np.repeat(np.arange(n_branches), per_branch)
    t = rng.uniform(0.0, branch_length, n_cells)
    below = np.minimum(np.floor(t).astype(np.int64), branch_length - 1)
    frac = (t - below)[:, None]
    values = (1.0 - frac) * vertices[branch, below] + frac * vertices[branch, below + 1]
    values += noise * rng.standard_normal(values.shape)

    names = [f"branch_{b}" for b in range(n_branches)]
    obs = pd.DataFrame(
        {
            "true_pseudotime": start_time[branch] + t,
            "true_branch": pd.Categorical.from_codes(branch, categories=names),
        },
        index=[f"cell_{i}" for i in range(n_cells)],
    )
    uns = {
        "n_branches": n_branches,
        "n_branch_points": n_branches - 1,
        "n_tips": n_branches,
        "branches": np.array(names),
        "branch_parent": parent,
        "branch_start_step": start_step,
        "branch_start_time": start_time,
        "branch_length": np.full(n_branches, branch_length, dtype=np.int64),
        "n_dims": n_dims,
        "noise": noise,
        "random_state": random_state,
    }
    return AnnData(
        X=values.astype(np.float32),
        obs=obs,
        var=pd.DataFrame(index=[f"feature_{j}" for j in range(n_dims)]),
        uns={"dla_tree": uns},
    )
