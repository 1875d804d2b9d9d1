"""The gene tests on a dask expression matrix (one pass over its chunks) equal the in-memory tests."""

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import scanpy as sc  # noqa: E402
from scipy import sparse  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton._core.stats import passes  # noqa: E402

KEY = "ddrtree"
#: Chunkings of the cells: uneven (97 does not divide 1,000), ~100 rows, one chunk, chunks split across genes.
CHUNKINGS = [(97, -1), (100, -1), (1_000, -1), (250, 64)]


@pytest.fixture(scope="module")
def fitted():
    """Expression with known trends and a few degenerate genes, DDRTree on its PCA, rooted and timed."""
    adata = sks.datasets.branching_expression(1000, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, KEY, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, KEY)
    values = np.asarray(adata.X, dtype=float).copy()
    values[:, 0] = 1.5  # constant
    values[:, 1] = 0.0  # all zero
    values[:, 2] = 0.0
    values[[10, 400, 800], 2] = 3.0  # three cells off zero: fewer than MIN_VARYING_CELLS
    adata.X = values
    return adata


def _ends(adata):
    root = int(np.atleast_1d(adata.uns[KEY]["root"])[0])
    tips = [int(n) for n in adata.uns[KEY]["leaves"] if n != root]
    return root, tips[0], int(adata.uns[KEY]["branch_points"][0])


def _call(tool, adata, **kwargs):
    root, tip, fork = _ends(adata)
    if tool == "trends":
        sks.tl.trends(adata, KEY, path=(root, tip), key_added="out", **kwargs)
    elif tool == "branch_test":
        sks.tl.branch_test(adata, KEY, branch_point=fork, key_added="out", **kwargs)
    elif tool == "fork_test":
        sks.tl.fork_test(adata, KEY, branch_point=fork, key_added="out", **kwargs)
    elif tool == "association_test":
        sks.tl.association_test(adata, KEY, key_added="out", **kwargs)
    else:
        sks.tl.activation(adata, KEY, key_added="out", **kwargs)
    return adata


def _assert_same(lazy, memory):
    """Same fields everywhere; numbers equal to round-off (the sums over cells only add in another order)."""
    assert list(lazy.var.columns) == list(memory.var.columns)
    assert sorted(lazy.varm) == sorted(memory.varm)
    assert list(lazy.obs.columns) == list(memory.obs.columns)
    _same_uns(lazy.uns["out"], memory.uns["out"])
    for column in memory.var.columns:
        if not column.startswith("out_"):
            continue
        got, want = lazy.var[column], memory.var[column]
        if want.dtype.kind == "f":
            scale = np.nanmax(np.abs(want.to_numpy())) if np.isfinite(want).any() else 1.0
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12 * scale, err_msg=column)
        else:
            assert (got.astype(str) == want.astype(str)).all(), column
    for field in memory.varm:
        if field.startswith("out_"):
            want = np.asarray(memory.varm[field])
            np.testing.assert_allclose(lazy.varm[field], want, rtol=1e-8, atol=1e-12 * np.nanmax(np.abs(want)),
                                       err_msg=field)
    for column in memory.obs.columns:
        if column.startswith("out_"):
            got, want = lazy.obs[column], memory.obs[column]
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=column)
            else:
                assert (got.astype(str) == want.astype(str)).all(), column


def _same_uns(got, want, where="uns"):
    assert type(got) is type(want) or (np.isscalar(got) and np.isscalar(want)), where
    if isinstance(want, dict):
        assert list(got) == list(want), where
        for name in want:
            _same_uns(got[name], want[name], f"{where}/{name}")
    elif isinstance(want, np.ndarray) and want.dtype.kind == "f":
        assert got.shape == want.shape, where
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-12, err_msg=where)
    elif isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want, err_msg=where)
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=1e-8), where
    else:
        assert got == want, where


TOOLS = ["trends", "branch_test", "fork_test", "association_test", "activation"]


