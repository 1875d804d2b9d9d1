"""tl.rpg / tl.rpg_l1: recovered shapes, schema, trajectories, bad input."""

import anndata
import numpy as np
import pytest
import scanpy as sc
from matplotlib.collections import LineCollection
from scipy import sparse
from scipy.sparse import csgraph
from scipy.stats import spearmanr

import scskeleton as sks
from scskeleton._testing import distinct_colours, winding_numbers


def _components(adata, key):
    return csgraph.connected_components(adata.uns[key]["adjacency"], directed=False)[0]


def _winds_around_origin(adata, key):
    """Whether some cycle of the graph goes once around the origin."""
    turns = winding_numbers(adata.uns[key]["adjacency"], adata.uns[key]["nodes"], centre=np.zeros(2))
    return bool(np.any(np.abs(turns) == 1))


def _edge_set(segments):
    """Segments (E × 2 × 2) as rows (x₀, y₀, x₁, y₁), each with its smaller end first, sorted:
    the same rows for the same edges whichever end was drawn first."""
    rows = np.array([sum(sorted(map(tuple, segment)), ()) for segment in np.asarray(segments, dtype=float)])
    return rows[np.lexsort(rows.T[::-1])]


def test_circle_l1_graph_has_the_loop_and_the_tree_does_not():
    adata = sks.datasets.circle(100, random_state=0)
    sks.tl.rpg_l1(adata)
    sks.tl.rpg(adata)
    assert _winds_around_origin(adata, "rpg_l1")
    tree = adata.uns["rpg"]["adjacency"]
    assert tree.nnz // 2 == tree.shape[0] - 1 and _components(adata, "rpg") == 1  # acyclic


@pytest.mark.parametrize("shape, n_components", [("moons", 2), ("three_clusters", 3)])
def test_l1_graph_separates_components(shape, n_components):
    adata = getattr(sks.datasets, shape)(random_state=0)
    sks.tl.rpg_l1(adata)
    assert _components(adata, "rpg_l1") == n_components
    # each learned component is (almost) one true component; the generator's few
    # bridge points sit between clusters and may join either side
    label = adata.obs["true_component"].to_numpy()
    _, node_component = csgraph.connected_components(adata.uns["rpg_l1"]["adjacency"], directed=False)
    cell_component = node_component[np.asarray(adata.obsm["rpg_l1_assignment"].argmax(axis=1)).ravel()]
    for part in np.unique(cell_component):
        _, counts = np.unique(label[cell_component == part], return_counts=True)
        assert counts.max() >= 0.97 * counts.sum()


@pytest.mark.parametrize("shape", ["distorted_s", "spiral"])
def test_curves_give_a_single_path(shape):
    adata = getattr(sks.datasets, shape)(random_state=0)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_position")
    sks.tl.pseudotime(adata, "rpg")
    assert len(adata.uns["rpg"]["branch_points"]) == 0
    assert spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_position"])[0] >= 0.95


@pytest.mark.parametrize("n_leaves", [2, 3])
def test_principal_tree_recovers_branching(n_leaves):
    adata = sks.datasets.branching(600, n_leaves=n_leaves, random_state=0)
    sc.pp.pca(adata, n_comps=20)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "rpg")
    assert len(adata.uns["rpg"]["branch_points"]) == n_leaves - 1
    assert spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_pseudotime"])[0] >= 0.95


def test_default_bandwidth_stays_below_the_collapse_of_a_thick_cloud():
    """Three arms 5 noise widths long in 30 noisy dimensions (a low-depth fork): k-means landmarks
    stand as far apart as the cloud is wide, and the nearest-node rule alone puts sigma above the
    critical bandwidth 2 λ_max, where every node sits at the mean. The default must unfold the tree."""
    from scskeleton._core.trees.assign import kmeans, squared_distances
    from scskeleton._core.trees.rpg import default_n_nodes, rpg

    rng = np.random.default_rng(0)
    n_points, n_dims = 1500, 30
    along, arm = rng.uniform(0, 1, n_points), rng.integers(0, 3, n_points)
    data = 5 * along[:, None] * np.eye(n_dims)[arm] + rng.normal(size=(n_points, n_dims))
    largest = np.linalg.eigvalsh(np.cov(data.T)).max()

    landmarks = kmeans(data, default_n_nodes(n_points), random_state=0)
    nearest = squared_distances(landmarks, landmarks)
    np.fill_diagonal(nearest, np.inf)
    median_rule = float(np.median(nearest.min(axis=1)))
    assert median_rule > 2 * largest  # the case the cap is for

    def node_spread(sigma):
        fit = rpg(data, sigma=sigma, prune=False)
        return np.linalg.eigvalsh(np.cov(fit.centers.T)).max(), fit.sigma

    collapsed, _ = node_spread(median_rule)
    spread, sigma = node_spread(None)
    assert collapsed < 0.01 * largest
    assert sigma < largest and spread > 0.5 * largest  # a quarter-ish of the critical 2 λ_max


