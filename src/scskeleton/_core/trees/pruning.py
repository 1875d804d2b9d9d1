"""Pruning of spurious terminal branches of a principal tree.

A spanning tree over noisy nodes grows short side branches wherever the cloud of
cells is thick: the nodes of a tube of noise zig-zag, and the minimum spanning
tree joins the outliers as stubs. Such a stub holds cells, so its node count does
not tell it from a real branch. What does is how far its cells stand out of the
tube around the rest of the tree.

For a terminal branch β (the nodes from a leaf up to, not including, the first
node of degree ≥ 3, its *attachment* b), let T' be the tree without β. Its
*extension* is

    e(β) = q₇₅_{i ∈ cells(β)} ⟨x_i − π(x_i), u⟩  /  1.4826 · MAD_{j ∈ tube(b)} ⟨(x_j − π(x_j))⊥, u⟩ / sin θ_j

where π is the nearest point on the local edges of T', u the unit direction from
b to the leaf, cells(β) the cells whose nearest node is on β and tube(b) the cells
whose nearest node is b or lies within two edges of b on T'. A tube cell's offset
is taken perpendicular to its edge (so cells beyond the end of a contracted arm do
not widen the tube) and read along the part of u perpendicular to that edge, of
length sin θ_j (θ_j the angle between u and the edge): the noise width in the
direction nearest u that the offset can show. Edges within 30° of u are left out
(sin θ_j < ½): their offsets barely reach along u, and a branch that leaves in line
with the tree (one arm of a bar across a thick start, or of a star of stubs in a
ball of cells at a tip) would stand out of a tube of width ≈ 0, scoring in the
tens. Only the direction in which the branch leaves counts, so the
ratio is free of units and of the number of dimensions the noise lives in: the
cells of a real branch of length ℓ reach ~ℓ along u while the tube spreads by the
noise's standard deviation in that one direction (e ≫ 3); the cells of a stub
are the tube's own outliers on one side (e ≈ 1–3).
A branch is also spurious when it holds less than ``min_mass`` of the cells, and
never when it holds more than :data:`MAX_PRUNED_MASS` and scores at least
:data:`MIN_PROTECTED_EXTENSION` (a chain of nodes through a whole cluster of
clustered data can score low, but it is no stub; a chain that runs beside the
rest of the tree, within 2.5 noise widths of it, is the tube split in two).

The tube's width is never taken below the tree-wide noise width along u (the
same robust width read from the offsets of up to :data:`TREE_WIDTH_CELLS` cells
across their nearest edge of the tree before pruning, without its terminal branches
of fewer than :data:`CORE_BRANCH_SHARE` of the nodes: a stub gathers the noise's
outlying cells, and measured from its own edges they would not count as noise; stubs
into a one-sided tail of the cells would otherwise lower the floor read from the whole
tree, and stand out of it). Where nodes crowd —
a dense terminal state drawn as a ball of nodes whose spanning tree is a star —
every cell lies near some edge, the local offsets understate the noise, and a
stub of the star stands out of that too-narrow tube like a real branch.

A learner may have its branches judged with each node that is nearest to at least
``centroid_cells`` cells moved to the mean of those cells (DDRTree does: its tree-length term
pulls the centers off their cells, and the offset of a fork's cells from its edges would
read as noise); the tree-wide floor is then read from each cell's offset across the nearest
edge that does not touch its own node, which the nodes of a dense ball, spread over it at
their cells' means, cannot shrink.

Before that, leaf nodes holding fewer cells than a quarter of an average node's are
trimmed (repeatedly): k-means seeding puts nodes on outlying cells, and the tree then
reaches out to them. Branches are removed one at a time, the least extended first, because removing
one changes its neighbours' attachments (a ball of cells at a tip grows a star of
stubs: all but the most extended arm go). Every step works on a few rows: cells
are handled through their nearest node, at most ``max_cells`` of them per branch.

Last, two branch points joined by an internal stretch shorter than the noise
width around them (:data:`MIN_FORK_SEPARATION` robust widths, measured as for e(β) in the
direction of the stretch) become one: cells spread over more than the gap, so the data
cannot tell a split into three from two splits in a row, and the learners draw a three-way
split as two forks joined by a stretch of (nearly) coincident, empty nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from ..graphs import symmetrize
from ..validation import check_positive
from .assign import CHUNK_ROWS, label_means, squared_distances

#: Default threshold on the extension e(β) below which a terminal branch is noise. The cells
#: nearest a stub node are the tube's own outliers on one side: with the heavy tails of
#: log-normalised counts their upper quartile reaches 3–3.5 noise widths, a real branch's 6 and more.
MIN_EXTENSION = 4.0
#: Default smallest share of the cells a terminal branch must hold.
MIN_MASS = 0.01
#: ... and never fewer cells than this, however few cells there are (when ``min_mass`` > 0). On
#: ``simulate_trajectory`` trees of 150 and 300 cells (1–3 fates, seeds 0–4) the share alone let RPG
#: keep branches of 2–3 cells, stubs of the noise: exact topologies 6 and 11 of 15; with a floor of 10
#: cells 12 and 15 of 15 (20 cells: 8 and 13, real short branches lost). From 1,000 cells on the
#: share is the larger.
MIN_BRANCH_CELLS = 10
#: Below this many cells a learned tree is not trusted to show forks. Measured on 600-cell
#: ``simulate_trajectory`` trees (1–3 fates, seeds 0–4) subsampled: at 20 and 30 cells neither learner
#: kept a fork on any of the 20 data sets with one or two (each branch then holds fewer than
#: MIN_BRANCH_CELLS cells); from 50 cells forks appear (exact topology 8 of 15, 100 cells 10 of 15).
FEW_CELLS = 50
#: A leaf node holding fewer cells than this share of an average node's is trimmed first.
SPARSE_LEAF = 0.25
#: A terminal branch holding more than this share of the cells is structure, never a stub:
#: on clustered data a long chain of nodes through a whole cluster can score low.
MAX_PRUNED_MASS = 0.1
#: ... unless it does not stand out even this far: a chain through a thick cluster or a
#: progenitor blob that runs beside the rest of the tree is a split tube, not structure.
MIN_PROTECTED_EXTENSION = 2.5
#: The tube around an attachment reaches this many edges along the rest of the tree.
TUBE_STEPS = 2
#: ... and further while it holds fewer cells than this.
MIN_TUBE_CELLS = 20
#: The tube's width along u is read from the cells on edges at least this far (sine of the angle)
#: from u's direction: 0.5 leaves out edges within 30° of running along the branch.
MIN_TUBE_SINE = 0.5
#: Quantile of the branch cells' offsets compared with the noise width.
OUT_QUANTILE = 0.75
#: The tree-wide noise width, the floor of every local one, is read from at most this many cells.
TREE_WIDTH_CELLS = 4000
#: ... around the tree without its terminal branches of fewer than this share of the nodes: a
#: stub captures the noise's outlying cells (e.g. the low-library-size tail, one-sided in every
#: state of the trajectory), and measured from the stub they would not count as noise.
CORE_BRANCH_SHARE = 0.1
#: Two branch points closer than this many noise widths along the tree are one. A principal
#: tree draws a three-way split as two forks joined by empty nodes that the smoothing pulls
#: together (separation ~0 on Splatter-style simulations); real internal branches of generated
#: trees measured 1.65 widths and more (two side branches of a DLA tree started a few steps apart).
MIN_FORK_SEPARATION = 1.0


@dataclass(frozen=True)
class PrunedTree:
    """Result of :func:`prune_tree`.

    Attributes
    ----------
    keep
        Boolean mask over the original K nodes: the nodes that remain.
    adjacency
        The pruned tree over the kept nodes only (re-indexed, K' × K').
    removed_branches
        Number of terminal branches removed, counting each outlying leaf node trimmed,
        plus the pairs of branch points merged into one.
    extension, mass
        For every terminal branch of the pruned tree (by leaf, in the original
        node numbering): its extension e(β) and share of the cells.
    leaves
        The leaves those values belong to (original numbering).
    """

    keep: np.ndarray
    adjacency: sparse.csr_matrix
    removed_branches: int
    leaves: np.ndarray
    extension: np.ndarray
    mass: np.ndarray


def check_pruning(min_extension, min_mass) -> tuple[float, float]:
    """Validate the pruning thresholds (one place for every learner that prunes)."""
    min_extension = check_positive(
        "min_branch_extension", min_extension, allow_zero=True, role="noise widths a branch must stand out"
    )
    min_mass = check_positive("min_branch_fraction", min_mass, allow_zero=True, role="share of the cells, below 1")
    if min_mass >= 1:
        raise ValueError(f"min_branch_fraction must be below 1 (a share of the cells); got {min_mass!r}.")
    return min_extension, min_mass


def nearest_nodes(points: np.ndarray, nodes: np.ndarray, *, chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """Index of each point's nearest node, in row blocks (no N × K array is kept)."""
    labels = np.empty(points.shape[0], dtype=np.intp)
    for start in range(0, points.shape[0], chunk_rows):
        labels[start : start + chunk_rows] = squared_distances(points[start : start + chunk_rows], nodes).argmin(axis=1)
    return labels


