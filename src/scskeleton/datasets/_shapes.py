"""Generated 2-D shapes with known structure (the RPG and MPME papers' test sets).

Each returns an AnnData with the points in ``X`` and in ``obsm["X_pca"]`` (so
the graph learners run on them with their default ``use_rep``), plus the
ground truth in ``obs``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from ._branching import branch_skeleton
from ._docs import dataset_doc
from ._points import checked_points, points_adata


@dataset_doc
def circle(
    n_cells: int = 100, *, noise: float = 0.05, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """Points around the unit circle: a loop.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 100: enough for a smooth loop.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.05: a thin ring around an empty centre.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_angle"]`` (in [0, 2π)) and ``uns["shape"]`` =
    ``"circle"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    angle = rng.uniform(0, 2 * np.pi, n_cells)
    points = np.column_stack([np.cos(angle), np.sin(angle)])
    return _shape(points + noise * rng.standard_normal(points.shape), {"true_angle": angle}, "circle")


@dataset_doc
def moons(
    n_cells: int = 200, *, noise: float = 0.03, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """Two interleaved, separated half circles.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 200: 100 per moon.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.03: the moons stay well apart.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_component"]`` (categorical, ``"0"`` or ``"1"``),
    ``obs["true_angle"]`` (in [0, π]) and ``uns["shape"]`` = ``"moons"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    label = np.arange(n_cells) % 2
    angle = rng.uniform(0, np.pi, n_cells)
    points = np.where(
        label[:, None] == 0,
        np.column_stack([np.cos(angle), np.sin(angle)]),
        np.column_stack([1 - np.cos(angle), 0.5 - np.sin(angle)]),
    )
    points = points + noise * rng.standard_normal(points.shape)
    return _shape(points, {"true_component": pd.Categorical(label.astype(str)), "true_angle": angle}, "moons")


@dataset_doc
def three_clusters(
    n_cells: int = 300, *, noise: float = 0.08, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """Three Gaussian clusters at the corners of a triangle, joined by a few
    sparse bridge points (one per 100 points): weakly connected.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 300: 100 per cluster.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.08: compact clusters, well apart.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_component"]`` (categorical, ``"0"``–``"2"``) and
    ``uns["shape"]`` = ``"three_clusters"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    centers = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 0.9]])
    label = np.arange(n_cells) % 3
    points = centers[label] + noise * rng.standard_normal((n_cells, 2))
    bridges = max(1, n_cells // 100)  # a handful of stray points between clusters
    stray = rng.choice(n_cells, size=bridges, replace=False)
    mix = rng.uniform(0.35, 0.65, size=bridges)
    points[stray] = mix[:, None] * centers[label[stray]] + (1 - mix[:, None]) * centers[(label[stray] + 1) % 3]
    return _shape(points, {"true_component": pd.Categorical(label.astype(str))}, "three_clusters")


@dataset_doc
def distorted_s(
    n_cells: int = 100, *, noise: float = 0.05, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """An S-shaped curve with position-dependent noise: a single path.

    The noise grows along the curve, from half ``noise`` at its start to 1.5
    times ``noise`` at its end.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 100: enough for a smooth curve.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.05: the curve stays a thin band.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_position"]`` (from 0 to 1 along the curve) and
    ``uns["shape"]`` = ``"distorted_s"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    t = np.sort(rng.uniform(0, 1, n_cells))
    angle = 3 * np.pi * (t - 0.5)
    points = np.column_stack([np.sin(angle), np.sign(angle) * (np.cos(angle) - 1)])
    points = points + noise * (0.5 + t[:, None]) * rng.standard_normal(points.shape)
    return _shape(points, {"true_position": t}, "distorted_s")


@dataset_doc
def spiral(
    n_cells: int = 200, *, noise: float = 0.03, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """An Archimedean spiral of two turns: a single path.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 200: enough points on both turns.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.03: the turns stay apart.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_position"]`` (from 0 at the centre to 1 at the
    outer end) and ``uns["shape"]`` = ``"spiral"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    t = np.sort(rng.uniform(0, 1, n_cells))
    angle = 4 * np.pi * t + np.pi / 2
    radius = 0.2 + 0.8 * t
    points = radius[:, None] * np.column_stack([np.cos(angle), np.sin(angle)])
    return _shape(points + noise * rng.standard_normal(points.shape), {"true_position": t}, "spiral")


@dataset_doc
def toy_tree(
    n_cells: int = 300, *, noise: float = 0.05, random_state: int | np.random.Generator | None = 0
) -> AnnData:
    """A planar tree with two branch points (the RPG paper's "tree" set, §6.1 and Table 1).

    A trunk of unit length forks at ±50° into two branches, one of which forks
    again: 2 branch points, 3 tips besides the root, 5 unit-length branches.
    Points are spread uniformly along the branches with Gaussian noise of
    standard deviation ``noise``.

    Parameters
    ----------
    n_cells
        Number of points (≥ 3). Default 300: 60 points per branch.
    noise
        Standard deviation of the Gaussian noise added to each coordinate.
        Default 0.05: the branches stay thin against their unit length.
    {random_state_points}

    Returns
    -------
    {returns_shape}
    ``obs["true_pseudotime"]`` (distance from the root along the
    tree), ``obs["true_branch"]`` (categorical) and ``uns["shape"]`` = ``"toy_tree"``.
    """
    rng, n_cells, noise = checked_points(n_cells, noise, random_state)
    starts, directions, start_times, names = branch_skeleton(3)
    segment = np.sort(rng.integers(len(names), size=n_cells))
    position = rng.uniform(0.0, 1.0, n_cells)
    points = starts[segment] + position[:, None] * directions[segment]
    truth = {
        "true_pseudotime": start_times[segment] + position,
        "true_branch": pd.Categorical.from_codes(segment, categories=names),
    }
    return _shape(points + noise * rng.standard_normal(points.shape), truth, "toy_tree")


def _shape(points: np.ndarray, truth: dict, name: str) -> AnnData:
    """The 2-D ``points`` as AnnData (:func:`points_adata`), named ``uns["shape"] = name``."""
    adata = points_adata(points, truth, ["x", "y"])
    adata.uns["shape"] = name
    return adata
