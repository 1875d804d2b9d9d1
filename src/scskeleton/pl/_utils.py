"""Helpers shared by every plot: axes creation, show/save/return, colour lookup, and words.

Plots read the AnnData schema only. Whenever scanpy's plotting code is used to
colour cells it is handed a small stand-in AnnData, because scanpy writes
default palettes into ``adata.uns`` and converts string columns of ``.obs`` in
place; a plot must leave the user's object exactly as it found it.

Every title, axis label, colour-bar label, branch name and p-value a plot
writes is made here (:func:`method_name`, :func:`obs_label`, :func:`basis_label`,
:func:`branch_names`, :func:`format_pvalue`), so that all plots speak alike.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from itertools import combinations
from numbers import Integral

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import scanpy as sc
from anndata import AnnData
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.transforms import blended_transform_factory, offset_copy

from .._anndata.schema import LEARNER_METHODS, unique_names

#: Keyword arguments the plots set themselves; passing them through
#: ``**scatter_kwargs`` would silently fight with the explicit parameters.
_RESERVED_SCATTER_KWARGS = frozenset(
    {"adata", "basis", "color", "components", "dimensions", "ax", "show", "save", "return_fig", "projection"}
)

#: Grey for nodes without a group (no assignment mass) and for > 102 categories,
#: the same fallback scanpy uses.
NA_COLOR = "lightgray"

#: How a learner (``uns[key]["method"]``) is named in titles, legends and axis labels.
METHOD_NAMES = {
    "ddrtree": "DDRTree",
    "rpg": "principal tree (RPG)",
    "rpg_l1": "ℓ1 principal graph",
    "mpme": "MPME",
    "spl": "SPL",
    "esl": "ESL",
    "fsl": "FSL",
    "convex_embedding": "convex embedding",
}
#: How the gene-level results (``uns[key]["method"]``) are named.
RESULT_NAMES = {
    "trends": "trend test",
    "branch_test": "branch test",
    "fork_test": "fork test",
    "association_test": "association test",
    "trend_modules": "trend modules",
    "activation": "activation",
}
#: Axis names of common scanpy bases (``obsm["X_<name>"]``), as scanpy's papers and tutorials write them.
BASIS_NAMES = {
    "pca": "PC",
    "umap": "UMAP",
    "tsne": "tSNE",
    "diffmap": "DC",
    "phate": "PHATE",
    "spring": "SPRING",
    "draw_graph_fa": "FA",
    "draw_graph_fr": "FR",
    "draw_graph_drl": "DrL",
    "draw_graph_kk": "KK",
}
#: A gene whose q-value is this or more is called "not significant" in titles (the tools' default level).
SIGNIFICANCE = 0.05
#: A p-value (or q-value) of exactly 0 underflowed: it is smaller than this, not 0.
SMALLEST_PVALUE = "1e-300"
#: Fixed seed of the drawing order of cells coloured by a category (see :func:`scatter_cells`).
DRAW_ORDER_SEED = 0
#: Where the graph's edges go: under the cells (scanpy draws cells at zorder 1), so no cell hides.
EDGE_ZORDER = 0.8
#: Nodes as small dots, also under the cells.
NODE_ZORDER = 0.9
#: A thin, translucent trace of the edges over the cells, so the skeleton stays visible where cells are dense.
TRACE_ZORDER = 1.5
#: Width of that trace relative to the edges, and its opacity.
TRACE_WIDTH, TRACE_ALPHA = 0.4, 0.5
#: Cells' default marker area (points²) is scanpy's ``120000 / n_cells``, clipped to this range: without the
#: upper bound 100 cells were drawn as 1200 pt² discs that hid the graph, without the lower one a million
#: cells vanish.
CELL_SIZE_RANGE = (0.5, 60.0)
#: Saved figures get at least this resolution (dots per inch) unless ``rcParams["savefig.dpi"]`` sets one.
SAVE_DPI = 150
#: Inches of white kept around what a figure made here holds when it is enlarged to show its legends.
FIGURE_PAD = 0.05


def default_cell_size(n_cells: int) -> float:
    """The cells' marker area (points²) when none is given: scanpy's ``120000 / n_cells`` within
    :data:`CELL_SIZE_RANGE`, so that markers shrink as cells get more but never swamp a small data set."""
    low, high = CELL_SIZE_RANGE
    return float(np.clip(120000.0 / max(int(n_cells), 1), low, high))


def new_axes(ax: Axes | None, figsize: tuple[float, float] | None = None) -> tuple[Figure, Axes, bool]:
    """The figure and axes to draw into, and whether this call created them.

    Creating the axes here (rather than letting scanpy do it) means every plot
    owns a single, known figure that ``save``/``return_fig`` can refer to.
    """
    if ax is not None:
        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes; got {type(ax).__name__}.")
        return ax.figure, ax, False
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax, True


def panel_grid(
    n_panels: int, *, ncols, ax: Axes | None, panel_size: tuple[float, float], what: str, sharex: bool = False
) -> tuple[Figure, list[Axes], bool]:
    """One Axes per panel: ``ax`` itself for a single panel, else a new grid of ``ncols`` columns.

    Returns the figure, the ``n_panels`` Axes (unused cells of the grid are
    switched off) and whether this call created them. ``what`` names a panel
    in the error messages.
    """
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer; got {ncols!r}.")
    if ax is not None:
        if n_panels > 1:
            raise ValueError(f"ax= draws one {what}; got {n_panels}. Leave ax=None for one panel per {what}.")
        fig, ax, created = new_axes(ax)
        return fig, [ax], created
    ncols = min(ncols, n_panels)
    nrows = -(-n_panels // ncols)
    fig, grid = plt.subplots(
        nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows), squeeze=False, sharex=sharex
    )
    panels = list(grid.ravel())
    for extra in panels[n_panels:]:
        extra.set_axis_off()
    return fig, panels[:n_panels], True


def tidy_panels(fig: Figure, panels: Sequence[Axes], *, created: bool) -> None:
    """Space a grid of panels this call created so that no legend or colour bar runs into a neighbour.

    A one-off ``tight_layout`` (no layout engine is left behind, so a later
    ``plt.tight_layout()`` by the user neither warns nor fights it).
    """
    if created and len(panels) > 1:
        wrap_long_labels(panels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "not compatible with tight_layout": best effort
            fig.tight_layout()


def wrap_long_labels(panels: Sequence[Axes]) -> None:
    """Break an x-axis label wider than its panel onto two lines, at the space nearest its middle.

    Side by side, panels of a grid are a few inches wide, and a label such as
    "registered principal tree (RPG) pseudotime" ran into the next panel's.
    """
    for ax in panels:
        label = ax.xaxis.label
        text = label.get_text()
        if " " not in text or "\n" in text:
            continue
        if label.get_window_extent().width <= ax.get_window_extent().width:
            continue
        spaces = [i for i, char in enumerate(text) if char == " "]
        cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
        label.set_text(f"{text[:cut]}\n{text[cut + 1:]}")


def finish(
    fig: Figure,
    ax: Axes,
    *,
    created: bool,
    show: bool | None,
    save: str | os.PathLike | None,
    return_fig: bool,
) -> Figure | Axes | None:
    """Save, show and return a finished plot following one rule for all plots.

    Returns the Figure when ``return_fig`` is true, otherwise the Axes when
    ``show is False`` (as ``scanpy.pl`` does), otherwise ``None``.

    A figure this call created is first enlarged to hold its legends and
    colour bars (:func:`fit_figure`), and is saved at :func:`save_dpi`.

    ``show=None`` shows only when matplotlib is interactive (IPython/Jupyter
    with a GUI or inline backend), so scripts and tests never block. A figure
    this call created, saved and hands back to nobody is closed, so that plotting
    in a loop does not pile up open figures; an unsaved one stays open for a
    later ``plt.show()``/``plt.savefig()``.
    """
    if created:
        fit_figure(fig)
    if save is not None:
        if not isinstance(save, str | os.PathLike):
            raise TypeError(f"save must be a file path (str or pathlib.Path); got {type(save).__name__}.")
        fig.savefig(save, bbox_inches="tight", dpi=save_dpi(fig))
    if return_fig:
        return fig
    if show is False:
        return ax
    if show is None:
        show = matplotlib.is_interactive()
    if show:
        plt.show()
    elif created and save is not None:
        plt.close(fig)
    return None


def save_dpi(fig: Figure) -> float:
    """The resolution a figure is saved at: ``rcParams["savefig.dpi"]`` when it sets one (as
    ``sc.set_figure_params(dpi_save=...)`` does), else the figure's own dpi but at least :data:`SAVE_DPI`."""
    stored = rcParams["savefig.dpi"]
    if stored != "figure":
        return float(stored)
    return max(float(fig.dpi), float(SAVE_DPI))


