"""Graphs over nodes: minimum spanning trees, Laplacians, edge lists.

Every graph learner in the package hands its node graph around as a symmetric
K × K CSR matrix with positive entries on edges; these helpers are the one
place that builds and reads such matrices.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from scipy.spatial import distance



def minimum_spanning_tree(nodes: np.ndarray) -> sparse.csr_matrix:
    """Binary adjacency of the Euclidean minimum spanning tree of ``nodes`` (K × d).

    Solves eq. (28) of the DDRTree paper (MST on squared distances, which has
    the same tree as on distances) with scipy's compiled Kruskal. The costs
    are handed over as a sparse matrix with every off-diagonal entry explicit:
    scipy reads a *dense* input through ``np.ma.masked_values``, which drops
    weights within 1e-8 of zero as "no edge" and so returns a non-minimal tree
    when centers nearly coincide. Exact zeros are lifted to the smallest
    positive float for the same reason; that changes no weight comparison.
    """
    n_nodes = nodes.shape[0]
    if n_nodes == 1:
        return sparse.csr_matrix((1, 1))
    cost = distance.cdist(nodes, nodes, "sqeuclidean")  # pairwise, no cancellation for close nodes
    np.maximum(cost, np.finfo(float).tiny, out=cost)
    np.fill_diagonal(cost, 0.0)
    tree = csgraph.minimum_spanning_tree(sparse.csr_matrix(cost))
    tree.data[:] = 1.0
    return symmetrize(tree)


def symmetrize(adjacency: sparse.spmatrix) -> sparse.csr_matrix:
    """Symmetric CSR with the larger of (i, j) and (j, i) on each edge."""
    adjacency = sparse.csr_matrix(adjacency)
    sym = adjacency.maximum(adjacency.T).tocsr()
    sym.setdiag(0)
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
