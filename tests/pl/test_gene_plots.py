"""Tests of ``pl.trends``, ``pl.branch_heatmap``, ``pl.path``, ``pl.module_heatmap`` and ``pl.modules``: drawn
from the stored results alone, with defaults a reader can read (legends off the cells, one legend per figure,
labelled bars)."""

import matplotlib

matplotlib.use("Agg")

import anndata  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton.pl._colors import category_colors  # noqa: E402
from scskeleton.pl._results import branch_key  # noqa: E402

KEY = "ddrtree"
TRENDS, BRANCHES = f"{KEY}_trends", f"{KEY}_branch_test"
LINEAGES, MODULES = f"{KEY}_association", f"{KEY}_association_modules"
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
    result = adata.uns[BRANCHES]
    first = result["segments"][branch_key(result, result["branches"][0])]  # the first branch's segments
    leaf = int(adata.uns[KEY]["segments"][first[-1]][-1])
    sks.tl.trends(adata, KEY, path=(int(adata.uns[KEY]["root"]), leaf))
    return adata


@pytest.fixture(scope="module")
def with_modules(adata):
    """The same data with an association test and four trend modules of its genes."""
    adata = adata.copy()
    sks.tl.association_test(adata, KEY, genes=list(adata.var_names[:30]))
    sks.tl.trend_modules(adata, LINEAGES, n_modules=4)
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
    result = adata.uns[BRANCHES]
    assert labels == ["shared"] + [segment_labels[str(result["segments"][branch_key(result, b)][0])] for b in branches]
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
    result = adata.uns[BRANCHES]
    edges = {label: result["edges"][branch_key(result, label)] for label in ["trunk", *result["branches"]]}
    labels = list(edges)
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


def test_path_draws_the_fork_tests_branches_and_refuses_a_whole_tree_result(adata, with_modules):
    """The fork test names a trunk category for its cells' colours but compares (and stores edges of)
    its branches only: pl.path raised KeyError 'trunk'; an association test has no path to draw."""
    fork_data = adata.copy()
    sks.tl.fork_test(fork_data, KEY, branch_point=int(adata.uns[KEY]["branch_points"][0]), key_added="fork")
    ax = sks.pl.path(fork_data, "fork", show=False)
    drawn = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == "scskeleton_path"]
    result = fork_data.uns["fork"]
    assert [len(c.get_segments()) for c in drawn] == \
        [len(result["edges"][branch_key(result, label)]) for label in result["branches"]]
    before = _state(with_modules)
    with pytest.raises(ValueError, match="whole tree"):
        sks.pl.path(with_modules, LINEAGES, show=False)
    assert _state(with_modules) == before


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
    untested = bare.copy()
    del untested.uns[BRANCHES]
    with pytest.raises(KeyError, match="tl.branch_test"):
        sks.pl.branch_heatmap(untested, KEY)  # a graph with no branch test on it
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


# --- defaults a reader can read: where legends go, what they say, labelled bars -------------------------


def _path_legend(ax):
    """The legend of the path (or trunk and branches), an extra artist beside scanpy's legend of categories."""
    found = [a for a in ax.artists if isinstance(a, Legend) and a.get_title().get_text() in ("path", "trunk and branches")]
    return found[0] if found else None


def test_path_legend_is_titled_and_names_the_path_or_the_groups(adata):
    """A reader sees what the thick lines are: the path by its ends, or the trunk and branches compared."""
    legend = _path_legend(sks.pl.path(adata, TRENDS, show=False))
    assert legend.get_title().get_text() == "path" and legend.get_title().get_visible()
    ends = [t.get_text() for t in legend.get_texts()]
    assert len(ends) == 1 and " → " in ends[0]  # e.g. "root → tip 2", never the bare word "path"
    legend = _path_legend(sks.pl.path(adata, BRANCHES, show=False))
    assert legend.get_title().get_text() == "trunk and branches"
    assert [t.get_text() for t in legend.get_texts()][0] == "trunk"


