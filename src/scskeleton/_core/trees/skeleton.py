"""The skeleton of a weighted ℓ1 graph: the curves, loops and components it draws.

The linear program (19) of the regularized principal graph paper (Mao, Wang,
Tsang & Sun, "A novel regularized principal graph learning framework on explicit
graph representation", arXiv preprint, 2015, published in IEEE TPAMI, 2017;
equations numbered as in the preprint) reconstructs every landmark from its neighbours. A
vertex solution keeps up to K·D positive weights, and on noisy data nearly all
of them are used: each landmark is rebuilt exactly from about D neighbours on
both sides of the curve, so the optimum is a band of short edges — a "thick
curve" with about K·(D − 1) independent cycles in D = 2 — however λ is set
(smaller λ first cuts the band into pieces). The
paper's figures draw that band with the centers C, and it reads as a curve, a
loop or separate pieces. This module extracts that drawn structure:

1. an edge is kept only where cells join its two ends: Σ_i p_ia p_ib (the
   soft assignment of eq. 18 shares cells between a and b) is at least
   :data:`MIN_SHARED` of the smaller end's mass. Edges across empty space
   carry no cells and separate the components;
2. a spanning forest of the kept edges: the LP's own edges first, shortest
   first (Kruskal), then other candidate edges where the LP left a component
   in pieces that cells still join;
3. loops: a supported LP edge whose ends are already at least :data:`MIN_LOOP`
   skeleton edges apart closes a cycle that is not just across the band; it
   is added when that cycle, the shortest way round, also runs around a hole, a round, flat
   stretch free of nodes (:func:`encloses_hole`), not through a crowd of
   nodes (a dense state, a band folded onto itself) or over the shell of
   nodes a round cluster forms in many dimensions. Then a candidate edge the
   LP left out closes a ring in the same way where cells join its ends (at
   least :data:`MIN_ADJACENT` cells have them as their two nearest nodes,
   competitive Hebbian learning's rule; :func:`adjacent_cells`): a thin ring
   whose nodes leave one wider gap, across which the LP drew no edge. Last, a
   candidate edge between two leaves closes a ring around a hole when the
   stretch free of cells that it spans is no longer than the sampling of the
   ring's cells explains (:func:`gap_explained`): on a ring of 100 cells the
   widest empty stretch is 4–6 times the mean spacing, and the ends the program
   left there retreat from it as the ends of any open curve do. Pieces of a
   curve that cells fail to join by chance are joined the same way, after the
   forest of step 2 and before the loops;
4. components holding less than ``min_mass`` of the cells (a few stray
   points between clusters) are joined to the nearest other component, as
   the principal tree's pruning ignores branches below that mass.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from scipy import linalg, sparse
from scipy.sparse import csgraph

from ..graphs import from_edges
from .assign import squared_distances
from .pruning import nearest_nodes, prune_tree

#: An edge is supported when its ends share at least this fraction of the smaller end's cells.
MIN_SHARED = 1e-4
#: An LP edge closes a loop when its ends are at least this many skeleton edges apart ...
MIN_LOOP = 8
#: ... and no node lies nearer the centroid of the cycle it closes than this share of the
#: cycle's mean radius (:func:`encloses_hole`) ...
HOLE_SHARE = 0.75
#: ... and the cycle's nodes hold at least this share of their variance in one plane.
PLANE_SHARE = 2 / 3
#: A candidate edge the program left out closes a ring when this many cells have its ends as their two nearest nodes.
MIN_ADJACENT = 2
#: Bins along an edge in which :func:`gap_profiles` counts the cells of its two ends ...
GAP_BINS = 32
#: ... the cells with one of them among their this many nearest nodes (4 also closed a ring
#: with a branch leaving it whose gap's ends were crowded by hairs, and the generator's own
#: loop of ``simulate_trajectory(cycle=True)`` once more, but drew a false 9-node loop in the
#: cells of one branch of a 4-fate tree).
GAP_NEAREST = 2
#: A candidate edge between two leaves joins two pieces or closes a ring when uniform sampling of
#: their cells leaves an empty stretch as long as the edge's with at least this probability
#: (:func:`gap_explained`) ...
GAP_LEVEL = 0.01
#: A loop is at least this share as wide (mean radius) as its cells lie from their nodes (root mean square) ...
MIN_LOOP_WIDTH = 0.1
#: ... and at most this share of its cells lie, in its plane, within half its radius of its centre.
MAX_INNER_SHARE = 0.02


def l1_skeleton(
    centers: np.ndarray,
    weights: sparse.spmatrix,
    candidates: np.ndarray,
    mass: np.ndarray,
    shared: np.ndarray,
    *,
    min_mass: float,
    adjacent: np.ndarray | None = None,
    profiles: np.ndarray | None = None,
    points: np.ndarray | None = None,
) -> sparse.csr_matrix:
    """Curves, loops and components of the ℓ1 graph ``weights`` (module docstring).

    Parameters
    ----------
    centers
        C, K × D node positions.
    weights
        W, the K × K solution of the linear program (19).
    candidates
        E × 2 candidate edges of the program (i < j); the skeleton's edges are among them,
        except the edges that join a tiny component to its nearest neighbour.
    mass, shared
        The cells' :func:`shared_mass` for ``candidates``: 1ᵀP and Σ_i p_ia p_ib per edge.
    min_mass
        Components holding less than this fraction of the cells are joined to the nearest
        other component.
    adjacent
        :func:`adjacent_cells` for ``candidates``: the cells whose two nearest nodes each
        edge joins (``None``: no ring is closed by an edge the LP left out).
    profiles
        :func:`gap_profiles` for ``candidates`` (``None``: no stretch without cells is read
        against sampling; no piece is joined and no ring closed across one).
    points
        Cells (all, or a uniform sample) in the space of ``centers``: a loop must also
        leave a hole in them (:func:`hole_in_cells`). ``None``: the nodes alone decide.

    Returns
    -------
    K × K symmetric CSR adjacency; each edge keeps its LP weight, edges the LP did not
    choose get the median LP weight (they stand for a stretch the LP cut into pieces).
    """
    n_nodes = centers.shape[0]
    heads, tails = candidates[:, 0], candidates[:, 1]
    supported = shared >= MIN_SHARED * np.maximum(np.minimum(mass[heads], mass[tails]), np.finfo(float).tiny)
    lp_weight = np.asarray(sparse.csr_matrix(weights)[heads, tails]).ravel()
    chosen = (lp_weight > 0) & supported
    length = np.sum((centers[heads] - centers[tails]) ** 2, axis=1)

    cells = None if points is None else _CellsOfNodes(points, centers)
    forest = _UnionFind(n_nodes)
    neighbours: list[list[int]] = [[] for _ in range(n_nodes)]
    keep: list[int] = []

    def add(edge: int) -> None:
        keep.append(edge)
        neighbours[heads[edge]].append(int(tails[edge]))
        neighbours[tails[edge]].append(int(heads[edge]))

    lp_order = np.flatnonzero(chosen)[np.argsort(length[chosen], kind="stable")]
    repair = supported & ~chosen
    repair_order = np.flatnonzero(repair)[np.argsort(length[repair], kind="stable")]
    for edge in np.concatenate([lp_order, repair_order]):
        if forest.union(heads[edge], tails[edge]):
            add(edge)
    by_length = np.argsort(length, kind="stable")
    if profiles is not None:
        _bridge_sampling_gaps(
            forest, add, keep, neighbours, by_length, centers, candidates, length, mass, profiles, min_mass=min_mass,
            reach=None if cells is None else cells.reach,
        )

    def close_rings(order: np.ndarray, *, sampled: bool = False) -> None:
        for edge in order:
            head, tail = heads[edge], tails[edge]
            if forest.find(head) != forest.find(tail) or tail in neighbours[head]:
                continue
            # a ring left open by chance ends in two leaves facing each other across its gap
            if sampled and (len(neighbours[head]) > 1 or len(neighbours[tail]) > 1):
                continue
            if not _hops_at_least(neighbours, head, tail, MIN_LOOP):
                continue
            # the cycle the edge closes with the shortest way round: once a ring is closed, a second
            # edge across the same band finds the short way along it, which encloses no hole
            cycle = _shortest_path(neighbours, head, tail)
            if not encloses_hole(centers, cycle) or (cells is not None and not cells.leave_hole(cycle)):
                continue
            if sampled:
                perimeter = float(np.sum(np.sqrt(np.sum((centers[cycle] - centers[np.roll(cycle, 1)]) ** 2, axis=1))))
                if not gap_explained(_empty_stretch(profiles[edge], length[edge]), perimeter, float(mass[cycle].sum())):
                    continue
            add(edge)

    close_rings(lp_order)
    if adjacent is not None:
        closing = np.flatnonzero(adjacent >= MIN_ADJACENT)
        close_rings(closing[np.argsort(length[closing], kind="stable")])
    if profiles is not None:
        close_rings(by_length, sampled=True)

    keep_idx = np.asarray(keep, dtype=np.intp)
    fill = float(np.median(lp_weight[chosen])) if chosen.any() else 1.0
    edge_weight = np.where(lp_weight[keep_idx] > 0, lp_weight[keep_idx], fill)
    edges = candidates[keep_idx]
    extra = join_small_components(centers, edges, mass, min_mass)
    if extra.size:
        edges = np.vstack([edges, extra])
        edge_weight = np.concatenate([edge_weight, np.full(extra.shape[0], fill)])
    return from_edges(edges, edge_weight, n_nodes)


def prune_skeleton(points: np.ndarray, centers: np.ndarray, skeleton: sparse.spmatrix, *, min_extension: float,
                   min_mass: float) -> tuple[np.ndarray, sparse.csr_matrix, int]:
    """Remove the skeleton's spurious terminal branches, as the principal tree's pruning does.

    Where the program's band is thick, the spanning forest leaves nodes of the band's
    far side hanging off the curve as hairs of one to three nodes (a ring of
    cell-cycle counts: 24–29 of them on 123 nodes). They are terminal branches that
    do not stand out of the tube of noise around the rest of the graph, which is what
    :func:`~scskeleton._core.trees.pruning.prune_tree` measures; cycles and
    components are left as they are (a cycle has no terminal branch). Returns the
    kept nodes (mask), the skeleton on them (each edge with its weight; an edge the
    merging of two close forks created gets the median weight) and the number of
    branches removed.
    """
    pruned = prune_tree(points, centers, skeleton, min_extension=min_extension, min_mass=min_mass)
    keep = pruned.keep
    if not pruned.removed_branches:
        return keep, sparse.csr_matrix(skeleton), 0
    weights = sparse.csr_matrix(skeleton)[keep][:, keep]
    pattern = sparse.csr_matrix(pruned.adjacency)
    kept = weights.multiply(pattern != 0).tocsr()
    created = (pattern != 0).astype(float) - (kept != 0).astype(float)
    fill = float(np.median(weights.data)) if weights.nnz else 1.0
    return keep, (kept + fill * created.multiply(created > 0)).tocsr(), int(pruned.removed_branches)


def kept_edges(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The E × 2 ``edges`` between kept nodes, renumbered over the kept nodes."""
    index = np.cumsum(keep) - 1
    return index[edges[keep[edges].all(axis=1)]].astype(np.intp)


