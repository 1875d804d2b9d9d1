"""Defaults every tree learner shares: how many nodes, how many latent dimensions, how much signal.

DDRTree (:mod:`~.ddrtree`) and the principal graphs (:mod:`~.rpg`) size their node sets by
the same rule (:func:`default_n_centers`) and read the noise floor of a representation the
same way, from the eigenvalues of its centred Gram matrix YᵀY (:func:`default_n_components`,
:func:`signal_to_noise`).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

#: An eigenvalue of YᵀY counts as signal when it exceeds this multiple of the median one ...
NOISE_RATIO = 2.0
#: ... and the default latent dimension is at most this.
MAX_COMPONENTS = 10
#: The default number of nodes gives each node about this many cells ...
CELLS_PER_NODE = 10
#: ... but never fewer nodes than this (or N).
MIN_NODES = 50
#: DDRTree's default stops at this many nodes (the principal tree learners use up to R's rule).
MAX_CENTERS = 80


def default_n_centers(n_cells: int, *, most: int | None = MAX_CENTERS) -> int:
    """Number of centers (tree nodes) K used when none is given.

    A node per :data:`CELLS_PER_NODE` cells, at least min(N, :data:`MIN_NODES`) = min(N, 50)
    and at most R's DDRTree / Monocle 2 rule round(2 · 100 · ln N / (ln N + ln 100))
    (about 120–150 nodes for 10³–10⁶ cells) and ``most``. Each node then averages enough
    cells that its position is not one cell's noise: with R's rule alone, 200
    cells get 107 nodes and the tree follows the noise (on scanpy's toggleswitch
    it branches at outliers and, once pruned, misses the real fork).

    DDRTree stops at :data:`MAX_CENTERS` = 80 (``most=None`` lifts the cap, as
    the principal tree learners do). Its quantization term pulls the latent
    points onto the centers, so a dense terminal state of thousands of cells
    given 40 centers becomes a ball of centers whose spanning tree is a star,
    and each arm of the star stands out of the noise like a real branch. On
    generated 2-fate trees of 10⁴ cells 133 centers (R's rule) gave the right
    topology in 2 of 10 seeds, 80 centers in 8 of 10 (3–5 fates: 29 and 27 of
    30); at 10³ cells (100 against 80 centers) 33 and 34 of 40.
    """
    if n_cells < 100:
        monocle = n_cells
    else:
        log_n = np.log(n_cells)
        monocle = int(round(2 * 100 * log_n / (log_n + np.log(100))))
    count = int(min(max(n_cells // CELLS_PER_NODE, min(n_cells, MIN_NODES)), monocle))
    return count if most is None else int(min(count, max(most, 2)))


def default_n_components(gram: np.ndarray, *, ratio: float | None = None, most: int = MAX_COMPONENTS) -> int:
    """Latent dimension d used when none is given: the number of directions of
    the centred data whose variance stands out of the noise.

    The eigenvalues of YᵀY above ``ratio`` times their median, between 2 and
    ``most`` (and at most D). A representation of at most ``most`` dimensions
    is used whole: whoever reduced it to that few kept signal, and its median
    eigenvalue is signal too (krumsiek11's 10 principal components of 11 genes
    put the noise floor so high that d = 4 merged the Mo and Neu lineages; with
    all 10, each of the four fates has its own tip). Two dimensions cannot hold a tree whose branches
    leave in more directions than that (krumsiek11's four lineages need four;
    a random-walk tree in 50 dimensions needs more): its branches are drawn on
    top of each other and the spanning tree joins them wrongly. The median
    eigenvalue stands for the noise level because a representation such as
    ``X_pca`` keeps more components than there are directions of signal.
    """
    ratio = NOISE_RATIO if ratio is None else ratio
    if gram.shape[0] <= most:
        # already reduced to a few dimensions (e.g. pca with n_comps=10): all of them are the
        # signal the user kept, and there is no tail of noise eigenvalues to measure a floor on
        return int(gram.shape[0])
    eigenvalues = linalg.eigvalsh(gram)
    floor = float(np.median(eigenvalues))
    count = int(np.sum(eigenvalues > ratio * floor)) if floor > 0 else gram.shape[0]
    return int(min(max(count, 2), most, gram.shape[0]))


def signal_to_noise(gram: np.ndarray) -> float:
    """How far a representation's structure stands out of its noise: Σ_i (λ_i − λ_med)₊ / (D · λ_med).

    λ are the eigenvalues of the centred YᵀY (D × D) and their median λ_med the
    noise level per direction, as in :func:`default_n_components`: the
    variance the structure adds above the noise floor, over the variance the
    noise spreads over all D directions. Distances between cells, and with them
    the nearest nodes of a tree, follow the structure when it is large and the
    noise when it is small. Measured (30 principal components of log-normalised
    counts): 1.2–4.7 on ``simulate_trajectory`` trees, 2.2–2.6 on 50-dimensional
    random-walk trees, 1.0–1.3 on scanpy's pbmc68k_reduced, 0.47–1.5 on Splatter-style
    counts with dropout and 0.1–0.4 at ~8,000 counts per cell with Splatter's
    mean-dependent dispersion. Infinite when the median is 0 (fewer cells than
    dimensions, or noise-free data).
    """
    eigenvalues = np.clip(linalg.eigvalsh(gram), 0.0, None)
    floor = float(np.median(eigenvalues))
    if floor <= 0:
        return float("inf")
    return float(np.sum(np.clip(eigenvalues - floor, 0.0, None)) / (eigenvalues.size * floor))
