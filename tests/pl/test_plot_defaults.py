"""The plots' defaults read well with no workaround in a notebook: each test checks what a reader sees.

Support labels apart from each other and from the nodes, named and explained; the graph's legend entry
in words; grey cell-graph edges that fade as the graph gets denser; axis names and legend titles; tied
branch names; root and branch point markers the cells show through; pseudotime titles that say what
is plotted.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from anndata import AnnData  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.text import Annotation  # noqa: E402
from scipy import sparse  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton.pl._results import branch_names  # noqa: E402

# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")

#: A crafted tree: a tight cluster of five nodes (root, two forks, two tips) and one far tip that sets the
#: scale, so that the cluster's nodes lie a few points apart on screen.
NODES = np.array([[0.0, 0.0], [0.15, 0.0], [0.3, 0.1], [0.3, -0.1], [0.45, -0.1], [6.0, 4.0]])
EDGES = [(0, 1), (1, 2), (1, 3), (3, 4), (3, 5)]
CELLS_PER_NODE = 10


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _tree(method="ddrtree", key="ddrtree", categories=("0", "1")):
    """The crafted tree, rooted at node 0, with milestones, bootstrap support and a number-coded category."""
    k = len(NODES)
    rows, cols = np.array(EDGES).T
    adjacency = sparse.csr_matrix((np.ones(2 * len(EDGES)), (np.r_[rows, cols], np.r_[cols, rows])), shape=(k, k))
    owner = np.repeat(np.arange(k), CELLS_PER_NODE)
    n = owner.size
    rng = np.random.default_rng(0)
    cells = NODES[owner] + rng.normal(scale=0.01, size=(n, 2))
    obs = pd.DataFrame({"cluster": pd.Categorical(np.where(owner < 3, categories[0], categories[1]))},
                       index=[f"c{i}" for i in range(n)])
    adata = AnnData(X=np.zeros((n, 2)), obs=obs)
    adata.obsm[f"X_{key}"] = cells
    adata.obsm["X_spl_linear"] = cells * 2.0
    adata.obsm[f"{key}_assignment"] = sparse.csr_matrix((np.ones(n), (np.arange(n), owner)), shape=(n, k))
    adata.uns[key] = {
        "method": method, "nodes": NODES.copy(), "space": f"X_{key}", "adjacency": adjacency, "root": 0,
        "branch_points": np.array([1, 3]),
        "milestones": {"nodes": np.array([0, 1, 3, 2, 4, 5]),
                       "names": np.array(["root", "fork 1", "fork 2", "tip 1", "tip 2", "tip 3"], dtype=object)},
        "branch_support": {"branch_points": np.array([1, 3]), "branch_point_support": np.array([0.5, 0.9]),
                           "leaves": np.array([0, 2, 4, 5]), "leaf_support": np.array([1.0, 0.4, 0.3, 1.0]),
                           "n_boot": 10},
    }
    return adata


def _cells(ax):
    """The scatter of cells scanpy drew: the PathCollection with the most points."""
    return max((c for c in ax.collections if isinstance(c, PathCollection)), key=lambda c: len(c.get_offsets()))


def _graph_legend(ax):
    return next(a for a in ax.artists if isinstance(a, Legend))


def _support_labels(ax):
    return [t for t in ax.texts if isinstance(t, Annotation) and t.get_gid() == "scskeleton_support"]


# --- pl.tree: support labels ----------------------------------------------------------------------------


def test_support_labels_are_apart_named_inside_and_explained():
    adata = _tree()
    fig = sks.pl.tree(adata, "ddrtree", color="cluster", return_fig=True)
    ax = fig.axes[0]
    fig.canvas.draw()
    labels = _support_labels(ax)
    # named by milestone, in the order branch points, then leaves
    assert [t.get_text() for t in labels] == ["fork 1: 0.50", "fork 2: 0.90", "root: 1.00", "tip 1: 0.40",
                                             "tip 2: 0.30", "tip 3: 1.00"]
    boxes = [t.get_bbox_patch().get_window_extent() for t in labels]
    # no two labels overlap (at a fixed offset the labels of the cluster's close nodes sat on each other)
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            width = min(a.x1, b.x1) - max(a.x0, b.x0)
            height = min(a.y1, b.y1) - max(a.y0, b.y0)
            assert width <= 0 or height <= 0, f"{labels[i].get_text()!r} overlaps {labels[j].get_text()!r}"
    # no label covers a node (the root star among them), and each stays inside the axes
    nodes = ax.transData.transform(NODES)
    frame = ax.get_window_extent()
    for label, box in zip(labels, boxes):
        assert not any(box.contains(x, y) for x, y in nodes), f"{label.get_text()!r} covers a node"
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        assert label.arrow_patch is not None  # a leader line back to its node
    # the legend says what the numbers are
    assert any(text.startswith("support: share of 10 refits") for text in
               (t.get_text() for t in _graph_legend(ax).get_texts()))


def test_support_labels_without_milestones_are_numbers():
    adata = _tree()
    del adata.uns["ddrtree"]["milestones"]
    ax = sks.pl.tree(adata, "ddrtree", show=False)
    assert [t.get_text() for t in _support_labels(ax)] == ["0.50", "0.90", "1.00", "0.40", "0.30", "1.00"]


# --- pl.tree: the graph's legend entry, markers ---------------------------------------------------------


def test_tree_graph_label_default_and_override():
    # a key that is the method's name with a suffix adds nothing: "principal tree (RPG)", not "(RPG, rpg_mpme)"
    adata = _tree(method="rpg", key="rpg_mpme")
    ax = sks.pl.tree(adata, "rpg_mpme", show=False)
    assert [t.get_text() for t in _graph_legend(ax).get_texts()][0] == "principal tree (RPG)"
    ax = sks.pl.tree(adata, "rpg_mpme", graph_label="RPG on the MPME embedding", show=False)
    assert [t.get_text() for t in _graph_legend(ax).get_texts()][0] == "RPG on the MPME embedding"
    # a key of its own still tells two fits of one method apart
    ax = sks.pl.tree(_tree(key="fresh"), "fresh", show=False)
    assert [t.get_text() for t in _graph_legend(ax).get_texts()][0] == "DDRTree (fresh)"


def test_graph_legend_placed_by_graph_legend_loc():
    """Where cells fill the panel, the graph's legend can leave it: stacked with the categories' legend in
    the right margin, neither covering the other; None draws none; a location puts it inside."""
    adata = _tree()
    ax = sks.pl.tree(adata, "ddrtree", color="cluster", graph_legend_loc="right margin", show=False)
    ax.figure.canvas.draw()
    graph, categories = _graph_legend(ax).get_window_extent(), ax.get_legend().get_window_extent()
    right = ax.get_window_extent().x1
    assert graph.x0 >= right - 1.0 and categories.x0 >= right - 1.0  # both outside, in the margin
    assert not graph.overlaps(categories)
    assert not _graph_legend(ax).get_clip_on()

    ax = sks.pl.tree(adata, "ddrtree", color="cluster", graph_legend_loc=None, show=False)
    assert not [a for a in ax.artists if isinstance(a, Legend)]

    ax = sks.pl.tree(adata, "ddrtree", color="cluster", graph_legend_loc="upper left", show=False)
    ax.figure.canvas.draw()
    box, frame = _graph_legend(ax).get_window_extent(), ax.get_window_extent()
    assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and box.y1 <= frame.y1 + 1.0


def _legends(ax):
    return [a for a in [ax.get_legend(), *ax.artists] if isinstance(a, Legend) and a.get_visible()]


@pytest.mark.parametrize("color", ["cluster", None])
def test_tree_legends_stay_off_the_cells_and_support_labels(color):
    """By default every legend sits outside the axes: none covers a cell or a support label ("support labels
    sit under the legend" when the graph's legend was inside at "best")."""
    adata = _tree()
    fig = sks.pl.tree(adata, "ddrtree", color=color, return_fig=True)
    ax = fig.axes[0]
    fig.canvas.draw()
    frame = ax.get_window_extent()
    labels = [t.get_bbox_patch().get_window_extent() for t in _support_labels(ax)]
    assert len(labels) == 6 and _legends(ax)
    for legend in _legends(ax):
        box = legend.get_window_extent()
        assert box.x0 >= frame.x1 - 1.0  # in the right margin, off the data
        assert not any(box.overlaps(label) for label in labels)


@pytest.mark.parametrize("loc", ["lower left", "lower center", "center left", "upper right"])
def test_support_labels_keep_clear_of_a_legend_inside_the_axes(loc):
    # at these corners the graph's legend landed on the labels of the forks and tips near it
    fig = sks.pl.tree(_tree(), "ddrtree", color="cluster", graph_legend_loc=loc, return_fig=True)
    ax = fig.axes[0]
    fig.canvas.draw()
    box = _graph_legend(ax).get_window_extent()
    assert box.overlaps(ax.get_window_extent())  # inside, as asked
    overlapping = [t.get_text() for t in _support_labels(ax) if t.get_bbox_patch().get_window_extent().overlaps(box)]
    assert overlapping == []


def test_legends_fit_on_the_figure_without_a_tight_bounding_box(tmp_path):
    """A figure made by the plot holds its legends: saved or shown without ``bbox_inches="tight"`` the
    right-margin legends were cut off at the figure's edge."""
    adata = _tree(categories=("progenitor cells", "erythrocyte lineage"))
    for fig in (sks.pl.tree(adata, "ddrtree", color="cluster", return_fig=True),
                sks.pl.cell_graph(_cell_graph_data(), "learner", color="cluster", return_fig=True)):
        fig.savefig(tmp_path / "plain.png")  # no bbox_inches
        page = fig.bbox
        for ax in fig.axes:
            for legend in _legends(ax):
                box = legend.get_window_extent()
                assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1
    # the axes keep their size in inches: only the figure grew
    fig = sks.pl.tree(adata, "ddrtree", color="cluster", return_fig=True)
    width, _ = plt.rcParams["figure.figsize"]
    assert fig.get_size_inches()[0] > width
    default = (plt.rcParams["figure.subplot.right"] - plt.rcParams["figure.subplot.left"]) * width
    assert fig.axes[0].get_window_extent().width / fig.dpi == pytest.approx(default)


def _line_of_cells(n):
    """``n`` cells along a three-node line graph, stored like a fitted tree."""
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    owner = np.arange(n) % 3
    cells = nodes[owner] + np.random.default_rng(0).normal(scale=0.1, size=(n, 2))
    adata = AnnData(X=np.zeros((n, 1)), obs=pd.DataFrame(index=[f"c{i}" for i in range(n)]))
    adata.obsm["X_line"] = cells
    adata.obsm["line_assignment"] = sparse.csr_matrix((np.ones(n), (np.arange(n), owner)), shape=(n, 3))
    adjacency = sparse.csr_matrix(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=float))
    adata.uns["line"] = {"method": "rpg", "nodes": nodes, "adjacency": adjacency, "space": "X_line"}
    return adata


