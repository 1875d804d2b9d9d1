import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

import scskeleton as sks


@pytest.fixture(scope="module")
def simulated():
    return sks.datasets.simulate_trajectory(1000, n_fates=3, random_state=0)


def test_simulate_counts_and_truth(simulated):
    adata = simulated
    assert adata.shape == (1000, 2000)
    assert sparse.issparse(adata.X) and adata.X.format == "csr" and adata.X.dtype == np.float32
    np.testing.assert_array_equal(adata.X.data, np.round(adata.X.data))
    assert adata.X.data.min() >= 1  # only non-zeros stored
    assert (adata.layers["counts"] != adata.X).nnz == 0 and adata.layers["counts"] is not adata.X
    totals = np.asarray(adata.X.sum(axis=1)).ravel()
    assert 4000 < np.median(totals) < 9000
    for key in ("true_pseudotime", "library_size"):
        assert adata.obs[key].dtype == np.float64 and np.isfinite(adata.obs[key]).all()
    for key in ("true_branch", "true_fate", "true_lineage"):
        assert isinstance(adata.obs[key].dtype, pd.CategoricalDtype)
    assert set(adata.var["true_program"].cat.categories) == {"branch", "transient", "constant"}
    constant = adata.var["true_program"] == "constant"
    assert (adata.var.loc[constant, "true_branch"] == "").all()
    assert (adata.var.loc[~constant, "true_branch"] != "").all()
    lfc = adata.varm["true_lfc"]
    assert lfc.shape == (2000, 5) and np.all(lfc[constant.to_numpy()] == 0)
    assert 0.05 < np.mean(lfc != 0) < 0.15  # about de_fraction of the genes per branch


@pytest.mark.parametrize("n_fates", [1, 2, 4, 6])
def test_simulate_tree_has_the_requested_fates(n_fates):
    adata = sks.datasets.simulate_trajectory(1000, n_fates=n_fates, n_genes=200, random_state=n_fates)
    info = adata.uns["simulate_trajectory"]
    assert info["n_fates"] == n_fates and info["n_branch_points"] == n_fates - 1
    assert len(info["branches"]) == 2 * n_fates - 1 == len(info["branch_parent"])
    counts = adata.obs["true_branch"].value_counts()
    assert counts.min() >= 40  # the 4 % floor: every branch, every fate observable
    assert adata.obs["true_fate"].nunique() == n_fates
    # Pseudotime runs from the root along each branch.
    start, length = info["branch_start_time"], info["branch_length"]
    code = adata.obs["true_branch"].cat.codes.to_numpy()
    time = adata.obs["true_pseudotime"].to_numpy()
    assert np.all(time >= start[code] - 1e-12) and np.all(time <= start[code] + length[code] + 1e-12)
    parent = info["branch_parent"]
    children = parent[parent >= 0]
    assert np.all(np.bincount(children, minlength=len(parent))[np.unique(children)] == 2)  # bifurcations only
    np.testing.assert_allclose(start[parent >= 0], (start + length)[children])


def test_simulate_is_deterministic(simulated):
    again = sks.datasets.simulate_trajectory(1000, n_fates=3, random_state=0, n_jobs=1)
    for field in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(simulated.X, field), getattr(again.X, field))
    pd.testing.assert_frame_equal(simulated.obs, again.obs)
    pd.testing.assert_frame_equal(simulated.var, again.var)
    other = sks.datasets.simulate_trajectory(1000, n_fates=3, random_state=1)
    assert (other.X != simulated.X).nnz > 0


def test_simulate_survives_h5ad(simulated, tmp_path):
    simulated.write_h5ad(tmp_path / "sim.h5ad")
    back = anndata.read_h5ad(tmp_path / "sim.h5ad")
    assert (back.X != simulated.X).nnz == 0 and back.X.dtype == np.float32
    pd.testing.assert_frame_equal(back.obs, simulated.obs)
    pd.testing.assert_frame_equal(back.var, simulated.var)
    np.testing.assert_array_equal(back.varm["true_lfc"], simulated.varm["true_lfc"])
    info, read = simulated.uns["simulate_trajectory"], back.uns["simulate_trajectory"]
    assert set(read) == set(info)
    np.testing.assert_array_equal(read["branch_parent"], info["branch_parent"])
    np.testing.assert_array_equal(read["branches"].astype(str), info["branches"])


def test_simulate_resolves_branches_after_scanpy_preprocessing(simulated):
    adata = simulated.copy()
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    labels = adata.obs["true_branch"].cat.codes
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    accuracy = cross_val_score(KNeighborsClassifier(15), adata.obsm["X_pca"], labels, cv=folds).mean()
    assert 0.8 <= accuracy < 0.995  # resolved, but the branches overlap near the forks


