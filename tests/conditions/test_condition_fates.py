"""``tl.condition_fates`` and the generator's conditions: samples are the replicates, the p-values
hold their level when conditions are exchangeable, ignoring the samples inflates them, and real
shifts of a fate's share are found."""

import warnings

import anndata
import numpy as np
import pytest

import scskeleton as sks
from scskeleton._testing import conditions_with_fates, following_fate

from condition_checks import N_NULL, holds_the_level, inflated_without_samples, null_data_set, pvalues

def test_p_values_are_uniform_when_conditions_are_exchangeable(null_fits):
    holds_the_level(pvalues(null_fits, sks.tl.condition_fates, sample="sample"))


@pytest.mark.slow
def test_p_values_are_uniform_with_ten_samples_a_condition():
    fits = [null_data_set(seed, samples_per_condition=10) for seed in range(N_NULL)]
    holds_the_level(pvalues(fits, sks.tl.condition_fates, sample="sample"))


def test_ignoring_the_samples_inflates_the_false_positives(null_fits):
    inflated_without_samples(null_fits, sks.tl.condition_fates)


@pytest.fixture(scope="module")
def shifted():
    return conditions_with_fates(101, fate_shift=0.25, sample_sd=0.1)


def test_a_shift_of_a_fates_share_is_found_in_that_fate(shifted):
    sks.tl.condition_fates(shifted, "rpg", condition="condition", sample="sample")
    result = shifted.uns["rpg_condition_fates"]
    first = following_fate(shifted, "fate_1")
    assert result["pval"][first] < 0.05 and result["effect"][first] > 0
    true_shares = shifted.uns["simulate_trajectory"]["sample_fate_share"][:, 0]
    treated = shifted.uns["simulate_trajectory"]["sample_condition"] == "treated"
    assert true_shares[treated].mean() - true_shares[~treated].mean() > 0.15


def test_the_result_survives_h5ad_and_names_what_it_compared(shifted, tmp_path):
    sks.tl.condition_fates(shifted, "rpg", condition="condition", sample="sample", reference="treated",
                           key_added="against_treated")
    result = shifted.uns["against_treated"]
    assert list(result["conditions"]) == ["treated", "control"]
    assert result["unit_shares"].shape == (6, len(result["fates"]))
    np.testing.assert_allclose(result["unit_shares"].sum(axis=1), 1.0)
    path = tmp_path / "compared.h5ad"
    shifted.write_h5ad(path)
    back = anndata.read_h5ad(path).uns["against_treated"]
    np.testing.assert_array_equal(back["pval"], result["pval"])
    assert list(back["units"]) == list(result["units"])


def test_lazy_assignment_and_fate_probabilities_give_the_same_result(shifted):
    da = pytest.importorskip("dask.array")
    lazy = shifted.copy()
    for field in ("rpg_fate_probabilities", "rpg_assignment"):  # what a chunked fit leaves as dask arrays
        stored = shifted.obsm[field]
        dense = stored.toarray() if hasattr(stored, "toarray") else np.asarray(stored)
        lazy.obsm[field] = da.from_array(dense, chunks=(300, -1))
    for adata in (shifted, lazy):
        for sample in ("sample", None):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # cells as replicates warn
                sks.tl.condition_fates(adata, "rpg", condition="condition", sample=sample, key_added=f"same_{sample}")
    for sample in ("sample", None):
        np.testing.assert_allclose(lazy.uns[f"same_{sample}"]["pval"], shifted.uns[f"same_{sample}"]["pval"], rtol=1e-12)


@pytest.mark.parametrize("change, kwargs, error, fragment", [
    (None, {"condition": "missing"}, KeyError, "not a column"),
    (None, {"condition": "condition", "sample": "missing"}, KeyError, "not a column"),
    ("one_condition", {"condition": "condition", "sample": "sample"}, ValueError, "at least two"),
    ("one_sample_each", {"condition": "condition", "sample": "sample"}, ValueError, "fewer than two samples"),
    ("mixed_sample", {"condition": "condition", "sample": "sample"}, ValueError, "several conditions"),
    (None, {"condition": "condition", "reference": "nothing"}, ValueError, "reference"),
    ("no_fates", {"condition": "condition", "sample": "sample"}, KeyError, "fate_probabilities"),
])
def test_bad_input_is_refused_and_leaves_adata_alone(shifted, change, kwargs, error, fragment):
    adata = shifted.copy()
    if change == "one_condition":
        adata.obs["condition"] = "control"
    elif change == "one_sample_each":
        adata.obs["sample"] = adata.obs["condition"].astype(str)
    elif change == "mixed_sample":
        adata.obs["sample"] = adata.obs["sample"].astype(str)
        adata.obs.iloc[0, adata.obs.columns.get_loc("sample")] = adata.obs["sample"].iloc[-1]
    elif change == "no_fates":
        del adata.obsm["rpg_fate_probabilities"]
    before = set(adata.uns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=fragment):
            sks.tl.condition_fates(adata, "rpg", **kwargs)
    assert set(adata.uns) == before


