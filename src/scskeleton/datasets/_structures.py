"""Generated data with known structure for ESL and FSL (Wang & Li, §V).

``blobs`` and ``line_and_circle`` hold several disconnected structures (ESL,
Fig. 6); ``noisy_moons`` hides two moons among uniform noise features (FSL,
Fig. 1 and Fig. 9). Each returns an AnnData with the points in ``X`` and in
``obsm["X_pca"]`` (so the learners run with their default ``use_rep``), the
ground truth in ``obs`` / ``var``, and the generating parameters in ``uns``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData
from sklearn.datasets import make_blobs

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._docs import dataset_doc
from ._points import points_adata
from ._shapes import moons


@dataset_doc
def blobs(
    n_cells: int = 300,
    *,
    n_centers: int = 3,
    n_dims: int = 2,
    cluster_std: float = 0.5,
    center_box: float = 10.0,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Isotropic Gaussian clusters (``sklearn.datasets.make_blobs``).

    Centres are drawn uniformly in [-``center_box``, ``center_box``]^``n_dims``.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3), shared equally among the clusters. Default 300.
    n_centers
        Number of clusters (1 to ``n_cells``). Default 3.
    n_dims
        Number of features. Default 2, a plane that plots as it is.
    cluster_std
        Standard deviation of each cluster. Default 0.5: clusters usually lie
        many standard deviations apart within the default box, i.e. separate.
    center_box
        Half-width of the box the centres are drawn in. Default 10, as in
        scikit-learn.
    {random_state_points}

    Returns
    -------
    AnnData of ``n_cells`` × ``n_dims`` (features ``"x"``, ``"y"`` in 2-D, else
    ``"feature_0"``, …), the points in ``X`` (float32) and ``obsm["X_pca"]``
    (float64), ``obs["true_component"]`` (categorical, each cell's cluster) and
    ``uns["blobs"]`` (``n_centers``, ``cluster_std``, ``center_box``).
    """
    n_cells = check_integer("n_cells", n_cells, low=3)
    n_centers = check_integer("n_centers", n_centers, low=1, high=n_cells)
    n_dims = check_integer("n_dims", n_dims, low=1)
    cluster_std = check_positive("cluster_std", cluster_std)
    center_box = check_positive("center_box", center_box)
    random_state = check_random_state(random_state)
    points, label = make_blobs(n_samples=n_cells, centers=n_centers, n_features=n_dims, cluster_std=cluster_std,
                               center_box=(-center_box, center_box), random_state=random_state)
    truth = {"true_component": pd.Categorical(label.astype(str), categories=[str(c) for c in range(n_centers)])}
    params = {"n_centers": n_centers, "cluster_std": cluster_std, "center_box": center_box}
    return _structure(points, truth, "blobs", params)


