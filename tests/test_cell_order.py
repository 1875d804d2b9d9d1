"""Pseudotime along the cells' neighbour graph within the tree's segments (``tl.pseudotime(order="cells")``)."""

import anndata
import numpy as np
import pytest
import scanpy as sc
from scipy import sparse
from scipy.stats import spearmanr

import scskeleton as sks
from scskeleton._core.trees.cell_order import adjacent_segments, segment_geodesic


def _chain(lengths):
    """Distances of a path graph 0 – 1 – … with the given edge lengths."""
    n = len(lengths) + 1
    rows, cols = np.arange(n - 1), np.arange(1, n)
    return sparse.csr_matrix((np.asarray(lengths, float), (rows, cols)), shape=(n, n))


def test_segments_that_share_an_end_are_adjacent():
    # trunk 0→1, two branches from node 1, and a segment 4→5 touching none
    segments = [np.array([0, 1]), np.array([1, 2]), np.array([1, 3]), np.array([4, 5])]
    adjacent = adjacent_segments(segments)
    assert adjacent[0, 1] and adjacent[0, 2] and adjacent[1, 2] and adjacent.diagonal().all()
    assert not adjacent[3, :3].any() and (adjacent == adjacent.T).all()


def test_a_step_between_lineages_that_do_not_touch_is_not_taken():
    """Cells 0–3 on segment 0, cells 4–6 on segment 1 (adjacent), cells 7–9 on segment 2,
    which does not touch segment 0. A short edge 0–9 would let cell 9 start near the root;
    the geodesic goes round through the adjacent segment instead."""
    distances = _chain([1.0] * 9).tolil()
    distances[0, 9] = 0.5  # segment 0 → segment 2: not adjacent
    segments = [np.array([0, 1]), np.array([1, 2]), np.array([2, 3])]
    cell_segment = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    time = segment_geodesic(distances.tocsr(), cell_segment, segments, sources=[0])
    np.testing.assert_allclose(time, np.arange(10.0))
    free = segment_geodesic(distances.tocsr(), np.zeros(10, dtype=int), [np.array([0, 3])], sources=[0])
    assert free[9] == 0.5


def test_cells_outside_the_tree_and_cut_off_cells_get_nan():
    distances = _chain([1.0, 1.0, 1.0, 1.0])
    segments = [np.array([0, 1]), np.array([5, 6])]
    time = segment_geodesic(distances, np.array([0, 0, -1, 1, 1]), segments, sources=[0])
    assert time[:2].tolist() == [0.0, 1.0] and np.isnan(time[2:]).all()


def test_duplicate_cells_are_joined_not_cut():
    """A zero distance (two identical cells) is still a step: sparse zeros would read as no edge."""
    distances = sparse.csr_matrix((np.array([0.0, 2.0]), (np.array([0, 1]), np.array([1, 2]))), shape=(3, 3))
    time = segment_geodesic(distances, np.zeros(3, dtype=int), [np.array([0, 1])], sources=[0])
    assert np.isfinite(time).all() and time[2] == pytest.approx(2.0)


def test_bad_inputs_raise():
    distances = _chain([1.0, 1.0])
    with pytest.raises(ValueError, match="square matrix over the 2 cells"):
        segment_geodesic(distances, np.zeros(2, dtype=int), [np.array([0, 1])], sources=[0])
    with pytest.raises(ValueError, match="at least one source"):
        segment_geodesic(distances, np.zeros(3, dtype=int), [np.array([0, 1])], sources=[])


def _fitted(n_cells=600, n_fates=3, seed=0):
    adata = sks.datasets.simulate_trajectory(n_cells, n_fates=n_fates, random_state=seed)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    sc.pp.neighbors(adata, random_state=0)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    return adata


@pytest.mark.parametrize("seed", [0, 1])
def test_the_order_of_the_cells_follows_true_time_and_keeps_the_tree(seed):
    """On generated trees both orders follow the true time; ``"cells"`` changes only the
    pseudotime, not the segments or milestones, and is reproducible."""
    adata = _fitted(seed=seed)
    sks.tl.pseudotime(adata, "rpg")
    tree = adata.obs["rpg_pseudotime"].to_numpy()
    segments = adata.obs["rpg_segment"].copy()
    sks.tl.pseudotime(adata, "rpg", order="cells")
    cells = adata.obs["rpg_pseudotime"].to_numpy()
    truth = adata.obs["true_pseudotime"].to_numpy()
    assert np.isfinite(cells).all() and cells.min() == 0.0
    rho_tree = spearmanr(tree, truth)[0]
    rho_cells = spearmanr(cells, truth)[0]
    assert rho_cells > 0.9 and rho_cells > rho_tree - 0.05, (rho_cells, rho_tree)
    assert (adata.obs["rpg_segment"] == segments).all()
    assert adata.uns["rpg"]["pseudotime_order"] == "cells"
    again = adata.copy()
    sks.tl.pseudotime(again, "rpg", order="cells")
    np.testing.assert_array_equal(again.obs["rpg_pseudotime"].to_numpy(), cells)


def test_cell_order_survives_h5ad(tmp_path):
    adata = _fitted(n_cells=300, n_fates=2)
    sks.tl.pseudotime(adata, "rpg", order="cells")
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    assert back.uns["rpg"]["pseudotime_order"] == "cells"
    np.testing.assert_array_equal(back.obs["rpg_pseudotime"].to_numpy(), adata.obs["rpg_pseudotime"].to_numpy())


def test_cell_order_without_a_neighbour_graph_or_with_a_bad_order_leaves_adata_unchanged():
    adata = _fitted(n_cells=300, n_fates=2)
    del adata.uns["neighbors"]
    before = adata.copy()
    with pytest.raises(KeyError, match="sc.pp.neighbors"):
        sks.tl.pseudotime(adata, "rpg", order="cells")
    with pytest.raises(ValueError, match="order must be"):
        sks.tl.pseudotime(adata, "rpg", order="diffusion")
    assert list(adata.obs.columns) == list(before.obs.columns) and set(adata.uns["rpg"]) == set(before.uns["rpg"])
