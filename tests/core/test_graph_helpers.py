import numpy as np
import pytest
from scipy import sparse
from scipy.sparse import csgraph

from scskeleton._core.graphs import degrees, edge_list, knn_edges, laplacian, minimum_spanning_tree


def test_mst_has_k_minus_one_edges_and_is_connected():
    rng = np.random.default_rng(0)
    tree = minimum_spanning_tree(rng.normal(size=(40, 3)))
    assert (tree != tree.T).nnz == 0
    assert tree.nnz // 2 == 39
    assert csgraph.connected_components(tree, directed=False)[0] == 1


def test_mst_joins_coincident_nodes():
    nodes = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    tree = minimum_spanning_tree(nodes)
    assert tree.nnz // 2 == 3
    assert csgraph.connected_components(tree, directed=False)[0] == 1


def test_mst_is_minimal_on_a_line():
    nodes = np.array([[0.0], [3.0], [1.0], [2.0]])
    assert {tuple(e) for e in edge_list(minimum_spanning_tree(nodes))} == {(0, 2), (2, 3), (1, 3)}


def test_laplacian_rows_sum_to_zero_and_degrees():
    adjacency = sparse.csr_matrix(np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]], dtype=float))
    lap = laplacian(adjacency)
    np.testing.assert_allclose(lap.sum(1), 0.0)
    np.testing.assert_array_equal(degrees(adjacency), [2, 1, 1])


def test_mst_is_minimal_when_nodes_nearly_coincide():
    """Nearly coincident centers (scipy drops dense weights below 1e-8) still give a minimal tree."""
    import networkx as nx

    rng = np.random.default_rng(1)
    nodes = np.repeat(rng.normal(size=(30, 2)), 4, axis=0) + 1e-6 * rng.normal(size=(120, 2))
    cost = ((nodes[:, None] - nodes[None]) ** 2).sum(-1)
    ours = cost[sparse.triu(minimum_spanning_tree(nodes), 1).nonzero()].sum()
    graph = nx.from_numpy_array(cost)
    best = sum(w for _, _, w in nx.minimum_spanning_tree(graph).edges(data="weight"))
    assert ours == pytest.approx(best, rel=1e-12)


@pytest.mark.parametrize("n_neighbors", [1, 4, 15])
def test_knn_edges_are_the_nearest_with_ties_broken_by_index(n_neighbors):
    # coordinates on a coarse grid and duplicated points: many ties at the k-th distance
    rng = np.random.default_rng(0)
    points = np.vstack([rng.integers(0, 4, size=(150, 2)), np.repeat(rng.normal(size=(30, 2)), 3, axis=0)]).astype(float)
    distances = ((points[:, None] - points[None]) ** 2).sum(-1)
    np.fill_diagonal(distances, np.inf)
    nearest = np.argsort(distances, axis=1, kind="stable")[:, :n_neighbors]
    heads = np.repeat(np.arange(points.shape[0]), n_neighbors)
    expected = np.unique(np.sort(np.column_stack([heads, nearest.ravel()]), axis=1), axis=0)
    for chunk_rows in (7, 2048):
        np.testing.assert_array_equal(knn_edges(points, n_neighbors, chunk_rows=chunk_rows), expected)
