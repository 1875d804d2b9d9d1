"""Helpers shared by every plot: axes creation, show/save/return, colour lookup.

Plots read the AnnData schema only. Whenever scanpy's plotting code is used to
colour cells it is handed a small stand-in AnnData, because scanpy writes
default palettes into ``adata.uns`` and converts string columns of ``.obs`` in
place; a plot must leave the user's object exactly as it found it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import scanpy as sc
from anndata import AnnData
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: Keyword arguments the plots set themselves; passing them through
#: ``**scatter_kwargs`` would silently fight with the explicit parameters.
_RESERVED_SCATTER_KWARGS = frozenset(
    {"adata", "basis", "color", "components", "dimensions", "ax", "show", "save", "return_fig", "projection"}
)

#: Grey for nodes without a group (no assignment mass) and for > 102 categories,
#: the same fallback scanpy uses.
NA_COLOR = "lightgray"


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

    ``show=None`` shows only when matplotlib is interactive (IPython/Jupyter
    with a GUI or inline backend), so scripts and tests never block. A figure
    this call created, saved and hands back to nobody is closed, so that plotting
    in a loop does not pile up open figures; an unsaved one stays open for a
    later ``plt.show()``/``plt.savefig()``.
    """
    if save is not None:
        if not isinstance(save, str | os.PathLike):
            raise TypeError(f"save must be a file path (str or pathlib.Path); got {type(save).__name__}.")
        fig.savefig(save, bbox_inches="tight")
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


def check_components(components: Sequence[int], n_columns: int, basis: str) -> tuple[int, int]:
    """Two distinct 0-based column indices into a basis with ``n_columns`` columns."""
    try:
        first, second = (int(c) for c in components)
    except (TypeError, ValueError):
        raise ValueError(f"components must be two 0-based column indices, e.g. (0, 1); got {components!r}.") from None
    if not (0 <= first < n_columns and 0 <= second < n_columns) or first == second:
        raise ValueError(
            f"components {tuple(components)!r} must be two distinct indices in [0, {n_columns - 1}] "
            f"for the {n_columns}-dimensional basis {basis!r}."
        )
    return first, second


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
    components: tuple[int, int],
    color: str | None,
    ax: Axes,
    scatter_kwargs: Mapping,
) -> Axes:
    """Scatter cells at ``coordinates[:, components]`` coloured by an obs key or gene.

    Delegates to ``scanpy.pl.embedding`` (legends, colorbars, palettes, NaN
    handling, every scanpy scatter option) on a stand-in AnnData that holds just
    the coordinates, the one colour column and its stored palette.
    """
    kwargs = dict(scatter_kwargs)
    reserved = _RESERVED_SCATTER_KWARGS.intersection(kwargs)
    if reserved:
        raise TypeError(f"{sorted(reserved)} cannot be passed through **scatter_kwargs; use the named parameters.")
    lookup = {name: kwargs.pop(name) for name in ("use_raw", "layer", "gene_symbols") if name in kwargs}
    if color is not None and not isinstance(color, str):
        raise TypeError(f"color must be a single .obs key or gene name (str) or None; got {color!r}.")

    stand_in = AnnData(obs=pd.DataFrame(index=adata.obs_names.copy()))
    # Stored as X_<name> and passed as <name>, so scanpy labels the axes "UMAP1", "ddrtree1".
    name = basis[2:] if basis.startswith("X_") else basis
    stand_in.obsm[f"X_{name}"] = np.asarray(coordinates, dtype=float)
    if color is not None:
        values = obs_values(adata, color, **lookup)
        stand_in.obs[color] = values.to_numpy() if not isinstance(values.dtype, pd.CategoricalDtype) else values.values
        palette_key = f"{color}_colors"
        if palette_key in adata.uns:
            # A copy: scanpy may rewrite an invalid palette, and must not do so in the user's uns.
            stand_in.uns[palette_key] = np.array(adata.uns[palette_key], dtype=object)
    sc.pl.embedding(
        stand_in,
        basis=name,
        color=color,
        components=f"{components[0] + 1},{components[1] + 1}",  # scanpy counts from 1
        ax=ax,
        show=False,
        **kwargs,
    )
    return ax
