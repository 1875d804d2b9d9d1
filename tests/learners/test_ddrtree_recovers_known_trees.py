"""DDRTree recovers known trees: topology, pseudotime order and branches."""

import numpy as np
import pytest
import scanpy as sc
from scipy.stats import spearmanr
from sklearn.metrics import adjusted_rand_score

import scskeleton as sks
from scskeleton._testing import branch_majorities


@pytest.mark.parametrize("n_cells", [1000, 5000])
@pytest.mark.parametrize("n_leaves", [2, 3])
def test_branching_tree_is_recovered(n_cells, n_leaves):
    adata = sks.datasets.branching(n_cells, n_leaves=n_leaves, random_state=0)
    sc.pp.pca(adata, n_comps=20)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "ddrtree")

    assert len(adata.uns["ddrtree"]["branch_points"]) == n_leaves - 1
    rho = spearmanr(adata.obs["ddrtree_pseudotime"], adata.obs["true_pseudotime"])[0]
    assert rho >= 0.95
    ari = adjusted_rand_score(adata.obs["true_branch"], adata.obs["ddrtree_segment"])
    assert ari >= 0.8


def test_krumsiek11_progenitors_come_first():
    adata = sks.datasets.krumsiek11()
    sc.pp.pca(adata, n_comps=10)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", group=("cell_type", "progenitor"))
    sks.tl.pseudotime(adata, "ddrtree")
    median = adata.obs.groupby("cell_type", observed=True)["ddrtree_pseudotime"].median()
    assert median["progenitor"] < min(median[t] for t in ("Ery", "Mk", "Mo", "Neu"))
    # monocytes and neutrophils end on different segments, away from erythrocytes
    segment = adata.obs.groupby("cell_type", observed=True)["ddrtree_segment"].agg(lambda s: s.mode()[0])
    assert len({segment["Mo"], segment["Neu"], segment["Ery"]}) == 3


def test_toggleswitch_bifurcates():
    adata = sks.datasets.toggleswitch()
    adata.obsm["X_pca"] = adata.X.copy()  # two genes: use them as they are
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", cell=int(adata.uns["iroot"]))
    sks.tl.pseudotime(adata, "ddrtree")
    assert len(adata.uns["ddrtree"]["branch_points"]) == 1
    # the two branches are the switch's two fates: gene 0 ahead on one, gene 1 on the other
    X = np.asarray(adata.X, dtype=float)
    fate = np.where(X[:, 0] > X[:, 1], "gene 0", "gene 1")
    branches = branch_majorities(adata, "ddrtree", fate)
    assert sorted(label for label, _ in branches.values()) == ["gene 0", "gene 1"]
    assert min(share for _, share in branches.values()) >= 0.95, branches
    # pseudotime runs from the undecided root cell out along both fates
    times = adata.obs["ddrtree_pseudotime"].to_numpy()
    undecided = np.abs(X[:, 0] - X[:, 1]) < 0.05
    assert np.median(times[undecided]) < np.median(times[~undecided])
