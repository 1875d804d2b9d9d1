"""Tests of ``tl.fork_test``, ``tl.activation`` and ``tl.trend_modules`` on learned trees, with ground truth."""

import anndata
import numpy as np
import pytest
import scanpy as sc
from scipy.stats import kstest
from sklearn.metrics import roc_auc_score

import scskeleton as sks


def _learned(method: str, seed: int, n_cells: int = 1000):
    """branching_expression (40 branch genes, 100 shared-trend genes, 60 null) with a learned, rooted tree."""
    adata = sks.datasets.branching_expression(n_cells, 200, n_branch_genes=40, n_trend_genes=100, random_state=seed)
    sc.pp.pca(adata, n_comps=10)
    getattr(sks.tl, method)(adata)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    return adata


@pytest.fixture(scope="module")
def rpg_tree():
    return _learned("rpg", 0)


def _state(adata):
    return (sorted(adata.uns), list(adata.obs.columns), list(adata.var.columns), sorted(adata.varm))


@pytest.mark.parametrize("method", ["rpg", "ddrtree"])
def test_fork_test_on_learned_pseudotime_calls_few_shared_trend_genes_and_finds_branch_genes(method):
    for seed in range(5):
        adata = _learned(method, seed)
        fork = int(adata.uns[method]["branch_points"][0])
        sks.tl.fork_test(adata, method, branch_point=fork)
        pattern = adata.var["true_pattern"].to_numpy()
        q = adata.var[f"{method}_fork_test_qval"].to_numpy()
        p = adata.var[f"{method}_fork_test_pval"].to_numpy()
        assert np.mean(q[pattern == "trend"] < 0.05) <= 0.05, (seed, np.mean(q[pattern == "trend"] < 0.05))
        assert kstest(p[pattern == "null"], "uniform").pvalue > 0.01
        assert np.mean(q[pattern == "branch"] < 0.05) >= 0.9
        assert roc_auc_score(pattern == "branch", adata.var[f"{method}_fork_test_F"]) >= 0.95
        effect = adata.var[f"{method}_fork_test_effect"].to_numpy()
        assert np.median(effect[pattern == "branch"]) > 3 * np.median(effect[pattern == "null"])


def test_fork_test_direction_matches_the_branch_with_higher_expression(rpg_tree):
    adata = rpg_tree.copy()
    fork = int(adata.uns["rpg"]["branch_points"][0])
    sks.tl.fork_test(adata, "rpg", branch_point=fork)
    name = "rpg_fork_test"
    called = np.flatnonzero(adata.var[f"{name}_qval"].to_numpy() < 0.05)
    branch = adata.obs[f"{name}_branch"]
    X = np.asarray(adata.X)
    for gene in called[:20]:
        means = {label: X[(branch == label).to_numpy(), gene].mean() for label in adata.uns[name]["branches"]}
        assert adata.var[f"{name}_up"].iloc[gene] == max(means, key=means.get)
        assert adata.var[f"{name}_down"].iloc[gene] == min(means, key=means.get)
    # only branch cells within the window were tested, on the registered axis
    times = adata.obs[f"{name}_time"].to_numpy()
    tested = np.isfinite(times)
    assert set(branch[tested]) == set(adata.uns[name]["branches"])
    assert np.nanmax(times) <= adata.uns[name]["fork"] + adata.uns[name]["window"] + 1e-9


@pytest.mark.parametrize("method", ["rpg", "ddrtree"])
def test_fork_test_on_krumsiek11_calls_the_lineage_factors_in_the_right_branch(method, krumsiek11_fitted):
    """At the Ery/Mk fork, EKLF goes up towards erythrocytes and Fli1 towards megakaryocytes."""
    adata = krumsiek11_fitted(method)
    found = False
    for fork in adata.uns[method]["branch_points"]:
        sks.tl.fork_test(adata, method, branch_point=int(fork))  # defaults never refused
        name = f"{method}_fork_test"
        assert np.isfinite(adata.var[f"{name}_pval"]).all()
        # a branch is named by its segment's cells: the window past the fork may hold mostly progenitors
        segment = adata.obs[f"{method}_segment"].astype(str)
        result = adata.uns[name]  # branches by label ("fork 2 → tip 3"), keyed by their first segment's id
        majority = {label: adata.obs.loc[segment == str(first), "cell_type"].value_counts().idxmax()
                    for label, first in zip(result["branches"], result["branch_ids"])}
        if sorted(majority.values()) == ["Ery", "Mk"]:
            found = True
            up = adata.var[f"{name}_up"]
            assert majority[up["EKLF"]] == "Ery" and majority[up["Fli1"]] == "Mk"
            assert adata.var.loc[["EKLF", "Fli1"], f"{name}_qval"].max() < 1e-3
    assert found


