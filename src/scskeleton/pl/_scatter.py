"""Cells on a basis: which basis and which of its columns, the values a colour names, and the scatter.

Whenever scanpy's plotting code is used to colour cells it is handed a small stand-in AnnData,
because scanpy writes default palettes into ``adata.uns`` and converts string columns of ``.obs``
in place; a plot must leave the user's object exactly as it found it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from itertools import combinations
from numbers import Integral

import numpy as np
import pandas as pd
import scanpy as sc
from anndata import AnnData
from matplotlib.axes import Axes

from ._labels import basis_label, component_label, obs_label
from ._legends import label_colorbar
from ._results import category_names

#: Keyword arguments the plots set themselves; passing them through
#: ``**scatter_kwargs`` would silently fight with the explicit parameters.
_RESERVED_SCATTER_KWARGS = frozenset(
    {"adata", "basis", "color", "components", "dimensions", "ax", "show", "save", "return_fig", "projection"}
)
#: Fixed seed of the drawing order of cells coloured by a category (see :func:`scatter_cells`).
DRAW_ORDER_SEED = 0
#: Cells' default marker area (points²) is scanpy's ``120000 / n_cells``, clipped to this range: without the
#: upper bound 100 cells were drawn as 1200 pt² discs that hid the graph, without the lower one a million
#: cells vanish.
CELL_SIZE_RANGE = (0.5, 60.0)


def default_cell_size(n_cells: int) -> float:
    """The cells' marker area (points²) when none is given: scanpy's ``120000 / n_cells`` within
    :data:`CELL_SIZE_RANGE`, so that markers shrink as cells get more but never swamp a small data set."""
    low, high = CELL_SIZE_RANGE
    return float(np.clip(120000.0 / max(int(n_cells), 1), low, high))


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