def adjacent_cells(points: np.ndarray, centers: np.ndarray, candidates: np.ndarray,
                   chunk_rows: int = 2048) -> np.ndarray:
    """For every candidate edge (a, b), the cells whose two nearest nodes are a and b.

    Competitive Hebbian learning's rule for the edges of a topology-representing
    network: such cells lie between a and b, with no node nearer. Counts are additive
    over the cells, so a chunked fit adds them over its blocks.
    """
    n_nodes = centers.shape[0]
    counts = np.zeros(candidates.shape[0], dtype=np.int64)
    if n_nodes < 2 or not candidates.size:
        return counts
    keys = candidates[:, 0].astype(np.int64) * n_nodes + candidates[:, 1]
    order = np.argsort(keys)
    for start in range(0, points.shape[0], chunk_rows):
        d2 = squared_distances(points[start : start + chunk_rows], centers)
        two = np.sort(np.argpartition(d2, 1, axis=1)[:, :2], axis=1).astype(np.int64)
        found = np.searchsorted(keys, two[:, 0] * n_nodes + two[:, 1], sorter=order)
        found = np.minimum(found, keys.size - 1)
        hit = keys[order[found]] == two[:, 0] * n_nodes + two[:, 1]
        counts += np.bincount(order[found[hit]], minlength=candidates.shape[0])
    return counts


