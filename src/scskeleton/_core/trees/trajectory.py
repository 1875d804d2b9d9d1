"""Trajectories on any node graph: projection of cells, geodesic pseudotime,
branch points, segments and paths.

Works for trees and for graphs with cycles or several connected components.
Edge lengths are the Euclidean distances between node positions; the
adjacency only says which nodes are joined (its weights are not lengths).
Nothing here is N × N: cells are handled through their nearest node and its
incident edges, distances between nodes by Dijkstra over the K-node graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from .assign import CHUNK_ROWS, squared_distances
from ..graphs import degrees, edge_lengths, neighbour_table, symmetrize


@dataclass(frozen=True)
class GraphProjection:
    """Where each cell lands on the graph.

    The projection point of cell i is
    ``nodes[edge_start[i]] + fraction[i] * (nodes[edge_end[i]] - nodes[edge_start[i]])``.
    ``edge_start`` is the cell's nearest node; ``edge_end == edge_start`` for
    cells whose nearest node has no edges. ``overhang`` is how far a cell whose
    nearest node is a leaf lies beyond that leaf, along the leaf's edge (0 for
    every other cell): the tree's ends fall short of the data's ends (the
    length penalty pulls them in), and the cells out there are further along,
    not tied at the leaf.
    """

    edge_start: np.ndarray
    edge_end: np.ndarray
    fraction: np.ndarray
    distance: np.ndarray
    overhang: np.ndarray


@dataclass(frozen=True)
class Topology:
    """Branch points, leaves and segments of a node graph.

    A segment is a maximal path whose inner nodes have degree 2 and are not a
    root; it runs between branch points (degree ≥ 3), leaves (degree 1), roots
    or, for a component
    that is a bare cycle, from a node back to itself. An isolated node is a
    segment of its own. Segments are oriented away from the root(s) and
    numbered in order of their start's distance from the root.

    In a component with several roots, a *meeting point* also ends segments:
    a node of degree 2 at least as far from the nearest root as both its
    neighbours, where the stretches measured from two roots meet. Without it
    a segment between two roots would rise and fall in pseudotime.
    """

    branch_points: np.ndarray
    leaves: np.ndarray
    segments: list[np.ndarray]
    edge_segment: sparse.csr_matrix  # (u, v) -> segment id + 1 on every edge
    meeting_points: np.ndarray  # degree-2 nodes where the distances from two roots meet (see above)

    def segment_of(self, projection: GraphProjection) -> np.ndarray:
        """Segment id of each projected cell."""
        on_edge = projection.edge_start != projection.edge_end
        ids = np.empty(projection.edge_start.size, dtype=np.intp)
        ids[on_edge] = (
            np.asarray(self.edge_segment[projection.edge_start[on_edge], projection.edge_end[on_edge]]).ravel() - 1
        )
        if (~on_edge).any():
            lonely = {int(seg[0]): i for i, seg in enumerate(self.segments) if seg.size == 1}
            ids[~on_edge] = [lonely[int(k)] for k in projection.edge_start[~on_edge]]
        return ids


def project_onto_graph(points: np.ndarray, nodes: np.ndarray, adjacency: sparse.spmatrix) -> GraphProjection:
    """Project each point onto the graph: its nearest node, then the closest
    point on the edges incident to that node (orthogonal projection clamped to
    the segment). O(N · (K + degree) · d) time, O(chunk · (K + degree) · d) memory.
    """
    table = neighbour_table(adjacency)
    n_points, dim = points.shape
    chunk = max(1, min(CHUNK_ROWS, (1 << 22) // (table.shape[1] * dim)))
    starts = np.empty(n_points, dtype=np.intp)
    ends = np.empty(n_points, dtype=np.intp)
    fraction = np.empty(n_points)
    distance = np.empty(n_points)
    overhang = np.zeros(n_points)
    is_leaf = (table >= 0).sum(axis=1) == 1
    for lo in range(0, n_points, chunk):
        block = points[lo : lo + chunk]
        nearest = squared_distances(block, nodes).argmin(axis=1)
        neighbours = table[nearest]  # c × m
        valid = neighbours >= 0
        origin = nodes[nearest]  # c × d
        direction = nodes[np.where(valid, neighbours, nearest[:, None])] - origin[:, None, :]  # c × m × d
        length2 = np.einsum("cmd,cmd->cm", direction, direction)
        offset = block - origin
        along = np.einsum("cmd,cd->cm", direction, offset)
        raw = np.divide(along, length2, out=np.zeros_like(along), where=length2 > 0)
        t = np.clip(raw, 0.0, 1.0)
        at_leaf = is_leaf[nearest]
        if at_leaf.any():
            # a leaf has one edge, in column 0 of the neighbour table
            overhang[lo : lo + chunk][at_leaf] = np.maximum(-raw[at_leaf, 0], 0.0) * np.sqrt(length2[at_leaf, 0])
        residual = offset[:, None, :] - t[..., None] * direction
        dist2 = np.einsum("cmd,cmd->cm", residual, residual)
        dist2[~valid] = np.inf
        best = dist2.argmin(axis=1)
        rows = np.arange(block.shape[0])
        has_edge = valid[rows, best]
        starts[lo : lo + chunk] = nearest
        ends[lo : lo + chunk] = np.where(has_edge, neighbours[rows, best], nearest)
        fraction[lo : lo + chunk] = np.where(has_edge, t[rows, best], 0.0)
        distance[lo : lo + chunk] = np.sqrt(
            np.where(has_edge, dist2[rows, best], np.einsum("cd,cd->c", offset, offset))
        )
    return GraphProjection(edge_start=starts, edge_end=ends, fraction=fraction, distance=distance, overhang=overhang)


def geodesic_from(adjacency: sparse.spmatrix, nodes: np.ndarray, sources) -> np.ndarray:
    """Graph distances (sum of Euclidean edge lengths) from ``sources``.

    Returns a len(sources) × K array (inf where unreachable).
    """
    return csgraph.dijkstra(edge_lengths(adjacency, nodes), directed=False, indices=np.atleast_1d(sources))


def cell_geodesic(
    projection: GraphProjection, node_distance: np.ndarray, nodes: np.ndarray
) -> np.ndarray:
    """Geodesic distance of each cell's projection point, given node distances.

    The point splits its edge (u, v): the distance is the smaller of
    d(u) + t·|uv| and d(v) + (1 - t)·|uv|, exact on trees and cycles alike.
    A cell beyond a leaf that ends a path away from the sources adds its
    overhang (beyond a source leaf, it stays at the source's distance).
    """
    start, end, t = projection.edge_start, projection.edge_end, projection.fraction
    length = np.linalg.norm(nodes[end] - nodes[start], axis=1)
    distance = np.minimum(node_distance[start] + t * length, node_distance[end] + (1.0 - t) * length)
    outward = (projection.overhang > 0) & (node_distance[start] > node_distance[end])
    distance[outward] += projection.overhang[outward]
    return distance


def pseudotime(
    projection: GraphProjection, adjacency: sparse.spmatrix, nodes: np.ndarray, roots
) -> np.ndarray:
    """Geodesic pseudotime of every cell from the nearest of ``roots``.

    Cells in a connected component that holds no root get NaN.
    """
    node_distance = geodesic_from(adjacency, nodes, roots).min(axis=0)
    time = cell_geodesic(projection, node_distance, nodes)
    time[~np.isfinite(time)] = np.nan
    return time


def prune_short_branches(
    adjacency: sparse.spmatrix, *, min_branch_nodes: int, protected=(), drop_leaves=()
) -> tuple[sparse.csr_matrix, dict[int, int]]:
    """Drop terminal branches with fewer than ``min_branch_nodes`` nodes.

    A terminal branch is the path from a leaf up to (not including) the first
    node of degree ≥ 3. Such short stubs are a known artefact of spanning
    trees over noisy centers (Monocle 2 prunes them too). Branches holding a
    ``protected`` node (the root) are kept, and so are components that are a
    bare path. The terminal branches of ``drop_leaves`` (e.g. leaves with low
    bootstrap support) are removed whatever their length. Returns the pruned
    adjacency and, for each removed node, the kept node its branch hung from.
    """
    drop_leaves = {int(p) for p in np.atleast_1d(drop_leaves)}
    adjacency = symmetrize(adjacency)
    neighbours = [set(adjacency.indices[adjacency.indptr[k] : adjacency.indptr[k + 1]].tolist()) for k in range(adjacency.shape[0])]
    protected = {int(p) for p in np.atleast_1d(protected)}
    attach: dict[int, int] = {}
    changed = min_branch_nodes > 1 or bool(drop_leaves)
    while changed:
        changed = False
        for leaf in range(len(neighbours)):
            if len(neighbours[leaf]) != 1 or leaf in protected:
                continue
            branch, previous = [leaf], None
            here = leaf
            while len(neighbours[here]) <= 2:
                step = next((n for n in neighbours[here] if n != previous), None)
                if step is None:  # the component is a bare path
                    break
                previous, here = here, step
                if len(neighbours[here]) <= 2:
                    branch.append(here)
            short = len(branch) < min_branch_nodes or leaf in drop_leaves
            if len(neighbours[here]) < 3 or not short or protected & set(branch):
                continue
            hub = here
            for node in branch:
                for other in list(neighbours[node]):
                    neighbours[other].discard(node)
                neighbours[node].clear()
                attach[node] = hub
            changed = True
    for node, hub in attach.items():  # a hub may itself have been pruned later
        while hub in attach:
            hub = attach[hub]
        attach[node] = hub
    rows = [k for k, ns in enumerate(neighbours) for _ in ns]
    cols = [n for ns in neighbours for n in ns]
    pruned = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=adjacency.shape)
    return pruned, attach


def topology(
    adjacency: sparse.spmatrix, nodes: np.ndarray, roots=(), *, min_branch_nodes: int = 0, drop_leaves=()
) -> Topology:
    """Branch points, leaves and segments of the graph (see :class:`Topology`).

    Terminal branches with fewer than ``min_branch_nodes`` nodes are pruned
    first (:func:`prune_short_branches`); their edges count towards the
    segment of the node they hang from, the one nearest the root.
    """
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    full = symmetrize(adjacency)
    adjacency, attach = prune_short_branches(
        full, min_branch_nodes=min_branch_nodes, protected=roots, drop_leaves=drop_leaves
    )
    n_nodes = adjacency.shape[0]
    deg = degrees(adjacency)
    table = neighbour_table(adjacency)
    if roots.size:
        node_distance = geodesic_from(full, nodes, roots).min(axis=0)
    else:
        node_distance = np.full(n_nodes, np.inf)
    meeting = _meeting_points(adjacency, table, deg, roots, node_distance) - set(attach)
    # Roots (and meeting points) end segments too, so that every segment runs away from the root.
    ends = (set(np.flatnonzero(deg != 2).tolist()) | set(roots.tolist()) | meeting) - set(attach)

    visited: set[tuple[int, int]] = set()
    segments: list[list[int]] = []

    def walk(first: int, second: int) -> list[int]:
        path = [first, second]
        visited.add((min(first, second), max(first, second)))
        while path[-1] not in ends and path[-1] != path[0]:
            here, before = path[-1], path[-2]
            step = next(int(n) for n in table[here] if n >= 0 and n != before)
            visited.add((min(here, step), max(here, step)))
            path.append(step)
        return path

    for node in sorted(ends):
        if deg[node] == 0:
            segments.append([node])
        for neighbour in table[node]:
            if neighbour >= 0 and (min(node, neighbour), max(node, neighbour)) not in visited:
                segments.append(walk(node, int(neighbour)))
    # Components that are bare cycles have no endpoint: start at their smallest node.
    for node in range(n_nodes):
        for neighbour in table[node]:
            if neighbour >= 0 and (min(node, neighbour), max(node, neighbour)) not in visited:
                segments.append(walk(node, int(neighbour)))

    oriented = []
    for path in segments:
        first, last = node_distance[path[0]], node_distance[path[-1]]
        if last < first or (last == first and path[-1] < path[0]):
            path = path[::-1]
        oriented.append(np.asarray(path, dtype=np.intp))
    oriented.sort(key=lambda p: (node_distance[p[0]], node_distance[p[-1]], int(p[0]), int(p[-1]), p.size))

    segment_of_node = np.full(n_nodes, -1, dtype=np.intp)
    for index in range(len(oriented) - 1, -1, -1):  # the segment nearest the root wins
        segment_of_node[oriented[index]] = index
    full_coo = sparse.triu(full, k=1).tocoo()
    edge_ids = np.empty(full_coo.nnz, dtype=np.intp)
    core_ids = {}
    for index, path in enumerate(oriented):
        for u, v in zip(path[:-1], path[1:]):
            core_ids[(min(u, v), max(u, v))] = index
    for e, (u, v) in enumerate(zip(full_coo.row.tolist(), full_coo.col.tolist())):
        if (u, v) in core_ids:
            edge_ids[e] = core_ids[(u, v)]
        else:  # an edge of a pruned branch
            edge_ids[e] = segment_of_node[attach.get(u, attach.get(v, u))]
    edge_segment = sparse.csr_matrix(
        (np.concatenate([edge_ids, edge_ids]) + 1, (np.concatenate([full_coo.row, full_coo.col]), np.concatenate([full_coo.col, full_coo.row]))),
        shape=(n_nodes, n_nodes),
        dtype=np.intp,
    )
    return Topology(
        branch_points=np.flatnonzero(deg >= 3),
        leaves=np.flatnonzero(deg == 1),
        segments=oriented,
        edge_segment=edge_segment,
        meeting_points=np.asarray(sorted(meeting), dtype=np.intp),
    )


def _meeting_points(adjacency, table, deg, roots, node_distance) -> set[int]:
    """Nodes of degree 2, in components with several roots, that are local maxima of the distance to the nearest root.

    Only components with several roots are searched: on a cycle with one
    root the far side is such a maximum too, and single-root results stay as
    they were. (On a tree with one root no node of degree 2 is one anyway.)
    """
    component = components(adjacency)
    shared = np.isin(component, component[shared_roots(adjacency, roots)])
    candidates = np.flatnonzero(shared & (deg == 2) & np.isfinite(node_distance))
    candidates = candidates[~np.isin(candidates, roots)]
    neighbours = np.where(table[candidates] >= 0, table[candidates], candidates[:, None])
    mine, around = node_distance[candidates][:, None], node_distance[neighbours]
    # on a tie (a plateau, as on a symmetric path) only the smaller node index ends segments
    beats = (mine > around) | ((mine == around) & (candidates[:, None] <= neighbours))
    return set(candidates[beats.all(axis=1)].tolist())


def components(adjacency: sparse.spmatrix) -> np.ndarray:
    """Connected-component label of every node."""
    return csgraph.connected_components(adjacency, directed=False)[1]


def shared_roots(adjacency: sparse.spmatrix, roots) -> np.ndarray:
    """The ``roots`` that share their connected component with another root (in the order given)."""
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    component = components(adjacency)[roots]
    labels, counts = np.unique(component, return_counts=True)
    return roots[np.isin(component, labels[counts > 1])]


def root_node(
    adjacency: sparse.spmatrix, nodes: np.ndarray, group_mass: np.ndarray, total_mass: np.ndarray
) -> int:
    """The node that best marks where a group of cells starts the trajectory.

    ``group_mass[k]`` is the group's assignment mass on node k and
    ``total_mass[k]`` that of all cells. Only the connected component holding
    most of the group is considered (see :func:`root_nodes_per_component` for
    a root in every component); within it the choice is :func:`_best_root`.
    """
    group_mass = _checked_mass(group_mass)
    component = components(adjacency)
    members = np.flatnonzero(component == np.bincount(component, weights=group_mass).argmax())
    return _best_root(adjacency, nodes, members, group_mass, total_mass)


def root_nodes_per_component(
    adjacency: sparse.spmatrix, nodes: np.ndarray, group_mass: np.ndarray, total_mass: np.ndarray
) -> np.ndarray:
    """One root (as in :func:`root_node`) in every connected component the group reaches.

    A component is reached when it holds some of the group's assignment mass.
    Returns the roots ordered by component label.
    """
    group_mass = _checked_mass(group_mass)
    component = components(adjacency)
    reached = np.flatnonzero(np.bincount(component, weights=group_mass) > 0)
    return np.array(
        [_best_root(adjacency, nodes, np.flatnonzero(component == c), group_mass, total_mass) for c in reached],
        dtype=np.intp,
    )


def _checked_mass(group_mass) -> np.ndarray:
    group_mass = np.asarray(group_mass, dtype=float)
    if group_mass.sum() <= 0:
        raise ValueError("The cells that should mark the root carry no assignment mass.")
    return group_mass


def _best_root(adjacency, nodes, members, group_mass, total_mass) -> int:
    """The root among ``members`` (one connected component).

    A leaf is *reached* by the group when at least half of its mass belongs to
    the group; the root is the reached leaf with the smallest mass-weighted
    mean geodesic distance to the group. Failing that, a leaf whose terminal
    stretch (the nodes from the leaf up to, not including, the first branch
    point) holds at least half of the group's mass and whose own cells are
    richer in the group than the component as a whole: the group fills the start
    of that branch, as a progenitor population dense at one end of a trunk
    does, and pseudotime starts at its tip. If neither exists (the group sits
    inside the graph, e.g. progenitors at a fork, or the graph is a cycle),
    the root is the group's geodesic medoid: the member minimising that
    distance. Rooting at the nearest leaf instead would start the trajectory
    at whichever fate lies closest; the caller warns instead
    (:func:`nearest_leaf` names the tip to use).
    """
    share = np.divide(group_mass, total_mass, out=np.zeros_like(group_mass), where=total_mass > 0)
    degree = degrees(adjacency)
    leaves = members[degree[members] == 1]
    candidates = leaves[share[leaves] >= 0.5]
    if not candidates.size and leaves.size:
        adjacency = sparse.csr_matrix(adjacency)
        half = 0.5 * group_mass[members].sum()
        overall = group_mass[members].sum() / max(total_mass[members].sum(), np.finfo(float).tiny)
        candidates = np.array(
            [
                leaf for leaf in leaves
                if share[leaf] > overall and group_mass[_terminal_stretch(adjacency, degree, int(leaf))].sum() >= half
            ],
            dtype=np.intp,
        )
    if not candidates.size:
        candidates = members
    # distances are symmetric: search from the nodes the group occupies, usually far fewer
    # than the candidates when every cell is a node (cell-level graphs)
    occupied = members[group_mass[members] > 0]
    score = group_mass[occupied] @ geodesic_from(adjacency, nodes, occupied)[:, candidates]
    return int(candidates[np.argmin(score)])


def _terminal_stretch(adjacency: sparse.csr_matrix, degree: np.ndarray, leaf: int) -> np.ndarray:
    """Nodes from ``leaf`` inwards up to, not including, the first node of degree ≥ 3 (``adjacency`` in CSR)."""
    stretch, previous, here = [leaf], -1, leaf
    while True:
        ahead = [n for n in adjacency.indices[adjacency.indptr[here] : adjacency.indptr[here + 1]] if n != previous]
        if not ahead or degree[ahead[0]] >= 3 or ahead[0] == leaf:
            return np.asarray(stretch, dtype=np.intp)
        previous, here = here, int(ahead[0])
        stretch.append(here)


def reaches_leaf(group_mass: np.ndarray, total_mass: np.ndarray, node: int) -> bool:
    """Whether the group makes up at least half of the assignment mass of ``node``."""
    return bool(total_mass[node] > 0 and group_mass[node] >= 0.5 * total_mass[node])


def nearest_leaf(adjacency: sparse.spmatrix, nodes: np.ndarray, node: int) -> int | None:
    """The leaf nearest to ``node`` along the graph (``None`` if its component has none)."""
    leaves = np.flatnonzero(degrees(adjacency) == 1)
    if not leaves.size:
        return None
    distance = geodesic_from(adjacency, nodes, node)[0, leaves]
    if not np.isfinite(distance).any():
        return None
    return int(leaves[np.argmin(distance)])


#: A root stub may reach this many noise widths past the root's node: the cells at the end of a
#: trajectory spread about ±2 widths along it, so a tip that far out still lies among them.
STUB_WIDTHS = 2.0


def arms(adjacency: sparse.spmatrix, node: int) -> list[np.ndarray]:
    """The stretches leaving ``node``: for each neighbour, the node path from ``node`` through it up to
    the first leaf or node of degree ≥ 3 (included), or back to ``node`` around a cycle."""
    adjacency = sparse.csr_matrix(adjacency)
    degree = degrees(adjacency)
    found = []
    for first in adjacency.indices[adjacency.indptr[node]: adjacency.indptr[node + 1]]:
        path, previous, here = [int(node), int(first)], int(node), int(first)
        while degree[here] == 2 and here != node:
            ahead = [n for n in adjacency.indices[adjacency.indptr[here]: adjacency.indptr[here + 1]] if n != previous]
            previous, here = here, int(ahead[0])
            path.append(here)
        found.append(np.asarray(path, dtype=np.intp))
    return found


def stub_width(points: np.ndarray, weights: np.ndarray, nodes: np.ndarray, path: np.ndarray) -> float:
    """Noise width of the cells around a stretch ``path``, along the stretch.

    ``points`` are cells and ``weights[i, j]`` the assignment of cell i to
    node ``path[j]``. The width is the assignment-weighted root mean square of
    the cells' offsets from their nodes, projected on the unit vector from the
    stretch's first node to its last: how far the cells there spread along the
    direction the stub points. 0 when the stretch has no length or no cells.
    """
    direction = nodes[path[-1]] - nodes[path[0]]
    norm = float(np.linalg.norm(direction))
    total = float(weights.sum())
    if norm <= 0 or total <= 0:
        return 0.0
    along = (points @ direction)[:, None] / norm - (nodes[path] @ direction)[None, :] / norm
    return float(np.sqrt(np.sum(weights * along ** 2) / total))


def stub_length(nodes: np.ndarray, path: np.ndarray) -> float:
    """Length of a node path along its edges."""
    return float(np.linalg.norm(np.diff(nodes[path], axis=0), axis=1).sum())


def check_roots(adjacency: sparse.spmatrix, roots, *, several: bool = False) -> np.ndarray:
    """Validate roots: distinct nodes and, unless ``several``, at most one root per connected component."""
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    if np.unique(roots).size != roots.size:
        raise ValueError(f"Roots {roots.tolist()} name the same node more than once; give each root once.")
    shared = shared_roots(adjacency, roots)
    if shared.size and not several:
        raise ValueError(
            f"Roots {roots.tolist()} put more than one root in the same connected component "
            f"(roots {shared.tolist()}); give at most one root per component, or pass "
            "several=True to measure pseudotime from the nearest of several roots."
        )
    return roots


def node_path(adjacency: sparse.spmatrix, nodes: np.ndarray, start: int, end: int) -> np.ndarray:
    """Nodes on the shortest graph path from ``start`` to ``end`` (inclusive)."""
    _, predecessor = csgraph.dijkstra(
        edge_lengths(adjacency, nodes), directed=False, indices=start, return_predecessors=True
    )
    if start != end and predecessor[end] < 0:
        raise ValueError(
            f"Nodes {start} and {end} lie in different connected components of the graph; no path joins them."
        )
    path = [end]
    while path[-1] != start:
        path.append(int(predecessor[path[-1]]))
    return np.asarray(path[::-1], dtype=np.intp)


def spanned_nodes(adjacency: sparse.spmatrix, nodes: np.ndarray, terminals) -> np.ndarray:
    """Nodes of the subgraph spanned by ``terminals``: the union of the shortest paths from the first to each other.

    On a tree this is the smallest subtree holding every terminal. Sorted node
    indices; a ValueError when two terminals lie in different components.
    """
    terminals = np.atleast_1d(np.asarray(terminals, dtype=np.intp))
    paths = [node_path(adjacency, nodes, int(terminals[0]), int(other)) for other in terminals[1:]]
    return np.unique(np.concatenate([terminals[:1], *paths]))


def cells_on_path(
    projection: GraphProjection, path: np.ndarray, nodes: np.ndarray, *, closed: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Cells whose projection point lies on ``path``, and their distance along it.

    Returns (cell indices, position from the path's first node), sorted by
    position. A cell on a side edge counts when its projection point is a
    path node (fraction exactly 0 at a path node). Cells beyond a leaf that
    ends the path add their overhang. ``closed=True`` reads ``path`` as a loop
    (its last node joined to its first, each node once): positions run from 0
    at the first node to the loop's length, and a cell whose nearest node is on
    the loop but which projects onto an edge leaving it counts at that node.
    """
    order = np.full(nodes.shape[0], -1, dtype=np.intp)
    order[path] = np.arange(path.size)
    ring = np.append(path, path[0]) if closed else path
    cumulative = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(nodes[ring], axis=0), axis=1))])
    start, end, t = projection.edge_start, projection.edge_end, projection.fraction
    pos_start, pos_end = order[start], order[end]
    on_path = (pos_start >= 0) & (pos_end >= 0)
    on_edge = on_path & (np.abs(pos_start - pos_end) == 1)
    # the loop's closing edge, from its last node to its first
    closing = on_path & closed & (path.size > 2) & (np.abs(pos_start - pos_end) == path.size - 1)
    # on a loop, a cell nearest a loop node but drifting onto a branch that leaves it sits at that node
    at_node = (pos_start >= 0) & ((t == 0) | (start == end) | closed)
    length = np.linalg.norm(nodes[end] - nodes[start], axis=1)
    position = np.where(
        on_edge,
        np.where(
            pos_start < pos_end,
            cumulative[np.maximum(pos_start, 0)] + t * length,
            cumulative[np.maximum(pos_end, 0)] + (1.0 - t) * length,
        ),
        cumulative[np.maximum(pos_start, 0)],
    )
    last = cumulative[path.size - 1]
    position = np.where(closing, np.where(pos_start > pos_end, last + t * length, last + (1.0 - t) * length), position)
    if not closed:
        # beyond a leaf that ends the path, cells are further along (as in cell_geodesic)
        beyond_end = (start == path[-1]) & (path.size > 1)
        position = position + np.where(beyond_end, projection.overhang, 0.0)
    cells = np.flatnonzero(on_edge | closing | at_node)
    ranked = cells[np.argsort(position[cells], kind="stable")]
    return ranked, position[ranked]