def test_path_legend_in_the_right_margin_by_default_never_clipped(adata):
    ax = sks.pl.path(adata, BRANCHES, color="true_branch", show=False)
    ax.figure.canvas.draw()
    legend, axes_box = _path_legend(ax), ax.get_window_extent()
    # default "right margin": outside the axes, off the cells, and not clipped away by them
    assert not legend.get_clip_on()
    box = legend.get_window_extent()
    assert box.x0 >= axes_box.x1
    # stacked with scanpy's legend of the categories there, not over it
    assert not box.overlaps(ax.get_legend().get_window_extent())
    # ... and right of the colour bar of a continuous colour
    ax = sks.pl.path(adata, TRENDS, color=f"{KEY}_pseudotime", show=False)
    ax.figure.canvas.draw()
    bar = next(c.colorbar.ax for c in ax.collections if getattr(c, "colorbar", None) is not None)
    assert _path_legend(ax).get_window_extent().x0 >= bar.get_tightbbox().x1


def test_path_legend_honours_legend_loc(adata):
    # a matplotlib location puts it inside, there
    ax = sks.pl.path(adata, BRANCHES, legend_loc="upper left", show=False)
    ax.figure.canvas.draw()
    box, axes_box = _path_legend(ax).get_window_extent(), ax.get_window_extent()
    assert axes_box.x0 <= box.x0 < box.x1 < (axes_box.x0 + axes_box.x1) / 2
    assert (axes_box.y0 + axes_box.y1) / 2 < box.y0 < box.y1 <= axes_box.y1
    # and scanpy's legend of the categories, asked for at the same place, moves next to it, not under it
    for loc in ("upper left", "best"):
        ax = sks.pl.path(adata, BRANCHES, color="true_branch", legend_loc=loc, show=False)
        ax.figure.canvas.draw()
        boxes = [legend.get_window_extent() for legend in [ax.get_legend(), *ax.artists]]
        assert len(boxes) == 3  # the categories, the graph, the path
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    # None: no legend of the path either
    assert _path_legend(sks.pl.path(adata, BRANCHES, legend_loc=None, show=False)) is None


def test_trends_draws_one_legend_outside_the_panels(adata):
    genes = ["gene_0", "gene_1", "gene_2", "gene_3"]
    panels = sks.pl.trends(adata, BRANCHES, genes, ncols=3, show=False)
    panels[0].figure.canvas.draw()
    legends = [(i, ax.get_legend()) for i, ax in enumerate(panels) if ax.get_legend() is not None]
    assert [i for i, _ in legends] == [2]  # once, at the end of the first row: the figure's right edge
    box = legends[0][1].get_window_extent()
    assert box.x0 >= panels[2].get_window_extent().x1
    assert not any(box.overlaps(ax.get_window_extent()) for ax in panels)
    names = [line.get_label() for line in panels[0].lines[1:]]
    assert [t.get_text() for t in legends[0][1].get_texts()] == ["trunk cells", "shared", *names]
    assert legends[0][1].get_title().get_text() == "branch"
    # inside a panel when asked, still only once
    panels = sks.pl.trends(adata, BRANCHES, genes, ncols=3, legend_loc="upper left", show=False)
    assert [ax.get_legend() is not None for ax in panels] == [False, False, True, False]


def test_trends_lineages_draw_one_legend(with_modules):
    panels = sks.pl.trends(with_modules, LINEAGES, ["gene_0", "gene_1"], show=False)
    assert [ax.get_legend() is not None for ax in panels] == [False, True]
    assert panels[1].get_legend().get_texts()[0].get_text().startswith("root → ")
    assert panels[1].get_legend().get_title().get_text() == "lineage"


def test_trends_cells_are_labelled_by_their_own_branch(adata):
    ax = sks.pl.trends(adata, BRANCHES, "gene_0", show=False)
    handles, labels = ax.get_legend_handles_labels()
    assert len(labels) == len(set(labels))  # no "trunk cells" for every branch
    curve_colours = {line.get_label(): to_rgba(line.get_color())[:3] for line in ax.lines}
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(scatters) == 1 + len(adata.uns[BRANCHES]["branches"])
    assert scatters[0].get_label() == "trunk cells"
    for scatter in scatters[1:]:  # a branch's cells: its name, and the colour of its curve
        name = scatter.get_label().removesuffix(" cells")
        assert scatter.get_label().endswith(" cells") and name in curve_colours
        assert tuple(scatter.get_facecolors()[0][:3]) == pytest.approx(curve_colours[name])


def _module_heatmap_groups(adata):
    """The heatmap with a groupby bar, and the colours of its groups."""
    fig = sks.pl.module_heatmap(adata, MODULES, groupby="true_branch", return_fig=True)
    colours = [to_rgba(c)[:3] for c in category_colors(adata, "true_branch",
                                                        list(adata.obs["true_branch"].cat.categories))]
    return fig, colours


