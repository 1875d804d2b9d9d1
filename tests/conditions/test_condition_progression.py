"""``tl.condition_progression``: samples are the replicates, the p-values hold their level when
conditions are exchangeable, ignoring the samples inflates them, and a delay is found on the
lineages it slows."""

import anndata
import numpy as np
import pytest

import scskeleton as sks
from scskeleton._testing import conditions_with_fates

from condition_checks import N_NULL, holds_the_level, inflated_without_samples, null_data_set, pvalues


def test_p_values_are_uniform_when_conditions_are_exchangeable(null_fits):
    holds_the_level(pvalues(null_fits, sks.tl.condition_progression, sample="sample"))


@pytest.mark.slow
def test_p_values_are_uniform_with_ten_samples_a_condition():
    fits = [null_data_set(seed, samples_per_condition=10) for seed in range(N_NULL)]
    holds_the_level(pvalues(fits, sks.tl.condition_progression, sample="sample"))


def test_ignoring_the_samples_inflates_the_false_positives(null_fits):
    inflated_without_samples(null_fits, sks.tl.condition_progression)


@pytest.fixture(scope="module")
def delayed():
    return conditions_with_fates(102, delay=0.2, sample_sd=0.2)


def test_a_delay_lowers_the_progression_of_every_lineage(delayed):
    sks.tl.condition_progression(delayed, "rpg", condition="condition", sample="sample")
    result = delayed.uns["rpg_condition_progression"]
    assert list(result["conditions"]) == ["control", "treated"]
    assert (result["effect"] < 0).all()
    assert np.mean(result["pval"] < 0.05) >= 0.5
    truth = delayed.obs.groupby("condition", observed=True)["true_pseudotime"].mean()
    assert truth["treated"] < 0.85 * truth["control"]


def test_the_result_survives_h5ad(delayed, tmp_path):
    sks.tl.condition_progression(delayed, "rpg", condition="condition", sample="sample", key_added="pace")
    path = tmp_path / "pace.h5ad"
    delayed.write_h5ad(path)
    back = anndata.read_h5ad(path).uns["pace"]
    result = delayed.uns["pace"]
    np.testing.assert_array_equal(back["pval"], result["pval"])
    assert back["unit_pseudotime"].shape == (6, len(result["lineages"]))


def test_without_pseudotime_it_says_what_to_run(delayed):
    adata = delayed.copy()
    del adata.obs["rpg_pseudotime"]
    before = set(adata.uns)
    with pytest.raises(KeyError, match="sks.tl.pseudotime"):
        sks.tl.condition_progression(adata, "rpg", condition="condition", sample="sample")
    assert set(adata.uns) == before