def gap_profiles(points: np.ndarray, centers: np.ndarray, candidates: np.ndarray, *,
                 n_bins: int = GAP_BINS, chunk_rows: int = 2048) -> np.ndarray:
    """For every candidate edge (a, b), where along it the cells near a or b project.

    E × ``n_bins`` counts: a cell with a or b among its two nearest nodes falls in the bin of
    t = (‖x − c_a‖² − ‖x − c_b‖² + ‖c_a − c_b‖²) / (2 ‖c_a − c_b‖²), its projection's
    position from a (0) to b (1), clipped to [0, 1] (once for each of the two ends among its
    two nearest nodes). Runs of empty bins are stretches of the edge free of cells
    (:func:`gap_explained`). The two nearest, not the nearest alone: the end nodes of a ring's
    gap, where an open curve's ends retreat, hold few cells (2 of the 10 about a gap in a
    noisy ring of 200 cells in 30 dimensions), and the gap's cells then count under a
    neighbour. Counts are additive over the cells, so a chunked fit adds them over its blocks.
    """
    n_nodes, n_edges = centers.shape[0], candidates.shape[0]
    counts = np.zeros(n_edges * n_bins, dtype=np.int64)
    if n_nodes < 2 or not n_edges:
        return counts.reshape(n_edges, n_bins)
    heads, tails = candidates[:, 0], candidates[:, 1]
    span2 = np.maximum(np.sum((centers[heads] - centers[tails]) ** 2, axis=1), np.finfo(float).tiny)
    # the edges at each node, as a CSR table: node -> its incident edges
    ends = np.concatenate([heads, tails])
    order = np.argsort(ends, kind="stable")
    incident = np.concatenate([np.arange(n_edges), np.arange(n_edges)])[order]
    offsets = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n_nodes))])
    near = min(GAP_NEAREST, n_nodes)
    for start in range(0, points.shape[0], chunk_rows):
        d2 = squared_distances(points[start : start + chunk_rows], centers)
        closest = np.argpartition(d2, near - 1, axis=1)[:, :near]
        owner = np.tile(np.arange(closest.shape[0]), near)
        nearest = closest.T.ravel()
        per_node = offsets[nearest + 1] - offsets[nearest]
        pairs = np.repeat(np.arange(nearest.size), per_node)
        cells = owner[pairs]
        position = np.arange(pairs.size) - np.repeat(np.cumsum(per_node) - per_node, per_node)
        edges = incident[offsets[nearest][pairs] + position]
        t = (d2[cells, heads[edges]] - d2[cells, tails[edges]] + span2[edges]) / (2 * span2[edges])
        bins = np.minimum((np.clip(t, 0.0, 1.0) * n_bins).astype(np.int64), n_bins - 1)
        counts += np.bincount(edges * n_bins + bins, minlength=n_edges * n_bins)
    return counts.reshape(n_edges, n_bins)


