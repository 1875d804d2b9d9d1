"""The tree learners ignore a component that carries sequencing depth and no cell state, as if it
were not there, say so, and keep every other fit as it was."""

import anndata
import numpy as np
import pytest
from scipy import sparse

import scskeleton as sks
from scskeleton._anndata.schema import read_graph


@pytest.fixture(scope="module")
def with_depth():
    """Three branches in 10 components, and in front of them a component of sequencing depth: the
    log of each cell's detected genes, drawn apart from its state, with the largest spread."""
    tree = sks.datasets.branching(1200, n_leaves=3, n_dims=10, random_state=0)
    rng = np.random.default_rng(0)
    detected = np.maximum(5, rng.lognormal(4.5, 0.7, tree.n_obs)).astype(int)
    counts = sparse.lil_matrix((tree.n_obs, 400))
    for cell, n in enumerate(detected):
        counts[cell, rng.choice(400, size=min(n, 400), replace=False)] = 1.0
    coordinates = np.asarray(tree.X, dtype=float)
    spread = coordinates.std(axis=0).max()
    depth = 4 * spread * (np.log(detected) - np.log(detected).mean()) / np.log(detected).std()
    adata = anndata.AnnData(X=sparse.csr_matrix(counts), obs=tree.obs.copy(),
                            obsm={"X_pca": np.column_stack([depth, coordinates]), "X_state": coordinates})
    return adata


def branch_points(adata, key: str) -> int:
    degree = np.asarray((read_graph(adata, key).adjacency != 0).sum(axis=1)).ravel()
    return int(np.sum(degree >= 3))


@pytest.mark.parametrize("method", ["rpg", "ddrtree"])
def test_the_depth_component_is_ignored_and_named(with_depth, method, scanpy_log):
    adata = with_depth.copy()
    getattr(sks.tl, method)(adata)
    assert "sequencing depth" in scanpy_log.getvalue() and "component(s) 1 " in scanpy_log.getvalue()
    params = adata.uns[method]["params"]
    assert params["depth_components"] == "0" and params["ignore_depth"] is True
    reference = with_depth.copy()
    getattr(sks.tl, method)(reference, use_rep="X_state")
    # the same tree as without the component: same branch points, same nodes in the other components
    assert branch_points(adata, method) == branch_points(reference, method) >= 1
    kept = adata.uns[method]["params"]["n_pcs"]
    assert kept >= 2
    kept_off = with_depth.copy()
    getattr(sks.tl, method)(kept_off, ignore_depth=False)
    assert kept_off.uns[method]["params"]["depth_components"] == ""


def test_the_tree_without_depth_is_the_tree_of_the_state_alone(with_depth):
    adata, reference = with_depth.copy(), with_depth.copy()
    sks.tl.rpg(adata)
    sks.tl.rpg(reference, use_rep="X_state")
    nodes, alone = adata.uns["rpg"]["nodes"], reference.uns["rpg"]["nodes"]
    np.testing.assert_allclose(nodes[:, 1:], alone[:, : nodes.shape[1] - 1], atol=1e-8)
    assert np.ptp(nodes[:, 0]) < 1e-9  # one value along the ignored component


def test_depth_is_read_from_the_quality_metrics_without_an_expression_matrix(with_depth, scanpy_log):
    adata = anndata.AnnData(obs=with_depth.obs.copy(), obsm={"X_pca": with_depth.obsm["X_pca"]})
    adata.obs["n_genes_by_counts"] = np.diff(sparse.csr_matrix(with_depth.X).indptr)
    sks.tl.rpg(adata)
    assert adata.uns["rpg"]["params"]["depth_components"] == "0"
    assert "obs['n_genes_by_counts']" in scanpy_log.getvalue()
    without = anndata.AnnData(obs=with_depth.obs.copy(), obsm={"X_pca": with_depth.obsm["X_pca"]})
    sks.tl.rpg(without)  # nothing to read the depth from: nothing is ignored
    assert without.uns["rpg"]["params"]["depth_components"] == ""


def test_branch_support_refits_ignore_the_same_component(with_depth):
    adata = with_depth.copy()
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "rpg")
    sks.tl.branch_support(adata, "rpg", n_boot=5)
    assert np.min(adata.uns["rpg"]["branch_support"]["branch_points"]) >= 0.8


def test_the_diffusion_order_reads_a_neighbour_graph_without_the_depth(with_depth):
    from scipy.stats import spearmanr

    import scanpy as sc

    adata, reference = with_depth.copy(), with_depth.copy()
    sc.pp.neighbors(adata, use_rep="X_pca", transformer="sklearn")  # built with the depth, as a user would
    sc.pp.neighbors(reference, use_rep="X_state", transformer="sklearn")
    for each, rep in ((adata, "X_pca"), (reference, "X_state")):
        sks.tl.rpg(each, use_rep=rep)
        sks.tl.root(each, "rpg", obs_min="true_pseudotime")
        sks.tl.pseudotime(each, "rpg")
        assert each.uns["rpg"]["pseudotime_order"] == "diffusion"
    truth = adata.obs["true_pseudotime"]
    found = spearmanr(adata.obs["rpg_pseudotime"], truth).correlation
    alone = spearmanr(reference.obs["rpg_pseudotime"], truth).correlation
    assert found > 0.9 and abs(found - alone) < 0.02
    kept = with_depth.copy()
    sc.pp.neighbors(kept, use_rep="X_pca", transformer="sklearn")
    sks.tl.rpg(kept, ignore_depth=False)
    sks.tl.root(kept, "rpg", obs_min="true_pseudotime")
    sks.tl.pseudotime(kept, "rpg")
    assert spearmanr(kept.obs["rpg_pseudotime"], truth).correlation < found - 0.05