def test_the_count_test_leaves_genes_whose_bulk_varies_to_the_f_test(krumsiek11_fitted):
    """krumsiek11 is dense (0.3 % zeros). At RPG's first fork SCL's bulk differs between the branches
    and its 15 risen cells hold half its squared deviations; counted as its only carriers, the count
    test gave p = 1 beside F = 10 (8e-10 by the F test). A gene is left to the count test only where
    the cells outside its bulk hold nearly all of its variation, as sparse counts do."""
    adata = krumsiek11_fitted("rpg")
    sks.tl.fork_test(adata, "rpg", branch_point=int(adata.uns["rpg"]["branch_points"][0]), key_added="first")
    var = adata.var
    assert var.loc["SCL", "first_F"] > 5 and var.loc["SCL", "first_pval"] < 1e-6
    strong = var["first_F"].to_numpy() > 5
    assert (var["first_pval"].to_numpy()[strong] < 1e-4).all()


def test_fork_test_writes_the_schema_survives_h5ad_and_plots(rpg_tree, tmp_path):
    adata = rpg_tree.copy()
    fork = int(adata.uns["rpg"]["branch_points"][0])
    sks.tl.fork_test(adata, "rpg", branch_point=fork)
    name = "rpg_fork_test"
    half = adata.uns[name]["window"] / 2
    sks.tl.fork_test(adata, "rpg", branch_point=fork, window=half, genes=adata.var_names[:30])
    assert adata.varm[f"{name}_curves"].shape == (adata.n_vars, 2, 100)
    assert adata.varm[f"{name}_means"].shape == (adata.n_vars, 2)
    assert np.isnan(adata.var[f"{name}_pval"].to_numpy()[30:]).all()
    assert adata.uns[name]["window"] == half and adata.uns[name]["params"]["window"] == half
    adata.write_h5ad(tmp_path / "fork.h5ad")
    back = anndata.read_h5ad(tmp_path / "fork.h5ad")
    np.testing.assert_array_equal(back.var[f"{name}_up"].astype(str), adata.var[f"{name}_up"].astype(str))
    sks.pl.trends(back, name, [back.var_names[0]], show=False)


