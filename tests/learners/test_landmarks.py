"""``n_landmarks=`` of the dense cell-level learners: fit on k-means landmarks, write a node graph.

Timings at 50,000 and 10⁶ cells are measured by ``benchmarks/landmarks.py``, never here.
"""

import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse
from scipy.sparse import csgraph
from scipy.stats import spearmanr

import scskeleton as sks
import scskeleton.tl.learners.landmarks as landmarks_adapter
import scskeleton.tl.learners.mpme as mpme_adapter
from scskeleton._core.cellgraphs import landmarks as core

LEARNERS = ("mpme", "spl", "esl", "fsl", "convex_embedding")


@pytest.fixture(scope="module")
def branching_20k():
    adata = sks.datasets.branching(20_000, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    return adata


@pytest.fixture(scope="module")
def simulated_6k():
    adata = sks.datasets.simulate_trajectory(6_000, n_fates=3, random_state=1)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    return adata


def _trajectory(adata, key):
    sks.tl.root(adata, key, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, key)
    times = adata.obs[f"{key}_pseudotime"]
    assert times.notna().all()
    return len(adata.uns[key]["branch_points"]), spearmanr(times, adata.obs["true_pseudotime"])[0]


@pytest.mark.parametrize("method", ["mpme", "esl"])
def test_landmarks_recover_a_generated_tree(branching_20k, method):
    adata = branching_20k.copy()
    getattr(sks.tl, method)(adata, n_landmarks=300)
    entry = adata.uns[method]
    n_nodes = entry["nodes"].shape[0]
    # the node graph of the shared schema, in the fitted representation
    assert entry["space"] == "X_pca" and entry["nodes"].shape == (n_nodes, 10)
    assert sparse.issparse(entry["adjacency"]) and entry["adjacency"].shape == (n_nodes, n_nodes)
    assert entry["connectivities"].shape == (n_nodes, n_nodes) and entry["embedding"].shape == (n_nodes, 2)
    assert entry["params"]["n_landmarks"] == 300 and n_nodes <= 300
    assignment = adata.obsm[f"{method}_assignment"]
    assert assignment.shape == (adata.n_obs, n_nodes)
    np.testing.assert_allclose(np.asarray(assignment.sum(axis=1)).ravel(), 1.0)
    np.testing.assert_allclose(adata.obsm[f"X_{method}"], assignment @ entry["embedding"])
    assert f"{method}_connectivities" not in adata.obsp
    branch_points, rho = _trajectory(adata, method)
    assert branch_points == 2 and rho >= 0.97
    sks.pl.tree(adata, method, color=f"{method}_pseudotime", show=False)
    sks.pl.tree(adata, method, basis=f"X_{method}", show=False)
    with pytest.raises(KeyError, match="pl.tree"):
        sks.pl.cell_graph(adata, method, show=False)


@pytest.mark.parametrize(("method", "n_landmarks"), [("mpme", 300), ("esl", 600)])
def test_landmarks_recover_a_simulated_tree(simulated_6k, method, n_landmarks):
    """ESL learns which landmarks to join and may leave a thinly sampled stretch unjoined: on 300
    landmarks of these 6,000 cells its graph fell into two pieces for 2 of 5 landmark seeds (and on one
    CPU for the default seed, whose k-means there differs in the last bits), on 600 for none of 5."""
    adata = simulated_6k.copy()
    getattr(sks.tl, method)(adata, n_landmarks=n_landmarks)
    branch_points, rho = _trajectory(adata, method)
    assert branch_points == 2 and rho >= 0.97


@pytest.mark.parametrize("method", ["spl", "convex_embedding"])
def test_spl_and_convex_embedding_give_the_tree(method):
    adata = sks.datasets.branching(3_000, n_leaves=3, random_state=2)
    sc.pp.pca(adata, n_comps=10)
    getattr(sks.tl, method)(adata, n_landmarks=150)
    branch_points, rho = _trajectory(adata, method)
    assert branch_points == 2 and rho >= 0.97


def test_fsl_landmarks_select_the_genes_and_split_the_moons():
    adata = sks.datasets.noisy_moons(3_000, random_state=0)
    sks.tl.fsl(adata, n_features=2, n_landmarks=150)
    assert sorted(adata.var_names[adata.var["fsl_selected"]]) == ["x", "y"]
    entry = adata.uns["fsl"]
    assert entry["space"] == "X_fsl" and entry["nodes"].shape[1] == 2 and "embedding" not in entry
    # one component of the skeleton per moon, each cell in its own moon's
    _, component = csgraph.connected_components(entry["adjacency"], directed=False)
    nearest = np.asarray(adata.obsm["fsl_assignment"].argmax(axis=1)).ravel()
    table = pd.crosstab(adata.obs["true_component"], component[nearest])
    assert table.shape == (2, 2) and (table.values.max(axis=1) == table.values.sum(axis=1)).all()
    sks.tl.root(adata, "fsl", obs_min="true_angle", per_component=True)
    sks.tl.pseudotime(adata, "fsl")
    assert adata.obs["fsl_pseudotime"].notna().all()


def test_a_ring_stays_a_ring():
    adata = sks.datasets.circle(4_000, random_state=0)
    sks.tl.mpme(adata, n_landmarks=250)
    entry = adata.uns["mpme"]
    assert entry["n_loops"] == 1
    degree = np.diff(entry["adjacency"].indptr)
    assert (degree == 2).all()  # a single cycle: no tips, no forks
    sks.tl.root(adata, "mpme", obs_min="true_angle")
    sks.tl.pseudotime(adata, "mpme")
    assert adata.obs["mpme_pseudotime"].notna().all() and len(adata.uns["mpme"]["branch_points"]) == 0


def test_esl_components_are_laid_side_by_side():
    adata = sks.datasets.line_and_circle(3_000, 3_000, random_state=0)
    sks.tl.esl(adata, n_landmarks=300)
    entry = adata.uns["esl"]
    assert entry["n_structures"] == 2
    table = pd.crosstab(adata.obs["true_component"], adata.obs["esl_component"])
    assert (table.values.max(axis=1) == table.values.sum(axis=1)).all()  # each structure one component
    coords = adata.obsm["X_esl"][:, 0]
    first, second = (adata.obs["esl_component"] == c for c in ("0", "1"))
    assert coords[first].max() < coords[second].min() or coords[second].max() < coords[first].min()
    sks.tl.root(adata, "esl", obs_min="true_position", per_component=True)
    sks.tl.pseudotime(adata, "esl")
    assert adata.obs["esl_pseudotime"].notna().all()


def test_default_switches_to_landmarks_above_the_dense_limit(monkeypatch):
    messages = []
    monkeypatch.setattr(landmarks_adapter.logg, "info", lambda message, *a, **k: messages.append(message))
    monkeypatch.setattr(mpme_adapter, "MAX_DENSE_POINTS", 300)
    monkeypatch.setattr(mpme_adapter, "DEFAULT_LANDMARKS", 100)
    adata = sks.datasets.branching(400, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    sks.tl.mpme(adata)
    assert adata.uns["mpme"]["params"]["n_landmarks"] == 100 and "nodes" in adata.uns["mpme"]
    assert any("fitted on 100 k-means landmarks" in m for m in messages)
    small = adata[:300].copy()
    sks.tl.mpme(small)  # at the limit: every cell, a cell graph, as before
    assert "mpme_connectivities" in small.obsp and "nodes" not in small.uns["mpme"]


def test_same_seed_same_result_and_h5ad_round_trip(tmp_path):
    adata = sks.datasets.branching(3_000, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    first, again, other = adata.copy(), adata.copy(), adata.copy()
    for fitted, seed in ((first, 3), (again, 3), (other, 4)):
        sks.tl.esl(fitted, n_landmarks=120, random_state=seed)
    for field in ("nodes", "embedding"):
        np.testing.assert_array_equal(first.uns["esl"][field], again.uns["esl"][field])
    assert (first.uns["esl"]["adjacency"] != again.uns["esl"]["adjacency"]).nnz == 0
    np.testing.assert_array_equal(first.obsm["X_esl"], again.obsm["X_esl"])
    assert (sparse.csr_matrix(first.obsm["esl_assignment"]) != sparse.csr_matrix(again.obsm["esl_assignment"])).nnz == 0
    assert first.uns["esl"]["nodes"].shape != other.uns["esl"]["nodes"].shape or not np.array_equal(
        first.uns["esl"]["nodes"], other.uns["esl"]["nodes"])

    sks.tl.root(first, "esl", obs_min="true_pseudotime")
    sks.tl.pseudotime(first, "esl")
    first.write_h5ad(tmp_path / "esl.h5ad")
    back = anndata.read_h5ad(tmp_path / "esl.h5ad")
    for field in ("nodes", "embedding", "objective"):
        np.testing.assert_array_equal(back.uns["esl"][field], first.uns["esl"][field])
    for field in ("adjacency", "connectivities"):
        assert (sparse.csr_matrix(back.uns["esl"][field]) != first.uns["esl"][field]).nnz == 0
    assert back.uns["esl"]["params"] == first.uns["esl"]["params"]
    sks.tl.pseudotime(back, "esl")
    np.testing.assert_array_equal(back.obs["esl_pseudotime"], first.obs["esl_pseudotime"])


@pytest.mark.parametrize("method", LEARNERS)
@pytest.mark.parametrize("bad", [0, -5, 401, 2.5, "100", True])
def test_bad_n_landmarks_raises_and_leaves_adata_unchanged(method, bad):
    adata = sks.datasets.branching(400, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    before = (set(adata.uns), set(adata.obsm), set(adata.obsp), list(adata.obs.columns), list(adata.var.columns))
    with pytest.raises(ValueError, match="n_landmarks"):
        getattr(sks.tl, method)(adata, n_landmarks=bad)
    assert before == (set(adata.uns), set(adata.obsm), set(adata.obsp), list(adata.obs.columns),
                      list(adata.var.columns))


def test_n_landmarks_above_the_dense_limit_is_refused():
    with pytest.raises(ValueError, match="n_landmarks must be between 3 and 5000"):
        core.resolve_n_landmarks(6_000, 10_000, limit=5_000, default=1_000)
    assert core.resolve_n_landmarks(None, 5_000, limit=5_000, default=1_000) is None
    assert core.resolve_n_landmarks(None, 5_001, limit=5_000, default=1_000) == 1_000
    assert core.resolve_n_landmarks(None, 5_001, limit=500, default=1_000) == 500


def test_refit_under_the_same_key_replaces_the_cell_graph():
    adata = sks.datasets.branching(600, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    sks.tl.mpme(adata)
    assert "mpme_connectivities" in adata.obsp
    sks.tl.mpme(adata, n_landmarks=80)
    assert "mpme_connectivities" not in adata.obsp and "nodes" in adata.uns["mpme"]
    sks.tl.mpme(adata)
    assert "mpme_connectivities" in adata.obsp and "nodes" not in adata.uns["mpme"]
    assert "mpme_assignment" not in adata.obsm


@pytest.mark.parametrize("method", ["mpme", "esl"])
def test_defaults_recover_a_50k_cell_tree_through_landmarks(method):
    # the acceptance size, with every default: above the dense limit the learner switches to landmarks
    adata = sks.datasets.branching(50_000, n_leaves=3, random_state=2)
    sc.pp.pca(adata, n_comps=10)
    getattr(sks.tl, method)(adata)
    assert adata.uns[method]["params"]["n_landmarks"] == 1_000
    branch_points, rho = _trajectory(adata, method)
    assert branch_points == 2 and rho >= 0.97
