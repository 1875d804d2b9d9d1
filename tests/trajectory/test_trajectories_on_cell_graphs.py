"""Trajectory tools and plots on the graphs of cell-level learners (every cell is a node)."""

import anndata
import numpy as np
import pytest
from scipy.stats import spearmanr

import scskeleton as sks


def test_pseudotime_along_the_mpme_graph_follows_the_curve(tmp_path):
    adata = sks.datasets.distorted_s(150, random_state=0)
    sks.tl.mpme(adata, lam=10)
    sks.tl.root(adata, "mpme", obs_min="true_position")
    sks.tl.pseudotime(adata, "mpme")
    times = adata.obs["mpme_pseudotime"]
    assert times.notna().all() and times.min() == 0.0
    assert spearmanr(times, adata.obs["true_position"])[0] >= 0.95
    # the root is a cell at the start of the curve
    assert adata.obs["true_position"].iloc[int(adata.uns["mpme"]["root"])] <= np.quantile(adata.obs["true_position"], 0.05)

    frame = sks.tl.path(adata, "mpme", int(adata.uns["mpme"]["root"]), int(np.argmax(times)))
    assert frame["position"].is_monotonic_increasing and len(frame) >= 2

    sks.pl.tree(adata, "mpme", color="mpme_pseudotime", show_branch_points=False, show=False)
    sks.pl.convergence(adata, "mpme", show=False)

    adata.write_h5ad(tmp_path / "mpme.h5ad")
    back = anndata.read_h5ad(tmp_path / "mpme.h5ad")
    sks.tl.pseudotime(back, "mpme")
    np.testing.assert_array_equal(back.obs["mpme_pseudotime"], times)


def test_one_root_per_esl_component():
    adata = sks.datasets.line_and_circle(120, 120, random_state=0)
    sks.tl.esl(adata)
    component = adata.obs["esl_component"].to_numpy()
    position = adata.obs["true_position"].to_numpy()
    line = (adata.obs["true_component"] == "line").to_numpy()
    # the components are the two structures, so each root below starts one of them
    assert len(set(component[line])) == 1 and len(set(component[~line])) == 1
    assert set(component[line]) != set(component[~line])
    starts = [int(np.flatnonzero(component == c)[np.argmin(position[component == c])]) for c in ("0", "1")]
    sks.tl.root(adata, "esl", node=starts)
    sks.tl.pseudotime(adata, "esl")
    times = adata.obs["esl_pseudotime"].to_numpy()
    assert np.isfinite(times).all()
    np.testing.assert_array_equal(times[starts], 0.0)
    # rooted at its start, the line is timed forwards (the sign matters: a reversed order fails)
    assert spearmanr(times[line], position[line])[0] >= 0.95
    # rooted at the cell of smallest angle, the circle is timed by the distance around the circle
    # from that cell, which grows both ways round and peaks opposite the root
    angle = position[~line]
    around = np.abs(np.angle(np.exp(1j * (angle - angle.min()))))
    assert spearmanr(times[~line], around)[0] >= 0.9


def test_graph_without_embedding_is_reported():
    adata = sks.datasets.circle(40)
    sks.tl.mpme(adata)
    del adata.obsm["X_mpme"]
    with pytest.raises(KeyError, match="X_mpme"):
        sks.tl.root(adata, "mpme", node=0)
