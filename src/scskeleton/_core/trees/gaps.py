"""Edges of a node graph that bridge a gap in the data.

A spanning tree joins every node, so on separate clusters (distinct cell types
with no transition between them) it still draws edges from one cluster to the
next, and those edges look like branches. Such an edge crosses empty space:
along it there is a stretch that no cell projects onto, far longer than the
spread of the cells around its two ends. For an edge (u, v):

    gap(u, v)  = the longest stretch without a projected cell that overlaps
                 the edge, measured along its segment (the path through nodes
                 of degree 2 that holds it)
    width(u, v) = 1.4826 · MAD of the offsets, along the edge's direction, of
                  the cells whose nearest node is u or v (from that node)
    score      = gap / width

The stretch runs on across nodes that hold no cells: DDRTree's tree-length term
lays a chain of such centers across the gap between two clusters, and each of its
short edges alone is a fraction of the gap. Where a stretch scores above the
threshold, the cells within the tree's tube (the 95th percentile of all cells'
distances from the graph, :data:`NEAR_QUANTILE`) of its edges count as well,
wherever they project: a learner whose centers sit off their cells leaves sparse
stretches of a continuous trajectory without projected cells, but not without
cells beside them; across a gap there are none.

On a continuous trajectory, however uneven its density, cells follow each other
along every edge and the score stays low (a few widths, somewhat more on
random-walk branches that are nearly empty in the middle); across two clusters
the gap is many widths long.
The score is free of units. Only cells within a few widths of the
edge count as lying on it, so a wide cluster beside an edge does not fill
its gap.

An edge is also a bridge where the cells' own neighbourhood graph falls apart
at it: no pair of :data:`KNN_NEIGHBOURS`-nearest neighbours (scanpy's default
``n_neighbors``, among up to :data:`KNN_CELLS` cells spread over the data) has
its two cells on the edge's two sides, each side holding at least
:data:`MIN_GROUP` of those cells. Gaussian clusters six to eight standard
deviations apart (``datasets.blobs`` at its defaults) leave an empty stretch of
only 5–6 widths between them, under the threshold, yet no cell of one has a
neighbour in the other; along a trajectory cells keep neighbours across nearly
every edge.
A group of a few times k cells can hold all its members' neighbours without
being apart (e.g. a dense ball of cells at the end of a sparse branch); hence
:data:`MIN_GROUP`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from ..graphs import edge_list, knn_edges
from .assign import CHUNK_ROWS
from .trajectory import GraphProjection, project_onto_graph, topology

#: An edge whose empty stretch exceeds this many noise widths bridges a gap.
MIN_GAP = 8.0
#: A gap edge must leave at least this share of the cells on either side of it.
MIN_SIDE = 0.02
#: Fewer cells than this at an edge's two ends give no width of their own.
MIN_WIDTH_CELLS = 5
#: Cells within this quantile of all cells' distances from the graph lie beside an edge, wherever they project.
NEAR_QUANTILE = 0.95
#: Neighbours per cell of the neighbourhood graph whose falling apart at an edge marks a bridge (scanpy's default).
KNN_NEIGHBOURS = 15
#: Cells, spread over the data, on which that graph is built.
KNN_CELLS = 3000
#: Cells of that sample each side of an edge must hold, besides :data:`MIN_SIDE`, for the graph's falling apart to count.
MIN_GROUP = 4 * KNN_NEIGHBOURS


@dataclass(frozen=True)
class GapEdges:
    """Result of :func:`gap_edges`.

    Attributes
    ----------
    edges
        E × 2 undirected edges (i < j) of the graph.
    score
        Longest empty stretch along each edge, in noise widths.
    crossings
        Neighbour pairs whose two cells lie on either side of each edge; -1 where a side holds
        less than :data:`MIN_SIDE` or :data:`MIN_GROUP` of the sampled cells.
    flagged
        Boolean mask of the edges whose score exceeds the threshold or that no neighbour pair crosses.
    """

    edges: np.ndarray
    score: np.ndarray
    crossings: np.ndarray
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
        return GapEdges(edges, score, np.zeros(0, dtype=np.intp), np.zeros(0, dtype=bool))
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
    lengths = np.linalg.norm(nodes[edges[:, 1]] - nodes[edges[:, 0]], axis=1)
    for e, (u, v) in enumerate(edges):
        if lengths[e] <= 0:
            continue
        direction = (nodes[v] - nodes[u]) / lengths[e]
        near_u, near_v = order[bounds[u] : bounds[u + 1]], order[bounds[v] : bounds[v + 1]]
        offsets = np.concatenate([(points[near_u] - nodes[u]) @ direction, (points[near_v] - nodes[v]) @ direction])
        if offsets.size >= MIN_WIDTH_CELLS:
            width[e] = 1.4826 * float(np.median(np.abs(offsets - np.median(offsets))))
    # nodes holding few cells give no width of their own; none is narrower than the typical edge's
    typical = float(np.nanmedian(width)) if np.isfinite(width).any() else 0.0
    width = np.fmax(width, typical)
    # each cell's position along its edge (a fraction, from the edge's lower node)
    fractions = [along[by_edge[edge_bounds[e] : edge_bounds[e + 1]]] for e in range(n_edges)]
    segments = topology(adjacency, nodes).segments
    score = np.divide(_empty_stretches(edges, lengths, fractions, segments), width, out=np.zeros(n_edges),
                      where=width > 0)
    # A stretch across nodes that hold no cell may still have cells beside it, which project onto other
    # edges (DDRTree's smoothed centers leave sparse stretches of a trajectory empty that way); only cells
    # further from it than the tree's tube of cells leave it empty.
    candidates = np.flatnonzero(score > min_gap)
    if candidates.size:
        radius = float(np.quantile(projection.distance, NEAR_QUANTILE))
        for e in candidates:
            fractions[e] = np.concatenate([fractions[e], _fractions_near(points, nodes[edges[e, 0]], nodes[edges[e, 1]],
                                                                         radius)])
        score = np.divide(_empty_stretches(edges, lengths, fractions, segments), width, out=np.zeros(n_edges),
                          where=width > 0)
    # a gap that cuts off a handful of cells is an outlier, not a separate cluster
    forest = _RootedForest(adjacency)
    side = forest.smaller_sides(edges, np.bincount(start, minlength=nodes.shape[0]))
    score[side < MIN_SIDE * start.size] = 0.0
    crossings = _neighbour_crossings(points, forest, edges, np.where(t < 0.5, start, end))
    return GapEdges(edges=edges, score=score, crossings=crossings, flagged=(score > min_gap) | (crossings == 0))


def _neighbour_crossings(points: np.ndarray, forest: _RootedForest, edges: np.ndarray,
                         node: np.ndarray) -> np.ndarray:
    """For each edge of a forest, the pairs of the cells' :data:`KNN_NEIGHBOURS`-nearest-neighbour graph
    (on up to :data:`KNN_CELLS` cells spread over the data) whose cells lie on either side of it; ``node``
    is each cell's node. -1 where a side holds less than :data:`MIN_SIDE` or :data:`MIN_GROUP` of those
    cells, or the edge is on a cycle."""
    crossings = np.full(edges.shape[0], -1, dtype=np.intp)
    sample = np.linspace(0, points.shape[0] - 1, min(points.shape[0], KNN_CELLS)).astype(np.intp)
    if sample.size <= KNN_NEIGHBOURS:
        return crossings
    pairs = node[sample][knn_edges(points[sample], KNN_NEIGHBOURS)]
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    between, count = np.unique(np.sort(pairs, axis=1), axis=0, return_counts=True)
    side = forest.smaller_sides(edges, np.bincount(node[sample], minlength=forest.first.size))
    for e in np.flatnonzero(side >= max(MIN_SIDE * sample.size, MIN_GROUP)):
        child = forest.child(*edges[e])
        crossings[e] = int(count[forest.is_below(child, between[:, 0]) != forest.is_below(child, between[:, 1])].sum())
    return crossings


def _empty_stretches(edges: np.ndarray, lengths: np.ndarray, fractions: list[np.ndarray], segments) -> np.ndarray:
    """For each edge, the longest stretch without a cell that overlaps it, measured along its segment (the
    path through nodes of degree 2 that holds it); ``fractions[e]``: the cells' positions on edge e, from
    its lower node. A chain of nodes without cells, as a learner whose centers are smoothed towards each
    other (DDRTree) lays across a gap between two clusters, is one empty stretch, however many short
    edges it has."""
    n_nodes = int(edges.max()) + 1
    gap = np.zeros(edges.shape[0])
    for path in segments:
        if path.size < 2:
            continue
        u, v = path[:-1], path[1:]
        ids = _lookup(edges, np.minimum(u, v), np.maximum(u, v), n_nodes)
        start = np.concatenate([[0.0], np.cumsum(lengths[ids])])
        positions = [start[i] + (fractions[e] if u[i] < v[i] else 1.0 - fractions[e]) * lengths[e]
                     for i, e in enumerate(ids)]
        positions = np.sort(np.concatenate([[0.0, start[-1]], *positions]))
        stretch = np.diff(positions)
        # stretch k, (positions[k], positions[k + 1]), overlaps edge i's (start[i], start[i + 1])
        first = np.searchsorted(positions, start[:-1], side="right") - 1
        last = np.searchsorted(positions, start[1:], side="left") - 1
        for i, e in enumerate(ids):
            gap[e] = stretch[first[i] : max(last[i], first[i]) + 1].max()
    return gap


def _fractions_near(points: np.ndarray, low: np.ndarray, high: np.ndarray, radius: float) -> np.ndarray:
    """Positions (fractions from ``low``) of the closest points on the segment low–high of the points
    within ``radius`` of it."""
    direction = high - low
    length2 = float(direction @ direction)
    out = []
    for lo in range(0, points.shape[0], CHUNK_ROWS):
        offset = points[lo : lo + CHUNK_ROWS] - low
        along = offset @ direction
        t = np.clip(along / length2, 0.0, 1.0) if length2 > 0 else np.zeros(offset.shape[0])
        distance2 = np.einsum("cd,cd->c", offset, offset) - 2.0 * t * along + t**2 * length2
        out.append(t[distance2 <= radius**2])
    return np.concatenate(out)


class _RootedForest:
    """A forest rooted at the lowest node of each component. Depth-first order numbers each subtree
    contiguously: x lies below v iff ``first[v] <= first[x] < last[v]``."""

    def __init__(self, adjacency: sparse.spmatrix):
        n_nodes = adjacency.shape[0]
        self.first = np.zeros(n_nodes, dtype=np.intp)
        size = np.ones(n_nodes, dtype=np.intp)
        self.parent = np.full(n_nodes, -1, dtype=np.intp)
        self.component = np.zeros(n_nodes, dtype=np.intp)
        seen = np.zeros(n_nodes, dtype=bool)
        offset = 0
        for origin in range(n_nodes):
            if seen[origin]:
                continue
            order, predecessor = csgraph.depth_first_order(adjacency, origin, directed=False,
                                                           return_predecessors=True)
            seen[order] = True
            self.first[order] = offset + np.arange(order.size)
            for node in order[::-1][:-1]:  # leaves first; the start node has no parent
                size[predecessor[node]] += size[node]
            self.parent[order[1:]] = predecessor[order[1:]]
            self.component[order] = origin
            offset += order.size
        self.last = self.first + size

    def child(self, u: int, v: int) -> int:
        """The end of edge (u, v) below the other; -1 on a cycle, where neither is the other's parent."""
        return v if self.parent[v] == u else (u if self.parent[u] == v else -1)

    def is_below(self, child: int, nodes: np.ndarray) -> np.ndarray:
        """Whether each of ``nodes`` lies in the subtree of ``child``."""
        return (self.first[child] <= self.first[nodes]) & (self.first[nodes] < self.last[child])

    def smaller_sides(self, edges: np.ndarray, mass: np.ndarray) -> np.ndarray:
        """For each edge, the ``mass`` (per node) on its smaller side; inf for an edge on a cycle."""
        cumulative = np.concatenate([[0.0], np.cumsum(mass[np.argsort(self.first)], dtype=float)])
        below = cumulative[self.last] - cumulative[self.first]
        total = np.bincount(self.component, weights=mass, minlength=mass.size)[self.component]
        child = np.array([self.child(u, v) for u, v in edges], dtype=np.intp)
        side = np.full(edges.shape[0], np.inf)
        tree = child >= 0
        side[tree] = np.minimum(below[child[tree]], total[child[tree]] - below[child[tree]])
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
