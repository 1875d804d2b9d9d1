"""Landmarks for the dense cell-level learners (MPME, SPL, ESL, FSL, convex embedding).

Those learners work on dense N × N matrices (O(N³) per iteration), so beyond a few
thousand cells they are fitted on K ≪ N landmarks instead of the cells, as
Algorithm 2 of the regularized principal graph paper (Mao, Wang, Tsang & Sun, "A
novel regularized principal graph learning framework on explicit graph
representation", arXiv preprint, 2015, published in IEEE TPAMI, 2017; eq. 24 of the
preprint) fits its graph: the landmarks are k-means centroids of the cells
(:func:`~scskeleton._core.trees.assign.kmeans`, deterministic for a seed; FSL
takes the cells nearest them, :func:`medoid_landmarks`), the learner fits them
as if they were cells, and every cell is then mapped to the result by the
entropy-regularised soft assignment of eq. (18) of that paper
(:func:`~scskeleton._core.trees.assign.soft_assignment`):

    r_ik = exp(-‖x_i - c_k‖² / σ) / Σ_l exp(-‖x_i - c_l‖² / σ),

with σ the median over the cells of the squared distance to their nearest
landmark (:func:`assignment_bandwidth`): each cell spreads over its closest few
nodes whatever the units or the number of landmarks. A cell's embedding is the
assignment-weighted embedding of the landmarks, Σ_k r_ik y_k.

The result is a node graph in the shared schema, the landmarks as its nodes. A
learned graph is a band of short edges (each landmark joined to several
neighbours on every side; MPME's W has about 10 edges per landmark) in which
every node is a branch point, so the node graph is the skeleton of that band
(:func:`landmark_graph`), as ``tl.rpg_l1`` reports the skeleton of its ℓ1 graph:

1. a spanning forest of the learned edges, shortest first (Kruskal, lengths in
   the space the landmarks were fitted in): its components are those of the
   learned graph, except that components holding less than ``min_mass`` of the
   cells are joined to the nearest other one;
2. terminal branches holding less than ``min_mass`` of the cells are trimmed
   (:func:`~scskeleton._core.trees.pruning.trim_branches`, a cheap first pass
   on the hundreds of hairs a forest over a thick band has), those that do not
   stand out of the noise are pruned as for the principal tree
   (:func:`~scskeleton._core.trees.pruning.prune_tree`), and strands that run
   beside the rest inside its tube of cells are removed (:func:`_remove_strands`);
3. rings: a learned edge between two nodes of one component closes a ring when
   the cells join its two ends (as in :mod:`~scskeleton._core.trees.skeleton`),
   the skeleton's path between them is at least :data:`LOOP_RATIO` times the
   edge and the ring is at least :data:`LOOP_FRACTION` of the component's length.
   A band closes short cycles everywhere; only a ring around a hole is that long;
4. the nodes move to the principal points of the fixed skeleton, by
   :data:`SMOOTHING_STEPS` rounds of eqs. (18) and (22) of the RPG paper
   (:func:`_principal_points`): landmarks closer than the noise width zig-zag
   across the tube, which lengthens geodesics where the tube is dense. Step 2
   is repeated on the moved nodes (a stub that stood out only through the
   zig-zag, or hangs beyond a ring's closing edge, now lies in the tube).

Each cell keeps only its weight on the nodes of the part (connected component of
the skeleton, and for ESL the component the learner embedded on its own) of its
nearest node, renormalised: a cell is never averaged between two structures.
Parts embedded separately (ESL centres each at the origin) are laid side by side
along the first axis of the embedding so that they never overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from ..graphs import edge_lengths, edge_list, from_edges, laplacian, symmetrize
from ..trees.assign import CHUNK_ROWS, kmeans, soft_assignment, squared_distances
from ..trees.pruning import (
    MIN_EXTENSION,
    MIN_MASS,
    TUBE_STEPS,
    evenly_spaced,
    prune_tree,
    residual_to_edges,
    terminal_branches,
    trim_branches,
)
from ..trees.rpg import update_centers
from ..trees.skeleton import MIN_SHARED, join_small_components, shared_mass
from ..validation import check_integer

#: Landmarks used when ``n_landmarks=None`` and the cells exceed the dense limit of the
#: log-det learners (MPME, SPL, ESL, FSL): an L-BFGS-B fit on 1,000 landmarks takes
#: 10–60 s, one on 5,000 (the dense limit) 10–30 min, and on generated trees the
#: skeleton of 1,000 landmarks recovers the branch points as 500 or 2,000 do.
DEFAULT_LANDMARKS = 1_000
#: The same for ``convex_embedding`` (its iterations cost 10× those of the log-det
#: learners at equal size: 8 s on 500 points, 74 s on 1,000).
DEFAULT_CONVEX_LANDMARKS = 500
#: The fewest landmarks a learner is fitted on.
MIN_LANDMARKS = 3
#: A learned edge closes a loop when the skeleton's path between its ends is this many times longer ...
LOOP_RATIO = 4.0
#: ... and the ring it closes is at least this share of its component's total length.
LOOP_FRACTION = 0.25
#: Alternations of the assignment (18) and node update (22) that straighten the skeleton.
SMOOTHING_STEPS = 3
#: Gap between parts laid side by side, as a share of the widest part's span.
PART_GAP = 0.25


def resolve_n_landmarks(n_landmarks, n_points: int, *, limit: int, default: int) -> int | None:
    """The number of landmarks to fit on, or ``None`` for the exact fit on every point.

    ``None``: every point up to ``limit`` (the learner's dense limit), else
    ``min(default, limit)`` landmarks. An integer K forces K landmarks,
    :data:`MIN_LANDMARKS` ≤ K ≤ min(N, ``limit``); anything else is a ValueError.
    """
    if n_landmarks is None:
        return None if n_points <= limit else min(default, limit)
    high = min(n_points, limit)
    if n_points < MIN_LANDMARKS:
        raise ValueError(f"n_landmarks needs at least {MIN_LANDMARKS} cells; got {n_points}.")
    return check_integer(
        "n_landmarks", n_landmarks, low=MIN_LANDMARKS, high=high,
        role=f"number of k-means landmarks the learner is fitted on, at most the number of cells ({n_points:,}) "
        f"and the dense limit ({limit:,}); None chooses",
    )


def choose_landmarks(data: np.ndarray, n_landmarks: int, *, random_state: int = 0) -> np.ndarray:
    """K × D k-means centroids of ``data`` (deterministic for ``random_state``), the points the learner fits."""
    return kmeans(data, n_landmarks, random_state=random_state)


def medoid_landmarks(data: np.ndarray, n_landmarks: int, *, random_state: int = 0,
                     chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """Indices of the cells nearest the ``n_landmarks`` k-means centroids (distinct, increasing).

    For learners that weigh the features by their spread between neighbours
    (FSL): a centroid averages its cells, which shrinks the noise of every
    feature by the square root of their number, and FSL would then favour the
    noisiest features; a cell keeps each feature's own noise.
    """
    centers = kmeans(data, n_landmarks, random_state=random_state)
    best = np.full(n_landmarks, np.inf)
    index = np.zeros(n_landmarks, dtype=np.intp)
    for start in range(0, data.shape[0], chunk_rows):
        block = squared_distances(data[start : start + chunk_rows], centers)
        rows = block.argmin(axis=0)
        values = block[rows, np.arange(n_landmarks)]
        better = values < best
        best[better], index[better] = values[better], start + rows[better]
    return np.unique(index)


def nearest_landmarks(data: np.ndarray, landmarks: np.ndarray, *, chunk_rows: int = CHUNK_ROWS):
    """Each point's nearest landmark and its squared distance, in row blocks (no N × K array is kept)."""
    labels = np.empty(data.shape[0], dtype=np.intp)
    nearest = np.empty(data.shape[0])
    for start in range(0, data.shape[0], chunk_rows):
        block = squared_distances(data[start : start + chunk_rows], landmarks)
        rows = slice(start, start + block.shape[0])
        labels[rows] = block.argmin(axis=1)
        nearest[rows] = block[np.arange(block.shape[0]), labels[rows]]
    return labels, nearest


def assignment_bandwidth(nearest_squared: np.ndarray, landmarks: np.ndarray) -> float:
    """σ of the soft assignment: the median squared distance of the points to their nearest landmark.

    Scale-free (it follows the units of the data and the spacing of the
    landmarks), so each point spreads over its closest few landmarks. Falls
    back to the median squared distance between nearest landmarks when most
    points sit exactly on one (landmarks on duplicated points).
    """
    value = float(np.median(nearest_squared))
    if value > 0:
        return value
    block = squared_distances(landmarks, landmarks)
    np.fill_diagonal(block, np.inf)
    value = float(np.median(block.min(axis=1)))
    return value if np.isfinite(value) and value > 0 else 1.0


@dataclass(frozen=True)
class LandmarkGraph:
    """Output of :func:`landmark_graph`, the node graph over the kept landmarks.

    Attributes
    ----------
    keep
        Boolean mask over the K fitted landmarks: those that remain as nodes (K').
    positions
        K' × D the kept landmarks in the space of ``data``.
    nodes
        K' × d the learner's embedding of the kept landmarks (separate parts side by side).
    adjacency
        K' × K' symmetric CSR skeleton; each edge carries its learned weight.
    connectivities
        K' × K' symmetric CSR: the learner's own graph among the kept landmarks.
    assignment
        N × K' soft assignment (eq. 18 of the RPG paper) restricted to each
        cell's part; rows sum to one. Dense or CSR.
    embedding
        N × d: the cells' embedding, assignment-weighted node embedding.
    sigma
        Bandwidth of the soft assignment.
    n_pruned
        Terminal branches removed (trimmed or pruned).
    n_loops
        Learned edges kept because they close a ring.
    node_groups, cell_groups
        The part that was embedded on its own (``groups`` of :func:`landmark_graph`),
        per kept node and per cell (that of its nearest node); all 0 without groups.
    """

    keep: np.ndarray
    positions: np.ndarray
    nodes: np.ndarray
    adjacency: sparse.csr_matrix
    connectivities: sparse.csr_matrix
    assignment: np.ndarray | sparse.csr_matrix
    embedding: np.ndarray
    sigma: float
    n_pruned: int
    n_loops: int
    node_groups: np.ndarray
    cell_groups: np.ndarray


def landmark_graph(
    data: np.ndarray,
    landmarks: np.ndarray,
    embedding: np.ndarray,
    graph: sparse.spmatrix,
    *,
    groups: np.ndarray | None = None,
    min_extension: float = MIN_EXTENSION,
    min_mass: float = MIN_MASS,
) -> LandmarkGraph:
    """The skeleton of a graph learned over landmarks, and the cells mapped to it (module docstring).

    Parameters
    ----------
    data
        N × D cells, in the space the landmarks live in.
    landmarks
        K × D landmarks the learner was fitted on.
    embedding
        K × d the learner's embedding of the landmarks.
    graph
        K × K the learner's graph over the landmarks (symmetric, weights ≥ 0).
    groups
        Optional per-landmark labels of parts the learner embedded separately
        (ESL's components); laid side by side.
    min_extension, min_mass
        Pruning thresholds, as for the principal tree.
    """
    n_landmarks = landmarks.shape[0]
    learned = symmetrize(graph)
    labels, nearest_squared = nearest_landmarks(data, landmarks)
    sigma = assignment_bandwidth(nearest_squared, landmarks)
    mass = np.bincount(labels, minlength=n_landmarks).astype(float)

    # 1. spanning forest of the learned edges, shortest first; tiny components joined to the nearest one
    forest = csgraph.minimum_spanning_tree(edge_lengths(learned, landmarks))
    edges = edge_list(symmetrize(forest))
    extra = join_small_components(landmarks, edges, mass, min_mass)
    edges = np.vstack([edges, extra]) if extra.size else edges
    skeleton = from_edges(edges, np.ones(edges.shape[0]), n_landmarks)

    # 2. trim the hairs (cheap, by mass), then prune what does not stand out of the noise
    keep, skeleton, n_pruned = _prune(data, landmarks, skeleton, labels, mass,
                                      min_extension=min_extension, min_mass=min_mass)
    assignment = soft_assignment(data, landmarks[keep], sigma).matrix

    # 3. rings the learned graph closes
    kept = np.flatnonzero(keep)
    skeleton, n_loops = _close_loops(skeleton, landmarks[kept], learned[kept][:, kept], assignment)

    # 4. the nodes at the principal points of the skeleton; what stood out only through the zig-zag of
    #    the raw landmarks (or hangs beyond a ring's closing edge) now lies in the tube: prune once more
    positions, assignment = _principal_points(data, landmarks[kept], skeleton, sigma, assignment)
    labels = nearest_landmarks(data, positions)[0]
    mass = np.bincount(labels, minlength=kept.size).astype(float)
    sub_keep, skeleton, more = _prune(data, positions, skeleton, labels, mass,
                                      min_extension=min_extension, min_mass=min_mass)
    if more:
        n_pruned += more
        keep = np.zeros(n_landmarks, dtype=bool)
        keep[kept[sub_keep]] = True
        kept = np.flatnonzero(keep)
        positions = positions[sub_keep]
        positions, assignment = _principal_points(data, positions, skeleton, sigma,
                                                  soft_assignment(data, positions, sigma).matrix)
    node_groups = (np.zeros(kept.size, dtype=np.intp) if groups is None
                   else np.unique(np.asarray(groups)[kept], return_inverse=True)[1].ravel().astype(np.intp))
    assignment, nearest = restrict_to_parts(assignment, node_parts(skeleton, node_groups))
    nodes = _side_by_side(np.asarray(embedding, dtype=float)[kept], node_groups)
    weights = learned[kept][:, kept]
    adjacency = _with_learned_weights(skeleton, weights)
    return LandmarkGraph(
        keep=keep,
        positions=positions,
        nodes=nodes,
        adjacency=adjacency,
        connectivities=weights,
        assignment=assignment,
        embedding=np.asarray(assignment @ nodes),
        sigma=sigma,
        n_pruned=n_pruned,
        n_loops=n_loops,
        node_groups=node_groups,
        cell_groups=node_groups[nearest],
    )


def _principal_points(data, centers, skeleton, sigma, assignment, n_iter: int | None = None):
    """Nodes moved to the principal points of the fixed skeleton; returns them and the cells' assignment.

    Alternates the assignment (18) and the node update (22) of the regularized
    principal graph paper, C = (2/γ · L + Γ)⁻¹ PᵀX with the skeleton's
    Laplacian L and Γ = diag(1ᵀP), ``n_iter`` times (:data:`SMOOTHING_STEPS`),
    with 2/γ = the mean of Γ (the length of the graph weighs like one node's
    share of the cells, whatever N and K). k-means landmarks closer than the
    noise width zig-zag across the tube of cells, and geodesic lengths along
    them grow where the tube is dense; the update straightens them.
    """
    n_iter = SMOOTHING_STEPS if n_iter is None else n_iter
    graph_laplacian = laplacian((skeleton != 0).astype(float))
    for _ in range(n_iter):
        mass = np.asarray(assignment.sum(axis=0)).ravel()
        resp = np.asarray(assignment.T @ data)
        gamma = 2.0 / max(float(mass.mean()), np.finfo(float).tiny)
        centers = update_centers(centers, graph_laplacian, skeleton, mass, resp, gamma)
        assignment = soft_assignment(data, centers, sigma, reuse=assignment).matrix
    return centers, assignment


def _prune(data, landmarks, skeleton, labels, mass, *, min_extension, min_mass):
    """Trim light terminal branches, prune the tree, then remove strands; returns (keep, skeleton, removed).

    ``labels`` are the cells' nearest landmarks, ``mass`` their counts per landmark.
    """
    n_landmarks = landmarks.shape[0]
    trimmed = trim_branches(skeleton, landmarks, mass / max(mass.sum(), 1.0), min_mass=min_mass, min_length=0.0)
    first = np.flatnonzero(trimmed.keep)
    index = np.full(n_landmarks, -1, dtype=np.intp)
    index[first] = np.arange(first.size)
    sub = skeleton[first][:, first]
    sub_labels = index[trimmed.attach[labels]]
    pruned = prune_tree(data, landmarks[first], sub, min_extension=min_extension, min_mass=min_mass,
                        labels=sub_labels)
    second = first[pruned.keep]
    strands = _remove_strands(data, landmarks[second], pruned.adjacency, sub_labels, pruned.keep,
                              min_extension=min_extension)
    keep = np.zeros(n_landmarks, dtype=bool)
    keep[second[strands.keep]] = True
    return keep, strands.adjacency, trimmed.removed_branches + pruned.removed_branches + strands.removed


@dataclass(frozen=True)
class _Strands:
    keep: np.ndarray
    adjacency: sparse.csr_matrix
    removed: int


def _remove_strands(data, nodes, adjacency, labels, kept_mask, *, min_extension, max_cells: int = 2000) -> _Strands:
    """Remove terminal branches that run beside the rest of the skeleton, inside its tube of cells.

    A spanning forest over a band several landmarks thick has strands: chains
    of landmarks parallel to the main path. The path itself zig-zags through
    the noise between landmarks closer than the noise width, so the cells'
    offsets from its edges, which :func:`~scskeleton._core.trees.pruning.prune_tree`
    compares a branch with, underestimate the noise and such strands pass it.
    Here a branch is measured in the direction in which it stands out: the
    offset v of its farthest node from the rest of the skeleton, against the
    spread (1.4826 · MAD about their median) along v of the cells of the tube
    around its attachment (the cells nearest the attachment and the nodes
    within two edges of it). Branches standing out fewer than ``min_extension`` widths go, the
    least standing out first. ``labels`` are the cells' nearest nodes before
    the pruning whose ``kept_mask`` is given (cells of removed nodes are
    ignored).
    """
    n_nodes = nodes.shape[0]
    adjacency = symmetrize(adjacency)
    neighbours = [set(adjacency.indices[adjacency.indptr[k] : adjacency.indptr[k + 1]].tolist())
                  for k in range(n_nodes)]
    index = np.full(kept_mask.size, -1, dtype=np.intp)
    index[np.flatnonzero(kept_mask)] = np.arange(n_nodes)
    node_of_cell = index[labels]
    order = np.argsort(node_of_cell, kind="stable")
    bounds = np.searchsorted(node_of_cell[order], np.arange(n_nodes + 1))
    members = [order[bounds[k] : bounds[k + 1]] for k in range(n_nodes)]
    keep = np.ones(n_nodes, dtype=bool)
    removed = 0
    while True:
        weakest, weakest_score = None, min_extension
        for _, branch, hub in terminal_branches(neighbours):
            score = _stand_out(data, nodes, neighbours, members, branch, hub, max_cells)
            if score < weakest_score:
                weakest, weakest_score = (branch, hub), score
        if weakest is None:
            break
        branch, hub = weakest
        for node in branch:
            for other in neighbours[node]:
                neighbours[other].discard(node)
            neighbours[node].clear()
            keep[node] = False
        members[hub] = np.concatenate([members[hub], *[members[k] for k in branch]])
        removed += 1
    kept = np.flatnonzero(keep)
    if removed == 0:
        return _Strands(keep=keep, adjacency=adjacency, removed=0)
    return _Strands(keep=keep, adjacency=adjacency[kept][:, kept].tocsr(), removed=removed)


def _stand_out(data, nodes, neighbours, members, branch, hub, max_cells) -> float:
    """How many noise widths the farthest node of ``branch`` stands out of the rest (:func:`_remove_strands`)."""
    branch_set = set(branch)
    rest = np.array(sorted({(min(u, v), max(u, v)) for u in range(len(neighbours)) if u not in branch_set
                            for v in neighbours[u] if v not in branch_set}), dtype=np.intp).reshape(-1, 2)
    if rest.size == 0:
        return np.inf
    offsets = residual_to_edges(nodes[branch], nodes, rest)
    reach = np.linalg.norm(offsets, axis=1)
    farthest = int(np.argmax(reach))
    if reach[farthest] <= 0:
        return 0.0
    direction = offsets[farthest] / reach[farthest]
    local, frontier = {hub}, [hub]
    for _ in range(TUBE_STEPS):
        frontier = [o for here in frontier for o in neighbours[here] if o not in branch_set and o not in local]
        local.update(frontier)
    tube = evenly_spaced(np.concatenate([members[k] for k in local]), max_cells)
    if tube.size < 2:
        return np.inf
    along = data[tube] @ direction
    width = 1.4826 * np.median(np.abs(along - np.median(along)))
    if width <= 0:
        return np.inf
    return float(reach[farthest] / width)


def _close_loops(skeleton, positions, learned, assignment) -> tuple[sparse.csr_matrix, int]:
    """Add the learned edges that close a ring (module docstring, step 3)."""
    candidates = edge_list(learned)
    if candidates.size == 0:
        return skeleton, 0
    present = np.asarray(skeleton[candidates[:, 0], candidates[:, 1]]).ravel() != 0
    candidates = candidates[~present]
    if candidates.size == 0:
        return skeleton, 0
    length = np.linalg.norm(positions[candidates[:, 0]] - positions[candidates[:, 1]], axis=1)
    mass, shared = shared_mass(assignment, candidates)
    smaller = np.minimum(mass[candidates[:, 0]], mass[candidates[:, 1]])
    supported = shared >= MIN_SHARED * np.maximum(smaller, np.finfo(float).tiny)
    order = np.flatnonzero(supported)[np.argsort(length[supported], kind="stable")]
    graph = edge_lengths(skeleton, positions)
    _, component = csgraph.connected_components(graph, directed=False)
    upper = sparse.triu(graph).tocoo()
    total = np.bincount(component[upper.row], weights=upper.data, minlength=component.max() + 1)
    paths = csgraph.dijkstra(graph, directed=False)
    added = 0
    for edge in order:
        head, tail = candidates[edge]
        if component[head] != component[tail]:
            continue
        path = paths[head, tail]
        if path >= LOOP_RATIO * length[edge] and path + length[edge] >= LOOP_FRACTION * total[component[head]]:
            value = max(length[edge], np.finfo(float).tiny)
            closing = sparse.csr_matrix(([value, value], ([head, tail], [tail, head])), shape=graph.shape)
            graph = (graph + closing).tocsr()
            total[component[head]] += value
            paths = csgraph.dijkstra(graph, directed=False)
            added += 1
    if not added:
        return skeleton, 0
    return (graph != 0).astype(float).tocsr(), added


def _with_learned_weights(skeleton, learned) -> sparse.csr_matrix:
    """The skeleton's edges with the learned weight where the learner has one, else the median learned weight."""
    edges = edge_list(skeleton)
    if edges.size == 0:
        return sparse.csr_matrix(skeleton.shape)
    weight = np.asarray(learned[edges[:, 0], edges[:, 1]]).ravel()
    fill = float(np.median(learned.data[learned.data > 0])) if (learned.data > 0).any() else 1.0
    return from_edges(edges, np.where(weight > 0, weight, fill), skeleton.shape[0])


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Labels as 0, 1, … in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.intp)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.ravel()]