def gap_explained(gap: float, perimeter: float, n_cells: float) -> bool:
    """Whether n cells spread evenly at random round a ring leave an empty stretch this long.

    For n points uniform on a ring of length L, the probability that some spacing
    exceeds g is at most n (1 − g/L)^(n − 1) (the first term of Stevens' formula for
    the largest of the n spacings, an upper bound). The gap explains itself as
    sampling when that bound is at least :data:`GAP_LEVEL`. On 100 cells, an arc of
    340° (a gap of 0.056 of the ring) gives 0.33 and is read as a ring, as
    28 % of full rings of 100 cells have a wider gap; an arc of 300° gives 1e-6, and
    340° of 300 cells 1e-5: they stay open. Free of units and of the dimension.
    """
    if n_cells < 2 or perimeter <= 0:
        return False
    share = min(gap / perimeter, 1.0)
    if share >= 1.0:
        return False
    log_bound = np.log(n_cells) + (n_cells - 1) * np.log1p(-share)
    return bool(log_bound >= np.log(GAP_LEVEL))


def _empty_stretch(profile: np.ndarray, squared_length: float) -> float:
    """The longest stretch of an edge free of cells: its longest run of empty bins (:func:`gap_profiles`)."""
    longest = run = 0
    for value in profile:
        run = run + 1 if value == 0 else 0
        longest = max(longest, run)
    return longest / profile.size * float(np.sqrt(squared_length))


