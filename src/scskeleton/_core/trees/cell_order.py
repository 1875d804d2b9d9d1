"""Pseudotime read from a graph over the cells, inside the tree's segments.

The tree's geodesic pseudotime places each cell by its nearest node and edge
(:func:`~scskeleton._core.trees.trajectory.pseudotime`). On noisy counts, where
the noise spreads the cells over many dimensions, the nearest node is decided
as much by the noise as by the cell's stage, and cells of one stage land far
apart along the tree. Diffusion methods (DPT, Palantir) instead order cells
along many short steps between neighbours in a space where each cell is
averaged with its neighbours
(:mod:`~scskeleton._core.cellgraphs.diffusion`). This module does the same
within the tree's topology.

Let G be a graph over the cells with edge lengths (``tl.pseudotime`` uses each
cell's nearest neighbours in the multiscale diffusion space, with their
distances there), s(i) each cell's segment and A the S × S adjacency of
segments (A[a, b] when a = b or segments a and b share an end node). Keep only
the edges of G with A[s(i), s(j)] — a step never jumps between lineages that
merely pass close by — and set

    τ_i = min over sources r, over paths r = v_0, …, v_m = i in that graph, of Σ_l ‖x_{v_l} − x_{v_{l+1}}‖,

the shortest-path length from the nearest source cell (one start cell per
root). τ is in the units of the graph's edge lengths. Cells with no such path
(outside the tree, or in a piece of the constrained graph that holds no
source) get NaN. O(nnz(G) log N) time (Dijkstra, all sources at once),
O(nnz(G)) memory.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph


def adjacent_segments(segments: list[np.ndarray]) -> np.ndarray:
    """S × S boolean matrix: segments that share an end node (and each segment itself)."""
    ends = np.array([[int(seg[0]), int(seg[-1])] for seg in segments], dtype=np.intp).reshape(-1, 2)
    return (ends[:, None, :, None] == ends[None, :, None, :]).any(axis=(2, 3))


def segment_geodesic(
    distances: sparse.spmatrix, cell_segment: np.ndarray, segments: list[np.ndarray], sources
) -> np.ndarray:
    """Shortest-path length τ from the nearest of ``sources`` over ``distances``, along edges
    whose two cells lie on the same or adjacent segments (module docstring).

    Parameters
    ----------
    distances
        N × N sparse kNN distances (an entry is an edge of that length).
    cell_segment
        Segment id of each cell; negative for cells outside the tree.
    segments
        Node path of each segment, as :class:`~scskeleton._core.trees.trajectory.Topology` holds them.
    sources
        Indices of the cells at τ = 0.
    """
    graph = sparse.coo_matrix(distances)
    n_cells = graph.shape[0]
    cell_segment = np.asarray(cell_segment)
    if graph.shape != (n_cells, n_cells) or cell_segment.shape != (n_cells,):
        raise ValueError(
            f"distances must be a square matrix over the {cell_segment.size} cells; got shape {graph.shape}."
        )
    sources = np.unique(np.atleast_1d(np.asarray(sources, dtype=np.intp)))
    if sources.size == 0:
        raise ValueError("segment_geodesic needs at least one source cell.")
    adjacent = adjacent_segments(segments)
    row_segment, col_segment = cell_segment[graph.row], cell_segment[graph.col]
    keep = (row_segment >= 0) & (col_segment >= 0)
    keep[keep] = adjacent[row_segment[keep], col_segment[keep]]
    # a zero length (duplicate cells) would read as a missing edge; the smallest positive length stands in
    lengths = np.maximum(graph.data[keep], np.finfo(float).tiny)
    constrained = sparse.csr_matrix((lengths, (graph.row[keep], graph.col[keep])), shape=graph.shape)
    time = csgraph.dijkstra(constrained, directed=False, indices=sources, min_only=True)
    time[~np.isfinite(time)] = np.nan
    time[cell_segment < 0] = np.nan
    return time
