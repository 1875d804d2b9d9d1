"""Tests of bootstrap branch support: ``_core.trees.support`` on hand-made trees, ``tl.branch_support``
on generated branching data, and its display in ``pl.tree``."""

import anndata
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from scipy import sparse  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton._core.trees import support as core  # noqa: E402
from scskeleton._core.graphs import degrees, from_edges  # noqa: E402
from scskeleton._core.trees.trajectory import project_onto_graph  # noqa: E402
from scskeleton._anndata.schema import cell_coordinates, read_graph  # noqa: E402
from scskeleton.tl.trajectory.support import _refit_kwargs  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


def _tree(edges, n_nodes=None):
    edges = np.asarray(edges)
    return from_edges(edges, np.ones(len(edges)), n_nodes or int(edges.max()) + 1)


def _cells_on(edges_and_counts, fraction=0.5):
    """Projection arrays for ``count`` cells inside each edge (u, v)."""
    start = np.concatenate([np.full(c, u) for (u, v), c in edges_and_counts])
    end = np.concatenate([np.full(c, v) for (u, v), c in edges_and_counts])
    return start, end, np.full(start.size, fraction)


# A fork at node 2:   0 - 1 - 2 - 3
#                             |
#                             4 - 5
FORK = [(0, 1), (1, 2), (2, 3), (2, 4), (4, 5)]


# --------------------------------------------------------------------------- core


def test_node_at_reads_fraction_zero_and_one():
    at = core.node_at(np.array([0, 0, 0, 7]), np.array([1, 1, 1, 7]), np.array([0.0, 0.5, 1.0, 0.0]))
    assert at.tolist() == [0, -1, 1, 7]


def test_node_arms_of_a_fork():
    labels = core.node_arms(_tree(FORK), 2)
    # arms numbered by their smallest neighbour of node 2: 1 -> 0, 3 -> 1, 4 -> 2
    assert labels.tolist() == [0, 0, -1, 1, 2, 2]


def test_node_arms_with_a_cycle_and_another_component():
    # 0-1-2-0 is a cycle through node 0, 0-3 a stub, 4-5 another component
    labels = core.node_arms(_tree([(0, 1), (1, 2), (0, 2), (0, 3), (4, 5)]), 0)
    assert labels.tolist() == [-1, 0, 0, 1, -1, -1]


def test_cell_arms_leave_out_cells_at_the_branch_point():
    start = np.array([0, 2, 2, 1, 4, 2])
    end = np.array([1, 3, 4, 2, 5, 1])
    fraction = np.array([0.5, 0.5, 0.0, 1.0, 1.0, 0.3])
    labels = core.cell_arms(_tree(FORK), start, end, fraction, 2)
    # cell 2 sits at node 2 (fraction 0), cell 3 too (fraction 1 on (1, 2))
    assert labels.tolist() == [0, 1, -1, -1, 2, 0]


def test_terminal_segments_of_a_fork_and_of_a_bare_path():
    leaves, paths = core.terminal_segments(_tree(FORK))
    assert leaves.tolist() == [0, 3, 5]
    assert [p.tolist() for p in paths] == [[0, 1, 2], [3, 2], [5, 4, 2]]
    leaves, paths = core.terminal_segments(_tree([(0, 1), (1, 2)]))
    assert [p.tolist() for p in paths] == [[0, 1, 2], [2, 1, 0]]


