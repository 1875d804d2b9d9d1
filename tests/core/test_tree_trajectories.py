import numpy as np
import pytest
from scipy import sparse

from scskeleton._core.trees import trajectory as tr


def _graph(edges, n_nodes):
    edges = np.asarray(edges)
    upper = sparse.csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n_nodes, n_nodes))
    return (upper + upper.T).tocsr()


# A "Y": 0 -(1)- 1 -(1)- 2, then 2 -> 3 up-right and 2 -> 4 down-right.
Y_NODES = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 1.0], [3.0, -1.0]])
Y_GRAPH = _graph([(0, 1), (1, 2), (2, 3), (2, 4)], 5)


def test_projection_onto_edges_is_orthogonal_and_clamped():
    points = np.array([[0.4, 0.3], [-1.0, 0.0], [2.5, 0.6], [1.0, -0.2]])
    proj = tr.project_onto_graph(points, Y_NODES, Y_GRAPH)
    # point 0: nearest node 0, projected onto edge 0-1 at 0.4, distance 0.3
    assert (proj.edge_start[0], proj.edge_end[0]) == (0, 1)
    assert proj.fraction[0] == pytest.approx(0.4) and proj.distance[0] == pytest.approx(0.3)
    # point 1 lies beyond the leaf: clamped to the node itself
    assert proj.fraction[1] == 0.0 and proj.distance[1] == pytest.approx(1.0)
    # point 2: nearest node 3 (dist ~0.64) vs node 2 (~0.78) -> edge 3-2
    start, end, t = proj.edge_start[2], proj.edge_end[2], proj.fraction[2]
    point = Y_NODES[start] + t * (Y_NODES[end] - Y_NODES[start])
    assert {start, end} == {2, 3}
    assert np.dot(points[2] - point, Y_NODES[3] - Y_NODES[2]) == pytest.approx(0.0, abs=1e-12)


def test_pseudotime_is_exact_geodesic_on_tree():
    points = np.array([[0.5, 0.0], [2.0, 0.0], [2.5, 0.5], [3.0, -1.0]])
    proj = tr.project_onto_graph(points, Y_NODES, Y_GRAPH)
    times = tr.pseudotime(proj, Y_GRAPH, Y_NODES, [0])
    np.testing.assert_allclose(times, [0.5, 2.0, 2.0 + np.sqrt(0.5), 2.0 + np.sqrt(2.0)])


def test_pseudotime_on_a_cycle_takes_the_shorter_way():
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    cycle = _graph([(0, 1), (1, 2), (2, 3), (3, 0)], 4)
    points = np.array([[0.0, 0.9], [1.0, 0.5], [0.6, 1.0]])
    times = tr.pseudotime(tr.project_onto_graph(points, square, cycle), cycle, square, [0])
    np.testing.assert_allclose(times, [0.9, 1.5, 1.6])  # (0.6, 1) is 1 + 0.6 via node 3


def test_components_without_root_get_nan():
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0], [11.0, 0.0]])
    graph = _graph([(0, 1), (2, 3)], 4)
    points = np.array([[0.5, 0.0], [10.5, 0.0]])
    times = tr.pseudotime(tr.project_onto_graph(points, nodes, graph), graph, nodes, [0])
    assert times[0] == pytest.approx(0.5) and np.isnan(times[1])


def test_topology_of_a_y():
    shape = tr.topology(Y_GRAPH, Y_NODES, roots=[0])
    np.testing.assert_array_equal(shape.branch_points, [2])
    np.testing.assert_array_equal(shape.leaves, [0, 3, 4])
    assert [s.tolist() for s in shape.segments] == [[0, 1, 2], [2, 3], [2, 4]]
    proj = tr.project_onto_graph(np.array([[0.5, 0.1], [2.6, 0.5], [2.6, -0.5]]), Y_NODES, Y_GRAPH)
    np.testing.assert_array_equal(shape.segment_of(proj), [0, 1, 2])


def test_topology_of_cycle_and_isolated_node():
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, 1.0], [5.0, 5.0]])
    graph = _graph([(0, 1), (1, 2), (2, 0)], 4)
    graph = sparse.csr_matrix(graph, shape=(4, 4))
    shape = tr.topology(graph, nodes, roots=[0])
    assert shape.branch_points.size == 0 and shape.leaves.size == 0
    assert sorted(len(s) for s in shape.segments) == [1, 4]  # the cycle closes on itself


def test_root_splits_its_segment():
    shape = tr.topology(Y_GRAPH, Y_NODES, roots=[1])
    assert [s.tolist() for s in shape.segments][:2] == [[1, 0], [1, 2]]


