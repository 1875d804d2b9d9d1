"""Tests of ``pl.trends``, ``pl.branch_heatmap`` and ``pl.path``: drawn from the stored results alone."""

import matplotlib

matplotlib.use("Agg")

import anndata  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from matplotlib.collections import LineCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

import scskeleton as sks  # noqa: E402

KEY = "ddrtree"
TRENDS, BRANCHES = f"{KEY}_trends", f"{KEY}_branch_test"
# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


@pytest.fixture(scope="module")
def adata():
    adata = sks.datasets.branching_expression(600, n_genes=60, n_branch_genes=12, n_trend_genes=12, random_state=1)
    sc.pp.pca(adata, n_comps=8)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, KEY, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, KEY)
    sks.tl.branch_test(adata, KEY, branch_point=int(adata.uns[KEY]["branch_points"][0]))
    leaf = int(adata.uns[KEY]["segments"][adata.uns[BRANCHES]["segments"][adata.uns[BRANCHES]["branches"][0]][-1]][-1])
    sks.tl.trends(adata, KEY, path=(int(adata.uns[KEY]["root"]), leaf))
    return adata


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _state(adata):
    return (sorted(adata.uns), list(adata.obs.columns), list(adata.var.columns), sorted(adata.varm))


PLOTS = {
    "trends": lambda adata, **kw: sks.pl.trends(adata, TRENDS, "gene_0", **kw),
    "trends_branches": lambda adata, **kw: sks.pl.trends(adata, BRANCHES, "gene_0", **kw),
    "branch_heatmap": lambda adata, **kw: sks.pl.branch_heatmap(adata, BRANCHES, **kw),
    "path": lambda adata, **kw: sks.pl.path(adata, TRENDS, **kw),
    "path_branches": lambda adata, **kw: sks.pl.path(adata, BRANCHES, color="true_branch", **kw),
}


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_save_return_fig_and_ax(adata, tmp_path, name):
    before = _state(adata)
    path = tmp_path / f"{name}.png"
    assert PLOTS[name](adata, save=path) is None
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert isinstance(PLOTS[name](adata, return_fig=True), Figure)
    _, given = plt.subplots()
    assert PLOTS[name](adata, ax=given, show=False) is given
    assert given.has_data() or given.images
    assert _state(adata) == before


def test_trends_draws_one_panel_per_gene_with_the_stored_curves(adata):
    genes = ["gene_0", "gene_13", "gene_40", "gene_59"]
    axes = sks.pl.trends(adata, TRENDS, genes, ncols=3, show=False)
    assert len(axes) == 4 and len(axes[0].figure.axes) == 6  # two spare panels, switched off
    for ax, gene in zip(axes, genes):
        curve = ax.lines[0].get_ydata()
        np.testing.assert_allclose(curve, adata.varm[f"{TRENDS}_curves"][adata.var_names.get_loc(gene)])
        assert gene in ax.get_title()
        on_path = np.isfinite(adata.obs[f"{TRENDS}_time"]).sum()
        assert ax.collections[0].get_offsets().shape[0] == on_path


def test_trends_split_by_branch(adata):
    ax = sks.pl.trends(adata, BRANCHES, "gene_0", show=False)
    labels = [line.get_label() for line in ax.lines]
    branches = list(adata.uns[BRANCHES]["branches"])
    # each branch named by the milestones of its first segment, not by the segment id
    segment_labels = dict(zip(sorted(adata.uns[KEY]["segments"], key=int),
                              adata.uns[KEY]["milestones"]["segment_labels"]))
    assert labels == ["shared"] + [segment_labels[str(adata.uns[BRANCHES]["segments"][b][0])] for b in branches]
    assert all(label.startswith("fork 1 → ") for label in labels[1:])
    curves = adata.varm[f"{BRANCHES}_curves"][0]
    for line, curve in zip(ax.lines[1:], curves):
        np.testing.assert_allclose(line.get_ydata(), curve)
    # the cells: trunk first, then one scatter per branch, together every tested cell
    counts = [c.get_offsets().shape[0] for c in ax.collections]
    assert sum(counts) == np.isfinite(adata.obs[f"{BRANCHES}_time"]).sum()


def test_branch_heatmap_orders_genes_by_where_they_peak(adata):
    ax = sks.pl.branch_heatmap(adata, BRANCHES, n_genes=10, show=False)
    image = np.ma.filled(ax.images[0].get_array(), np.nan)
    assert image.shape[0] == 10
    shown = [t.get_text() for t in ax.get_yticklabels()]
    ranked = adata.var[[f"{BRANCHES}_qval", f"{BRANCHES}_F"]].sort_values(
        [f"{BRANCHES}_qval", f"{BRANCHES}_F"], ascending=[True, False], kind="stable")
    assert set(shown) == set(ranked.index[:10])
    peaks = np.nanargmax(np.where(np.isnan(image), -np.inf, image), axis=1)
    assert (np.diff(peaks) >= 0).all()  # branch of the maximum first, then its time
    np.testing.assert_allclose(np.nanmax(image, axis=1), 1.0)
    np.testing.assert_allclose(np.nanmin(image, axis=1), 0.0)


