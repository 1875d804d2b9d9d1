"""Sub-trajectories, cleanup and mapping new cells (issue 15, items 3 and 5)."""

import anndata
import numpy as np
import pytest
import scanpy as sc
from scipy import sparse
from scipy.stats import spearmanr

import scskeleton as sks

KEY = "ddrtree"


def _trajectory(adata, method):
    """Fit ``method`` on the PCA already in ``adata``, root it at the true start, pseudotime and fates."""
    getattr(sks.tl, method)(adata)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    sks.tl.fate_probabilities(adata, method)
    return adata


@pytest.fixture(scope="module")
def fitted():
    """Expression with one fork, DDRTree rooted at the start, with fates; copy before mutating."""
    adata = sks.datasets.branching_expression(600, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    _trajectory(adata, KEY)
    assert list(adata.uns[KEY]["milestones"]["names"]) == ["root", "fork 1", "tip 1", "tip 2"]
    return adata


# 3. subtrees and cleanup


def test_subset_path_is_a_valid_result(fitted, tmp_path):
    adata = fitted.copy()
    sks.tl.subset_tree(adata, KEY, start="root", end="tip 1", key_added="sub")
    entry, parent = adata.uns["sub"], adata.uns[KEY]
    assignment = adata.obsm["sub_assignment"]
    inside = adata.obs["sub_pseudotime"].notna().to_numpy()
    assert entry["nodes"].shape[0] == assignment.shape[1] < parent["nodes"].shape[0]
    np.testing.assert_allclose(np.asarray(assignment.sum(axis=1)).ravel(), inside.astype(float), atol=1e-12)
    # the root carried over: same position; the sub-trajectory is a path with two milestones
    np.testing.assert_array_equal(entry["nodes"][entry["root"]], parent["nodes"][parent["root"]])
    assert list(entry["milestones"]["names"]) == ["root", "tip 1"] and entry["branch_points"].size == 0
    # cells outside: no segment, milestone nor fate; the kept cells are those of the branch taken
    assert adata.obs["sub_segment"][~inside].isna().all() and adata.obs["sub_milestone"][~inside].isna().all()
    assert np.isnan(adata.obsm["sub_fate_probabilities"][~inside]).all()
    np.testing.assert_allclose(adata.obsm["sub_fate_probabilities"][inside], 1.0)
    assert adata.obs[f"{KEY}_milestone"][inside].isin(["root", "fork 1", "tip 1"]).mean() > 0.95
    # pseudotime on the kept path is the parent's, but for cells at the fork that the parent
    # placed on the edge of the branch left out
    sub, whole = adata.obs["sub_pseudotime"][inside].to_numpy(), adata.obs[f"{KEY}_pseudotime"][inside].to_numpy()
    assert np.isclose(sub, whole, rtol=0, atol=1e-8).mean() > 0.95
    assert np.abs(sub - whole).max() < 0.05 * whole.max()
    adata.write_h5ad(tmp_path / "sub.h5ad")
    back = anndata.read_h5ad(tmp_path / "sub.h5ad")
    np.testing.assert_array_equal(back.obs["sub_pseudotime"], adata.obs["sub_pseudotime"])


def test_trends_on_subtree_equal_hand_made_subset(fitted):
    adata = fitted.copy()
    sks.tl.subset_tree(adata, KEY, start="root", end="tip 2", key_added="sub")
    hand = adata[adata.obs["sub_pseudotime"].notna().to_numpy()].copy()
    for data in (adata, hand):
        sks.tl.trends(data, "sub", segment="0", genes=list(adata.var_names[:20]))
        sks.tl.trends(data, "sub", path=("root", "tip 1"), genes=list(adata.var_names[:20]), key_added="along")
    for name in ("sub_trends", "along"):
        np.testing.assert_allclose(hand.varm[f"{name}_curves"], adata.varm[f"{name}_curves"])
        assert hand.uns[name]["n_cells"] == adata.uns[name]["n_cells"]


def test_subset_by_milestones_keeps_the_fork(fitted):
    adata = fitted.copy()
    sks.tl.subset_tree(adata, KEY, milestones=["root", "tip 1", "tip 2"], key_added="all")
    assert adata.uns["all"]["nodes"].shape == adata.uns[KEY]["nodes"].shape
    sks.tl.branch_test(adata, "all", branch_point="fork 1", genes=list(adata.var_names[:10]))
    # without the root: the root moves to where the trajectory enters, the fork
    sks.tl.subset_tree(adata, KEY, milestones=["tip 1", "tip 2"], key_added="tips")
    entry = adata.uns["tips"]
    fork = adata.uns[KEY]["nodes"][adata.uns[KEY]["branch_points"][0]]
    np.testing.assert_array_equal(entry["nodes"][entry["root"]], fork)
    assert np.nanmin(adata.obs["tips_pseudotime"]) >= 0
    inside = adata.obs["tips_pseudotime"].notna().to_numpy()
    np.testing.assert_allclose(adata.obsm["tips_fate_probabilities"][inside].sum(axis=1), 1.0)
    sks.pl.tree(adata, "tips", color="tips_pseudotime", show=False)
    sks.pl.tree(adata, "all", show=False)


def test_subset_refuses_bad_input(fitted):
    adata = fitted.copy()
    with pytest.raises(ValueError, match="two different ends"):
        sks.tl.subset_tree(adata, KEY, start="tip 1", end="tip 1")
    with pytest.raises(ValueError, match="differ"):
        sks.tl.subset_tree(adata, KEY, start="root", end="tip 1", key_added=KEY)
    with pytest.raises(ValueError, match="start= and end="):
        sks.tl.subset_tree(adata, KEY, start="root")
    with pytest.raises(KeyError, match="No milestone"):
        sks.tl.subset_tree(adata, KEY, start="root", end="tip 9")
    cells = anndata.AnnData(np.zeros((5, 2)))
    cells.obsm["X_cg"] = np.random.default_rng(0).normal(size=(5, 2))
    cells.obsp["cg_connectivities"] = sparse.csr_matrix(np.ones((5, 5)) - np.eye(5))
    cells.uns["cg"] = {"method": "mpme"}
    with pytest.raises(ValueError, match="cell graph"):
        sks.tl.subset_tree(cells, "cg", start=0, end=1)
    with pytest.raises(ValueError, match="cell graph"):
        sks.tl.cleanup(cells, "cg")
    with pytest.raises(ValueError, match="cell graph|learns no map"):
        sks.tl.project(cells, cells, "cg")


def test_cleanup_removes_small_branches_and_reruns_pseudotime(fitted, tmp_path):
    adata = fitted.copy()
    mass = adata.obs[f"{KEY}_segment"].value_counts()
    sks.tl.cleanup(adata, KEY, min_cells=5)  # every branch holds more: nothing changes
    assert adata.uns[KEY]["nodes"].shape == fitted.uns[KEY]["nodes"].shape
    smaller = mass[["1", "2"]].min()
    sks.tl.cleanup(adata, KEY, min_cells=smaller + 1)
    entry = adata.uns[KEY]
    assert entry["nodes"].shape[0] < fitted.uns[KEY]["nodes"].shape[0]
    assert entry["branch_points"].size == 0 and list(entry["milestones"]["names"]) == ["root", "tip 1"]
    assert entry["params"]["cleanup_min_cells"] == smaller + 1
    np.testing.assert_allclose(np.asarray(adata.obsm[f"{KEY}_assignment"].sum(axis=1)).ravel(), 1.0)
    assert adata.obs[f"{KEY}_pseudotime"].notna().all()
    assert adata.obsm[f"{KEY}_fate_probabilities"].shape == (adata.n_obs, 1)
    # cells of the branch kept keep their order; those of the branch removed join the fork
    kept = ~fitted.obs[f"{KEY}_segment"].isin([mass[["1", "2"]].idxmin()]).to_numpy()
    rho = spearmanr(adata.obs[f"{KEY}_pseudotime"][kept], fitted.obs[f"{KEY}_pseudotime"][kept]).statistic
    assert rho > 0.99
    adata.write_h5ad(tmp_path / "clean.h5ad")
    # a long branch goes with min_length; the root's never does
    other = fitted.copy()
    sks.tl.cleanup(other, KEY, min_cells=0, min_length=1e9)
    assert int(other.uns[KEY]["root"]) in set(other.uns[KEY]["leaves"].tolist())
    with pytest.raises(ValueError, match="min_cells"):
        sks.tl.cleanup(other, KEY, min_cells=-1)


def test_empty_and_one_cell_segments_give_clear_errors(fitted):
    adata = fitted.copy()
    segment = adata.obs[f"{KEY}_segment"].astype(str).to_numpy()
    time = adata.obs[f"{KEY}_pseudotime"].to_numpy().copy()
    cells = np.flatnonzero(segment == "1")
    time[cells[1:]] = np.nan
    adata.obs[f"{KEY}_pseudotime"] = time
    with pytest.raises(ValueError, match="holds 1 cells"):
        sks.tl.trends(adata, KEY, segment="1")
    with pytest.raises(ValueError, match="has 1 cells"):
        sks.tl.branch_test(adata, KEY, branch_point="fork 1")
    time[cells] = np.nan
    adata.obs[f"{KEY}_pseudotime"] = time
    with pytest.raises(ValueError, match="holds 0 cells"):
        sks.tl.trends(adata, KEY, segment="1")
    with pytest.raises(ValueError, match="hold no cell.*cleanup"):
        sks.tl.branch_test(adata, KEY, branch_point="fork 1")


# 5. mapping new cells


def _halves(seed):
    """The full data with PCA; the reference half with its own PCA; the other half in the reference's PCs."""
    full = sks.datasets.branching(1000, n_leaves=3, random_state=seed)
    half = np.zeros(full.n_obs, dtype=bool)
    half[np.random.default_rng(seed).permutation(full.n_obs)[: full.n_obs // 2]] = True
    ref, new = full[half].copy(), full[~half].copy()
    sc.pp.pca(full, n_comps=10)
    sc.pp.pca(ref, n_comps=10)
    # the documented way: the new cells in the reference's principal components
    new.obsm["X_pca"] = (np.asarray(new.X) - np.asarray(ref.X).mean(axis=0)) @ ref.varm["PCs"]
    return full, ref, new, half


@pytest.mark.parametrize("method", ["ddrtree", "rpg"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_project_half_onto_the_other_half(method, seed):
    full, ref, new, half = _halves(seed)
    for adata in (full, ref):
        _trajectory(adata, method)
    sks.tl.project(new, ref, method)
    rho = spearmanr(new.obs[f"{method}_pseudotime"], full.obs[f"{method}_pseudotime"][~half]).statistic
    assert rho >= 0.98
    np.testing.assert_allclose(new.obsm[f"{method}_fate_probabilities"].sum(axis=1), 1.0)
    np.testing.assert_allclose(np.asarray(new.obsm[f"{method}_assignment"].sum(axis=1)).ravel(), 1.0)
    assert list(new.obs[f"{method}_milestone"].cat.categories) == list(ref.uns[method]["milestones"]["names"])
    # the reference's own cells land where its fit put them
    again = ref.copy()
    sks.tl.project(again, ref, method, key_added="again")
    again_time, ref_time = again.obs["again_pseudotime"], ref.obs[f"{method}_pseudotime"]
    if method == "rpg":  # the same soft assignment and the same projection onto the graph
        np.testing.assert_allclose(again_time, ref_time, atol=1e-8 * ref_time.max())
    else:  # the fit's Z stops at tol, and its centers moved with it
        assert spearmanr(again_time, ref_time).statistic > 0.99
    # the projected cells form a valid result
    sks.tl.trends(new, method, segment="0", genes=list(new.var_names[:5]))


def test_project_needs_the_reference_representation(fitted):
    new = fitted.copy()
    del new.obsm["X_pca"]
    with pytest.raises(KeyError, match="ingest"):
        sks.tl.project(new, fitted, KEY)
    new.obsm["X_pca"] = fitted.obsm["X_pca"][:, :3]
    with pytest.raises(ValueError, match="fewer"):
        sks.tl.project(new, fitted, KEY)
    old = fitted.copy()
    del old.uns[KEY]["mean"]
    with pytest.raises(ValueError, match="older"):
        sks.tl.project(fitted.copy(), old, KEY)


def test_projected_cells_survive_h5ad_and_a_projection_is_reproducible(tmp_path):
    full, ref, new, _ = _halves(0)
    _trajectory(ref, "rpg")
    sks.tl.project(new, ref, "rpg")
    again = new.copy()
    sks.tl.project(again, ref, "rpg")
    np.testing.assert_array_equal(again.obs["rpg_pseudotime"], new.obs["rpg_pseudotime"])
    new.write_h5ad(tmp_path / "projected.h5ad")
    back = anndata.read_h5ad(tmp_path / "projected.h5ad")
    np.testing.assert_array_equal(back.obs["rpg_pseudotime"], new.obs["rpg_pseudotime"])
    np.testing.assert_array_equal(back.obs["rpg_milestone"], new.obs["rpg_milestone"])
    np.testing.assert_allclose(back.obsm["rpg_fate_probabilities"], new.obsm["rpg_fate_probabilities"])


@pytest.mark.parametrize("method", ["mpme", "spl"])
def test_project_onto_a_landmark_graph(method):
    """A cell-level learner fitted on landmarks maps new cells as it mapped its own: the reference's
    cells projected onto their own fit get back their assignment, embedding and pseudotime."""
    full, ref, new, half = _halves(0)
    getattr(sks.tl, method)(ref, n_landmarks=150)
    sks.tl.root(ref, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(ref, method)
    again = ref.copy()
    sks.tl.project(again, ref, method, key_added="again")
    np.testing.assert_allclose(_dense(again.obsm["again_assignment"]), _dense(ref.obsm[f"{method}_assignment"]),
                               atol=1e-10)
    np.testing.assert_allclose(again.obsm["X_again"], ref.obsm[f"X_{method}"], atol=1e-10)
    np.testing.assert_allclose(again.obs["again_pseudotime"], ref.obs[f"{method}_pseudotime"], atol=1e-8)
    sks.tl.project(new, ref, method)
    assert new.obsm[f"X_{method}"].shape == (new.n_obs, ref.obsm[f"X_{method}"].shape[1])
    truth = full.obs["true_pseudotime"]
    rho_new = spearmanr(new.obs[f"{method}_pseudotime"], truth[~half]).statistic
    rho_ref = spearmanr(ref.obs[f"{method}_pseudotime"], truth[half]).statistic
    assert rho_new >= rho_ref - 0.02 and rho_new >= 0.9, (rho_new, rho_ref)


def test_project_refuses_a_landmark_graph_without_nodes_in_the_representation():
    _, ref, new, _ = _halves(0)
    sks.tl.mpme(ref, n_landmarks=100)
    del ref.uns["mpme"]["embedding"]  # as fsl stores it: nodes in the embedding only
    ref.uns["mpme"]["space"] = "X_mpme"
    before = set(new.obsm)
    with pytest.raises(ValueError, match="embedding"):
        sks.tl.project(new, ref, "mpme")
    assert set(new.obsm) == before


def _dense(matrix):
    return matrix.toarray() if sparse.issparse(matrix) else np.asarray(matrix)
