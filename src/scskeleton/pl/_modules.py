"""``pl.module_heatmap`` and ``pl.modules``: the gene modules of ``tl.trend_modules``."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from anndata import AnnData
from matplotlib.colors import ListedColormap, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import offset_copy
from scipy import sparse

from .._anndata.inputs import check_gene_symbols, get_expression
from ._colors import category_colors, lineage_colors
from ._figures import finish, panel_grid, tidy_panels, wrap_long_labels
from ._labels import lineage_title, obs_label
from ._legends import place_legend
from ._results import (
    BRANCHED,
    branch_names,
    cell_times,
    check_groupby,
    curve_spans,
    group_labels,
    resolve_result,
    time_label,
)

#: ``standard_scale`` values, as in ``scanpy.pl.heatmap``.
STANDARD_SCALES = ("var", "obs", None)
#: Gene names are written beside the rows up to this many genes.
MAX_GENE_LABELS = 80
#: The module bar's default colours, alternating: greys, so that colour in the figure stands for
#: the ``groupby`` categories only (the modules are named in the bar).
MODULE_GREYS = ("0.35", "0.75")
#: Points between the colour bar's label and the legend of the ``groupby`` categories.
LEGEND_PAD = 8.0
#: A block of the heatmap is at least this share of the width a lineage spanning the whole grid gets.
MIN_BLOCK_SHARE = 0.3


def module_heatmap(
    adata: AnnData,
    key: str,
    *,
    groupby: str | None = None,
    gene_symbols: str | None = None,
    use_raw: bool | None = None,
    layer: str | None = None,
    standard_scale: str | None = "var",
    vmin: float | None = None,
    vmax: float | None = None,
    cmap: str = "viridis",
    figsize: tuple[float, float] | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | list | None:
    """Genes × pseudotime heatmap of the modules of ``tl.trend_modules``, one block per lineage (or branch).

    Rows are the clustered genes, grouped by module (the bar on the left,
    labelled ``"module"``, in alternating greys with each module's name on
    it, or in the colours stored in ``adata.uns[f"{key}_colors"]``) and
    within a module ordered by where their curve peaks. Columns are the
    pseudotime grid of the test the modules came from, one block per lineage
    (``tl.association_test``) or branch (``tl.branch_test``,
    ``tl.fork_test``). By default a cell of the heatmap is the gene's fitted
    curve; with ``layer=`` or ``use_raw=True`` it is the mean expression of
    the cells of that lineage in that pseudotime bin (from that matrix),
    blank where a bin holds no cell. With ``groupby=``, a bar above each block
    shows the most common category of the block's cells in each bin (in the
    category colours of ``adata.uns[f"{groupby}_colors"]`` or scanpy's default,
    with a legend titled by the column right of the colour bar), and
    each block is named by its cells' most common category; without it, by its
    milestones (``"root → tip 2"``, ``"fork 1 → tip 1"``).

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.trend_modules`` has run.
    key
        Its ``key_added``, e.g. ``"rpg_association_modules"``, or the key of
        the graph whose test it clustered (``"rpg"``): then the one
        ``tl.trend_modules`` result of a test on that graph (a KeyError lists
        them when there are several; pass one).
    groupby
        A categorical, string or boolean ``.obs`` column to annotate
        pseudotime with and to name the blocks by (a numeric one is refused).
    gene_symbols
        A ``.var`` column to label the genes with instead of ``var_names``.
    use_raw, layer
        Show binned expression from ``adata.raw`` or ``adata.layers[layer]``
        (as in scanpy; not both) instead of the fitted curves. ``None`` for
        both (default): the fitted curves, as in :func:`~scskeleton.pl.trends`
        the default is what was fitted.
    standard_scale
        ``"var"`` (default): each gene scaled to [0, 1] over all its blocks;
        ``"obs"``: each pseudotime column scaled to [0, 1]; ``None``: as is.
    vmin, vmax
        Colour limits (after scaling).
    cmap
        Matplotlib colormap.
    figsize
        Figure size; default from the numbers of genes and blocks.
    show, save, return_fig
        As in :func:`scskeleton.pl.trends`.

    Returns
    -------
    The Figure when ``return_fig=True``, else the heatmap Axes (one per block)
    when ``show=False``, else ``None``.
    """
    key, entry, result_key, result = _modules(adata, key, "sks.pl.module_heatmap")
    if standard_scale not in STANDARD_SCALES:
        raise ValueError(f"standard_scale must be one of {STANDARD_SCALES}; got {standard_scale!r}.")
    check_groupby(adata, groupby)
    check_gene_symbols(adata, gene_symbols)
    labels = adata.var[key]
    columns = np.flatnonzero(labels.notna().to_numpy())
    modules = labels.cat.codes.to_numpy()[columns]
    curves = _block_curves(np.asarray(adata.varm[f"{result_key}_curves"], dtype=float))[columns]  # G × B × grid
    grid = np.asarray(result["grid"], dtype=float)
    blocks = _block_names(adata, result_key, result, curves.shape[1], groupby)
    times = cell_times(adata, result_key, result)
    members = _block_members(adata, result_key, result, len(blocks), times)
    if layer is not None or use_raw:
        values = _binned(adata, columns, members, times, grid, use_raw=bool(use_raw), layer=layer)
    else:
        values = curves
    values = _scale(values, standard_scale)
    peak = np.nanargmax(np.where(np.isnan(curves), -np.inf, curves).reshape(len(columns), -1), axis=1)
    order = np.lexsort((peak, modules))
    values, modules, columns = values[order], modules[order], columns[order]
    names = (adata.var[gene_symbols] if gene_symbols is not None else adata.var_names.to_series()).to_numpy()[columns]

    n_blocks = len(blocks)
    spans = curve_spans(curves, grid.size)
    # each block as wide as its lineage runs (at one time scale, but never a sliver): on the whole grid a
    # lineage that ends early left half its block blank
    shares = [max((end - first) / grid.size, MIN_BLOCK_SHARE) for first, end in spans]
    body = min(0.18 * len(columns), 12.0)
    top = 0.25 if groupby is not None else 0.0  # inches of the groupby bar
    figsize = figsize or (1.5 + 3.0 * sum(shares), 1.2 + top + body)
    fig = plt.figure(figsize=figsize)
    ratios = [0.15] + shares + [0.06]
    grid_spec = fig.add_gridspec(2, n_blocks + 2, width_ratios=ratios, height_ratios=[max(top, 0.01), max(body, 1.0)],
                                 wspace=0.05, hspace=0.02)
    module_colors = _module_colors(adata, key, len(labels.cat.categories))
    side = fig.add_subplot(grid_spec[1, 0])
    side.imshow(modules[:, None], aspect="auto", interpolation="nearest", cmap=ListedColormap(module_colors),
                vmin=-0.5, vmax=len(module_colors) - 0.5)
    side.set_xticks([])
    side.grid(False)
    # upright, below the narrow bar: written across it, the word ran into the first panel's time ticks
    # ("module0"), and above it into the label of the groupby bar
    side.set_xlabel("module", fontsize="small", rotation=90, va="top")
    if len(columns) <= MAX_GENE_LABELS:
        side.set_yticks(np.arange(len(columns)), names, fontsize="small")
    else:
        side.set_yticks([])
    for module in np.unique(modules):
        rows = np.flatnonzero(modules == module)
        name = labels.cat.categories[module]
        if len(columns) > MAX_GENE_LABELS:  # no room for gene names: name the modules beside the bar instead
            side.text(-0.8, rows.mean(), name, ha="right", va="center", fontsize="small")
        else:  # on the bar, so that a colour is never the only way to tell the modules apart
            side.text(0.0, rows.mean(), name, ha="center", va="center", fontsize="x-small",
                      color=_text_color(module_colors[module]))
    panels = []
    group_colors = None
    colormap = plt.get_cmap(cmap).with_extremes(bad="white")
    for b, block in enumerate(blocks):
        ax = fig.add_subplot(grid_spec[1, b + 1])
        shown = ax.imshow(np.ma.masked_invalid(values[:, b, :]), aspect="auto", interpolation="nearest",
                          cmap=colormap, vmin=vmin, vmax=vmax)
        first, end = spans[b]
        low, high = grid[first], grid[end - 1]
        ticks = [t for t in MaxNLocator(nbins=3).tick_values(low, high) if low <= t <= high]
        ax.set_xticks(np.interp(ticks, grid, np.arange(grid.size)), [f"{t:g}" for t in ticks])
        ax.set_xlim(first - 0.5, end - 0.5)  # the groupby bar above shares it
        ax.set_yticks([])
        ax.grid(False)
        if n_blocks == 1:
            ax.set_xlabel(time_label(adata, result))
        for boundary in np.flatnonzero(np.diff(modules)) + 0.5:
            ax.axhline(boundary, color="white", linewidth=0.8)
        if groupby is not None:
            bar = fig.add_subplot(grid_spec[0, b + 1], sharex=ax)
            group_colors = _draw_groups(bar, adata, groupby, members[b], times, grid, label=b == 0)
            bar.grid(False)
            bar.set_title(block, fontsize="medium")  # above the bar, which would hide a title of the heatmap
        else:
            ax.set_title(block, fontsize="medium")
        panels.append(ax)
    if n_blocks > 1:  # one label of the time axis under all the blocks: under each, it ran into the next one's
        _shared_label(fig.add_subplot(grid_spec[1, 1:n_blocks + 1]), time_label(adata, result))
    colorbar = fig.colorbar(shown, cax=fig.add_subplot(grid_spec[1, -1]),
                            label="scaled expression" if standard_scale else "expression")
    colorbar.ax.grid(False)
    if group_colors is not None:
        _group_legend(fig, colorbar.ax, list(group_labels(adata, groupby).categories), group_colors,
                      obs_label(adata, groupby))
    wrap_long_labels(panels)
    return finish(fig, panels, created=True, show=show, save=save, return_fig=return_fig)


def _shared_label(ax, label: str) -> None:
    """Make ``ax``, laid over the heatmap's blocks, an invisible carrier of their shared x-axis label.

    It gets one tick label like the blocks' (drawn in no colour), so that the
    label sits just under the blocks' time ticks, wherever the figure is laid out.
    """
    ax.set_zorder(-1)
    ax.patch.set_visible(False)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.grid(False)
    ax.set_yticks([])
    ax.set_xticks([0.5], ["0"])
    ax.tick_params(axis="x", colors="none")
    ax.set_xlabel(label, color=plt.rcParams["axes.labelcolor"])


def _modules(adata: AnnData, key: str, caller: str) -> tuple[str, Mapping, str, Mapping]:
    """The key of the trend_modules result (``key`` itself, or the one computed on the graph ``key``), its
    entry, the name of the test it clustered and that test's entry, all checked."""
    key = resolve_result(adata, key, ("trend_modules",), caller=caller)
    entry = adata.uns.get(key)
    if not isinstance(entry, Mapping) or entry.get("method") != "trend_modules":
        found = [k for k, v in adata.uns.items() if isinstance(v, Mapping) and v.get("method") == "trend_modules"]
        raise KeyError(f"{caller} found no tl.trend_modules result under adata.uns[{key!r}]; run "
                       f"sks.tl.trend_modules(adata, <test key>) first. Results present: {found}.")
    result_key = str(entry["result"])
    result = adata.uns.get(result_key)
    missing = [f for f, ok in ((f"var[{key!r}]", key in adata.var), (f"uns[{result_key!r}]", result is not None),
                               (f"varm[{result_key + '_curves'!r}]", f"{result_key}_curves" in adata.varm)) if not ok]
    if missing:
        raise KeyError(f"The modules {key!r} are incomplete: {missing} missing (subset or edited since?); rerun "
                       "the test and tl.trend_modules.")
    return key, entry, result_key, result