def test_fork_test_effects_are_read_where_every_branch_has_cells():
    """A branch whose few window cells start late (a gap of unsampled transit cells; first met where a
    warp slid one branch along the other, 10 cells at 8.0-8.6 of a window 5.7-8.6): its curve was
    averaged over its extrapolation to the fork, and genes got effects of up to 37 on log values
    spanning 6.3 (pure noise genes up to 62). Here the second branch's cells in the first 60 % of the
    window are left out. Effects stay within each gene's range in the window, curves are NaN exactly
    where a branch has no cells, and a window asked for past every cell ends at them."""
    adata = sks.datasets.simulate_trajectory(800, n_fates=2, n_genes=500, random_state=1)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=20)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    fork = int(adata.uns["ddrtree"]["branch_points"][0])
    sks.tl.fork_test(adata, "ddrtree", branch_point=fork, key_added="whole")
    whole = adata.uns["whole"]
    smaller = whole["branches"][int(np.argmin(whole["n_cells"]))]
    past = adata.obs["ddrtree_pseudotime"].to_numpy() - whole["fork"]
    gap = (adata.obs["whole_branch"] == smaller).to_numpy() & (past < 0.6 * whole["window"])
    adata = adata[~gap].copy()
    sks.tl.fork_test(adata, "ddrtree", branch_point=fork)
    name = "ddrtree_fork_test"
    assert min(adata.uns[name]["n_cells"]) <= 0.2 * max(adata.uns[name]["n_cells"])  # the case of the docstring
    in_window = adata.obs[f"{name}_branch"].notna().to_numpy() & (adata.obs[f"{name}_branch"] != "trunk").to_numpy()
    values = adata.X[in_window].toarray()
    assert np.all(adata.var[f"{name}_effect"].to_numpy() <= np.ptp(values, axis=0) + 1e-9)
    curves = adata.varm[f"{name}_curves"]
    late = int(np.argmin(adata.uns[name]["n_cells"]))
    on_late = (adata.obs[f"{name}_branch"] == adata.uns[name]["branches"][late]).to_numpy()
    times = adata.obs[f"{name}_time"].to_numpy()[on_late]
    grid = adata.uns[name]["grid"]
    covered = (grid >= times.min()) & (grid <= times.max())
    assert 0 < covered.sum() < grid.size // 2 and not covered[0]  # a short stretch, late in the window
    assert np.isfinite(curves[:, late][:, covered]).all() and np.isnan(curves[:, late][:, ~covered]).all()
    sks.tl.fork_test(adata, "ddrtree", branch_point=fork, window=100.0, key_added="long")
    reach = np.nanmax(adata.obs["long_time"]) - adata.uns["long"]["fork"]
    assert adata.uns["long"]["window"] == pytest.approx(reach) and reach < 100.0
    assert adata.uns["long"]["grid"][-1] == pytest.approx(np.nanmax(adata.obs["long_time"]))
    sks.tl.trend_modules(adata, name)
    sks.pl.trends(adata, name, [adata.var_names[0]], show=False)


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        (dict(branch_point=10_000), ValueError, "branch_point"),
        (dict(window=-1.0), ValueError, "window"),
        (dict(df=1.5), ValueError, "df"),
        (dict(registration="quantile"), ValueError, "registration"),
        (dict(genes=["not_a_gene"]), KeyError, "not_a_gene"),
    ],
)
def test_bad_fork_test_input_is_rejected_and_adata_untouched(rpg_tree, kwargs, error, fragment):
    adata = rpg_tree.copy()
    kwargs = {"branch_point": int(adata.uns["rpg"]["branch_points"][0]), **kwargs}
    before = _state(adata)
    with pytest.raises(error, match=fragment):
        sks.tl.fork_test(adata, "rpg", **kwargs)
    assert _state(adata) == before


def test_activation_times_follow_the_true_onsets_and_null_genes_stay_silent(rpg_tree, tmp_path):
    adata = rpg_tree.copy()
    sks.tl.activation(adata, "rpg")
    name = "rpg_activation"
    pattern = adata.var["true_pattern"].to_numpy()
    times = adata.var[f"{name}_time"].to_numpy()
    assert np.isfinite(times[pattern == "null"]).mean() <= 0.05
    assert adata.varm[f"{name}_time"].shape == (adata.n_vars, 2)
    # a gene that activates does so within the pseudotime range, on a lineage that exists
    finite = np.isfinite(times)
    assert finite.any()
    pseudotime = adata.obs["rpg_pseudotime"]
    assert times[finite].min() >= pseudotime.min() and times[finite].max() <= pseudotime.max()
    assert set(adata.var.loc[finite, f"{name}_lineage"].astype(str)) <= set(adata.uns[name]["lineage_labels"])
    adata.write_h5ad(tmp_path / "activation.h5ad")
    back = anndata.read_h5ad(tmp_path / "activation.h5ad")
    np.testing.assert_array_equal(back.varm[f"{name}_time"], adata.varm[f"{name}_time"])


def test_activation_orders_genes_by_where_they_switch_on():
    """Sigmoids switching on at known true times along the trunk: activation follows their order."""
    adata = sks.datasets.branching_expression(1500, 100, n_branch_genes=10, n_trend_genes=10, random_state=3)
    rng = np.random.default_rng(0)
    t = adata.obs["true_pseudotime"].to_numpy()
    onsets = np.quantile(t, [0.2, 0.35, 0.5, 0.65])
    switches = 2.0 / (1 + np.exp(-(t[:, None] - onsets[None]) / (0.02 * np.ptp(t)))) + rng.normal(0, 0.4, (t.size, 4))
    adata = anndata.concat([adata, anndata.AnnData(switches, obs=adata.obs)], axis=1, merge="same")
    adata.var_names = [f"g{i}" for i in range(adata.n_vars)]
    sc.pp.pca(adata, n_comps=10)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "rpg")
    sks.tl.activation(adata, "rpg", genes=adata.var_names[-4:])
    first = adata.var["rpg_activation_time"].to_numpy()[-4:]
    assert np.all(np.isfinite(first)) and np.all(np.diff(first) > 0)


