"""Edges of a node graph that bridge a gap in the data.

A spanning tree joins every node, so on separate clusters (distinct cell types
with no transition between them) it still draws edges from one cluster to the
next, and those edges look like branches. Such an edge crosses empty space:
along it there is a stretch that no cell projects onto, far longer than the
spread of the cells around its two ends. For an edge (u, v) of length ℓ:

    gap(u, v)  = the longest stretch of [0, ℓ] holding no projected cell
    width(u, v) = 1.4826 · MAD of the offsets, along the edge's direction, of
                  the cells whose nearest node is u or v (from that node)
    score      = gap / width

On a continuous trajectory, however uneven its density, cells follow each other
along every edge and the score stays near 1–3; across two clusters the gap is
many widths long. The score is free of units. Only cells within a few widths of
the edge count as lying on it, so a wide cluster beside an edge does not fill
its gap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from ..graphs import edge_list
from .trajectory import GraphProjection, project_onto_graph

#: An edge whose empty stretch exceeds this many noise widths bridges a gap.
MIN_GAP = 8.0
#: A gap edge must leave at least this share of the cells on either side of it.
MIN_SIDE = 0.02
#: Fewer cells than this at an edge's two ends give no width of their own.
MIN_WIDTH_CELLS = 5


@dataclass(frozen=True)
class GapEdges:
    """Result of :func:`gap_edges`.

    Attributes
    ----------
    edges
        E × 2 undirected edges (i < j) of the graph.
    score
        Longest empty stretch along each edge, in noise widths.
    flagged
        Boolean mask of the edges whose score exceeds the threshold.
    """

    edges: np.ndarray
    score: np.ndarray
    flagged: np.ndarray


def gap_edges(
    points: np.ndarray,
    nodes: np.ndarray,
    adjacency: sparse.spmatrix,
    projection: GraphProjection,
    *,
    min_gap: float = MIN_GAP,
) -> GapEdges:
    """Score every edge by its longest stretch without cells (module docstring)."""
    edges = edge_list(adjacency)
    n_edges = edges.shape[0]
    score = np.zeros(n_edges)
    if n_edges == 0:
        return GapEdges(edges, score, np.zeros(0, dtype=bool))
    start, end, t = projection.edge_start, projection.edge_end, projection.fraction
    low, high = np.minimum(start, end), np.maximum(start, end)
    # each cell's position along its edge, measured from the lower node
    along = np.where(start == low, t, 1.0 - t)
    cell_edge = _lookup(edges, low, high, nodes.shape[0])
    # cells whose nearest node is each node, for the widths
    order = np.argsort(start, kind="stable")
    bounds = np.searchsorted(start[order], np.arange(nodes.shape[0] + 1))
    by_edge = np.argsort(cell_edge, kind="stable")
    edge_bounds = np.searchsorted(cell_edge[by_edge], np.arange(n_edges + 1))
    width = np.full(n_edges, np.nan)
    gap = np.zeros(n_edges)
    for e, (u, v) in enumerate(edges):
        direction = nodes[v] - nodes[u]
        length = float(np.linalg.norm(direction))
        if length <= 0:
            continue
        direction /= length
        near_u, near_v = order[bounds[u] : bounds[u + 1]], order[bounds[v] : bounds[v + 1]]
        offsets = np.concatenate([(points[near_u] - nodes[u]) @ direction, (points[near_v] - nodes[v]) @ direction])
        if offsets.size >= MIN_WIDTH_CELLS:
            width[e] = 1.4826 * float(np.median(np.abs(offsets - np.median(offsets))))
        on_edge = by_edge[edge_bounds[e] : edge_bounds[e + 1]]
        positions = np.sort(np.concatenate([[0.0, 1.0], along[on_edge]])) * length
        gap[e] = float(np.max(np.diff(positions)))
    # nodes holding few cells give no width of their own; none is narrower than the typical edge's
    typical = float(np.nanmedian(width)) if np.isfinite(width).any() else 0.0
    width = np.fmax(width, typical)
    score = np.divide(gap, width, out=np.zeros(n_edges), where=width > 0)
    # a gap that cuts off a handful of cells is an outlier, not a separate cluster
    side = _smaller_side(adjacency, edges, np.bincount(start, minlength=nodes.shape[0]))
    score[side < MIN_SIDE * start.size] = 0.0
    return GapEdges(edges=edges, score=score, flagged=score > min_gap)


def _smaller_side(adjacency: sparse.spmatrix, edges: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """For each edge of a forest, the cells on the smaller side of it (inf for an edge on a cycle)."""
    n_nodes = mass.size
    parent = np.full(n_nodes, -1, dtype=np.intp)
    subtree = mass.astype(float).copy()
    component_mass = np.zeros(n_nodes)
    seen = np.zeros(n_nodes, dtype=bool)
    for first in range(n_nodes):
        if seen[first]:
            continue
        order, predecessor = csgraph.breadth_first_order(adjacency, first, directed=False, return_predecessors=True)
        seen[order] = True
        for node in order[::-1][:-1]:  # leaves first; the start node has no parent
            subtree[predecessor[node]] += subtree[node]
        parent[order[1:]] = predecessor[order[1:]]
        component_mass[order] = subtree[first]
    side = np.full(edges.shape[0], np.inf)
    for e, (u, v) in enumerate(edges):
        child = v if parent[v] == u else (u if parent[u] == v else -1)
        if child >= 0:  # tree edge (on a cycle neither end is the other's parent for every edge)
            side[e] = min(subtree[child], component_mass[child] - subtree[child])
    return side


def _lookup(edges: np.ndarray, low: np.ndarray, high: np.ndarray, n_nodes: int) -> np.ndarray:
    """Edge index of each (low, high) pair, -1 where the pair is not an edge (vectorised)."""
    codes = edges[:, 0].astype(np.int64) * n_nodes + edges[:, 1]
    query = low.astype(np.int64) * n_nodes + high
    position = np.searchsorted(codes, query)
    position = np.minimum(position, codes.size - 1)
    return np.where(codes[position] == query, position, -1)


def bridging_edges(points: np.ndarray, nodes: np.ndarray, adjacency: sparse.spmatrix, *, min_gap: float = MIN_GAP) -> np.ndarray:
    """The edges (E × 2, i < j) of the graph that cross a gap in the data (:func:`gap_edges`)."""
    result = gap_edges(points, nodes, adjacency, project_onto_graph(points, nodes, adjacency), min_gap=min_gap)
    return result.edges[result.flagged]