def test_cell_markers_shrink_with_more_cells_but_never_swamp_a_small_data_set():
    sizes = {}
    for n in (90, 3000, 12000):
        ax = sks.pl.tree(_line_of_cells(n), "line", show=False)
        sizes[n] = float(np.unique(_cells(ax).get_sizes())[0])
    # scanpy's 120000 / n gave 90 cells discs of 1333 pt², which buried the graph
    assert sizes[90] <= 60.0
    assert sizes[90] > sizes[3000] > sizes[12000]
    assert sizes[12000] == pytest.approx(120000 / 12000)  # scanpy's rule where it reads well
    # a size given is kept
    ax = sks.pl.tree(_line_of_cells(90), "line", size=200, show=False)
    assert np.unique(_cells(ax).get_sizes())[0] == 200


def test_root_and_branch_point_markers_let_the_cells_show():
    ax = sks.pl.tree(_tree(), "ddrtree", color="cluster", show=False)
    cells = _cells(ax).get_zorder()
    root = next(c for c in ax.collections if c.get_label() == "root")
    branch = next(c for c in ax.collections if c.get_label() == "branch point")
    # still over the cells, so that they are found at once ...
    assert root.get_zorder() > cells and branch.get_zorder() > cells
    # ... but smaller than before (260 pt²) and see-through: a translucent star, hollow diamonds
    assert root.get_sizes()[0] <= 160
    assert root.get_facecolors()[0][3] < 0.5
    assert root.get_edgecolors()[0][3] == 1.0  # its outline stays solid
    assert branch.get_sizes()[0] <= 50
    assert len(branch.get_facecolors()) == 0 or branch.get_facecolors()[0][3] == 0


