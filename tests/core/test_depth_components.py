"""_core.depth: a component that follows the genes detected per cell, and that nothing else predicts,
is sequencing depth; one that tracks complexity because the cell state does is kept."""

import numpy as np

from scskeleton._core.depth import depth_components


def state_and_depth(seed: int, n_cells: int = 2000):
    rng = np.random.default_rng(seed)
    time = rng.uniform(0, 1, n_cells)
    state = np.column_stack([np.cos(3 * time), np.sin(3 * time), time]) + 0.05 * rng.normal(size=(n_cells, 3))
    detected = rng.lognormal(5, 0.6, n_cells)  # drawn apart from the state
    return rng, time, state, detected


def test_an_independent_depth_component_is_found_whatever_its_place():
    for seed in range(3):
        rng, _, state, detected = state_and_depth(seed)
        depth = (np.log(detected) - 5) * 3 + 0.1 * rng.normal(size=detected.size)
        for place in (0, 2):
            representation = np.insert(state, place, depth, axis=1)
            found = depth_components(representation, detected)
            assert found.columns.tolist() == [place]
            assert found.correlation[0] > 0.95 and found.predicted[0] < 0.2


def test_complexity_that_follows_the_cell_state_is_kept():
    rng, time, state, _ = state_and_depth(1)
    # differentiation lowers the genes a cell expresses: the count follows time, as a component does
    detected = np.exp(6 - 2 * time + 0.05 * rng.normal(size=time.size))
    representation = np.column_stack([-time + 0.02 * rng.normal(size=time.size), state])
    assert depth_components(representation, detected).columns.size == 0


def test_no_component_follows_depth_and_a_constant_count_reads_none():
    rng, _, state, detected = state_and_depth(2)
    assert depth_components(state, detected).columns.size == 0
    assert depth_components(np.column_stack([np.log(detected), state]), np.full(detected.size, 7.0)).columns.size == 0
