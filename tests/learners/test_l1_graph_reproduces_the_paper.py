"""The ℓ1 graph against the RPG paper's figures (Fig. 5) on its Table 1 test sets.

What the figures show, checked: curves are curves (≤ 3 independent cycles, E − V +
components), the circle is one loop through most of its nodes, two moons and
three clusters come apart, and both learners converge within 30 iterations.
Checked on the generated sets of ``sks.datasets`` with random state 0; the
robustness over other random states is measured in ``docs/methods/rpg.md``.
Cases not met at other random states are listed in the method note.
"""

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy.sparse import csgraph

import scskeleton as sks

sc.settings.verbosity = 0

#: Table 1 of the paper: N, sigma, gamma, lambda, nn.
TABLE1 = {
    "distorted_s": (100, 0.01, 0.5, 1.0, 5),
    "spiral": (200, 0.01, 0.5, 1.0, 10),
    "circle": (100, 0.1, 0.5, 1.0, 10),
    "moons": (200, 0.01, 3.0, 0.1, 5),
    "toy_tree": (300, 0.01, 10.0, 1.0, 5),
    "three_clusters": (300, 0.01, 0.5, 0.1, 5),
}


def _fit(name, params, method="rpg_l1", **extra):
    n_cells, sigma, gamma, lam, nn = TABLE1[name]
    adata = getattr(sks.datasets, name)(n_cells, random_state=0)
    if params == "table":
        kwargs = dict(sigma=sigma, gamma=gamma)
        if method == "rpg_l1":
            kwargs.update(lam=lam, n_neighbors=nn)
    else:
        kwargs = {}
    getattr(sks.tl, method)(adata, **kwargs, **extra)
    return adata.uns[method]


def _preprocess(adata, n_top_genes):
    """scanpy's usual preprocessing of counts down to 30 principal components."""
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=n_top_genes)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")


def _cycles(adjacency):
    n_components = csgraph.connected_components(adjacency, directed=False)[0]
    return adjacency.nnz // 2 - adjacency.shape[0] + n_components


def _components(adjacency):
    return csgraph.connected_components(adjacency, directed=False)[0]


@pytest.mark.parametrize(
    "name, params",
    [("distorted_s", "table"), ("distorted_s", "default"), ("spiral", "table"), ("spiral", "default")],
)
def test_curves_are_curves(name, params):
    entry = _fit(name, params)
    assert _cycles(entry["adjacency"]) <= 3
    # the linear program's own W is the band the paper draws: many more cycles
    assert _cycles(entry["lp_adjacency"]) > _cycles(entry["adjacency"])


@pytest.mark.parametrize("params", ["table", "default"])
def test_circle_is_one_loop(params):
    entry = _fit("circle", params)
    adjacency = entry["adjacency"]
    basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
    longest = max((len(cycle) for cycle in basis), default=0)
    assert longest >= 0.8 * adjacency.shape[0]
    assert len(basis) - 1 <= 3


@pytest.mark.parametrize("params", ["table", "default"])
@pytest.mark.parametrize("name, n_components", [("moons", 2), ("three_clusters", 3)])
def test_separate_parts_come_apart(name, n_components, params):
    entry = _fit(name, params)
    assert _components(entry["adjacency"]) == n_components
    assert _cycles(entry["adjacency"]) == 0  # a cycle around a cluster's own nodes encloses no hole


@pytest.mark.parametrize("params", ["table", "default"])
def test_a_moon_broken_by_a_chance_gap_is_joined(params):
    """Two moons, random state 3: one moon's 100 cells leave an empty stretch of 0.25 (8 mean spacings),
    which the skeleton's pieces alone, shorter than the stretch their cells cover, put at 0.007; with
    the cells' reach beyond the pieces' ends it is sampling (3 pieces before, 2 now), and the gap
    between the moons is not."""
    n_cells, sigma, gamma, lam, nn = TABLE1["moons"]
    adata = sks.datasets.moons(n_cells, random_state=3)
    kwargs = dict(sigma=sigma, gamma=gamma, lam=lam, n_neighbors=nn) if params == "table" else {}
    sks.tl.rpg_l1(adata, **kwargs)
    entry = adata.uns["rpg_l1"]
    label = csgraph.connected_components(entry["adjacency"], directed=False)[1]
    nearest = np.argmin(((np.asarray(adata.obsm["X_pca"])[:, None] - entry["nodes"][None]) ** 2).sum(-1), axis=1)
    assert label.max() == 1
    assert (pd.crosstab(label[nearest], adata.obs["true_component"]).max(axis=1) == np.bincount(label[nearest])).all()


