"""The skeleton of a weighted ℓ1 graph: the curves, loops and components it draws.

The linear program (19) of the regularized principal graph paper
(``shared/papers/rpg_…``) reconstructs every landmark from its neighbours. A
vertex solution keeps up to K·D positive weights, and on noisy data nearly all
of them are used: each landmark is rebuilt exactly from about D neighbours on
both sides of the curve, so the optimum is a band of short edges — a "thick
curve" with about K·(D − 1) independent cycles in D = 2 — however λ is set
(smaller λ first cuts the band into pieces, see ``docs/methods/rpg.md``). The
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
   whose nodes leave one wider gap, across which the LP drew no edge;
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
from .pruning import prune_tree

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


def l1_skeleton(
    centers: np.ndarray,
    weights: sparse.spmatrix,
    candidates: np.ndarray,
    mass: np.ndarray,
    shared: np.ndarray,
    *,
    min_mass: float,
    adjacent: np.ndarray | None = None,
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

    def close_rings(order: np.ndarray) -> None:
        for edge in order:
            head, tail = heads[edge], tails[edge]
            if forest.find(head) != forest.find(tail) or tail in neighbours[head]:
                continue
            # the cycle the edge closes with the shortest way round: once a ring is closed, a second
            # edge across the same band finds the short way along it, which encloses no hole
            if _hops_at_least(neighbours, head, tail, MIN_LOOP) and encloses_hole(
                centers, _shortest_path(neighbours, head, tail)
            ):
                add(edge)

    close_rings(lp_order)
    if adjacent is not None:
        closing = np.flatnonzero(adjacent >= MIN_ADJACENT)
        close_rings(closing[np.argsort(length[closing], kind="stable")])

    keep_idx = np.asarray(keep, dtype=np.intp)
    fill = float(np.median(lp_weight[chosen])) if chosen.any() else 1.0
    edge_weight = np.where(lp_weight[keep_idx] > 0, lp_weight[keep_idx], fill)
    edges = candidates[keep_idx]
    extra = _join_small_components(centers, edges, mass, min_mass)
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


def _join_small_components(centers, edges, mass, min_mass) -> np.ndarray:
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