@dataset_doc
def line_and_circle(
    n_line: int = 200,
    n_circle: int = 200,
    *,
    offset: tuple[float, float] = (2.5, 0.0),
    radius: float = 1.0,
    noise: float = 0.03,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """A line segment and a circle in the plane: two disconnected structures (ESL, Fig. 6).

    The line is y = 3 (x - 0.5) for x uniform in [0, 1] (the paper's "Line");
    the circle has the given ``radius`` and is centred at ``offset``
    (the paper varies this offset). Gaussian noise of standard deviation
    ``noise`` is added to both.

    Parameters
    ----------
    n_line, n_circle
        Number of points on the line (≥ 2) and on the circle (≥ 3). Default
        200 each, so that both structures are sampled alike.
    offset
        Centre of the circle. Default (2.5, 0): with the default ``radius`` a
        gap of 0.5 separates the circle from the line's end.
    radius
        Radius of the circle. Default 1.
    noise
        Standard deviation of the Gaussian noise. Default 0.03: thin structures.
    {random_state_points}

    Returns
    -------
    AnnData of ``n_line + n_circle`` × 2 (features ``"x"``, ``"y"``; the line
    first), the points in ``X`` (float32) and ``obsm["X_pca"]`` (float64),
    ``obs["true_component"]`` (``"line"`` or ``"circle"``), ``obs["true_position"]``
    (x along the line, the angle in [0, 2π) around the circle) and
    ``uns["line_and_circle"]`` (``offset_x``, ``offset_y``, ``radius``, ``noise``).
    """
    n_line = check_integer("n_line", n_line, low=2)
    n_circle = check_integer("n_circle", n_circle, low=3)
    offset = tuple(float(value) for value in np.broadcast_to(np.asarray(offset, dtype=float), (2,)))
    radius = check_positive("radius", radius)
    noise = check_positive("noise", noise, allow_zero=True)
    random_state = check_random_state(random_state)
    rng = np.random.default_rng(random_state)

    x = rng.uniform(0.0, 1.0, n_line)
    angle = rng.uniform(0.0, 2 * np.pi, n_circle)
    points = np.vstack([
        np.column_stack([x, 3.0 * (x - 0.5)]),
        np.asarray(offset) + radius * np.column_stack([np.cos(angle), np.sin(angle)]),
    ])
    points += noise * rng.standard_normal(points.shape)
    truth = {
        "true_component": pd.Categorical(["line"] * n_line + ["circle"] * n_circle, categories=["line", "circle"]),
        "true_position": np.concatenate([x, angle]),
    }
    params = {"offset_x": offset[0], "offset_y": offset[1], "radius": radius, "noise": noise}
    return _structure(points, truth, "line_and_circle", params)


@dataset_doc
def noisy_moons(
    n_cells: int = 400,
    *,
    n_noise: int = 1000,
    scale: float = 0.2,
    noise: float = 0.03,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Two moons in the first two features plus ``n_noise`` uniform noise features (FSL, Fig. 1/9).

    Features ``"x"`` and ``"y"`` are :func:`~scskeleton.datasets.moons`
    (Gaussian noise ``noise``) multiplied by ``scale``; each of the
    ``n_noise`` features ``"noise_1"``, … is i.i.d. uniform on [0, 1], as in
    the paper's augmented two-moon data (400 points, 2 + 1000 features). The
    paper does not give the moons' scale; with the default 0.2 the moons span
    0.6 × 0.3 and vary less than each noise feature (variance 1/12), the
    regime in which FSL recovers them (see the documentation's background
    page on ESL and FSL).

    Parameters
    ----------
    n_cells
        Number of points. Default 400, as in the paper.
    n_noise
        Number of uniform noise features (≥ 0). Default 1000, as in the paper.
    scale
        Factor on the moons' coordinates. Default 0.2 (see above).
    noise
        Standard deviation of the moons' Gaussian noise, before ``scale``.
        Default 0.03, as in :func:`~scskeleton.datasets.moons`.
    {random_state_points}

    Returns
    -------
    AnnData of ``n_cells`` × (2 + ``n_noise``), the features in ``X`` (float32)
    and ``obsm["X_pca"]`` (float64), ``var["informative"]`` (``True`` for
    ``"x"`` and ``"y"``), ``obs["true_component"]`` (the moon) and
    ``obs["true_angle"]``, and ``uns["noisy_moons"]`` (``n_noise``, ``scale``,
    ``noise``).
    """
    n_noise = check_integer("n_noise", n_noise, low=0)
    scale = check_positive("scale", scale)
    random_state = check_random_state(random_state)  # once: the moons and the noise features share the seed
    base = moons(n_cells, noise=noise, random_state=random_state)
    rng = np.random.default_rng([random_state, 1])  # a stream independent of the moons' own
    moon_points = scale * np.asarray(base.obsm["X_pca"])
    points = np.hstack([moon_points, rng.uniform(0.0, 1.0, (base.n_obs, n_noise))])
    truth = {key: base.obs[key].values for key in base.obs.columns}
    adata = _structure(points, truth, "noisy_moons", {"n_noise": n_noise, "scale": scale, "noise": noise},
                       names=["x", "y"] + [f"noise_{j + 1}" for j in range(n_noise)])
    adata.var["informative"] = np.arange(adata.n_vars) < 2
    return adata


def _structure(points: np.ndarray, truth: dict, name: str, params: dict, names: list[str] | None = None) -> AnnData:
    """The ``points`` as AnnData (:func:`points_adata`; features ``"x"``, ``"y"`` in 2-D, else ``"feature_0"``, …,
    unless ``names`` are given) with the generating ``params`` in ``uns[name]``."""
    if names is None:
        names = ["x", "y"] if points.shape[1] == 2 else [f"feature_{j}" for j in range(points.shape[1])]
    adata = points_adata(points, truth, names)
    adata.uns[name] = params
    return adata
