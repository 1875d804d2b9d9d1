"""tl adapters: schema, h5ad round trip, reproducibility, bad input."""

import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse

import scskeleton as sks


def _small(n_cells=300, **kwargs):
    adata = sks.datasets.branching(n_cells, n_leaves=2, random_state=1, **kwargs)
    sc.pp.pca(adata, n_comps=10)
    return adata


def _snapshot(adata):
    """Everything a tool could write, for checking that failures leave adata alone."""
    return (
        list(adata.obs.columns),
        sorted(adata.obsm.keys()),
        sorted(adata.obsp.keys()),
        sorted(adata.uns.keys()),
        {k: sorted(v) for k, v in adata.uns.items() if isinstance(v, dict)},
        np.asarray(adata.obsm["X_pca"]).copy() if "X_pca" in adata.obsm else None,
    )


def _assert_same(left, right):
    """Recursive equality for values that may be arrays, sparse matrices or dicts."""
    if isinstance(left, dict):
        assert sorted(left) == sorted(right)
        for key in left:
            _assert_same(left[key], right[key])
    elif sparse.issparse(left):
        assert sparse.issparse(right) and left.shape == right.shape
        np.testing.assert_array_equal(left.toarray(), right.toarray())
    elif isinstance(left, (np.ndarray, list)):
        np.testing.assert_array_equal(np.asarray(left), np.asarray(right))
    else:
        assert left == right


def test_ddrtree_writes_the_schema():
    adata = _small()
    sks.tl.ddrtree(adata)
    entry = adata.uns["ddrtree"]
    K = entry["nodes"].shape[0]
    assert entry["method"] == "ddrtree" and entry["space"] == "X_ddrtree"
    # a 10-dimensional representation is used whole (default n_components)
    assert adata.obsm["X_ddrtree"].shape == (adata.n_obs, 10) == (adata.n_obs, entry["params"]["n_components"])
    assert adata.obsm["ddrtree_assignment"].shape == (adata.n_obs, K)
    np.testing.assert_allclose(np.asarray(adata.obsm["ddrtree_assignment"].sum(1)).ravel(), 1.0)
    assert sparse.isspmatrix_csr(entry["adjacency"]) and (entry["adjacency"] != entry["adjacency"].T).nnz == 0
    assert entry["projection"].shape == (10, 10)
    assert entry["objective"].shape == (entry["n_iter"],)
    params = entry["params"]
    assert params["n_centers"] == K and params["lam"] == 0.25 * adata.n_obs and params["random_state"] == 0
    assert all(value is not None for value in params.values())
    assert "version" in params