def _block_curves(curves: np.ndarray) -> np.ndarray:
    """G × blocks × grid (a tl.trends result has one block)."""
    return curves[:, None, :] if curves.ndim == 2 else curves


def _block_names(adata: AnnData, key: str, result: Mapping, n_blocks: int, groupby: str | None) -> list[str]:
    """Each block's name: its lineage's or branch's milestones, or its cells' majority ``groupby`` label."""
    if result["method"] == "association_test":
        names = branch_names(adata, key, groupby)
        return [names[str(leaf)] for leaf in result["lineages"]]
    if result["method"] in BRANCHED:
        names = branch_names(adata, key, groupby)
        return [names[str(label)] for label in result["branches"]]
    return ["path"][:n_blocks]


def _block_colors(adata: AnnData, key: str, result: Mapping, n_blocks: int, groupby: str | None) -> list:
    """Each block's colour: with ``groupby``, that of its lineage's or branch's category (as in
    ``pl.activation`` and ``pl.trends``); else ``tab10``."""
    if result["method"] == "association_test":
        return lineage_colors(adata, key, list(result["lineages"]), groupby)
    if result["method"] in BRANCHED:
        return lineage_colors(adata, key, list(result["branches"]), groupby)
    return lineage_colors(adata, key, ["path"][:n_blocks], None)