def test_module_heatmap_legend_of_the_groups(with_modules):
    fig, colours = _module_heatmap_groups(with_modules)
    fig.canvas.draw()
    categories = list(with_modules.obs["true_branch"].cat.categories)
    # a legend of the groupby colours, titled by the column, clear of the colour bar and its label
    (legend,) = fig.legends
    assert legend.get_title().get_text() == "true branch"
    assert [t.get_text() for t in legend.get_texts()] == categories
    assert [to_rgba(patch.get_facecolor())[:3] for patch in legend.get_patches()] == colours
    colorbar = fig.axes[-1]
    assert colorbar.get_ylabel() == "scaled expression"
    assert legend.get_window_extent().x0 >= colorbar.get_tightbbox().x1


def test_module_heatmap_module_bar_labelled_in_its_own_colours(with_modules):
    fig, colours = _module_heatmap_groups(with_modules)
    # the module bar: labelled, each module named on it, in colours none of which is a group's
    side = fig.axes[0]
    assert side.get_xlabel() == "module"
    modules = list(with_modules.var[MODULES].cat.categories)
    assert [t.get_text() for t in side.texts] == modules
    module_colours = {tuple(c[:3]) for c in side.images[0].get_cmap()(np.arange(len(modules)))}
    assert module_colours.isdisjoint(colours)
    # a palette the user stored for the modules is used
    stored = with_modules.copy()
    stored.uns[f"{MODULES}_colors"] = ["#ff0000", "#00ff00", "#0000ff", "#ffff00"]
    side = sks.pl.module_heatmap(stored, MODULES, return_fig=True).axes[0]
    assert [to_rgba(c)[:3] for c in side.images[0].get_cmap()(np.arange(4))] == \
        [to_rgba(c)[:3] for c in stored.uns[f"{MODULES}_colors"]]


def test_modules_label_the_shared_axis_under_each_column_only(with_modules):
    panels = sks.pl.modules(with_modules, MODULES, ncols=3, show=False)  # 4 panels: 3 above, 1 below
    assert len(panels) == 4
    panels[0].figure.canvas.draw()
    # module 0 has module 3 below it; modules 1 and 2 have only switched-off cells below
    assert [bool(ax.get_xlabel()) for ax in panels] == [False, True, True, True]
    ticks_shown = [any(tick.label1.get_visible() for tick in ax.xaxis.get_major_ticks()) for ax in panels]
    assert ticks_shown == [False, True, True, True]