def test_landmarks_schema_and_round_trip(tmp_path):
    adata = sks.datasets.three_clusters(300, random_state=1)
    sks.tl.rpg_l1(adata, n_nodes=60, key_added="graph")
    entry = adata.uns["graph"]
    assert entry["method"] == "rpg_l1" and entry["space"] == "X_pca"
    kept = entry["nodes"].shape[0]  # the pruning drops the stubs of each cluster's graph
    assert kept < 60 and entry["n_pruned"] > 0
    assert adata.obsm["graph_assignment"].shape == (300, kept) and entry["adjacency"].shape == (kept, kept)
    assert entry["lp_adjacency"].shape == (kept, kept)
    np.testing.assert_allclose(np.asarray(adata.obsm["graph_assignment"].sum(axis=1)).ravel(), 1.0)
    assert entry["params"]["n_nodes"] == 60 and entry["params"]["sigma"] > 0 and entry["params"]["prune"]
    unpruned = sks.tl.rpg_l1(adata, n_nodes=60, prune=False, copy=True).uns["rpg_l1"]
    assert unpruned["nodes"].shape == (60, 2) and unpruned["n_pruned"] == 0
    sks.tl.root(adata, "graph", group=("true_component", "0"))
    sks.tl.pseudotime(adata, "graph")
    times = adata.obs["graph_pseudotime"]
    assert times.isna().any() and times.notna().any()  # other components have no root

    adata.write_h5ad(tmp_path / "graph.h5ad")
    back = anndata.read_h5ad(tmp_path / "graph.h5ad")
    np.testing.assert_array_equal(back.uns["graph"]["nodes"], entry["nodes"])
    assert (back.uns["graph"]["adjacency"] != entry["adjacency"]).nnz == 0
    np.testing.assert_array_equal(back.obs["graph_pseudotime"], times)
    assert back.uns["graph"]["params"] == dict(entry["params"])


def test_a_root_in_every_component_gives_pseudotime_everywhere(tmp_path):
    adata = sks.datasets.moons(random_state=0)
    sks.tl.rpg_l1(adata)
    sks.tl.root(adata, "rpg_l1", obs_min="true_angle", per_component=True)
    roots = np.atleast_1d(adata.uns["rpg_l1"]["root"])
    assert roots.size == _components(adata, "rpg_l1") == 2
    sks.tl.pseudotime(adata, "rpg_l1")
    times = adata.obs["rpg_l1_pseudotime"]
    assert times.notna().all()
    for moon in ("0", "1"):  # each moon is timed from its own start
        cells = (adata.obs["true_component"] == moon).to_numpy()
        assert spearmanr(times[cells], adata.obs["true_angle"][cells])[0] >= 0.95

    adata.write_h5ad(tmp_path / "moons.h5ad")
    back = anndata.read_h5ad(tmp_path / "moons.h5ad")
    np.testing.assert_array_equal(np.atleast_1d(back.uns["rpg_l1"]["root"]), roots)
    sks.tl.pseudotime(back, "rpg_l1")
    np.testing.assert_array_equal(back.obs["rpg_l1_pseudotime"], times)
    sks.pl.tree(back, "rpg_l1", show=False)

    _, component = csgraph.connected_components(adata.uns["rpg_l1"]["adjacency"], directed=False)
    same = np.flatnonzero(component == component[roots[0]])[:2]
    with pytest.raises(ValueError, match="same connected component"):
        sks.tl.root(adata, "rpg_l1", node=same.tolist())
    with pytest.raises(ValueError, match="per_component"):
        sks.tl.root(adata, "rpg_l1", node=int(roots[0]), per_component=True)
    np.testing.assert_array_equal(np.atleast_1d(adata.uns["rpg_l1"]["root"]), roots)
    sks.tl.root(adata, "rpg_l1", node=roots.tolist())
    np.testing.assert_array_equal(adata.uns["rpg_l1"]["root"], roots)


@pytest.mark.parametrize("method", ["rpg", "rpg_l1"])
def test_same_random_state_same_result(method):
    # the ℓ1 graph's interior-point solves included: bit-identical, not merely close
    first, second = sks.datasets.moons(300), sks.datasets.moons(300)
    getattr(sks.tl, method)(first, n_nodes=80, random_state=5)
    getattr(sks.tl, method)(second, n_nodes=80, random_state=5)
    np.testing.assert_array_equal(first.uns[method]["nodes"], second.uns[method]["nodes"])
    np.testing.assert_array_equal(first.uns[method]["objective"], second.uns[method]["objective"])
    assert (first.uns[method]["adjacency"] != second.uns[method]["adjacency"]).nnz == 0
    if method == "rpg_l1":
        assert (first.uns[method]["lp_adjacency"] != second.uns[method]["lp_adjacency"]).nnz == 0


