"""Graphs over nodes: minimum spanning trees, Laplacians, edge lists.

Every graph learner in the package hands its node graph around as a symmetric
K × K CSR matrix with positive entries on edges; these helpers are the one
place that builds and reads such matrices.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.spatial import distance



def minimum_spanning_tree(nodes: np.ndarray) -> sparse.csr_matrix:
    """Binary adjacency of the Euclidean minimum spanning tree of ``nodes`` (K × d).

    Solves eq. (28) of the DDRTree paper / eq. (20) of the RPG paper (a
    spanning tree of least total squared length; squared or plain lengths give
    the same tree). The graph over the centers is complete, so Prim's
    algorithm on it is O(K² · d) with one vectorised distance row per step and
    no K × K matrix, where Kruskal (scipy's ``csgraph.minimum_spanning_tree``)
    must sort all K² edges — 20 times slower at K = 1,000. Distances are
    differences squared (no cancellation between nearby nodes), and coincident
    nodes are joined like any others. Ties go to the lowest index.
    """
    n_nodes = nodes.shape[0]
    in_tree = np.zeros(n_nodes, dtype=bool)
    best = np.full(n_nodes, np.inf)
    parent = np.full(n_nodes, -1, dtype=np.intp)
    best[0] = 0.0
    for _ in range(n_nodes):
        newest = int(np.argmin(np.where(in_tree, np.inf, best)))
        in_tree[newest] = True
        distance2 = np.sum((nodes - nodes[newest]) ** 2, axis=1)
        closer = ~in_tree & (distance2 < best)
        best[closer] = distance2[closer]
        parent[closer] = newest
    child = np.flatnonzero(parent >= 0)
    return from_edges(np.column_stack([parent[child], child]), np.ones(child.size), n_nodes)


def symmetrize(adjacency: sparse.spmatrix) -> sparse.csr_matrix:
    """Symmetric CSR with the larger of (i, j) and (j, i) on each edge."""
    adjacency = sparse.csr_matrix(adjacency)
    sym = adjacency.maximum(adjacency.T).tocoo()
    # off the diagonal by a mask: setdiag(0) inserts explicit zeros first (a structure change)
    off = sym.row != sym.col
    sym = sparse.csr_matrix((sym.data[off], (sym.row[off], sym.col[off])), shape=sym.shape)
    sym.eliminate_zeros()
    sym.sort_indices()
    return sym


def laplacian(adjacency: sparse.spmatrix) -> np.ndarray:
    """Dense graph Laplacian L = diag(S1) - S of a K × K node graph."""
    dense = np.asarray(adjacency.todense(), dtype=float)
    return np.diag(dense.sum(axis=1)) - dense


def edge_list(adjacency: sparse.spmatrix) -> np.ndarray:
    """E × 2 array of undirected edges (i < j), sorted."""
    upper = sparse.triu(adjacency, k=1).tocoo()
    edges = np.column_stack([upper.row, upper.col]).astype(np.intp)
    order = np.lexsort((edges[:, 1], edges[:, 0]))
    return edges[order]


def edge_lengths(adjacency: sparse.spmatrix, nodes: np.ndarray) -> sparse.csr_matrix:
    """The node graph with each edge weighted by its Euclidean length.

    Zero-length edges (coincident nodes) get the smallest positive float so that
    csgraph routines still see them as edges.
    """
    coo = sparse.coo_matrix(adjacency)
    length = np.linalg.norm(nodes[coo.row] - nodes[coo.col], axis=1)
    np.maximum(length, np.finfo(float).tiny, out=length)
    return sparse.csr_matrix((length, (coo.row, coo.col)), shape=adjacency.shape)


def degrees(adjacency: sparse.spmatrix) -> np.ndarray:
    """Number of neighbours of each node (explicit zeros are not edges)."""
    return np.asarray((sparse.csr_matrix(adjacency) != 0).sum(axis=1)).ravel().astype(np.intp)


def neighbour_table(adjacency: sparse.spmatrix) -> np.ndarray:
    """K × max_degree table of each node's neighbours (increasing), padded with -1."""
    adjacency = symmetrize(adjacency)
    deg = np.diff(adjacency.indptr)
    table = np.full((adjacency.shape[0], max(int(deg.max(initial=0)), 1)), -1, dtype=np.intp)
    rows = np.repeat(np.arange(adjacency.shape[0]), deg)
    slots = np.arange(adjacency.nnz) - np.repeat(adjacency.indptr[:-1], deg)
    table[rows, slots] = adjacency.indices
    return table


def knn_edges(points: np.ndarray, n_neighbors: int, *, chunk_rows: int = 2048) -> np.ndarray:
    """Undirected edges joining each point to its ``n_neighbors`` nearest others.

    The union over both directions (symmetrised), as an E × 2 array (i < j),
    sorted. Distances are computed in row blocks of at most ``chunk_rows`` rows and
    about 2²⁰ distances, so memory is O(min(chunk_rows · N, 2²⁰)) however many points
    there are. Ties are broken by index.
    """
    n_points = points.shape[0]
    if not 1 <= n_neighbors < n_points:
        raise ValueError(f"n_neighbors must be between 1 and {n_points - 1} (the number of nodes - 1); got {n_neighbors}.")
    rows_per_block = max(1, min(chunk_rows, (1 << 20) // n_points))
    heads, tails = [], []
    for start in range(0, n_points, rows_per_block):
        block = distance.cdist(points[start : start + rows_per_block], points, "sqeuclidean")
        rows = np.arange(block.shape[0])
        block[rows, start + rows] = np.inf  # not its own neighbour
        # the n_neighbors smallest of each row, ties at the last one broken by index, without sorting the
        # row (a stable argsort of every row took 6x as long on 3,000 points in 30 dimensions)
        kth = np.partition(block, n_neighbors - 1, axis=1)[:, n_neighbors - 1 : n_neighbors]
        chosen = block <= kth
        surplus = np.flatnonzero(chosen.sum(axis=1) > n_neighbors)
        if surplus.size:  # more than one point at the last distance: keep the lowest indices
            tied = block[surplus] == kth[surplus]
            missing = n_neighbors - (block[surplus] < kth[surplus]).sum(axis=1, keepdims=True)
            chosen[surplus] = (block[surplus] < kth[surplus]) | (tied & (np.cumsum(tied, axis=1) <= missing))
        row_ids, nearest = np.nonzero(chosen)
        heads.append(start + row_ids)
        tails.append(nearest)
    heads, tails = np.concatenate(heads), np.concatenate(tails)
    pairs = np.unique(np.column_stack([np.minimum(heads, tails), np.maximum(heads, tails)]), axis=0)
    return pairs.astype(np.intp)


def graph_edges(graph) -> np.ndarray:
    """The undirected edges (i < j, E × 2, sorted) of a possibly directed N × N graph: every stored
    entry off the diagonal, in either direction.

    The pattern counts, not the values: a kNN distance matrix (``sc.pp.neighbors``)
    stores a neighbour at distance 0 (a duplicate cell) as an explicit zero, and
    it is still a neighbour.
    """
    pattern = sparse.csr_matrix(graph, dtype=float, copy=True)
    pattern.data = np.ones_like(pattern.data)
    return edge_list(symmetrize(pattern))


def fewest_neighbours(edges: np.ndarray, n_points: int) -> int:
    """The smallest number of neighbours of any of ``n_points`` points on the undirected ``edges``."""
    return int(np.bincount(np.asarray(edges, dtype=np.intp).ravel(), minlength=n_points).min())


def from_edges(edges: np.ndarray, weights: np.ndarray, n_nodes: int) -> sparse.csr_matrix:
    """Symmetric K × K CSR adjacency from undirected edges (each listed once) and their weights."""
    upper = sparse.csr_matrix((weights, (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes))
    adjacency = (upper + upper.T).tocsr()
    adjacency.eliminate_zeros()
    adjacency.sort_indices()
    return adjacency