def test_short_terminal_branches_are_pruned_but_not_the_root():
    # trunk 0-1-2-3-4 with a one-node stub 5 on node 2
    nodes = np.array([[0, 0], [1, 0], [2, 0], [3, 0], [4, 0], [2, 0.1]], dtype=float)
    graph = _graph([(0, 1), (1, 2), (2, 3), (3, 4), (2, 5)], 6)
    kept = tr.topology(graph, nodes, roots=[0], min_branch_nodes=0)
    pruned = tr.topology(graph, nodes, roots=[0], min_branch_nodes=2)
    assert kept.branch_points.tolist() == [2] and pruned.branch_points.size == 0
    assert [s.tolist() for s in pruned.segments] == [[0, 1, 2, 3, 4]]
    proj = tr.project_onto_graph(np.array([[2.0, 0.09]]), nodes, graph)
    assert pruned.segment_of(proj).tolist() == [0]
    # the same stub is kept when it holds the root
    assert tr.topology(graph, nodes, roots=[5], min_branch_nodes=2).branch_points.tolist() == [2]


def test_root_node_prefers_a_reached_leaf_else_the_medoid():
    total = np.ones(5)
    at_tip = np.array([0.0, 0.0, 0.0, 0.9, 0.0])  # the group sits on leaf 3
    assert tr.root_node(Y_GRAPH, Y_NODES, at_tip, total) == 3
    assert tr.reaches_leaf(at_tip, total, 3)
    at_fork = np.array([0.0, 0.2, 0.9, 0.2, 0.2])  # the group sits at the fork, reaching no tip
    assert tr.root_node(Y_GRAPH, Y_NODES, at_fork, total) == 2
    assert tr.nearest_leaf(Y_GRAPH, Y_NODES, 1) == 0
    with pytest.raises(ValueError, match="no assignment mass"):
        tr.root_node(Y_GRAPH, Y_NODES, np.zeros(5), total)


def test_path_and_cells_on_it():
    path = tr.node_path(Y_GRAPH, Y_NODES, 0, 4)
    np.testing.assert_array_equal(path, [0, 1, 2, 4])
    points = np.array([[2.5, -0.5], [0.5, 0.0], [2.6, 0.6]])  # the last is on the other branch
    cells, position = tr.cells_on_path(tr.project_onto_graph(points, Y_NODES, Y_GRAPH), path, Y_NODES)
    np.testing.assert_array_equal(cells, [1, 0])
    np.testing.assert_allclose(position, [0.5, 2.0 + np.sqrt(0.5)])
    disconnected = _graph([(0, 1)], 3)
    with pytest.raises(ValueError, match="different connected components"):
        tr.node_path(disconnected, np.zeros((3, 2)) + np.arange(3)[:, None], 0, 2)


# A unit square loop 0-1-2-3 with a hair 4 hanging off node 2 and a tail 5-6 leading to node 0.
SQUARE_NODES = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [1.5, 1.5], [-1.0, -1.0], [-2.0, -2.0]])
SQUARE_GRAPH = _graph([(0, 1), (1, 2), (2, 3), (3, 0), (2, 4), (0, 5), (5, 6)], 7)


def test_single_loop_walks_the_2_core_from_the_node_nearest_the_start():
    # from the tail's end the loop starts at node 0 and goes first to its lower neighbour (1)
    np.testing.assert_array_equal(tr.single_loop(SQUARE_GRAPH, 6), [0, 1, 2, 3])
    np.testing.assert_array_equal(tr.single_loop(SQUARE_GRAPH, 4), [2, 1, 0, 3])
    with pytest.raises(ValueError, match="0 independent cycles"):
        tr.single_loop(Y_GRAPH, 0)
    two_loops = _graph([(0, 1), (1, 2), (2, 0), (2, 3), (3, 4), (4, 2)], 5)
    with pytest.raises(ValueError, match="2 independent cycles"):
        tr.single_loop(two_loops, 0)


def test_cells_on_a_closed_path_run_once_round_the_loop():
    loop = np.array([0, 1, 2, 3])
    points = np.array([[0.5, -0.1], [1.1, 0.5], [0.5, 1.1], [-0.1, 0.25], [1.4, 1.4], [-1.5, -1.5], [1.15, 1.15]])
    projection = tr.project_onto_graph(points, SQUARE_NODES, SQUARE_GRAPH)
    cells, position = tr.cells_on_path(projection, loop, SQUARE_NODES, closed=True)
    # the closing edge 3 -> 0 carries the fourth cell at 3.75; the hair's and the tail's cells are off the
    # loop, and the last cell, nearest node 2 but on the hair's edge, sits at node 2
    np.testing.assert_array_equal(cells, [0, 1, 6, 2, 3])
    np.testing.assert_allclose(position, [0.5, 1.5, 2.0, 2.5, 3.75])
    cells, position = tr.cells_on_path(projection, np.array([0, 3, 2, 1]), SQUARE_NODES, closed=True)
    np.testing.assert_array_equal(cells, [3, 2, 6, 1, 0])
    np.testing.assert_allclose(position, [0.25, 1.5, 2.0, 2.5, 3.5])
