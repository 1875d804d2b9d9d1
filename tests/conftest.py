import matplotlib
import pytest
import scanpy as sc

import scskeleton as sks

matplotlib.use("Agg")
sc.settings.verbosity = 0


@pytest.fixture(scope="session")
def branching_fitted():
    """A small fitted DDRTree with root and pseudotime; copy before mutating."""
    adata = sks.datasets.branching(600, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    return adata
