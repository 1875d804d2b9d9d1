"""scanpy conventions shared by the tools: ``copy=``, ``random_state``, ``use_rep=None``."""

import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc

import scskeleton as sks
from scskeleton.tl._inputs import check_random_state, choose_representation


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