def single_loop(adjacency: sparse.spmatrix, node: int) -> np.ndarray:
    """The nodes of the one loop in the connected component of ``node``, in walking order.

    The loop is the component's 2-core (what is left once leaves are removed
    one after another: branches and hairs hanging off it). Raises ``ValueError``
    when the component holds no loop or more than one independent cycle. The walk
    starts at the loop node nearest ``node`` along the graph and goes first to its
    neighbour of lower index.
    """
    adjacency = sparse.csr_matrix(symmetrize(adjacency))
    label = components(adjacency)
    members = np.flatnonzero(label == label[node])
    inside = adjacency[members][:, members]
    n_edges = (inside != 0).sum() // 2
    n_cycles = int(n_edges - members.size + 1)
    if n_cycles != 1:
        raise ValueError(
            f"The graph's component of node {node} has {n_cycles} independent cycles; a phase needs exactly one "
            "loop (fit tl.rpg_l1 on data with a loop, and check its adjacency)."
        )
    degree = np.diff(inside.indptr).astype(np.intp)
    alive = np.ones(members.size, dtype=bool)
    stack = list(np.flatnonzero(degree <= 1))
    while stack:
        leaf = stack.pop()
        if not alive[leaf]:
            continue
        alive[leaf] = False
        for other in inside.indices[inside.indptr[leaf] : inside.indptr[leaf + 1]]:
            if alive[other]:
                degree[other] -= 1
                if degree[other] == 1:
                    stack.append(other)
    loop_nodes = members[alive]
    distance = csgraph.dijkstra(adjacency, indices=node, unweighted=True)
    first = int(loop_nodes[np.argmin(distance[loop_nodes])])
    on_loop = np.zeros(adjacency.shape[0], dtype=bool)
    on_loop[loop_nodes] = True
    walk, previous = [first], -1
    while True:
        current = walk[-1]
        nexts = sorted(int(v) for v in adjacency.indices[adjacency.indptr[current] : adjacency.indptr[current + 1]]
                       if on_loop[v] and v != previous)
        following = nexts[0]
        if following == first or len(walk) == loop_nodes.size:
            break
        walk.append(following)
        previous = current
    return np.asarray(walk, dtype=np.intp)


