"""Fate probabilities on a rooted tree: where the cells of each node end up.

Every edge of the trajectory points downstream, away from the root(s): the
way its segment runs (``tl.pseudotime`` orients each segment by increasing
pseudotime of its nodes, the distance from the nearest root). A walk starts
at a node and moves downstream, at each fork into a child with probability
proportional to the cell mass downstream of that child, until it reaches a
node with nowhere further to go: a *terminal* node. That is a tip (a leaf
that is not a root) or, with several roots in one component, a *sink*: a
node that every neighbour's edge points into, where the stretches measured
from two roots meet (a meeting point on a path, or a branch point all of
whose branches lead back to roots). A sink is a fate of its own: its cells
are the furthest along the pseudotime the user has, and no tip lies
downstream of them, so sending them on to some tip would run against that
pseudotime. A node's fate distribution is the probability of stopping at
each terminal node; on a path it is that of the next fork, and at a fork it
is the mass-weighted mix of its children's. Where two roots' stretches
converge on a node (it has two parents), the walks from both continue from
it alike. With one root per component every node has one parent and this is
the walk down a tree from its root. A cell's fate probabilities are its
soft-assignment-weighted mix of its nodes' distributions: P = R D, for the
N × K assignment R and the K × L node distributions D, computed block by
block of cells (R is never densified).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.special import entr

from ..graphs import edge_lengths
from .assign import CHUNK_ROWS


@dataclass(frozen=True)
class NodeFates:
    """The fates (terminal nodes reached from a root, ascending node index) and each node's distribution over them.

    ``leaves`` holds every terminal node: the tips and the ``sinks``, the
    terminal nodes that are not leaves of the tree (where two roots'
    stretches meet). ``distributions`` is K × L; its rows sum to 1 on the
    nodes of rooted components and are 0 elsewhere (and on a root with no
    edge leading downstream).
    """

    leaves: np.ndarray
    distributions: np.ndarray
    sinks: np.ndarray


def node_fates(
    adjacency: sparse.spmatrix, nodes: np.ndarray, segments: list[np.ndarray], roots, mass: np.ndarray
) -> NodeFates:
    """Each node's distribution over the terminal nodes downstream of it (see the module docstring).

    ``segments`` are the node paths of the trajectory's topology, oriented
    away from the root(s) (``topology().segments``); their edges, each
    pointing the way its segment runs, form the tree the walk runs on. An edge
    between two roots (both at pseudotime 0) points nowhere and is left out.
    Nodes of pruned branches lie on no segment: their mass counts at the
    nearest node on one (along ``adjacency``), and they take its
    distribution. ``mass`` is each node's cell mass (the column sums of the
    assignment). A ValueError when the segments close a cycle, i.e. a node
    would be reached by two ways.
    """
    n_nodes = nodes.shape[0]
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    is_root = np.zeros(n_nodes, dtype=bool)
    is_root[roots] = True
    parents: list[list[int]] = [[] for _ in range(n_nodes)]
    children: list[list[int]] = [[] for _ in range(n_nodes)]
    on_segment = np.zeros(n_nodes, dtype=bool)
    tree = _Forest(n_nodes)
    for path in segments:
        path = np.asarray(path, dtype=np.intp)
        on_segment[path] = True
        if path.size > 1 and path[0] == path[-1]:
            raise ValueError(f"The segment through node {int(path[0])} is a cycle; fate probabilities need a tree.")
        for u, v in zip(path[:-1].tolist(), path[1:].tolist()):
            # with several roots a node may have two parents, so a cycle shows as an edge joining joined nodes
            if not tree.join(u, v):
                raise ValueError(
                    f"Node {v} is reached by more than one way from the root (a cycle); fate probabilities need a tree."
                )
            if is_root[v]:
                continue
            parents[v].append(u)
            children[u].append(v)
    order = _downward_order(roots, parents, children)
    terminal = [v for v in order if not children[v] and not is_root[v]]
    leaves = np.sort(np.asarray(terminal, dtype=np.intp))
    sinks = np.sort(np.asarray([v for v in terminal if len(parents[v]) > 1], dtype=np.intp))

    hub = _nearest_on_segment(adjacency, nodes, on_segment)
    reachable = hub >= 0
    downstream = np.bincount(hub[reachable], weights=np.asarray(mass, dtype=float)[reachable], minlength=n_nodes)
    for v in reversed(order):  # a node's downstream mass is final before it is added to its parents'
        for parent in parents[v]:
            downstream[parent] += downstream[v]

    distributions = np.zeros((n_nodes, leaves.size))
    distributions[leaves, np.arange(leaves.size)] = 1.0
    for v in reversed(order):  # children before their parents
        if children[v]:
            weight = downstream[children[v]]
            # a fork with no cells downstream splits evenly
            weight = weight / weight.sum() if weight.sum() > 0 else np.full(weight.size, 1.0 / weight.size)
            distributions[v] = weight @ distributions[children[v]]
    off = ~on_segment & reachable
    distributions[off] = distributions[hub[off]]
    return NodeFates(leaves=leaves, distributions=distributions, sinks=sinks)


class _Forest:
    """Union-find over the nodes: whether an edge joins two nodes that are already joined (a cycle)."""

    def __init__(self, n_nodes: int):
        self.up = list(range(n_nodes))

    def _top(self, node: int) -> int:
        while self.up[node] != node:
            self.up[node] = self.up[self.up[node]]  # path halving keeps the chains short
            node = self.up[node]
        return node

    def join(self, u: int, v: int) -> bool:
        """Join ``u`` and ``v``; False when they were joined already."""
        top_u, top_v = self._top(u), self._top(v)
        if top_u == top_v:
            return False
        self.up[top_u] = top_v
        return True


def _downward_order(roots: np.ndarray, parents: list[list[int]], children: list[list[int]]) -> list[int]:
    """The nodes reached from the roots, each after all its parents (breadth first).

    A node joins once its last parent has: with one parent each, that is when
    the parent is read, the plain breadth-first order of a rooted tree.
    """
    waiting = [len(p) for p in parents]
    order = [int(r) for r in roots]
    for v in order:  # grows while it is read
        for child in children[v]:
            waiting[child] -= 1
            if not waiting[child]:
                order.append(child)
    return order


def _nearest_on_segment(adjacency: sparse.spmatrix, nodes: np.ndarray, on_segment: np.ndarray) -> np.ndarray:
    """For every node, the nearest node on a segment along the graph (itself when on one; -1: none reachable)."""
    if on_segment.all():
        return np.arange(nodes.shape[0], dtype=np.intp)
    _, _, source = csgraph.dijkstra(
        edge_lengths(adjacency, nodes), directed=False, indices=np.flatnonzero(on_segment), min_only=True,
        return_predecessors=True,
    )
    return np.where(source >= 0, source, -1).astype(np.intp)


def cell_fates(assignment, distributions: np.ndarray, *, chunk_rows: int = CHUNK_ROWS) -> tuple[np.ndarray, np.ndarray]:
    """Fate probabilities P = R D (rows renormalised) and their entropy, for a dense or sparse N × K assignment R.

    Mass a cell has on nodes without a fate (a component without a root)
    is left out by the renormalisation; a cell with none on a rooted
    component gets NaN. The entropy is in nats (0 for a certain fate,
    log L for L equally likely ones).
    """
    n_cells = assignment.shape[0]
    probabilities = np.empty((n_cells, distributions.shape[1]))
    for lo in range(0, n_cells, chunk_rows):
        block = np.asarray(assignment[lo : lo + chunk_rows] @ distributions, dtype=float)
        total = block.sum(axis=1, keepdims=True)
        probabilities[lo : lo + chunk_rows] = np.divide(
            block, total, out=np.full_like(block, np.nan), where=total > 1e-12
        )
    return probabilities, entr(probabilities).sum(axis=1)
