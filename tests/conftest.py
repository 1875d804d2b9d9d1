import io

import matplotlib
import pytest
import scanpy as sc
from threadpoolctl import threadpool_limits

import scskeleton as sks

matplotlib.use("Agg")
sc.settings.verbosity = 0


@pytest.fixture(scope="session", autouse=True)
def single_blas_thread():
    """One BLAS thread for the whole suite.

    The solvers make many small BLAS calls. On a shared machine (CI, a laptop
    running other work) a multi-threaded BLAS then waits for its threads to be
    scheduled at every call, which made parts of the suite 10–50× slower here.
    Results are the same; only the thread count differs.
    """
    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.fixture(scope="session")
def branching_fitted():
    """A small fitted DDRTree with root and pseudotime; copy before mutating."""
    adata = sks.datasets.branching(600, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    return adata


@pytest.fixture(scope="session")
def krumsiek11_fitted():
    """krumsiek11 with 10 PCs, a tree by ``method`` rooted at the progenitors, and pseudotime; cached per method."""
    cache = {}

    def fitted(method: str):
        if method not in cache:
            adata = sks.datasets.krumsiek11()
            sc.pp.pca(adata, n_comps=10)
            getattr(sks.tl, method)(adata)
            sks.tl.root(adata, method, group=("cell_type", "progenitor"))
            sks.tl.pseudotime(adata, method)
            cache[method] = adata
        return cache[method].copy()

    return fitted


@pytest.fixture
def scanpy_log():
    """What scanpy's logging writes (warnings and up), as a string buffer."""
    stream, previous, verbosity = io.StringIO(), sc.settings.logfile, sc.settings.verbosity
    sc.settings.logfile, sc.settings.verbosity = stream, 1
    yield stream
    sc.settings.logfile, sc.settings.verbosity = previous, verbosity