def prune_tree(
    points: np.ndarray,
    nodes: np.ndarray,
    adjacency: sparse.spmatrix,
    *,
    min_extension: float = MIN_EXTENSION,
    min_mass: float = MIN_MASS,
    protected=(),
    max_cells: int = 2000,
    labels: np.ndarray | None = None,
    centroid_cells: int = 0,
) -> PrunedTree:
    """Remove terminal branches that do not stand out of the noise (see module docstring).

    Parameters
    ----------
    points
        N × d cell coordinates, in the nodes' space.
    nodes
        K × d node positions.
    adjacency
        K × K tree (symmetric; weights ignored).
    min_extension
        A terminal branch whose extension e(β) is below this is removed.
    min_mass
        A terminal branch holding fewer than this share of the cells, or fewer
        than :data:`MIN_BRANCH_CELLS` cells, is removed (0: neither).
    protected
        Nodes whose branch is never removed (e.g. a root).
    max_cells
        At most this many cells (evenly spread over the index) per branch and per
        tube enter the medians.
    labels
        Each cell's nearest node, if already known.
    centroid_cells
        Judge the branches with every node that is nearest to at least this many
        cells moved to the mean of those cells (0: the nodes as given). A learner
        whose tree is smoothed away from its cells (DDRTree's centers, pulled
        together by the tree-length term) otherwise measures that misfit as noise:
        near a fork, a node's cells sit to one side of the edges, and the tube
        around the fork looks several noise widths wide. The tree-wide floor of
        the widths is then read from each cell's offset across the nearest edge
        that does not touch its own node: moved to their cells, the nodes of a
        dense ball spread over it, every cell sits next to an edge of its own
        node, and a floor read from those edges would shrink with them.
    """
    adjacency = symmetrize(adjacency)
    n_nodes = nodes.shape[0]
    if labels is None:
        labels = nearest_nodes(points, nodes)
    labels = labels.copy()
    if centroid_cells > 0:
        nodes = label_means(points, nodes, labels, min_count=centroid_cells)
    protected = {int(p) for p in np.atleast_1d(np.asarray(protected, dtype=np.intp))}
    neighbours = [set(adjacency.indices[adjacency.indptr[k] : adjacency.indptr[k + 1]].tolist()) for k in range(n_nodes)]
    keep = np.ones(n_nodes, dtype=bool)
    n_points = points.shape[0]
    if min_mass > 0:
        min_mass = max(min_mass, MIN_BRANCH_CELLS / n_points)
    removed = 0
    noise = TreeNoise.of(points, nodes, neighbours, own=labels if centroid_cells > 0 else None)
    # leaves that hold almost no cells: nodes the seeding put on outlying cells, which stretch
    # an end of the tree out to them (and with it pseudotime, and a "gap" edge)
    counts = np.bincount(labels, minlength=n_nodes)
    sparse_leaf = SPARSE_LEAF * n_points / n_nodes
    while keep.sum() > 2:
        outliers = [k for k in np.flatnonzero(keep) if len(neighbours[k]) == 1 and counts[k] < sparse_leaf
                    and k not in protected]
        if not outliers:
            break
        for node in outliers:
            if len(neighbours[node]) != 1:  # a two-node piece: its other end went just before
                continue
            (hub,) = neighbours[node]
            neighbours[hub].discard(node)
            neighbours[node].clear()
            keep[node] = False
            counts[hub] += counts[node]
            labels[labels == node] = hub
        removed += len(outliers)
    # each branch's e(β) with the nodes it read: removing a branch changes the scores of the
    # branches near it only, so the others are kept (hundreds of stubs on a thick ℓ1 skeleton)
    known: dict[tuple, tuple[float, set]] = {}
    while True:
        branches = terminal_branches(neighbours)
        if not branches:
            break
        members = _members(labels, n_nodes)
        scores = []
        for leaf, branch, hub in branches:
            mass = sum(members[k].size for k in branch) / n_points
            key = (hub, tuple(branch))
            if key not in known:
                known[key] = _extension(points, nodes, neighbours, members, branch, hub, max_cells, noise)
            scores.append((leaf, branch, hub, known[key][0], mass))
        weak = [
            s for s in scores
            if (s[4] < min_mass or (s[3] < min_extension and (s[4] < MAX_PRUNED_MASS or s[3] < MIN_PROTECTED_EXTENSION)))
            and not (protected & set(s[1]))
        ]
        if not weak:
            break
        # least extended first; a branch with too few cells counts as not extended at all
        leaf, branch, hub, _, _ = min(weak, key=lambda s: (s[3] if s[4] >= min_mass else -1.0, s[4]))
        for node in branch:
            for other in neighbours[node]:
                neighbours[other].discard(node)
            neighbours[node].clear()
            keep[node] = False
        moved = np.flatnonzero(np.isin(labels, branch))
        touched = {*branch, hub}
        if moved.size:
            kept_nodes = np.flatnonzero(keep)
            labels[moved] = kept_nodes[nearest_nodes(points[moved], nodes[kept_nodes])]
            touched.update(np.unique(labels[moved]).tolist())
        known = {key: value for key, value in known.items() if not value[1] & touched}
        removed += 1
    removed += _merge_close_forks(points, nodes, neighbours, keep, labels, max_cells, noise)

    kept_nodes = np.flatnonzero(keep)
    index = np.full(n_nodes, -1, dtype=np.intp)
    index[kept_nodes] = np.arange(kept_nodes.size)
    rows = [index[k] for k in kept_nodes for _ in neighbours[k]]
    cols = [index[n] for k in kept_nodes for n in neighbours[k]]
    pruned = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(kept_nodes.size, kept_nodes.size))
    final = [(s[0], s[3], s[4]) for s in scores] if branches else []
    return PrunedTree(
        keep=keep,
        adjacency=pruned,
        removed_branches=removed,
        leaves=np.array([f[0] for f in final], dtype=np.intp),
        extension=np.array([f[1] for f in final], dtype=float),
        mass=np.array([f[2] for f in final], dtype=float),
    )


