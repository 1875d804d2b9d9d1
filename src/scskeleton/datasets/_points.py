"""Point clouds with ground truth as AnnData: the checks and the wrapping that the generated shapes,
manifolds and structures share."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive


def checked_points(n_cells, noise, random_state) -> tuple[np.random.Generator, int, float]:
    """The generator of a point cloud's draws (from the checked ``random_state``), and the checked
    number of points (≥ 3) and noise (≥ 0)."""
    n_cells = check_integer("n_cells", n_cells, low=3)
    noise = check_positive("noise", noise, allow_zero=True)
    random_state = check_random_state(random_state)
    return np.random.default_rng(random_state), n_cells, noise


def points_adata(points: np.ndarray, truth: dict, features: list[str]) -> AnnData:
    """The points as ``X`` (float32) and ``obsm["X_pca"]`` (float64, so that the learners run on them
    with their default ``use_rep``), cells ``"cell_0"``, … with the ground truth ``truth`` in ``obs``,
    and the features named ``features``."""
    obs = pd.DataFrame(truth, index=[f"cell_{i}" for i in range(points.shape[0])])
    adata = AnnData(X=points.astype(np.float32), obs=obs, var=pd.DataFrame(index=features))
    adata.obsm["X_pca"] = points.astype(np.float64)
    return adata