def test_segment_sets_count_cells_at_the_leaf_but_not_at_the_branch_point():
    start = np.array([0, 1, 2, 3, 4, 5, 2])
    end = np.array([1, 2, 1, 2, 5, 4, 4])
    fraction = np.array([0.0, 0.5, 0.0, 0.2, 0.5, 0.0, 0.5])
    sets = core.segment_sets(_tree(FORK), start, end, fraction)
    members = sets.membership.toarray().astype(bool)
    # leaf 0: cells 0 (at the leaf) and 1; cell 2 sits at branch point 2
    assert np.flatnonzero(members[:, 0]).tolist() == [0, 1]
    assert np.flatnonzero(members[:, 1]).tolist() == [3]
    assert np.flatnonzero(members[:, 2]).tolist() == [4, 5, 6]
    # a bare path is the segment of both its leaves, end nodes included
    start, end, fraction = np.array([0, 1, 2]), np.array([1, 2, 1]), np.array([0.0, 0.5, 0.0])
    sets = core.segment_sets(_tree([(0, 1), (1, 2)]), start, end, fraction)
    assert sets.membership.toarray().tolist() == [[1, 1], [1, 1], [1, 1]]


def test_jaccard_values_and_empty_sets():
    first = sparse.csr_matrix(np.array([[1, 0], [1, 0], [0, 0], [0, 0]]))
    second = sparse.csr_matrix(np.array([[1, 0], [0, 0], [1, 0], [0, 0]]))
    assert np.allclose(core.jaccard(first, second), [[1 / 3, 0.0], [0.0, 0.0]])


def test_arms_matched_is_a_matching_not_a_greedy_choice():
    # greedy (or the largest total similarity) takes (0, 0) and leaves row 1 at 0
    similarity = np.array([[1.0, 0.5], [0.5, 0.0]])
    assert core.arms_matched(similarity, 0.5)
    assert not core.arms_matched(similarity, 0.6)
    assert not core.arms_matched(np.array([[0.9], [0.9]]), 0.5)  # two arms, one candidate


def test_resolutions_add_unions_of_arms_at_multifurcations():
    membership = sparse.identity(7, format="csr")  # one cell per arm
    arms = core.CellSets(membership, np.array([0, 0, 0, 1, 1, 1, 1]))
    candidates = core.resolutions(arms)
    # the 3-way point keeps its 3 arms; the 4-way point adds its C(4, 2) = 6 pairs
    assert candidates.membership.shape == (7, 3 + 4 + 6)
    assert np.bincount(candidates.owner).tolist() == [3, 10]