def test_the_generator_draws_samples_with_the_asked_effects():
    base = dict(n_cells=1500, n_genes=50, n_fates=3, random_state=4, n_jobs=1)
    plain = sks.datasets.simulate_trajectory(**base)
    assert "condition" not in plain.obs and "design" not in plain.uns["simulate_trajectory"]
    adata = sks.datasets.simulate_trajectory(**base, conditions=3, samples_per_condition=2, missing_fate="fate_2",
                                             delay=0.3)
    assert list(adata.obs["condition"].cat.categories) == ["condition_1", "condition_2", "condition_3"]
    assert adata.obs["sample"].nunique() == 6 and (adata.obs["sample"].value_counts() == 250).all()
    last = (adata.obs["condition"] == "condition_3").to_numpy()
    assert not (adata.obs["true_fate"][last] == "fate_2").any() and (adata.obs["true_fate"][~last] == "fate_2").any()
    time = adata.obs["true_pseudotime"].to_numpy()
    # the delay moves cells back along their own paths; the missing fate alone would not lower it this much
    assert time[last].mean() < 0.85 * time[~last].mean()
    assert sks.datasets.simulate_trajectory(**base, conditions=2).obs["sample"].nunique() == 6


@pytest.mark.parametrize("kwargs, fragment", [
    ({"fate_shift": 0.1}, "pass conditions="),
    ({"conditions": 1}, "conditions"),
    ({"conditions": ("a", "a")}, "two different"),
    ({"conditions": 2, "missing_fate": "fate_9"}, "missing_fate"),
    ({"conditions": 2, "delay": 1.0}, "delay"),
    ({"conditions": 2, "samples_per_condition": 0}, "samples_per_condition"),
    ({"conditions": 2, "condition_genes": 1.5}, "condition_genes"),
    ({"condition_genes": 0.1}, "pass conditions="),
])
def test_the_generator_refuses_a_design_it_cannot_draw(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        sks.datasets.simulate_trajectory(600, n_genes=30, **kwargs)


def test_the_generator_changes_the_course_of_some_genes_in_the_last_condition():
    adata = sks.datasets.simulate_trajectory(1500, n_genes=300, conditions=2, condition_genes=0.1, random_state=2,
                                             n_jobs=2)
    again = sks.datasets.simulate_trajectory(1500, n_genes=300, conditions=2, condition_genes=0.1, random_state=2,
                                             n_jobs=1)
    assert (adata.X != again.X).nnz == 0  # the same data for any number of threads
    changed = np.flatnonzero(adata.var["true_condition_effect"].to_numpy() != 0)
    assert 15 <= changed.size <= 45 and (adata.var["true_condition_branch"].iloc[changed] != "").all()
    sc_normalised = adata.X.multiply(1e4 / adata.X.sum(axis=1)).log1p().tocsc()
    last = (adata.obs["condition"] == "condition_2").to_numpy()
    agree = []
    for gene in changed:
        on = (adata.obs["true_branch"] == adata.var["true_condition_branch"].iloc[gene]).to_numpy()
        column = sc_normalised[:, gene].toarray().ravel()
        difference = column[on & last].mean() - column[on & ~last].mean()
        agree.append(np.sign(difference) == np.sign(adata.var["true_condition_effect"].iloc[gene]))
    assert np.mean(agree) > 0.75


def test_on_a_view_the_parent_is_left_alone_and_a_second_run_replaces_the_first(shifted):
    parent = shifted.copy()
    before = set(parent.uns)
    view = parent[parent.obs["sample"] != "control_3"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.condition_fates(view, "rpg", condition="condition", sample="sample", key_added="on_view")
        sks.tl.condition_progression(view, "rpg", condition="condition", sample="sample", key_added="pace_on_view")
    assert set(parent.uns) == before
    assert len(view.uns["on_view"]["units"]) == 5 and len(view.uns["pace_on_view"]["units"]) == 5
    first = view.uns["on_view"]["pval"].copy()
    sks.tl.condition_fates(view, "rpg", condition="condition", sample="sample", key_added="on_view")
    np.testing.assert_array_equal(view.uns["on_view"]["pval"], first)  # no randomness: the same result