def _merge_close_forks(points, nodes, neighbours, keep, labels, max_cells, noise: TreeNoise) -> int:
    """Merge branch points joined by a stretch shorter than :data:`MIN_FORK_SEPARATION` noise widths.

    The fork holding fewer cells and the stretch's inner nodes go; the other
    fork takes over their neighbours (its edges to them are at most the short
    stretch longer). Updates ``neighbours``, ``keep`` and ``labels`` in place;
    returns the number of merges.
    """
    merged = 0
    while True:
        members = _members(labels, nodes.shape[0])
        close = []
        for path in _internal_stretches(neighbours):
            length = float(np.linalg.norm(np.diff(nodes[path], axis=0), axis=1).sum())
            if length < MIN_FORK_SEPARATION * _stretch_width(points, nodes, neighbours, members, path, max_cells,
                                                             noise):
                close.append((length, path))
        if not close:
            return merged
        _, path = min(close, key=lambda item: item[0])  # the closest pair first: merging changes the rest
        first, last = path[0], path[-1]
        kept = first if members[first].size >= members[last].size else last
        dropped = [node for node in path if node != kept]
        outside = {other for node in dropped for other in neighbours[node]} - set(path)
        for node in dropped:
            for other in neighbours[node]:
                neighbours[other].discard(node)
            neighbours[node].clear()
            keep[node] = False
        for other in outside:
            neighbours[kept].add(other)
            neighbours[other].add(kept)
        moved = np.flatnonzero(np.isin(labels, dropped))
        if moved.size:
            kept_nodes = np.flatnonzero(keep)
            labels[moved] = kept_nodes[nearest_nodes(points[moved], nodes[kept_nodes])]
        merged += 1