def _block_members(adata: AnnData, key: str, result: Mapping, n_blocks: int, times: np.ndarray) -> list[np.ndarray]:
    """Per block, the cells it holds (boolean over cells)."""
    used = np.isfinite(times)
    if result["method"] == "association_test":
        segments = adata.obs[f"{result['graph']}_segment"].astype(str).to_numpy()
        return [used & np.isin(segments, np.asarray(chain, dtype=str)) for chain in result["lineages"].values()]
    if result["method"] in BRANCHED:
        branch = adata.obs[f"{key}_branch"].astype(str).to_numpy()
        return [used & ((branch == "trunk") | (branch == str(label))) for label in result["branches"]]
    return [used]


def _bins(times: np.ndarray, grid: np.ndarray) -> np.ndarray:
    edges = np.concatenate([[-np.inf], (grid[1:] + grid[:-1]) / 2, [np.inf]])
    return np.searchsorted(edges, times, side="right") - 1


def _binned(adata, columns, members, times, grid, *, use_raw: bool, layer: str | None) -> np.ndarray:
    """G × blocks × grid mean expression per pseudotime bin (NaN where a bin is empty)."""
    # lazy: of a dask matrix only the cells and genes drawn are computed
    matrix, _ = get_expression(adata, layer=layer, use_raw=use_raw, lazy=True)
    out = np.full((columns.size, len(members), grid.size), np.nan)
    for b, inside in enumerate(members):
        cells = np.flatnonzero(inside)
        if cells.size == 0:
            continue
        picked = matrix[cells][:, columns]
        picked = picked.toarray() if sparse.issparse(picked) else np.asarray(picked, dtype=float)
        bins = _bins(times[cells], grid)
        counts = np.bincount(bins, minlength=grid.size)
        sums = np.zeros((grid.size, columns.size))
        np.add.at(sums, bins, picked)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[:, b, :] = (sums / counts[:, None]).T
    return out