def test_every_output_survives_h5ad(tmp_path, branching_fitted):
    adata = branching_fitted.copy()
    path = tmp_path / "fitted.h5ad"
    adata.write_h5ad(path)
    back = anndata.read_h5ad(path)
    _assert_same(dict(adata.uns["ddrtree"]), dict(back.uns["ddrtree"]))
    for key in ("X_ddrtree", "ddrtree_assignment"):
        _assert_same(adata.obsm[key], back.obsm[key])
    pd.testing.assert_series_equal(adata.obs["ddrtree_pseudotime"], back.obs["ddrtree_pseudotime"])
    pd.testing.assert_series_equal(adata.obs["ddrtree_segment"], back.obs["ddrtree_segment"])
    # the trajectory tools work on the reloaded object and give the same answer
    sks.tl.pseudotime(back, "ddrtree")
    np.testing.assert_array_equal(back.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"])


def test_same_random_state_same_result_and_copy():
    first, second = _small(), _small()
    sks.tl.ddrtree(first, random_state=3)
    returned = sks.tl.ddrtree(second, random_state=3, copy=True)
    assert "ddrtree" not in second.uns  # copy=True leaves the input alone
    _assert_same(dict(first.uns["ddrtree"]), dict(returned.uns["ddrtree"]))
    np.testing.assert_array_equal(first.obsm["X_ddrtree"], returned.obsm["X_ddrtree"])


def test_key_added_and_refit_clears_stale_trajectory():
    adata = _small()
    sks.tl.ddrtree(adata, key_added="tree2", n_components=3)
    assert "X_tree2" in adata.obsm and adata.uns["tree2"]["space"] == "X_tree2"
    sks.tl.root(adata, "tree2", node=0)
    sks.tl.pseudotime(adata, "tree2")
    sks.tl.ddrtree(adata, key_added="tree2")
    assert "tree2_pseudotime" not in adata.obs and "root" not in adata.uns["tree2"]


def test_ddrtree_places_cells_along_the_edges_not_at_their_centers():
    """The quantization term pulls DDRTree's Z onto the centers (a cell keeps 1/(1 + gamma) of its
    own offset), so cells placed by Z share their center's pseudotime: on a noisy curve the cells of
    one center spanned a quarter of an edge. Placed by their own coordinates YW they spread over the
    edges around their center, and pseudotime resolves the order within a center."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        t = rng.uniform(0.0, 1.0, 1500)
        curve = 3 * np.column_stack([np.cos(np.pi * t), np.sin(np.pi * t), t, np.zeros((t.size, 7))])
        adata = anndata.AnnData(curve + 0.1 * rng.standard_normal(curve.shape))
        adata.obs["t"] = t
        sks.tl.ddrtree(adata, use_rep="X")
        sks.tl.root(adata, "ddrtree", obs_min="t")
        sks.tl.pseudotime(adata, "ddrtree")
        center = np.asarray(adata.obsm["ddrtree_assignment"].argmax(axis=1)).ravel()
        time = adata.obs["ddrtree_pseudotime"].to_numpy()
        entry = adata.uns["ddrtree"]
        edges = sparse.triu(entry["adjacency"]).tocoo()
        edge_length = np.median(np.linalg.norm(entry["nodes"][edges.row] - entry["nodes"][edges.col], axis=1))
        spans = [np.ptp(time[center == k]) for k in np.unique(center) if np.sum(center == k) >= 10]
        assert np.median(spans) / edge_length > 0.6  # from Z: 0.25-0.27


def test_sparse_integer_x_and_duplicated_cells_work():
    adata = _small(200)
    counts = np.rint(np.abs(adata.X) * 10).astype(np.int64)
    counts[1] = counts[0]  # a duplicated cell
    adata.X = sparse.csr_matrix(counts)
    sks.tl.ddrtree(adata, use_rep="X", n_components=2)
    assert np.isfinite(adata.obsm["X_ddrtree"]).all()
    np.testing.assert_allclose(adata.obsm["X_ddrtree"][0], adata.obsm["X_ddrtree"][1])


def _with_nan(adata):
    adata.obsm["X_pca"][3, 1] = np.nan


def _with_inf(adata):
    adata.obsm["X_pca"][0, 0] = np.inf


@pytest.mark.parametrize(
    "mutate, kwargs, error, fragment",
    [
        (_with_nan, {}, ValueError, "NaN"),
        (_with_inf, {}, ValueError, "infinite"),
        (None, dict(use_rep="X_umap"), KeyError, "X_umap"),
        (lambda a: a.obsm.pop("X_pca"), {}, KeyError, "sc.pp.pca"),
        (None, dict(n_centers=10_000), ValueError, "n_centers"),
        (None, dict(n_centers=1), ValueError, "n_centers"),
        (None, dict(sigma=0), ValueError, "sigma"),
        (None, dict(sigma=-1.0), ValueError, "sigma"),
        (None, dict(gamma=0), ValueError, "gamma"),
        (None, dict(n_components=11), ValueError, "n_components"),
        (None, dict(n_pcs=50), ValueError, "n_pcs"),
        (None, dict(random_state=-1), ValueError, "random_state"),
        (None, dict(key_added=""), ValueError, "key_added"),
    ],
)
def test_bad_input_is_rejected_and_adata_untouched(mutate, kwargs, error, fragment):
    adata = _small(120)
    if mutate is not None:
        mutate(adata)
    before = _snapshot(adata)
    with pytest.raises(error, match=fragment):
        sks.tl.ddrtree(adata, **kwargs)
    after = _snapshot(adata)
    assert before[:5] == after[:5]
    if before[5] is not None:
        np.testing.assert_array_equal(before[5], after[5])


def test_too_few_cells():
    adata = anndata.AnnData(np.arange(4.0).reshape(2, 2))
    with pytest.raises(ValueError, match="at least 3 cells"):
        sks.tl.ddrtree(adata, use_rep="X")


def test_root_options(branching_fitted):
    adata = branching_fitted.copy()
    leaves = set(adata.uns["ddrtree"]["leaves"].tolist())
    sks.tl.root(adata, "ddrtree", group=("true_branch", "trunk"))
    by_group = adata.uns["ddrtree"]["root"]
    assert by_group in leaves
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    assert adata.uns["ddrtree"]["root"] == by_group
    # the latest cells are spread over several tips: no leaf is theirs, so the medoid is used
    sks.tl.root(adata, "ddrtree", obs_max="true_pseudotime")
    assert adata.uns["ddrtree"]["root"] != by_group
    sks.tl.root(adata, "ddrtree", obs_min="feature_0")  # a gene works too
    sks.tl.root(adata, "ddrtree", node=5)
    assert adata.uns["ddrtree"]["root"] == 5
    first_cell = adata.obs_names[0]
    sks.tl.root(adata, "ddrtree", cell=first_cell)
    R = adata.obsm["ddrtree_assignment"]
    assert adata.uns["ddrtree"]["root"] == int(np.asarray(R[0].todense()).argmax())


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({}, ValueError, "exactly one"),
        (dict(node=1, cell=0), ValueError, "exactly one"),
        (dict(node=10_000), ValueError, "node"),
        (dict(cell="no-such-cell"), KeyError, "no-such-cell"),
        (dict(group=("missing", "x")), KeyError, "missing"),
        (dict(group=("true_branch", "nope")), ValueError, "No cell"),
        (dict(group="trunk"), ValueError, "obs_key, value"),
        (dict(obs_min="nothing"), KeyError, "nothing"),
        (dict(obs_min="true_branch"), ValueError, "numeric"),
    ],
)
def test_bad_root_requests(branching_fitted, kwargs, error, fragment):
    adata = branching_fitted.copy()
    before = adata.uns["ddrtree"]["root"]
    with pytest.raises(error, match=fragment):
        sks.tl.root(adata, "ddrtree", **kwargs)
    assert adata.uns["ddrtree"]["root"] == before


def test_pseudotime_needs_a_root_and_a_graph():
    adata = _small(150)
    with pytest.raises(KeyError, match="tl.ddrtree"):
        sks.tl.pseudotime(adata, "ddrtree")
    sks.tl.ddrtree(adata)
    with pytest.raises(KeyError, match="tl.root"):
        sks.tl.pseudotime(adata, "ddrtree")
    assert "ddrtree_pseudotime" not in adata.obs


def test_pseudotime_fields(branching_fitted):
    adata = branching_fitted
    entry = adata.uns["ddrtree"]
    times = adata.obs["ddrtree_pseudotime"]
    assert times.min() == 0.0 and np.isfinite(times).all()
    assert isinstance(adata.obs["ddrtree_segment"].dtype, pd.CategoricalDtype)
    assert sorted(entry["segments"], key=int) == list(adata.obs["ddrtree_segment"].cat.categories)
    assert entry["segments"]["0"][0] == entry["root"]
    degree = np.diff(entry["adjacency"].indptr)
    assert set(entry["leaves"]) <= set(np.flatnonzero(degree == 1))
    assert set(entry["branch_points"]) <= set(np.flatnonzero(degree >= 3))


def test_path_between_nodes_and_groups(branching_fitted):
    adata = branching_fitted
    entry = adata.uns["ddrtree"]
    leaf = int([x for x in entry["leaves"] if x != entry["root"]][0])
    frame = sks.tl.path(adata, "ddrtree", int(entry["root"]), leaf)
    assert list(frame.columns) == ["position", "node", "pseudotime"]
    assert frame["position"].is_monotonic_increasing
    # along a path from the root, position and pseudotime agree
    np.testing.assert_allclose(frame["position"], frame["pseudotime"], atol=1e-9)
    by_group = sks.tl.path(adata, "ddrtree", ("true_branch", "trunk"), ("true_branch", "branch_1"))
    assert by_group["position"].is_monotonic_increasing and len(by_group) > 0
    with pytest.raises(ValueError, match="node"):
        sks.tl.path(adata, "ddrtree", -1, leaf)
