"""tl.condition_test: genes whose trend along a lineage differs between conditions, samples as units."""

import warnings

import anndata
import numpy as np
import pytest
from scipy import stats

import scskeleton as sks
from scskeleton._core.stats.condition_trends import condition_trend_test
from scskeleton._testing import conditions_with_fates, longest_lineage


def lineage_with_samples(seed, *, per_condition, delay=0.0, offset_sd=0.3, slope_sd=0.2, effect=0.0,
                         n_genes=200, cells=150):
    """A lineage of steep sigmoid trends, each sample with its own offset and slope per gene, the
    second condition's cells lagging by ``delay`` and its genes bumped late by ``effect``."""
    rng = np.random.default_rng(seed)
    unit_condition = np.repeat([0, 1], per_condition)
    unit = np.repeat(np.arange(unit_condition.size), cells)
    lag = np.where(unit_condition[unit] == 1, delay, 0.0)
    times = rng.uniform(0, 1, unit.size) * (1 - lag)
    loc, width, amp = rng.uniform(0.2, 0.8, n_genes), rng.uniform(0.05, 0.3, n_genes), rng.normal(0, 1, n_genes)
    trend = amp / (1 + np.exp(-4 * (times[:, None] - loc) / width))
    offsets = (rng.normal(0, offset_sd, (unit_condition.size, n_genes))[unit]
               + rng.normal(0, slope_sd, (unit_condition.size, n_genes))[unit] * (times[:, None] - 0.5))
    bump = effect * np.sin(np.pi * np.clip(2 * times - 1, 0, 1))[:, None] ** 2 * (unit_condition[unit] == 1)[:, None]
    values = trend + offsets + bump + rng.normal(0, 0.5, (times.size, n_genes))
    return values, times, unit_condition[unit], unit, unit_condition


def sample_pvalues(values, times, condition, unit, unit_condition, **kwargs):
    return condition_trend_test(values, np.arange(times.size), times, condition, 2, sample=unit,
                                sample_condition=unit_condition, **kwargs).pvals


@pytest.mark.parametrize("per_condition", [3, 10])
@pytest.mark.parametrize("delay", [0.0, 0.2])
def test_p_values_are_uniform_with_sample_variation_and_a_delay(per_condition, delay):
    # many data sets of few genes: the genes of one data set share its samples' cells, so their
    # p-values are not independent draws
    pvals = np.concatenate([sample_pvalues(*lineage_with_samples(seed, per_condition=per_condition, delay=delay,
                                                                 n_genes=40)) for seed in range(20)])
    rate = np.mean(pvals < 0.05)
    assert rate <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / pvals.size), rate
    assert stats.kstest(pvals, "uniform").pvalue > 0.01


def test_cells_as_units_are_inflated_where_samples_differ():
    values, times, condition, unit, unit_condition = lineage_with_samples(0, per_condition=3)
    by_cell = condition_trend_test(values, np.arange(times.size), times, condition, 2).pvals
    by_sample = sample_pvalues(values, times, condition, unit, unit_condition)
    assert np.mean(by_cell < 0.05) > 0.4 > 5 * np.mean(by_sample < 0.05)


def test_power_grows_with_the_effect_and_the_samples():
    power = {(n, effect): np.mean(sample_pvalues(*lineage_with_samples(1, per_condition=n, effect=effect)) < 0.05)
             for n in (3, 10) for effect in (0.3, 1.0)}
    assert power[10, 1.0] > 0.95 and power[10, 1.0] > power[10, 0.3] > 0.3
    assert power[3, 1.0] > 0.4 and power[3, 1.0] < power[10, 1.0]


def test_three_conditions_hold_the_level():
    rng = np.random.default_rng(5)
    pvals = []
    for seed in range(20):
        values, times, _, unit, _ = lineage_with_samples(seed, per_condition=6, n_genes=40)
        unit_condition = rng.permutation(np.repeat([0, 1, 2], 4))
        pvals.append(condition_trend_test(values, np.arange(times.size), times, unit_condition[unit], 3, sample=unit,
                                          sample_condition=unit_condition).pvals)
    pvals = np.concatenate(pvals)
    assert np.mean(pvals < 0.05) <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / pvals.size)
    assert stats.kstest(pvals, "uniform").pvalue > 0.01


@pytest.fixture(scope="module")
def treated():
    adata = conditions_with_fates(3, n_cells=1500, n_genes=200, n_fates=2, samples_per_condition=4,
                                  condition_genes=0.2, sample_expression_sd=0.1)
    return adata