def test_plots_work_on_principal_graphs(tmp_path):
    adata = sks.datasets.circle(80)
    sks.tl.rpg_l1(adata)
    entry = adata.uns["rpg_l1"]
    ax = sks.pl.tree(adata, "rpg_l1", show=False)
    # the drawing is the learned graph: one segment per edge, between the stored nodes
    drawn = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "scskeleton_edges"]
    assert len(drawn) == 1
    segments = np.stack(drawn[0].get_segments())
    upper = sparse.triu(entry["adjacency"], k=1).tocoo()
    expected = np.stack([entry["nodes"][upper.row, :2], entry["nodes"][upper.col, :2]], axis=1)
    assert segments.shape == expected.shape
    np.testing.assert_allclose(_edge_set(segments), _edge_set(expected))
    line = sks.pl.convergence(adata, "rpg_l1", show=False).get_lines()[0]
    np.testing.assert_allclose(line.get_ydata(), entry["objective"])
    sks.pl.tree(adata, "rpg_l1", save=tmp_path / "graph.png", show=False)
    sks.pl.convergence(adata, "rpg_l1", save=tmp_path / "objective.png", show=False)
    assert distinct_colours(tmp_path / "graph.png") > 20 and distinct_colours(tmp_path / "objective.png") > 20


def test_use_rep_x_works():
    adata = sks.datasets.spiral(200, random_state=0)
    # X_pca, the default representation, is noise here: only a fit on X can follow the spiral
    adata.obsm["X_pca"] = np.random.default_rng(0).normal(size=adata.obsm["X_pca"].shape)
    sks.tl.rpg(adata, use_rep="X")
    sks.tl.root(adata, "rpg", obs_min="true_position")
    sks.tl.pseudotime(adata, "rpg")
    assert adata.uns["rpg"]["space"] == "X" and adata.obs["rpg_pseudotime"].notna().all()
    assert adata.uns["rpg"]["nodes"].shape[1] == adata.n_vars
    assert len(adata.uns["rpg"]["branch_points"]) == 0
    assert spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_position"])[0] >= 0.95


@pytest.mark.parametrize("n_cells, expected", [(8, 7), (11, 10), (300, 10)])
def test_l1_graph_defaults_fit_a_handful_of_cells(n_cells, expected):
    # the default of 10 candidate neighbours needs 11 nodes; fewer nodes take K - 1, as tl.rpg accepts them
    adata = sks.datasets.circle(n_cells, random_state=0)
    sks.tl.rpg_l1(adata)
    assert adata.uns["rpg_l1"]["params"]["n_neighbors"] == expected
    with pytest.raises(ValueError, match="n_neighbors"):
        sks.tl.rpg_l1(adata, n_nodes=6, n_neighbors=10)  # an explicit value is checked, not lowered


@pytest.mark.parametrize(
    "function, kwargs, error, fragment",
    [
        (sks.tl.rpg, dict(sigma=0.0), ValueError, "sigma"),
        (sks.tl.rpg, dict(sigma=-1.0), ValueError, "sigma"),
        (sks.tl.rpg, dict(n_nodes=500), ValueError, "n_nodes"),
        (sks.tl.rpg, dict(use_rep="X_umap"), KeyError, "X_umap"),
        (sks.tl.rpg_l1, dict(n_neighbors=80), ValueError, "n_neighbors"),
        (sks.tl.rpg_l1, dict(n_nodes=10, n_neighbors=10), ValueError, "n_neighbors"),
        (sks.tl.rpg_l1, dict(lam=-1.0), ValueError, "lam"),
        (sks.tl.rpg_l1, dict(random_state=1.5), ValueError, "random_state"),
    ],
)
def test_bad_input_leaves_adata_unchanged(function, kwargs, error, fragment):
    adata = sks.datasets.circle(80)
    before = (sorted(adata.uns), sorted(adata.obsm), list(adata.obs.columns))
    with pytest.raises(error, match=fragment):
        function(adata, **kwargs)
    assert (sorted(adata.uns), sorted(adata.obsm), list(adata.obs.columns)) == before


def test_nan_input_rejected():
    adata = sks.datasets.circle(50)
    adata.obsm["X_pca"][4, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sks.tl.rpg_l1(adata)
    assert "rpg_l1" not in adata.uns


def test_failed_program_leaves_adata_unchanged(monkeypatch):
    adata = sks.datasets.circle(50)
    monkeypatch.setattr("scskeleton._core.trees.l1_program.LP_MAX_ITER", 1)
    with pytest.raises(ValueError, match="linear program .* failed: MaxIterations"):
        sks.tl.rpg_l1(adata)
    assert "rpg_l1" not in adata.uns and "rpg_l1_assignment" not in adata.obsm