# --- axis names and legend titles (pl.tree and pl.cell_graph) -------------------------------------------


def _cell_graph_data(n=60, degree=2):
    """Cells on a line with ``degree`` // 2 neighbours on each side (a chain for degree 2)."""
    rng = np.random.default_rng(0)
    adata = AnnData(obs=pd.DataFrame({"cluster": pd.Categorical(["0"] * (n // 2) + ["1"] * (n - n // 2))},
                                     index=[f"c{i}" for i in range(n)]))
    adata.obsm["X_learner"] = np.column_stack([np.arange(n, dtype=float), rng.normal(scale=0.5, size=n)])
    adata.obsm["X_spl_linear"] = adata.obsm["X_learner"] * 2.0
    rows = np.concatenate([np.arange(n - s) for s in range(1, degree // 2 + 1)])
    cols = np.concatenate([np.arange(s, n) for s in range(1, degree // 2 + 1)])
    upper = sparse.csr_matrix((rng.uniform(0.1, 1.0, rows.size), (rows, cols)), shape=(n, n))
    adata.obsp["learner_connectivities"] = (upper + upper.T).tocsr()
    adata.uns["learner"] = {"method": "mpme"}
    return adata


def test_axis_name_is_passed_through():
    ax = sks.pl.cell_graph(_cell_graph_data(), "learner", basis="X_spl_linear", axis_name="projection YW",
                           show=False)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("projection YW 1", "projection YW 2")
    # without it the obsm key is spelled out
    ax = sks.pl.cell_graph(_cell_graph_data(), "learner", basis="X_spl_linear", show=False)
    assert ax.get_xlabel() == "spl linear 1"
    ax = sks.pl.tree(_tree(), "ddrtree", basis="X_spl_linear", axis_name="projection YW", show=False)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("projection YW 1", "projection YW 2")


@pytest.mark.parametrize("plot", ["tree", "cell_graph"])
def test_categorical_legend_is_titled(plot):
    # categories coded as numbers say nothing by themselves: the legend's title says what they are
    if plot == "tree":
        ax = sks.pl.tree(_tree(), "ddrtree", color="cluster", show=False)
    else:
        ax = sks.pl.cell_graph(_cell_graph_data(), "learner", color="cluster", show=False)
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["0", "1"]
    assert legend.get_title().get_text() == "cluster"
    assert legend.get_title().get_visible()


# --- pl.cell_graph: edges -------------------------------------------------------------------------------


def _cell_edges(ax):
    (edges,) = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "scskeleton_cell_edges"]
    return edges


def test_cell_graph_edges_grey_and_fainter_when_dense():
    chain = _cell_edges(sks.pl.cell_graph(_cell_graph_data(degree=2), "learner", color="cluster", show=False))
    dense_ax = sks.pl.cell_graph(_cell_graph_data(degree=30), "learner", color="cluster", show=False)
    dense = _cell_edges(dense_ax)
    for edges in (chain, dense):
        red, green, blue, _ = edges.get_edgecolor()[0]
        assert red == green == blue and 0.25 <= red <= 0.75  # a mid grey, not black
    # the more edges per cell, the fainter each one: ~30 per cell overlap into a haze, not a solid mass
    assert 0.3 <= chain.get_alpha() <= 0.4
    assert 0.05 <= dense.get_alpha() <= 0.15
    # cells over the edges
    assert dense.get_zorder() < _cells(dense_ax).get_zorder()


def test_cell_graph_keeps_the_users_edge_style():
    ax = sks.pl.cell_graph(_cell_graph_data(degree=30), "learner", edge_color="red", edge_alpha=0.8, show=False)
    edges = _cell_edges(ax)
    assert edges.get_alpha() == 0.8
    np.testing.assert_allclose(edges.get_edgecolor()[0], to_rgba("red", 0.8))


# --- branch names with tied labels -----------------------------------------------------------------------


def test_branch_names_join_tied_labels():
    n_tie, n_mo = 80, 100
    obs = pd.DataFrame({
        "g_segment": pd.Categorical(["1"] * (2 * n_tie) + ["2"] * n_mo),
        "cell_type": pd.Categorical(["Ery"] * n_tie + ["Mk"] * n_tie + ["Mo"] * n_mo),
    }, index=[f"c{i}" for i in range(2 * n_tie + n_mo)])
    adata = AnnData(obs=obs)
    adata.uns["g"] = {"method": "ddrtree", "segments": {"0": [0, 1], "1": [1, 2], "2": [1, 3]},
                      "milestones": {"nodes": [0, 1, 2, 3], "names": ["root", "fork 1", "tip 1", "tip 2"],
                                     "segment_labels": ["root → fork 1", "fork 1 → tip 1", "fork 1 → tip 2"]}}
    adata.uns["bt"] = {"method": "branch_test", "graph": "g", "branches": ["1", "2"],
                       "segments": {"1": ["1"], "2": ["2"]}}
    assert branch_names(adata, "bt", groupby="cell_type") == {"1": "Ery/Mk", "2": "Mo", "trunk": "trunk"}
    assert branch_names(adata, "bt") == {"1": "fork 1 → tip 1", "2": "fork 1 → tip 2", "trunk": "trunk"}


# --- pl.pseudotime -----------------------------------------------------------------------------------------


def test_pseudotime_title_says_what_is_plotted(branching_fitted):
    adata = branching_fitted.copy()
    ax = sks.pl.pseudotime(adata, "ddrtree", color="true_branch", show=False)
    assert ax.get_title() == "DDRTree pseudotime per segment, coloured by true branch"
    assert sks.pl.pseudotime(adata, "ddrtree", show=False).get_title() == "DDRTree pseudotime per segment"
    ax = sks.pl.pseudotime(adata, "ddrtree", color="ddrtree_pseudotime", show=False)
    assert ax.get_title() == "DDRTree pseudotime per segment, coloured by pseudotime"  # the method once
    assert sks.pl.pseudotime(adata, "ddrtree", color="true_branch", title="t", show=False).get_title() == "t"
