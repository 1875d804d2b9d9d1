"""``pl.cell_graph``: an embedding with the learned cell graph drawn over it."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from scipy import sparse, stats

from .._anndata.schema import component_key, connectivities_key, latent_key, resolve_key
from ._docs import plot_doc
from ._edges import EDGE_ZORDER
from ._figures import broadcast_panels, finish_panels, panel_colors, panel_grid, panel_titles
from ._labels import method_name, obs_label, with_method
from ._scatter import plot_dimensions, resolve_basis, scatter_cells

#: The gid of the edge collection, so that code (and tests) can find the graph's edges.
CELL_EDGES_GID = "scskeleton_cell_edges"
#: Gap between components drawn side by side, as a fraction of the widest one.
COMPONENT_GAP = 0.25
#: Default colour of the edges: a mid grey, which reads over white and under any cell colour alike.
CELL_EDGE_COLOR = "0.4"
#: The lightest edge is drawn this share of ``edge_width`` wide (the heaviest at the full width).
THINNEST_EDGE = 0.3
#: Default opacity of the edges: ``EDGE_OPACITY / mean degree``, within ``EDGE_ALPHA_RANGE``. Where every cell
#: has many edges they overlap, and opaque ones would merge into one solid mass over the cells.
EDGE_OPACITY, EDGE_ALPHA_RANGE = 2.5, (0.05, 0.4)


@plot_doc
def cell_graph(
    adata: AnnData,
    key: str | None = None,
    *,
    basis: str | None = None,
    color: str | Sequence[str] | None = None,
    components: str | Sequence[str] | None = None,
    dimensions: Sequence[int] | Sequence[Sequence[int]] | None = None,
    side_by_side: bool = False,
    edges: bool = True,
    edge_color: str = CELL_EDGE_COLOR,
    edge_width: float = 0.5,
    edge_alpha: float | None = None,
    ncols: int = 4,
    title: str | Sequence[str] | None = None,
    axis_name: str | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | list[Axes] | None:
    """Scatter the cells of a cell-level learner with its learned graph.

    For learners that learn a sparse similarity graph over the cells (MPME,
    SPL, ESL, FSL): cells at ``obsm[f"X_{key}"]`` (or any ``basis``), the edges
    of ``obsp[f"{key}_connectivities"]`` drawn as one
    :class:`~matplotlib.collections.LineCollection` (``gid="scskeleton_cell_edges"``,
    one segment per undirected edge, line width growing with the weight),
    under the cells: grey and, where the graph is dense, faint, so that the
    cells' colours stay readable.

    Parameters
    ----------
    adata
        Annotated data matrix with a cell graph fitted, e.g. by ``sks.tl.mpme``.
    {key_fitted}
        A cell-level learner, e.g. ``"mpme"``.
    basis
        ``obsm`` key to draw in (with or without ``X_``); default ``f"X_{key}"``.
    color
        An ``.obs`` column or a gene to colour the cells by, or a list of them
        for one panel each.
    components, dimensions
        The columns of the basis to plot, as in :func:`~scskeleton.pl.tree`:
        ``"1,2"`` (from 1, as in scanpy; a list or ``"all"`` for one panel each)
        or ``(0, 1)`` (from 0). Several colours and several pairs go together
        panel by panel.
    side_by_side
        Shift each connected component (``obs[f"{key}_component"]``, written by
        ``sks.tl.esl``) along the x axis so that components whose embeddings
        overlap (ESL centres each at the origin) are drawn next to each other.
    edges
        Draw the learned graph.
    edge_color, edge_width, edge_alpha
        Colour (default a mid grey, ``"0.4"``), largest line width (points,
        default 0.5; each edge's width follows its weight's rank among the
        edges, from 0.3 of it up) and opacity of the edges. ``edge_alpha=None`` (default)
        makes the edges fainter the more of them each cell has:
        ``2.5 / mean degree``, kept within [0.05, 0.4] (0.4 for a chain of
        cells, 0.1 for 25 edges per cell), so that overlapping edges add up to
        a grey haze rather than a solid mass between the cells.
    ncols
        Panels per row when ``color`` or the column pairs are a list.
    title
        Title of the panel, or one per panel. Default: what the colour shows
        and the method, e.g. ``"true position — MPME"``; the method alone
        without ``color``.
    axis_name
        Name of the basis on the axis labels, numbered by column:
        ``axis_name="projection YW"`` gives ``"projection YW 1"``. Default: the
        method for a learned basis (``"MPME 1"``), scanpy's names for common
        ones with scanpy's spelling (``"PC1"``, ``"UMAP1"``), else the ``obsm`` key without ``X_``
        and underscores (``"X_spl_linear"``: ``"spl linear 1"``).
    {legend_loc_categories}
        It is titled by what the colour shows (``"cell type"``).
    frameon
        Draw a frame (and axis labels) around the plot; ``None`` follows
        scanpy's setting.
    ax
        Draw into this Axes instead of a new figure (one panel only).
    show, save, return_fig
        As in ``scanpy.pl``.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``size``, ``palette``, ``cmap``,
        ``colorbar_loc``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several panels) when ``show=False``, else ``None``.
    """
    key = resolve_key(adata, key)
    space = latent_key(key) if basis is None else resolve_basis(adata, basis)
    if space not in adata.obsm:
        raise KeyError(
            f"adata.obsm[{space!r}] is missing; fit the learner first (e.g. sks.tl.{key}(adata)) "
            "or pass basis=<an obsm key>."
        )
    coordinates = np.asarray(adata.obsm[space], dtype=float)
    pairs = plot_dimensions(components, dimensions, n_columns=coordinates.shape[1], basis=space)
    colors = panel_colors(color)
    colors, pairs = broadcast_panels(colors, pairs, ("colours", "column pairs"))
    graph_name = connectivities_key(key)
    if edges and graph_name not in adata.obsp:
        if "nodes" in adata.uns.get(key, {}):
            raise KeyError(
                f"{key!r} holds a node graph (fitted on landmarks, n_landmarks), not a graph over the cells: "
                f"draw it with sks.pl.tree(adata, {key!r}, basis={space!r}), or pass edges=False."
            )
        raise KeyError(f"adata.obsp[{graph_name!r}] is missing; fit the learner {key!r} first, or pass edges=False.")
    upper = sparse.triu(sparse.csr_matrix(adata.obsp[graph_name]), k=1).tocoo() if edges else None
    if upper is not None and edge_alpha is None:
        edge_alpha = default_edge_alpha(int((upper.data > 0).sum()), adata.n_obs)
    # the connected components moved apart along each panel's own x axis, whichever columns it draws
    placed = {first: _side_by_side(adata, key, coordinates, first) if side_by_side else coordinates
              for first, _ in pairs}

    titles = panel_titles(title, len(colors))
    fig, panels, created = panel_grid(len(colors), ncols=ncols, ax=ax, panel_size=(6.4, 4.8),
                                      what="colour or column pair")
    for panel, name, (first, second), panel_title in zip(panels, colors, pairs, titles):
        shown = placed[first]
        if panel_title is None:
            panel_title = method_name(adata, key) if name is None else with_method(obs_label(adata, name), adata, key)
        scatter_cells(adata, shown, basis=space, dimensions=(first, second), color=name, ax=panel,
                      scatter_kwargs={"legend_loc": legend_loc, "frameon": frameon, **scatter_kwargs},
                      title=panel_title, axis_name=axis_name)
        if upper is not None:
            _draw_cell_edges(panel, upper, shown[:, [first, second]], color=edge_color, width=edge_width,
                             alpha=edge_alpha)
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def default_edge_alpha(n_edges: int, n_cells: int) -> float:
    """Opacity of ``n_edges`` undirected edges over ``n_cells`` cells: :data:`EDGE_OPACITY` / mean degree,
    within :data:`EDGE_ALPHA_RANGE`.

    About as many edges cross a spot as its cells have edges, so the grey they
    add up to stays roughly the same whatever the density of the graph.
    """
    mean_degree = 2.0 * n_edges / max(n_cells, 1)
    low, high = EDGE_ALPHA_RANGE
    return float(np.clip(EDGE_OPACITY / mean_degree, low, high)) if mean_degree > 0 else high


def _draw_cell_edges(ax: Axes, upper: sparse.coo_matrix, points: np.ndarray, *, color, width: float,
                     alpha: float) -> None:
    """Each learned edge (upper triangle) as one line, wider for larger weights, under the cells.

    The width follows the weight's rank, from :data:`THINNEST_EDGE` of ``width``
    up to ``width``: learned weights are often very uneven (MPME at C = ∞: the
    median weight about 1 % of the largest), and widths in proportion to them
    left most edges a tenth of a point wide, invisible.
    """
    keep = upper.data > 0
    segments = np.stack([points[upper.row[keep]], points[upper.col[keep]]], axis=1)
    weight = upper.data[keep]
    if weight.size > 1:
        rank = (stats.rankdata(weight) - 1.0) / (weight.size - 1)
        widths = width * (THINNEST_EDGE + (1.0 - THINNEST_EDGE) * rank)
    else:
        widths = width
    # below the cells (scanpy draws them at zorder 1): the graph should not hide the data
    lines = LineCollection(segments, colors=color, linewidths=widths, alpha=alpha, zorder=EDGE_ZORDER)
    lines.set_gid(CELL_EDGES_GID)
    ax.add_collection(lines, autolim=True)
    ax.autoscale_view()


def _side_by_side(adata: AnnData, key: str, coordinates: np.ndarray, axis: int) -> np.ndarray:
    """Coordinates with each component shifted along ``axis`` next to the previous one."""
    name = component_key(key)
    if name not in adata.obs:
        raise KeyError(f"side_by_side needs adata.obs[{name!r}] (written by learners that split components).")
    labels = pd.Categorical(adata.obs[name]).codes
    shifted = coordinates.copy()
    spans = [np.ptp(coordinates[labels == c, axis]) if np.any(labels == c) else 0.0 for c in range(labels.max() + 1)]
    gap = COMPONENT_GAP * max(max(spans), np.finfo(float).eps)
    offset = 0.0
    for component in range(labels.max() + 1):
        members = labels == component
        if not members.any():
            continue
        low = coordinates[members, axis].min()
        shifted[members, axis] += offset - low
        offset += spans[component] + gap
    return shifted