def fit_figure(fig: Figure, *, pad: float = FIGURE_PAD) -> None:
    """Enlarge ``fig`` so that everything it draws (legends in the margins, colour bars, labels) lies on it.

    A legend in the right margin of a small figure ran off its edge and was
    cut away wherever the figure was shown or saved without
    ``bbox_inches="tight"``. The figure grows by what sticks out (plus
    ``pad`` inches) and every Axes keeps its size and place in inches, so the
    plot itself looks the same; a figure that holds everything already is left as it is.
    """
    width, height = fig.get_size_inches()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        extent = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    if extent is None:
        return
    left, bottom = max(0.0, pad - extent.x0), max(0.0, pad - extent.y0)
    right, top = max(0.0, extent.x1 - width + pad), max(0.0, extent.y1 - height + pad)
    if max(left, bottom, right, top) <= 1e-3:
        return
    grown = (width + left + right, height + bottom + top)
    places = [(ax, ax.get_position(original=False)) for ax in fig.axes]
    fig.set_size_inches(*grown, forward=True)
    for ax, box in places:
        ax.set_position([(box.x0 * width + left) / grown[0], (box.y0 * height + bottom) / grown[1],
                         box.width * width / grown[0], box.height * height / grown[1]])


def resolve_basis(adata: AnnData, basis: str) -> str:
    """The ``obsm`` key for ``basis``, accepting ``"X_umap"`` as well as ``"umap"``.

    Same lookup order as scanpy: the name as given first, then with ``X_``.
    """
    if basis in adata.obsm:
        return basis
    if f"X_{basis}" in adata.obsm:
        return f"X_{basis}"
    raise KeyError(
        f"No basis {basis!r} in adata.obsm (looked for {basis!r} and {'X_' + basis!r}); "
        f"available: {list(adata.obsm.keys())}. Compute it first, e.g. sc.tl.umap(adata)."
    )