@pytest.mark.parametrize("tool", TOOLS)
def test_dask_expression_equals_in_memory(fitted, tool):
    memory = _call(tool, fitted.copy())
    values = np.asarray(fitted.X)
    for chunks in CHUNKINGS:
        lazy = fitted.copy()
        lazy.X = da.from_array(values, chunks=chunks)
        _call(tool, lazy)
        assert isinstance(lazy.X, da.Array)  # read, never replaced by a loaded copy
        _assert_same(lazy, memory)
    # degenerate genes (constant, all zero, three cells off zero) are not tested on the dask path either
    pvals = lazy.var.get("out_pval")
    if pvals is not None:
        np.testing.assert_array_equal(pvals.to_numpy()[:3], 1.0)
    else:  # activation: never called
        assert np.isnan(lazy.varm["out_time"][:3]).all()


@pytest.mark.parametrize("tool", ["branch_test", "association_test"])
def test_sparse_chunks_equal_in_memory_sparse(fitted, tool):
    csr = sparse.csr_matrix(np.where(np.abs(fitted.X) < 0.8, 0.0, fitted.X))
    memory = fitted.copy()
    memory.X = csr
    _call(tool, memory)
    lazy = fitted.copy()
    lazy.X = da.from_array(csr, chunks=(130, -1), asarray=False)
    _call(tool, lazy)
    _assert_same(lazy, memory)
    np.testing.assert_array_equal(lazy.var["out_pval"].to_numpy()[:3], 1.0)


@pytest.mark.parametrize("tool", ["branch_test", "fork_test"])
def test_the_count_test_reads_the_same_carriers_from_chunks(fitted, tool):
    """Pearson residuals of sparse counts (each cell without a count its own value): the cells outside each
    gene's bulk are counted chunk by chunk as in memory, and the count test they feed gives the same p.
    Unregistered: the warp's chunked pass is compared in test_dask_expression_equals_in_memory."""
    rng = np.random.default_rng(4)
    size = np.exp(rng.normal(0.0, 0.4, fitted.n_obs))
    mean = size[:, None] * np.exp(rng.uniform(np.log(0.005), np.log(0.2), 40))[None, :]
    residuals = (rng.poisson(mean) - mean) / np.sqrt(mean)
    memory = fitted[:, :40].copy()
    memory.X = residuals
    _call(tool, memory, registration="none")
    for chunks in CHUNKINGS:
        lazy = memory.copy()
        lazy.X = da.from_array(residuals, chunks=chunks)
        _call(tool, lazy, registration="none")
        _assert_same(lazy, memory)


def test_a_dask_layer_and_a_gene_subset(fitted):
    genes = list(fitted.var_names[::4])
    memory = fitted.copy()
    memory.layers["logcounts"] = np.asarray(fitted.X, dtype=np.float32)
    _call("fork_test", memory, layer="logcounts", genes=genes, registration="none")
    lazy = fitted.copy()
    lazy.layers["logcounts"] = da.from_array(np.asarray(fitted.X, dtype=np.float32), chunks=(128, -1))
    _call("fork_test", lazy, layer="logcounts", genes=genes, registration="none")
    assert lazy.uns["out"]["params"]["layer"] == "logcounts"
    _assert_same(lazy, memory)
    assert np.isnan(lazy.var["out_pval"].to_numpy()[1::4]).all()  # genes not tested


@pytest.mark.parametrize("form", ["dense", "sparse"])
def test_a_gene_subset_of_chunks_split_across_genes(fitted, form):
    genes = list(fitted.var_names[[150, 3, 77, 0, 199, 64, 65]])  # unordered, across several gene chunks
    values = np.asarray(fitted.X)
    memory = fitted.copy()
    lazy = fitted.copy()
    if form == "dense":
        lazy.X = da.from_array(values, chunks=(97, 64))
    else:
        memory.X = sparse.csr_matrix(np.where(np.abs(values) < 0.8, 0.0, values))
        lazy.X = da.from_array(memory.X, chunks=(97, 64), asarray=False)
    for adata in (memory, lazy):
        sks.tl.activation(adata, KEY, genes=genes, key_added="out")
        sks.tl.branch_test(adata, KEY, branch_point=_ends(adata)[2], genes=genes, key_added="out")
    _assert_same(lazy, memory)


