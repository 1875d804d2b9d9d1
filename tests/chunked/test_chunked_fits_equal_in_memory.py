"""The chunked path: DDRTree, root and pseudotime on dask arrays equal the in-memory path."""

import subprocess
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

import anndata as ad  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton._core.trees.ddrtree import ddrtree  # noqa: E402
from scskeleton._dask.ddrtree import ddrtree_chunked  # noqa: E402


def _pipeline(adata, **kwargs):
    sks.tl.ddrtree(adata, **kwargs)
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    return adata


def _same_fit(first, second):
    """Two DDRTree results that ran the same iterations: objective, centers and tree agree to round-off."""
    assert first.n_iter == second.n_iter
    np.testing.assert_allclose(first.objective, second.objective, rtol=1e-8, atol=0)
    np.testing.assert_allclose(first.centers, second.centers, rtol=1e-7, atol=1e-9 * np.abs(first.centers).max())
    assert (first.tree != second.tree).nnz == 0


@pytest.fixture(scope="module")
def large():
    adata = sks.datasets.branching(100_000, n_leaves=3, n_dims=30, random_state=3)
    return np.asarray(adata.X, dtype=float), adata.obs["true_pseudotime"].to_numpy()


def test_chunked_fit_equals_in_memory_fit_on_1e5_cells(large):
    data, _ = large
    in_memory = ddrtree(data, prune=True, random_state=1)
    chunked = ddrtree_chunked(da.from_array(data, chunks=(16_384, -1)), prune=True, random_state=1)
    assert in_memory.n_iter > 3  # a real run, not a single step
    _same_fit(in_memory, chunked)
    np.testing.assert_allclose(chunked.latent.compute(), in_memory.latent, atol=1e-8 * np.abs(in_memory.latent).max())
    dense = in_memory.assignment.toarray() if hasattr(in_memory.assignment, "toarray") else in_memory.assignment
    np.testing.assert_allclose(chunked.assignment[:5_000].compute(), dense[:5_000], atol=1e-8)


def test_chunking_does_not_change_the_fit(large):
    data, _ = large
    part = data[:30_000]
    coarse = ddrtree_chunked(da.from_array(part, chunks=(30_000, -1)), random_state=0)
    fine = ddrtree_chunked(da.from_array(part, chunks=(1_111, 7)), random_state=0)  # columns rechunked whole
    _same_fit(coarse, fine)