def plot_dimensions(components, dimensions, *, n_columns: int, basis: str) -> list[tuple[int, int]]:
    """The 0-based column pairs of a basis to draw, one per panel, from ``components``/``dimensions`` as
    :func:`scanpy.pl.embedding` reads them.

    ``dimensions`` counts from 0: ``(0, 1)`` or a list of pairs. ``components``
    counts from 1: ``"1,2"``, a list of such strings, or ``"all"`` (every pair).
    Neither: ``[(0, 1)]``. A pair of integers passed as ``components`` is read as
    the 0-based pair it meant before the plots followed scanpy, with a
    FutureWarning, so that existing calls keep drawing the same columns.
    """
    if components is not None and dimensions is not None:
        raise ValueError("Pass either components= (1-based, e.g. '1,2') or dimensions= (0-based, e.g. (0, 1)), "
                         "not both.")
    name, one_based = "dimensions", False
    if components is None and dimensions is None:
        pairs = [(0, 1)]
    elif components is not None and _int_pair(components) is not None:
        warnings.warn(
            f"components={tuple(components)!r}: components count from 1 as in scanpy ('1,2'); a pair of "
            "integers is read as the 0-based columns it named before. Pass dimensions=(i, j) instead.",
            FutureWarning, stacklevel=3,
        )
        pairs, name = [_int_pair(components)], "components"
    elif components is not None:
        if isinstance(components, str) and components == "all":
            return list(combinations(range(n_columns), 2))
        texts = list(components) if isinstance(components, Sequence) and not isinstance(components, str) \
            else [components]
        pairs = []
        for text in texts:
            parts = text.split(",") if isinstance(text, str) else []
            if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
                raise ValueError(f"components must be 1-based 'i,j' strings such as '1,2', a list of them, or "
                                 f"'all'; got {components!r}. For 0-based pairs pass dimensions=(0, 1).")
            pairs.append(tuple(int(part) - 1 for part in parts))
        name, one_based = "components", True
    else:
        several = _int_pair(dimensions) is None and isinstance(dimensions, Sequence)
        pairs = [_int_pair(entry) for entry in (list(dimensions) if several else [dimensions])]
        if not pairs or any(pair is None for pair in pairs):
            raise ValueError(f"dimensions must be a pair of 0-based column indices, e.g. (0, 1), or a list of "
                             f"pairs; got {dimensions!r}.")
    for first, second in pairs:
        if not (0 <= first < n_columns and 0 <= second < n_columns) or first == second:
            # say it in the user's own counting: 1-based for scanpy's component strings
            shown, limits = ((f"'{first + 1},{second + 1}'", f"1..{n_columns}") if one_based
                             else ((first, second), f"[0, {n_columns - 1}]"))
            raise ValueError(f"{name} {shown} must name two distinct columns in {limits} of the "
                             f"{n_columns}-dimensional basis {basis!r}.")
    return pairs


def _int_pair(value) -> tuple[int, int] | None:
    """``value`` as a pair of ints when it is two integers (not bools), else None."""
    if isinstance(value, str) or not isinstance(value, Sequence | np.ndarray) or len(value) != 2:
        return None
    if not all(isinstance(v, Integral) and not isinstance(v, bool | np.bool_) for v in value):
        return None
    return int(value[0]), int(value[1])


def broadcast_panels(first: list, second: list, names: tuple[str, str]) -> tuple[list, list]:
    """One entry of each per panel, paired as :func:`scanpy.pl.embedding` pairs colours and dimensions:
    lists of one length go together, and a single entry is repeated for every entry of the other."""
    if len(first) == len(second):
        return first, second
    if len(first) == 1:
        return first * len(second), second
    if len(second) == 1:
        return first, second * len(first)
    raise ValueError(f"{len(first)} {names[0]} and {len(second)} {names[1]} cannot be paired into panels; "
                     f"pass as many of each, or one of either.")


