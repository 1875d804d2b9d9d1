"""Components of a representation that carry the cells' sequencing depth, not their state.

Log-normalised counts keep a trace of each cell's depth: a shallow cell has more zeros, and
``normalize_total`` cannot give them back. Where libraries differ many-fold and most values
are zero, that trace can become the largest source of variance and a principal component of
its own: on SERGIO's counts (library sizes spanning 25-fold at the 5th–95th percentiles, 60 %
dropout) the first PC followed the number of detected genes with Spearman ρ = 1.00 and the
true time with ρ = 0.01. A tree fitted with it runs along the depth axis.

A component is taken for depth when it follows the number of genes detected per cell
(absolute Spearman ρ ≥ :data:`DEPTH_CORRELATION`) **and** the other components do not predict it (the
R² of its mean over each cell's :data:`NEIGHBOURS` nearest cells in all the other components
is below :data:`PREDICTED_SHARE`). The second condition keeps a component that tracks
complexity because the cell state does (a differentiation that lowers the number of expressed
genes moves the other components too, which then predict it); depth drawn independently of
the state is predicted by nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.spatial import cKDTree

#: A component follows depth when its Spearman correlation with the detected genes is at least this.
DEPTH_CORRELATION = 0.9
#: ... and the other components explain less than this share of its variance (kNN regression).
#: Depth shrinks the other components' scores of shallow cells too (their many zeros), so they
#: predict a little of it: -0.22 to 0.23 on ten SERGIO data sets; a component that tracks the
#: detected genes because the state does is predicted almost whole (0.97-0.99 on generated trees).
PREDICTED_SHARE = 0.5
#: Neighbours of the kNN regression.
NEIGHBOURS = 15
#: Cells the check reads, at most (evenly spaced): enough for both statistics to settle.
SAMPLE_CELLS = 3000


@dataclass(frozen=True)
class DepthComponents:
    """The components taken for depth (column indices), their Spearman correlation with the
    detected genes, and the share of their variance the other components predict."""

    columns: np.ndarray
    correlation: np.ndarray
    predicted: np.ndarray


def sampled_rows(n_cells: int) -> np.ndarray:
    """The cells the check reads: at most :data:`SAMPLE_CELLS`, evenly spaced (deterministic)."""
    return np.unique(np.linspace(0, n_cells - 1, min(SAMPLE_CELLS, n_cells)).astype(np.intp))


def depth_components(representation: np.ndarray, n_detected: np.ndarray) -> DepthComponents:
    """The columns of ``representation`` (cells × components) that carry depth (the module's rule),
    from each cell's number of detected genes ``n_detected``; read on :func:`sampled_rows` of the
    cells given."""
    n_cells, n_columns = representation.shape
    rows = sampled_rows(n_cells)
    values = np.asarray(representation[rows], dtype=float)
    detected = np.asarray(n_detected, dtype=float)[rows]
    empty = DepthComponents(np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros(0))
    if n_columns < 2 or rows.size <= NEIGHBOURS + 1 or np.ptp(detected) == 0:
        return empty
    ranked = stats.rankdata(values, axis=0)
    ranked_detected = stats.rankdata(detected)
    correlation = np.array([np.corrcoef(ranked[:, k], ranked_detected)[0, 1] if np.ptp(ranked[:, k]) else 0.0
                            for k in range(n_columns)])
    candidates = np.flatnonzero(np.abs(correlation) >= DEPTH_CORRELATION)
    if candidates.size == 0:
        return empty
    predicted = np.empty(candidates.size)
    for i, column in enumerate(candidates):
        others = np.delete(values, column, axis=1)
        _, neighbours = cKDTree(others).query(others, k=NEIGHBOURS + 1)
        target = values[:, column]
        guess = target[neighbours[:, 1:]].mean(axis=1)
        predicted[i] = 1.0 - np.sum((target - guess) ** 2) / max(np.sum((target - target.mean()) ** 2), 1e-300)
    technical = predicted < PREDICTED_SHARE
    return DepthComponents(candidates[technical], correlation[candidates[technical]], predicted[technical])
