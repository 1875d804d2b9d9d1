"""Sub-trajectories, cleanup and mapping new cells."""

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
    # a cell graph is projected through its neighbours, in the representation its params record
    with pytest.raises(KeyError, match="use_rep"):
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
    with pytest.raises(ValueError, match=r"1 cells \(fork 1 → [^)]*\).*another branch point"):
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


# 5. mapping new cells onto cell-level learners fitted on every cell: through their neighbours


def _rooted(adata, method, **kwargs):
    """Fit ``method`` on every cell of ``adata``, root it at the true start and compute pseudotime."""
    getattr(sks.tl, method)(adata, **kwargs)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    return adata


def _relative_error(placed, own):
    """Each cell's distance between two embeddings, in units of the embedding's root-mean-square spread."""
    spread = np.sqrt(np.mean(np.sum((own - own.mean(axis=0)) ** 2, axis=1)))
    return np.linalg.norm(placed - own, axis=1) / spread


@pytest.fixture(scope="module")
def spl_halves():
    """``_halves(0)`` with SPL fitted and rooted on the reference half; copy before mutating."""
    full, ref, new, half = _halves(0)
    return full, _rooted(ref, "spl"), new, half


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_project_onto_a_cell_graph_through_neighbours(seed):
    """The issue's acceptance: SPL on half the cells, the other half projected through their neighbours,
    ordered as the fit on all cells orders them (Spearman ≥ 0.98; measured 0.998–0.999)."""
    full, ref, new, half = _halves(seed)
    _rooted(full, "spl")
    _rooted(ref, "spl")
    sks.tl.project(new, ref, "spl")
    rho = spearmanr(new.obs["spl_pseudotime"], full.obs["spl_pseudotime"][~half]).statistic
    assert rho >= 0.98, rho
    # the assignment to the reference's cells: sparse, 15 neighbours per cell, rows summing to 1
    assignment = new.obsm["spl_assignment"]
    assert sparse.isspmatrix_csr(assignment) and assignment.shape == (new.n_obs, ref.n_obs)
    np.testing.assert_array_equal(np.diff(assignment.indptr), 15)
    np.testing.assert_allclose(np.asarray(assignment.sum(axis=1)).ravel(), 1.0)
    assert new.uns["spl"]["projection_n_neighbors"] == 15 and new.uns["spl"]["projected_from"] == "spl"
    assert new.obsm["X_spl"].shape == (new.n_obs, 2)
    assert list(new.obs["spl_milestone"].cat.categories) == list(ref.uns["spl"]["milestones"]["names"])
    assert new.obs["spl_segment"].notna().all() and new.obs["spl_milestone"].notna().all()
    # the reference's own cells land where the fit put them, up to the neighbours' averaging
    again = ref.copy()
    sks.tl.project(again, ref, "spl", key_added="again")
    error = _relative_error(again.obsm["X_again"], ref.obsm["X_spl"])
    assert np.median(error) < 0.03 and error.max() < 0.25, (np.median(error), error.max())
    assert spearmanr(again.obs["again_pseudotime"], ref.obs["spl_pseudotime"]).statistic > 0.999
    assert (again.obs["again_segment"].astype(str) == ref.obs["spl_segment"].astype(str)).mean() > 0.99


def test_projected_mpme_cells_are_ordered_as_the_references_own():
    """MPME's cell-level pseudotime moves more between a fit on half the cells and on all of them
    (Spearman 0.989–0.996 on the reference's cells), and a new cell cannot inherit the full fit's
    per-cell noise: against the full fit the projected half reaches 0.979–0.996 (seeds 0–2), below
    the 0.98 of the acceptance on seed 1. Against the truth it is ordered about as well as the
    reference's own cells."""
    full, ref, new, half = _halves(0)
    _rooted(ref, "mpme")
    sks.tl.project(new, ref, "mpme")
    truth = full.obs["true_pseudotime"]
    rho_new = spearmanr(new.obs["mpme_pseudotime"], truth[~half]).statistic
    rho_ref = spearmanr(ref.obs["mpme_pseudotime"], truth[half]).statistic
    assert rho_new >= rho_ref - 0.02 and rho_new >= 0.95, (rho_new, rho_ref)