def loop_phases(
    projection: GraphProjection, adjacency: sparse.spmatrix, nodes: np.ndarray, start: int, *, toward: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each cell's phase in [0, 1) once round the loop of ``start``'s component (:func:`single_loop`).

    The phase is the length travelled round the loop from the loop node nearest
    ``start``, one turn being 1, the way round that reaches ``toward`` (a node;
    where it joins the loop) within the first half turn. Returns the loop's nodes
    in that order, and the cells on the loop with their phases (:func:`cells_on_path`
    with ``closed=True``).
    """
    loop = single_loop(adjacency, start)
    lengths = np.linalg.norm(np.diff(nodes[np.append(loop, loop[0])], axis=0), axis=1)
    if toward is not None:
        hops = csgraph.dijkstra(adjacency, indices=toward, unweighted=True)
        if not np.isfinite(hops[start]):
            raise ValueError(f"Node {toward} lies in another connected component than node {start}.")
        attached = int(np.flatnonzero(loop == loop[np.argmin(hops[loop])])[0])
        if attached == 0:
            raise ValueError(
                f"Node {toward} meets the loop where the phase starts (node {loop[0]}); choose a node "
                "or group further round the loop."
            )
        if lengths[:attached].sum() > lengths.sum() / 2:
            loop = np.concatenate([loop[:1], loop[1:][::-1]])
    cells, position = cells_on_path(projection, loop, nodes, closed=True)
    return loop, cells, np.mod(position / lengths.sum(), 1.0)


def nearest_milestone(
    projection: GraphProjection, adjacency: sparse.spmatrix, nodes: np.ndarray, milestones
) -> np.ndarray:
    """Position in ``milestones`` of the milestone nearest each cell along the graph.

    The distance runs along the graph from the cell's projection point (as in
    :func:`cell_geodesic`), so a cell halfway along a segment goes with the
    nearer of the segment's two ends, never with a milestone that is close in
    space but far along the tree. One multi-source Dijkstra over the K nodes;
    -1 for cells in a component without a milestone.
    """
    milestones = np.asarray(milestones, dtype=np.intp)
    n_cells = projection.edge_start.size
    if not milestones.size:
        return np.full(n_cells, -1, dtype=np.intp)
    distance, _, source = csgraph.dijkstra(
        edge_lengths(adjacency, nodes), directed=False, indices=milestones, min_only=True, return_predecessors=True
    )
    position = np.full(nodes.shape[0], -1, dtype=np.intp)
    position[milestones] = np.arange(milestones.size)
    # unreachable nodes carry a negative source (scipy's -9999); they keep -1
    nearest = np.where(source >= 0, position[np.maximum(source, 0)], -1)
    start, end, t = projection.edge_start, projection.edge_end, projection.fraction
    length = np.linalg.norm(nodes[end] - nodes[start], axis=1)
    via_end = distance[end] + (1.0 - t) * length < distance[start] + t * length
    return np.where(via_end, nearest[end], nearest[start]).astype(np.intp)