def test_trends_with_gcv_reads_only_the_chunks_holding_the_segment(fitted):
    labels = fitted.obs[f"{KEY}_segment"].astype(str).to_numpy()
    segment = labels[np.isfinite(fitted.obs[f"{KEY}_pseudotime"])][0]
    # the cells sorted so that the segment's lie together: the other chunks must never be read
    order = np.argsort(labels != segment, kind="stable")
    adata = fitted[order].copy()
    n_in = int((labels == segment).sum())
    values = np.asarray(adata.X)
    read = []

    def record(block, block_info=None):
        read.append(block_info[0]["chunk-location"][0])
        return block

    lazy = adata.copy()
    lazy.X = da.from_array(values, chunks=(100, -1)).map_blocks(record, dtype=values.dtype)
    memory = adata.copy()
    genes = adata.var_names[3:]  # GCV's choice of λ for a constant gene is round-off: leave those out
    sks.tl.trends(memory, KEY, segment=segment, df=None, genes=genes, key_added="out")
    sks.tl.trends(lazy, KEY, segment=segment, df=None, genes=genes, key_added="out")
    _assert_same(lazy, memory)
    assert read and max(read) <= (n_in - 1) // 100


def test_non_finite_values_in_a_chunk_are_refused_and_adata_is_unchanged(fitted):
    values = np.asarray(fitted.X).copy()
    values[int(np.flatnonzero(np.isfinite(fitted.obs[f"{KEY}_pseudotime"]))[-1]), 5] = np.inf
    lazy = fitted.copy()
    lazy.X = da.from_array(values, chunks=(100, -1))
    before = (sorted(lazy.uns), list(lazy.var.columns), sorted(lazy.varm))
    with pytest.raises(ValueError, match="NaN or infinite"):
        sks.tl.association_test(lazy, KEY)
    assert (sorted(lazy.uns), list(lazy.var.columns), sorted(lazy.varm)) == before


def test_large_chunks_are_summarised_in_pieces(fitted, monkeypatch):
    memory = _call("association_test", fitted.copy())
    monkeypatch.setattr(passes, "CHUNK_ELEMENTS", 5_000)  # pieces of 25 cells inside chunks of 500
    lazy = fitted.copy()
    lazy.X = da.from_array(np.asarray(fitted.X), chunks=(500, -1))
    _call("association_test", lazy)
    _assert_same(lazy, memory)


def test_tools_without_a_chunked_path_refuse_a_dask_matrix(fitted):
    from scskeleton._anndata.inputs import get_features

    lazy = fitted.copy()
    lazy.X = da.from_array(np.asarray(fitted.X), chunks=(100, -1))
    with pytest.raises(TypeError, match="no chunked path"):
        get_features(lazy, layer=None)  # what tl.fsl reads: it weights the genes in memory


def test_branch_test_on_a_local_cluster_of_two_workers(fitted):
    distributed = pytest.importorskip("distributed")
    small = fitted[:, :60].copy()
    memory = _call("branch_test", small.copy())
    lazy = small.copy()
    lazy.X = da.from_array(np.asarray(small.X), chunks=(150, -1))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster):
        _call("branch_test", lazy)
    _assert_same(lazy, memory)


def test_in_memory_tests_run_without_dask():
    # dask is an optional extra: with it made unimportable, the tests must still run on numpy input
    code = (
        "import sys\n"
        "for name in ('dask', 'distributed'):\n"
        "    sys.modules[name] = None\n"
        "import numpy as np, scanpy as sc, scskeleton as sks\n"
        "a = sks.datasets.branching_expression(300, 100, random_state=0)\n"
        "sc.pp.pca(a, n_comps=5); sks.tl.ddrtree(a)\n"
        "sks.tl.root(a, 'ddrtree', obs_min='true_pseudotime'); sks.tl.pseudotime(a, 'ddrtree')\n"
        "sks.tl.association_test(a, 'ddrtree')\n"
        "fork = int(a.uns['ddrtree']['branch_points'][0])\n"
        "sks.tl.branch_test(a, 'ddrtree', branch_point=fork)\n"
        "print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("ok")