def _internal_stretches(neighbours: list[set]) -> list[list[int]]:
    """Node paths joining two nodes of degree ≥ 3 through nodes of degree 2 (each once)."""
    out = []
    for start, ns in enumerate(neighbours):
        if len(ns) < 3:
            continue
        for step in sorted(ns):
            inner, end = _walk(neighbours, start, step)
            if len(neighbours[end]) >= 3 and start < end:
                out.append([start, *inner, end])
    return out


def _walk(neighbours: list[set], start: int, step: int) -> tuple[list[int], int]:
    """From ``start`` through its neighbour ``step`` along nodes of degree 2: those nodes, and the
    first node of another degree where the walk stops."""
    inner, previous, here = [], start, step
    while len(neighbours[here]) == 2:
        inner.append(here)
        previous, here = here, next(n for n in neighbours[here] if n != previous)
    return inner, here


def _stretch_width(points, nodes, neighbours, members, path, max_cells, noise: TreeNoise) -> float:
    """Robust noise width, in the direction of an internal stretch, of the cells around its two ends.

    As the tube of :func:`_extension`: the cells of the two branch points and of
    the nodes around them off the stretch, offset across their nearest edge and
    read along the stretch's direction. 0 where it cannot be measured, so that
    nothing is merged.
    """
    stretch = {(min(u, v), max(u, v)) for u, v in zip(path[:-1], path[1:])}
    local, edges = _tube(neighbours, members, [path[0], path[-1]], excluded=set(path[1:-1]), skip_edges=stretch)
    cells = evenly_spaced(np.concatenate([members[k] for k in local]), max_cells)
    if cells.size < MIN_TUBE_CELLS or edges.size == 0:
        return 0.0
    direction = nodes[path[-1]] - nodes[path[0]]
    norm = np.linalg.norm(direction)
    if norm <= 0:  # coincident forks: any width merges them
        return np.inf
    width = _width_along(points[cells], nodes, edges, direction / norm)
    return 0.0 if width is None else max(width, noise.width_along(direction / norm))