def test_cell_graph_projection_is_a_node_graph_over_the_reference_cells(spl_halves, tmp_path):
    """The reference's cells become the nodes of the new cells' result: it survives h5ad and the
    trajectory tools and plots run on it as on any node graph."""
    _, ref, new, _ = spl_halves
    new = new.copy()
    sks.tl.project(new, ref, "spl")
    entry = new.uns["spl"]
    np.testing.assert_array_equal(entry["nodes"], ref.obsm["X_spl"])
    assert entry["space"] == "X_spl" and (entry["adjacency"] != ref.obsp["spl_connectivities"]).nnz == 0
    new.write_h5ad(tmp_path / "projected.h5ad")
    back = anndata.read_h5ad(tmp_path / "projected.h5ad")
    assert sparse.issparse(back.obsm["spl_assignment"])
    assert (back.obsm["spl_assignment"] != new.obsm["spl_assignment"]).nnz == 0
    np.testing.assert_array_equal(back.obsm["X_spl"], new.obsm["X_spl"])
    np.testing.assert_array_equal(back.obs["spl_pseudotime"], new.obs["spl_pseudotime"])
    np.testing.assert_array_equal(back.obs["spl_segment"], new.obs["spl_segment"])
    np.testing.assert_array_equal(back.obs["spl_milestone"], new.obs["spl_milestone"])
    sks.pl.tree(back, "spl", color="spl_pseudotime", show=False)
    # placing the new cells' embedding on that graph, as tl.pseudotime does, orders them the same
    sks.tl.pseudotime(back, "spl")
    assert spearmanr(back.obs["spl_pseudotime"], new.obs["spl_pseudotime"]).statistic > 0.999
    with pytest.raises(ValueError, match="project onto that reference"):
        sks.tl.project(new.copy(), back, "spl")


def test_fates_through_neighbours_are_their_weighted_mean(spl_halves):
    """A cell graph with cycles has no fates of its own, so the reference's are made up here: the new
    cells' are the weighted mean of their neighbours', rows summing to 1, neighbours without any left out."""
    _, ref, new, _ = spl_halves
    ref, new = ref.copy(), new.copy()
    fates = np.random.default_rng(0).dirichlet(np.ones(3), size=ref.n_obs)
    fates[:50] = np.nan  # cells outside every rooted component
    ref.obsm["spl_fate_probabilities"] = fates
    ref.uns["spl"]["fates"] = np.array(["a", "b", "c"], dtype=object)
    sks.tl.project(new, ref, "spl")
    weights = new.obsm["spl_assignment"]
    known = np.isfinite(fates).all(axis=1)
    expected = (weights @ np.nan_to_num(fates)) / (weights @ known.astype(float))[:, None]
    np.testing.assert_allclose(new.obsm["spl_fate_probabilities"], expected, rtol=1e-12)
    np.testing.assert_allclose(new.obsm["spl_fate_probabilities"].sum(axis=1), 1.0)
    assert np.isfinite(new.obs["spl_fate_entropy"]).all()