def _scale(values: np.ndarray, standard_scale: str | None) -> np.ndarray:
    if standard_scale is None:
        return values
    axis = (1, 2) if standard_scale == "var" else 0
    with warnings.catch_warnings():  # a grid point no cell of a lineage reaches stays blank (NaN)
        warnings.simplefilter("ignore", RuntimeWarning)
        low = np.nanmin(values, axis=axis, keepdims=True)
        span = np.nanmax(values, axis=axis, keepdims=True) - low
    return (values - low) / np.where(span > 0, span, 1.0)


def _module_colors(adata: AnnData, key: str, n_modules: int) -> list:
    """The module bar's colours: those stored in ``uns[f"{key}_colors"]``, else alternating greys.

    Not the default category palette: the ``groupby`` bar uses it, and module 0
    and the first category would share a colour that means two things.
    """
    stored = adata.uns.get(f"{key}_colors")
    if stored is not None and len(stored) >= n_modules:
        return list(stored)[:n_modules]
    return [MODULE_GREYS[m % len(MODULE_GREYS)] for m in range(n_modules)]


def _text_color(background) -> str:
    """Black or white, whichever reads on ``background`` (by its luminance)."""
    red, green, blue = to_rgb(background)
    return "black" if 0.299 * red + 0.587 * green + 0.114 * blue > 0.5 else "white"


def _group_legend(fig: Figure, colorbar_ax, categories: list, colors: list, title: str):
    """The legend of the ``groupby`` colours, titled by the column, right of the colour bar and its label.

    Anchored to the colour bar with an offset in points (the width of its
    ticks and label), so that it stays clear of them when the figure is resized.
    """
    width = colorbar_ax.get_tightbbox().x1 - colorbar_ax.get_window_extent().x1  # ticks and label, pixels
    anchor = offset_copy(colorbar_ax.transAxes, fig=fig, x=width * 72.0 / fig.dpi + LEGEND_PAD, units="points")
    return fig.legend([Patch(color=colour) for colour in colors], [str(c) for c in categories], title=title,
                      loc="upper left", bbox_to_anchor=(0.0, 1.0), bbox_transform=anchor, frameon=False,
                      fontsize="small", title_fontsize="small")


def _draw_groups(ax, adata: AnnData, groupby: str, inside: np.ndarray, times: np.ndarray, grid: np.ndarray, *,
                 label: bool = True) -> list:
    """One row: the most common ``groupby`` category of the block's cells in each pseudotime bin.

    Returns the categories' colours, for the legend.
    """
    labels = group_labels(adata, groupby)
    categories, codes = list(labels.categories), np.asarray(labels.codes)
    cells = np.flatnonzero(inside & (codes >= 0))
    table = np.zeros((grid.size, len(categories)))
    np.add.at(table, (_bins(times[cells], grid), codes[cells]), 1.0)
    majority = np.where(table.sum(axis=1) > 0, table.argmax(axis=1), np.nan)
    colors = category_colors(adata, groupby, categories)
    colormap = ListedColormap(colors).with_extremes(bad="white")
    ax.imshow(np.ma.masked_invalid(majority[None, :]), aspect="auto", interpolation="nearest", cmap=colormap,
              vmin=-0.5, vmax=len(categories) - 0.5)
    ax.set_yticks([0], [obs_label(adata, groupby)] if label else [""], fontsize="small")
    if not label:
        ax.tick_params(axis="y", left=False)
    ax.tick_params(axis="x", labelbottom=False, bottom=False)
    return colors