def obs_values(adata: AnnData, name: str, *, use_raw: bool | None = None, layer: str | None = None,
               gene_symbols: str | None = None) -> pd.Series:
    """Values of an ``.obs`` column or a gene, indexed like ``adata.obs``.

    ``.obs`` wins over a gene of the same name. ``use_raw=None`` follows
    scanpy: genes come from ``adata.raw`` when it exists and no layer is asked for.
    """
    if name in adata.obs.columns:
        return adata.obs[name]
    if use_raw is None:
        use_raw = layer is None and adata.raw is not None
    var_names = adata.raw.var_names if use_raw else adata.var_names
    if gene_symbols is not None:
        var = adata.raw.var if use_raw else adata.var
        known = gene_symbols in var.columns and name in set(var[gene_symbols])
    else:
        known = name in var_names
    if not known:
        raise KeyError(
            f"{name!r} is neither a column of adata.obs nor a gene in "
            f"adata{'.raw' if use_raw else ''}.var_names; obs columns: {list(adata.obs.columns)}."
        )
    frame = sc.get.obs_df(adata, keys=[name], layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    return frame[name]


def category_colors(adata: AnnData, key: str, categories: Sequence) -> list:
    """Colours for the categories of ``adata.obs[key]``, without writing them.

    Uses ``adata.uns[f"{key}_colors"]`` when it holds enough colours, otherwise
    the default scanpy would pick (matplotlib's colour cycle, then its 20/28/102
    colour palettes, then grey).
    """
    n = len(categories)
    stored = adata.uns.get(f"{key}_colors")
    if stored is not None and len(stored) >= n:
        return list(stored)[:n]
    cycle = rcParams["axes.prop_cycle"].by_key().get("color", [])
    if len(cycle) >= n:
        return list(cycle)[:n]
    for palette in (sc.pl.palettes.default_20, sc.pl.palettes.default_28, sc.pl.palettes.default_102):
        if len(palette) >= n:
            return list(palette)[:n]
    return [NA_COLOR] * n


def scatter_cells(
    adata: AnnData,
    coordinates: np.ndarray,
    *,
    basis: str,
    dimensions: tuple[int, int],
    color: str | None,
    ax: Axes,
    scatter_kwargs: Mapping,
    title: str | None = None,
    axis_name: str | None = None,
    colorbar_label: str | None = None,
    legend_title: str | None = None,
) -> Axes:
    """Scatter cells at ``coordinates[:, dimensions]`` (0-based) coloured by an obs key or gene.

    Delegates to ``scanpy.pl.embedding`` (legends, colorbars, palettes, NaN
    handling, every scanpy scatter option) on a stand-in AnnData that holds just
    the coordinates, the one colour column and its stored palette. Then writes
    the readable words: the ``title`` (default :func:`obs_label` of ``color``;
    a ``title`` in ``scatter_kwargs`` wins), the axis labels ``"<axis_name> 1"``
    (default :func:`basis_label` of ``basis``), the colour bar's label and
    the title of a categorical colour's legend (both default to the short
    :func:`obs_label` of ``color``: a legend of categories coded as numbers,
    "0", "1", would otherwise not say what they are). Segment and branch
    categories are shown by their milestone names (:func:`category_names`).

    Cells coloured by a category are drawn in a fixed random order (seed
    :data:`DRAW_ORDER_SEED`), not in the order of ``adata.obs``: data sorted
    by cell type would otherwise bury the first types under the last wherever
    they overlap (krumsiek11's Ery under Mk).
    """
    kwargs = dict(scatter_kwargs)
    reserved = _RESERVED_SCATTER_KWARGS.intersection(kwargs)
    if reserved:
        raise TypeError(f"{sorted(reserved)} cannot be passed through **scatter_kwargs; use the named parameters.")
    lookup = {name: kwargs.pop(name) for name in ("use_raw", "layer", "gene_symbols") if name in kwargs}
    if color is not None and not isinstance(color, str):
        raise TypeError(f"color must be a single .obs key or gene name (str) or None; got {color!r}.")
    if kwargs.get("size") is None:  # scanpy's 120000 / n_cells, but bounded
        kwargs["size"] = default_cell_size(adata.n_obs)
    if kwargs.get("title") is None:
        kwargs["title"] = title if title is not None else (obs_label(adata, color) if color is not None else None)
    if kwargs["title"] is None:
        del kwargs["title"]

    coordinates = np.asarray(coordinates, dtype=float)
    order = None  # the order cells are drawn in, when not obs order
    values = None
    if color is not None:
        values = obs_values(adata, color, **lookup)
        if isinstance(values.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(values):
            order = np.random.default_rng(DRAW_ORDER_SEED).permutation(adata.n_obs)
            values = pd.Series(pd.Categorical(values), index=values.index)
            names = category_names(adata, color, list(values.cat.categories))
            if names != [str(c) for c in values.cat.categories]:
                values = values.cat.rename_categories(names)
    # built in drawing order, not subset from one in obs order: a view's copy re-indexes its empty var
    stand_in = AnnData(obs=pd.DataFrame(index=adata.obs_names[order] if order is not None else adata.obs_names.copy()))
    if order is not None:
        for name in ("size", "mask_obs"):  # per-cell arrays follow the cells
            per_cell = kwargs.get(name)
            if per_cell is not None and not isinstance(per_cell, str | int | float) and np.ndim(per_cell) == 1 \
                    and len(per_cell) == adata.n_obs:
                kwargs[name] = np.asarray(per_cell)[order]
    # Stored as X_<name> and passed as <name>; the axis labels are written below.
    name = basis[2:] if basis.startswith("X_") else basis
    order = slice(None) if order is None else order
    stand_in.obsm[f"X_{name}"] = coordinates[order]
    if color is not None:
        shown = values.to_numpy() if not isinstance(values.dtype, pd.CategoricalDtype) else values.values
        stand_in.obs[color] = shown[order]
        palette_key = f"{color}_colors"
        if palette_key in adata.uns:
            # A copy: scanpy may rewrite an invalid palette, and must not do so in the user's uns.
            stand_in.uns[palette_key] = np.array(adata.uns[palette_key], dtype=object)
    sc.pl.embedding(
        stand_in,
        basis=name,
        color=color,
        components=f"{dimensions[0] + 1},{dimensions[1] + 1}",  # scanpy counts from 1
        ax=ax,
        show=False,
        **kwargs,
    )
    axis_name = basis_label(adata, basis) if axis_name is None else axis_name
    ax.set_xlabel(component_label(axis_name, dimensions[0]))
    ax.set_ylabel(component_label(axis_name, dimensions[1]))
    if color is not None:
        label_colorbar(ax, obs_label(adata, color, short=True) if colorbar_label is None else colorbar_label)
        legend = ax.get_legend()  # scanpy's legend of the categories (none for "on data" or legend_loc=None)
        if legend is not None:
            legend.set_title(obs_label(adata, color, short=True) if legend_title is None else legend_title)
            legend.set_alignment("left")  # over the left-aligned entries, as a heading
    return ax


def label_colorbar(ax: Axes, label: str) -> None:
    """Label the colour bar of every mappable drawn in ``ax`` (scanpy's colour bars come unlabelled)."""
    for artist in [*ax.collections, *ax.images]:
        colorbar = getattr(artist, "colorbar", None)
        if colorbar is not None:
            colorbar.set_label(label)


# --- which result a plot draws ------------------------------------------------------------------------


#: What each gene-level result (``uns[key]["method"]``) is made by, for messages.
RESULT_TOOLS = {
    "trends": "sks.tl.trends(adata, {graph!r}, path=(start, end))",
    "branch_test": "sks.tl.branch_test(adata, {graph!r}, branch_point=...)",
    "fork_test": "sks.tl.fork_test(adata, {graph!r}, branch_point=...)",
    "association_test": "sks.tl.association_test(adata, {graph!r})",
    "activation": "sks.tl.activation(adata, {graph!r})",
    "trend_modules": "sks.tl.trend_modules(adata, <test key>) after a test on {graph!r}",
}


def result_graph(adata: AnnData, key: str) -> str | None:
    """The key of the graph the gene-level result ``uns[key]`` was computed on, or None.

    Tests and ``tl.activation`` record it in ``uns[key]["graph"]``; the modules of
    ``tl.trend_modules`` are those of the graph of the test they clustered (``uns[key]["result"]``).
    """
    entry = adata.uns.get(key)
    if not isinstance(entry, Mapping):
        return None
    if "graph" in entry:
        return str(entry["graph"])
    if entry.get("method") == "trend_modules" and "result" in entry and str(entry["result"]) != key:
        return result_graph(adata, str(entry["result"]))
    return None


def resolve_result(adata: AnnData, key: str, methods: Sequence[str], *, caller: str) -> str:
    """The key of the gene-level result a plot draws, from the result's own key or from its graph's key.

    ``key`` holding a result (or naming nothing a graph learner wrote) is
    returned as it is, for the plot to check. The key of a fitted skeleton
    (``"rpg"``) stands for the one result of a kind in ``methods`` computed on
    that graph (:func:`result_graph`): ``pl.trends(adata, "rpg", ...)`` draws
    ``"rpg_branch_test"`` when it is the only test run on ``"rpg"``. No such
    result, or several, raise a KeyError that says what to run or lists the
    candidates to pass instead.
    """
    entry = adata.uns.get(key) if isinstance(key, str) else None
    if not isinstance(entry, Mapping) or entry.get("method") not in LEARNER_METHODS:
        return key
    found = [name for name, other in adata.uns.items()
             if isinstance(name, str) and isinstance(other, Mapping) and other.get("method") in methods
             and result_graph(adata, name) == key]
    if len(found) == 1:
        return found[0]
    kinds = ", ".join(f"tl.{method}" for method in methods)
    if not found:
        tools = " or ".join(RESULT_TOOLS.get(method, f"sks.tl.{method}(adata, {{graph!r}})").format(graph=key)
                            for method in methods)
        raise KeyError(f"{caller}: {key!r} is a graph, and no result it draws ({kinds}) was computed on it. Run "
                       f"{tools} first, or pass the key of a result.")
    listed = ", ".join(f"{name!r} ({adata.uns[name]['method']})" for name in found)
    raise KeyError(f"{caller}: {len(found)} results computed on the graph {key!r} could be drawn: {listed}. "
                   f"Pass the one you mean as key, e.g. {caller}(adata, {found[0]!r}, ...).")


# --- words: every title, label, legend entry and p-value a plot writes -------------------------------


def _entry(adata: AnnData, key: str) -> Mapping | None:
    entry = adata.uns.get(key)
    return entry if isinstance(entry, Mapping) and "method" in entry else None


def method_name(adata: AnnData, key: str, *, with_key: bool = True) -> str:
    """How the learner (or gene-level result) under ``adata.uns[key]`` is named: ``"DDRTree"``.

    The name comes from ``uns[key]["method"]`` (:data:`METHOD_NAMES`,
    :data:`RESULT_NAMES`). When ``key`` is not the method's own name
    (``key_added=``), it follows in parentheses, so that two fits of one
    method tell apart: ``"DDRTree (fresh)"``, ``"principal tree (RPG, rpg_mpme)"``.
    A key with no method is returned with spaces for underscores.
    """
    entry = _entry(adata, key)
    method = str(entry["method"]) if entry is not None else ""
    if not method:
        return key.replace("_", " ")
    name = METHOD_NAMES.get(method, RESULT_NAMES.get(method, method.replace("_", " ")))
    if not with_key or key == method:
        return name
    return f"{name[:-1]}, {key})" if name.endswith(")") else f"{name} ({key})"


def is_gene(adata: AnnData, name: str) -> bool:
    """Whether ``name`` is a gene (in ``var_names`` or ``raw.var_names``) rather than an ``.obs`` column."""
    if name in adata.obs.columns:
        return False
    return name in adata.var_names or (adata.raw is not None and name in adata.raw.var_names)


def obs_label(adata: AnnData, name: str, *, short: bool = False) -> str:
    """A readable name for an ``.obs`` column or a gene.

    Genes keep their names (``"Gata1"``, ``"gene_0"``). A column written by a
    learner or trajectory tool is named by its method and what it holds:
    ``"ddrtree_pseudotime"`` → ``"DDRTree pseudotime"`` (``short=True``:
    ``"pseudotime"``, for colour bars). Any other column has its underscores
    turned into spaces: ``"cell_type"`` → ``"cell type"``.
    """
    if is_gene(adata, name):
        return name
    keys = sorted((k for k in adata.uns if isinstance(k, str) and _entry(adata, k) is not None), key=len,
                  reverse=True)
    for key in keys:
        if name.startswith(f"{key}_") and len(name) > len(key) + 1:
            what = name[len(key) + 1:].replace("_", " ")
            if what == "milestone":
                what = "nearest milestone"
            return what if short else f"{method_name(adata, key)} {what}"
    return name.replace("_", " ")


def with_method(label: str, adata: AnnData, key: str) -> str:
    """``label`` followed by the method of ``key`` unless it names it already: ``"cell type — DDRTree"``."""
    method = method_name(adata, key)
    return label if method in label else f"{label} — {method}"


def basis_label(adata: AnnData, basis: str) -> str:
    """The axis name of an ``obsm`` basis: ``"X_pca"`` → ``"PC"``, ``"X_ddrtree"`` → ``"DDRTree"``.

    A basis learned by a scskeleton method (``X_<key>``) is named by the
    method, without its key: ``"X_ce_neg_trace"`` → ``"convex embedding"``.
    """
    name = basis[2:] if basis.startswith("X_") else basis
    if _entry(adata, name) is not None:
        return method_name(adata, name, with_key=False)
    if name.lower() in BASIS_NAMES:
        return BASIS_NAMES[name.lower()]
    return name.replace("_", " ")


def component_label(axis_name: str, dimension: int) -> str:
    """The axis label of a basis' ``dimension`` (from 0): ``"PC1"`` as scanpy writes its own bases, else ``"DDRTree 1"``.

    Figures of this package sit beside scanpy's in the same notebook, so scanpy's
    short names keep its spelling; a name of words needs the space.
    """
    joiner = "" if axis_name in BASIS_NAMES.values() else " "
    return f"{axis_name}{joiner}{dimension + 1}"


def format_pvalue(value: float, name: str = "q") -> str:
    """``"q = 0.012"``, ``"q = 3.2e-5"`` (two significant digits); ``"q < 1e-300"`` for an underflowed 0.

    Never ``"q = 0"``: a p-value of 0 only means it was too small for a float;
    and 1 is written ``"q = 1.0"``, so that it reads as a value, not a count.
    NaN (not tested, or a degenerate gene) is written ``"q = n/a"``.
    """
    value = float(value)
    if not np.isfinite(value):
        return f"{name} = n/a"
    if value <= 0.0:
        return f"{name} < {SMALLEST_PVALUE}"
    if value >= 0.01:
        text = f"{value:.2g}"
        return f"{name} = {text if '.' in text else text + '.0'}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{name} = {mantissa}e{int(exponent)}"


def milestone_names(entry: Mapping) -> dict[int, str]:
    """Node → milestone name, from ``entry["milestones"]`` (empty when there is none)."""
    stored = entry.get("milestones", {}) if isinstance(entry, Mapping) else {}
    return dict(zip(np.asarray(stored.get("nodes", []), dtype=np.intp).tolist(),
                    [str(name) for name in stored.get("names", [])]))


def segment_names(entry: Mapping, ids: Sequence) -> list[str]:
    """Each segment's label (``"root → fork 1"``, from ``uns[key]["milestones"]``), or ``"segment <id>"``."""
    stored = entry.get("milestones", {}) if isinstance(entry, Mapping) else {}
    labels = [str(label) for label in stored.get("segment_labels", [])]
    segments = entry.get("segments", {}) if isinstance(entry, Mapping) else {}
    order = sorted((str(s) for s in segments), key=lambda s: (len(s), s))
    label_of = dict(zip(order, labels)) if len(order) == len(labels) else {}
    return [label_of.get(str(i), f"segment {i}") for i in ids]


def category_names(adata: AnnData, color: str, categories: Sequence) -> list[str]:
    """Readable names of the categories of ``obs[color]``.

    Segment ids (``obs[f"{key}_segment"]``) become their milestone labels
    (``"fork 1 → tip 2"``) and branch ids of a branch or fork test
    (``obs[f"{key}_branch"]``) their branch names (:func:`branch_names`);
    every other category is kept.
    """
    plain = [str(c) for c in categories]
    for key in adata.uns:
        entry = _entry(adata, key) if isinstance(key, str) else None
        if entry is None:
            continue
        if color == f"{key}_segment" and "segments" in entry:
            return unique_names(segment_names(entry, plain))
        if color == f"{key}_branch" and entry.get("method") in ("branch_test", "fork_test"):
            named = branch_names(adata, key)
            return unique_names([named.get(c, c) for c in plain])
    return plain


def majority_label(adata: AnnData, groupby: str, cells: np.ndarray) -> str | None:
    """The most common ``obs[groupby]`` label among ``cells`` (boolean mask), or None when they have none.

    Labels that tie for the most cells are all named, joined by ``"/"`` in
    their category order (sorted for a non-categorical column): a branch of
    80 Ery and 80 Mk cells is ``"Ery/Mk"``, not whichever came first.
    """
    values = adata.obs[groupby][np.asarray(cells, dtype=bool)]
    counts = values.value_counts(sort=False, dropna=True)
    counts = counts[counts > 0]
    if not len(counts):
        return None
    tied = [str(label) for label in counts.index[counts.to_numpy() == counts.max()]]
    if not isinstance(values.dtype, pd.CategoricalDtype):
        tied = sorted(tied)
    return "/".join(tied)


def check_groupby(adata: AnnData, groupby: str | None) -> None:
    """``groupby`` names labels of the cells: a categorical, string or boolean column of ``adata.obs``
    (``KeyError`` when it is none; ``ValueError`` for a numeric column, whose every value would be a label)."""
    if groupby is None:
        return
    if not isinstance(groupby, str) or groupby not in adata.obs.columns:
        raise KeyError(f"groupby={groupby!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    column = adata.obs[groupby]
    if (not isinstance(column.dtype, pd.CategoricalDtype) and pd.api.types.is_numeric_dtype(column.dtype)
            and not pd.api.types.is_bool_dtype(column.dtype)):
        raise ValueError(
            f"groupby={groupby!r} names a numeric column; it needs labels of the cells: a categorical or string "
            f"column (adata.obs[{groupby!r}].astype('category') for cluster numbers, pd.cut(...) for a "
            "continuous value)."
        )


def group_labels(adata: AnnData, groupby: str) -> pd.Categorical:
    """``obs[groupby]`` (checked by :func:`check_groupby`) as categories: a categorical column as it is,
    strings or booleans in sorted order; ``adata`` is not changed."""
    column = adata.obs[groupby]
    return column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)


def branch_names(adata: AnnData, key: str, groupby: str | None = None) -> dict[str, str]:
    """Readable names of the branches (or lineages) of the gene-level result ``uns[key]``.

    A branch of ``tl.branch_test`` / ``tl.fork_test`` is named by the
    milestones of its first segment (``"fork 1 → tip 2"``); a lineage of
    ``tl.association_test`` or ``tl.activation`` by its first and last milestone (``"root → tip 2"``).
    With ``groupby`` each is named instead by the most common label of its
    cells (for a lineage: the cells of its last segment, where it ends);
    labels that tie are joined (``"Ery/Mk"``, see :func:`majority_label`), and
    a label shared by several branches is followed by the milestone name.
    ``"trunk"`` stays ``"trunk"``. Without milestones, ``"branch <id>"`` /
    ``"lineage to segment <id>"``.
    """
    check_groupby(adata, groupby)
    named, cells = _branch_cells(adata, key)
    if groupby is not None:
        majority = {label: majority_label(adata, groupby, mask) for label, mask in cells.items()}
        shared = [m for m in majority.values() if m is not None]
        for label, label_majority in majority.items():
            if label_majority is None:
                continue
            named[label] = label_majority if shared.count(label_majority) == 1 \
                else f"{label_majority} ({named[label]})"
    return named


def _branch_cells(adata: AnnData, key: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The milestone names of the branches (or lineages) of ``uns[key]`` (:func:`branch_names` without
    ``groupby``) and the cells that name them by majority (boolean masks; none without segments)."""
    result = adata.uns[key]
    graph_key = str(result.get("graph", ""))
    graph = adata.uns.get(graph_key, {})
    segment_column = f"{graph_key}_segment"
    segments = adata.obs[segment_column].astype(str).to_numpy() if segment_column in adata.obs else None
    named: dict[str, str] = {}
    cells: dict[str, np.ndarray] = {}
    if result.get("method") in ("association_test", "activation"):
        nodes = milestone_names(graph)
        for leaf, chain in result["lineages"].items():
            chain = [str(s) for s in np.asarray(chain).ravel()]
            paths = graph.get("segments", {})
            if nodes and chain[0] in paths and chain[-1] in paths:
                first = nodes.get(int(np.asarray(paths[chain[0]])[0]))
                last = nodes.get(int(np.asarray(paths[chain[-1]])[-1]))
                named[str(leaf)] = f"{first} → {last}" if first and last else f"lineage to segment {leaf}"
            else:
                named[str(leaf)] = f"lineage to segment {leaf}"
            if segments is not None:
                cells[str(leaf)] = segments == chain[-1]
    else:
        for label in [str(b) for b in result.get("branches", [])]:
            ids = [str(s) for s in np.asarray(result.get("segments", {}).get(branch_key(result, label),
                                                                              [label])).ravel()]
            first = segment_names(graph, ids[:1])[0] if ids else f"segment {label}"
            named[label] = first if not first.startswith("segment ") else f"branch {label}"
            if segments is not None:
                cells[label] = np.isin(segments, ids)
            elif f"{key}_branch" in adata.obs:
                cells[label] = (adata.obs[f"{key}_branch"].astype(str) == label).to_numpy()
        named["trunk"] = "trunk"
    return named, cells


def branch_key(result: Mapping, label) -> str:
    """The key under which ``result["segments"]`` and ``result["edges"]`` hold the branch ``label`` of a
    branch or fork test: its first segment's id (``result["branch_ids"]``, stored beside the names that
    ``result["branches"]`` shows), or the label itself in results that name branches by segment id."""
    ids = result.get("branch_ids") if isinstance(result, Mapping) else None
    if ids is None:
        return str(label)
    lookup = dict(zip((str(b) for b in result.get("branches", [])), (str(i) for i in np.asarray(ids).ravel())))
    return lookup.get(str(label), str(label))


def lineage_colors(adata: AnnData, key: str, labels: Sequence[str], groupby: str | None = None) -> list:
    """Colours of the lineages (or branches) ``labels`` of the gene-level result ``uns[key]``.

    With ``groupby``, each takes the colour of its cells' most common
    category in the palette of ``obs[groupby]`` (``uns[f"{groupby}_colors"]``
    or scanpy's default, :func:`category_colors`), the category it is named
    by in :func:`branch_names`: a lineage named "Ery" is drawn in Ery's colour
    in every plot. A lineage whose cells tie between categories, or that
    shares its category with another, gets a colour of scanpy's 102-colour
    palette that no other lineage has. Without ``groupby``: matplotlib's ``tab10``.
    """
    labels = [str(label) for label in labels]
    tab10 = plt.get_cmap("tab10").colors
    if groupby is None:
        return [tab10[i % len(tab10)] for i in range(len(labels))]
    check_groupby(adata, groupby)
    _, cells = _branch_cells(adata, key)
    categories = [str(c) for c in group_labels(adata, groupby).categories]
    palette = dict(zip(categories, category_colors(adata, groupby, categories)))
    majority = [majority_label(adata, groupby, cells[label]) if label in cells else None for label in labels]
    colors = [palette.get(m) if m is not None and majority.count(m) == 1 else None for m in majority]
    used = {to_hex(c) for c in colors if c is not None}
    spare = iter(c for c in sc.pl.palettes.default_102 if to_hex(c) not in used)
    return [colour if colour is not None else next(spare, NA_COLOR) for colour in colors]


def place_legend(ax: Axes, legend_loc: str | None, **kwargs):
    """A matplotlib legend of ``ax``'s labelled artists (or ``handles=``) placed like scanpy's ``legend_loc``.

    ``"right margin"`` puts it outside the axes on the right, ``None`` or
    ``"none"`` draws none, any other value is a matplotlib ``loc``
    (``"best"``, ``"upper left"``, …). Returns the legend or None.
    """
    if legend_loc is None or legend_loc == "none":
        return None
    if legend_loc == "right margin":
        return ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, **kwargs)
    return ax.legend(loc=legend_loc, **kwargs)


def set_frame(ax: Axes, frameon: bool | None) -> None:
    """Hide the box around a plot whose axes measure something (pseudotime, expression), keeping its ticks.

    ``frameon=None`` follows scanpy's setting (``sc.set_figure_params(frameon=...)``).
    """
    if not (sc.settings._frameon if frameon is None else frameon):
        for spine in ax.spines.values():
            spine.set_visible(False)


def panel_titles(title: str | Sequence[str] | None, n_panels: int) -> list[str | None]:
    """One title per panel from a ``title=`` argument: None (defaults), one string, or one per panel."""
    if title is None or isinstance(title, str):
        return [title] * n_panels
    titles = list(title)
    if len(titles) != n_panels:
        raise ValueError(f"title has {len(titles)} entries for {n_panels} panels; pass one per panel or a string.")
    return titles


#: Points between legends stacked in a margin or moved apart.
LEGEND_GAP = 6.0


def add_extra_legend(ax: Axes, handles: list, legend_loc: str | None, *, move_others: bool = True,
                     title: str | None = None, last: bool = False) -> Legend | None:
    """A legend of ``handles`` (titled ``title``) beside scanpy's legend of the cells' categories, placed by ``legend_loc``.

    ``"right margin"`` (or ``"on data"``, where scanpy writes the categories on
    the cells) stacks it with the other legends in the right margin, from the
    top down (this one on top, or with ``last`` at the bottom), right of a
    colour bar; ``None`` or ``"none"`` draws none; a matplotlib location puts
    it inside the axes there and, with ``move_others``, moves the legends it
    lands on next to it. Returns the legend or None.

    An extra artist, not ``ax.legend()``, which would replace scanpy's legend
    of the cells' categories. Never clipped: ``add_artist`` clips an artist to
    the axes, which would hide a legend in the margin.
    """
    if legend_loc is None or legend_loc == "none":
        return None
    texts = [handle.get_label() for handle in handles]
    if legend_loc in ("right margin", "on data"):  # "on data" writes categories on the cells, not this legend
        legend = Legend(ax, handles, texts, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
                        frameon=False, title=title, title_fontsize="small")
    else:
        legend = Legend(ax, handles, texts, loc=legend_loc, fontsize="small", framealpha=0.8, title=title,
                        title_fontsize="small")
    ax.add_artist(legend)
    legend.set_clip_on(False)
    if legend_loc in ("right margin", "on data"):
        _stack_margin_legends(ax, legend, last=last)
    elif move_others:
        _move_legends_off(ax, legend)
    return legend


def _other_legends(ax: Axes, first: Legend) -> list[Legend]:
    """The visible legends of ``ax`` besides ``first``: scanpy's of the categories, the graph's, …"""
    return [artist for artist in [ax.get_legend(), *ax.artists]
            if isinstance(artist, Legend) and artist is not first and artist.get_visible()]


def _stack_margin_legends(ax: Axes, first: Legend, *, last: bool = False) -> None:
    """Stack every legend in ``ax``'s right margin from its top down, ``first`` on top (``last``: at the
    bottom), so none covers another.

    scanpy centres its legend of categories on the margin, where the path's
    legend would land on it, and puts the colour bar of a continuous colour
    there: the stack starts right of the colour bar's ticks and label. The
    offsets are in points (a legend's own size) from the axes or colour bar,
    so the stack stays intact when the figure is resized or laid out later.
    """
    right = ax.get_window_extent().x1
    others = [legend for legend in _other_legends(ax, first) if legend.get_window_extent().x0 >= right - 1.0]
    bars = [artist.colorbar.ax for artist in [*ax.collections, *ax.images]
            if getattr(artist, "colorbar", None) is not None]
    base, beside = ax.transAxes, 0.0  # the anchor's transform, and points right of it
    if bars:  # x: the colour bar's right edge (then its ticks and label), y: the axes' top
        base = blended_transform_factory(bars[-1].transAxes, ax.transAxes)
        beside = (bars[-1].get_tightbbox().x1 - bars[-1].get_window_extent().x1) * 72.0 / ax.figure.dpi + LEGEND_GAP
    below = 0.0  # points from the axes' top
    for legend in [*others, first] if last else [first, *others]:
        legend.set_loc("upper left")
        legend.set_bbox_to_anchor((1.0, 1.0), transform=offset_copy(base, fig=ax.figure, x=beside, y=-below,
                                                                     units="points"))
        below += legend.get_window_extent().height * 72.0 / ax.figure.dpi + LEGEND_GAP


def _move_legends_off(ax: Axes, first: Legend) -> None:
    """Move the legends that ``first``, inside the axes, lands on next to it, towards the axes' centre.

    scanpy puts its legend of categories at the same ``legend_loc``, and
    ``"best"`` picks the same corner for both. ``first`` keeps its corner
    (``"best"`` resolved to it); the others move by its height, in points, so
    that they stay clear of it when the figure is resized.
    """
    box = first.get_window_extent()
    others = [legend for legend in _other_legends(ax, first) if legend.get_window_extent().overlaps(box)]
    if not others:
        return
    axes = ax.get_window_extent()
    vertical = "upper" if box.y0 + box.y1 > axes.y0 + axes.y1 else "lower"
    corner = f"{vertical} {'left' if box.x0 - axes.x0 < axes.x1 - box.x1 else 'right'}"
    first.set_loc(corner)
    away = -1.0 if vertical == "upper" else 1.0
    shift = box.height * 72.0 / ax.figure.dpi + LEGEND_GAP  # points
    for legend in others:
        legend.set_loc(corner)
        legend.set_bbox_to_anchor((0.0, 0.0, 1.0, 1.0), transform=offset_copy(ax.transAxes, fig=ax.figure,
                                                                               y=away * shift, units="points"))
        shift += legend.get_window_extent().height * 72.0 / ax.figure.dpi + LEGEND_GAP