def terminal_branches(neighbours: list[set]) -> list[tuple[int, list[int], int]]:
    """(leaf, branch nodes from the leaf inwards, attachment) for every leaf that hangs off a node of degree ≥ 3."""
    out = []
    for leaf, ns in enumerate(neighbours):
        if len(ns) != 1:
            continue
        inner, hub = _walk(neighbours, leaf, next(iter(ns)))
        if len(neighbours[hub]) >= 3:
            out.append((leaf, [leaf, *inner], hub))
    return out


def _members(labels: np.ndarray, n_nodes: int) -> list[np.ndarray]:
    order = np.argsort(labels, kind="stable")
    bounds = np.searchsorted(labels[order], np.arange(n_nodes + 1))
    return [order[bounds[k] : bounds[k + 1]] for k in range(n_nodes)]


def evenly_spaced(indices: np.ndarray, limit: int) -> np.ndarray:
    """At most ``limit`` of ``indices``, evenly spaced through them in sorted order (all of them when
    there are no more): the cells a branch's score reads, spread over the branch."""
    if indices.size <= limit:
        return indices
    return np.sort(indices)[np.linspace(0, indices.size - 1, limit).astype(np.intp)]


def _extension(points, nodes, neighbours, members, branch, hub, max_cells, noise: TreeNoise) -> tuple[float, set]:
    """e(β) of one terminal branch (module docstring), and the nodes whose cells or edges it read:
    the branch, its tube and the tube's neighbours (the score holds while none of them changes)."""
    branch_set = set(branch)
    local, edges = _tube(neighbours, members, [hub], excluded=branch_set)
    read = branch_set | local | {other for node in local for other in neighbours[node]}
    branch_cells = evenly_spaced(np.concatenate([members[k] for k in branch]), max_cells)
    tube_cells = evenly_spaced(np.concatenate([members[k] for k in local]), max_cells)
    if branch_cells.size == 0 or tube_cells.size == 0 or edges.size == 0:
        return 0.0, read
    # the direction in which the branch leaves its attachment
    direction = nodes[branch[0]] - nodes[hub]
    norm = np.linalg.norm(direction)
    if norm <= 0:
        return 0.0, read
    direction /= norm
    out = np.quantile(residual_to_edges(points[branch_cells], nodes, edges) @ direction, OUT_QUANTILE)
    tube = _width_along(points[tube_cells], nodes, edges, direction)
    if tube is not None:
        tube = max(tube, noise.width_along(direction))
    if tube is None or tube <= 0:
        return (np.inf if out > 0 else 0.0), read
    return float(out / tube), read