@pytest.mark.parametrize("standard_scale", ["obs", "var", None])
def test_module_heatmap_scales_without_a_warning(with_modules, standard_scale):
    """Grid points a lineage's cells never reach stay blank; scaling by column said 'All-NaN slice' twice."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for kwargs in ({}, {"groupby": "true_branch"}, {"use_raw": False, "layer": None}):
            sks.pl.module_heatmap(with_modules, MODULES, standard_scale=standard_scale, show=False, **kwargs)


def test_groupby_is_one_rule_for_every_plot(with_modules):
    """A string column names blocks and cells as a categorical one does (module_heatmap refused it with a
    KeyError); a numeric column is refused with a ValueError by every plot (pl.trends joined every tied
    value into a legend label thousands of characters long)."""
    adata = with_modules.copy()
    adata.obs["branch_str"] = adata.obs["true_branch"].astype(str)
    adata.obs["branch_cat"] = adata.obs["branch_str"].astype("category")  # its categories sorted, as strings are
    adata.obs["time"] = adata.obs["true_pseudotime"].to_numpy()
    before = _state(adata)
    as_strings = sks.pl.module_heatmap(adata, MODULES, groupby="branch_str", return_fig=True)
    as_categories = sks.pl.module_heatmap(adata, MODULES, groupby="branch_cat", return_fig=True)
    images = [[np.ma.filled(np.asarray(i.get_array(), float), -1.0) for ax in fig.axes for i in ax.images]
              for fig in (as_strings, as_categories)]
    assert len(images[0]) == len(images[1]) and all(np.array_equal(a, b, equal_nan=True) for a, b in zip(*images))
    plots = [
        lambda **kw: sks.pl.module_heatmap(adata, MODULES, show=False, **kw),
        lambda **kw: sks.pl.modules(adata, MODULES, show=False, **kw),
        lambda **kw: sks.pl.trends(adata, BRANCHES, "gene_0", show=False, **kw),
        lambda **kw: sks.pl.branch_heatmap(adata, BRANCHES, show=False, **kw),
        lambda **kw: sks.pl.path(adata, BRANCHES, show=False, **kw),
    ]
    for plot in plots:
        with pytest.raises(ValueError, match="numeric column"):
            plot(groupby="time")
        with pytest.raises(KeyError, match="not a column"):
            plot(groupby="no_such_column")
    assert _state(adata) == before


def test_an_activation_result_is_refused_with_where_its_times_are(with_modules):
    adata = with_modules.copy()
    sks.tl.activation(adata, KEY, genes=list(adata.var_names[:10]))
    before = _state(adata)
    with pytest.raises(KeyError, match="tl.activation times.*sks.pl.activation"):
        sks.pl.trends(adata, f"{KEY}_activation", "gene_0", show=False)
    with pytest.raises(KeyError, match="tl.fork_test or tl.association_test result"):
        sks.pl.trends(adata, "no_such_result", "gene_0", show=False)
    assert _state(adata) == before


@pytest.fixture(scope="module")
def with_activation(with_modules):
    adata = with_modules.copy()
    sks.tl.activation(adata, KEY, genes=list(adata.var_names[:30]))
    return adata


def test_activation_plot_draws_each_lineage_s_time_earliest_first(with_activation):
    adata = with_activation
    name = f"{KEY}_activation"
    times = np.asarray(adata.varm[f"{name}_time"])
    before = _state(adata)
    ax = sks.pl.activation(adata, name, show=False)
    # a marker per lineage a drawn gene activates on, at its time, on the gene's row
    shown = [label.get_text() for label in ax.get_yticklabels()]
    rows = adata.var_names.get_indexer(shown)
    assert len(shown) == min(30, int(np.isfinite(times).any(axis=1).sum())) > 0
    earliest = np.nanmin(times[rows], axis=1)
    assert np.all(np.diff(earliest) >= 0)  # earliest on top (first row)
    points = np.vstack([c.get_offsets() for c in ax.collections if len(c.get_offsets())])
    expected = np.argwhere(np.isfinite(times[rows]))
    assert points.shape[0] == expected.shape[0]
    np.testing.assert_allclose(np.sort(points[:, 0]), np.sort(times[rows][np.isfinite(times[rows])]))
    assert ax.get_legend() is not None and len(ax.get_legend().get_texts()) == len(adata.uns[name]["lineages"])
    assert "pseudotime" in ax.get_xlabel()
    # genes given, by symbol; genes that never activate are left out
    adata_symbols = adata.copy()
    adata_symbols.var["symbol"] = [f"S{i}" for i in range(adata.n_vars)]
    never = int(np.flatnonzero(~np.isfinite(times).any(axis=1))[0]) if (~np.isfinite(times).any(axis=1)).any() else None
    picked = [f"S{rows[1]}", f"S{rows[0]}"] + ([f"S{never}"] if never is not None else [])
    ax = sks.pl.activation(adata_symbols, name, genes=picked, gene_symbols="symbol", show=False)
    assert [label.get_text() for label in ax.get_yticklabels()] == [f"S{rows[0]}", f"S{rows[1]}"]
    assert _state(adata) == before


def test_activation_plot_refuses_what_it_cannot_draw(with_activation, with_modules):
    adata = with_activation
    name = f"{KEY}_activation"
    before = _state(adata)
    with pytest.raises(KeyError, match="no tl.activation result"):
        sks.pl.activation(adata, LINEAGES, show=False)  # an association test
    with pytest.raises(KeyError, match="gene_symbols"):
        sks.pl.activation(adata, name, gene_symbols="no_such_column", show=False)
    with pytest.raises(ValueError, match="n_genes"):
        sks.pl.activation(adata, name, n_genes=0, show=False)
    flat = adata.var_names[~np.isfinite(np.asarray(adata.varm[f"{name}_time"])).any(axis=1)]
    if len(flat):
        with pytest.raises(ValueError, match="activates on no lineage|activates on any lineage"):
            sks.pl.activation(adata, name, genes=list(flat[:3]), show=False)
    broken = adata.copy()
    del broken.varm[f"{name}_rise"]
    with pytest.raises(KeyError, match="incomplete"):
        sks.pl.activation(broken, name, show=False)
    assert _state(adata) == before


# --- one key for every gene plot: the graph's key finds the result of the plot's kind ------------------------


def _images(fig):
    return [np.ma.filled(np.asarray(image.get_array(), dtype=float), -1.0) for ax in fig.axes for image in ax.images]


def test_gene_plots_take_the_graph_key(with_activation):
    """``"ddrtree"`` stands for the one result of each plot's kind computed on it: the same figure as the
    result's own key (which keeps working)."""
    adata = with_activation
    before = _state(adata)
    for plot, name in [(sks.pl.branch_heatmap, BRANCHES), (sks.pl.module_heatmap, MODULES)]:
        by_graph, by_name = plot(adata, KEY, return_fig=True), plot(adata, name, return_fig=True)
        assert len(_images(by_graph)) == len(_images(by_name)) > 0
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(_images(by_graph), _images(by_name)))
    panels = sks.pl.modules(adata, KEY, show=False)
    assert [ax.get_title() for ax in panels] == [ax.get_title() for ax in sks.pl.modules(adata, MODULES, show=False)]
    ax = sks.pl.activation(adata, KEY, show=False)
    assert [t.get_text() for t in ax.get_yticklabels()] == \
        [t.get_text() for t in sks.pl.activation(adata, f"{KEY}_activation", show=False).get_yticklabels()]
    # with one test left on the graph, pl.trends and pl.path find it too
    alone = adata.copy()
    for name in (TRENDS, LINEAGES):
        del alone.uns[name]
    assert sks.pl.trends(alone, KEY, "gene_0", show=False).get_title() == \
        sks.pl.trends(alone, BRANCHES, "gene_0", show=False).get_title()
    assert _path_legend(sks.pl.path(alone, KEY, show=False)).get_title().get_text() == "trunk and branches"
    assert _state(adata) == before