def _bridge_sampling_gaps(forest, add, keep, neighbours, order, centers, candidates, length, mass, profiles, *,
                          min_mass: float, reach=None) -> None:
    """Join pieces of the forest across candidate edges whose empty stretch sampling explains.

    Where a curve's cells thin out by chance, no cell is shared between the two nodes on
    either side, and the curve falls apart (a distorted S of 100 cells in 2–5 pieces, a
    moon in two). Two pieces are joined, shortest edge first, when their cells spread
    evenly at random over their combined length would leave an empty stretch as long as
    the edge's (:func:`gap_explained`); pieces apart by more than that stay apart. Pieces
    under ``min_mass`` of the cells are left to :func:`join_small_components`. A piece's
    length is its edges' plus, at each of its leaves, how far its cells reach beyond it
    (``reach``, when the cells are at hand): the ends of a principal curve retreat into
    their cells, and the skeleton alone is shorter than the stretch the cells cover (a
    moon of 100 cells: 2.7 against π), which makes a chance gap look rarer than it is.
    """
    heads, tails = candidates[:, 0], candidates[:, 1]
    roots = np.asarray([forest.find(node) for node in range(centers.shape[0])])
    piece_mass = np.bincount(roots, weights=mass, minlength=centers.shape[0])
    total_mass = float(mass.sum())
    kept = np.asarray(keep, dtype=np.intp)
    if np.count_nonzero(piece_mass >= min_mass * total_mass) < 2:
        return  # one piece (connected data): nothing to join, and no pass over the cells for their reach
    piece_length = np.bincount(roots[heads[kept]], weights=np.sqrt(length[kept]), minlength=centers.shape[0])
    beyond = np.zeros(centers.shape[0])
    if reach is not None:
        for leaf in (node for node in range(centers.shape[0]) if len(neighbours[node]) == 1):
            beyond[leaf] = reach(leaf, neighbours[leaf][0])
        piece_length += np.bincount(roots, weights=beyond, minlength=centers.shape[0])
    for edge in order:
        a, b = forest.find(heads[edge]), forest.find(tails[edge])
        # a curve broken by chance ends in two leaves facing each other across the break
        if a == b or len(neighbours[heads[edge]]) > 1 or len(neighbours[tails[edge]]) > 1:
            continue
        if min(piece_mass[a], piece_mass[b]) < min_mass * total_mass:
            continue
        span = float(np.sqrt(length[edge]))
        # the joined ends' reach lies along the edge, in its empty stretch's count
        total = piece_length[a] + piece_length[b] + span - beyond[heads[edge]] - beyond[tails[edge]]
        if gap_explained(_empty_stretch(profiles[edge], length[edge]), total, piece_mass[a] + piece_mass[b]):
            forest.union(a, b)
            joined = forest.find(a)
            piece_length[joined], piece_mass[joined] = total, piece_mass[a] + piece_mass[b]
            add(edge)


