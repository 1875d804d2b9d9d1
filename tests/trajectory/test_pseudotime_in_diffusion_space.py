"""Pseudotime through the cells' diffusion space within the tree's segments (``tl.pseudotime(order="diffusion")``)."""

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


def _fitted(n_cells=600, n_fates=3, seed=0, **noise):
    adata = sks.datasets.simulate_trajectory(n_cells, n_fates=n_fates, random_state=seed, **noise)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    sc.pp.neighbors(adata, random_state=0)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    return adata


def _rho(adata):
    return spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_pseudotime"], nan_policy="omit")[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_the_diffusion_order_follows_true_time_and_keeps_the_tree(seed):
    """On low-noise generated trees both orders follow the true time, ``"diffusion"`` as well as scanpy's
    diffusion pseudotime at least; it changes only the pseudotime, not the segments or milestones,
    starts at 0 and is reproducible."""
    adata = _fitted(seed=seed)
    sc.tl.diffmap(adata)
    adata.uns["iroot"] = int(np.argmin(adata.obs["true_pseudotime"]))
    sc.tl.dpt(adata)
    rho_dpt = spearmanr(adata.obs["dpt_pseudotime"], adata.obs["true_pseudotime"])[0]
    sks.tl.pseudotime(adata, "rpg", order="tree")
    segments = adata.obs["rpg_segment"].copy()
    milestones = adata.obs["rpg_milestone"].copy()
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    times = adata.obs["rpg_pseudotime"].to_numpy()
    assert np.isfinite(times).all() and times.min() == 0.0
    assert _rho(adata) > 0.85 and _rho(adata) > rho_dpt - 0.02, (_rho(adata), rho_dpt)
    assert (adata.obs["rpg_segment"] == segments).all() and (adata.obs["rpg_milestone"] == milestones).all()
    assert adata.uns["rpg"]["pseudotime_order"] == "diffusion"
    again = adata.copy()
    sks.tl.pseudotime(again, "rpg", order="diffusion")
    np.testing.assert_array_equal(again.obs["rpg_pseudotime"].to_numpy(), times)


@pytest.mark.parametrize("seed", [0, 1])
def test_on_sparse_noisy_counts_diffusion_orders_the_cells_better_than_the_tree(seed):
    """Shallow, overdispersed counts with dropouts: a cell's nearest node is set by its noise,
    diffusion averages it with its neighbours (measured Spearman: tree 0.05/0.22, diffusion 0.65/0.45)."""
    adata = _fitted(seed=seed, library_size=300, dispersion=2.0, dropout=0.5)
    sks.tl.pseudotime(adata, "rpg", order="tree")
    rho_tree = _rho(adata)
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    assert _rho(adata) > rho_tree + 0.15 and _rho(adata) > 0.35, (_rho(adata), rho_tree)


def test_the_start_cell_is_the_named_cell_or_the_groups_earliest():
    adata = _fitted(n_cells=300, n_fates=2)
    earliest = int(np.argmin(adata.obs["true_pseudotime"]))
    sks.tl.root(adata, "rpg", cell=earliest)
    assert adata.uns["rpg"]["root_cells"].tolist() == [adata.obs_names[earliest]]
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    assert adata.obs["rpg_pseudotime"].iloc[earliest] == 0.0
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    (start,) = adata.uns["rpg"]["root_cells"]
    sks.tl.pseudotime(adata, "rpg", order="tree")
    lowest = adata.obs["true_pseudotime"] <= adata.obs["true_pseudotime"].quantile(0.05)
    # of the chosen cells, the one the tree places nearest the root
    assert lowest[start] and adata.obs["rpg_pseudotime"][start] == adata.obs["rpg_pseudotime"][lowest].min()
    sks.tl.root(adata, "rpg", node=int(adata.uns["rpg"]["root"]))
    assert "root_cells" not in adata.uns["rpg"]