def test_graph_key_with_several_results_lists_them(with_activation):
    adata = with_activation.copy()
    # pl.trends draws all four kinds: the graph holds three of them
    with pytest.raises(KeyError, match="3 results computed on the graph 'ddrtree'") as error:
        sks.pl.trends(adata, KEY, "gene_0", show=False)
    assert all(repr(name) in str(error.value) for name in (TRENDS, BRANCHES, LINEAGES))
    assert "Pass the one you mean as key" in str(error.value)
    # pl.path draws the path or the branches, not a whole-tree association test: two candidates
    with pytest.raises(KeyError, match="2 results computed on the graph") as error:
        sks.pl.path(adata, KEY, show=False)
    assert repr(TRENDS) in str(error.value) and repr(BRANCHES) in str(error.value)
    assert repr(LINEAGES) not in str(error.value)
    # a second activation run on the same graph
    sks.tl.activation(adata, KEY, genes=list(adata.var_names[:10]), key_added="again")
    with pytest.raises(KeyError, match="'ddrtree_activation'.*'again'|'again'.*'ddrtree_activation'"):
        sks.pl.activation(adata, KEY, show=False)
    sks.pl.activation(adata, "again", show=False)  # the full key still chooses one
    # modules are found through the test they clustered
    sks.tl.trend_modules(adata, BRANCHES, n_modules=2, key_added="branch_modules")
    with pytest.raises(KeyError, match="2 results computed on the graph"):
        sks.pl.module_heatmap(adata, KEY, show=False)
    # a graph with no result of the kind says what to run
    bare = with_activation.copy()
    del bare.uns[f"{KEY}_activation"]
    with pytest.raises(KeyError, match=r"no result it draws \(tl.activation\).*sks.tl.activation\(adata, 'ddrtree'\)"):
        sks.pl.activation(bare, KEY, show=False)


# --- figures ready for a paper -----------------------------------------------------------------------------


