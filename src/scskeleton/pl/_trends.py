"""``pl.trends``, ``pl.branch_heatmap`` and ``pl.path``: what ``tl.trends`` and the gene tests found."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib import patheffects
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .._anndata.inputs import check_gene_symbols
from .._anndata.schema import read_graph
from ._colors import category_colors, lineage_colors
from ._docs import plot_doc
from ._edges import NODE_ZORDER, TRACE_WIDTH, TRACE_ZORDER
from ._figures import finish, finish_panels, new_axes, panel_grid, panel_titles, set_frame
from ._labels import RESULT_NAMES, SIGNIFICANCE, format_pvalue, method_name, milestone_names
from ._legends import add_extra_legend, place_legend
from ._results import (
    BRANCHED,
    branch_key,
    branch_names,
    cell_times,
    check_groupby,
    curve_spans,
    fitted_expression,
    fitted_genes,
    resolve_result,
    time_label,
)
from ._scatter import plot_dimensions
from ._tree import basis_coordinates, nodes_in_panel
from ._tree import tree as tree_plot

#: The gid of the path's edge collections drawn by :func:`path`.
PATH_GID = "scskeleton_path"
#: The path goes under the cells, over the graph's edges and nodes.
PATH_ZORDER = NODE_ZORDER + 0.05
#: Colour of a ``tl.trends`` curve and path.
TREND_COLOR = "tab:red"
#: Colour of the cells behind a ``tl.trends`` curve.
CELL_COLOR = "0.6"
METHODS = ("trends", "branch_test", "fork_test", "association_test")
#: Results with edges to highlight on the tree (``pl.path``).
PATHS = ("trends", "branch_test", "fork_test")


@plot_doc
def trends(
    adata: AnnData,
    key: str,
    genes: str | Sequence[str],
    *,
    gene_symbols: str | None = None,
    use_raw: bool | None = None,
    layer: str | None = None,
    ncols: int = 3,
    show_cells: bool = True,
    show_shared: bool = True,
    size: float | None = None,
    groupby: str | None = None,
    title: str | Sequence[str] | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | list[Axes] | None:
    """Fitted trends of genes along pseudotime, with the cells behind them.

    One panel per gene: the cells used by the fit (x: the pseudotime or path
    position they entered with, ``obs[f"{key}_time"]``; y: their expression
    in the matrix the fit used) and the fitted curve(s) ``varm[f"{key}_curves"]``.
    For a ``tl.branch_test`` or ``tl.fork_test`` result the curves and cells
    are split by branch (colours of ``obs[f"{key}_branch"]``, the trunk's
    cells in its own colour) and the shared curve is dashed; for a
    ``tl.association_test`` result there is one curve per lineage, over the
    cells on the lineages (x: the graph's pseudotime). Branches and lineages
    are named by their milestones (``"fork 1 → tip 2"``, ``"root → tip 2"``)
    or, with ``groupby``, by the most common label of their cells (lineages
    also in that label's colour). Titles give R² and q (``tl.trends``) or F
    and q (the tests), and say "not significant" for q ≥ 0.05; a q-value of 0
    is written ``"q < 1e-300"``.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.trends`` or ``tl.branch_test`` has run.
    key
        The ``key_added`` of that run, e.g. ``"ddrtree_trends"`` or
        ``"rpg_association"``, or the key of the graph it ran on (``"rpg"``):
        then the one ``tl.trends``, ``tl.branch_test``, ``tl.fork_test`` or
        ``tl.association_test`` result computed on that graph. A KeyError lists
        the results when the graph has several; pass one of them.
    genes
        One gene or several, each fitted by that run.
    gene_symbols
        An ``adata.var`` column that ``genes`` are named by, as in scanpy,
        instead of ``var_names``.
    use_raw, layer
        The matrix the cells' expression is read from, as in scanpy:
        ``adata.raw.X`` or ``adata.layers[layer]``. ``None`` for both (default):
        the matrix the curves were fitted on (``uns[key]["params"]``), so that
        the cells drawn are the ones fitted; give another to compare.
    ncols
        Panels per row when several genes are drawn.
    show_cells
        Draw the cells behind the curves.
    show_shared
        For a branch test: draw the shared curve (the null model) dashed.
    size
        Marker size of the cells (default ``min(20, 12000 / n_cells)``).
    groupby
        An ``.obs`` column of labels (categorical, strings or booleans; a
        numeric one is refused), e.g. ``"cell_type"``: name each branch or
        lineage by its cells' most common label instead of its milestones,
        and draw a lineage in that label's colour (``uns[f"{groupby}_colors"]``).
    title
        Title of each panel: one string for all, or one per gene. Default:
        the gene with its statistics, ``"Gata1  (F = 41.2, q = 3.2e-5)"``, or
        ``"Gata2  (F = 1.4, q = 0.68, not significant)"``.
    legend_loc
        Where the legend of branches or lineages goes: ``"right margin"``
        (default: outside the panels, off the cells), a matplotlib location
        inside the panel (``"best"``, ``"upper left"``, …) or ``None`` for
        none. Every panel has the same branches in the same colours, so the
        legend is drawn once, at the last panel of the first row (the
        figure's right edge).
    frameon
        Draw the box around each panel; ``None`` follows scanpy's setting. The
        axes keep their ticks and labels either way.
    ax
        Draw into this Axes (one gene only).
    {show_save_return}

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several genes) when ``show=False``, else ``None``.
    """
    key = resolve_result(adata, key, METHODS, caller="sks.pl.trends")
    result = _result(adata, key, "sks.pl.trends")
    genes = [genes] if isinstance(genes, str) else list(genes)
    if not genes:
        raise ValueError("genes is empty; name at least one gene fitted under key.")
    titles = panel_titles(title, len(genes))
    check_groupby(adata, groupby)
    names = branch_names(adata, key, groupby) if result["method"] != "trends" else {}
    columns = fitted_genes(adata, key, result, genes, gene_symbols)
    times = cell_times(adata, key, result)
    cells = np.flatnonzero(np.isfinite(times))
    values, shown = fitted_expression(adata, result, columns, cells, use_raw=use_raw, layer=layer)
    size = min(20.0, 12000.0 / max(cells.size, 1)) if size is None else size

    fig, panels, created = panel_grid(len(genes), ncols=ncols, ax=ax, panel_size=(4.2, 3.4), what="gene")

    x_label = time_label(adata, result)
    handles = []  # of the legend, the same in every panel
    for panel, gene, column, gene_values, panel_title in zip(panels, genes, columns, values.T, titles):
        if result["method"] == "trends":
            _draw_trend(panel, adata, key, result, column, times[cells], gene_values, show_cells, size)
            stats = f"R² = {adata.var[f'{key}_r2'].iloc[column]:.2f}"
        elif result["method"] == "association_test":
            handles = _draw_lineages(panel, adata, key, result, column, times[cells], gene_values, show_cells,
                                     size, names, lineage_colors(adata, key, list(result["lineages"]), groupby))
            stats = f"F = {adata.var[f'{key}_F'].iloc[column]:.3g}"
        else:
            handles = _draw_branches(panel, adata, key, result, column, cells, times[cells], gene_values,
                                     show_cells, show_shared, size, names)
            stats = f"F = {adata.var[f'{key}_F'].iloc[column]:.3g}"
        if panel_title is None:
            q = float(adata.var[f"{key}_qval"].iloc[column])
            verdict = ", not significant" if q >= SIGNIFICANCE else ""  # NaN (not tested) is compared False
            panel_title = f"{gene}  ({stats}, {format_pvalue(q)}{verdict})"
        panel.set_title(panel_title, fontsize="medium")
        panel.set_xlabel(x_label)
        panel.set_ylabel("expression" if shown == "X" else f"expression ({shown})")
        set_frame(panel, frameon)
    if handles:
        # one legend at the figure's right edge, not one per panel over each panel's cells
        legend = place_legend(panels[min(ncols, len(panels)) - 1], legend_loc, handles=handles, fontsize="small",
                              title="lineage" if result["method"] == "association_test" else "branch",
                              title_fontsize="small")
        if legend is not None:
            legend.set_alignment("left")  # the title over the left-aligned entries, as scatter_cells' legends
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


@plot_doc
def branch_heatmap(
    adata: AnnData,
    key: str,
    *,
    genes: Sequence[str] | None = None,
    gene_symbols: str | None = None,
    n_genes: int = 30,
    cmap: str = "viridis",
    groupby: str | None = None,
    title: str | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | None:
    """Genes × pseudotime heatmap of the fitted curves, one block per branch.

    Each row is a gene's branch curves from ``tl.branch_test``
    (``varm[f"{key}_curves"]``, the trunk included at the start of every
    branch), scaled to [0, 1] over all its branches so the blocks compare
    directly. Each block spans its own branch's pseudotime, from the trunk's
    start to the branch's last cell, with its own ticks, at one time scale
    for all blocks (a shorter branch gives a narrower block, not a blank
    end). Genes are ordered by where
    they peak: first by the branch holding their maximum, then by the
    pseudotime of that maximum. Each block is named by its branch's
    milestones (``"fork 1 → tip 2"``) or, with ``groupby``, by the most common
    label of its cells.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.branch_test`` has run.
    key
        The ``key_added`` of that run, e.g. ``"ddrtree_branch_test"``, or the
        key of the graph it ran on (``"ddrtree"``): then the one
        ``tl.branch_test`` or ``tl.fork_test`` result computed on that graph
        (a KeyError lists them when there are several; pass one).
    genes
        Genes to show; default the ``n_genes`` with the smallest q-values.
    gene_symbols
        An ``adata.var`` column that ``genes`` are named by and the rows are
        labelled with, as in scanpy, instead of ``var_names``.
    n_genes
        How many genes to show when ``genes`` is None.
    cmap
        Matplotlib colormap.
    groupby
        An ``.obs`` column, e.g. ``"cell_type"``: name each branch by its
        cells' most common label instead of its milestones.
    title
        Title of the plot. Default: the test and its fork, e.g.
        ``"branch test at fork 1 (DDRTree)"``.
    ax, show, save, return_fig
        As in :func:`trends`.

    Returns
    -------
    {returns_axes}
    """
    key = resolve_result(adata, key, BRANCHED, caller="sks.pl.branch_heatmap")
    result = _result(adata, key, "sks.pl.branch_heatmap")
    if result["method"] not in BRANCHED:
        raise ValueError(f"adata.uns[{key!r}] holds a {result['method']} result; branch_heatmap needs one of "
                         "tl.branch_test or tl.fork_test. "
                         f"Run sks.tl.branch_test(adata, {result['graph']!r}, branch_point=...) first.")
    names = branch_names(adata, key, groupby)
    if genes is None:
        if isinstance(n_genes, bool) or not isinstance(n_genes, int) or n_genes < 1:
            raise ValueError(f"n_genes must be a positive integer; got {n_genes!r}.")
        ranked = pd.DataFrame({"q": adata.var[f"{key}_qval"].to_numpy(), "F": adata.var[f"{key}_F"].to_numpy()})
        ranked = ranked[np.isfinite(ranked["q"])].sort_values(["q", "F"], ascending=[True, False], kind="stable")
        columns = ranked.index.to_numpy()[:n_genes]
        check_gene_symbols(adata, gene_symbols)
        labels = adata.var[gene_symbols] if gene_symbols is not None else adata.var_names.to_series()
        genes = [str(label) for label in labels.to_numpy()[columns]]
    else:
        genes = [genes] if isinstance(genes, str) else list(genes)
        if not genes:
            raise ValueError("genes is empty; pass gene names or None for the top genes.")
        columns = fitted_genes(adata, key, result, genes, gene_symbols)

    curves = np.asarray(adata.varm[f"{key}_curves"], dtype=float)[columns]  # genes × B × grid
    low = np.nanmin(curves, axis=(1, 2), keepdims=True)
    span = np.nanmax(curves, axis=(1, 2), keepdims=True) - low
    scaled = (curves - low) / np.where(span > 0, span, 1.0)
    peak = np.nanargmax(np.where(np.isnan(scaled), -np.inf, scaled).reshape(len(columns), -1), axis=1)
    order = np.argsort(peak, kind="stable")  # flat index = branch · n_grid + grid position
    scaled = scaled[order]
    genes = [genes[i] for i in order]

    n_branches, n_grid = scaled.shape[1], scaled.shape[2]
    # each block spans its own branch's stretch of the grid (where its curves are defined), at one time
    # scale for all: on the shared grid a short branch left the end of its block blank
    spans = curve_spans(scaled, n_grid)
    gap = np.full((len(genes), max(1, n_grid // 10)), np.nan)
    pieces, starts = [], []
    for b, (first, end) in enumerate(spans):
        if b:
            pieces.append(gap)
        starts.append(sum(piece.shape[1] for piece in pieces))
        pieces.append(scaled[:, b, first:end])
    image = np.concatenate(pieces, axis=1)

    fig, ax, created = new_axes(ax, figsize=(2.0 + 3.0 * n_branches, 1.0 + 0.22 * len(genes)))
    colormap = plt.get_cmap(cmap).with_extremes(bad="white")
    shown = ax.imshow(np.ma.masked_invalid(image), aspect="auto", interpolation="nearest", cmap=colormap,
                      vmin=0.0, vmax=1.0)
    ax.grid(False)  # scanpy's style (sc.set_figure_params) draws grid lines over the image
    grid = np.asarray(result["grid"], dtype=float)
    # each block's own pseudotime ticks, at the columns of those times
    positions, labels = [], []
    for start, (first, end) in zip(starts, spans):
        times = grid[first:end]
        ticks = [t for t in MaxNLocator(nbins=3).tick_values(times[0], times[-1]) if times[0] <= t <= times[-1]]
        positions += list(start + np.interp(ticks, times, np.arange(times.size)))
        labels += [f"{t:g}" for t in ticks]
    ax.set_xticks(positions, labels)
    middles = [start + (end - first - 1) / 2 for start, (first, end) in zip(starts, spans)]
    for b, label in enumerate(result["branches"]):
        ax.text(middles[b], -0.6, names[str(label)], ha="center", va="bottom")
    ax.set_yticks(np.arange(len(genes)), genes if len(genes) <= 80 else [""] * len(genes))
    ax.set_xlabel(time_label(adata, result))
    ax.set_title(_fork_title(adata, result) if title is None else title, pad=18)
    fig.colorbar(shown, ax=ax, label="scaled fitted expression").ax.grid(False)
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def path(
    adata: AnnData,
    key: str,
    *,
    basis: str | None = None,
    components: str | Sequence[str] | None = None,
    dimensions: Sequence[int] | Sequence[Sequence[int]] | None = None,
    color: str | None = None,
    path_width: float = 3.0,
    ncols: int = 4,
    groupby: str | None = None,
    title: str | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **tree_kwargs,
) -> Figure | Axes | list[Axes] | None:
    """The path (``tl.trends``) or trunk and branches (``tl.branch_test``, ``tl.fork_test``) on the tree.

    Draws :func:`~scskeleton.pl.tree` of the graph the result was computed on,
    then the result's edges (``uns[key]["edges"]``) thick, under the cells with
    a thin trace over them: the path of ``tl.trends`` in red, or the trunk and
    each branch of ``tl.branch_test`` (the branches of ``tl.fork_test``) in the
    colours ``pl.trends`` gives them (``gid="scskeleton_path"``), named as
    there: by milestones or, with ``groupby``, by their cells' majority label.
    A ``tl.association_test`` result spans the whole tree and is refused
    (``ValueError``).

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.trends``, ``tl.branch_test`` or ``tl.fork_test`` has run.
    key
        The ``key_added`` of that run (``"rpg_trends"``), or the key of the
        graph it ran on (``"rpg"``): then the one ``tl.trends``,
        ``tl.branch_test`` or ``tl.fork_test`` result computed on that graph
        (a KeyError lists them when there are several; pass one).
    basis, components, dimensions, color
        As in :func:`~scskeleton.pl.tree`: ``components="1,2"`` counts the
        columns from 1 as in scanpy, ``dimensions=(0, 1)`` from 0; a list of
        pairs (or ``components="all"``) draws one panel each.
    path_width
        Line width of the highlighted edges, in points.
    ncols
        Panels per row when several column pairs are drawn.
    groupby
        An ``.obs`` column: name the branches by their cells' most common label.
    title
        Title of the plot. Default: the path's milestones (``"path root → tip 2
        (DDRTree)"``) or the fork tested (``"branch test at fork 1 (DDRTree)"``).
    legend_loc
        Where the legends of the path (or trunk and branches) and of a
        categorical ``color`` go, as in scanpy: ``"right margin"`` (default:
        outside the axes on the right, the path's legend on top and any other
        legend there stacked below it, so that none covers the cells or
        another), a matplotlib location inside the axes (``"best"``,
        ``"upper left"``, …) or ``None`` for neither. With ``"on data"`` the
        categories are written on the cells and the path's legend goes to the
        right margin.
    frameon
        Draw a frame (and axis labels) around the plot; ``None`` follows scanpy's setting.
    ax, show, save, return_fig
        As in :func:`trends`.
    **tree_kwargs
        Passed to :func:`~scskeleton.pl.tree` (``edge_color``, ``size``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several column pairs) when ``show=False``, else ``None``.
    """
    key = resolve_result(adata, key, PATHS, caller="sks.pl.path")
    result = _result(adata, key, "sks.pl.path")
    if "edges" not in result:  # tl.association_test tests every lineage: the whole tree
        raise ValueError(f"sks.pl.path draws the path or branches of a tl.trends, tl.branch_test or tl.fork_test "
                         f"result; {key!r} is a tl.{result['method']} result, which spans the whole tree: draw it "
                         f"with sks.pl.tree(adata, {result['graph']!r}).")
    graph = read_graph(adata, result["graph"])
    space, coordinates = basis_coordinates(adata, graph, basis)
    pairs = plot_dimensions(components, dimensions, n_columns=coordinates.shape[1], basis=space)

    check_groupby(adata, groupby)
    names = branch_names(adata, key, groupby) if result["method"] != "trends" else {}
    if title is None:
        title = _path_title(adata, result) if result["method"] == "trends" else _fork_title(adata, result)
    labels, colors = _group_colors(adata, key, result)
    fig, panels, created = panel_grid(len(pairs), ncols=ncols, ax=ax, panel_size=(6.4, 4.8), what="column pair")
    for panel, pair in zip(panels, pairs):
        tree_plot(adata, graph.key, basis=basis, dimensions=pair, color=color, ax=panel, show=False, title=title,
                  legend_loc=legend_loc, frameon=frameon, **tree_kwargs)
        nodes, _ = nodes_in_panel(adata, graph, space, coordinates, pair)
        _draw_path(panel, result, nodes, labels, colors, names, path_width, legend_loc,
                   path_name=_path_title(adata, result, with_method=False) if result["method"] == "trends" else "")
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def _draw_path(ax: Axes, result: Mapping, nodes: np.ndarray, labels: list[str], colors: list, names: dict,
               path_width: float, legend_loc: str | None, *, path_name: str) -> None:
    """The result's edges, thick and outlined under the cells with a thin trace over them, and their legend
    (placed by :func:`~scskeleton.pl._legends.add_extra_legend`), titled ``"path"`` with the path's ends
    (``path_name``) or ``"trunk and branches"`` with the groups compared."""
    handles = []
    for label, colour in zip(labels, colors):
        stored = "path" if result["method"] == "trends" else branch_key(result, label)
        if stored not in result["edges"]:  # the fork test's trunk: its cells are not compared
            continue
        edges = np.asarray(result["edges"][stored], dtype=np.intp).reshape(-1, 2)
        segments = np.stack([nodes[edges[:, 0]], nodes[edges[:, 1]]], axis=1)
        # under the cells (over the graph's edges and nodes), so that no cell hides beneath it
        lines = LineCollection(segments, colors=[colour], linewidths=path_width, zorder=PATH_ZORDER,
                               capstyle="round")
        # a dark outline keeps the path visible next to cells drawn in the same colour
        lines.set_path_effects([patheffects.Stroke(linewidth=path_width + 2.0, foreground="black"), patheffects.Normal()])
        lines.set_gid(PATH_GID)
        ax.add_collection(lines)
        # and a thin trace of it over the cells, visible where they are dense
        trace = LineCollection(segments, colors=[colour], linewidths=path_width * TRACE_WIDTH, alpha=0.8,
                               zorder=TRACE_ZORDER + 0.1, capstyle="round")
        trace.set_gid(f"{PATH_GID}_trace")
        ax.add_collection(trace)
        handles.append(Line2D([], [], color=colour, linewidth=path_width,
                              label=path_name if result["method"] == "trends" else names.get(label, label)))
    add_extra_legend(ax, handles, legend_loc, title="path" if result["method"] == "trends" else "trunk and branches")


def _result(adata: AnnData, key: str, caller: str) -> dict:
    """The ``tl.trends`` / ``tl.branch_test`` result under ``key``, checked for every field a plot reads."""
    hint = ("Run sks.tl.trends(adata, <graph key>, path=(start, end)), sks.tl.branch_test or sks.tl.fork_test "
            "(adata, <graph key>, branch_point=...) or sks.tl.association_test(adata, <graph key>) first, or pass "
            "the key_added you used.")
    entry = adata.uns.get(key)
    if not isinstance(entry, Mapping) or entry.get("method") not in METHODS:
        found = [k for k, v in adata.uns.items() if isinstance(v, dict) and v.get("method") in METHODS]
        if isinstance(entry, Mapping) and entry.get("method") == "activation":
            hint = (f"{key!r} holds tl.activation times (var[{key + '_time'!r}], varm[{key + '_time'!r}]), "
                    f"which sks.pl.activation(adata, {key!r}) draws; here, draw the curves of the association "
                    "test they came from. " + hint)
        raise KeyError(f"{caller} found no tl.trends, tl.branch_test, tl.fork_test or tl.association_test result "
                       f"under adata.uns[{key!r}]. {hint} Results present: {found}.")
    result = entry
    needed = [f"varm[{key + '_curves'!r}]"] if f"{key}_curves" not in adata.varm else []
    if result["method"] == "association_test":
        graph_time = f"{result['graph']}_pseudotime"
        needed += [f"obs[{graph_time!r}]"] if graph_time not in adata.obs else []
    else:
        needed += [f"obs[{key + '_time'!r}]"] if f"{key}_time" not in adata.obs else []
    if result["method"] in BRANCHED:
        needed += [f"varm[{key + '_shared'!r}]"] if f"{key}_shared" not in adata.varm else []
        needed += [f"obs[{key + '_branch'!r}]"] if f"{key}_branch" not in adata.obs else []
    if needed:
        raise KeyError(f"The result {key!r} is incomplete: {needed} missing (subset or edited since?). {hint}")
    return result


def _group_colors(adata: AnnData, key: str, result: dict) -> tuple[list[str], list]:
    """Group labels of a result's edges and their colours (one red path for ``tl.trends``)."""
    if result["method"] == "trends":
        return ["path"], [TREND_COLOR]
    categories = list(adata.obs[f"{key}_branch"].cat.categories)
    return categories, category_colors(adata, f"{key}_branch", categories)


def _fork_title(adata: AnnData, result: Mapping) -> str:
    """``"branch test at fork 1 (DDRTree)"``: the test, its fork's milestone name and the graph's method."""
    graph = str(result.get("graph", ""))
    test = RESULT_NAMES.get(str(result["method"]), str(result["method"]))
    where = ""
    if "branch_point" in result:
        node = int(result["branch_point"])
        where = f" at {milestone_names(adata.uns.get(graph, {})).get(node, f'node {node}')}"
    return _on_graph(f"{test}{where}", adata, graph) if graph in adata.uns else f"{test}{where}"


def _on_graph(title: str, adata: AnnData, graph: str) -> str:
    """``title`` followed by the graph's method: ``"path root → tip 2 (DDRTree)"``, or after a dash when the
    method's name holds parentheses itself: ``"fork test at fork 3 — principal tree (RPG)"``."""
    name = method_name(adata, graph)
    return f"{title} — {name}" if name.endswith(")") else f"{title} ({name})"


def _path_title(adata: AnnData, result: Mapping, *, with_method: bool = True) -> str:
    """``"path root → tip 2 (DDRTree)"``: the path's end nodes by milestone name (or node index);
    ``"root → tip 2"`` without the method and the word path."""
    graph = str(result.get("graph", ""))
    edges = np.asarray(result["edges"]["path"], dtype=np.intp).reshape(-1, 2)
    if not edges.size:
        return _on_graph("path", adata, graph) if with_method else "path"
    names = milestone_names(adata.uns.get(graph, {}))
    first, last = int(edges[0, 0]), int(edges[-1, 1])
    ends = " → ".join(names.get(node, f"node {node}") for node in (first, last))
    return _on_graph(f"path {ends}", adata, graph) if with_method else ends


def _draw_lineages(ax, adata, key, result, column, times, values, show_cells, size, names, colors) -> list:
    """Grey cells and one curve per lineage in its colour (:func:`~scskeleton.pl._colors.lineage_colors`);
    returns the handles of the legend (the curves)."""
    if show_cells:
        ax.scatter(times, values, s=size, c=CELL_COLOR, linewidths=0, alpha=0.5, rasterized=True)
    grid = np.asarray(result["grid"], dtype=float)
    curves = np.asarray(adata.varm[f"{key}_curves"][column], dtype=float)  # L × grid
    handles = []
    for l, leaf in enumerate(result["lineages"]):
        handles += ax.plot(grid, curves[l], color=colors[l], linewidth=2.0,
                           label=names.get(str(leaf), str(leaf)))
    return handles


def _draw_trend(ax, adata, key, result, column, times, values, show_cells, size) -> None:
    if show_cells:
        ax.scatter(times, values, s=size, c=CELL_COLOR, linewidths=0, alpha=0.6, rasterized=True)
    grid = np.asarray(result["grid"], dtype=float)
    ax.plot(grid, np.asarray(adata.varm[f"{key}_curves"][column], dtype=float), color=TREND_COLOR, linewidth=2.0)


def _draw_branches(ax, adata, key, result, column, cells, times, values, show_cells, show_shared, size,
                   names) -> list:
    """Cells and curves in the colours of their branches, the shared curve dashed; returns the legend's
    handles: the trunk's cells, the shared curve and the branch curves (a branch's cells share its curve's
    colour)."""
    labels, colors = _group_colors(adata, key, result)
    groups = adata.obs[f"{key}_branch"].cat.codes.to_numpy()[cells]
    grid = np.asarray(result["grid"], dtype=float)
    handles = []
    if show_cells:
        for code, (label, colour) in enumerate(zip(labels, colors)):
            mine = groups == code
            # each branch's cells under their own name, so that a legend built from the axes is right
            drawn = ax.scatter(times[mine], values[mine], s=size, color=colour, linewidths=0, alpha=0.5,
                               rasterized=True, label=f"{names.get(str(label), str(label))} cells")
            if code == 0:
                handles.append(drawn)
    if show_shared:
        handles += ax.plot(grid, np.asarray(adata.varm[f"{key}_shared"][column], dtype=float), color="0.3",
                           linestyle="--", linewidth=1.5, label="shared")
    curves = np.asarray(adata.varm[f"{key}_curves"][column], dtype=float)  # B × grid
    for b, label in enumerate(result["branches"]):
        handles += ax.plot(grid, curves[b], color=colors[labels.index(label)], linewidth=2.0,
                           label=names.get(str(label), str(label)))
    return handles