def _star_and_split():
    """A 4-way point (star) and the same cells on two close 3-way points."""
    # star: centre 0, arms 0-1-5, 0-2-6, 0-3-7, 0-4-8 with 10 cells on each outer edge
    star = _tree([(0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (2, 6), (3, 7), (4, 8)])
    star_cells = _cells_on([((1, 5), 10), ((2, 6), 10), ((3, 7), 10), ((4, 8), 10)])
    # split: 0 - 1 joined, X and Y hang at 0, Z and W at 1; the same cells in the same order
    split = _tree([(0, 1), (0, 2), (0, 3), (1, 4), (1, 5)])
    split_cells = _cells_on([((0, 2), 10), ((0, 3), 10), ((1, 4), 10), ((1, 5), 10)], fraction=0.9)
    return core.tree_sets(star, *star_cells), core.tree_sets(split, *split_cells)


def test_multifurcation_and_its_resolution_support_each_other():
    star, split = _star_and_split()
    points, leaves = core.supported(star, split, 0.5)
    assert points.tolist() == [True] and leaves.all()
    points, leaves = core.supported(split, star, 0.5)
    assert points.tolist() == [True, True] and leaves.all()


def test_a_stub_is_not_supported_by_a_tree_without_it():
    # reference: path 0-1-2-3-4 with a stub 2-5; refit: the same path without it
    reference = core.tree_sets(
        _tree([(0, 1), (1, 2), (2, 3), (3, 4), (2, 5)]),
        *_cells_on([((0, 1), 10), ((1, 2), 10), ((2, 3), 10), ((3, 4), 10), ((2, 5), 2)]),
    )
    refit = core.tree_sets(
        _tree([(0, 1), (1, 2), (2, 3), (3, 4)]),
        *_cells_on([((0, 1), 10), ((1, 2), 10), ((2, 3), 10), ((3, 4), 10), ((1, 2), 2)]),
    )
    points, leaves = core.supported(reference, refit, 0.5)
    assert reference.branch_points.tolist() == [2] and points.tolist() == [False]
    assert reference.leaves.tolist() == [0, 4, 5]
    assert not leaves[2]
    # and a tree always supports itself
    points, leaves = core.supported(reference, reference, 0.5)
    assert points.all() and leaves.all()


def test_refit_kwargs_follow_the_learner_signature():
    params = {"use_rep": "X_pca", "n_pcs": 10, "n_centers": 500, "lam": 3.0, "unknown": 1, "version": "0"}
    assert _refit_kwargs(sks.tl.ddrtree, params, 100) == {"n_centers": 100, "lam": 3.0}


# --------------------------------------------------------------------------- tl


def _fit(seed, method):
    adata = sks.datasets.branching(2000, n_leaves=3, random_state=seed)
    sc.pp.pca(adata, n_comps=10)
    getattr(sks.tl, method)(adata)
    return adata


@pytest.fixture(scope="module")
def fitted():
    """Branching data with a DDRTree and its support (10 refits); copy before mutating."""
    adata = _fit(0, "ddrtree")
    sks.tl.branch_support(adata, "ddrtree", n_boot=10)
    return adata


def _true_forks(adata, key):
    """{branch point: the true branches on each of its arms}, for the branch points that coincide
    with a generated fork: each arm holds most cells of at least one true branch. (A fitted fork
    may sit a little off the true one; a stub grown inside a branch holds no branch of its own.)"""
    graph = read_graph(adata, key)
    projection = project_onto_graph(cell_coordinates(adata, graph), graph.nodes, graph.adjacency)
    truth = adata.obs["true_branch"].cat.codes.to_numpy()
    totals = np.bincount(truth)
    forks = {}
    for point in np.flatnonzero(degrees(graph.adjacency) >= 3):
        arms = core.cell_arms(graph.adjacency, projection.edge_start, projection.edge_end, projection.fraction, point)
        owned = [
            frozenset(np.flatnonzero(np.bincount(truth[arms == a], minlength=totals.size) > totals / 2).tolist())
            for a in range(core.node_arms(graph.adjacency, point).max() + 1)
        ]
        if all(owned):
            forks[int(point)] = frozenset(owned)
    return forks


def _support_of(adata, key, nodes, which="branch_point"):
    stored = adata.uns[key]["branch_support"]
    ids = stored["branch_points" if which == "branch_point" else "leaves"].tolist()
    return np.array([stored[f"{which}_support"][ids.index(n)] for n in nodes])


@pytest.mark.parametrize(("seed", "method"), [(0, "ddrtree"), (0, "rpg")])
def test_true_forks_are_supported(fitted, seed, method):
    if (seed, method) == (0, "ddrtree"):
        adata = fitted
    else:
        adata = _fit(seed, method)
        sks.tl.branch_support(adata, method, n_boot=10)
    forks = _true_forks(adata, method)
    assert len(set(forks.values())) == 2, forks  # both generated forks are found
    assert (_support_of(adata, method, list(forks)) >= 0.8).all()
    stored = adata.uns[method]["branch_support"]
    for name in ("branch_point_support", "leaf_support"):
        assert ((stored[name] >= 0) & (stored[name] <= 1)).all()


def _add_stub(adata, key):
    """Hang a new leaf off the degree-2 node farthest (in hops) from every other node kind."""
    entry = adata.uns[key]
    adjacency = sparse.csr_matrix(entry["adjacency"])
    degree = degrees(adjacency)
    hops = sparse.csgraph.shortest_path(adjacency, unweighted=True, directed=False)
    middle = np.flatnonzero(degree == 2)
    anchor = int(middle[hops[np.ix_(middle, np.flatnonzero(degree != 2))].min(axis=1).argmax()])
    nodes = np.asarray(entry["nodes"])
    neighbour = adjacency.indices[adjacency.indptr[anchor]]
    along = nodes[neighbour] - nodes[anchor]
    sideways = np.zeros_like(along)
    sideways[[0, 1]] = [-along[1], along[0]]  # a short step at right angles to the branch
    stub = nodes.shape[0]
    entry["nodes"] = np.vstack([nodes, nodes[anchor] + 0.5 * sideways])
    grown = sparse.lil_matrix((stub + 1, stub + 1))
    grown[:stub, :stub] = adjacency
    grown[anchor, stub] = grown[stub, anchor] = 1.0
    entry["adjacency"] = grown.tocsr()
    return anchor, stub


def test_a_hand_made_stub_gets_low_support(fitted):
    adata = fitted.copy()
    anchor, stub = _add_stub(adata, "ddrtree")
    sks.tl.branch_support(adata, "ddrtree", n_boot=5)
    assert _support_of(adata, "ddrtree", [anchor])[0] <= 0.5
    assert _support_of(adata, "ddrtree", [stub], which="leaf")[0] <= 0.5
    forks = _true_forks(adata, "ddrtree")
    assert (_support_of(adata, "ddrtree", list(forks)) >= 0.8).all()


def test_same_seed_same_support_and_fields(fitted):
    adata = fitted.copy()
    sks.tl.branch_support(adata, "ddrtree", n_boot=2, random_state=7)
    first = {k: np.array(v) for k, v in adata.uns["ddrtree"]["branch_support"].items()}
    sks.tl.branch_support(adata, "ddrtree", n_boot=2, random_state=7)
    second = adata.uns["ddrtree"]["branch_support"]
    assert set(second) == {
        "branch_points", "branch_point_support", "leaves", "leaf_support", "n_boot", "fraction", "min_jaccard",
        "random_state",
    }
    for name, value in first.items():
        assert np.array_equal(value, np.array(second[name])), name
    assert second["branch_points"].dtype == np.int64 and second["leaves"].dtype == np.int64
    assert (second["n_boot"], second["fraction"], second["random_state"]) == (2, 0.8, 7)


def test_h5ad_round_trip(fitted, tmp_path):
    path = tmp_path / "support.h5ad"
    fitted.write_h5ad(path)
    stored = fitted.uns["ddrtree"]["branch_support"]
    read = anndata.read_h5ad(path).uns["ddrtree"]["branch_support"]
    assert set(read) == set(stored)
    for name, value in stored.items():
        assert np.array_equal(np.asarray(read[name]), np.asarray(value)), name
        assert np.asarray(read[name]).dtype == np.asarray(value).dtype, name


def test_refit_under_the_key_removes_the_support(fitted):
    adata = fitted.copy()
    sks.tl.ddrtree(adata)
    assert "branch_support" not in adata.uns["ddrtree"]


def test_fraction_one_refits_the_same_tree():
    adata = sks.datasets.branching(300, n_leaves=2, random_state=0)
    sc.pp.pca(adata, n_comps=5)
    sks.tl.ddrtree(adata)
    sks.tl.branch_support(adata, "ddrtree", n_boot=2, fraction=1.0)
    stored = adata.uns["ddrtree"]["branch_support"]
    assert (stored["branch_point_support"] == 1).all() and (stored["leaf_support"] == 1).all()


def test_rpg_with_every_cell_a_node_on_x():
    # K = N (all 200 cells are nodes) is capped at the 160 cells of each subsample
    adata = sks.datasets.branching(200, n_leaves=2, n_dims=5, random_state=0)
    sks.tl.rpg(adata, use_rep="X", n_nodes=adata.n_obs)
    assert adata.uns["rpg"]["params"]["n_nodes"] == 200
    sks.tl.branch_support(adata, "rpg", n_boot=2)
    stored = adata.uns["rpg"]["branch_support"]
    assert stored["leaf_support"].size == stored["leaves"].size


def test_rpg_l1_graph_runs():
    adata = sks.datasets.branching(200, n_leaves=2, n_dims=5, random_state=0)
    sks.tl.rpg_l1(adata, use_rep="X", n_nodes=20, n_neighbors=4)
    sks.tl.branch_support(adata, "rpg_l1", n_boot=1)
    stored = adata.uns["rpg_l1"]["branch_support"]
    assert stored["branch_point_support"].size == stored["branch_points"].size


def _snapshot(adata):
    return (
        sorted(adata.uns), sorted(adata.uns["ddrtree"]), sorted(adata.obsm), sorted(adata.obs), sorted(adata.obsp),
    )


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n_boot": 0}, ValueError),
        ({"n_boot": 2.5}, ValueError),
        ({"fraction": 0.0}, ValueError),
        ({"fraction": 1.5}, ValueError),
        ({"fraction": 0.0005}, ValueError),  # one cell per subsample
        ({"min_jaccard": 0.0}, ValueError),
        ({"min_jaccard": 1.2}, ValueError),
        ({"random_state": -1}, ValueError),
    ],
)
def test_bad_parameters_raise_and_leave_adata_alone(fitted, kwargs, error):
    adata = fitted.copy()
    del adata.uns["ddrtree"]["branch_support"]
    before = _snapshot(adata)
    with pytest.raises(error):
        sks.tl.branch_support(adata, "ddrtree", **kwargs)
    assert _snapshot(adata) == before


