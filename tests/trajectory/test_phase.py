"""``tl.phase``: the position of each cell once round the loop of a graph."""

import anndata
import numpy as np
import pytest
import scanpy as sc

import scskeleton as sks

sc.settings.verbosity = 0


def _circular_agreement(phase, angle):
    """|mean exp(i(2π phase − angle))|: 1 when the phase runs the same way as the angle, at any offset."""
    finite = np.isfinite(phase)
    return float(np.abs(np.mean(np.exp(1j * (2 * np.pi * phase[finite] - angle[finite])))))


def _stages(adata, column):
    """Quarter-turn stages of a true angle, as a cell-cycle scoring would label the cells."""
    quarter = np.floor(np.mod(adata.obs[column].to_numpy(), 2 * np.pi) / (np.pi / 2)).astype(int)
    adata.obs["stage"] = np.array(["G1", "S", "G2", "M"])[quarter]


@pytest.fixture
def ring():
    adata = sks.datasets.circle(300, random_state=0)
    sks.tl.rpg_l1(adata)
    _stages(adata, "true_angle")
    sks.tl.root(adata, "rpg_l1", group=("stage", "G1"))
    return adata


@pytest.mark.parametrize("seed", [0, 1])
def test_the_phase_of_cycling_counts_follows_their_true_phase(seed):
    """Counts of cycling cells through scanpy's preprocessing: the phase round the ℓ1 loop agrees with the
    true phase at 0.976–0.994 (circular, seeds 0–2 × amplitudes 1 and 0.6 × even or skewed phases)."""
    adata = sks.datasets.cell_cycle(1500, random_state=seed)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=500)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    sks.tl.rpg_l1(adata)
    _stages(adata, "true_phase")
    sks.tl.root(adata, "rpg_l1", group=("stage", "G1"))
    sks.tl.phase(adata, "rpg_l1", toward=("stage", "S"))
    phase = adata.obs["rpg_l1_phase"].to_numpy()
    assert np.mean(np.isfinite(phase)) > 0.95
    assert np.nanmin(phase) >= 0 and np.nanmax(phase) < 1
    assert _circular_agreement(phase, adata.obs["true_phase"].to_numpy()) > 0.97


def test_toward_chooses_the_way_round(ring):
    angle = ring.obs["true_angle"].to_numpy()
    sks.tl.phase(ring, toward=("stage", "S"))
    forward = ring.obs["rpg_l1_phase"].to_numpy().copy()
    assert _circular_agreement(forward, angle) > 0.98
    loop = ring.uns["rpg_l1"]["loop"]
    sks.tl.phase(ring, toward=("stage", "M"))
    backward = ring.obs["rpg_l1_phase"].to_numpy()
    assert _circular_agreement(backward, -angle) > 0.98
    assert ring.uns["rpg_l1"]["loop"][0] == loop[0]
    # the same loop run the other way: phases add up to one turn
    np.testing.assert_allclose(np.mod(forward + backward, 1.0) * (1 - np.mod(forward + backward, 1.0)), 0, atol=1e-9)


def test_the_phase_is_reproducible_and_survives_h5ad(ring, tmp_path):
    sks.tl.phase(ring, toward=("stage", "S"))
    again = sks.tl.phase(ring.copy(), toward=("stage", "S"), copy=True)
    np.testing.assert_array_equal(again.obs["rpg_l1_phase"], ring.obs["rpg_l1_phase"])
    ring.write_h5ad(tmp_path / "ring.h5ad")
    back = anndata.read_h5ad(tmp_path / "ring.h5ad")
    np.testing.assert_array_equal(back.obs["rpg_l1_phase"], ring.obs["rpg_l1_phase"])
    np.testing.assert_array_equal(back.uns["rpg_l1"]["loop"], ring.uns["rpg_l1"]["loop"])


def test_copy_leaves_the_input_alone(ring):
    result = sks.tl.phase(ring, copy=True)
    assert "rpg_l1_phase" in result.obs and "rpg_l1_phase" not in ring.obs
    assert "loop" not in ring.uns["rpg_l1"]


def test_bad_input_raises_and_leaves_adata_unchanged(ring):
    unrooted = sks.datasets.circle(200, random_state=1)
    sks.tl.rpg_l1(unrooted)
    with pytest.raises(KeyError, match="no root"):
        sks.tl.phase(unrooted)
    start = int(ring.uns["rpg_l1"]["root"])
    with pytest.raises(ValueError, match="where the phase starts"):
        sks.tl.phase(ring, toward=start)
    with pytest.raises(KeyError):
        sks.tl.phase(ring, toward=("no_such_column", "S"))
    tree = sks.datasets.branching(500, n_leaves=3, random_state=0)
    tree.obsm["X_pca"] = np.asarray(tree.X[:, :10])
    sks.tl.rpg(tree)
    sks.tl.root(tree, "rpg", obs_min="true_pseudotime")
    with pytest.raises(ValueError, match="0 independent cycles"):
        sks.tl.phase(tree, "rpg")
    for adata, key in ((unrooted, "rpg_l1"), (ring, "rpg_l1"), (tree, "rpg")):
        assert f"{key}_phase" not in adata.obs and "loop" not in adata.uns[key]