def test_changed_genes_are_found_and_the_result_survives_h5ad(treated, tmp_path):
    adata = treated.copy()
    tip = longest_lineage(adata)
    sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample", lineage=tip)
    var, entry = adata.var, adata.uns["rpg_condition_test"]
    assert entry["test"] == "wilks" and entry["n_components"] == 2 and entry["lineage"] == tip
    assert list(entry["conditions"]) == ["control", "treated"] and entry["units"].size == 8
    assert adata.varm["rpg_condition_test_curves"].shape == (adata.n_vars, 2, 100)
    changed = var["true_condition_branch"].to_numpy() != ""
    p = var["rpg_condition_test_pval"].to_numpy()
    assert np.mean(p[~changed] < 0.05) < 0.12 and np.mean(p[changed] < 0.05) > 2 * np.mean(p[~changed] < 0.05)
    path = tmp_path / "tested.h5ad"
    adata.write_h5ad(path)
    back = anndata.read_h5ad(path)
    np.testing.assert_array_equal(back.var["rpg_condition_test_pval"], var["rpg_condition_test_pval"])
    np.testing.assert_array_equal(back.uns["rpg_condition_test"]["covered"], entry["covered"])
    again = treated.copy()
    sks.tl.condition_test(again, "rpg", condition="condition", sample="sample", lineage=tip)
    np.testing.assert_array_equal(again.var["rpg_condition_test_pval"], p)


def test_a_dask_matrix_gives_the_in_memory_result(treated):
    da = pytest.importorskip("dask.array")
    adata = treated.copy()
    tip = longest_lineage(adata)
    lazy = adata.copy()
    lazy.X = da.from_array(adata.X.toarray() if hasattr(adata.X, "toarray") else adata.X, chunks=(400, -1))
    for each in (adata, lazy):
        sks.tl.condition_test(each, "rpg", condition="condition", sample="sample", lineage=tip,
                              genes=adata.var_names[:40])
    np.testing.assert_allclose(lazy.var["rpg_condition_test_pval"], adata.var["rpg_condition_test_pval"], rtol=1e-8)


@pytest.mark.parametrize("change, kwargs, error, fragment", [
    (None, {"condition": "missing", "sample": "sample"}, KeyError, "not a column"),
    (None, {"condition": "condition", "sample": "missing"}, KeyError, "not a column"),
    ("one_condition", {"condition": "condition", "sample": "sample"}, ValueError, "at least two"),
    ("one_sample_each", {"condition": "condition", "sample": "sample"}, ValueError, "fewer than two samples"),
    (None, {"condition": "condition", "sample": "sample", "lineage": None}, ValueError, "name the one"),
    (None, {"condition": "condition", "sample": "sample", "lineage": "fork 1"}, ValueError, "not a tip"),
    (None, {"condition": "condition", "sample": "sample", "n_components": 0}, ValueError, "n_components"),
    ("no_pseudotime", {"condition": "condition", "sample": "sample"}, KeyError, "tl.pseudotime"),
])
def test_bad_input_is_refused_and_leaves_adata_alone(treated, change, kwargs, error, fragment):
    adata = treated.copy()
    kwargs = {"lineage": longest_lineage(adata), **kwargs}
    if change == "one_condition":
        adata.obs["condition"] = "control"
    elif change == "one_sample_each":
        adata.obs["sample"] = adata.obs["condition"].astype(str)
    elif change == "no_pseudotime":
        del adata.obs["rpg_pseudotime"]
    before_uns, before_var = set(adata.uns), list(adata.var.columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=fragment):
            sks.tl.condition_test(adata, "rpg", **kwargs)
    assert set(adata.uns) == before_uns and list(adata.var.columns) == before_var


def test_two_samples_a_condition_compare_the_level_alone(treated):
    adata = treated[treated.obs["sample"].isin(["control_1", "control_2", "treated_1", "treated_2"])].copy()
    sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample", lineage=longest_lineage(adata))
    assert adata.uns["rpg_condition_test"]["n_components"] == 1
    assert np.isfinite(adata.var["rpg_condition_test_pval"]).all()


def test_on_a_view_the_parent_is_left_alone_and_a_second_run_replaces_the_first(treated):
    parent = treated.copy()
    before_uns, before_var = set(parent.uns), list(parent.var.columns)
    view = parent[parent.obs["sample"] != "control_4"]
    tip = longest_lineage(parent)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.condition_test(view, "rpg", condition="condition", sample="sample", lineage=tip, key_added="on_view")
    assert set(parent.uns) == before_uns and list(parent.var.columns) == before_var
    assert view.uns["on_view"]["units"].size == 7
    first = view.var["on_view_pval"].to_numpy().copy()
    sks.tl.condition_test(view, "rpg", condition="condition", sample="sample", lineage=tip, key_added="on_view",
                          genes=view.var_names[:30])
    # the second run replaces the first: genes it did not test are NaN, not left from before
    assert np.isnan(view.var["on_view_pval"].to_numpy()[30:]).all()
    np.testing.assert_allclose(view.var["on_view_pval"].to_numpy()[:30], first[:30], rtol=1e-10)
