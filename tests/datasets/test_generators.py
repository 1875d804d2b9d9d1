import anndata
import numpy as np
import pytest

import scskeleton as sks


@pytest.mark.parametrize("n_leaves", [2, 3, 4])
def test_branching_ground_truth(n_leaves):
    adata = sks.datasets.branching(500, n_leaves=n_leaves, n_dims=30, random_state=2)
    assert adata.shape == (500, 30)
    assert len(adata.obs["true_branch"].cat.categories) == 2 * n_leaves - 1
    trunk = adata.obs["true_branch"] == "trunk"
    assert adata.obs.loc[trunk, "true_pseudotime"].max() <= 1.0 <= adata.obs.loc[~trunk, "true_pseudotime"].min()
    again = sks.datasets.branching(500, n_leaves=n_leaves, n_dims=30, random_state=2)
    np.testing.assert_array_equal(adata.X, again.X)


def test_branching_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n_leaves"):
        sks.datasets.branching(100, n_leaves=1)
    with pytest.raises(ValueError, match="noise"):
        sks.datasets.branching(100, noise=-0.1)


@pytest.mark.parametrize("loader", [sks.datasets.krumsiek11, sks.datasets.toggleswitch])
def test_bundled_data_load_offline_and_write(loader, tmp_path):
    adata = loader()
    assert adata.obs_names.is_unique and adata.n_obs > 0
    adata.write_h5ad(tmp_path / "data.h5ad")
    assert anndata.read_h5ad(tmp_path / "data.h5ad").shape == adata.shape