def modules(
    adata: AnnData,
    key: str,
    *,
    ncols: int = 3,
    groupby: str | None = None,
    legend_loc: str | None = "right margin",
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | list | None:
    """One panel per module: its genes' standardised curves along every lineage (or branch), and their mean.

    Thin lines are the member genes' curves (centred and scaled per gene, as
    clustered), in the colour of their lineage; the thick line is the module
    mean (``uns[key]["curves"]``). Lineages are drawn on one shared
    pseudotime axis, so a module's behaviour on each lineage can be compared.
    Lineages are named by their milestones (``"root → tip 2"``) or, with
    ``groupby``, by their cells' most common label and drawn in its colour
    (``adata.uns[f"{groupby}_colors"]``, as in ``pl.activation``).

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.trend_modules`` has run.
    key
        Its ``key_added`` (``"rpg_association_modules"``), or the key of the
        graph whose test it clustered (``"rpg"``), as in :func:`module_heatmap`.
    ncols
        Panels per row.
    groupby
        An ``.obs`` column, e.g. ``"cell_type"``: name and colour the lineages by it.
    legend_loc
        Where the legend of lineages goes: ``"right margin"`` (default; one
        legend, beside the last panel of the first row, at the figure's right
        edge), a matplotlib location (inside that panel) or ``None`` for none.
    show, save, return_fig
        As in :func:`scskeleton.pl.trends`.
    """
    key, entry, result_key, result = _modules(adata, key, "sks.pl.modules")
    check_groupby(adata, groupby)
    labels = adata.var[key]
    categories = list(labels.cat.categories)
    codes = labels.cat.codes.to_numpy()
    curves = _block_curves(np.asarray(adata.varm[f"{result_key}_curves"], dtype=float))
    centers = _block_curves(np.asarray(entry["curves"], dtype=float))
    grid = np.asarray(result["grid"], dtype=float)
    blocks = _block_names(adata, result_key, result, curves.shape[1], groupby)
    colors = _block_colors(adata, result_key, result, len(blocks), groupby)
    fig, panels, created = panel_grid(len(categories), ncols=ncols, ax=None, panel_size=(4.0, 3.0), what="module",
                                sharex=True)
    for m, (ax, module) in enumerate(zip(panels, categories)):
        genes = np.flatnonzero(codes == m)
        flat = curves[genes].reshape(genes.size, -1)
        standard = (flat - np.nanmean(flat, axis=1, keepdims=True)) / np.where(
            np.nanstd(flat, axis=1, keepdims=True) > 0, np.nanstd(flat, axis=1, keepdims=True), 1.0)
        standard = standard.reshape(curves[genes].shape)
        for b, block in enumerate(blocks):
            colour = colors[b]
            shown = standard[: min(genes.size, 50), b, :]
            if shown.size:
                ax.plot(grid, shown.T, color=colour, alpha=0.15, linewidth=0.6)
            ax.plot(grid, centers[m, b], color=colour, linewidth=2.5, label=block)
        ax.set_title(f"module {module} ({genes.size} gene{'s' if genes.size != 1 else ''})", fontsize="medium")
        ax.set_ylabel("standardised trend")
        # the shared pseudotime axis is labelled once per column, under its lowest panel: sharex hid the
        # ticks of the panels above, and of a panel with only a switched-off cell below it
        if m + min(ncols, len(categories)) >= len(categories):
            ax.set_xlabel(time_label(adata, result))
            ax.tick_params(axis="x", labelbottom=True)
    tidy_panels(fig, panels, created=created)
    # one legend at the figure's right edge (beside the last panel of the first row), as pl.trends:
    # inside the first panel it covered that module's curves
    handles, texts = panels[0].get_legend_handles_labels()
    place_legend(panels[min(ncols, len(panels)) - 1], legend_loc, handles=handles, labels=texts, fontsize="small",
                 title=lineage_title(groupby))
    return finish(fig, panels, created=True, show=show, save=save, return_fig=return_fig)
