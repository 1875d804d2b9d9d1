"""Bootstrap support of branch points and leaves: which branches are real?

A fitted tree is compared with trees refitted on subsamples of the cells. The
comparison never looks at node positions or ids (a refit has its own nodes,
possibly in its own latent space): it compares *sets of cells*, so it needs
only each fit's adjacency and where each cell projects onto it
(:func:`~scskeleton._core.trees.trajectory.project_onto_graph`), and it needs no root.

Branch points and their arms
    A branch point b (degree m ≥ 3) splits its connected component into m
    *arms*: the connected components of the graph with b removed (on a tree,
    one arm per neighbour of b). A cell belongs to the arm that holds its
    projection edge; a cell that projects exactly onto b belongs to none.
    In a refit, b is *supported* when every arm of b can be matched, one to
    one, to a refitted arm with Jaccard index ≥ ``min_jaccard`` (over the
    cells both fits saw). The refitted candidates are the arms of every
    refitted branch point and, for refitted points of degree m' ≥ 4, also the
    unions of 2 … m' − 2 of their arms. This makes the test agnostic to how a
    multifurcation is resolved: a 4-way point X|Y|Z|W is supported by a refit
    with two close 3-way points X|Y|(Z∪W…) and Z|W|(X∪Y…) (each arm is the arm
    of one of them), and each of two close 3-way points X|Y|(Z∪W) is supported
    by a refit with one 4-way point (Z∪W is a union of two of its arms).
    Requiring *every* arm, the large ones included, makes the test local: arms
    matched at refitted points far apart leave the cells between them out of
    one of the large arms, which then fails to match. A spurious stub fails
    because its few cells form no arm of a refit.

Leaves and their terminal segments
    The terminal segment of a leaf l is the path from l to the first node of
    degree ≠ 2 (its branch point, or the other end of a bare path). Its cells
    are those projecting onto its edges, except cells exactly at a branch
    point at its end. Leaf l is supported in a refit when some refitted
    terminal segment has Jaccard index ≥ ``min_jaccard`` with it.

Support
    The fraction of refits in which a branch point or leaf is supported.

Everything is a sparse cells × sets indicator matrix, so the overlaps of all
sets of two fits are one sparse product (O(N · B · B') for B, B' branch
points); nothing is N × N.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csgraph

from ..graphs import degrees, symmetrize

#: Refitted branch points of higher degree contribute their single arms only
#: (the unions of arms grow as 2^degree).
MAX_RESOLVED_DEGREE = 8


@dataclass(frozen=True)
class CellSets:
    """Sets of cells, one column of a sparse 0/1 indicator matrix per set.

    ``owner[j]`` is the position (in the list of branch points or leaves the
    sets were built for) of the feature set ``j`` belongs to.
    """

    membership: sparse.csr_matrix  # n_cells × n_sets, 0/1
    owner: np.ndarray  # n_sets, int

    @property
    def n_cells(self) -> int:
        return self.membership.shape[0]

    def subset(self, cells: np.ndarray) -> CellSets:
        """The same sets restricted to the rows ``cells`` (e.g. a subsample)."""
        return CellSets(membership=self.membership[cells], owner=self.owner)


@dataclass(frozen=True)
class TreeSets:
    """The cell sets that describe a fitted tree's topology (see the module docstring).

    ``arms`` holds the arms of each branch point (owner = position in
    ``branch_points``); ``segments`` one terminal segment per leaf (owner =
    position in ``leaves``).
    """

    branch_points: np.ndarray
    leaves: np.ndarray
    arms: CellSets
    segments: CellSets

    def subset(self, cells: np.ndarray) -> TreeSets:
        """The same sets restricted to the rows ``cells``."""
        return TreeSets(
            branch_points=self.branch_points,
            leaves=self.leaves,
            arms=self.arms.subset(cells),
            segments=self.segments.subset(cells),
        )


def node_at(edge_start: np.ndarray, edge_end: np.ndarray, fraction: np.ndarray) -> np.ndarray:
    """The node each cell projects exactly onto, or -1 for cells inside an edge.

    A projection point ``start + fraction · (end − start)`` is the node
    ``start`` at fraction 0 (and on a node without edges, ``start == end``),
    the node ``end`` at fraction 1.
    """
    edge_start = np.asarray(edge_start, dtype=np.intp)
    edge_end = np.asarray(edge_end, dtype=np.intp)
    fraction = np.asarray(fraction, dtype=float)
    at = np.full(edge_start.shape, -1, dtype=np.intp)
    at_start = (fraction <= 0.0) | (edge_start == edge_end)
    at[at_start] = edge_start[at_start]
    at_end = ~at_start & (fraction >= 1.0)
    at[at_end] = edge_end[at_end]
    return at


def node_arms(adjacency: sparse.spmatrix, branch_point: int) -> np.ndarray:
    """Arm label of every node around ``branch_point``.

    The arms are the connected components of the graph without
    ``branch_point`` that touch it: one per neighbour on a tree, fewer where
    a cycle joins neighbours. They are numbered 0, 1, … in the order of their
    smallest neighbour of ``branch_point``. The branch point itself and nodes
    of other connected components get -1.
    """
    return _node_arms(symmetrize(adjacency), branch_point)


def _node_arms(adjacency: sparse.csr_matrix, branch_point: int) -> np.ndarray:
    """:func:`node_arms` on an already symmetric CSR adjacency."""
    keep = np.ones(adjacency.shape[0])
    keep[branch_point] = 0.0
    without = sparse.diags(keep) @ adjacency @ sparse.diags(keep)
    n_components, component = csgraph.connected_components(without, directed=False)
    neighbours = np.sort(adjacency.indices[adjacency.indptr[branch_point] : adjacency.indptr[branch_point + 1]])
    arm_of_component = np.full(n_components, -1, dtype=np.intp)
    n_arms = 0
    for neighbour in neighbours:
        if arm_of_component[component[neighbour]] < 0:
            arm_of_component[component[neighbour]] = n_arms
            n_arms += 1
    labels = arm_of_component[component]
    labels[branch_point] = -1
    return labels


def cell_arms(
    adjacency: sparse.spmatrix,
    edge_start: np.ndarray,
    edge_end: np.ndarray,
    fraction: np.ndarray,
    branch_point: int,
) -> np.ndarray:
    """Arm label of every cell around ``branch_point`` (see :func:`node_arms`).

    A cell on edge (u, v) belongs to the arm of the endpoint that is not the
    branch point (u and v share an arm otherwise); cells projecting exactly
    onto the branch point, or onto another connected component, get -1.
    """
    return _cell_labels(node_arms(adjacency, branch_point), edge_start, edge_end, fraction, branch_point)


def _cell_labels(node_labels, edge_start, edge_end, fraction, branch_point: int) -> np.ndarray:
    edge_start = np.asarray(edge_start, dtype=np.intp)
    edge_end = np.asarray(edge_end, dtype=np.intp)
    other = np.where(edge_start != branch_point, edge_start, edge_end)
    cells = node_labels[other]
    cells[node_at(edge_start, edge_end, fraction) == branch_point] = -1
    return cells


def terminal_segments(adjacency: sparse.spmatrix) -> tuple[np.ndarray, list[np.ndarray]]:
    """The leaves (degree 1) and, for each, its terminal segment as a node path.

    The path runs from the leaf to the first node of degree ≠ 2: a branch
    point, or the other leaf when the component is a bare path (both leaves
    then have the same segment, in opposite directions).
    """
    adjacency = symmetrize(adjacency)
    degree = degrees(adjacency)
    leaves = np.flatnonzero(degree == 1)
    paths = []
    for leaf in leaves:
        path = [int(leaf)]
        previous = -1
        while True:
            here = path[-1]
            neighbours = adjacency.indices[adjacency.indptr[here] : adjacency.indptr[here + 1]]
            step = int(next(n for n in neighbours if n != previous))
            path.append(step)
            previous = here
            if degree[step] != 2:
                break
        paths.append(np.asarray(path, dtype=np.intp))
    return leaves, paths


def segment_sets(
    adjacency: sparse.spmatrix,
    edge_start: np.ndarray,
    edge_end: np.ndarray,
    fraction: np.ndarray,
) -> CellSets:
    """The cells of each leaf's terminal segment (one set per leaf, in the order of
    :func:`terminal_segments`).

    A cell is on a segment when its projection edge is one of the segment's
    edges; cells exactly at a branch point that ends the segment are left out
    (they sit on several segments at once).
    """
    adjacency = symmetrize(adjacency)
    n_nodes = adjacency.shape[0]
    degree = degrees(adjacency)
    leaves, paths = terminal_segments(adjacency)
    edge_start = np.asarray(edge_start, dtype=np.intp)
    edge_end = np.asarray(edge_end, dtype=np.intp)
    # One id per distinct segment (a bare path is the segment of both its leaves).
    segment_id, leaf_segment, ends = {}, [], []
    rows, cols, ids = [], [], []
    for path in paths:
        name = tuple(sorted((int(path[0]), int(path[-1])))) + (path.size,)
        if name not in segment_id:
            segment_id[name] = len(segment_id)
            ends.append(int(path[-1]) if degree[path[-1]] >= 3 else -2)  # -2: no node, not even -1
            rows.extend([path[:-1], path[1:]])
            cols.extend([path[1:], path[:-1]])
            ids.append(np.full(2 * (path.size - 1), segment_id[name] + 1))
        leaf_segment.append(segment_id[name])
    n_cells = edge_start.size
    if not paths:
        return CellSets(sparse.csr_matrix((n_cells, 0)), np.empty(0, dtype=np.intp))
    edge_ids = sparse.csr_matrix(
        (np.concatenate(ids), (np.concatenate(rows), np.concatenate(cols))), shape=(n_nodes, n_nodes)
    )
    label = np.asarray(edge_ids[edge_start, edge_end]).ravel().astype(np.intp) - 1
    at = node_at(edge_start, edge_end, fraction)
    on = label >= 0
    on[on] = at[on] != np.asarray(ends, dtype=np.intp)[label[on]]
    per_segment = _indicator(np.where(on, label, -1), len(segment_id))
    return CellSets(membership=per_segment[:, leaf_segment].tocsr(), owner=np.arange(leaves.size, dtype=np.intp))


def arm_sets(
    adjacency: sparse.spmatrix,
    edge_start: np.ndarray,
    edge_end: np.ndarray,
    fraction: np.ndarray,
    branch_points: np.ndarray,
) -> CellSets:
    """The arms of each branch point as cell sets (owner = position in ``branch_points``)."""
    adjacency = symmetrize(adjacency)
    blocks, owners = [], []
    n_cells = np.asarray(edge_start).size
    for position, point in enumerate(np.asarray(branch_points, dtype=np.intp)):
        node_labels = _node_arms(adjacency, int(point))
        n_arms = int(node_labels.max()) + 1
        blocks.append(_indicator(_cell_labels(node_labels, edge_start, edge_end, fraction, int(point)), n_arms))
        owners.append(np.full(n_arms, position, dtype=np.intp))
    if not blocks:
        return CellSets(sparse.csr_matrix((n_cells, 0)), np.empty(0, dtype=np.intp))
    return CellSets(membership=sparse.hstack(blocks, format="csr"), owner=np.concatenate(owners))


def tree_sets(
    adjacency: sparse.spmatrix, edge_start: np.ndarray, edge_end: np.ndarray, fraction: np.ndarray
) -> TreeSets:
    """Branch points (degree ≥ 3), leaves (degree 1) and their cell sets for one fit."""
    adjacency = symmetrize(adjacency)
    degree = degrees(adjacency)
    branch_points = np.flatnonzero(degree >= 3)
    segments = segment_sets(adjacency, edge_start, edge_end, fraction)
    return TreeSets(
        branch_points=branch_points,
        leaves=np.flatnonzero(degree == 1),
        arms=arm_sets(adjacency, edge_start, edge_end, fraction, branch_points),
        segments=segments,
    )


def resolutions(arms: CellSets, *, max_degree: int = MAX_RESOLVED_DEGREE) -> CellSets:
    """The arms plus, at each branch point of degree m ≥ 4 (up to ``max_degree``),
    every union of 2 … m − 2 of its arms.

    These unions are the arms the point would have in any resolution of the
    multifurcation into nearby 3-way points, so they are the candidates a
    coarser refit offers (see the module docstring).
    """
    columns, owners = [], []
    for position in np.unique(arms.owner):
        own = np.flatnonzero(arms.owner == position)
        columns.extend([[int(j)] for j in own])
        if 4 <= own.size <= max_degree:
            for size in range(2, own.size - 1):
                columns.extend([list(map(int, c)) for c in combinations(own, size)])
        owners.extend([position] * (len(columns) - len(owners)))
    if not columns:
        return arms
    rows = np.concatenate([np.asarray(c) for c in columns])
    cols = np.repeat(np.arange(len(columns)), [len(c) for c in columns])
    select = sparse.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(arms.membership.shape[1], len(columns)))
    return CellSets(membership=(arms.membership @ select).tocsr(), owner=np.asarray(owners, dtype=np.intp))


def jaccard(first: sparse.spmatrix, second: sparse.spmatrix) -> np.ndarray:
    """Jaccard index |A ∩ B| / |A ∪ B| between every column of two cells × sets
    0/1 matrices over the same cells; 0 where both sets are empty."""
    first = sparse.csr_matrix(first, dtype=float)
    second = sparse.csr_matrix(second, dtype=float)
    if first.shape[0] != second.shape[0]:
        raise ValueError(f"Both fits must describe the same cells; got {first.shape[0]} and {second.shape[0]} rows.")
    overlap = np.asarray((first.T @ second).todense(), dtype=float)
    size_first = np.asarray(first.sum(axis=0)).ravel()
    size_second = np.asarray(second.sum(axis=0)).ravel()
    union = size_first[:, None] + size_second[None, :] - overlap
    return np.divide(overlap, union, out=np.zeros_like(overlap), where=union > 0)


def arms_matched(similarity: np.ndarray, min_jaccard: float) -> bool:
    """Whether every row (an arm) can be given its own column (a candidate) with
    similarity ≥ ``min_jaccard``: a maximum bipartite matching on the
    thresholded matrix (Hungarian algorithm, ties broken towards higher
    similarity) that covers every row."""
    n_rows, n_cols = similarity.shape
    if n_rows == 0:
        return True
    if n_cols < n_rows:
        return False
    passing = similarity >= min_jaccard
    if not passing.any(axis=1).all():
        return False
    rows, cols = linear_sum_assignment(passing + 1e-3 * similarity, maximize=True)
    return rows.size == n_rows and bool(passing[rows, cols].all())


def supported(reference: TreeSets, refit: TreeSets, min_jaccard: float) -> tuple[np.ndarray, np.ndarray]:
    """Which reference branch points and leaves a refit supports.

    ``reference`` and ``refit`` must describe the same cells in the same order
    (restrict the reference with :meth:`TreeSets.subset`). Returns boolean
    arrays over ``reference.branch_points`` and ``reference.leaves``.
    """
    candidates = resolutions(refit.arms)
    arm_similarity = jaccard(reference.arms.membership, candidates.membership)
    points = np.array(
        [
            arms_matched(arm_similarity[reference.arms.owner == position], min_jaccard)
            for position in range(reference.branch_points.size)
        ],
        dtype=bool,
    )
    segment_similarity = jaccard(reference.segments.membership, refit.segments.membership)
    best = segment_similarity.max(axis=1, initial=0.0)
    leaves = np.zeros(reference.leaves.size, dtype=bool)
    leaves[reference.segments.owner] = best >= min_jaccard
    return points, leaves


def _indicator(labels: np.ndarray, n_sets: int) -> sparse.csr_matrix:
    """cells × n_sets 0/1 matrix with a one at (i, labels[i]) for labels ≥ 0."""
    labels = np.asarray(labels, dtype=np.intp)
    cells = np.flatnonzero(labels >= 0)
    return sparse.csr_matrix(
        (np.ones(cells.size), (cells, labels[cells])), shape=(labels.size, n_sets)
    )
