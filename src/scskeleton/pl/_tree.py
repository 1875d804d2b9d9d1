"""``pl.tree``: cells and the learned graph in one scatter plot."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from scipy import sparse

from .._schema import StoredGraph, cell_assignment, cell_coordinates, read_graph, resolve_key
from ._utils import (
    EDGE_ZORDER,
    NODE_ZORDER,
    TRACE_ALPHA,
    TRACE_WIDTH,
    TRACE_ZORDER,
    broadcast_panels,
    finish,
    method_name,
    obs_label,
    panel_grid,
    panel_titles,
    plot_dimensions,
    resolve_basis,
    scatter_cells,
    tidy_panels,
    with_method,
)

#: The gid of the edge collection, so that code (and tests) can find the graph's edges.
EDGES_GID = "scskeleton_edges"
#: The gid of the thin trace of the edges drawn over the cells.
EDGES_TRACE_GID = "scskeleton_edges_trace"
#: The gid of the dashed collection of gap edges (``uns[key]["gap_edges"]``).
GAP_EDGES_GID = "scskeleton_gap_edges"
#: The gid of the support labels (``uns[key]["branch_support"]``).
SUPPORT_GID = "scskeleton_support"


def tree(
    adata: AnnData,
    key: str | None = None,
    *,
    basis: str | None = None,
    color: str | Sequence[str] | None = None,
    components: str | Sequence[str] | None = None,
    dimensions: Sequence[int] | Sequence[Sequence[int]] | None = None,
    show_nodes: bool = True,
    show_branch_points: bool = True,
    show_support: bool | None = None,
    edge_color: str = "black",
    edge_width: float = 1.0,
    size: float | None = None,
    ncols: int = 4,
    title: str | Sequence[str] | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | list[Axes] | None:
    """Scatter the cells with the learned graph drawn with them.

    Cells are drawn by :func:`scanpy.pl.embedding`; the graph's edges as one
    :class:`~matplotlib.collections.LineCollection` (``gid="scskeleton_edges"``,
    one segment per undirected edge) and its nodes as small dots, both under
    the cells so that no cell hides beneath them, plus a thin translucent
    trace of the edges over the cells (``gid="scskeleton_edges_trace"``) that
    keeps the skeleton visible where cells are dense. The root(s)
    (``uns[key]["root"]``, set by ``sks.tl.root``) as a star and the branch
    points (``uns[key]["branch_points"]``, set by ``sks.tl.pseudotime``) as
    diamonds, with a legend for the three. Edges listed in
    ``uns[key]["gap_edges"]`` (E × 2 node pairs), when present, are drawn
    dashed in a collection of their own (``gid="scskeleton_gap_edges"``)
    instead. When ``sks.tl.branch_support`` has run, each branch point and
    leaf it scored is labelled with its support (``gid="scskeleton_support"``).

    Parameters
    ----------
    adata
        Annotated data matrix with a graph fitted, e.g. by ``sks.tl.ddrtree``.
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
    basis
        ``obsm`` key to draw in, with or without the ``X_`` prefix (``"X_umap"``
        or ``"umap"``). Default: the graph's own space ``uns[key]["space"]``,
        where the nodes are ``uns[key]["nodes"]``. In any other basis each node
        sits at the assignment-weighted mean of its cells,
        ``(Rᵀ X_basis) / (Rᵀ 1)`` with ``R = obsm[f"{key}_assignment"]``; nodes
        without assignment mass are left out, together with their edges.
    color
        An ``.obs`` column or a gene name to colour the cells by, or a list of
        them for one panel each (as in :func:`scanpy.pl.embedding`); ``None``
        draws them in grey.
    components
        The columns of the basis to plot, counted from 1 as in
        :func:`scanpy.pl.embedding`: ``"1,2"``, a list such as
        ``["1,2", "2,3"]`` for one panel each, or ``"all"``. Default: the first two.
    dimensions
        The same counted from 0: ``(0, 1)``, or a list of pairs for one panel
        each. Give ``components`` or ``dimensions``, not both; several colours
        and several pairs go together panel by panel, as in scanpy.
    show_nodes
        Draw the nodes as small dots. The root and branch point markers are
        drawn either way.
    show_branch_points
        Mark the branch points. Turn it off for meshes such as ℓ1 graphs in
        many dimensions, where most nodes have three or more neighbours.
    show_support
        Write the bootstrap support (``uns[key]["branch_support"]``, from
        ``sks.tl.branch_support``) next to each branch point and leaf, as a
        number in [0, 1]. ``None`` (default) writes it when it is present.
    edge_color
        Colour of edges and nodes.
    edge_width
        Line width of the edges, in points.
    size
        Cell marker size, as in :func:`scanpy.pl.embedding` (default
        ``120000 / n_cells``).
    ncols
        Panels per row when ``color`` or the column pairs are a list.
    title
        Title of the panel, or one per colour. Default: what the colour shows
        and the method, e.g. ``"cell type — DDRTree"`` or ``"DDRTree pseudotime"``;
        the method's name alone without ``color``.
    legend_loc
        Where the legend of a categorical colour goes, as in
        :func:`scanpy.pl.embedding`: ``"right margin"`` (default), ``"on data"``
        or ``None`` for none.
    frameon
        Draw a frame (and axis labels) around the panel; ``None`` follows
        scanpy's setting.
    ax
        Draw into this Axes instead of a new figure (one panel only).
    show
        Show the figure; ``None`` shows it only when matplotlib is interactive.
    save
        File path to write the figure to (format from the extension).
    return_fig
        Return the Figure.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``palette``, ``cmap``,
        ``colorbar_loc``, ``use_raw``, ``layer``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several colours) when ``show=False``, else ``None``.
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    support = _support(adata.uns[key], graph, show_support)
    gap_edges = gap_edges_of(adata.uns[key], graph)
    space, coordinates = basis_coordinates(adata, graph, basis)
    pairs = plot_dimensions(components, dimensions, n_columns=coordinates.shape[1], basis=space)

    colors = [color] if color is None or isinstance(color, str) else list(color)
    if not colors:
        raise ValueError("color is empty; name an .obs column or gene, or pass None for grey cells.")
    colors, pairs = broadcast_panels(colors, pairs, ("colours", "column pairs"))
    placed = {pair: nodes_in_panel(adata, graph, space, coordinates, pair) for pair in dict.fromkeys(pairs)}
    titles = panel_titles(title, len(colors))
    fig, panels, created = panel_grid(len(colors), ncols=ncols, ax=ax, panel_size=(6.4, 4.8),
                                      what="colour or column pair")
    for panel, name, pair, panel_title in zip(panels, colors, pairs, titles):
        if panel_title is None:
            panel_title = method_name(adata, key) if name is None else with_method(obs_label(adata, name), adata, key)
        scatter_cells(
            adata,
            coordinates,
            basis=space,
            dimensions=pair,
            color=name,
            ax=panel,
            scatter_kwargs={"size": size, "legend_loc": legend_loc, "frameon": frameon, **scatter_kwargs},
            title=panel_title,
        )
        nodes, drawn = placed[pair]
        draw_graph(panel, adata.uns[key], graph, nodes, drawn, show_nodes=show_nodes,
                   show_branch_points=show_branch_points, edge_color=edge_color, edge_width=edge_width,
                   gap_edges=gap_edges, label=method_name(adata, key))
        if support is not None:
            _draw_support(panel, nodes, drawn, *support, color=edge_color)
    tidy_panels(fig, panels, created=created)
    return finish(fig, panels[0] if len(panels) == 1 else panels, created=created, show=show, save=save,
                  return_fig=return_fig)