def _tube(neighbours, members, starts, *, excluded: set, skip_edges=frozenset()) -> tuple[set, np.ndarray]:
    """The nodes around ``starts`` whose cells measure the noise, and their edges.

    ``starts`` and the nodes within :data:`TUBE_STEPS` edges of them, not
    entering ``excluded``, reaching further while they hold fewer than
    :data:`MIN_TUBE_CELLS` cells (empty nodes); the edges from them to nodes not
    excluded, without ``skip_edges`` (pairs ``(low, high)``).
    """
    local, frontier, steps = set(starts), list(starts), 0
    while frontier and (steps < TUBE_STEPS or sum(members[k].size for k in local) < MIN_TUBE_CELLS):
        frontier = [o for here in frontier for o in neighbours[here] if o not in excluded and o not in local]
        local.update(frontier)
        steps += 1
    edges = {(min(u, v), max(u, v)) for u in local for v in neighbours[u] if v not in excluded} - set(skip_edges)
    return local, np.array(sorted(edges), dtype=np.intp).reshape(-1, 2)


@dataclass(frozen=True)
class TreeNoise:
    """Offsets of a sample of cells across their nearest edge of the tree's core (the tree without
    its short terminal branches, :func:`_core`), to read the tree-wide noise width in any direction
    (:meth:`width_along`), the floor of the local widths."""

    across: np.ndarray  # c × d, each offset perpendicular to its edge
    axis: np.ndarray  # c × d, the unit direction of each cell's edge

    @classmethod
    def of(cls, points: np.ndarray, nodes: np.ndarray, neighbours: list[set], *,
           own: np.ndarray | None = None) -> TreeNoise:
        """``own``: each cell's node; then a cell's offset is read from the nearest edge that does not
        touch its own node (see :func:`prune_tree`, ``centroid_cells``)."""
        edges = _edges(_core(neighbours))
        if edges.size == 0:
            edges = _edges(neighbours)
        if edges.size == 0:
            return cls(np.empty((0, points.shape[1])), np.empty((0, points.shape[1])))
        cells = evenly_spaced(np.arange(points.shape[0]), TREE_WIDTH_CELLS)
        across, edge = residual_to_edges(points[cells], nodes, edges, across=True, with_edges=True,
                                          own=None if own is None else own[cells])
        axis = nodes[edges[:, 1]] - nodes[edges[:, 0]]
        norm = np.linalg.norm(axis, axis=1, keepdims=True)
        axis = np.divide(axis, norm, out=np.zeros_like(axis), where=norm > 0)
        return cls(across, axis[edge])

    def width_along(self, direction: np.ndarray) -> float:
        """Robust noise width along the unit vector ``direction`` (as :func:`_width_along`; 0 if unmeasurable)."""
        width = _width_from_offsets(self.across, self.axis @ direction, direction, closest_if_few=False)
        return 0.0 if width is None else width