def test_bad_keys_raise_and_leave_adata_alone(fitted):
    adata = fitted.copy()
    del adata.uns["ddrtree"]["branch_support"]
    before = _snapshot(adata)
    with pytest.raises(KeyError, match="No graph"):
        sks.tl.branch_support(adata, "nothing")
    # a cell-level learner's result: an embedding and a cell graph, no nodes
    adata.obsm["X_mpme"] = np.zeros((adata.n_obs, 2))
    adata.obsp["mpme_connectivities"] = sparse.identity(adata.n_obs, format="csr")
    adata.uns["mpme"] = {"method": "mpme", "params": {"use_rep": "X_pca"}}
    with pytest.raises(ValueError, match="cell-level"):
        sks.tl.branch_support(adata, "mpme")
    del adata.obsm["X_mpme"], adata.obsp["mpme_connectivities"], adata.uns["mpme"]
    # the representation the tree was fitted on is gone
    pca = adata.obsm.pop("X_pca")
    with pytest.raises(KeyError, match="X_pca"):
        sks.tl.branch_support(adata, "ddrtree")
    adata.obsm["X_pca"] = pca
    assert _snapshot(adata) == before


# --------------------------------------------------------------------------- pl


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _support_labels(ax):
    return [t for t in ax.texts if t.get_gid() == "scskeleton_support"]


