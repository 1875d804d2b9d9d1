"""Gene modules: genes whose fitted trends have the same shape, clustered together."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..trees.assign import kmeans, squared_distances
from ..validation import check_integer

#: Lloyd iterations of the module k-means (it stops earlier once no gene moves).
MODULE_ITERATIONS = 100
#: k-means restarts (seeds drawn from ``random_state``); the one with the least within-module spread wins.
MODULE_RESTARTS = 10
#: With ``n_modules=None`` the number of modules is chosen among 2 … this many.
MAX_MODULES = 10
#: The silhouette is computed on at most this many genes (a fixed random subset beyond).
SILHOUETTE_GENES = 3000


@dataclass(frozen=True)
class ModuleResult:
    """Output of :func:`trend_modules` for G genes and M modules.

    ``labels`` (G): each gene's module 0…M−1, −1 for a gene left out (a flat
    curve or NaN); ``centers`` (M × P): each module's mean standardised
    curve, over the P grid points that every gene's curves cover (``columns``,
    indices into the flattened curves); modules are numbered by where on that
    axis their mean curve peaks, earliest first.
    """

    labels: np.ndarray
    centers: np.ndarray
    columns: np.ndarray


def standardize_curves(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flatten G × … curves to G × P over the points every gene covers, centred and scaled per gene.

    Returns (standardised curves of the usable genes, their gene indices, the
    flat column indices kept). Euclidean distance between two standardised
    curves is 2P(1 − r), r their correlation: the shape counts, not the level
    or the amplitude.
    """
    flat = np.asarray(curves, dtype=float).reshape(curves.shape[0], -1)
    columns = np.flatnonzero(np.isfinite(flat).any(axis=0))
    flat = flat[:, columns]
    spread = np.nanstd(flat, axis=1) if flat.size else np.zeros(flat.shape[0])
    usable = np.flatnonzero(np.isfinite(flat).all(axis=1) & (spread > 0))
    values = flat[usable]
    values = (values - values.mean(axis=1, keepdims=True)) / spread[usable, None]
    return values, usable, columns


def trend_modules(curves: np.ndarray, n_modules: int | None, *, random_state: int = 0) -> ModuleResult:
    """Cluster genes by the shape of their fitted curves (k-means on standardised curves).

    ``curves`` is G × n_grid (one path) or G × L × n_grid (one curve per
    lineage or branch, NaN where a lineage has no cells; the lineages are
    laid end to end). Each gene's curve is centred and scaled to unit
    variance (:func:`standardize_curves`), so k-means groups genes whose
    curves correlate, whatever their level or amplitude; k-means++ seeding
    with seeds drawn from ``random_state`` makes it deterministic, and of
    :data:`MODULE_RESTARTS` runs the one with the least spread within modules is kept. A gene whose curve is flat
    (or NaN where others have values) is left out (label −1).

    ``n_modules=None`` chooses the number of modules among 2 …
    :data:`MAX_MODULES` by the mean silhouette of the clustering
    (:func:`choose_n_modules`).
    """
    values, usable, columns = standardize_curves(curves)
    if n_modules is None:
        n_modules = choose_n_modules(values, random_state=random_state)
    n_modules = check_integer("n_modules", n_modules, low=1)
    labels = np.full(curves.shape[0], -1, dtype=np.intp)
    if usable.size < n_modules:
        raise ValueError(
            f"{usable.size} gene(s) have a curve that is not flat, fewer than n_modules={n_modules}: lower "
            "n_modules, or cluster more genes (e.g. a larger FDR)."
        )
    assigned, centers = _best_kmeans(values, n_modules, random_state)
    # number the modules by where their mean curve peaks, so module 0 comes first along the axis
    means = np.stack([values[assigned == m].mean(axis=0) if np.any(assigned == m) else centers[m]
                      for m in range(n_modules)])
    order = np.argsort(means.argmax(axis=1), kind="stable")
    rank = np.empty(n_modules, dtype=np.intp)
    rank[order] = np.arange(n_modules)
    labels[usable] = rank[assigned]
    return ModuleResult(labels=labels, centers=means[order], columns=columns)


def _best_kmeans(values: np.ndarray, n_modules: int, random_state: int) -> tuple[np.ndarray, np.ndarray]:
    """Labels and centers of the k-means run, of :data:`MODULE_RESTARTS`, with the least spread."""
    best = None
    for seed in np.random.default_rng(random_state).integers(2**31, size=MODULE_RESTARTS):
        centers = kmeans(values, n_modules, random_state=int(seed), max_iter=MODULE_ITERATIONS,
                         max_points=values.shape[0], max_seed_points=values.shape[0])
        distances = squared_distances(values, centers)
        spread = float(distances.min(axis=1).sum())
        if best is None or spread < best[0]:
            best = (spread, distances.argmin(axis=1), centers)
    return best[1], best[2]


def choose_n_modules(values: np.ndarray, *, random_state: int = 0) -> int:
    """The number of modules, 2 … :data:`MAX_MODULES`, whose clustering has the largest mean silhouette.

    ``values`` are standardised curves (:func:`standardize_curves`), so the
    Euclidean distance is a correlation distance and the silhouette compares
    how well a gene's curve matches its own module's shapes with the nearest
    other module's. On more than :data:`SILHOUETTE_GENES` genes the
    silhouette is measured on a fixed random subset (drawn from
    ``random_state``), which keeps the cost at O(k · G · P + n²).
    Fewer than 3 genes give 1 module.
    """
    from sklearn.metrics import silhouette_score

    n_genes = values.shape[0]
    if n_genes < 3:
        return 1
    candidates = range(2, min(MAX_MODULES, n_genes - 1) + 1)
    sample = None
    if n_genes > SILHOUETTE_GENES:
        sample = np.sort(np.random.default_rng(random_state).choice(n_genes, SILHOUETTE_GENES, replace=False))
    scores = {}
    for k in candidates:
        assigned, _ = _best_kmeans(values, k, random_state)
        if np.unique(assigned).size < 2:
            continue
        rows = slice(None) if sample is None else sample
        if np.unique(assigned[rows]).size < 2:
            continue
        scores[k] = float(silhouette_score(values[rows], assigned[rows]))
    return max(scores, key=scores.get) if scores else 1