def _edges(neighbours: list[set]) -> np.ndarray:
    return np.array(sorted({(min(u, v), max(u, v)) for u, ns in enumerate(neighbours) for v in ns}),
                    dtype=np.intp).reshape(-1, 2)


def _core(neighbours: list[set]) -> list[set]:
    """The tree without its terminal branches of fewer than :data:`CORE_BRANCH_SHARE` of the nodes (one pass)."""
    shortest = int(round(CORE_BRANCH_SHARE * len(neighbours)))
    core = [set(ns) for ns in neighbours]
    for _, branch, _ in terminal_branches(neighbours):
        if len(branch) < shortest:
            for node in branch:
                for other in core[node]:
                    core[other].discard(node)
                core[node] = set()
    return core


def _width_along(cells: np.ndarray, nodes, edges, direction) -> float | None:
    """Robust width of the noise around ``edges`` along the unit vector ``direction``; None if unmeasurable.

    The offsets across each cell's edge span only the directions perpendicular to
    it: read in the part of ``direction`` perpendicular to the edge, rescaled to
    unit length, they give the noise width there. An edge running almost along
    ``direction`` says nothing about the spread along it (its offsets' component is
    ~0, and a branch in line with the tree would stand out of a tube of width ~0),
    so edges within 30° of it are left out.
    """
    across, edge = residual_to_edges(cells, nodes, edges, across=True, with_edges=True)
    axis = nodes[edges[:, 1]] - nodes[edges[:, 0]]
    axis_norm = np.linalg.norm(axis, axis=1)
    cosine = np.divide(axis @ direction, axis_norm, out=np.zeros(axis.shape[0]), where=axis_norm > 0)
    return _width_from_offsets(across, cosine[edge], direction, closest_if_few=True)


def _width_from_offsets(across: np.ndarray, cosine: np.ndarray, direction: np.ndarray, *,
                        closest_if_few: bool) -> float | None:
    """Robust width along ``direction`` from offsets ``across`` their edges, each edge at ``cosine`` to it.

    Cells on edges within 30° of ``direction`` are left out (:func:`_width_along`).
    When fewer than :data:`MIN_TUBE_CELLS` remain, ``closest_if_few`` reads the
    width from the cells on the edges most across ``direction`` instead (a small
    tube); otherwise the width is unmeasurable. None when unmeasurable.
    """
    sine = np.sqrt(np.clip(1.0 - cosine**2, 0.0, 1.0))
    usable = sine >= MIN_TUBE_SINE
    if usable.sum() < MIN_TUBE_CELLS:
        if not closest_if_few:
            return None
        usable = (sine >= np.sort(sine)[-min(MIN_TUBE_CELLS, sine.size)]) & (sine > 0.1)
    if not usable.any():
        return None
    return float(1.4826 * np.median(np.abs(across[usable] @ direction) / sine[usable]))