@pytest.mark.parametrize("basis", [None, "X_pca"])
def test_tree_writes_the_support_next_to_each_node(fitted, basis):
    stored = fitted.uns["ddrtree"]["branch_support"]
    ax = sks.pl.tree(fitted, "ddrtree", basis=basis, show=False)
    labels = _support_labels(ax)
    assert len(labels) == stored["branch_points"].size + stored["leaves"].size
    expected = [f"{v:.2f}" for v in np.concatenate([stored["branch_point_support"], stored["leaf_support"]])]
    assert [t.get_text() for t in labels] == expected
    assert _support_labels(sks.pl.tree(fitted, "ddrtree", show_support=False, show=False)) == []


def test_tree_show_support_without_support_raises(fitted):
    adata = fitted.copy()
    del adata.uns["ddrtree"]["branch_support"]
    assert _support_labels(sks.pl.tree(adata, "ddrtree", show=False)) == []
    with pytest.raises(KeyError, match="branch_support"):
        sks.pl.tree(adata, "ddrtree", show_support=True, show=False)


def _collection(ax, gid):
    return [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]


def test_tree_draws_gap_edges_dashed(fitted):
    adata = fitted.copy()
    n_edges = adata.uns["ddrtree"]["adjacency"].nnz // 2
    ax = sks.pl.tree(adata, "ddrtree", show=False)
    assert _collection(ax, "scskeleton_gap_edges") == []
    upper = sparse.triu(adata.uns["ddrtree"]["adjacency"], k=1).tocoo()
    gaps = [[upper.col[0], upper.row[0]], [upper.row[1], upper.col[1]]]  # either order of the nodes
    adata.uns["ddrtree"]["gap_edges"] = np.array(gaps, dtype=np.int64)
    ax = sks.pl.tree(adata, "ddrtree", show=False)
    (solid,) = _collection(ax, "scskeleton_edges")
    (dashed,) = _collection(ax, "scskeleton_gap_edges")
    assert len(solid.get_segments()) == n_edges - 2
    assert len(dashed.get_segments()) == 2
    assert dashed.get_linestyle()[0][1] is not None  # a dash pattern, not a solid line
    adata.uns["ddrtree"]["gap_edges"] = np.array([[0, adata.uns["ddrtree"]["nodes"].shape[0]]])
    with pytest.raises(ValueError, match="gap_edges"):
        sks.pl.tree(adata, "ddrtree", show=False)


