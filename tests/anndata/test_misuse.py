"""Misuse a new user runs into: views and subsets, keys h5ad cannot store, keys reused by another
learner, and duplicated cell names; each leaves ``adata`` as it was or says what to do."""

import warnings

import numpy as np
import pytest
import scanpy as sc
import scskeleton as sks
from scskeleton._anndata.learners import LEARNER_METHODS as LEARNERS
from scskeleton._anndata.schema import is_cell_graph

import anndata

#: The smallest fits that run each learner in well under a second.
SMALL_FIT = {
    "ddrtree": {"n_centers": 10, "maxiter": 5},
    "rpg": {"n_nodes": 10, "maxiter": 5},
    "rpg_l1": {"n_nodes": 10, "maxiter": 3},
    "mpme": {"maxiter": 20},
    "spl": {"maxiter": 3},
    "esl": {"maxiter": 20},
    "fsl": {"maxiter": 3},
    "convex_embedding": {"maxiter": 3},
}


def _data(n_cells=120, random_state=0):
    adata = sks.datasets.branching(n_cells, n_leaves=2, n_dims=5, random_state=random_state)
    sc.pp.pca(adata, n_comps=4)
    return adata


def _fit(adata, method, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small fits stop at maxiter on purpose
        getattr(sks.tl, method)(adata, key_added=key, **SMALL_FIT[method])


def _not_trunk(adata):
    """Half of the trunk and every other cell: a subset that still reaches the root."""
    return (adata.obs["true_branch"] != "trunk").to_numpy() | (np.arange(adata.n_obs) % 2 == 0)


# 1. views and subsets


def test_root_pseudotime_and_support_on_a_view_leave_the_parent_untouched():
    adata = _data()
    sks.tl.rpg(adata, n_nodes=15)
    sks.tl.root(adata, "rpg", group=("true_branch", "trunk"))
    parent_root = adata.uns["rpg"]["root"]
    leaves = np.flatnonzero(np.asarray(adata.uns["rpg"]["adjacency"].sum(axis=1)).ravel() == 1)
    other = int(leaves[leaves != parent_root][0])

    view = adata[_not_trunk(adata)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.root(view, "rpg", node=other)
        assert not view.is_view and view.uns["rpg"]["root"] == other  # written to the object the user holds
        assert adata.uns["rpg"]["root"] == parent_root

        view = adata[_not_trunk(adata)]
        sks.tl.pseudotime(view, "rpg")
        sks.tl.branch_support(view, "rpg", n_boot=1)
    assert "rpg_pseudotime" in view.obs and "segments" in view.uns["rpg"] and "branch_support" in view.uns["rpg"]
    assert "rpg_pseudotime" not in adata.obs
    assert "segments" not in adata.uns["rpg"] and "branch_support" not in adata.uns["rpg"]


def test_a_learner_on_a_view_leaves_the_parent_untouched():
    adata = _data()
    before = sorted(adata.uns), sorted(adata.obsm)
    view = adata[_not_trunk(adata)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        _fit(view, "ddrtree", "ddrtree")
    assert "ddrtree" in view.uns and (sorted(adata.uns), sorted(adata.obsm)) == before


def test_a_node_graph_on_a_subset_gives_the_full_fits_pseudotime_of_those_cells():
    adata = _data()
    sks.tl.ddrtree(adata, n_centers=15)
    sks.tl.root(adata, "ddrtree", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "ddrtree")
    mask = _not_trunk(adata)
    subset = adata[mask].copy()
    del subset.obs["ddrtree_pseudotime"]
    sks.tl.pseudotime(subset, "ddrtree")
    np.testing.assert_allclose(subset.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"][mask])
    sks.tl.root(subset, "ddrtree", group=("true_branch", "trunk"))  # the subset's own cells choose the root


@pytest.mark.parametrize("as_view", [True, False])
def test_a_cell_graph_on_a_subset_asks_for_a_refit(as_view):
    adata = _data()
    _fit(adata, "mpme", "mpme")
    sks.tl.root(adata, "mpme", group=("true_branch", "trunk"))
    subset = adata[_not_trunk(adata)]
    subset = subset if as_view else subset.copy()
    for call in (
        lambda: sks.tl.root(subset, "mpme", group=("true_branch", "trunk")),
        lambda: sks.tl.pseudotime(subset, "mpme"),
    ):
        with pytest.raises(ValueError, match=r"fitted on 120 cells.*\.copy\(\); sks\.tl\.mpme"):
            call()
    assert "mpme_pseudotime" not in adata.obs and "segments" not in adata.uns["mpme"]
    # the cells kept in the same number (e.g. a gene subset) are still the graph's nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.pseudotime(adata[:, :3], "mpme")


# 2. keys h5ad cannot store


@pytest.mark.parametrize("key", ["a/b", "/", ".", "..", "a\x00b"])
@pytest.mark.parametrize("method", LEARNERS)
def test_keys_that_h5ad_cannot_store_are_refused_up_front(method, key):
    adata = _data(60)
    before = sorted(adata.uns), sorted(adata.obsm)
    with pytest.raises(ValueError, match="cannot be stored in an .h5ad"):
        getattr(sks.tl, method)(adata, key_added=key)
    assert (sorted(adata.uns), sorted(adata.obsm)) == before


def test_tools_that_name_their_results_refuse_them_too(branching_fitted):
    with pytest.raises(ValueError, match="cannot be stored in an .h5ad"):
        sks.tl.association_test(branching_fitted.copy(), "ddrtree", key_added="x/y")


# 3. a key reused by another learner


@pytest.mark.parametrize(
    ("first", "second", "attribute", "stale"),
    [
        ("ddrtree", "mpme", "obsm", "g_assignment"),
        ("esl", "ddrtree", "obsp", "g_connectivities"),
        ("esl", "ddrtree", "obs", "g_component"),
        ("fsl", "spl", "var", "g_weight"),
        ("fsl", "spl", "var", "g_selected"),
    ],
)
def test_a_second_learner_under_one_key_removes_the_first_ones_fields(first, second, attribute, stale):
    adata = _data()
    _fit(adata, first, "g")
    assert stale in getattr(adata, attribute)
    _fit(adata, second, "g")
    assert stale not in getattr(adata, attribute)
    assert adata.uns["g"]["method"] == second and is_cell_graph(adata, "g") == (second in ("mpme", "spl"))


def test_ddrtree_then_mpme_under_one_key_then_root():
    adata = _data()
    _fit(adata, "ddrtree", "g")
    _fit(adata, "mpme", "g")
    sks.tl.root(adata, "g", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "g")
    assert np.isfinite(adata.obs["g_pseudotime"]).any()


def test_a_new_fit_keeps_the_representation_it_reads_even_when_named_like_the_old_result():
    adata = _data()
    _fit(adata, "mpme", "g")
    sks.tl.rpg(adata, use_rep="X_g", n_nodes=10, key_added="g")  # the tree lives in the old embedding
    assert "X_g" in adata.obsm and "g_connectivities" not in adata.obsp
    sks.tl.root(adata, "g", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "g")


# 4. duplicated cell names


def test_cells_are_not_looked_up_by_a_duplicated_name(branching_fitted):
    adata = branching_fitted.copy()
    names = adata.obs_names.to_numpy().copy()
    names[1] = names[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata warns about the duplicates
        adata.obs_names = names
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.root(adata, "ddrtree", cell=names[0])
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.path(adata, "ddrtree", 0, 1)
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.trends(adata, "ddrtree", path=(0, 1))
    sks.tl.root(adata, "ddrtree", cell=5)  # a position is unambiguous
