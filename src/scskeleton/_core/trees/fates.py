"""Fate probabilities on a rooted tree: where the cells of each node end up.

A walk starts at a node and moves away from the root, at each fork into a
child with probability proportional to the cell mass downstream of that
child, until it stops at a leaf. A node's fate distribution is the
probability of stopping at each leaf; on a path it is that of the next fork,
and at a fork it is the mass-weighted mix of its children's. A cell's fate
probabilities are its soft-assignment-weighted mix of its nodes'
distributions: P = R D, for the N × K assignment R and the K × L node
distributions D, computed block by block of cells (R is never densified).
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
    """The fates (leaves reached from a root, ascending node index) and each node's distribution over them.

    ``distributions`` is K × L; its rows sum to 1 on the nodes of rooted
    components and are 0 elsewhere (and on a root with no edges).
    """

    leaves: np.ndarray
    distributions: np.ndarray


def node_fates(
    adjacency: sparse.spmatrix, nodes: np.ndarray, segments: list[np.ndarray], roots, mass: np.ndarray
) -> NodeFates:
    """Each node's distribution over the leaves downstream of it (see the module docstring).

    ``segments`` are the node paths of the trajectory's topology, oriented
    away from the root(s) (``topology().segments``); their edges form the
    tree the walk runs on. Nodes of pruned branches lie on no segment: their
    mass counts at the nearest node on one (along ``adjacency``), and they take
    its distribution. ``mass`` is each node's cell mass (the column sums of the
    assignment). A ValueError when a segment closes a cycle, i.e. a node would
    be reached by two ways from the root.
    """
    n_nodes = nodes.shape[0]
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    parent = np.full(n_nodes, -1, dtype=np.intp)
    children: list[list[int]] = [[] for _ in range(n_nodes)]
    on_segment = np.zeros(n_nodes, dtype=bool)
    for path in segments:
        path = np.asarray(path, dtype=np.intp)
        on_segment[path] = True
        if path.size > 1 and path[0] == path[-1]:
            raise ValueError(f"The segment through node {int(path[0])} is a cycle; fate probabilities need a tree.")
        for u, v in zip(path[:-1].tolist(), path[1:].tolist()):
            if (parent[v] >= 0 and parent[v] != u) or v in roots:
                raise ValueError(
                    f"Node {v} is reached by more than one way from the root (a cycle); fate probabilities need a tree."
                )
            if parent[v] < 0:
                parent[v] = u
                children[u].append(v)
    order = _downward_order(roots, children)
    leaves = np.sort(np.asarray([v for v in order if not children[v] and v not in roots], dtype=np.intp))

    hub = _nearest_on_segment(adjacency, nodes, on_segment)
    reachable = hub >= 0
    downstream = np.bincount(hub[reachable], weights=np.asarray(mass, dtype=float)[reachable], minlength=n_nodes)
    for v in reversed(order):
        if parent[v] >= 0:
            downstream[parent[v]] += downstream[v]

    distributions = np.zeros((n_nodes, leaves.size))
    distributions[leaves, np.arange(leaves.size)] = 1.0
    for v in reversed(order):  # children before their parent
        if children[v]:
            weight = downstream[children[v]]
            # a fork with no cells downstream splits evenly
            weight = weight / weight.sum() if weight.sum() > 0 else np.full(weight.size, 1.0 / weight.size)
            distributions[v] = weight @ distributions[children[v]]
    off = ~on_segment & reachable
    distributions[off] = distributions[hub[off]]
    return NodeFates(leaves=leaves, distributions=distributions)


def _downward_order(roots: np.ndarray, children: list[list[int]]) -> list[int]:
    """The nodes reached from the roots, each after its parent (breadth first)."""
    order = [int(r) for r in roots]
    for v in order:  # grows while it is read
        order.extend(children[v])
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
