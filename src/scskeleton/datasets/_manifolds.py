"""Generated 2-D manifolds curled up in 3-D, with their flat coordinates as ground truth.

The test sets of Table 1 of the regularizers-vs-losses paper (Swiss roll and a
3-D sine surface), for manifold unfolding (``tl.convex_embedding``). Each
returns an AnnData with the 3-D points in ``X`` and ``obsm["X_pca"]`` and the
intrinsic (unrolled, isometric) coordinates in ``obs["true_u"]`` and
``obs["true_v"]``, also stacked in ``obsm["X_true"]``.
"""

from __future__ import annotations

import numpy as np
from anndata import AnnData

from .._core.validation import check_positive
from ._docs import dataset_doc
from ._points import checked_points, points_adata


@dataset_doc
def swiss_roll(
    n_cells: int = 200,
    *,
    height: float = 15.0,
    noise: float = 0.0,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """The Swiss roll: (t cos t, h, t sin t) for t in [1.5π, 4.5π], h in [0, ``height``].

    ``obs["true_u"]`` is the arc length along the spiral (from t = 1.5π),
    ``obs["true_v"]`` the height h: the roll unrolled without distortion.
    ``obs["true_t"]`` is the angle t. Successive turns are 2π apart: with few
    points a k-nearest-neighbour graph short-circuits between them (at 200
    points, beyond about 6 neighbours).

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 200.
    height
        Extent of the roll along its axis. Default 15, about the roll's outer
        radius, so that it is a sheet rather than a ribbon.
    {noise_manifold}
    {random_state_points}

    Returns
    -------
    {returns_manifold}
    ``obs["true_u"]``, ``obs["true_v"]``, ``obs["true_t"]`` and ``uns["shape"]`` = ``"swiss_roll"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    height = check_positive("height", height, role="extent of the roll along its axis")
    angle = rng.uniform(1.5 * np.pi, 4.5 * np.pi, n_cells)
    level = rng.uniform(0.0, height, n_cells)
    points = np.column_stack([angle * np.cos(angle), level, angle * np.sin(angle)])
    arc = _spiral_arc_length(angle) - _spiral_arc_length(1.5 * np.pi)
    truth = {"true_u": arc, "true_v": level, "true_t": angle}
    return _manifold(points + noise * rng.standard_normal(points.shape), truth, "swiss_roll")


@dataset_doc
def sine_surface(
    n_cells: int = 200,
    *,
    n_periods: float = 1.5,
    amplitude: float = 2.0,
    width: float = 6.0,
    noise: float = 0.0,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """A 3-D sine surface: (x, y, amplitude · sin x) for x in [0, 2π·n_periods], y in [0, ``width``].

    A corrugated sheet, isometric to a rectangle: ``obs["true_u"]`` is the arc
    length along the sine curve, ``obs["true_v"]`` = y.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 200.
    n_periods
        Number of sine periods along x. Default 1.5.
    amplitude
        Height of the sine waves (≥ 0; 0 gives a flat rectangle). Default 2.
    width
        Extent along the flat direction y. Default 6.
    {noise_manifold}
    {random_state_points}

    Returns
    -------
    {returns_manifold}
    ``obs["true_u"]``, ``obs["true_v"]`` and ``uns["shape"]`` = ``"sine_surface"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    n_periods = check_positive("n_periods", n_periods, role="number of sine periods")
    amplitude = check_positive("amplitude", amplitude, role="height of the sine waves", allow_zero=True)
    width = check_positive("width", width, role="extent along the flat direction")
    x = rng.uniform(0.0, 2.0 * np.pi * n_periods, n_cells)
    y = rng.uniform(0.0, width, n_cells)
    points = np.column_stack([x, y, amplitude * np.sin(x)])
    truth = {"true_u": _sine_arc_length(x, amplitude), "true_v": y}
    return _manifold(points + noise * rng.standard_normal(points.shape), truth, "sine_surface")


def _spiral_arc_length(angle):
    """Arc length of the spiral r = t from t = 0: ½(t√(1+t²) + asinh t)."""
    return 0.5 * (angle * np.sqrt(1.0 + angle**2) + np.arcsinh(angle))


def _sine_arc_length(x: np.ndarray, amplitude: float) -> np.ndarray:
    """Arc length of (s, amplitude · sin s) from 0 to x, by the trapezoid rule on a fine grid."""
    grid = np.linspace(0.0, float(x.max()), 20_001)
    speed = np.sqrt(1.0 + (amplitude * np.cos(grid)) ** 2)
    cumulative = np.concatenate([[0.0], np.cumsum((speed[1:] + speed[:-1]) / 2.0 * np.diff(grid))])
    return np.interp(x, grid, cumulative)


def _manifold(points: np.ndarray, truth: dict, name: str) -> AnnData:
    """The 3-D ``points`` as AnnData (:func:`points_adata`), the unrolled coordinates in ``obsm["X_true"]``
    and the name in ``uns["shape"]``."""
    adata = points_adata(points, truth, ["x", "y", "z"])
    adata.obsm["X_true"] = np.column_stack([truth["true_u"], truth["true_v"]]).astype(np.float64)
    adata.uns["shape"] = name
    return adata