def test_cell_graph_projection_refuses_bad_input(spl_halves):
    _, ref, new, _ = spl_halves
    new = new.copy()
    before = (set(new.obs), set(new.obsm), set(new.uns), new.obsm["X_pca"].copy())

    def unchanged():
        assert (set(new.obs), set(new.obsm), set(new.uns)) == before[:3]
        np.testing.assert_array_equal(new.obsm["X_pca"], before[3])

    missing = new.copy()
    del missing.obsm["X_pca"]
    with pytest.raises(KeyError, match="ingest"):
        sks.tl.project(missing, ref, "spl")
    assert "X_spl" not in missing.obsm and "spl" not in missing.uns
    narrow = new.copy()
    narrow.obsm["X_pca"] = new.obsm["X_pca"][:, :3]
    with pytest.raises(ValueError, match="fewer"):
        sks.tl.project(narrow, ref, "spl")
    assert "spl" not in narrow.uns
    nan = new.copy()
    nan.obsm["X_pca"][0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        sks.tl.project(nan, ref, "spl")
    assert "spl" not in nan.uns
    for bad in (0, ref.n_obs + 1, 2.5):
        with pytest.raises(ValueError, match="n_neighbors"):
            sks.tl.project(new, ref, "spl", n_neighbors=bad)
    unchanged()
    node_graph = ref.copy()
    sks.tl.rpg(node_graph)
    with pytest.raises(ValueError, match="n_neighbors"):
        sks.tl.project(new, node_graph, "rpg", n_neighbors=5)
    unchanged()
    # the reference needs its own cells' representation to find the neighbours in
    lost = ref.copy()
    del lost.obsm["X_pca"]
    with pytest.raises(KeyError, match="adata_ref"):
        sks.tl.project(new, lost, "spl")
    unchanged()
    # a smaller k is honoured
    sks.tl.project(new, ref, "spl", n_neighbors=5)
    np.testing.assert_array_equal(np.diff(new.obsm["spl_assignment"].indptr), 5)


@pytest.mark.parametrize("method", ["esl", "fsl", "convex_embedding"])
def test_every_cell_level_learner_projects_through_neighbours(method):
    """ESL and FSL (a cell graph; FSL in its θ-weighted genes) and the convex embedding (an
    embedding alone, no graph) place the reference's own cells close to where the fit put them."""
    ref = sks.datasets.branching(200, n_leaves=2, random_state=0)
    sc.pp.pca(ref, n_comps=10)
    getattr(sks.tl, method)(ref)
    again = ref.copy()
    sks.tl.project(again, ref, method, key_added="again")
    error = _relative_error(again.obsm["X_again"], ref.obsm[f"X_{method}"])
    assert np.median(error) < 0.05, np.median(error)
    assert again.obsm["again_assignment"].shape == (ref.n_obs, ref.n_obs)
    assert ("nodes" in again.uns["again"]) == (method != "convex_embedding")
    if method == "fsl":  # the new cells need the genes FSL weighted
        weighted = ref.var_names[ref.var["fsl_weight"] > 0]
        with pytest.raises(KeyError, match="genes"):
            sks.tl.project(ref[:, ref.var_names.difference(weighted[:1])].copy(), ref, method)


def test_fsl_landmark_graph_is_still_refused():
    ref = sks.datasets.branching(200, n_leaves=2, random_state=0)
    sks.tl.fsl(ref, n_landmarks=60)
    new = ref.copy()
    with pytest.raises(ValueError, match="embedding"):
        sks.tl.project(new, ref, "fsl", key_added="new")
    assert "new" not in new.uns


def test_neighbour_weights():
    from scskeleton._core.cellgraphs import neighbour_map as core

    distances = np.sort(np.random.default_rng(0).uniform(0.5, 2.0, size=(40, 15)), axis=1)
    weights = core.fuzzy_weights(distances)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0)
    assert (np.diff(weights, axis=1) <= 1e-15).all()  # nearer weighs more
    # before normalising, the nearest weighs 1 and the row log2(k) (UMAP's calibration)
    np.testing.assert_allclose((weights / weights[:, :1]).sum(axis=1), np.log2(15), rtol=1e-6)
    np.testing.assert_allclose(core.fuzzy_weights(1e3 * distances), weights, rtol=1e-6)  # no units
    np.testing.assert_allclose(core.fuzzy_weights(np.ones((2, 4))), 0.25)  # ties share
    np.testing.assert_allclose(core.fuzzy_weights(np.zeros((2, 4))), 0.25)  # duplicates too
    np.testing.assert_allclose(core.fuzzy_weights(np.array([[0.3]])), 1.0)
    # chunks give the same matrix; k non-zeros per row on the nearest reference points
    points, reference = np.random.default_rng(1).normal(size=(30, 3)), np.random.default_rng(2).normal(size=(50, 3))
    matrix = core.neighbour_weights(points, reference, 6)
    np.testing.assert_allclose(core.neighbour_weights(points, reference, 6, chunk_rows=7).toarray(), matrix.toarray())
    nearest = np.argsort(((points[:, None] - reference[None]) ** 2).sum(-1), axis=1)[:, :6]
    np.testing.assert_array_equal(np.sort(matrix.indices.reshape(30, 6), axis=1), np.sort(nearest, axis=1))
    with pytest.raises(ValueError, match="n_neighbors"):
        core.neighbour_weights(points, reference, 51)
    # means leave out neighbours without a value; votes leave out those without a category
    weights = sparse.csr_matrix(np.array([[0.6, 0.25, 0.15, 0.0], [0.0, 0.0, 0.4, 0.6]]))
    values = np.array([1.0, np.nan, 3.0, np.nan])
    np.testing.assert_allclose(core.weighted_mean(weights, values), [(0.6 + 0.45) / 0.75, 3.0])
    np.testing.assert_array_equal(core.weighted_mean(weights, np.full(4, np.nan)), [np.nan, np.nan])
    np.testing.assert_array_equal(core.weighted_vote(weights, np.array([2, 0, 0, -1]), 3), [2, 0])
    np.testing.assert_array_equal(core.weighted_vote(weights, np.array([0, 0, -1, -1]), 3), [0, -1])
    np.testing.assert_array_equal(core.weighted_vote(weights, np.array([1, 0, 0, 1]), 2), [1, 1])


def _dense(matrix):
    return matrix.toarray() if sparse.issparse(matrix) else np.asarray(matrix)