def test_simulate_cycle_returns_to_an_earlier_node():
    adata = sks.datasets.simulate_trajectory(800, n_fates=3, n_genes=300, cycle=True, random_state=4)
    info = adata.uns["simulate_trajectory"]
    kinds = list(info["branch_kind"])
    assert kinds.count("cycle") == 1 and info["n_branch_points"] == 2
    loop = kinds.index("cycle")
    assert info["branch_start_node"][loop] == info["cycle_from"] == info["fates"][-1]
    assert info["branch_end_node"][loop] == info["cycle_to"] != info["cycle_from"]
    # Along the loop the genes undo every change made between the node it rejoins and the tip.
    parent, end_node = info["branch_parent"], info["branch_end_node"]
    path, b = [], int(parent[loop])
    while b >= 0 and info["branch_start_node"][b] != info["cycle_to"]:
        path.append(b)
        b = int(parent[b])
    path.append(b)
    assert end_node[path[0]] == info["cycle_from"]
    lfc = adata.varm["true_lfc"].astype(np.float64)
    np.testing.assert_allclose(lfc[:, loop], -lfc[:, path].sum(axis=1), atol=1e-5)
    on_loop = adata.obs["true_branch"] == info["branches"][loop]
    assert on_loop.sum() > 0 and (adata.obs.loc[on_loop, "true_fate"] == info["cycle_from"]).all()
    tip_time = info["branch_start_time"][loop]
    assert (adata.obs.loc[on_loop, "true_pseudotime"] >= tip_time).all()


def test_simulate_disconnected_lineage_is_separate():
    adata = sks.datasets.simulate_trajectory(800, n_fates=2, n_genes=500, disconnected=True, random_state=5)
    info = adata.uns["simulate_trajectory"]
    assert list(adata.obs["true_lineage"].cat.categories) == ["lineage_1", "lineage_2"]
    second = (adata.obs["true_lineage"] == "lineage_2").to_numpy()
    assert second.sum() >= 32
    assert adata.obs.loc[second, "true_pseudotime"].min() < 0.2  # its own root
    assert (adata.var["true_program"] == "lineage").any()
    assert list(info["branch_kind"]).count("lineage") == 1 and info["n_branch_points"] == 1
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=10)
    x = adata.obsm["X_pca"]
    gap = np.sqrt(((x[second][:, None, :] - x[~second][None, :, :]) ** 2).sum(-1)).min()
    within = np.sort(np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)), axis=1)[:, 15]
    assert gap > 3 * np.median(within)  # far apart: a 15-NN graph keeps the lineages apart


def test_simulate_options_change_the_counts():
    base = sks.datasets.simulate_trajectory(500, n_genes=300, random_state=2)
    dropped = sks.datasets.simulate_trajectory(500, n_genes=300, dropout=0.5, random_state=2)
    assert dropped.X.nnz < base.X.nnz
    uniform = sks.datasets.simulate_trajectory(500, n_genes=300, density="uniform", random_state=2)
    info = uniform.uns["simulate_trajectory"]
    share = info["branch_n_cells"] / 500
    np.testing.assert_allclose(share, info["branch_length"] / info["branch_length"].sum(), atol=0.01)
    threaded = sks.datasets.simulate_trajectory(500, n_genes=300, random_state=2, n_jobs=3)
    assert (threaded.X != base.X).nnz == 0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_fates": 0}, "n_fates"),
        ({"n_fates": 9}, "n_fates"),
        ({"n_cells": 50}, "n_cells"),
        ({"dispersion": -0.1}, "dispersion"),
        ({"dropout": 1.0}, "dropout"),
        ({"library_size": 0}, "library_size"),
        ({"density": "dense"}, "density"),
        ({"de_fraction": 1.5}, "de_fraction"),
        ({"n_genes": 5}, "n_genes"),
        ({"cycle": "yes"}, "cycle"),
    ],
)
def test_simulate_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sks.datasets.simulate_trajectory(**{"n_cells": 500, **kwargs})


