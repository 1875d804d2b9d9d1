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

from .._schema import StoredGraph, cell_assignment, cell_coordinates, read_graph
from ._utils import check_components, finish, new_axes, resolve_basis, scatter_cells

#: The gid of the edge collection, so that code (and tests) can find the graph's edges.
EDGES_GID = "scskeleton_edges"


def tree(
    adata: AnnData,
    key: str = "ddrtree",
    *,
    basis: str | None = None,
    color: str | None = None,
    components: Sequence[int] = (0, 1),
    show_nodes: bool = True,
    show_branch_points: bool = True,
    edge_color: str = "black",
    edge_width: float = 1.0,
    size: float | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | None:
    """Scatter the cells with the learned graph drawn on top.

    Cells are drawn by :func:`scanpy.pl.embedding`; the graph's edges as one
    :class:`~matplotlib.collections.LineCollection` (``gid="scskeleton_edges"``,
    one segment per undirected edge), its nodes as small dots, the root(s)
    (``uns[key]["root"]``, set by ``sks.tl.root``) as a star and the branch
    points (``uns[key]["branch_points"]``, set by ``sks.tl.pseudotime``) as
    diamonds, with a legend for the three.

    Parameters
    ----------
    adata
        Annotated data matrix with a graph fitted, e.g. by ``sks.tl.ddrtree``.
    key
        Key of the graph in ``adata.uns`` (the learner's ``key_added``).
    basis
        ``obsm`` key to draw in, with or without the ``X_`` prefix (``"X_umap"``
        or ``"umap"``). Default: the graph's own space ``uns[key]["space"]``,
        where the nodes are ``uns[key]["nodes"]``. In any other basis each node
        sits at the assignment-weighted mean of its cells,
        ``(Rᵀ X_basis) / (Rᵀ 1)`` with ``R = obsm[f"{key}_assignment"]``; nodes
        without assignment mass are left out, together with their edges.
    color
        An ``.obs`` column or a gene name to colour the cells by; ``None``
        draws them in grey.
    components
        The two 0-based columns of the basis to plot. Default ``(0, 1)``.
    show_nodes
        Draw the nodes as small dots. The root and branch point markers are
        drawn either way.
    show_branch_points
        Mark the branch points. Turn it off for meshes such as ℓ1 graphs in
        many dimensions, where most nodes have three or more neighbours.
    edge_color
        Colour of edges and nodes.
    edge_width
        Line width of the edges, in points.
    size
        Cell marker size, as in :func:`scanpy.pl.embedding` (default
        ``120000 / n_cells``).
    ax
        Draw into this Axes instead of a new figure.
    show
        Show the figure; ``None`` shows it only when matplotlib is interactive.
    save
        File path to write the figure to (format from the extension).
    return_fig
        Return the Figure.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``palette``, ``cmap``,
        ``legend_loc``, ``title``, ``use_raw``, ``layer``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes when ``show=False``,
    else ``None``.
    """
    graph = read_graph(adata, key)
    space = graph.space if basis is None else resolve_basis(adata, basis)
    if space == graph.space:
        coordinates = cell_coordinates(adata, graph)
        first, second = check_components(components, coordinates.shape[1], space)
        nodes = graph.nodes[:, [first, second]]
        drawn = np.ones(graph.n_nodes, dtype=bool)
    else:
        coordinates = np.asarray(adata.obsm[space], dtype=float)
        first, second = check_components(components, coordinates.shape[1], space)
        nodes, drawn = _nodes_in_basis(adata, graph, coordinates[:, [first, second]])

    fig, ax, created = new_axes(ax)
    kwargs = dict(scatter_kwargs)
    if color is None and "title" not in kwargs:
        kwargs["title"] = key if graph.method in ("", key) else f"{key} ({graph.method})"
    scatter_cells(
        adata,
        coordinates,
        basis=space,
        components=(first, second),
        color=color,
        ax=ax,
        scatter_kwargs={"size": size, **kwargs},
    )
    _draw_graph(ax, adata.uns[key], graph, nodes, drawn, show_nodes=show_nodes,
                show_branch_points=show_branch_points, edge_color=edge_color, edge_width=edge_width)
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


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


def _draw_graph(ax: Axes, entry, graph: StoredGraph, nodes: np.ndarray, drawn: np.ndarray, *,
                show_nodes: bool, show_branch_points: bool, edge_color: str, edge_width: float) -> None:
    """Edges, nodes, root and branch points on top of the cells, with a legend."""
    upper = sparse.triu(graph.adjacency, k=1).tocoo()
    # Each undirected edge once; the diagonal (k=1 skips it) is no edge, and
    # explicitly stored zeros are not edges either.
    keep = (upper.data != 0) & drawn[upper.row] & drawn[upper.col]
    segments = np.stack([nodes[upper.row[keep]], nodes[upper.col[keep]]], axis=1)
    # zorder above scanpy's cells so the skeleton stays visible in dense regions.
    edges = LineCollection(segments, colors=edge_color, linewidths=edge_width, zorder=3)
    edges.set_gid(EDGES_GID)
    ax.add_collection(edges, autolim=True)
    ax.autoscale_view()

    marker_size = max(4.0 * edge_width, 2.0)
    handles = [Line2D([], [], color=edge_color, linewidth=edge_width, marker="o" if show_nodes else None,
                      markersize=marker_size ** 0.5 * 1.5, label=f"{graph.key} graph")]
    if show_nodes:
        ax.scatter(nodes[drawn, 0], nodes[drawn, 1], s=marker_size * 3, c=edge_color, linewidths=0, zorder=4)

    branch_points = np.asarray(entry.get("branch_points", []) if show_branch_points else [], dtype=int).ravel()
    branch_points = branch_points[drawn[branch_points]] if branch_points.size else branch_points
    if branch_points.size:
        handles.append(ax.scatter(
            nodes[branch_points, 0], nodes[branch_points, 1], s=60, marker="D", facecolors="white",
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
    labels = [handle.get_label() for handle in handles]
    ax.add_artist(Legend(ax, handles, labels, loc="best", fontsize="small", framealpha=0.8))