def test_path_highlights_the_stored_edges_in_branch_colours(adata):
    ax = sks.pl.path(adata, BRANCHES, show=False)
    drawn = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "scskeleton_path"]
    edges = adata.uns[BRANCHES]["edges"]
    labels = ["trunk", *adata.uns[BRANCHES]["branches"]]
    assert [len(c.get_segments()) for c in drawn] == [len(edges[label]) for label in labels]
    nodes = adata.uns[KEY]["nodes"][:, :2]
    for collection, label in zip(drawn, labels):
        np.testing.assert_allclose(collection.get_segments()[0], nodes[edges[label][0]])
    colours = [tuple(c.get_colors()[0]) for c in drawn]
    assert len(set(colours)) == len(labels)
    # the same colours as pl.trends uses for the branches
    trend_ax = sks.pl.trends(adata, BRANCHES, "gene_0", show=False)
    assert to_rgba(trend_ax.lines[1].get_color()) == colours[1]
    # in another basis the path follows the nodes placed there
    adata_umap = adata.copy()
    adata_umap.obsm["X_umap"] = np.random.default_rng(0).normal(size=(adata.n_obs, 2))
    ax = sks.pl.path(adata_umap, TRENDS, basis="umap", show=False)
    assert any(isinstance(c, LineCollection) and c.get_gid() == "scskeleton_path" for c in ax.collections)


def _drawn(fig):
    """What a figure shows, axes by axes: text, curves, points, segments and images."""
    content = []
    for ax in fig.axes:
        content.append(("text", ax.get_title(), ax.get_xlabel(), ax.get_ylabel(),
                        tuple(t.get_text() for t in ax.get_yticklabels())))
        legend = ax.get_legend()
        content.append(("legend", () if legend is None else tuple(t.get_text() for t in legend.get_texts())))
        for line in ax.lines:
            content.append(("line", line.get_label(), np.asarray(line.get_xdata(), float),
                            np.asarray(line.get_ydata(), float), to_rgba(line.get_color())))
        for collection in ax.collections:
            if isinstance(collection, LineCollection):
                content.append(("segments", collection.get_gid(), [np.asarray(s) for s in collection.get_segments()]))
            else:
                content.append(("points", np.asarray(collection.get_offsets(), float),
                                np.asarray(collection.get_facecolors(), float)))
        for picture in ax.images:
            content.append(("image", np.ma.filled(np.asarray(picture.get_array(), float), np.nan)))
    return content


def _assert_same_drawing(first, second):
    assert len(first) == len(second)
    for a, b in zip(first, second):
        assert len(a) == len(b) and a[0] == b[0]
        for x, y in zip(a[1:], b[1:]):
            if isinstance(x, list):
                assert len(x) == len(y)
                for u, v in zip(x, y):
                    np.testing.assert_allclose(u, v, rtol=1e-12, equal_nan=True)
            elif isinstance(x, np.ndarray):
                np.testing.assert_allclose(x, y, rtol=1e-12, equal_nan=True)
            else:
                assert x == y


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_plots_work_after_h5ad_round_trip(adata, tmp_path, name):
    path = tmp_path / "a.h5ad"
    adata.write_h5ad(path)
    back = anndata.read_h5ad(path)
    # the result read back draws the same plot, not just some figure: same curves, cells,
    # path segments, heat map and labels as before writing
    before, after = _drawn(PLOTS[name](adata, return_fig=True)), _drawn(PLOTS[name](back, return_fig=True))
    assert any(item[0] in ("line", "points", "image") for item in before)  # something was drawn
    _assert_same_drawing(before, after)


def test_missing_results_and_bad_requests_are_clear_errors(adata):
    bare = adata.copy()
    del bare.uns[TRENDS]
    for plot in (lambda: sks.pl.trends(bare, TRENDS, "gene_0"), lambda: sks.pl.path(bare, TRENDS),
                 lambda: sks.pl.branch_heatmap(bare, TRENDS)):
        with pytest.raises(KeyError, match="tl.trends"):
            plot()
    with pytest.raises(KeyError, match="tl.branch_test"):
        sks.pl.branch_heatmap(bare, KEY)  # a graph, not a result
    with pytest.raises(ValueError, match="needs one of tl.branch_test"):
        sks.pl.branch_heatmap(adata, TRENDS)
    with pytest.raises(KeyError, match="not in adata.var_names"):
        sks.pl.trends(adata, TRENDS, "no_such_gene")
    subset = adata.copy()
    sks.tl.trends(subset, KEY, segment="0", genes=["gene_1"], key_added="few")
    with pytest.raises(KeyError, match="were not fitted"):
        sks.pl.trends(subset, "few", "gene_2")
    _, ax = plt.subplots()
    with pytest.raises(ValueError, match="one gene"):
        sks.pl.trends(adata, TRENDS, ["gene_0", "gene_1"], ax=ax)
    broken = adata.copy()
    del broken.obs[f"{TRENDS}_time"]
    with pytest.raises(KeyError, match="incomplete"):
        sks.pl.trends(broken, TRENDS, "gene_0")
