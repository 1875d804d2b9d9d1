"""Generated branching trajectories with ground truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._docs import dataset_doc


@dataset_doc
def branching(
    n_cells: int = 1000,
    *,
    n_leaves: int = 2,
    n_dims: int = 50,
    noise: float = 0.05,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Cells along a branching tree embedded in ``n_dims`` noisy dimensions.

    The tree starts with a trunk at the root and forks ``n_leaves - 1`` times
    (each fork a bifurcation; the trunk continues through every fork), so it
    has ``n_leaves - 1`` branch points, ``n_leaves`` tips besides the root and
    ``2 · n_leaves - 1`` branches. Branches are unit-length segments that leave
    their fork at ±50° in a plane and bow gently out of it; the 3-D skeleton is
    rotated into ``n_dims`` dimensions by a random orthonormal map and
    isotropic Gaussian noise of standard deviation ``noise`` is added in every
    dimension. Cells are spread uniformly along the tree.

    Parameters
    ----------
    n_cells
        Number of cells.
    n_leaves
        Number of tips other than the root (2, 3 or 4 are typical; at least 2).
    n_dims
        Number of features (≥ 3).
    noise
        Standard deviation of the Gaussian noise per feature, relative to a
        branch length of 1.
    {random_state_stored}

    Returns
    -------
    AnnData with ``X`` (cells × features, float32) and
    ``obs["true_pseudotime"]`` (distance from the root along the tree),
    ``obs["true_branch"]`` (categorical: ``"trunk"``, ``"branch_1"``, …) and
    ``uns["branching"]`` (the generating parameters).
    """
    n_cells = check_integer("n_cells", n_cells, low=3)
    n_leaves = check_integer("n_leaves", n_leaves, low=2, role="number of tips besides the root")
    n_dims = check_integer("n_dims", n_dims, low=3)
    noise = check_positive("noise", noise, allow_zero=True)
    random_state = check_random_state(random_state)
    rng = np.random.default_rng(random_state)

    starts, directions, start_times, names = branch_skeleton(n_leaves)
    n_segments = len(names)
    segment = np.sort(rng.integers(n_segments, size=n_cells))
    position = rng.uniform(0.0, 1.0, size=n_cells)

    plane = starts[segment] + position[:, None] * directions[segment]
    bow = 0.15 * np.sin(np.pi * position) * np.where(segment % 2 == 0, 1.0, -1.0)
    skeleton = np.column_stack([plane, bow])

    rotation, _ = np.linalg.qr(rng.standard_normal((n_dims, 3)))
    values = skeleton @ rotation.T + noise * rng.standard_normal((n_cells, n_dims))

    obs = pd.DataFrame(
        {
            "true_pseudotime": start_times[segment] + position,
            "true_branch": pd.Categorical.from_codes(segment, categories=names),
        },
        index=[f"cell_{i}" for i in range(n_cells)],
    )
    var = pd.DataFrame(index=[f"feature_{j}" for j in range(n_dims)])
    return AnnData(
        X=values.astype(np.float32),
        obs=obs,
        var=var,
        uns={
            "branching": {
                "n_leaves": n_leaves,
                "n_dims": n_dims,
                "noise": noise,
                "random_state": random_state,
            }
        },
    )


def branch_skeleton(n_leaves: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
    """Start point, direction (unit length) and start time of every branch of :func:`branching`'s tree
    with ``n_leaves`` tips, in the plane, and the branches' names (``"trunk"``, ``"branch_1"``, …).

    Shared with ``datasets.toy_tree``, the same tree drawn in the plane without the bow and rotation.
    """
    angle = np.deg2rad(50.0)

    def rotate(vector, theta):
        c, s = np.cos(theta), np.sin(theta)
        return np.array([c * vector[0] - s * vector[1], s * vector[0] + c * vector[1]])

    starts = [np.zeros(2)]
    directions = [np.array([1.0, 0.0])]
    start_times = [0.0]
    names = ["trunk"]
    stem = 0  # the branch that continues through the next fork
    for fork in range(n_leaves - 1):
        fork_point = starts[stem] + directions[stem]
        fork_time = start_times[stem] + 1.0
        side = 1.0 if fork % 2 == 0 else -1.0
        for turn in (side, -side):  # the tip branch first, then the continuing one
            starts.append(fork_point)
            directions.append(rotate(directions[stem], turn * angle))
            start_times.append(fork_time)
            names.append(f"branch_{len(names)}")
        stem = len(names) - 1
    return np.array(starts), np.array(directions), np.array(start_times), names
