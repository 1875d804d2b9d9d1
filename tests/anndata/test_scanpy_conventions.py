"""scanpy conventions shared by the tools and plots: ``copy=``, ``random_state``, ``use_rep=None``, one
learner ``key``, ``components``/``dimensions``, ``neighbors_key``, ``layer``/``use_raw``/``gene_symbols``."""

import inspect

import anndata
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse

import scskeleton as sks
from scskeleton._anndata.inputs import check_random_state, choose_representation, neighbors_edges
from scskeleton._anndata.schema import LEARNER_METHODS, learner_keys, resolve_key
from scskeleton._core.graphs import knn_edges
from scskeleton.pl._labels import METHOD_NAMES
from scskeleton.pl._scatter import plot_dimensions


@pytest.fixture(scope="module")
def fitted():
    """A small fitted RPG tree (no root yet); copy before mutating."""
    adata = sks.datasets.branching(300, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    sks.tl.rpg(adata, n_nodes=20)
    return adata


def _assert_same(left: anndata.AnnData, right: anndata.AnnData) -> None:
    pd.testing.assert_frame_equal(left.obs, right.obs)
    assert left.uns.keys() == right.uns.keys()
    for key in left.uns["rpg"]:
        a, b = left.uns["rpg"][key], right.uns["rpg"][key]
        if isinstance(a, dict):
            assert a.keys() == b.keys()
        elif hasattr(a, "toarray"):
            np.testing.assert_array_equal(a.toarray(), b.toarray())
        else:
            np.testing.assert_array_equal(a, b)


def test_root_copy_leaves_input_untouched(fitted):
    adata = fitted.copy()
    result = sks.tl.root(adata, "rpg", obs_min="true_pseudotime", copy=True)
    assert isinstance(result, anndata.AnnData) and result is not adata
    assert "root" not in adata.uns["rpg"]
    in_place = fitted.copy()
    assert sks.tl.root(in_place, "rpg", obs_min="true_pseudotime") is None
    assert result.uns["rpg"]["root"] == in_place.uns["rpg"]["root"]
    _assert_same(result, in_place)


def test_pseudotime_copy_leaves_input_untouched(fitted):
    adata = fitted.copy()
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    columns, fields = list(adata.obs.columns), set(adata.uns["rpg"])
    result = sks.tl.pseudotime(adata, "rpg", copy=True)
    assert isinstance(result, anndata.AnnData) and result is not adata
    assert list(adata.obs.columns) == columns and set(adata.uns["rpg"]) == fields
    assert "rpg_pseudotime" in result.obs
    assert sks.tl.pseudotime(adata, "rpg") is None
    _assert_same(result, adata)


def test_random_state_none_runs_and_records_an_int(fitted):
    adata = fitted.copy()
    sks.tl.rpg(adata, n_nodes=20, random_state=None)
    seed = adata.uns["rpg"]["params"]["random_state"]
    assert isinstance(seed, int) and seed >= 0
    again = fitted.copy()
    sks.tl.rpg(again, n_nodes=20, random_state=seed)  # the recorded seed reproduces the result
    np.testing.assert_array_equal(adata.uns["rpg"]["nodes"], again.uns["rpg"]["nodes"])


def test_random_state_generator_equals_the_int_it_draws(fitted):
    seed = int(np.random.default_rng(7).integers(2**32))
    from_generator = sks.tl.rpg(fitted, n_nodes=20, random_state=np.random.default_rng(7), copy=True)
    from_int = sks.tl.rpg(fitted, n_nodes=20, random_state=seed, copy=True)
    assert from_generator.uns["rpg"]["params"]["random_state"] == seed
    np.testing.assert_array_equal(from_generator.uns["rpg"]["nodes"], from_int.uns["rpg"]["nodes"])
    twice = sks.tl.rpg(fitted, n_nodes=20, random_state=np.random.default_rng(7), copy=True)
    np.testing.assert_array_equal(from_generator.uns["rpg"]["nodes"], twice.uns["rpg"]["nodes"])


def test_check_random_state_resolves_to_storable_ints():
    assert check_random_state(3) == 3 and check_random_state(np.int64(3)) == 3
    assert check_random_state(np.random.RandomState(0)) == check_random_state(np.random.RandomState(0))
    for value in (None, np.random.default_rng(0), np.random.RandomState(0)):
        seed = check_random_state(value)
        assert type(seed) is int and 0 <= seed < 2**32


@pytest.mark.parametrize("bad", ["abc", -1, 1.5, True])
def test_bad_random_state_is_rejected(fitted, bad):
    adata = fitted.copy()
    before = adata.uns["rpg"]["nodes"].copy()
    with pytest.raises(ValueError, match="random_state"):
        sks.tl.rpg(adata, n_nodes=20, random_state=bad)
    np.testing.assert_array_equal(adata.uns["rpg"]["nodes"], before)


def test_use_rep_none_uses_x_pca_when_present_else_x(fitted):
    with_pca = sks.tl.rpg(fitted, use_rep=None, n_nodes=20, copy=True)
    assert with_pca.uns["rpg"]["params"]["use_rep"] == "X_pca"
    np.testing.assert_array_equal(with_pca.uns["rpg"]["nodes"], fitted.uns["rpg"]["nodes"])

    without = anndata.AnnData(X=fitted.obsm["X_pca"].copy())
    sks.tl.rpg(without, use_rep=None, n_nodes=20)
    assert without.uns["rpg"]["params"]["use_rep"] == "X"
    assert without.uns["rpg"]["space"] == "X"
    np.testing.assert_allclose(without.uns["rpg"]["nodes"], fitted.uns["rpg"]["nodes"])


def test_choose_representation():
    adata = anndata.AnnData(X=np.zeros((3, 2)))
    assert choose_representation(adata, None) == "X"
    adata.obsm["X_pca"] = np.zeros((3, 1))
    assert choose_representation(adata, None) == "X_pca"
    assert choose_representation(adata, "X") == "X"
    with pytest.raises(ValueError, match="use_rep"):
        choose_representation(adata, 3)


def test_results_with_resolved_conventions_survive_h5ad(fitted, tmp_path):
    adata = sks.tl.rpg(fitted, use_rep=None, n_nodes=20, random_state=np.random.default_rng(1), copy=True)
    adata.write_h5ad(tmp_path / "a.h5ad")
    params = anndata.read_h5ad(tmp_path / "a.h5ad").uns["rpg"]["params"]
    assert params["use_rep"] == "X_pca" and int(params["random_state"]) == adata.uns["rpg"]["params"]["random_state"]


# --- (a) one learner key, resolved the same way by every tool and plot ---------------------------------------------

#: Every public function that takes a learner key, and the name of its AnnData argument.
KEYED = [
    *[(getattr(sks.tl, name), "adata") for name in (
        "root", "pseudotime", "path", "milestones", "rename_milestones", "fate_probabilities", "trends",
        "branch_test", "fork_test", "association_test", "activation", "subset_tree", "cleanup", "branch_support")],
    (sks.tl.project, "adata_ref"),
    *[(getattr(sks.pl, name), "adata") for name in (
        "tree", "pseudotime", "dendrogram", "fates", "adjacency", "convergence", "cell_graph")],
]
KEY_DOC = "Key of the fitted skeleton in ``adata"


@pytest.mark.parametrize("function, data", KEYED, ids=[f"{f.__module__.split('.')[1]}.{f.__name__}" for f, _ in KEYED])
def test_every_learner_key_defaults_to_none_and_is_documented_once(function, data):
    parameters = list(inspect.signature(function).parameters.values())
    names = [p.name for p in parameters]
    key = parameters[names.index("key")]
    assert key.default is None and key.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert names.index("key") == names.index(data) + 1  # still the second positional argument
    assert function.__doc__.count(KEY_DOC) == 1


def test_learner_methods_are_the_ones_plots_name():
    assert set(LEARNER_METHODS) == set(METHOD_NAMES)


def _trajectory(adata):
    sks.tl.root(adata, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata)
    return adata


def test_key_none_uses_the_only_fitted_skeleton(fitted):
    adata = _trajectory(fitted.copy())
    named = _trajectory(fitted.copy())
    pd.testing.assert_frame_equal(adata.obs, named.obs)
    assert adata.uns["rpg"]["root"] == named.uns["rpg"]["root"]
    sks.tl.fate_probabilities(adata)
    sks.tl.milestones(adata)
    sks.tl.trends(adata, segment="0", genes=["feature_0"])  # a gene-level result is no learner key
    assert learner_keys(adata) == ["rpg"] and resolve_key(adata, None) == "rpg"
    end = str(adata.uns["rpg"]["milestones"]["names"][-1])
    pd.testing.assert_frame_equal(sks.tl.path(adata, start="root", end=end), sks.tl.path(adata, "rpg", "root", end))
    for plot in (sks.pl.tree, sks.pl.pseudotime, sks.pl.dendrogram, sks.pl.fates, sks.pl.adjacency,
                 sks.pl.convergence):
        assert plot(adata, show=False) is not None
    assert plot(adata, "rpg", show=False) is not None  # positionally, as before


def test_key_none_without_a_skeleton_says_to_fit_one():
    adata = sks.datasets.circle(30)
    before = adata.copy()
    for call in (lambda: sks.tl.root(adata, node=0), lambda: sks.tl.pseudotime(adata),
                 lambda: sks.pl.tree(adata, show=False), lambda: sks.pl.cell_graph(adata, show=False)):
        with pytest.raises(KeyError, match=r"run a learner first, e\.g\. sks\.tl\.ddrtree"):
            call()
    assert adata.uns.keys() == before.uns.keys() and adata.obs.equals(before.obs)


def test_key_none_with_several_skeletons_asks_for_key(fitted):
    adata = _trajectory(fitted.copy())
    adata.uns["second"] = {**adata.uns["rpg"], "method": "ddrtree"}
    obs, fields = adata.obs.copy(), set(adata.uns["rpg"])
    for call in (lambda: sks.tl.root(adata, node=0), lambda: sks.tl.pseudotime(adata),
                 lambda: sks.tl.fate_probabilities(adata), lambda: sks.pl.tree(adata, show=False),
                 lambda: sks.tl.project(adata.copy(), adata)):
        with pytest.raises(ValueError, match=r"2 fitted skeletons, \['rpg', 'second'\]; pass key="):
            call()
    pd.testing.assert_frame_equal(adata.obs, obs)
    assert set(adata.uns["rpg"]) == fields and "fates" not in adata.uns["rpg"]
    sks.tl.pseudotime(adata, key="rpg")  # naming one works


def test_pl_default_key_still_draws_a_lone_ddrtree():
    adata = sks.datasets.branching(200, n_leaves=2, n_dims=5, random_state=0)
    sc.pp.pca(adata, n_comps=4)
    sks.tl.ddrtree(adata, n_centers=15)
    assert resolve_key(adata, None) == "ddrtree"  # what pl's old default key="ddrtree" named
    assert sks.pl.tree(adata, show=False).get_title() == sks.pl.tree(adata, "ddrtree", show=False).get_title()


def test_bad_key_type_is_refused(fitted):
    with pytest.raises(ValueError, match="key must be"):
        sks.tl.rename_milestones(fitted.copy(), {"tip 1": "A"})


# --- (b) random_state: None, an int or a Generator, datasets included ------------------------------------------------

#: Every generator, at a size that takes milliseconds.
DATASETS = {
    "blobs": dict(n_cells=30), "branching": dict(n_cells=40, n_dims=5),
    "branching_expression": dict(n_cells=40, n_genes=20, n_branch_genes=4, n_trend_genes=4),
    "cell_cycle": dict(n_cells=30, n_genes=20, n_cycling=5),
    "circle": dict(n_cells=20), "distorted_s": dict(n_cells=20),
    "dla_tree": dict(n_cells=60, n_dims=5, n_branches=2, branch_length=20),
    "line_and_circle": dict(n_line=10, n_circle=10), "moons": dict(n_cells=20),
    "noisy_moons": dict(n_cells=20, n_noise=3),
    "simulate_trajectory": dict(n_cells=300, n_genes=50, n_fates=2, n_jobs=1),
    "sine_surface": dict(n_cells=20), "spiral": dict(n_cells=20), "swiss_roll": dict(n_cells=20),
    "three_clusters": dict(n_cells=30), "toy_tree": dict(n_cells=30),
}


def _values(adata):
    return adata.X.toarray() if sparse.issparse(adata.X) else np.asarray(adata.X)


def _stored_seed(adata):
    """The random_state a generator stored with its parameters (None when it stores none)."""
    for entry in adata.uns.values():
        if isinstance(entry, dict):
            for where in (entry, entry.get("params", {})):
                if "random_state" in where:
                    return where["random_state"]
    return None


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_datasets_take_none_int_or_generator(name, tmp_path):
    generate, kwargs = getattr(sks.datasets, name), DATASETS[name]
    assert set(sks.datasets.__all__) - {"krumsiek11", "toggleswitch"} == set(DATASETS)
    seed = int(np.random.default_rng(7).integers(2**32))
    from_generator = generate(**kwargs, random_state=np.random.default_rng(7))
    np.testing.assert_array_equal(_values(from_generator), _values(generate(**kwargs, random_state=seed)))
    fresh = generate(**kwargs, random_state=None)
    for adata, expected in ((from_generator, seed), (fresh, None)):
        stored = _stored_seed(adata)
        if stored is not None:
            assert type(stored) is int and (expected is None or stored == expected)
            # the stored seed reproduces the data
            np.testing.assert_array_equal(_values(adata), _values(generate(**kwargs, random_state=stored)))
        adata.write_h5ad(tmp_path / "d.h5ad")  # a Generator is never what gets stored
        back = anndata.read_h5ad(tmp_path / "d.h5ad")
        assert _stored_seed(back) == stored


@pytest.mark.parametrize("bad", ["abc", -1, 1.5, True])
def test_datasets_refuse_bad_random_state(bad):
    with pytest.raises(ValueError, match="random_state"):
        sks.datasets.branching(40, n_dims=5, random_state=bad)


# --- (c) components (1-based, scanpy) and dimensions (0-based) ------------------------------------------------------


def test_plot_dimensions_reads_components_and_dimensions_as_scanpy():
    assert plot_dimensions(None, None, n_columns=3, basis="b") == [(0, 1)]
    assert plot_dimensions("2,3", None, n_columns=3, basis="b") == [(1, 2)]
    assert plot_dimensions(["1,2", "2,3"], None, n_columns=3, basis="b") == [(0, 1), (1, 2)]
    assert plot_dimensions("all", None, n_columns=3, basis="b") == [(0, 1), (0, 2), (1, 2)]
    assert plot_dimensions(None, (1, 2), n_columns=3, basis="b") == [(1, 2)]
    assert plot_dimensions(None, [(0, 1), (0, 2)], n_columns=3, basis="b") == [(0, 1), (0, 2)]
    with pytest.warns(FutureWarning, match="dimensions="):  # the old 0-based pair keeps its meaning
        assert plot_dimensions((0, 2), None, n_columns=3, basis="b") == [(0, 2)]
    for components, dimensions, message in (("1,4", None, "1..3"), ("0,1", None, "1..3"), (None, (0, 3), r"\[0, 2\]"),
                                            (None, (1, 1), "distinct"), ("1;2", None, "'1,2'"),
                                            (None, "0,1", "pair"), ("1,2", (0, 1), "not both")):
        with pytest.raises(ValueError, match=message):
            plot_dimensions(components, dimensions, n_columns=3, basis="b")


def _offsets(ax):
    """The drawn cells' positions, in a fixed order (scanpy draws cells coloured by a number sorted by it)."""
    points = np.asarray(ax.collections[0].get_offsets(), dtype=float)
    return points[np.lexsort(points.T[::-1])]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_every_basis_plot_takes_components_and_dimensions(fitted):
    adata = _trajectory(fitted.copy())
    sks.tl.fate_probabilities(adata)
    sks.tl.trends(adata, segment="0", genes=["feature_0"])
    for plot, extra in ((sks.pl.tree, {}), (sks.pl.fates, {"fates": str(adata.uns["rpg"]["fates"][0])}),
                        (sks.pl.path, {"key": "rpg_trends"})):
        one = plot(adata, components="2,3", show=False, **extra)
        same = plot(adata, dimensions=(1, 2), show=False, **extra)
        np.testing.assert_array_equal(_offsets(one), _offsets(same))
        assert (one.get_xlabel(), one.get_ylabel()) == ("PC2", "PC3")  # scanpy's spelling
        with pytest.warns(FutureWarning):
            legacy = plot(adata, components=(1, 2), show=False, **extra)
        np.testing.assert_array_equal(_offsets(legacy), _offsets(same))
        panels = plot(adata, components=["1,2", "2,3"], show=False, **extra)
        assert len(panels) == 2 and panels[1].get_xlabel() == "PC2"
        with pytest.raises(ValueError, match="not both"):
            plot(adata, components="1,2", dimensions=(0, 1), show=False, **extra)
    colors = sks.pl.tree(adata, color=["true_pseudotime", "rpg_segment"], components=["1,2", "2,3"], show=False)
    assert [ax.get_xlabel()[-1] for ax in colors] == ["1", "2"]
    with pytest.raises(ValueError, match="cannot be paired"):
        sks.pl.tree(adata, color=["true_pseudotime", "rpg_segment"], components="all", show=False)


def test_cell_graph_takes_components_and_dimensions():
    adata = sks.datasets.swiss_roll(60, random_state=0)
    adata.obsm["X_pca"] = np.asarray(adata.X, dtype=float)
    sks.tl.mpme(adata, n_components=3)
    panels = sks.pl.cell_graph(adata, color="true_t", components=["1,2", "1,3"], show=False)
    expected = adata.obsm["X_mpme"][:, [0, 2]]
    expected = expected[np.lexsort(expected.T[::-1])]
    np.testing.assert_array_equal(_offsets(panels[1]), expected)
    np.testing.assert_array_equal(_offsets(sks.pl.cell_graph(adata, dimensions=(0, 2), show=False)), expected)
    with pytest.raises(ValueError, match="1..3"):
        sks.pl.cell_graph(adata, components="1,4", show=False)


# --- (d) neighbors_key: the cell-level learners reuse sc.pp.neighbors' graph -----------------------------------------


@pytest.fixture(scope="module")
def with_neighbors():
    adata = sks.datasets.distorted_s(80, random_state=0)
    # 11 with the cell itself: the 10 nearest others, the kNN graph SPL builds by default (exact below 4,096 cells)
    sc.pp.neighbors(adata, n_neighbors=11, use_rep="X_pca")
    sc.pp.neighbors(adata, n_neighbors=11, use_rep="X_pca", key_added="nn")
    return adata


def test_neighbors_edges_are_the_symmetrised_knn_graph(with_neighbors):
    adata = with_neighbors
    edges = neighbors_edges(adata, "neighbors", n_neighbors=None, n_landmarks=None, method="SPL")
    np.testing.assert_array_equal(edges, knn_edges(np.asarray(adata.obsm["X_pca"]), 10))
    np.testing.assert_array_equal(neighbors_edges(adata, "nn", n_neighbors=None, n_landmarks=None, method="SPL"),
                                  edges)
    assert neighbors_edges(adata, None, n_neighbors=5, n_landmarks=None, method="SPL") is None


def test_spl_on_the_neighbors_graph_equals_its_own(with_neighbors):
    reused = sks.tl.spl(with_neighbors, neighbors_key="neighbors", copy=True)
    own = sks.tl.spl(with_neighbors, copy=True)
    np.testing.assert_allclose(reused.obsm["X_spl"], own.obsm["X_spl"])
    assert reused.uns["spl"]["params"]["neighbors_key"] == "neighbors"
    assert reused.uns["spl"]["params"]["n_neighbors"] == own.uns["spl"]["params"]["n_neighbors"] == 10
    assert "neighbors_key" not in own.uns["spl"]["params"]


def test_mpme_and_esl_take_neighbors_key(with_neighbors):
    mpme = sks.tl.mpme(with_neighbors, neighbors_key="nn", copy=True)
    same = sks.tl.mpme(with_neighbors, n_neighbors=10, copy=True)
    np.testing.assert_allclose(mpme.obsm["X_mpme"], same.obsm["X_mpme"])
    assert mpme.uns["mpme"]["params"]["neighbors_key"] == "nn"
    esl = sks.tl.esl(with_neighbors, neighbors_key="neighbors", perplexity=5, copy=True)
    np.testing.assert_allclose(esl.obsm["X_esl"], sks.tl.esl(with_neighbors, n_neighbors=10, perplexity=5,
                                                             copy=True).obsm["X_esl"])


@pytest.mark.parametrize("learner", ["spl", "mpme", "esl"])
def test_bad_neighbors_key_fails_early_and_leaves_adata(with_neighbors, learner):
    adata = with_neighbors.copy()
    fit = getattr(sks.tl, learner)
    with pytest.raises(KeyError, match=r"sc\.pp\.neighbors\(adata, key_added='missing'\)"):
        fit(adata, neighbors_key="missing")
    with pytest.raises(ValueError, match="not both"):
        fit(adata, neighbors_key="neighbors", n_neighbors=5)
    with pytest.raises(ValueError, match="landmarks"):
        fit(adata, neighbors_key="neighbors", n_landmarks=20)
    stale = adata.copy()  # a graph of other cells, as old scanpy kept it in uns
    stale.uns["old"] = {"distances": sparse.random(10, 10, density=0.3, format="csr")}
    with pytest.raises(ValueError, match=r"shape \(10, 10\), but adata has 80 cells"):
        fit(stale, neighbors_key="old")
    assert learner not in adata.uns and f"X_{learner}" not in adata.obsm and set(adata.obsp) == set(
        with_neighbors.obsp)
    if learner == "esl":
        with pytest.raises(ValueError, match="perplexity"):
            fit(adata, neighbors_key="neighbors")  # 30 > the 10 neighbours every cell has
        assert "esl" not in adata.uns


# --- (e) layer / use_raw / gene_symbols: the same in tools and plots; what is fitted is plotted ----------------------


@pytest.fixture(scope="module")
def genes():
    adata = sks.datasets.branching_expression(300, 30, n_branch_genes=5, n_trend_genes=5, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    sks.tl.rpg(adata, n_nodes=15)
    _trajectory(adata)
    adata.raw = adata.copy()
    adata.layers["unscaled"] = adata.X.copy()
    adata.X = adata.X * 2.0  # X now differs from raw, as scaled data do
    adata.var["symbol"] = [f"S{name}" for name in adata.var_names]
    return adata


@pytest.mark.parametrize("tool", ["trends", "branch_test", "fork_test", "association_test", "activation"])
def test_gene_tools_share_layer_use_raw_gene_symbols(tool):
    parameters = inspect.signature(getattr(sks.tl, tool)).parameters
    assert (parameters["layer"].default, parameters["use_raw"].default, parameters["gene_symbols"].default) == (
        None, False, None)


def test_gene_plots_share_layer_use_raw_gene_symbols():
    for plot in (sks.pl.trends, sks.pl.module_heatmap):
        parameters = inspect.signature(plot).parameters
        assert all(parameters[name].default is None for name in ("layer", "use_raw", "gene_symbols"))
    assert inspect.signature(sks.pl.branch_heatmap).parameters["gene_symbols"].default is None
    assert inspect.signature(sks.tl.trend_modules).parameters["gene_symbols"].default is None


def _curves(adata, key):
    return np.asarray(adata.varm[f"{key}_curves"])


def test_use_raw_fits_raw_and_the_plot_draws_it(genes):
    adata = genes.copy()
    sks.tl.trends(adata, segment="0", use_raw=True, key_added="raw")
    sks.tl.trends(adata, segment="0", layer="unscaled", key_added="layer")
    np.testing.assert_allclose(_curves(adata, "raw"), _curves(adata, "layer"))
    assert adata.uns["raw"]["params"]["use_raw"] is True and adata.uns["layer"]["params"]["use_raw"] is False
    cells = np.isfinite(adata.obs["raw_time"].to_numpy())
    raw = np.asarray(adata.raw[:, "gene_0"].X).ravel()[cells]
    ax = sks.pl.trends(adata, "raw", "gene_0", show=False)  # default: the matrix that was fitted
    np.testing.assert_allclose(np.sort(_offsets(ax)[:, 1]), np.sort(raw), rtol=1e-6)
    assert ax.get_ylabel() == "expression (raw)"
    ax = sks.pl.trends(adata, "raw", "gene_0", use_raw=False, show=False)  # or the one asked for
    np.testing.assert_allclose(np.sort(_offsets(ax)[:, 1]), np.sort(2.0 * raw), rtol=1e-6)
    ax = sks.pl.trends(adata, "layer", "gene_0", show=False)
    assert ax.get_ylabel() == "expression (unscaled)"


def test_use_raw_reads_the_genes_of_var_from_a_larger_raw(genes):
    adata = genes[:, 5:].copy()  # raw keeps all 30 genes, var the last 25
    sks.tl.trends(adata, segment="0", use_raw=True, genes=["gene_7"], key_added="sub")
    full = genes.copy()
    sks.tl.trends(full, segment="0", use_raw=True, genes=["gene_7"], key_added="all")
    np.testing.assert_allclose(_curves(adata, "sub")[2], _curves(full, "all")[7])


def test_gene_symbols_name_genes_in_tools_and_plots(genes):
    adata = genes.copy()
    sks.tl.trends(adata, segment="0", genes=["Sgene_0", "Sgene_3"], gene_symbols="symbol", key_added="sym")
    sks.tl.trends(adata, segment="0", genes=["gene_0", "gene_3"], key_added="names")
    np.testing.assert_array_equal(_curves(adata, "sym"), _curves(adata, "names"))
    ax = sks.pl.trends(adata, "sym", "Sgene_3", gene_symbols="symbol", show=False)
    assert ax.get_title().startswith("Sgene_3")
    fork = int(adata.uns["rpg"]["branch_points"][0])
    sks.tl.branch_test(adata, branch_point=fork, genes=["Sgene_0", "Sgene_1"], gene_symbols="symbol")
    ax = sks.pl.branch_heatmap(adata, "rpg_branch_test", gene_symbols="symbol", show=False)
    assert {t.get_text() for t in ax.get_yticklabels()} == {"Sgene_0", "Sgene_1"}


def test_bad_layer_use_raw_gene_symbols_fail_early_and_leave_adata(genes):
    adata = genes.copy()
    uns, var = set(adata.uns), adata.var.copy()
    for kwargs, error, message in (
        (dict(use_raw=True, layer="unscaled"), ValueError, "not both"),
        (dict(use_raw="yes"), ValueError, "use_raw"),
        (dict(gene_symbols="missing", genes=["Sgene_0"]), KeyError, "gene_symbols='missing'"),
        (dict(gene_symbols="symbol", genes=["gene_0"]), KeyError, r"not in adata.var\['symbol'\]"),
    ):
        with pytest.raises(error, match=message):
            sks.tl.trends(adata, segment="0", **kwargs)
    adata.var["repeated"] = "same"
    with pytest.raises(ValueError, match="several genes"):
        sks.tl.association_test(adata, genes=["same"], gene_symbols="repeated")
    no_raw = adata.copy()
    no_raw.raw = None
    with pytest.raises(ValueError, match="adata.raw is None"):
        sks.tl.trends(no_raw, segment="0", use_raw=True)
    assert set(adata.uns) == uns
    pd.testing.assert_frame_equal(adata.var.drop(columns="repeated"), var)


def test_progress_bars_follow_scanpy_verbosity_and_tqdm_disable(monkeypatch, capsys):
    """A long fit shows a bar at scanpy's default verbosity; verbosity 0 (errors only) or
    TQDM_DISABLE hides it, as does the quiet() of branch_support's refits."""
    from scskeleton._anndata import progress as _progress

    def bar_printed():
        with _progress.solver_run("fit", use_rep="X_pca", shape=(10, 2), maxiter=3, size=_progress.LONG_RUN) as run:
            for iteration in range(3):
                run.callback(iteration, 1.0)
        return "fit" in capsys.readouterr().err

    verbosity = sc.settings.verbosity
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    try:
        sc.settings.verbosity = 1
        assert bar_printed()
        sc.settings.verbosity = 0
        assert not bar_printed()
        sc.settings.verbosity = 1
        monkeypatch.setenv("TQDM_DISABLE", "1")
        assert not bar_printed()
        monkeypatch.delenv("TQDM_DISABLE")
        with _progress.quiet():
            assert not bar_printed()
    finally:
        sc.settings.verbosity = verbosity


@pytest.mark.parametrize("learner", LEARNER_METHODS)
def test_cells_without_any_spread_are_refused_and_adata_unchanged(learner):
    """Identical cells leave k-means and every graph nothing but round-off to fit."""
    adata = anndata.AnnData(np.ones((60, 8)))
    adata.obsm["X_pca"] = np.full((60, 5), 0.1)
    before = (set(adata.uns), set(adata.obsm), set(adata.obs))
    with pytest.raises(ValueError, match="Every cell has the same coordinates"):
        getattr(sks.tl, learner)(adata)
    assert (set(adata.uns), set(adata.obsm), set(adata.obs)) == before


def test_cells_without_any_spread_are_refused_in_a_chunked_fit():
    da = pytest.importorskip("dask.array")
    adata = anndata.AnnData(np.ones((60, 8)))
    adata.obsm["X_pca"] = da.full((60, 5), 0.1, chunks=(20, -1))
    for learner in ("ddrtree", "rpg"):
        with pytest.raises(ValueError, match="Every cell has the same coordinates"):
            getattr(sks.tl, learner)(adata)
        assert learner not in adata.uns