def test_dla_tree_ground_truth(tmp_path):
    adata = sks.datasets.dla_tree(1000, n_dims=20, n_branches=5, random_state=3)
    assert adata.shape == (1000, 20) and isinstance(adata.X, np.ndarray) and adata.X.dtype == np.float32
    info = adata.uns["dla_tree"]
    assert info["n_branch_points"] == 4 and info["n_tips"] == 5
    assert list(adata.obs["true_branch"].cat.categories) == [f"branch_{b}" for b in range(5)]
    assert adata.obs["true_branch"].value_counts().min() == 200
    parent, step = info["branch_parent"], info["branch_start_step"]
    assert parent[0] == -1 and np.all(parent[1:] >= 0) and np.all(parent[1:] < np.arange(1, 5))
    assert len({(p, s) for p, s in zip(parent[1:], step[1:])}) == 4  # distinct branch points
    assert np.all((step[1:] > 0) & (step[1:] < info["branch_length"][1:]))  # not at a root or a tip
    np.testing.assert_allclose(info["branch_start_time"][1:], info["branch_start_time"][parent[1:]] + step[1:])
    code = adata.obs["true_branch"].cat.codes.to_numpy()
    time = adata.obs["true_pseudotime"].to_numpy()
    assert np.all(time >= info["branch_start_time"][code])
    assert np.all(time <= info["branch_start_time"][code] + info["branch_length"][code])
    again = sks.datasets.dla_tree(1000, n_dims=20, n_branches=5, random_state=3)
    np.testing.assert_array_equal(adata.X, again.X)
    assert not np.array_equal(adata.X, sks.datasets.dla_tree(1000, n_dims=20, n_branches=5, random_state=4).X)
    adata.write_h5ad(tmp_path / "dla.h5ad")
    back = anndata.read_h5ad(tmp_path / "dla.h5ad")
    np.testing.assert_array_equal(back.X, adata.X)
    assert back.uns["dla_tree"]["n_branch_points"] == 4


def test_dla_tree_branches_are_resolved():
    adata = sks.datasets.dla_tree(1000, random_state=0)
    sc.pp.pca(adata, n_comps=20)
    folds = StratifiedKFold(5, shuffle=True, random_state=0)
    labels = adata.obs["true_branch"].cat.codes
    assert cross_val_score(KNeighborsClassifier(15), adata.obsm["X_pca"], labels, cv=folds).mean() > 0.85


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_branches": 0}, "n_branches"), ({"noise": -1.0}, "noise"), ({"branch_length": 1}, "branch_length"),
     ({"n_cells": 5}, "n_cells")],
)
def test_dla_tree_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sks.datasets.dla_tree(**{"n_cells": 100, **kwargs})


def test_cell_cycle_ground_truth(tmp_path):
    adata = sks.datasets.cell_cycle(400, n_genes=300, n_cycling=60, random_state=2)
    assert adata.shape == (400, 300) and adata.X.dtype == np.float32
    assert np.all(adata.X >= 0) and np.array_equal(adata.X, np.round(adata.X))  # counts
    phase = adata.obs["true_phase"].to_numpy()
    assert np.all((phase >= 0) & (phase < 2 * np.pi))
    assert adata.var["true_cycling"].sum() == 60 and adata.var["true_peak_phase"].isna().sum() == 240
    again = sks.datasets.cell_cycle(400, n_genes=300, n_cycling=60, random_state=2)
    np.testing.assert_array_equal(adata.X, again.X)
    assert not np.array_equal(adata.X, sks.datasets.cell_cycle(400, n_genes=300, n_cycling=60, random_state=3).X)
    skewed = sks.datasets.cell_cycle(2000, n_genes=20, n_cycling=10, phase_skew=2.0, random_state=0)
    assert np.mean(skewed.obs["true_phase"] > np.pi) > 0.7  # Beta(2, 1): crowded towards the end
    adata.write_h5ad(tmp_path / "cycle.h5ad")
    back = anndata.read_h5ad(tmp_path / "cycle.h5ad")
    np.testing.assert_array_equal(back.obs["true_phase"], phase)
    assert back.uns["cell_cycle"]["random_state"] == 2


def test_cell_cycle_is_a_ring_on_the_principal_components():
    """The phase goes round the first two principal components of the log-normalised counts."""
    adata = sks.datasets.cell_cycle(1000, random_state=0)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=10)
    angle = np.arctan2(adata.obsm["X_pca"][:, 1], adata.obsm["X_pca"][:, 0])
    # circular correlation between the angle on PCs 1–2 and the true phase (up to rotation and direction)
    turn = np.exp(1j * (angle - adata.obs["true_phase"].to_numpy()))
    back = np.exp(1j * (angle + adata.obs["true_phase"].to_numpy()))
    assert max(abs(turn.mean()), abs(back.mean())) > 0.9


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"n_cells": 5}, "n_cells"), ({"n_cycling": 0}, "n_cycling"), ({"n_cycling": 2000}, "n_cycling"),
     ({"amplitude": 0.0}, "amplitude"), ({"phase_skew": -1.0}, "phase_skew"), ({"dispersion": np.inf}, "dispersion")],
)
def test_cell_cycle_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sks.datasets.cell_cycle(**kwargs)