def test_a_subset_without_the_start_cell_starts_from_the_cell_nearest_the_root():
    adata = _fitted(n_cells=300, n_fates=2)
    earliest = int(np.argmin(adata.obs["true_pseudotime"]))
    sks.tl.root(adata, "rpg", cell=earliest)
    subset = adata[np.arange(adata.n_obs) != earliest].copy()
    sc.pp.neighbors(subset, random_state=0)
    sks.tl.pseudotime(subset, "rpg", order="diffusion")
    times = subset.obs["rpg_pseudotime"].to_numpy()
    assert np.isfinite(times).all() and times.min() == 0.0 and _rho(subset) > 0.9


def test_diffusion_order_survives_h5ad(tmp_path):
    adata = _fitted(n_cells=300, n_fates=2)
    sks.tl.root(adata, "rpg", cell=int(np.argmin(adata.obs["true_pseudotime"])))
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    adata.write_h5ad(tmp_path / "a.h5ad")
    back = anndata.read_h5ad(tmp_path / "a.h5ad")
    assert back.uns["rpg"]["pseudotime_order"] == "diffusion"
    assert back.uns["rpg"]["root_cells"].tolist() == adata.uns["rpg"]["root_cells"].tolist()
    np.testing.assert_array_equal(back.obs["rpg_pseudotime"].to_numpy(), adata.obs["rpg_pseudotime"].to_numpy())
    sks.tl.pseudotime(back, "rpg", order="diffusion")
    np.testing.assert_array_equal(back.obs["rpg_pseudotime"].to_numpy(), adata.obs["rpg_pseudotime"].to_numpy())


def test_diffusion_order_without_a_neighbour_graph_or_with_a_bad_order_leaves_adata_unchanged():
    adata = _fitted(n_cells=300, n_fates=2)
    del adata.uns["neighbors"]
    before = adata.copy()
    with pytest.raises(KeyError, match="sc.pp.neighbors"):
        sks.tl.pseudotime(adata, "rpg", order="diffusion")
    with pytest.raises(ValueError, match="order must be"):
        sks.tl.pseudotime(adata, "rpg", order="cells")
    assert list(adata.obs.columns) == list(before.obs.columns) and set(adata.uns["rpg"]) == set(before.uns["rpg"])


def test_the_default_order_is_diffusion_with_a_neighbour_graph_and_the_tree_without():
    adata = _fitted(n_cells=300, n_fates=2)
    sks.tl.pseudotime(adata, "rpg")
    assert adata.uns["rpg"]["pseudotime_order"] == "diffusion"
    auto = adata.obs["rpg_pseudotime"].to_numpy()
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    np.testing.assert_array_equal(adata.obs["rpg_pseudotime"].to_numpy(), auto)
    del adata.uns["neighbors"]
    sks.tl.pseudotime(adata, "rpg")
    assert adata.uns["rpg"]["pseudotime_order"] == "tree"
    tree = adata.obs["rpg_pseudotime"].to_numpy()
    sks.tl.pseudotime(adata, "rpg", order="tree")
    np.testing.assert_array_equal(adata.obs["rpg_pseudotime"].to_numpy(), tree)


def test_the_default_order_measures_a_cell_level_graph_along_itself():
    adata = sks.datasets.simulate_trajectory(200, n_fates=2, random_state=0)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=10)
    sc.pp.neighbors(adata, random_state=0)
    sks.tl.mpme(adata)
    sks.tl.root(adata, "mpme", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "mpme")
    assert adata.uns["mpme"]["pseudotime_order"] == "tree"


def test_a_neighbour_count_stored_as_an_array_by_older_scanpy_is_read():
    adata = _fitted(n_cells=300, n_fates=2)
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    expected = adata.obs["rpg_pseudotime"].to_numpy()
    adata.uns["neighbors"]["params"]["n_neighbors"] = np.array([15])
    sks.tl.pseudotime(adata, "rpg", order="diffusion")
    np.testing.assert_array_equal(adata.obs["rpg_pseudotime"].to_numpy(), expected)
