"""tl.convex_embedding: Table 1 direction, recovery, schema, round trip, bad input."""

import anndata
import numpy as np
import pytest
from scipy.linalg import orthogonal_procrustes

import scskeleton as sks
from scskeleton._core.convex import regularized as core

MAXITER = 300


def _standardised(adata):
    """The paper's data sets are normalised; with α = 1, γ = 10⁻³ the data kernel's
    eigenvalues are then of the order of (α+β)/γ."""
    points = adata.obsm["X_pca"]
    adata.obsm["X_pca"] = (points - points.mean(axis=0)) / points.std()
    return adata


def _procrustes_r2(embedding, truth):
    """Share of the variance of the true flat coordinates explained by the embedding
    after the best rotation and scaling."""
    a, b = embedding - embedding.mean(axis=0), truth - truth.mean(axis=0)
    rotated = a @ orthogonal_procrustes(a, b)[0]
    scale = np.vdot(rotated, b) / np.vdot(rotated, rotated)
    return 1.0 - np.sum((scale * rotated - b) ** 2) / np.sum(b**2)


@pytest.fixture(scope="module")
def table1():
    """Regularized-MVU loss (29), d = 2, α = 1, β = 0.1, γ = 10⁻³ (Table 1), three regularizers."""
    runs = {}
    for name, data, n_neighbors in [
        ("swiss_roll", sks.datasets.swiss_roll(200, random_state=0), 6),
        ("sine_surface", sks.datasets.sine_surface(150, width=8.0, random_state=0), 10),
    ]:
        adata = _standardised(data)
        for regularizer in ("neg_trace", "completed_square", "biconjugate"):
            sks.tl.convex_embedding(
                adata, loss="mvu", regularizer=regularizer, n_components=2, alpha=1.0, beta=0.1, gamma=1e-3,
                n_neighbors=n_neighbors, maxiter=MAXITER, key_added=regularizer,
            )
        runs[name] = adata
    return runs


@pytest.mark.parametrize("name", ["swiss_roll", "sine_surface"])
def test_new_convex_regularizers_beat_the_mvu_reference(table1, name):
    """Direction of Table 1: both new convex regularizers reach a lower truncated
    reconstruction loss than -tr K̃ (17) under the regularized-MVU loss."""
    adata = table1[name]
    reference = adata.uns["neg_trace"]["reconstruction_loss"]
    assert adata.uns["biconjugate"]["reconstruction_loss"] < reference
    assert adata.uns["completed_square"]["reconstruction_loss"] < reference


def test_sine_surface_is_unfolded(table1):
    adata = table1["sine_surface"]
    for key in ("neg_trace", "biconjugate"):
        assert _procrustes_r2(adata.obsm[f"X_{key}"], adata.obsm["X_true"]) >= 0.95
    # the biconjugate regularizer concentrates K̃ on the top d = 2 eigenvalues
    spectrum = adata.uns["biconjugate"]["eigenvalues"]
    assert spectrum[:2].sum() >= 0.99 * spectrum.sum()


def test_schema_and_h5ad_round_trip(table1, tmp_path):
    adata = table1["sine_surface"]
    entry = adata.uns["biconjugate"]
    assert entry["method"] == "convex_embedding"
    assert entry["params"]["loss"] == "mvu" and entry["params"]["regularizer"] == "biconjugate"
    assert adata.obsm["X_biconjugate"].shape == (adata.n_obs, 2)
    assert entry["eigenvalues"].shape == (adata.n_obs,) and np.all(np.diff(entry["eigenvalues"]) <= 0)
    assert entry["n_iter"] >= len(entry["objective"]) >= 1
    assert np.all(np.diff(entry["objective"]) <= 1e-9 * np.abs(entry["objective"]).max())
    assert entry["reconstruction_loss"] >= 0 and np.isfinite(entry["loss_value"])

    adata.write_h5ad(tmp_path / "convex.h5ad")
    back = anndata.read_h5ad(tmp_path / "convex.h5ad")
    stored = back.uns["biconjugate"]
    np.testing.assert_array_equal(back.obsm["X_biconjugate"], adata.obsm["X_biconjugate"])
    np.testing.assert_array_equal(stored["eigenvalues"], entry["eigenvalues"])
    np.testing.assert_array_equal(stored["objective"], entry["objective"])
    assert stored["params"] == dict(entry["params"])
    assert stored["reconstruction_loss"] == entry["reconstruction_loss"]
    assert bool(stored["converged"]) == bool(entry["converged"]) and int(stored["n_iter"]) == int(entry["n_iter"])


def test_kpca_loss_with_zero_trace_weight_is_pca():
    """L₁ (22) with β = 0: K̃ is the data's centred kernel, truncation gives the PCA scores."""
    adata = sks.datasets.sine_surface(60, random_state=1)
    sks.tl.convex_embedding(adata, loss="kpca", regularizer="trace", beta=0.0, maxiter=20, standardize=False)
    points = adata.obsm["X_pca"] - adata.obsm["X_pca"].mean(axis=0)
    _, singular, axes = np.linalg.svd(points, full_matrices=False)
    scores = points @ axes[:2].T
    embedding = adata.obsm["X_convex_embedding"]
    np.testing.assert_allclose(np.abs(embedding), np.abs(scores), atol=1e-8 * singular[0])
    # ||H(D - D̂)H||² = 4||K - X̂X̂ᵀ||² = 4 Σ_{i>d} σ_i⁴ (Eckart–Young)
    assert adata.uns["convex_embedding"]["reconstruction_loss"] == pytest.approx(4 * np.sum(singular[2:] ** 4), rel=1e-6)


