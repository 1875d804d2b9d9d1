"""tl.esl / tl.fsl: recovered structures, the paper's experiments, schema, round trips, bad input."""

import anndata
import numpy as np
import pandas as pd
import pytest
from scipy import sparse
from scipy.stats import spearmanr
from sklearn.datasets import load_iris

import scskeleton as sks
from scskeleton._testing import angle_agreement, one_nn_accuracy


@pytest.mark.parametrize("n_centers, seed", [(2, 0), (3, 0), (3, 1), (4, 0), (4, 1), (5, 2)])
def test_esl_finds_one_component_per_blob_at_defaults(n_centers, seed):
    adata = sks.datasets.blobs(300, n_centers=n_centers, random_state=seed)
    sks.tl.esl(adata)
    assert adata.uns["esl"]["n_structures"] == n_centers
    table = pd.crosstab(adata.obs["esl_component"], adata.obs["true_component"]).to_numpy()
    assert np.all((table > 0).sum(axis=1) == 1) and np.all((table > 0).sum(axis=0) == 1)


@pytest.mark.parametrize("offset", [(2.5, 0.0), (0.5, 3.0)])
def test_esl_separates_a_line_and_a_circle_and_keeps_their_shapes(offset):
    adata = sks.datasets.line_and_circle(offset=offset, random_state=0)
    sks.tl.esl(adata, lam=0.7)  # the paper's setting for Fig. 6: u = 30, λ = 0.7
    assert adata.uns["esl"]["n_structures"] == 2
    truth = adata.obs["true_component"].to_numpy()
    learned = adata.obs["esl_component"].to_numpy()
    assert len(set(learned[truth == "line"])) == 1 and len(set(learned[truth == "circle"])) == 1
    assert set(learned[truth == "line"]) != set(learned[truth == "circle"])

    coords = adata.obsm["X_esl"]
    line, circle = truth == "line", truth == "circle"
    # the line stays a line: its first coordinate orders the cells along it
    assert abs(spearmanr(coords[line, 0], adata.obs["true_position"][line])[0]) >= 0.99
    # the circle stays a circle: constant radius, angles follow the true angle (either orientation)
    ring = coords[circle]
    radius = np.linalg.norm(ring, axis=1)
    assert radius.std() / radius.mean() < 0.1
    assert angle_agreement(ring, adata.obs["true_position"].to_numpy()[circle]) >= 0.95
    for component in ("0", "1"):  # each structure centred at the origin
        np.testing.assert_allclose(coords[learned == component].mean(axis=0), 0.0, atol=1e-9)
    sks.pl.cell_graph(adata, "esl", side_by_side=True, color="true_component", show=False)


def test_esl_iris_one_nn_leave_one_out():
    data = load_iris()
    obs = pd.DataFrame({"species": data.target.astype(str)}, index=[f"flower_{i}" for i in range(150)])
    adata = anndata.AnnData(X=data.data, obs=obs)
    adata.obsm["X_pca"] = np.asarray(data.data, dtype=float)
    sks.tl.esl(adata)
    labels = data.target
    components = adata.obs["esl_component"].cat.codes.to_numpy()
    accuracy = one_nn_accuracy(adata.obsm["X_esl"], labels, components)
    assert accuracy >= 0.95  # paper: 0.9600 (tuned); 0.9533 at defaults, 0.9600 at perplexity=20
    # setosa is a structure of its own
    assert pd.crosstab(components, labels).to_numpy()[:, 0].max() == 50


def test_fsl_reproduces_the_two_moon_experiment():
    adata = sks.datasets.noisy_moons()  # 400 cells, 2 true + 1000 uniform noise features (Fig. 9)
    sks.tl.fsl(adata, n_features=2, b=1, lam=10, gamma=100)
    theta = adata.var["fsl_weight"].to_numpy()
    assert set(np.argsort(-theta)[:2]) == {0, 1}
    assert theta[:2].sum() == pytest.approx(1.0, abs=1e-6)
    assert theta[2:].max() < 1e-6
    np.testing.assert_array_equal(adata.var["fsl_selected"], adata.var["informative"])
    objective = adata.uns["fsl"]["objective"]
    assert np.all(np.diff(objective) <= 0)
    # the learned graph joins cells of the same moon
    graph = sparse.triu(adata.obsp["fsl_connectivities"], k=1).tocoo()
    moon = adata.obs["true_component"].to_numpy()
    assert np.mean(moon[graph.row] == moon[graph.col]) > 0.99
    sks.pl.cell_graph(adata, "fsl", color="true_component", show=False)


def _small_moons():
    return sks.datasets.noisy_moons(150, n_noise=100, random_state=3)