@pytest.mark.parametrize("seed", [1, 2])
def test_a_loop_with_a_branch_leaving_it(seed):
    """A ring of 800 cells with 300 cells leaving it along a branch (10 dimensions): the ℓ1 graph closes the
    ring (left open by chance: its gap's cells join no nodes on either side), the phase runs round it, and
    the branch's cells beyond the junction get none."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * np.pi, 800)
    away = rng.uniform(0, 6, 300)
    plane = np.vstack([np.column_stack([5 * np.cos(angle), 5 * np.sin(angle)]), np.column_stack([5 + away, 0.5 * away])])
    values = np.hstack([plane, np.zeros((1100, 8))]) + rng.normal(scale=0.3, size=(1100, 10))
    adata = anndata.AnnData(values)
    adata.obsm["X_pca"] = values
    adata.obs["angle"] = np.r_[angle, np.full(300, np.nan)]
    stage = np.floor(np.mod(angle, 2 * np.pi) / (np.pi / 2)).astype(int)
    adata.obs["stage"] = np.r_[np.array(["G1", "S", "G2", "M"])[stage], np.full(300, "branch")]
    sks.tl.rpg_l1(adata)
    sks.tl.root(adata, "rpg_l1", group=("stage", "G1"))
    sks.tl.phase(adata, "rpg_l1", toward=("stage", "S"))
    phase = adata.obs["rpg_l1_phase"].to_numpy()
    assert np.mean(np.isfinite(phase[:800])) > 0.95
    assert _circular_agreement(phase[:800], angle) > 0.98
    assert np.mean(np.isfinite(phase[800:][away > 1.5])) < 0.05


def test_trends_round_the_loop_find_the_cycling_genes(ring, tmp_path):
    """tl.trends(loop=True) fits the cells against their phase with cyclic splines: a gene following the
    angle is found and drawn once round; noise genes are not; the result survives h5ad."""
    sks.tl.phase(ring, toward=("stage", "S"))
    rng = np.random.default_rng(0)
    angle = ring.obs["true_angle"].to_numpy()
    values = np.column_stack([np.sin(angle) + rng.normal(scale=0.5, size=ring.n_obs), rng.normal(size=(ring.n_obs, 50))])
    genes = anndata.AnnData(values, obs=ring.obs.copy(), uns=ring.uns, obsm=ring.obsm)
    genes.var_names = ["cycling"] + [f"noise_{i}" for i in range(50)]
    sks.tl.trends(genes, "rpg_l1", loop=True)
    qvals = genes.var["rpg_l1_trends_qval"].to_numpy()
    assert qvals[0] < 1e-20 and np.mean(qvals[1:] < 0.05) <= 0.04
    result = genes.uns["rpg_l1_trends"]
    assert result["time"] == "phase" and result["params"]["loop"]
    curve = genes.varm["rpg_l1_trends_curves"][0]
    assert abs(curve[0] - curve[-1]) < 0.1 * np.ptp(curve)  # one turn: back where it started
    edges = np.asarray(result["edges"]["path"])
    assert edges.shape[0] == len(ring.uns["rpg_l1"]["loop"]) and edges[-1, 1] == edges[0, 0]
    genes.write_h5ad(tmp_path / "trends.h5ad")
    back = anndata.read_h5ad(tmp_path / "trends.h5ad")
    np.testing.assert_array_equal(back.var["rpg_l1_trends_pval"], genes.var["rpg_l1_trends_pval"])


def test_trends_round_the_loop_need_a_phase(ring):
    with pytest.raises(KeyError, match="no phase yet"):
        sks.tl.trends(ring, "rpg_l1", loop=True)
    sks.tl.phase(ring)
    with pytest.raises(ValueError, match="exactly one of"):
        sks.tl.trends(ring, "rpg_l1", loop=True, segment="0")
    assert "rpg_l1_trends" not in ring.uns


def test_cleanup_keeps_the_phase_the_same_way_round(ring):
    """tl.cleanup rewrites the graph (renumbered nodes); the phase is run again, the same way round."""
    sks.tl.pseudotime(ring)
    sks.tl.phase(ring, toward=("stage", "S"))
    before = ring.obs["rpg_l1_phase"].to_numpy().copy()
    sks.tl.cleanup(ring, min_cells=1000)  # removes every terminal branch; the loop has none
    after = ring.obs["rpg_l1_phase"].to_numpy()
    assert "loop" in ring.uns["rpg_l1"]  # written again: the rewritten entry had none
    assert _circular_agreement(after, 2 * np.pi * before) > 0.99
    np.testing.assert_allclose(after[np.isfinite(before)], before[np.isfinite(before)], atol=0.02)