def test_root_and_pseudotime_on_a_chunked_fit_equal_the_in_memory_ones():
    adata = sks.datasets.branching(20_000, n_leaves=3, random_state=5)
    adata.obsm["X_pca"] = np.asarray(adata.X[:, :20], dtype=float)
    lazy = adata.copy()
    lazy.obsm["X_pca"] = da.from_array(adata.obsm["X_pca"], chunks=(3_000, -1))
    _pipeline(adata)
    _pipeline(lazy)
    assert isinstance(lazy.obsm["X_ddrtree"], da.Array) and isinstance(lazy.obsm["ddrtree_assignment"], da.Array)
    assert lazy.uns["ddrtree"]["root"] == adata.uns["ddrtree"]["root"]
    np.testing.assert_array_equal(lazy.uns["ddrtree"]["branch_points"], adata.uns["ddrtree"]["branch_points"])
    np.testing.assert_allclose(lazy.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"], atol=1e-9)
    assert (lazy.obs["ddrtree_segment"] == adata.obs["ddrtree_segment"]).all()
    # the tree is right, not only equal: n_leaves - 1 forks, pseudotime follows the truth
    assert len(adata.uns["ddrtree"]["branch_points"]) == 2
    rho = np.corrcoef(
        np.argsort(np.argsort(lazy.obs["ddrtree_pseudotime"])), np.argsort(np.argsort(lazy.obs["true_pseudotime"]))
    )[0, 1]
    assert rho > 0.97
    # a path and a group root read the lazy assignment by rows
    frame = sks.tl.path(lazy, "ddrtree", "root", "tip 1")
    assert frame["position"].is_monotonic_increasing and len(frame) > 1_000


def test_lazy_results_are_written_and_read_back(tmp_path):
    adata = sks.datasets.branching(3_000, n_leaves=2, random_state=2)
    adata.obsm["X_pca"] = da.from_array(np.asarray(adata.X[:, :10], dtype=float), chunks=(500, -1))
    _pipeline(adata)
    expected_latent = adata.obsm["X_ddrtree"].compute()
    expected_assignment = adata.obsm["ddrtree_assignment"].compute()
    np.testing.assert_allclose(expected_assignment.sum(axis=1), 1.0)
    adata.write_zarr(tmp_path / "fit.zarr")
    adata.write_h5ad(tmp_path / "fit.h5ad")
    for back in (ad.read_zarr(tmp_path / "fit.zarr"), ad.read_h5ad(tmp_path / "fit.h5ad")):
        np.testing.assert_array_equal(np.asarray(back.obsm["X_ddrtree"]), expected_latent)
        np.testing.assert_array_equal(np.asarray(back.obsm["ddrtree_assignment"]), expected_assignment)
        np.testing.assert_array_equal(back.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"])
        sks.tl.pseudotime(back, "ddrtree")  # the stored fit is usable as read
        np.testing.assert_allclose(back.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"], atol=1e-12)


def test_non_finite_lazy_input_is_refused_and_adata_unchanged():
    adata = sks.datasets.branching(500, n_leaves=2, random_state=0)
    values = np.asarray(adata.X[:, :5], dtype=float)
    values[123, 2] = np.nan
    adata.obsm["X_pca"] = da.from_array(values, chunks=(100, -1))
    before = set(adata.uns), set(adata.obsm)
    with pytest.raises(ValueError, match="NaN or infinite"):
        sks.tl.ddrtree(adata)
    assert (set(adata.uns), set(adata.obsm)) == before


def test_fit_on_a_local_cluster_of_two_workers():
    distributed = pytest.importorskip("distributed")
    adata = sks.datasets.branching(4_000, n_leaves=3, random_state=4)
    values = np.asarray(adata.X[:, :10], dtype=float)
    expected = ddrtree(values, prune=True)
    adata.obsm["X_pca"] = da.from_array(values, chunks=(1_000, -1))
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster):
        _pipeline(adata)
        np.testing.assert_allclose(adata.uns["ddrtree"]["objective"], expected.objective, rtol=1e-8)
        assert np.isfinite(adata.obs["ddrtree_pseudotime"]).all()


def test_in_memory_path_runs_without_dask():
    # dask is an optional extra: with it made unimportable, numpy input must still fit end to end
    code = (
        "import sys\n"
        "for name in ('dask', 'distributed'):\n"
        "    sys.modules[name] = None\n"
        "import numpy as np, scskeleton as sks\n"
        "a = sks.datasets.branching(400, n_leaves=2, random_state=0)\n"
        "a.obsm['X_pca'] = np.asarray(a.X[:, :10])\n"
        "sks.tl.ddrtree(a); sks.tl.root(a, 'ddrtree', obs_min='true_pseudotime'); sks.tl.pseudotime(a, 'ddrtree')\n"
        "sks.tl.rpg(a); sks.tl.root(a, 'rpg', obs_min='true_pseudotime'); sks.tl.pseudotime(a, 'rpg')\n"
        "print('ok')\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("ok")


@pytest.mark.parametrize("graph", ["tree", "l1"])
def test_chunked_principal_graph_equals_in_memory(graph):
    adata = sks.datasets.branching(6_000 if graph == "tree" else 2_000, n_leaves=3, random_state=6)
    adata.obsm["X_pca"] = np.asarray(adata.X[:, :15], dtype=float)
    lazy = adata.copy()
    lazy.obsm["X_pca"] = da.from_array(adata.obsm["X_pca"], chunks=(700, -1))
    fit = sks.tl.rpg if graph == "tree" else sks.tl.rpg_l1
    key = "rpg" if graph == "tree" else "rpg_l1"
    for each in (adata, lazy):
        fit(each)
        sks.tl.root(each, key, obs_min="true_pseudotime")
        sks.tl.pseudotime(each, key)
    assert isinstance(lazy.obsm[f"{key}_assignment"], da.Array)
    np.testing.assert_allclose(lazy.uns[key]["objective"], adata.uns[key]["objective"], rtol=1e-8)
    chunked, in_memory = sks._anndata.schema.read_graph(lazy, key).adjacency, sks._anndata.schema.read_graph(adata, key).adjacency
    # the same edges; the ℓ1 graph's weights come from an interior-point method, which carries the
    # round-off of summing over blocks of cells into the last digits
    assert ((chunked != 0) != (in_memory != 0)).nnz == 0
    np.testing.assert_allclose(chunked.toarray(), in_memory.toarray(), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(lazy.obs[f"{key}_pseudotime"], adata.obs[f"{key}_pseudotime"], atol=1e-9)
    assert (lazy.obs[f"{key}_segment"] == adata.obs[f"{key}_segment"]).all()


@pytest.mark.parametrize("name", ["circle", "distorted_s"])
def test_chunked_l1_graph_reads_sampling_gaps_as_in_memory(name):
    """The rings and curves that are closed or joined across a gap sampling explains (the cells'
    profiles along the candidate edges are summed over blocks)."""
    adata = getattr(sks.datasets, name)(100, random_state=1)
    lazy = adata.copy()
    lazy.obsm["X_pca"] = da.from_array(np.asarray(adata.obsm["X_pca"]), chunks=(30, -1))
    for each in (adata, lazy):
        sks.tl.rpg_l1(each)
    chunked, in_memory = lazy.uns["rpg_l1"]["adjacency"], adata.uns["rpg_l1"]["adjacency"]
    assert ((chunked != 0) != (in_memory != 0)).nnz == 0
    assert in_memory.nnz // 2 - in_memory.shape[0] + 1 == (1 if name == "circle" else 0)
    if name == "circle":  # the phase round the loop, read from cells projected block by block
        for each in (adata, lazy):
            sks.tl.root(each, "rpg_l1", obs_min="true_angle")
            sks.tl.phase(each, "rpg_l1")
        np.testing.assert_allclose(lazy.obs["rpg_l1_phase"], adata.obs["rpg_l1_phase"], atol=1e-9)
        # genes round the loop from a chunked matrix, as from memory
        values = np.column_stack([np.sin(adata.obs["true_angle"]), np.random.default_rng(0).normal(size=100)])
        adata.X, lazy.X = values, da.from_array(values, chunks=(30, -1))
        for each in (adata, lazy):
            sks.tl.trends(each, "rpg_l1", loop=True)
        np.testing.assert_allclose(lazy.var["rpg_l1_trends_pval"], adata.var["rpg_l1_trends_pval"], rtol=1e-9)


def test_cli_fits_a_zarr_store_and_a_chunked_h5ad_like_the_in_memory_fit(tmp_path):
    from scskeleton.cli import main

    adata = sks.datasets.branching(3_000, n_leaves=3, random_state=8)
    adata.obsm["X_pca"] = np.asarray(adata.X[:, :15], dtype=float)
    adata.obs["start"] = np.where(adata.obs["true_pseudotime"] < 0.05, "yes", "no")
    adata.write_zarr(tmp_path / "in.zarr")
    adata.write_h5ad(tmp_path / "in.h5ad")
    common = ["--root-group", "start=yes"]
    assert main(["fit", str(tmp_path / "in.h5ad"), "--out", str(tmp_path / "memory.h5ad"), *common]) == 0
    assert main(["fit", str(tmp_path / "in.zarr"), "--out", str(tmp_path / "lazy.zarr"), *common]) == 0
    assert main(["fit", str(tmp_path / "in.h5ad"), "--chunks", "700", "--out", str(tmp_path / "chunked.h5ad"), *common]) == 0
    expected = ad.read_h5ad(tmp_path / "memory.h5ad")
    for back in (ad.read_zarr(tmp_path / "lazy.zarr"), ad.read_h5ad(tmp_path / "chunked.h5ad")):
        np.testing.assert_allclose(back.uns["ddrtree"]["objective"], expected.uns["ddrtree"]["objective"], rtol=1e-8)
        np.testing.assert_allclose(back.obs["ddrtree_pseudotime"], expected.obs["ddrtree_pseudotime"], atol=1e-9)
        np.testing.assert_array_equal(np.asarray(back.X), np.asarray(expected.X))  # the input travels along
    # a second run replaces the store only once the new one is complete
    assert main(["fit", str(tmp_path / "in.zarr"), "--out", str(tmp_path / "lazy.zarr"), *common]) == 0
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_cli_refuses_chunks_for_a_learner_that_needs_memory(tmp_path, capsys):
    from scskeleton.cli import main

    adata = sks.datasets.branching(300, n_leaves=2, random_state=0)
    adata.write_h5ad(tmp_path / "in.h5ad")
    status = main(["fit", str(tmp_path / "in.h5ad"), "--method", "mpme", "--chunks", "100", "--out",
                   str(tmp_path / "out.h5ad")])
    assert status != 0 and "--chunks" in capsys.readouterr().err
    assert not (tmp_path / "out.h5ad").exists()
