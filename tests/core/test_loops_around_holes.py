"""The ℓ1 skeleton's loop rule (``_core/trees/skeleton.py``): a cycle is drawn only around a hole."""

import numpy as np

from scskeleton._core.trees.skeleton import (
    _shortest_path,
    adjacent_cells,
    encloses_hole,
    gap_explained,
    gap_profiles,
    hole_in_cells,
)


def _ring(n, aspect=1.0, dims=2):
    angle = np.linspace(0, 2 * np.pi, n, endpoint=False)
    points = np.zeros((n, dims))
    points[:, 0], points[:, 1] = 5 * np.cos(angle), 5 * aspect * np.sin(angle)
    return points


def test_a_ring_encloses_a_hole_in_any_units_and_dimensions():
    for dims in (2, 30):
        ring = _ring(20, dims=dims)
        cycle = np.arange(20)
        assert encloses_hole(ring, cycle)
        assert encloses_hole(1e-3 * ring + 7.0, cycle)
        assert encloses_hole(_ring(20, aspect=0.8, dims=dims), cycle)


def test_a_cycle_through_a_crowd_of_nodes_encloses_none():
    rng = np.random.default_rng(0)
    ring = _ring(20)
    filled = np.vstack([ring, rng.normal(scale=0.5, size=(5, 2))])  # nodes of a dense state inside it
    assert not encloses_hole(filled, np.arange(20))
    blob = rng.normal(size=(60, 30))  # a cycle wandering through a ball of nodes
    assert not encloses_hole(blob, np.arange(12))
    # two touching turns of a band joined at both ends: a long, thin cycle
    band = np.vstack([np.c_[np.linspace(0, 10, 20), np.zeros(20)], np.c_[np.linspace(10, 0, 20), np.full(20, 0.8)]])
    assert not encloses_hole(band, np.arange(40))
    assert not encloses_hole(np.zeros((10, 3)), np.arange(10))  # coincident nodes


def test_the_cycle_an_edge_closes_runs_the_shortest_way_round():
    # a ring 0-1-…-6-0 with a tail 6-7: the shortest way from 7 to 2 runs through 0 and 1
    neighbours = [[1, 6], [0, 2], [1, 3], [2, 4], [3, 5], [4, 6], [5, 0, 7], [6]]
    np.testing.assert_array_equal(_shortest_path(neighbours, 7, 2), [2, 1, 0, 6, 7])
    np.testing.assert_array_equal(_shortest_path(neighbours, 3, 3), [3])


def test_a_cycle_over_a_shell_of_nodes_in_many_dimensions_encloses_none():
    """In 30 dimensions the nodes of a round cluster sit on a shell around its empty centre:
    a cycle through them passes the distance test but is far from any plane."""
    rng = np.random.default_rng(1)
    shell = rng.normal(size=(80, 30))
    shell /= np.linalg.norm(shell, axis=1, keepdims=True)
    cycle = np.arange(10)
    centroid = shell[cycle].mean(axis=0)
    radius = np.linalg.norm(shell[cycle] - centroid, axis=1).mean()
    assert np.linalg.norm(shell - centroid, axis=1).min() >= 0.75 * radius  # the distance test alone passes
    assert not encloses_hole(shell, cycle)
    saddle = _ring(20, dims=30)
    saddle[:, 2] = 1.5 * np.sin(2 * np.linspace(0, 2 * np.pi, 20, endpoint=False))  # a ring bent out of its plane
    assert encloses_hole(saddle, np.arange(20))


def test_adjacent_cells_counts_the_cells_whose_two_nearest_nodes_an_edge_joins():
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [10.0, 0.0]])
    cells = np.array([[0.4, 0.1], [0.6, -0.1], [1.4, 0.0], [9.0, 0.0], [0.5, 0.0]])
    candidates = np.array([[0, 1], [1, 2], [2, 3], [0, 3]])
    # cells 0, 1, 4 lie between nodes 0 and 1, cell 2 between 1 and 2, cell 3 between 3 and 2
    np.testing.assert_array_equal(adjacent_cells(cells, nodes, candidates, chunk_rows=2), [3, 1, 1, 0])
    assert adjacent_cells(cells, nodes, np.empty((0, 2), dtype=np.intp)).size == 0


def test_gap_profiles_place_the_cells_of_an_edges_ends_along_it():
    nodes = np.array([[0.0, 0.0], [4.0, 0.0], [0.0, 9.0]])
    # along (0, 1): t = 0 (clipped from behind), 0.125, 0.75, 1, each cell with both ends as its two
    # nearest nodes and counted for each; cell 4 (nearest node 2, then node 0) at t = 0
    cells = np.array([[-1.0, 0.0], [0.5, 0.3], [3.0, -0.2], [4.0, 0.0], [0.0, 8.0]])
    candidates = np.array([[0, 1], [1, 2]])
    profiles = gap_profiles(cells, nodes, candidates, n_bins=4, chunk_rows=2)
    np.testing.assert_array_equal(profiles[0], [5, 0, 0, 4])
    # along (1, 2): cells 0–3 (node 1 among their two nearest) near t = 0, cell 4 (node 2) near t = 1
    np.testing.assert_array_equal(profiles[1], [4, 0, 0, 1])
    np.testing.assert_array_equal(profiles, gap_profiles(cells, nodes, candidates, n_bins=4))


def test_gap_explained_reads_the_gap_against_the_sampling_of_the_ring():
    ring = 2 * np.pi
    # 100 cells: a 20° gap is left by chance (28 % of full rings have a wider one), 60° is not
    assert gap_explained(np.deg2rad(20), ring, 100)
    assert not gap_explained(np.deg2rad(60), ring, 100)
    # 300 cells leave no 20° gap by chance
    assert not gap_explained(np.deg2rad(20), ring, 300)
    # free of units
    for scale in (1e-3, 1e3):
        assert gap_explained(scale * np.deg2rad(20), scale * ring, 100)
        assert not gap_explained(scale * np.deg2rad(60), scale * ring, 100)
    assert not gap_explained(1.0, 0.0, 100) and not gap_explained(ring, ring, 100)


def test_hole_in_cells_needs_an_empty_middle_and_a_loop_wider_than_its_cells_spread():
    rng = np.random.default_rng(0)
    ring = _ring(40)
    angle = rng.uniform(0, 2 * np.pi, 2000)
    around_ring = np.column_stack([5 * np.cos(angle), 5 * np.sin(angle)]) + rng.normal(scale=0.5, size=(2000, 2))
    squared = np.full(2000, 0.5)
    assert hole_in_cells(ring, around_ring, squared)
    # a disc of cells: a tenth of them within half the radius of the centre
    disc = rng.uniform(-5, 5, size=(4000, 2))
    disc = disc[np.sum(disc**2, axis=1) < 30]
    assert not hole_in_cells(ring, disc, np.full(disc.shape[0], 0.5))
    # a knot of nodes far smaller than its cells' spread about them
    assert not hole_in_cells(ring * 1e-3, around_ring * 1e-3, np.full(2000, 1.0))
    # the same ring in other units
    assert hole_in_cells(ring * 1e3, around_ring * 1e3, squared * 1e6)
    # nodes that no cell is nearest to
    assert not hole_in_cells(ring, np.empty((0, 2)), np.empty(0))
