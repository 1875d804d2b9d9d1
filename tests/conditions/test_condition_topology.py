"""tl.condition_topology: per fork, whether the conditions take the branches alike, tested by
relabelling the samples; a fork one condition lacks is found, and its branch shows little reach."""

import warnings

import anndata
import numpy as np
import pytest

import scskeleton as sks
from scskeleton._core.stats.lineages import branch_cells
from scskeleton._testing import conditions_with_fates


def test_with_three_samples_the_relabelling_p_values_are_uniform_on_their_ten_steps(null_fits):
    pvals = []
    for adata in null_fits:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 3 samples: p cannot fall below 0.1
            sks.tl.condition_topology(adata, "rpg", condition="condition", sample="sample", key_added="forks")
        pvals.append(adata.uns["forks"]["pval"][0])
        assert (adata.uns["forks"]["least_pval"] == 0.1).all()
    pvals = np.array(pvals)
    assert pvals.min() >= 0.1
    # a step of 0.1 a distinct split: P(p ≤ 0.1) = 0.1, P(p ≤ 0.5) = 0.5
    for level in (0.1, 0.5):
        assert abs(np.mean(pvals <= level + 1e-9) - level) < 3 * np.sqrt(level * (1 - level) / pvals.size)


@pytest.fixture(scope="module")
def lacking():
    return conditions_with_fates(7, n_cells=2000, samples_per_condition=5, sample_sd=0.3, missing_fate="fate_2")


def test_a_fork_one_condition_lacks_is_found_and_its_branch_is_barely_reached(lacking):
    adata = lacking.copy()
    sks.tl.condition_topology(adata, "rpg", condition="condition", sample="sample")
    entry = adata.uns["rpg_condition_topology"]
    reach = [np.nanmin(entry["reach"][str(node)][1]) for node in entry["fork_nodes"]]
    lost = int(np.argmin(reach))
    assert reach[lost] < 0.3 and entry["pval"][lost] <= 0.05 and entry["least_pval"][lost] < 0.01
    # the branch the treated cells barely reach is the one the control cells of the missing fate take
    node = int(entry["fork_nodes"][lost])
    segments = {k: np.asarray(v) for k, v in adata.uns["rpg"]["segments"].items()}
    _, branches = branch_cells(segments, node, adata.uns["rpg"]["root"])
    control = adata.obs[(adata.obs["true_fate"] == "fate_2") & (adata.obs["condition"] == "control")]
    taken = [control["rpg_segment"].astype(str).isin(members).sum() for members in branches]
    assert int(np.argmax(taken)) == int(np.argmin(entry["reach"][str(node)][1]))


def test_the_result_survives_h5ad_and_is_reproducible(lacking, tmp_path):
    kept = [f"{c}_{k}" for c in ("control", "treated") for k in (1, 2, 3, 4)]
    adata = lacking[lacking.obs["sample"].isin(kept)].copy()
    adata.obs["sample"] = adata.obs["sample"].astype(str)
    more = lacking.copy()
    for each in (more, more.copy()):
        sks.tl.condition_topology(each, "rpg", condition="condition", sample="sample", n_permutations=50,
                                  random_state=3)
    sks.tl.condition_topology(more, "rpg", condition="condition", sample="sample", n_permutations=50, random_state=3,
                              key_added="again")
    np.testing.assert_array_equal(more.uns["again"]["pval"], more.uns["rpg_condition_topology"]["pval"])
    assert (more.uns["again"]["n_relabellings"] == 51).all()
    sks.tl.condition_topology(adata, "rpg", condition="condition", sample="sample")
    assert (adata.uns["rpg_condition_topology"]["n_relabellings"] == 70).all()  # 8! / (4! 4!)
    path = tmp_path / "topology.h5ad"
    adata.write_h5ad(path)
    back = anndata.read_h5ad(path).uns["rpg_condition_topology"]
    entry = adata.uns["rpg_condition_topology"]
    np.testing.assert_array_equal(back["pval"], entry["pval"])
    node = str(entry["fork_nodes"][0])
    np.testing.assert_array_equal(back["reach"][node], entry["reach"][node])
    assert list(back["branches"][node]) == list(entry["branches"][node])


def test_cells_as_units_are_permuted(lacking):
    adata = lacking.copy()
    sks.tl.condition_topology(adata, "rpg", condition="condition", n_permutations=99)
    entry = adata.uns["rpg_condition_topology"]
    assert (entry["n_relabellings"] == 100).all() and entry["units"].size == adata.n_obs


@pytest.mark.parametrize("change, kwargs, error, fragment", [
    (None, {"condition": "missing"}, KeyError, "not a column"),
    ("one_condition", {"condition": "condition", "sample": "sample"}, ValueError, "at least two"),
    ("one_sample_each", {"condition": "condition", "sample": "sample"}, ValueError, "fewer than two samples"),
    ("no_fork", {"condition": "condition", "sample": "sample"}, ValueError, "no fork"),
    ("no_pseudotime", {"condition": "condition", "sample": "sample"}, KeyError, "tl.pseudotime"),
    (None, {"condition": "condition", "sample": "sample", "n_permutations": 5}, ValueError, "n_permutations"),
])
def test_bad_input_is_refused_and_leaves_adata_alone(lacking, change, kwargs, error, fragment):
    adata = lacking.copy()
    if change == "one_condition":
        adata.obs["condition"] = "control"
    elif change == "one_sample_each":
        adata.obs["sample"] = adata.obs["condition"].astype(str)
    elif change == "no_fork":
        adata.uns["rpg"]["branch_points"] = np.zeros(0, dtype=np.int64)
    elif change == "no_pseudotime":
        del adata.obs["rpg_pseudotime"]
    before = set(adata.uns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error, match=fragment):
            sks.tl.condition_topology(adata, "rpg", **kwargs)
    assert set(adata.uns) == before


def test_on_a_view_the_parent_is_left_alone_and_a_second_run_replaces_the_first(lacking):
    parent = lacking.copy()
    before = set(parent.uns)
    view = parent[parent.obs["sample"] != "control_5"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.condition_topology(view, "rpg", condition="condition", sample="sample", key_added="on_view")
    assert set(parent.uns) == before and view.uns["on_view"]["units"].size == 9
    first = view.uns["on_view"]["pval"].copy()
    sks.tl.condition_topology(view, "rpg", condition="condition", sample="sample", key_added="on_view")
    np.testing.assert_array_equal(view.uns["on_view"]["pval"], first)