def test_a_noisy_ring_in_30_dimensions_is_one_loop():
    """A ring of 1,000 cells with noise in 30 dimensions: the loop and nothing else (before the
    hole test, 5–8 independent cycles across the noise band)."""
    rng = np.random.default_rng(0)
    angle = rng.uniform(0, 2 * np.pi, 1000)
    values = rng.normal(scale=0.8, size=(1000, 30))
    values[:, 0] += 5 * np.cos(angle)
    values[:, 1] += 5 * np.sin(angle)
    values[:, 2] += 1.5 * np.sin(2 * angle)  # a saddle, not a planar ring
    adata = sc.AnnData(values)
    adata.obsm["X_pca"] = values
    sks.tl.rpg_l1(adata)
    adjacency = adata.uns["rpg_l1"]["adjacency"]
    basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
    assert len(basis) == 1 and len(basis[0]) >= 0.8 * adjacency.shape[0]


def _noisy_arc(degrees, seed, noise=0.3, dims=30, n_cells=1000):
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, np.deg2rad(degrees), n_cells)
    values = rng.normal(scale=noise, size=(n_cells, dims))
    values[:, 0] += 5 * np.cos(angle)
    values[:, 1] += 5 * np.sin(angle)
    if dims > 2:
        values[:, 2] += 1.5 * np.sin(2 * angle)  # bent out of its plane, as a saddle
    adata = sc.AnnData(values)
    adata.obsm["X_pca"] = values
    return adata


def test_a_thin_ring_closes_where_cells_join_its_ends_and_an_arc_stays_open():
    """A thin ring whose nodes leave a wider gap somewhere: the program drew no edge across it, but
    cells lie there with the gap's two end nodes as their two nearest (competitive Hebbian
    support), so the ring is closed. Arcs whose gap is wider than the sampling of their cells
    explains stay paths: 300° of 100 cells, 340° of 300 cells (closed before the rings of 100
    cells were read against their sampling: none of them either)."""
    ring = _noisy_arc(360, seed=1)
    sks.tl.rpg_l1(ring)
    adjacency = ring.uns["rpg_l1"]["adjacency"]
    basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
    assert len(basis) == 1 and len(basis[0]) >= 0.8 * adjacency.shape[0]
    for seed in range(3):
        for degrees, n_cells in [(300, 100), (340, 300)]:
            arc = _noisy_arc(degrees, seed=seed, noise=0.05, dims=2, n_cells=n_cells)
            sks.tl.rpg_l1(arc)
            assert _cycles(arc.uns["rpg_l1"]["adjacency"]) == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_ring_of_100_cells_left_open_by_chance_is_closed(seed):
    """A thin ring of 100 cells: its widest empty stretch (4–7 mean spacings) is what uniform
    sampling leaves and no cell joins the nodes on either side: one loop on 1 of 10 seeds before
    the gap was read against the sampling, 10 of 10 now. The circle of Table 1 at default
    parameters: 3 of 10 seeds before, 10 of 10 now (this test, and seeds 5–9 measured)."""
    ring = _noisy_arc(360, seed=seed, noise=0.05, dims=2, n_cells=100)
    circle = sks.datasets.circle(100, random_state=seed)
    for adata in (ring, circle):
        sks.tl.rpg_l1(adata)
        adjacency = adata.uns["rpg_l1"]["adjacency"]
        basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
        assert len(basis) == 1 and len(basis[0]) >= 0.8 * adjacency.shape[0]


@pytest.mark.parametrize("params", ["table", "default"])
def test_a_curve_is_one_piece(params):
    """Where a curve's cells thin out by chance no cell is shared across the gap and the curve fell
    apart: the distorted S of 100 cells in 2–5 pieces on 10 of 10 seeds with Table 1's
    parameters, 6 of 10 at defaults. The pieces are joined where sampling explains the gap."""
    for seed in range(4):
        adata = sks.datasets.distorted_s(100, random_state=seed)
        n_cells, sigma, gamma, lam, nn = TABLE1["distorted_s"]
        kwargs = dict(sigma=sigma, gamma=gamma, lam=lam, n_neighbors=nn) if params == "table" else {}
        sks.tl.rpg_l1(adata, **kwargs)
        adjacency = adata.uns["rpg_l1"]["adjacency"]
        assert _components(adjacency) == 1 and _cycles(adjacency) <= 3


@pytest.mark.parametrize("n_dims", [2, 5, 10])
def test_clusters_in_few_dimensions_get_no_cycle(n_dims):
    """Four Gaussian clusters of 1,000 and 3,000 cells (seeds 0–4): in 5 and 10 dimensions cycles
    through knots of nearly coincident nodes (0.001–0.003 as wide as their cells' spread), in two
    dimensions cycles around patches of a cluster without a node but with cells: 0–4 cycles per
    data set on 15 of these 30 before the cells were asked; none now."""
    for seed in (1, 4):
        adata = sks.datasets.blobs(1000, n_centers=4, n_dims=n_dims, random_state=seed)
        adata.obsm["X_pca"] = np.asarray(adata.X)
        sks.tl.rpg_l1(adata)
        assert _cycles(adata.uns["rpg_l1"]["adjacency"]) == 0


