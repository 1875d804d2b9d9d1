"""Gene expression with known trends along a branching trajectory."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._branching import branching
from ._docs import dataset_doc

#: Pseudotime of the fork in ``datasets.branching`` (the trunk has unit length).
FORK = 1.0
PATTERNS = ("branch", "trend", "null")


@dataset_doc
def branching_expression(
    n_cells: int = 1000,
    n_genes: int = 200,
    *,
    n_branch_genes: int = 40,
    n_trend_genes: int = 40,
    noise: float = 0.5,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Log-expression-like genes with known trends along a tree with one fork.

    Cells are those of :func:`branching` with two tips: a trunk from the root
    (true pseudotime 0 to 1) that forks into ``branch_1`` and ``branch_2``
    (pseudotime 1 to 2). Each gene's mean μ(t, branch) follows one of three
    patterns, plus Gaussian noise of standard deviation ``noise``:

    ``"branch"`` (the first ``n_branch_genes`` genes)
        Flat on the trunk; after the fork it rises by an amplitude A on one
        branch and falls by A on the other, A·s(t − 1) with the smooth step
        s(u) = 3u² − 2u³; which branch rises is random per gene.
    ``"trend"`` (the next ``n_trend_genes``)
        The same curve of pseudotime on every branch, rising or falling by A:
        a straight ramp over the whole tree, a logistic step (scale 0.2), or a
        transient bump (standard deviation 0.3), centred between 0.3 and 1.7.
    ``"null"`` (the rest)
        Constant.

    Baselines are uniform in [2, 4] and amplitudes in [1.5, 3], so the values
    behave like log-normalised counts (rarely negative).

    Parameters
    ----------
    n_cells
        Number of cells.
    n_genes
        Number of genes, at least ``n_branch_genes + n_trend_genes``.
    n_branch_genes, n_trend_genes
        How many genes follow the branch-dependent and the shared pattern.
    noise
        Standard deviation of the Gaussian noise on every value.
    {random_state_stored}

    Returns
    -------
    AnnData with ``X`` (cells × genes, float32); ``obs["true_pseudotime"]``,
    ``obs["true_branch"]`` (``"trunk"``, ``"branch_1"``, ``"branch_2"``);
    ``var["true_pattern"]`` (``"branch"``, ``"trend"``, ``"null"``),
    ``var["true_branch_dependent"]`` (bool); ``layers["true_mean"]`` (the
    noiseless μ of every cell and gene) and ``uns["branching_expression"]``
    (the generating parameters).
    """
    n_cells = check_integer("n_cells", n_cells, low=3)
    n_branch_genes = check_integer("n_branch_genes", n_branch_genes, low=0)
    n_trend_genes = check_integer("n_trend_genes", n_trend_genes, low=0)
    n_genes = check_integer(
        "n_genes", n_genes, low=max(n_branch_genes + n_trend_genes, 1), role="at least n_branch_genes + n_trend_genes"
    )
    noise = check_positive("noise", noise, allow_zero=True)
    random_state = check_random_state(random_state)

    cells = branching(n_cells, n_leaves=2, n_dims=3, noise=0.0, random_state=random_state)
    rng = np.random.default_rng([random_state, 1])  # a stream of its own, apart from the geometry's
    time = cells.obs["true_pseudotime"].to_numpy()
    branch = cells.obs["true_branch"].to_numpy()
    pattern = np.repeat(PATTERNS, [n_branch_genes, n_trend_genes, n_genes - n_branch_genes - n_trend_genes])

    base = rng.uniform(2.0, 4.0, size=n_genes)
    amplitude = rng.uniform(1.5, 3.0, size=n_genes)
    mean = np.repeat(base[None, :], n_cells, axis=0)

    is_branch = pattern == "branch"
    rising = np.where(rng.random(n_genes) < 0.5, 1.0, -1.0)  # +1: rises on branch_1, falls on branch_2
    after = np.clip(time - FORK, 0.0, 1.0)
    step = 3.0 * after**2 - 2.0 * after**3
    side = np.select([branch == "branch_1", branch == "branch_2"], [1.0, -1.0], 0.0)
    mean[:, is_branch] += (side * step)[:, None] * (rising * amplitude)[None, is_branch]

    is_trend = pattern == "trend"
    shape = rng.integers(3, size=n_genes)  # 0 ramp, 1 logistic step, 2 bump
    direction = np.where(rng.random(n_genes) < 0.5, 1.0, -1.0)
    centre = rng.uniform(0.3, 1.7, size=n_genes)
    ramp = time[:, None] / (2.0 * FORK)
    logistic = 1.0 / (1.0 + np.exp(-(time[:, None] - centre[None, :]) / 0.2))
    bump = np.exp(-0.5 * ((time[:, None] - centre[None, :]) / 0.3) ** 2)
    curve = np.where(shape == 0, ramp, np.where(shape == 1, logistic, bump))
    curve = np.where(direction > 0, curve, 1.0 - curve)
    mean[:, is_trend] += (amplitude * curve)[:, is_trend]

    values = mean + noise * rng.standard_normal(mean.shape)
    var = pd.DataFrame(
        {
            "true_pattern": pd.Categorical(pattern, categories=list(PATTERNS)),
            "true_branch_dependent": is_branch,
        },
        index=[f"gene_{j}" for j in range(n_genes)],
    )
    return AnnData(
        X=values.astype(np.float32),
        obs=cells.obs.copy(),
        var=var,
        layers={"true_mean": mean.astype(np.float32)},
        uns={
            "branching_expression": {
                "n_branch_genes": n_branch_genes,
                "n_trend_genes": n_trend_genes,
                "noise": noise,
                "random_state": random_state,
            }
        },
    )
