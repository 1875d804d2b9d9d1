"""Tests of ``sks.pl``: every plot renders from the stored schema alone and leaves adata alone."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import PIL.Image  # noqa: E402
import pytest  # noqa: E402
from anndata import AnnData  # noqa: E402
from matplotlib import image  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from scipy import sparse  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton._testing import distinct_colours  # noqa: E402
from scskeleton.pl._figures import SAVE_DPI  # noqa: E402

KEY = "ddrtree"
# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


@pytest.fixture(scope="module")
def adata(branching_fitted):
    """The fitted branching data (root + pseudotime) with a stand-in UMAP; a copy, so plots cannot leak."""
    adata = branching_fitted.copy()
    # Any 2-D basis will do: only the node placement by assignment is under test, not UMAP.
    adata.obsm["X_umap"] = np.random.default_rng(0).normal(size=(adata.n_obs, 2))
    return adata


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _edges(ax):
    found = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "scskeleton_edges"]
    assert len(found) == 1, f"expected one edge collection, found {len(found)}"
    return found[0]


def _n_tree_edges(adata, key=KEY):
    return adata.uns[key]["adjacency"].nnz // 2


PLOTS = {
    "tree": lambda adata, **kw: sks.pl.tree(adata, KEY, color="true_branch", **kw),
    "pseudotime": lambda adata, **kw: sks.pl.pseudotime(adata, KEY, **kw),
    "adjacency": lambda adata, **kw: sks.pl.adjacency(adata, KEY, **kw),
    "convergence": lambda adata, **kw: sks.pl.convergence(adata, KEY, **kw),
}


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_save_writes_png(adata, tmp_path, name):
    path = tmp_path / f"{name}.png"
    assert PLOTS[name](adata, save=path) is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the file is this plot: the same pixels as the figure handed back and saved by hand
    # (a blank or half-drawn figure, or another figure, would also make a valid PNG)
    reference = tmp_path / f"{name}_reference.png"
    PLOTS[name](adata, return_fig=True).savefig(reference, bbox_inches="tight", dpi=SAVE_DPI)
    np.testing.assert_array_equal(image.imread(path), image.imread(reference))
    assert distinct_colours(path) > 20
    # print resolution: at least 150 dpi (matplotlib's default saved 100), unless rcParams ask for another
    assert min(PIL.Image.open(path).info["dpi"]) >= 149.9
    with plt.rc_context({"savefig.dpi": 72}):
        PLOTS[name](adata, save=path)
    assert min(PIL.Image.open(path).info["dpi"]) == pytest.approx(72, abs=0.1)


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_return_fig_and_ax(adata, name):
    fig = PLOTS[name](adata, return_fig=True)
    assert isinstance(fig, Figure)
    given_fig, given_ax = plt.subplots()
    returned = PLOTS[name](adata, ax=given_ax, show=False)
    assert returned is given_ax
    assert given_ax.has_data()


@pytest.mark.parametrize("basis", [None, "X_ddrtree", "X_umap", "umap"])
def test_tree_one_segment_per_edge(adata, basis):
    ax = sks.pl.tree(adata, KEY, basis=basis, show=False)
    edges = _edges(ax)
    assert len(edges.get_segments()) == _n_tree_edges(adata)


def test_tree_nodes_in_latent_space_are_the_stored_nodes(adata):
    ax = sks.pl.tree(adata, KEY, show=False)
    segments = np.concatenate(_edges(ax).get_segments())
    nodes = adata.uns[KEY]["nodes"][:, :2]
    # Every segment end is one of the stored nodes (nothing projected or refitted).
    distance = np.abs(segments[:, None, :] - nodes[None, :, :]).sum(axis=2).min(axis=1)
    np.testing.assert_allclose(distance, 0, atol=1e-12)


def test_tree_nodes_in_other_basis_are_assignment_means(adata):
    ax = sks.pl.tree(adata, KEY, basis="umap", show=False)
    r = sparse.csr_matrix(adata.obsm[f"{KEY}_assignment"])
    expected = (r.T @ adata.obsm["X_umap"]) / np.asarray(r.sum(axis=0)).ravel()[:, None]
    upper = sparse.triu(adata.uns[KEY]["adjacency"], k=1).tocoo()
    np.testing.assert_allclose(np.stack(_edges(ax).get_segments()), np.stack(
        [expected[upper.row], expected[upper.col]], axis=1))


TREE_TITLES = {
    "true_branch": "true branch — DDRTree",
    "true_pseudotime": "true pseudotime — DDRTree",
    "feature_0": "feature_0 — DDRTree",  # a gene keeps its name, underscores and all
    f"{KEY}_segment": "DDRTree segment",  # names the method already
}


@pytest.mark.parametrize("color", sorted(TREE_TITLES))
def test_tree_colors_by_obs_or_gene(adata, color):
    fig = sks.pl.tree(adata, KEY, color=color, return_fig=True)
    ax = fig.axes[0]
    # the title says what the colours show, in words, and which method drew the graph
    assert ax.get_title() == TREE_TITLES[color]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("DDRTree 1", "DDRTree 2")
    if isinstance(adata.obs.get(color, pd.Series(dtype=float)).dtype, pd.CategoricalDtype):
        legend = ax.get_legend()
        assert legend is not None
        expected = list(adata.obs[color].cat.categories)
        if color == f"{KEY}_segment":  # segments by their milestones, not by their ids
            expected = list(adata.uns[KEY]["milestones"]["segment_labels"])
        assert [t.get_text() for t in legend.get_texts()] == expected
    else:
        assert len(fig.axes) == 2  # the colorbar, labelled with what the colour is
        assert fig.axes[1].get_ylabel() == ("feature_0" if color == "feature_0" else "true pseudotime")
    _edges(ax)


def test_tree_marks_root_and_branch_points(adata):
    ax = sks.pl.tree(adata, KEY, show=False)
    labels = {c.get_label() for c in ax.collections}
    assert {"root", "branch point"} <= labels
    root = next(c for c in ax.collections if c.get_label() == "root")
    np.testing.assert_allclose(root.get_offsets()[0], adata.uns[KEY]["nodes"][adata.uns[KEY]["root"], :2])
    branch = next(c for c in ax.collections if c.get_label() == "branch point")
    assert len(branch.get_offsets()) == len(adata.uns[KEY]["branch_points"])
    unmarked = sks.pl.tree(adata, KEY, show=False, show_branch_points=False)
    assert "branch point" not in {c.get_label() for c in unmarked.collections}


def test_tree_bad_input(adata):
    with pytest.raises(KeyError, match="X_tsne"):
        sks.pl.tree(adata, KEY, basis="tsne")
    n_columns = adata.obsm["X_ddrtree"].shape[1]
    with pytest.raises(ValueError, match="dimensions"):
        sks.pl.tree(adata, KEY, dimensions=(0, n_columns))
    with pytest.raises(ValueError, match="components"):
        sks.pl.tree(adata, KEY, components=f"1,{n_columns + 1}")
    with pytest.raises(KeyError, match="not_a_gene"):
        sks.pl.tree(adata, KEY, color="not_a_gene")


def _strip_points(ax):
    """The drawn cells as (row, x) pairs sorted lexicographically; the row is the jittered y rounded."""
    offsets = np.asarray(ax.collections[0].get_offsets(), dtype=float)
    pairs = np.column_stack([np.rint(offsets[:, 1]), offsets[:, 0]])
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


@pytest.mark.parametrize("color", [None, "true_pseudotime"])
def test_pseudotime_rows_and_determinism(adata, color):
    first = sks.pl.pseudotime(adata, KEY, color=color, show=False)
    second = sks.pl.pseudotime(adata, KEY, color=color, show=False)
    np.testing.assert_array_equal(first.collections[0].get_offsets(), second.collections[0].get_offsets())
    # every cell is drawn once, at x = its pseudotime, in the row of its own segment (scanpy may
    # reorder the points by colour, so cells are matched as a set of (row, x) pairs)
    segment = adata.obs[f"{KEY}_segment"].cat.codes.to_numpy()
    times = adata.obs[f"{KEY}_pseudotime"].to_numpy()
    drawn = np.isfinite(times) & (segment >= 0)  # cells off the root's component are left out
    assert drawn.sum() >= 0.9 * adata.n_obs
    expected = np.column_stack([segment, times])[drawn].astype(float)
    expected = expected[np.lexsort((expected[:, 1], expected[:, 0]))]
    np.testing.assert_array_equal(_strip_points(first), expected)
    # rows stay apart: a cell's vertical jitter leaves a clear gap to the neighbouring rows
    rows = np.asarray(first.collections[0].get_offsets())[:, 1]
    assert np.abs(rows - np.rint(rows)).max() <= 0.4
    assert first.get_xlim()[0] <= np.nanmin(times) and first.get_xlim()[1] >= np.nanmax(times)
    # one row per segment, top to bottom in category order, labelled by its two milestones
    labels = list(adata.uns[KEY]["milestones"]["segment_labels"])
    assert len(labels) == len(adata.obs[f"{KEY}_segment"].cat.categories)
    assert [t.get_text() for t in first.get_yticklabels()] == labels
    np.testing.assert_array_equal(first.get_yticks(), np.arange(len(labels)))


def test_missing_pseudotime_raises(adata):
    bare = adata.copy()
    del bare.obs[f"{KEY}_pseudotime"]
    with pytest.raises(KeyError, match="tl.pseudotime"):
        sks.pl.pseudotime(bare, KEY)


@pytest.mark.parametrize("plot", [sks.pl.tree, sks.pl.adjacency, sks.pl.convergence, sks.pl.pseudotime])
def test_missing_graph_key_raises(adata, plot):
    with pytest.raises(KeyError, match="nope"):
        plot(adata, "nope")


def test_adjacency_orders(adata):
    ax = sks.pl.adjacency(adata, KEY, order="group", groupby="true_branch", show=False)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(adata.obs["true_branch"].cat.categories)
    image = ax.get_images()[0].get_array()
    k = adata.uns[KEY]["adjacency"].shape[0]
    assert image.shape == (k, k)
    assert np.count_nonzero(image) == adata.uns[KEY]["adjacency"].nnz  # a permutation, nothing lost

    tree_ax = sks.pl.adjacency(adata, KEY, show=False)
    tree_image = np.asarray(tree_ax.get_images()[0].get_array())
    # Depth-first from the root: the root comes first and consecutive nodes are mostly adjacent.
    assert np.count_nonzero(np.diag(tree_image, k=1)) >= k - 1 - 2 * len(adata.uns[KEY]["branch_points"])

    with pytest.raises(ValueError, match="order"):
        sks.pl.adjacency(adata, KEY, order="random")
    with pytest.raises(ValueError, match="groupby"):
        sks.pl.adjacency(adata, KEY, order="group")
    with pytest.raises(KeyError, match="no_such_column"):
        sks.pl.adjacency(adata, KEY, order="group", groupby="no_such_column")


def test_convergence_title_and_points(adata):
    ax = sks.pl.convergence(adata, KEY, show=False)
    line = ax.get_lines()[0]
    n = len(adata.uns[KEY]["objective"])
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, n + 1))
    converged = "converged" if adata.uns[KEY]["converged"] else "not converged"
    assert ax.get_title() == f"DDRTree: {converged} after {n} iterations"
    assert sks.pl.convergence(adata, KEY, log=True, show=False).get_yscale() == "log"


def test_plots_leave_adata_unchanged(adata, tmp_path):
    def keys(a):
        return {f: sorted(getattr(a, f).keys()) for f in ("obs", "obsm", "obsp", "uns", "var")} | {
            "uns_graph": sorted(a.uns[KEY].keys()),
            "dtypes": a.obs.dtypes.astype(str).to_dict(),
        }

    before = keys(adata)
    sks.pl.tree(adata, KEY, color="true_branch", save=tmp_path / "a.png")
    sks.pl.tree(adata, KEY, basis="umap", color="feature_0", save=tmp_path / "b.png")
    sks.pl.pseudotime(adata, KEY, save=tmp_path / "c.png")
    sks.pl.adjacency(adata, KEY, order="group", groupby="true_branch", save=tmp_path / "d.png")
    sks.pl.convergence(adata, KEY, save=tmp_path / "e.png")
    assert keys(adata) == before
    assert "true_branch_colors" not in adata.uns  # scanpy's default palette went to a stand-in


@pytest.fixture
def tiny():
    """A hand-written 5-node path graph without a root, where node 4 holds no cells."""
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]])
    rows, cols = np.arange(4), np.arange(1, 5)
    adjacency = sparse.coo_matrix((np.ones(8), (np.r_[rows, cols], np.r_[cols, rows])), shape=(5, 5)).tocsr()
    owner = np.repeat(np.arange(4), 5)  # 20 cells, 5 per node 0..3
    assignment = sparse.csr_matrix((np.ones(20), (np.arange(20), owner)), shape=(20, 5))
    adata = AnnData(
        X=np.zeros((20, 3)),
        obs=pd.DataFrame({"group": pd.Categorical(np.where(owner < 2, "a", "b"))}, index=[f"c{i}" for i in range(20)]),
    )
    adata.obsm["X_path"] = nodes[owner] + 0.1
    adata.obsm["X_other"] = np.column_stack([owner * 10.0, owner * 0.0])
    adata.obsm["path_assignment"] = assignment
    adata.uns["path"] = {"method": "hand", "nodes": nodes, "space": "X_path", "adjacency": adjacency,
                         "objective": np.array([3.0, 2.0, 1.5]), "n_iter": 3, "converged": True}
    return adata


def test_tree_leaves_out_nodes_without_cells(tiny):
    ax = sks.pl.tree(tiny, "path", show=False)
    assert len(_edges(ax).get_segments()) == 4
    assert "root" not in {c.get_label() for c in ax.collections}
    ax = sks.pl.tree(tiny, "path", basis="other", show=False)
    segments = np.stack(_edges(ax).get_segments())
    assert len(segments) == 3  # the edge 3-4 goes with node 4
    np.testing.assert_allclose(segments[:, :, 0], [[0, 10], [10, 20], [20, 30]])


def test_adjacency_small_graph_labels_and_groups(tiny):
    ax = sks.pl.adjacency(tiny, "path", order="group", groupby="group", show=False)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert texts == ["a", "b", "no cells"]
    ax = sks.pl.adjacency(tiny, "path", show=False)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2", "3", "4"]
    assert "converged after 3" in sks.pl.convergence(tiny, "path", show=False).get_title()