def test_trend_modules_group_genes_of_one_pattern(rpg_tree, tmp_path):
    adata = rpg_tree.copy()
    sks.tl.association_test(adata, "rpg")
    sks.tl.trend_modules(adata, "rpg_association", n_modules=4)
    name = "rpg_association_modules"
    modules = adata.var[name]
    q = adata.var["rpg_association_qval"].to_numpy()
    assert modules.notna().to_numpy().sum() == (q < 0.05).sum() - 0  # every called gene with a curve
    assert modules[q >= 0.05].isna().all()
    assert adata.uns[name]["curves"].shape == (4, 2, 100)
    assert adata.uns[name]["n_genes"].sum() == modules.notna().sum()
    again = adata.copy()
    sks.tl.trend_modules(again, "rpg_association", n_modules=4)
    np.testing.assert_array_equal(again.var[name].astype(str), modules.astype(str))
    # branch genes (up in one branch only) and shared-trend genes do not end up mixed in one module
    pattern = adata.var["true_pattern"]
    table = (modules[pattern != "null"].astype(str) + "|" + pattern[pattern != "null"].astype(str)).value_counts()
    purity = sum(table.groupby(lambda s: s.split("|")[0]).max()) / table.sum()
    assert purity >= 0.8
    adata.write_h5ad(tmp_path / "modules.h5ad")
    anndata.read_h5ad(tmp_path / "modules.h5ad")


def test_trend_modules_bad_input(rpg_tree):
    adata = rpg_tree.copy()
    before = _state(adata)
    with pytest.raises(KeyError, match="association_test"):
        sks.tl.trend_modules(adata, "nothing_here")
    assert _state(adata) == before
    sks.tl.association_test(adata, "rpg", genes=adata.var_names[:10])
    before = _state(adata)
    with pytest.raises(ValueError, match="n_modules"):
        sks.tl.trend_modules(adata, "rpg_association", n_modules=50)
    with pytest.raises(KeyError, match="no curve"):
        sks.tl.trend_modules(adata, "rpg_association", genes=adata.var_names[-3:])
    assert _state(adata) == before


def test_module_plots_read_the_schema_and_leave_adata_untouched(rpg_tree, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    adata = rpg_tree.copy()
    sks.tl.association_test(adata, "rpg")
    sks.tl.trend_modules(adata, "rpg_association", n_modules=3)
    adata.obs["stage"] = (adata.obs["true_pseudotime"] > adata.obs["true_pseudotime"].median()).map(
        {True: "late", False: "early"}).astype("category")
    adata.var["symbol"] = [f"S{i}" for i in range(adata.n_vars)]
    adata.layers["counts"] = np.asarray(adata.X).copy()
    before = _state(adata)
    axes = sks.pl.module_heatmap(adata, "rpg_association_modules", groupby="stage", gene_symbols="symbol",
                                 show=False)
    assert len(axes) == 2  # one block per lineage
    fig = sks.pl.module_heatmap(adata, "rpg_association_modules", layer="counts", standard_scale=None, vmin=0,
                                return_fig=True)
    binned = fig.axes[1].images[0].get_array()
    assert np.ma.count_masked(binned) < binned.size  # bins with cells are drawn
    sks.pl.modules(adata, "rpg_association_modules", save=tmp_path / "modules.png", show=False)
    assert (tmp_path / "modules.png").exists()
    sks.pl.trends(adata, "rpg_association", [adata.var_names[0]], show=False)
    assert _state(adata) == before
    with pytest.raises(KeyError, match="trend_modules"):
        sks.pl.module_heatmap(adata, "rpg_association")
    with pytest.raises(ValueError, match="standard_scale"):
        sks.pl.module_heatmap(adata, "rpg_association_modules", standard_scale="genes")
    with pytest.raises(ValueError, match="numeric column"):  # labels, not a continuous value
        sks.pl.module_heatmap(adata, "rpg_association_modules", groupby="true_pseudotime")