def basis_coordinates(adata: AnnData, graph: StoredGraph, basis: str | None) -> tuple[str, np.ndarray]:
    """Where the cells are drawn: the basis's obsm key (``basis=None``: the graph's own space) and the
    cells' coordinates in it."""
    space = graph.space if basis is None else resolve_basis(adata, basis)
    if space == graph.space:
        return space, cell_coordinates(adata, graph)
    return space, np.asarray(adata.obsm[space], dtype=float)


def nodes_in_panel(
    adata: AnnData, graph: StoredGraph, space: str, coordinates: np.ndarray, pair: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """The nodes' 2-D positions in the columns ``pair`` of ``space`` and which nodes can be drawn there."""
    if space == graph.space:
        return graph.nodes[:, list(pair)], np.ones(graph.n_nodes, bool)
    return _nodes_in_basis(adata, graph, coordinates[:, list(pair)])


def _nodes_in_basis(adata: AnnData, graph: StoredGraph, coordinates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Node positions as assignment-weighted means of their cells, and which nodes have mass.

    This places the graph in any embedding of the same cells without refitting
    or projecting anything: only the stored soft assignment R is used.
    """
    assignment = cell_assignment(adata, graph.key)
    if assignment.shape != (adata.n_obs, graph.n_nodes):
        raise ValueError(
            f"adata.obsm[{graph.key + '_assignment'!r}] has shape {assignment.shape}, expected "
            f"({adata.n_obs}, {graph.n_nodes}); refit the graph {graph.key!r} on this AnnData."
        )
    # Cells with NaN coordinates (e.g. not embedded) would poison every node they touch.
    finite = np.isfinite(coordinates).all(axis=1)
    weighted = np.asarray(assignment[finite].T @ coordinates[finite])
    mass = np.asarray(assignment[finite].sum(axis=0)).ravel()
    drawn = mass > 0
    nodes = np.full((graph.n_nodes, 2), np.nan)
    nodes[drawn] = weighted[drawn] / mass[drawn, None]
    return nodes, drawn


def _support(entry, graph: StoredGraph, show_support: bool | None):
    """(node ids, supports) to write next to the nodes, or None."""
    stored = entry.get("branch_support")
    if show_support is False or (show_support is None and stored is None):
        return None
    if stored is None:
        raise KeyError(
            f"show_support=True, but adata.uns[{graph.key!r}] has no 'branch_support'; "
            f"run sks.tl.branch_support(adata, {graph.key!r}) first."
        )
    ids = np.concatenate([np.asarray(stored["branch_points"], dtype=np.intp).ravel(),
                          np.asarray(stored["leaves"], dtype=np.intp).ravel()])
    values = np.concatenate([np.asarray(stored["branch_point_support"], dtype=float).ravel(),
                             np.asarray(stored["leaf_support"], dtype=float).ravel()])
    if ids.size != values.size or ((ids < 0) | (ids >= graph.n_nodes)).any():
        raise ValueError(
            f"adata.uns[{graph.key!r}]['branch_support'] does not fit the stored graph ({graph.n_nodes} nodes); "
            f"rerun sks.tl.branch_support(adata, {graph.key!r})."
        )
    return ids, values


def gap_edges_of(entry, graph: StoredGraph) -> np.ndarray:
    """``uns[key]["gap_edges"]`` as an E × 2 array of valid node pairs (empty when absent)."""
    if "gap_edges" not in entry:
        return np.empty((0, 2), dtype=np.intp)
    pairs = np.asarray(entry["gap_edges"])
    if pairs.size == 0:
        return np.empty((0, 2), dtype=np.intp)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or not np.issubdtype(pairs.dtype, np.integer) or (
        (pairs < 0) | (pairs >= graph.n_nodes)
    ).any():
        raise ValueError(
            f"adata.uns[{graph.key!r}]['gap_edges'] must be an E × 2 integer array of node indices in "
            f"[0, {graph.n_nodes - 1}]; got shape {pairs.shape}, dtype {pairs.dtype}."
        )
    return pairs.astype(np.intp)


def _draw_support(ax: Axes, nodes: np.ndarray, drawn: np.ndarray, ids: np.ndarray, values: np.ndarray, *,
                  color: str) -> None:
    """Each support as a small number up and to the right of its node."""
    for node, value in zip(ids.tolist(), values.tolist()):
        if not drawn[node]:
            continue
        ax.annotate(
            f"{value:.2f}", xy=(nodes[node, 0], nodes[node, 1]), xytext=(4, 4), textcoords="offset points",
            fontsize="x-small", color=color, zorder=7, gid=SUPPORT_GID,
            bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.7},
        )


def draw_graph(ax: Axes, entry, graph: StoredGraph, nodes: np.ndarray, drawn: np.ndarray, *,
               show_nodes: bool, show_branch_points: bool, edge_color: str, edge_width: float,
               gap_edges: np.ndarray, legend: bool = True, label: str | None = None) -> None:
    """Edges (gap edges dashed) and nodes under the cells with a thin trace over them, root and branch
    points on top, and a legend naming the graph ``label`` (default its key)."""
    upper = sparse.triu(graph.adjacency, k=1).tocoo()
    # Each undirected edge once; the diagonal (k=1 skips it) is no edge, and
    # explicitly stored zeros are not edges either.
    keep = (upper.data != 0) & drawn[upper.row] & drawn[upper.col]
    gaps = np.unique(np.sort(gap_edges, axis=1), axis=0)
    gaps = gaps[(gaps[:, 0] != gaps[:, 1]) & drawn[gaps[:, 0]] & drawn[gaps[:, 1]]]
    if gaps.size:  # drawn dashed below, not solid here
        n = graph.n_nodes
        keep &= ~np.isin(upper.row.astype(np.int64) * n + upper.col, gaps[:, 0].astype(np.int64) * n + gaps[:, 1])
    segments = np.stack([nodes[upper.row[keep]], nodes[upper.col[keep]]], axis=1)
    draw_edges(ax, segments, color=edge_color, width=edge_width, gid=EDGES_GID)

    marker_size = max(4.0 * edge_width, 2.0)
    handles = [Line2D([], [], color=edge_color, linewidth=edge_width, marker="o" if show_nodes else None,
                      markersize=marker_size ** 0.5 * 1.5, label=graph.key if label is None else label)]
    if gaps.size:
        # gap edges cross the empty space between groups of cells: drawn over them, dashed
        dashed = LineCollection(np.stack([nodes[gaps[:, 0]], nodes[gaps[:, 1]]], axis=1), colors=edge_color,
                                linewidths=edge_width, linestyles="--", zorder=TRACE_ZORDER)
        dashed.set_gid(GAP_EDGES_GID)
        ax.add_collection(dashed, autolim=True)
        handles.append(Line2D([], [], color=edge_color, linewidth=edge_width, linestyle="--", label="gap edge"))
    ax.autoscale_view()
    if show_nodes:
        ax.scatter(nodes[drawn, 0], nodes[drawn, 1], s=marker_size * 3, c=edge_color, linewidths=0,
                   zorder=NODE_ZORDER)

    branch_points = np.asarray(entry.get("branch_points", []) if show_branch_points else [], dtype=int).ravel()
    branch_points = branch_points[drawn[branch_points]] if branch_points.size else branch_points
    if branch_points.size:
        handles.append(ax.scatter(
            nodes[branch_points, 0], nodes[branch_points, 1], s=60, marker="D", facecolors="none",
            edgecolors=edge_color, linewidths=1.5, zorder=5, label="branch point",
        ))
    roots = graph.roots[drawn[graph.roots]]
    if roots.size:
        handles.append(ax.scatter(
            nodes[roots, 0], nodes[roots, 1], s=260, marker="*", facecolors="gold",
            edgecolors=edge_color, linewidths=1.0, zorder=6, label="root" if roots.size == 1 else "roots",
        ))

    # An extra artist, not ax.legend(): that would replace scanpy's legend of the
    # cells' categories, which stays the Axes' own legend.
    if legend:
        labels = [handle.get_label() for handle in handles]
        ax.add_artist(Legend(ax, handles, labels, loc="best", fontsize="small", framealpha=0.8))


def draw_edges(ax: Axes, segments: np.ndarray, *, color, width, gid: str, linestyle: str = "solid") -> LineCollection:
    """Edges under the cells (``gid``) and a thin translucent trace of them over the cells (``gid + "_trace"``).

    Under the cells, no cell type is hidden beneath the skeleton (krumsiek11's
    Ery at its tip); the trace, a fraction of the width and half transparent,
    still shows the skeleton where cells cover it without hiding their colours.
    """
    edges = LineCollection(segments, colors=color, linewidths=width, linestyles=linestyle, zorder=EDGE_ZORDER)
    edges.set_gid(gid)
    ax.add_collection(edges, autolim=True)
    trace = LineCollection(segments, colors=color, linewidths=np.asarray(width) * TRACE_WIDTH, alpha=TRACE_ALPHA,
                           linestyles=linestyle, zorder=TRACE_ZORDER)
    trace.set_gid(f"{gid}_trace")
    ax.add_collection(trace, autolim=False)
    return edges