def node_parts(adjacency: sparse.spmatrix, node_groups: np.ndarray) -> np.ndarray:
    """Each node's part: its connected component of the skeleton, split by the learner's own groups
    (ESL's separately embedded components; all zeros for the other learners)."""
    node_groups = np.asarray(node_groups, dtype=np.intp)
    _, component = csgraph.connected_components(adjacency, directed=False)
    return _renumber(component * (node_groups.max(initial=0) + 1) + node_groups)


def restrict_to_parts(assignment, part: np.ndarray):
    """Each row restricted to the part of its largest weight, renormalised; returns it and each row's argmax."""
    if sparse.issparse(assignment):
        assignment = sparse.csr_matrix(assignment)
        nearest = np.asarray(assignment.argmax(axis=1)).ravel()
        if part.max(initial=0) == 0:
            return assignment, nearest
        rows = np.repeat(np.arange(assignment.shape[0]), np.diff(assignment.indptr))
        assignment.data *= part[assignment.indices] == part[nearest][rows]
        assignment.eliminate_zeros()
        total = np.asarray(assignment.sum(axis=1)).ravel()
        assignment.data /= np.repeat(total, np.diff(assignment.indptr))
        return assignment, nearest
    nearest = assignment.argmax(axis=1)
    if part.max(initial=0) == 0:
        return assignment, nearest
    for start in range(0, assignment.shape[0], CHUNK_ROWS):
        block = assignment[start : start + CHUNK_ROWS]
        block *= part[None, :] == part[nearest[start : start + CHUNK_ROWS], None]
        block /= block.sum(axis=1, keepdims=True)
    return assignment, nearest


def _side_by_side(nodes: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Node coordinates with each group shifted along the first axis next to the previous one."""
    n_groups = int(groups.max(initial=0)) + 1
    if n_groups == 1:
        return nodes
    shifted = nodes.copy()
    spans = [float(np.ptp(nodes[groups == g, 0])) for g in range(n_groups)]
    gap = PART_GAP * max(max(spans), np.finfo(float).eps)
    offset = 0.0
    for group in range(n_groups):
        members = groups == group
        shifted[members, 0] += offset - nodes[members, 0].min()
        offset += spans[group] + gap
    return shifted