def residual_to_edges(
    points: np.ndarray, nodes: np.ndarray, edges: np.ndarray, *, across: bool = False, with_edges: bool = False,
    own: np.ndarray | None = None,
):
    """Offset of each point from its nearest point on the given edges (segments), c × d.

    ``across=True`` keeps only the part of the offset perpendicular to that
    edge: a point beyond the end of a branch is then measured by its distance
    from the branch's line, its spread around the tree, not by how far the
    tree falls short of the data's end. ``with_edges=True`` also returns each
    point's nearest edge (row of ``edges``). ``own`` (a node per point) leaves out the edges that
    touch each point's own node (a point whose every edge does is measured from its nearest anyway).
    """
    start = nodes[edges[:, 0]]
    direction = nodes[edges[:, 1]] - start  # e × d
    length2 = np.einsum("ed,ed->e", direction, direction)
    start_along = np.einsum("ed,ed->e", start, direction)
    out = np.empty_like(points)
    nearest = np.empty(points.shape[0], dtype=np.intp)
    # c × e matrices from two matrix products (never the c × e × d offsets): with u = x - s,
    # t = clip(u·v / |v|², 0, 1) and |u - t v|² = |u|² - 2 t u·v + t² |v|²
    for lo in range(0, points.shape[0], CHUNK_ROWS):
        block = points[lo : lo + CHUNK_ROWS]
        along = block @ direction.T - start_along  # u·v
        t = np.clip(np.divide(along, length2, out=np.zeros_like(along), where=length2 > 0), 0.0, 1.0)
        distance = squared_distances(block, start)
        distance += t * (t * length2 - 2.0 * along)
        if own is not None:
            mine = own[lo : lo + CHUNK_ROWS, None]
            touching = (edges[None, :, 0] == mine) | (edges[None, :, 1] == mine)
            distance[touching & ~touching.all(axis=1, keepdims=True)] = np.inf
        best = distance.argmin(axis=1)
        rows = np.arange(block.shape[0])
        chosen = block - start[best] - t[rows, best][:, None] * direction[best]
        if across:
            axis = direction[best]
            share = np.divide(
                np.einsum("cd,cd->c", chosen, axis), length2[best], out=np.zeros(rows.size), where=length2[best] > 0
            )
            chosen = chosen - share[:, None] * axis
        out[lo : lo + CHUNK_ROWS] = chosen
        nearest[lo : lo + CHUNK_ROWS] = best
    return (out, nearest) if with_edges else out


@dataclass(frozen=True)
class TrimmedTree:
    """Result of :func:`trim_branches`.

    ``keep`` masks the K original nodes that remain; ``attach[k]`` is, for
    every node, the kept node whose cells it hands over (itself when kept, the
    node its removed branch hung from otherwise); ``removed_branches`` counts
    the terminal branches removed.
    """

    keep: np.ndarray
    attach: np.ndarray
    removed_branches: int


def trim_branches(
    adjacency: sparse.spmatrix, nodes: np.ndarray, mass: np.ndarray, *, min_mass: float, min_length: float,
    protected=(),
) -> TrimmedTree:
    """Remove terminal branches holding less than ``min_mass`` cells or shorter than ``min_length``.

    A terminal branch runs from a leaf up to, not including, the first node of
    degree ≥ 3 (its attachment); its length is the sum of its edge lengths up
    to that attachment, its mass the sum of ``mass`` over its nodes. Branches
    go one at a time, the lightest first, and their mass moves to the
    attachment: removing one can turn its attachment into a path node, and the
    branch that then ends there is judged again as a whole. Branches holding a
    ``protected`` node (a root) stay, and so does the last branch of a bare path.
    """
    adjacency = symmetrize(adjacency)
    n_nodes = nodes.shape[0]
    neighbours = [set(adjacency.indices[adjacency.indptr[k] : adjacency.indptr[k + 1]].tolist()) for k in range(n_nodes)]
    protected = {int(p) for p in np.atleast_1d(np.asarray(protected, dtype=np.intp))}
    mass = np.asarray(mass, dtype=float).copy()
    keep = np.ones(n_nodes, dtype=bool)
    attach = np.arange(n_nodes)
    removed = 0
    while True:
        weak = []
        for leaf, branch, hub in terminal_branches(neighbours):
            path = [*branch, hub]
            length = float(np.linalg.norm(np.diff(nodes[path], axis=0), axis=1).sum())
            branch_mass = float(mass[branch].sum())
            if (branch_mass < min_mass or length < min_length) and not protected & set(branch):
                weak.append((branch_mass, length, leaf, branch, hub))
        if not weak:
            break
        _, _, _, branch, hub = min(weak)
        for node in branch:
            for other in neighbours[node]:
                neighbours[other].discard(node)
            neighbours[node].clear()
            keep[node] = False
            attach[node] = hub
        mass[hub] += mass[branch].sum()
        removed += 1
    # a hub may itself have been removed later: follow it to a kept node
    while not keep[attach].all():
        attach = attach[attach]
    return TrimmedTree(keep=keep, attach=attach, removed_branches=removed)
