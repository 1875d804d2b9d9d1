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
from scipy import sparse

from .._schema import component_key, connectivities_key, latent_key
from ._utils import (
    EDGE_ZORDER,
    check_components,
    finish,
    method_name,
    new_axes,
    obs_label,
    resolve_basis,
    scatter_cells,
    with_method,
)

#: The gid of the edge collection, so that code (and tests) can find the graph's edges.
CELL_EDGES_GID = "scskeleton_cell_edges"
#: Gap between components drawn side by side, as a fraction of the widest one.
COMPONENT_GAP = 0.25


def cell_graph(
    adata: AnnData,
    key: str,
    *,
    basis: str | None = None,
    color: str | None = None,
    components: Sequence[int] = (0, 1),
    side_by_side: bool = False,
    edges: bool = True,
    edge_color: str = "black",
    edge_width: float = 0.5,
    edge_alpha: float = 0.3,
    title: str | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | None:
    """Scatter the cells of a cell-level learner with its learned graph.

    For learners that learn a sparse similarity graph over the cells (MPME,
    SPL, ESL, FSL): cells at ``obsm[f"X_{key}"]`` (or any ``basis``), the edges
    of ``obsp[f"{key}_connectivities"]`` drawn as one
    :class:`~matplotlib.collections.LineCollection` (``gid="scskeleton_cell_edges"``,
    one segment per undirected edge, line width growing with the weight),
    under the cells.

    Parameters
    ----------
    adata
        Annotated data matrix with a cell graph fitted, e.g. by ``sks.tl.mpme``.
    key
        Key of the learner (its ``key_added``), e.g. ``"mpme"``.
    basis
        ``obsm`` key to draw in (with or without ``X_``); default ``f"X_{key}"``.
    color
        An ``.obs`` column or a gene to colour the cells by.
    components
        The two 0-based columns of the basis to plot.
    side_by_side
        Shift each connected component (``obs[f"{key}_component"]``, written by
        ``sks.tl.esl``) along the x axis so that components whose embeddings
        overlap (ESL centres each at the origin) are drawn next to each other.
    edges
        Draw the learned graph.
    edge_color, edge_width, edge_alpha
        Colour, largest line width (points) and opacity of the edges.
    title
        Title of the plot. Default: what the colour shows and the method,
        e.g. ``"true position — MPME"``; the method alone without ``color``.
    legend_loc
        Where the legend of a categorical colour goes, as in
        :func:`scanpy.pl.embedding`: ``"right margin"`` (default), ``"on data"``
        or ``None`` for none.
    frameon
        Draw a frame (and axis labels) around the plot; ``None`` follows
        scanpy's setting.
    ax, show, save, return_fig
        As in ``scanpy.pl``.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``size``, ``palette``, ``cmap``,
        ``colorbar_loc``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes when ``show=False``,
    else ``None``.
    """
    space = latent_key(key) if basis is None else resolve_basis(adata, basis)
    if space not in adata.obsm:
        raise KeyError(
            f"adata.obsm[{space!r}] is missing; fit the learner first (e.g. sks.tl.{key}(adata)) "
            "or pass basis=<an obsm key>."
        )
    coordinates = np.asarray(adata.obsm[space], dtype=float)
    first, second = check_components(components, coordinates.shape[1], space)
    graph_name = connectivities_key(key)
    if edges and graph_name not in adata.obsp:
        if "nodes" in adata.uns.get(key, {}):
            raise KeyError(
                f"{key!r} holds a node graph (fitted on landmarks, n_landmarks), not a graph over the cells: "
                f"draw it with sks.pl.tree(adata, {key!r}, basis={space!r}), or pass edges=False."
            )
        raise KeyError(f"adata.obsp[{graph_name!r}] is missing; fit the learner {key!r} first, or pass edges=False.")
    if side_by_side:
        coordinates = _side_by_side(adata, key, coordinates, first)

    fig, ax, created = new_axes(ax)
    if title is None:
        title = method_name(adata, key) if color is None else with_method(obs_label(adata, color), adata, key)
    scatter_cells(adata, coordinates, basis=space, components=(first, second), color=color, ax=ax,
                  scatter_kwargs={"legend_loc": legend_loc, "frameon": frameon, **scatter_kwargs}, title=title)
    if edges:
        upper = sparse.triu(sparse.csr_matrix(adata.obsp[graph_name]), k=1).tocoo()
        keep = upper.data > 0
        points = coordinates[:, [first, second]]
        segments = np.stack([points[upper.row[keep]], points[upper.col[keep]]], axis=1)
        weight = upper.data[keep]
        widths = edge_width * (0.2 + 0.8 * weight / weight.max()) if weight.size else edge_width
        # below the cells (scanpy draws them at zorder 1): the graph should not hide the data
        lines = LineCollection(segments, colors=edge_color, linewidths=widths, alpha=edge_alpha, zorder=EDGE_ZORDER)
        lines.set_gid(CELL_EDGES_GID)
        ax.add_collection(lines, autolim=True)
        ax.autoscale_view()
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


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