def test_min_support_drops_unsupported_leaves_in_pseudotime():
    adata = sks.datasets.branching(600, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "rpg")
    entry = adata.uns["rpg"]
    assert len(entry["branch_points"]) == 2
    root = int(entry["root"])
    tips = [int(leaf) for leaf in entry["leaves"] if int(leaf) != root]
    # pretend the bootstrap supports every tip but one
    entry["branch_support"] = {
        "branch_points": np.asarray(entry["branch_points"], dtype=np.int64),
        "branch_point_support": np.ones(len(entry["branch_points"])),
        "leaves": np.asarray(tips, dtype=np.int64),
        "leaf_support": np.array([0.1] + [1.0] * (len(tips) - 1)),
        "n_boot": 10, "fraction": 0.8, "min_jaccard": 0.5, "random_state": 0,
    }
    sks.tl.pseudotime(adata, "rpg", min_support=0.5)
    assert len(adata.uns["rpg"]["branch_points"]) == 1
    with pytest.raises(ValueError, match="min_support"):
        sks.tl.pseudotime(adata, "rpg", min_support=2.0)
    del adata.uns["rpg"]["branch_support"]
    with pytest.raises(KeyError, match="branch_support"):
        sks.tl.pseudotime(adata, "rpg", min_support=0.5)


def test_the_progress_bar_ends_its_line_before_the_next_log_line(monkeypatch, capsys):
    """A finished bar leaves its last state ended by a newline (not a carriage return that clears it), so
    in captured output (Jupyter, pytest) the log line after branch_support's bar, or after a solver's bar
    that stopped early, starts a line of its own."""
    import sys

    from scanpy import logging as logg

    from scskeleton._anndata import progress as _progress

    adata = sks.datasets.branching(300, n_leaves=2, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.rpg(adata)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    previous, verbosity = sc.settings.logfile, sc.settings.verbosity
    sc.settings.logfile, sc.settings.verbosity = sys.stderr, 2  # the captured stderr, info lines shown
    try:
        capsys.readouterr()
        sks.tl.branch_support(adata, "rpg", n_boot=2)
        err = capsys.readouterr().err
        assert "branch support (rpg)" in err and "2/2" in err
        assert any(line.startswith("    finished (") for line in err.split("\n")), repr(err)
        with _progress.solver_run("fit", use_rep="X_pca", shape=(10, 2), maxiter=50, size=_progress.LONG_RUN) as run:
            for iteration in range(3):  # converged after 3 of at most 50 iterations
                run.callback(iteration, 1.0)
        logg.warning("after the bar")
        err = capsys.readouterr().err
        assert "3/3" in err and any(line.startswith("WARNING: after the bar") for line in err.split("\n")), repr(err)
    finally:
        sc.settings.logfile, sc.settings.verbosity = previous, verbosity