def shared_mass(assignment, candidates: np.ndarray, chunk_rows: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Column masses 1ᵀP and Σ_i p_ia p_ib for every candidate edge (a, b), one row block at a time.

    ``assignment`` is P, N × K (dense or CSR), rows summing to one. Both sums
    are additive over the cells, so a chunked fit adds them over its blocks.
    """
    heads, tails = candidates[:, 0], candidates[:, 1]
    n_nodes = assignment.shape[1]
    mass = np.zeros(n_nodes)
    shared = np.zeros(heads.size)
    for start in range(0, assignment.shape[0], chunk_rows):
        block = assignment[start : start + chunk_rows]
        block = block.toarray() if sparse.issparse(block) else np.asarray(block)
        mass += block.sum(axis=0)
        shared += np.einsum("ij,ij->j", block[:, heads], block[:, tails])
    return mass, shared


def encloses_hole(centers: np.ndarray, cycle: np.ndarray) -> bool:
    """Whether the cycle through the nodes ``cycle`` runs around a hole in the nodes.

    A ring around a hole (a loop of the data, as the paper's circle) has its
    centroid in empty space, as far from every node as from its own (ratio 0.89–0.95
    of the cycle's mean radius on Table 1's circles). The other cycles that the
    hop rule lets through close across nodes: through the crowd of nodes of a
    dense state of simulated counts (ratio 0.03–0.69 over seeds 0–5), between the
    touching turns of a spiral (0.12–0.68, a few 0.79–0.84 near its centre) or
    around a cluster's own nodes (0.05–0.73); :data:`HOLE_SHARE` lies between.
    That alone fails in many dimensions, where the nodes of a round cluster sit
    on a shell around its empty centre (concentration of measure): a cycle
    through them passes the distance test but wanders through many directions,
    holding 0.35–0.59 of its variance in its best plane (Gaussian clusters in 30
    dimensions) where a ring holds 0.96–1.0 (a ring bent as a saddle in a third
    dimension and blurred in 30); hence :data:`PLANE_SHARE`. ``cycle`` holds each
    node once. Both ratios are free of units and of the number of dimensions; an
    ellipse passes up to an aspect ratio of about 5:3.
    """
    ring = centers[cycle]
    centroid = ring.mean(axis=0)
    offsets = ring - centroid
    radius = float(np.mean(np.sqrt(np.sum(offsets**2, axis=1))))
    nearest = float(np.sqrt(np.min(np.sum((centers - centroid) ** 2, axis=1))))
    if not (radius > 0 and nearest >= HOLE_SHARE * radius):
        return False
    variances = linalg.svdvals(offsets) ** 2
    return float(variances[:2].sum()) >= PLANE_SHARE * float(variances.sum())


class _CellsOfNodes:
    """Each cell's nearest node and squared distance to it, computed when a cycle first needs them."""

    def __init__(self, points: np.ndarray, centers: np.ndarray):
        self.points, self.centers = points, centers
        self.labels = None

    def _nearest(self) -> np.ndarray:
        if self.labels is None:
            self.labels = nearest_nodes(self.points, self.centers)
        return self.labels

    def reach(self, leaf: int, neighbour: int) -> float:
        """How far the cells nearest ``leaf`` reach beyond it, away from ``neighbour``: twice their mean
        overhang past the leaf (the reach of cells spread evenly out there), 0 without any."""
        direction = self.centers[leaf] - self.centers[neighbour]
        norm = float(np.linalg.norm(direction))
        if norm == 0:
            return 0.0
        overhang = (self.points[self._nearest() == leaf] - self.centers[leaf]) @ (direction / norm)
        overhang = overhang[overhang > 0]
        return 2.0 * float(overhang.mean()) if overhang.size else 0.0

    def leave_hole(self, cycle: np.ndarray) -> bool:
        on_cycle = np.isin(self._nearest(), cycle)
        members = self.points[on_cycle]
        squared = np.sum((members - self.centers[self.labels[on_cycle]]) ** 2, axis=1)
        return hole_in_cells(self.centers[cycle], members, squared)


def hole_in_cells(ring: np.ndarray, cells: np.ndarray, squared: np.ndarray) -> bool:
    """Whether the cells of a cycle's nodes leave its middle empty, as the cells of a loop do.

    :func:`encloses_hole` reads the nodes; two kinds of cycle pass it that the cells
    refute. In a cluster of 5–10 dimensions the nodes can gather into a knot far smaller
    than the spread of their cells (pulled together by the graph's smoothing), and a
    cycle through the knot has a mean radius of 0.001–0.003 of the root-mean-square
    distance of its cells to their nodes, where the rings measured have 0.65–18
    (a faint cell cycle in counts 0.65–0.72, a ring in 30 dimensions with noise as
    wide as it 1.08): it must reach :data:`MIN_LOOP_WIDTH`. In two dimensions a cycle
    around a patch of a cluster that happens to have no node has cells inside: 3.7–6.7 %
    of its nodes' cells lie, in its best plane, within half its radius of its centroid,
    against at most 0.5 % on those rings (the inner edge of a ring's noise): at most
    :data:`MAX_INNER_SHARE`. ``ring`` holds the cycle's nodes, ``cells`` the cells
    nearest to them and ``squared`` their squared distances to those nodes; a cycle of
    nodes no cell is nearest to is no loop of the cells either.
    """
    if not cells.shape[0]:  # nodes no cell is nearest to (shadowed by coincident ones) draw no loop
        return False
    centroid = ring.mean(axis=0)
    offsets = ring - centroid
    radius = float(np.mean(np.sqrt(np.sum(offsets**2, axis=1))))
    if radius < MIN_LOOP_WIDTH * float(np.sqrt(np.mean(squared))):
        return False
    plane = linalg.svd(offsets, full_matrices=False)[2][:2]
    in_plane = np.sqrt(np.sum(((cells - centroid) @ plane.T) ** 2, axis=1))
    planar_radius = float(np.mean(np.sqrt(np.sum((offsets @ plane.T) ** 2, axis=1))))
    return float(np.mean(in_plane < 0.5 * planar_radius)) <= MAX_INNER_SHARE


def _shortest_path(neighbours: list[list[int]], source: int, target: int) -> np.ndarray:
    """The nodes of a shortest path from ``source`` to ``target`` (breadth first; both ends included)."""
    previous = {int(source): -1}
    queue = deque([int(source)])
    while queue:
        node = queue.popleft()
        if node == target:
            break
        for other in neighbours[node]:
            if other not in previous:
                previous[other] = node
                queue.append(other)
    path = [int(target)]
    while previous[path[-1]] != -1:
        path.append(previous[path[-1]])
    return np.asarray(path, dtype=np.intp)


def _hops_at_least(neighbours, source, target, hops) -> bool:
    """Whether ``target`` is at least ``hops`` edges from ``source`` (or unreachable)."""
    depth = {int(source): 0}
    queue = deque([int(source)])
    while queue:
        node = queue.popleft()
        if depth[node] + 1 >= hops:
            continue
        for other in neighbours[node]:
            if other == target:
                return False
            if other not in depth:
                depth[other] = depth[node] + 1
                queue.append(other)
    return True


def join_small_components(centers, edges, mass, min_mass) -> np.ndarray:
    """Edges joining each component under ``min_mass`` of the cells to the nearest other one."""
    n_nodes = centers.shape[0]
    graph = from_edges(edges, np.ones(edges.shape[0]), n_nodes) if edges.size else sparse.csr_matrix((n_nodes, n_nodes))
    _, label = csgraph.connected_components(graph, directed=False)
    total = mass.sum()
    extra = []
    while True:
        component_mass = np.bincount(label, weights=mass)
        present = np.flatnonzero(np.bincount(label) > 0)
        if present.size < 2:
            break
        smallest = present[np.argmin(component_mass[present])]
        if component_mass[smallest] >= min_mass * total:
            break
        inside, outside = np.flatnonzero(label == smallest), np.flatnonzero(label != smallest)
        dist = squared_distances(centers[inside], centers[outside])  # a tiny component: few rows
        i, j = np.unravel_index(np.argmin(dist), dist.shape)
        a, b = inside[i], outside[j]
        extra.append((min(a, b), max(a, b)))
        label[label == smallest] = label[b]
    return np.asarray(extra, dtype=np.intp).reshape(-1, 2)


class _UnionFind:
    """Disjoint sets of nodes (Kruskal's forest)."""

    def __init__(self, size: int):
        self.parent = np.arange(size)

    def find(self, node: int) -> int:
        root = node
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[node] != root:
            self.parent[node], node = root, self.parent[node]
        return int(root)

    def union(self, a: int, b: int) -> bool:
        """Join the sets of a and b; False when they were already one."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return False
        self.parent[ra] = rb
        return True