def test_round_clusters_in_30_dimensions_get_no_cycle():
    """Gaussian clusters in 30 dimensions: their nodes lie on shells around empty centres, and
    cycles through them (2–7 per data set before the hole test) are not loops of the data."""
    adata = sks.datasets.blobs(3000, n_centers=5, n_dims=30, cluster_std=1.0, random_state=0)
    adata.obsm["X_pca"] = np.asarray(adata.X)
    sks.tl.rpg_l1(adata)
    adjacency = adata.uns["rpg_l1"]["adjacency"]
    assert _components(adjacency) == 5 and _cycles(adjacency) == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cell_cycle_in_counts_is_one_loop(seed):
    """Counts of 1,500 cells whose 200 cycling genes follow cos(phase − φ_g) in log mean: the ℓ1 graph
    draws the loop and nothing else (8–15 cycles before cycles needed a hole; 2 on seeds 1 and 2
    with the spanning forest's way round instead of the shortest)."""
    rng = np.random.default_rng(seed)
    phase = rng.uniform(0, 2 * np.pi, 1500)
    log_mean = np.tile(rng.normal(0, 1, 1000), (1500, 1))
    log_mean[:, :200] += np.cos(phase[:, None] - rng.uniform(0, 2 * np.pi, 200)[None])
    mean = np.exp(log_mean) * rng.lognormal(0, 0.3, 1500)[:, None]
    adata = sc.AnnData(rng.negative_binomial(5, 5 / (5 + mean)).astype(float))
    _preprocess(adata, 500)
    sks.tl.rpg_l1(adata)
    adjacency = adata.uns["rpg_l1"]["adjacency"]
    basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
    assert len(basis) == 1 and len(basis[0]) >= 0.5 * adjacency.shape[0]


@pytest.mark.parametrize("prune", [True, False])
def test_the_graph_of_a_branching_tree_of_counts_has_its_branch_points(prune):
    """The skeleton's spanning forest leaves the band's far side hanging off the curve as hairs; the
    pruning removes them (seeds 0–4, 2–4 fates: the right count in 14 of 15 runs, 6 of 15 unpruned)."""
    adata = sks.datasets.simulate_trajectory(1000, n_fates=3, random_state=0)
    _preprocess(adata, 1000)
    sks.tl.rpg_l1(adata, prune=prune)
    sks.tl.root(adata, "rpg_l1", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "rpg_l1")
    leaves = int(np.sum(np.diff(adata.uns["rpg_l1"]["adjacency"].tocsr().indptr) == 1))
    if prune:
        assert len(adata.uns["rpg_l1"]["branch_points"]) == 2 and leaves == 4  # three fates and the root
    else:
        assert leaves > 20


@pytest.mark.parametrize("phase_skew", [1.0, 1.3])
def test_the_cell_cycle_generator_draws_one_loop(phase_skew):
    """sks.datasets.cell_cycle through the standard preprocessing: the ℓ1 graph is the loop (23 of 24
    runs over seeds 0–5, amplitudes 1 and 0.6, phases even or skewed)."""
    adata = sks.datasets.cell_cycle(random_state=0, phase_skew=phase_skew)
    _preprocess(adata, 500)
    sks.tl.rpg_l1(adata)
    adjacency = adata.uns["rpg_l1"]["adjacency"]
    basis = nx.cycle_basis(nx.from_scipy_sparse_array(adjacency))
    assert len(basis) == 1 and len(basis[0]) == adjacency.shape[0]  # a ring, with no hair left


def test_simulated_counts_get_no_cycle_across_their_dense_states():
    """The ℓ1 graph of a branching tree of counts closed 12 cycles through its densest branch."""
    adata = sks.datasets.simulate_trajectory(1000, n_fates=2, cycle=True, random_state=0)
    _preprocess(adata, 1000)
    sks.tl.rpg_l1(adata)
    assert _cycles(adata.uns["rpg_l1"]["adjacency"]) == 0
    assert _cycles(adata.uns["rpg_l1"]["lp_adjacency"]) > 100  # the band the linear program draws


@pytest.mark.parametrize("method", ["rpg", "rpg_l1"])
@pytest.mark.parametrize("name", list(TABLE1))
def test_converges_within_30_passes_at_table1(name, method):
    # n_iter counts passes over the cells, over-relaxed steps that were rejected included; the
    # tree takes the paper's plain steps by default (see tl.rpg) and over-relaxed ones on request
    entry = _fit(name, "table", method, over_relax=True)
    assert entry["converged"] and entry["n_iter"] <= 30