def test_esl_schema_round_trip_and_reproducibility(tmp_path):
    adata = sks.datasets.line_and_circle(60, 60, random_state=1)
    first = sks.tl.esl(adata, key_added="shapes", copy=True)
    second = sks.tl.esl(adata, key_added="shapes", copy=True)
    assert "shapes" not in adata.uns  # copy=True leaves the input alone
    np.testing.assert_array_equal(first.obsm["X_shapes"], second.obsm["X_shapes"])
    assert (first.obsp["shapes_connectivities"] != second.obsp["shapes_connectivities"]).nnz == 0

    entry = first.uns["shapes"]
    assert entry["method"] == "esl" and entry["params"]["n_neighbors"] == 119
    assert entry["params"]["lam_total"] == pytest.approx(0.9 * entry["params"]["lam_u"])
    assert entry["eigenvalues"].shape == (entry["n_structures"], 2)
    assert isinstance(first.obs["shapes_component"].dtype, pd.CategoricalDtype)
    assert np.all(np.diff(entry["objective"]) <= 1e-12 * np.abs(entry["objective"][1:]))

    first.write_h5ad(tmp_path / "esl.h5ad")
    back = anndata.read_h5ad(tmp_path / "esl.h5ad")
    np.testing.assert_array_equal(back.obsm["X_shapes"], first.obsm["X_shapes"])
    np.testing.assert_array_equal(back.obs["shapes_component"], first.obs["shapes_component"])
    assert (back.obsp["shapes_connectivities"] != first.obsp["shapes_connectivities"]).nnz == 0
    assert back.uns["shapes"]["params"] == dict(entry["params"])
    np.testing.assert_array_equal(back.uns["shapes"]["eigenvalues"], entry["eigenvalues"])
    sks.pl.cell_graph(back, "shapes", side_by_side=True, show=False)


def test_fsl_schema_round_trip_sparse_input_and_reproducibility(tmp_path):
    adata = _small_moons()
    dense = sks.tl.fsl(adata, n_features=2, copy=True)
    again = sks.tl.fsl(adata, n_features=2, copy=True)
    np.testing.assert_array_equal(dense.var["fsl_weight"], again.var["fsl_weight"])
    np.testing.assert_array_equal(dense.obsm["X_fsl"], again.obsm["X_fsl"])

    as_sparse = adata.copy()
    as_sparse.X = sparse.csr_matrix(as_sparse.X)
    as_sparse.layers["raw"] = as_sparse.X.copy()
    sks.tl.fsl(as_sparse, layer="raw", n_features=2, key_added="genes")
    np.testing.assert_array_equal(as_sparse.var["genes_weight"], dense.var["fsl_weight"])
    assert as_sparse.uns["genes"]["params"]["layer"] == "raw" and as_sparse.uns["genes"]["params"]["b"] == 1.0

    entry = dense.uns["fsl"]
    assert entry["method"] == "fsl" and entry["n_weighted"] == int((dense.var["fsl_weight"] > 0).sum())
    assert dense.var["fsl_selected"].sum() == 2 and dense.obsm["X_fsl"].shape == (150, 2)
    dense.write_h5ad(tmp_path / "fsl.h5ad")
    back = anndata.read_h5ad(tmp_path / "fsl.h5ad")
    np.testing.assert_array_equal(back.var["fsl_weight"], dense.var["fsl_weight"])
    np.testing.assert_array_equal(back.var["fsl_selected"], dense.var["fsl_selected"])
    assert (back.obsp["fsl_connectivities"] != dense.obsp["fsl_connectivities"]).nnz == 0
    assert back.uns["fsl"]["params"] == dict(entry["params"])


def _snapshot(adata):
    return (sorted(adata.obs.columns), sorted(adata.var.columns), sorted(adata.obsm.keys()),
            sorted(adata.obsp.keys()), sorted(adata.uns.keys()))


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"perplexity": 59}, ValueError, "perplexity must be below"),
        ({"lam": 0.0}, ValueError, "lam must be > 0"),
        ({"lam": -1.0}, ValueError, "lam must be > 0"),
        ({"lam": 1.2}, ValueError, r"must lie in \(0, 1\)"),
        ({"n_neighbors": 10}, ValueError, "below n_neighbors"),
        ({"use_rep": "X_umap"}, KeyError, "X_umap"),
        ({"random_state": -1}, ValueError, "random_state"),
    ],
)
def test_esl_bad_input_leaves_adata_unchanged(kwargs, error, match):
    adata = sks.datasets.line_and_circle(30, 30)
    before = _snapshot(adata)
    with pytest.raises(error, match=match):
        sks.tl.esl(adata, **kwargs)
    assert _snapshot(adata) == before


def test_esl_nan_is_refused():
    adata = sks.datasets.line_and_circle(30, 30)
    adata.obsm["X_pca"][4, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sks.tl.esl(adata)
    assert "esl" not in adata.uns


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"b": 103.0}, ValueError, "cannot exceed the number of features"),
        ({"n_features": 103}, ValueError, "n_features"),
        ({"lam": 0.0}, ValueError, "lam must be > 0"),
        ({"gamma": 0.0}, ValueError, "gamma must be > 0"),
        ({"layer": "counts"}, KeyError, "counts"),
    ],
)
def test_fsl_bad_input_leaves_adata_unchanged(kwargs, error, match):
    adata = _small_moons()
    before = _snapshot(adata)
    with pytest.raises(error, match=match):
        sks.tl.fsl(adata, **{"n_features": 2, **kwargs})
    assert _snapshot(adata) == before


def test_fsl_refuses_nan_and_constant_genes():
    adata = _small_moons()
    adata.X[2, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sks.tl.fsl(adata, n_features=2)
    adata = _small_moons()
    adata.X[:, 7] = 0.5
    with pytest.raises(ValueError, match="constant across cells.*noise_6"):
        sks.tl.fsl(adata, n_features=2)
    assert "fsl" not in adata.uns and "fsl_weight" not in adata.var
