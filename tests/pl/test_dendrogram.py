"""Tests of ``sks.pl.dendrogram`` and of list-valued ``color=`` in ``sks.pl.tree``."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import scskeleton as sks  # noqa: E402

# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


@pytest.fixture(scope="module")
def fitted():
    """The branching data with a DDRTree and an RPG, each rooted and with pseudotime."""
    adata = sks.datasets.branching(400, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    for method in ("ddrtree", "rpg"):
        getattr(sks.tl, method)(adata)
        sks.tl.root(adata, method, obs_min="true_pseudotime")
        sks.tl.pseudotime(adata, method)
    return adata


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _collection(ax, gid):
    found = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]
    assert len(found) == 1, f"expected one {gid} collection, found {len(found)}"
    return found[0]


def _snapshot(adata):
    return adata.obs.copy(), sorted(adata.uns), sorted(adata.obsm), sorted(adata.uns["ddrtree"])


@pytest.mark.parametrize("key", ["ddrtree", "rpg"])
def test_one_line_per_segment_spanning_its_pseudotime(fitted, key):
    ax = sks.pl.dendrogram(fitted, key, show=False)
    assert isinstance(ax, Axes)
    segments = fitted.uns[key]["segments"]
    lines = _collection(ax, "scskeleton_dendrogram_segments").get_segments()
    assert len(lines) == len(segments)
    for line in lines:  # horizontal: pseudotime along x, one height per segment
        assert line[0, 1] == line[1, 1] and line[1, 0] > line[0, 0]
    # The root's segment starts at 0, and each segment spans the pseudotime of its cells.
    assert min(line[0, 0] for line in lines) == 0.0
    times = fitted.obs[f"{key}_pseudotime"].to_numpy()
    for name, line in zip(sorted(segments, key=int), lines):
        median = np.median(times[(fitted.obs[f"{key}_segment"] == str(name)).to_numpy()])
        assert line[0, 0] <= median <= line[1, 0]
    # Every segment but the first hangs from a fork: one connector each.
    assert len(_collection(ax, "scskeleton_dendrogram_connectors").get_segments()) == len(segments) - 1


def test_layout_children_beside_parent_without_overlap(fitted):
    ax = sks.pl.dendrogram(fitted, "ddrtree", show=False)
    entry = fitted.uns["ddrtree"]
    ids = sorted(entry["segments"], key=int)
    lines = _collection(ax, "scskeleton_dendrogram_segments").get_segments()
    starts = {str(name): int(entry["segments"][name][0]) for name in ids}
    ends = {str(name): int(entry["segments"][name][-1]) for name in ids}
    height = {str(name): line[0, 1] for name, line in zip(ids, lines)}
    leaves = [name for name in ends if ends[name] not in starts.values()]
    assert len({height[name] for name in leaves}) == len(leaves)  # tips never share a row
    for name in height:
        children = [child for child in starts if starts[child] == ends[name]]
        if children:  # a fork sits centred over its children
            below = [height[child] for child in children]
            assert height[name] == pytest.approx((min(below) + max(below)) / 2)
            start_of = {child: line[0, 0] for child, line in zip(map(str, ids), lines)}
            assert all(start_of[child] == pytest.approx(lines[ids.index(name)][1, 0]) for child in children)


def test_milestone_labels(fitted):
    ax = sks.pl.dendrogram(fitted, "ddrtree", show=False)
    labels = sorted(t.get_text() for t in ax.texts if t.get_gid() == "scskeleton_dendrogram_milestones")
    assert labels == sorted(str(name) for name in fitted.uns["ddrtree"]["milestones"]["names"])
    ax = sks.pl.dendrogram(fitted, "ddrtree", show_labels=False, show=False)
    assert not [t for t in ax.texts if t.get_gid() == "scskeleton_dendrogram_milestones"]


def test_cells_sit_on_their_segment_at_their_pseudotime(fitted):
    ax = sks.pl.dendrogram(fitted, "ddrtree", color="true_pseudotime", show=False)
    cells = max((c for c in ax.collections if not isinstance(c, LineCollection)), key=lambda c: len(c.get_offsets()))
    offsets = np.asarray(cells.get_offsets())
    assert len(offsets) == fitted.n_obs
    # scanpy may reorder cells (by colour value), so compare as sets of pseudotimes.
    assert np.sort(offsets[:, 0]) == pytest.approx(np.sort(fitted.obs["ddrtree_pseudotime"].to_numpy()))


def test_nan_pseudotime_cells_are_skipped(fitted):
    adata = fitted.copy()
    times = adata.obs["ddrtree_pseudotime"].to_numpy().copy()
    times[:25] = np.nan
    adata.obs["ddrtree_pseudotime"] = times
    ax = sks.pl.dendrogram(adata, "ddrtree", show=False)
    drawn = sum(np.isfinite(np.asarray(c.get_offsets())).all(axis=1).sum() for c in ax.collections
                if not isinstance(c, LineCollection) and len(c.get_offsets()) >= adata.n_obs - 25)
    assert drawn == adata.n_obs - 25


def test_list_color_one_panel_each(fitted):
    colors = ["true_branch", "true_pseudotime", fitted.var_names[0]]
    panels = sks.pl.dendrogram(fitted, "ddrtree", color=colors, ncols=2, show=False)
    assert isinstance(panels, list) and len(panels) == 3
    # readable titles: underscores become spaces in .obs columns; a gene keeps its name
    assert [ax.get_title() for ax in panels] == ["true branch", "true pseudotime", fitted.var_names[0]]
    for ax in panels:
        assert len(_collection(ax, "scskeleton_dendrogram_segments").get_segments()) == len(
            fitted.uns["ddrtree"]["segments"])
    fig = sks.pl.dendrogram(fitted, "ddrtree", color=colors, return_fig=True)
    assert isinstance(fig, Figure) and sum(ax.get_visible() and ax.axison for ax in fig.axes if ax.get_title()) == 3
    with pytest.raises(ValueError, match="ax="):
        sks.pl.dendrogram(fitted, "ddrtree", color=colors, ax=plt.subplots()[1])


def test_vertical_puts_pseudotime_on_y(fitted):
    ax = sks.pl.dendrogram(fitted, "ddrtree", orientation="vertical", show=False)
    for line in _collection(ax, "scskeleton_dendrogram_segments").get_segments():
        assert line[0, 0] == line[1, 0]
    assert ax.yaxis_inverted() and ax.get_ylabel() == "DDRTree pseudotime"
    with pytest.raises(ValueError, match="orientation"):
        sks.pl.dendrogram(fitted, "ddrtree", orientation="diagonal")


def test_given_ax_and_save(fitted, tmp_path):
    _, given = plt.subplots()
    assert sks.pl.dendrogram(fitted, "ddrtree", ax=given, show=False) is given
    path = tmp_path / "dendrogram.png"
    assert sks.pl.dendrogram(fitted, "ddrtree", save=path) is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_key_and_missing_pseudotime(fitted):
    with pytest.raises(KeyError, match="No graph"):
        sks.pl.dendrogram(fitted, "nope")
    adata = fitted.copy()
    sks.tl.ddrtree(adata, key_added="fresh")
    with pytest.raises(KeyError, match="tl.pseudotime"):
        sks.pl.dendrogram(adata, "fresh")
    with pytest.raises(KeyError, match="neither a column"):
        sks.pl.dendrogram(fitted, "ddrtree", color="no_such_gene")


def test_two_components_drawn_apart(fitted):
    adata = fitted.copy()
    entry = adata.uns["ddrtree"]
    # Cut the edge that ends the root's segment, then root both halves.
    path = entry["segments"]["0"]
    adjacency = entry["adjacency"].tolil()
    adjacency[path[-2], path[-1]] = adjacency[path[-1], path[-2]] = 0
    entry["adjacency"] = adjacency.tocsr()
    entry["adjacency"].eliminate_zeros()
    sks.tl.root(adata, "ddrtree", node=[int(path[0]), int(entry["leaves"][-1])])
    sks.tl.pseudotime(adata, "ddrtree")
    ax = sks.pl.dendrogram(adata, "ddrtree", show=False)
    lines = _collection(ax, "scskeleton_dendrogram_segments").get_segments()
    assert len(lines) == len(adata.uns["ddrtree"]["segments"])
    assert sum(line[0, 0] == 0.0 for line in lines) == 2  # one start per root


def test_adata_unchanged(fitted):
    adata = fitted.copy()
    before = _snapshot(adata)
    sks.pl.dendrogram(adata, "ddrtree", color=["true_branch", "ddrtree_milestone"], show=False)
    sks.pl.tree(adata, "ddrtree", color=["true_branch", "true_pseudotime"], show=False)
    after = _snapshot(adata)
    assert before[0].equals(after[0]) and before[1:] == after[1:]
    assert "true_branch_colors" not in adata.uns


def test_tree_list_color_one_panel_each(fitted):
    panels = sks.pl.tree(fitted, "ddrtree", color=["true_branch", "true_pseudotime"], show=False)
    assert isinstance(panels, list) and len(panels) == 2
    assert [ax.get_title() for ax in panels] == ["true branch — DDRTree", "true pseudotime — DDRTree"]
    edges = [c for c in panels[1].collections if c.get_gid() == "scskeleton_edges"]
    assert len(edges) == 1 and len(edges[0].get_segments()) == fitted.uns["ddrtree"]["adjacency"].nnz // 2
    assert isinstance(sks.pl.tree(fitted, "ddrtree", color="true_branch", show=False), Axes)
    with pytest.raises(ValueError, match="color is empty"):
        sks.pl.tree(fitted, "ddrtree", color=[])