def test_standardized_fit_does_not_depend_on_the_units_of_use_rep():
    small, large = sks.datasets.sine_surface(60, random_state=5), sks.datasets.sine_surface(60, random_state=5)
    large.obsm["X_pca"] = 1000.0 * large.obsm["X_pca"]
    for adata in (small, large):
        sks.tl.convex_embedding(adata, maxiter=40)
    np.testing.assert_allclose(large.obsm["X_convex_embedding"], small.obsm["X_convex_embedding"], rtol=1e-6, atol=1e-8)
    ratio = large.uns["convex_embedding"]["params"]["scale"] / small.uns["convex_embedding"]["params"]["scale"]
    assert ratio == pytest.approx(1000.0)


def test_same_random_state_same_result():
    first, second = sks.datasets.swiss_roll(80, random_state=3), sks.datasets.swiss_roll(80, random_state=3)
    for adata in (first, second):
        sks.tl.convex_embedding(_standardised(adata), n_neighbors=8, maxiter=40, random_state=7)
    np.testing.assert_array_equal(first.obsm["X_convex_embedding"], second.obsm["X_convex_embedding"])
    np.testing.assert_array_equal(first.uns["convex_embedding"]["objective"], second.uns["convex_embedding"]["objective"])


def test_copy_returns_a_new_object_and_leaves_the_input():
    adata = sks.datasets.sine_surface(50, random_state=2)
    result = sks.tl.convex_embedding(adata, loss="squared", regularizer="trace", maxiter=30, copy=True)
    assert "convex_embedding" in result.uns and "convex_embedding" not in adata.uns
    assert "X_convex_embedding" not in adata.obsm


def _fresh():
    return sks.datasets.sine_surface(30, random_state=4)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(loss="tsne"), ValueError, r"Unknown loss 'tsne'; choose one of \['exp_bregman', 'kpca', 'mvu'"),
        (dict(regularizer="nuclear"), ValueError, r"Unknown regularizer 'nuclear'; choose one of \['biconjugate'"),
        (dict(n_components=30), ValueError, "n_components"),
        (dict(n_components=0), ValueError, "n_components"),
        (dict(gamma=0.0), ValueError, "gamma > 0"),
        (dict(alpha=-1.0), ValueError, "alpha"),
        (dict(sigma=0.0, loss="sne"), ValueError, "sigma"),
        (dict(n_neighbors=30), ValueError, "n_neighbors"),
        (dict(use_rep="X_umap"), KeyError, "X_umap"),
        (dict(random_state=-1), ValueError, "random_state"),
        (dict(maxiter=0), ValueError, "maxiter"),
        (dict(standardize="yes"), ValueError, "standardize"),
    ],
)
def test_bad_input_leaves_adata_unchanged(kwargs, error, fragment):
    adata = _fresh()
    before = (sorted(adata.uns), sorted(adata.obsm), list(adata.obs.columns))
    with pytest.raises(error, match=fragment):
        sks.tl.convex_embedding(adata, **kwargs)
    assert (sorted(adata.uns), sorted(adata.obsm), list(adata.obs.columns)) == before


def test_nan_input_rejected():
    adata = _fresh()
    adata.obsm["X_pca"][3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        sks.tl.convex_embedding(adata)
    assert "convex_embedding" not in adata.uns and "X_convex_embedding" not in adata.obsm


def test_disconnected_neighbourhood_rejected():
    adata = _fresh()
    adata.obsm["X_pca"][:15] += 1000.0
    with pytest.raises(ValueError, match="connected components.*n_neighbors"):
        sks.tl.convex_embedding(adata, n_neighbors=3)
    assert "convex_embedding" not in adata.uns


def test_size_limit_suggests_subsampling_or_landmarks(monkeypatch):
    monkeypatch.setattr(core, "MAX_POINTS", 20)
    adata = _fresh()
    with pytest.raises(ValueError, match=r"at most 20 cells.*sc\.pp\.subsample.*sks\.tl\.rpg"):
        sks.tl.convex_embedding(adata)
    assert "convex_embedding" not in adata.uns


@pytest.mark.parametrize(
    "generator, radius",  # chords short enough that arc and chord agree to < 1 % (curvature ≤ 1/4.7 resp. 2)
    [(sks.datasets.swiss_roll, 1.0), (sks.datasets.sine_surface, 0.2)],
)
def test_manifold_truth_is_an_isometric_unrolling(generator, radius):
    """Near pairs are as far apart on the manifold as in the true flat coordinates."""
    adata = generator(400, random_state=5)
    points, truth = adata.obsm["X_pca"], adata.obsm["X_true"]
    assert points.shape == (400, 3) and adata.X.shape == (400, 3)
    np.testing.assert_array_equal(truth, adata.obs[["true_u", "true_v"]].to_numpy())
    ambient = core.distances_from_data(points)
    flat = core.distances_from_data(truth)
    near = (ambient > 0) & (ambient < radius**2)
    assert near.sum() > 100
    np.testing.assert_allclose(np.sqrt(ambient[near]), np.sqrt(flat[near]), rtol=0.01)
    # a path on the sheet is never shorter than the chord through space (the roll and
    # the waves bring distant parts of the sheet close in 3-D)
    assert np.all(flat >= ambient * (1 - 1e-5))  # up to the trapezoid rule of the sine arc length
    assert np.mean(flat > 2 * ambient) > 0.01


@pytest.mark.parametrize(
    "generator, kwargs, fragment",
    [
        (sks.datasets.swiss_roll, dict(n_cells=2), "n_cells"),
        (sks.datasets.swiss_roll, dict(height=0.0), "height"),
        (sks.datasets.sine_surface, dict(noise=-1.0), "noise"),
        (sks.datasets.sine_surface, dict(n_periods=0.0), "n_periods"),
    ],
)
def test_manifold_generators_reject_bad_parameters(generator, kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        generator(**kwargs)