def test_activation_colours_follow_the_groupby_palette_and_sizes_have_a_legend(with_activation):
    adata = with_activation.copy()
    name = f"{KEY}_activation"
    categories = list(adata.obs["true_branch"].cat.categories)
    lineages = [str(leaf) for leaf in adata.uns[name]["lineages"]]
    for palette in (None, ["#111111", "#aa0000", "#0000aa"]):
        if palette is not None:
            adata.uns["true_branch_colors"] = np.array(palette, dtype=object)
        colours = dict(zip(categories, category_colors(adata, "true_branch", categories)))
        ax = sks.pl.activation(adata, KEY, groupby="true_branch", show=False)
        drawn = {c.get_label(): to_rgba(c.get_facecolors()[0])[:3] for c in ax.collections if len(c.get_offsets())}
        assert len(drawn) == len(lineages)
        for label, colour in drawn.items():  # a lineage named "branch_1" is drawn in branch_1's colour
            assert label in colours and colour == pytest.approx(to_rgba(colours[label])[:3])
        # the legend of lineages shows the same colours
        legend = ax.get_legend()
        for text, handle in zip(legend.get_texts(), legend.legend_handles):
            assert to_rgba(handle.get_facecolor()[0])[:3] == pytest.approx(to_rgba(colours[text.get_text()])[:3])
    # the marker areas have a scale: a legend of sizes, stacked under the lineages' in the right margin
    ax.figure.canvas.draw()
    sizes = [a for a in ax.artists if isinstance(a, Legend) and "rise" in a.get_title().get_text()]
    assert len(sizes) == 1
    assert [t.get_text() for t in sizes[0].get_texts()] == ["100%", "50%", "25%"]
    markers = [handle.get_markersize() for handle in sizes[0].legend_handles]
    assert markers == sorted(markers, reverse=True) and markers[0] > markers[-1]
    lineage_box, size_box = ax.get_legend().get_window_extent(), sizes[0].get_window_extent()
    right = ax.get_window_extent().x1
    assert lineage_box.x0 >= right and size_box.x0 >= right and not lineage_box.overlaps(size_box)
    assert size_box.y1 <= lineage_box.y0  # under it


def test_lineages_share_their_colour_across_plots(with_activation):
    """A lineage named by its cells' label has that label's colour in pl.trends and pl.modules too."""
    adata = with_activation.copy()
    categories = list(adata.obs["true_branch"].cat.categories)
    adata.uns["true_branch_colors"] = np.array(["#111111", "#aa0000", "#0000aa"], dtype=object)  # not tab10's
    colours = dict(zip(categories, category_colors(adata, "true_branch", categories)))
    ax = sks.pl.trends(adata, LINEAGES, "gene_0", groupby="true_branch", show=False)
    for line in ax.lines:
        assert to_rgba(line.get_color())[:3] == pytest.approx(to_rgba(colours[line.get_label()])[:3])
    panels = sks.pl.modules(adata, MODULES, groupby="true_branch", show=False)
    means = [line for line in panels[0].lines if line.get_label() in colours]
    assert means
    for line in means:
        assert to_rgba(line.get_color())[:3] == pytest.approx(to_rgba(colours[line.get_label()])[:3])


def test_branch_heatmap_blocks_span_their_own_branch(adata):
    """No block ends in blank columns: each spans its branch's own pseudotime, ticked in it."""
    ax = sks.pl.branch_heatmap(adata, BRANCHES, n_genes=10, show=False)
    image = np.ma.filled(ax.images[0].get_array().astype(float), np.nan)
    empty = ~np.isfinite(image).any(axis=0)
    runs = np.diff(np.flatnonzero(np.diff(np.r_[0, empty.astype(int), 0])).reshape(-1, 2), axis=1).ravel()
    n_branches = len(adata.uns[BRANCHES]["branches"])
    gap = max(1, adata.uns[BRANCHES]["grid"].size // 10)
    # blank columns only between blocks, exactly the gap (a short branch left its block's end blank before)
    assert not empty[0] and not empty[-1]
    assert runs.tolist() == [gap] * (n_branches - 1)
    # each block's ticks lie within that branch's own pseudotime
    curves = np.asarray(adata.varm[f"{BRANCHES}_curves"], dtype=float)
    grid = np.asarray(adata.uns[BRANCHES]["grid"], dtype=float)
    ends = [grid[np.flatnonzero(np.isfinite(curves[:, b, :]).any(axis=0))[-1]] for b in range(n_branches)]
    assert len(set(np.round(ends, 6))) > 1  # the branches end at different times: the case under test
    labels = [float(t.get_text()) for t in ax.get_xticklabels()]
    blocks = np.split(np.array(labels), np.flatnonzero(np.diff(labels) < 0) + 1)
    assert len(blocks) == n_branches
    for ticks, end in zip(blocks, ends):
        assert ticks.max() <= end + 1e-9


def test_trend_titles_say_when_a_gene_is_not_significant(adata):
    q = adata.var[f"{BRANCHES}_qval"]
    flat, called = q.idxmax(), q.idxmin()
    assert q[flat] >= 0.05 > q[called]
    title = sks.pl.trends(adata, BRANCHES, flat, show=False).get_title()
    assert title.endswith(", not significant)") and "q = 1)" not in title
    assert "not significant" not in sks.pl.trends(adata, BRANCHES, called, show=False).get_title()
