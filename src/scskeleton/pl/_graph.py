"""``pl.adjacency`` and ``pl.convergence``: the stored graph and its fit."""

from __future__ import annotations

import os

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.colors import ListedColormap, to_rgba
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.patches import Patch
from mpl_toolkits.axes_grid1 import make_axes_locatable
from scipy import sparse
from scipy.sparse import csgraph

from .._anndata.schema import StoredGraph, cell_assignment, read_graph, resolve_key
from ._colors import NA_COLOR, category_colors
from ._docs import plot_doc
from ._figures import finish, new_axes
from ._labels import method_name, obs_label

#: Node labels are written on the axes only up to this many nodes; beyond, they are unreadable.
MAX_NODE_LABELS = 30
#: The gid of the "edge / no edge" legend of an unweighted adjacency.
EDGE_LEGEND_GID = "scskeleton_adjacency_legend"


@plot_doc
def adjacency(
    adata: AnnData,
    key: str | None = None,
    *,
    order: str = "tree",
    groupby: str | None = None,
    cmap: str = "Greys",
    title: str | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | None:
    """Heatmap of the K × K node adjacency ``uns[key]["adjacency"]``.

    Nodes are ordered depth-first from the root (``uns[key]["root"]``, node 0
    when no root is set; further connected components follow, each from its
    lowest node), so a tree shows up as a band along the diagonal with one
    off-diagonal entry per branch. A weighted graph gets a colour bar of the
    edge weights; an unweighted one (every edge of the same weight, as the
    trees of DDRTree and RPG) two colours and a legend, "edge" and "no edge"
    (``gid="scskeleton_adjacency_legend"``).

    Parameters
    ----------
    {adata_graph}
    {key_fitted}
    order
        ``"tree"``: depth-first order from the root. ``"group"``: nodes sorted
        by their dominant ``groupby`` category, then by tree order (needs
        ``groupby``).
    groupby
        A categorical ``.obs`` column. Each node gets the category holding most
        of its assignment mass (``Rᵀ onehot``); a coloured strip along the
        heatmap marks it. Nodes without mass are grey and come last.
    cmap
        Colormap of the edge weights; an unweighted graph's edges take its darkest colour.
    title
        Title of the plot. Default: the method, e.g. ``"DDRTree adjacency"``;
        the x axis says how the nodes are ordered.
    {ax_new}
    {show_save_return}

    Returns
    -------
    {returns_axes}
    """
    key = resolve_key(adata, key)
    if order not in ("tree", "group"):
        raise ValueError(f"order must be 'tree' or 'group'; got {order!r}.")
    if order == "group" and groupby is None:
        raise ValueError("order='group' needs groupby=<categorical .obs column>.")
    graph = read_graph(adata, key)
    start = graph.root if graph.root is not None else 0
    position = tree_order(graph.adjacency, start)
    if groupby is not None:
        groups, labels, colors = _dominant_groups(adata, graph, groupby)
        if order == "group":
            # -1 (no mass) sorts last; lexsort's last key is the primary one.
            group_rank = np.where(groups < 0, len(labels), groups)[position]
            position = position[np.lexsort((np.arange(position.size), group_rank))]
    matrix = graph.adjacency.toarray()[np.ix_(position, position)]  # K is small: dense only to draw
    weights = graph.adjacency.data[graph.adjacency.data != 0]
    unweighted = weights.size == 0 or np.ptp(weights) == 0

    fig, ax, created = new_axes(ax, figsize=(5.5, 5.0))
    colormap = plt.get_cmap(cmap)
    if unweighted:
        edge_color = colormap(1.0)
        image = ax.imshow((matrix != 0).astype(float), cmap=ListedColormap(["white", edge_color]), vmin=0, vmax=1,
                          interpolation="nearest")
    else:
        image = ax.imshow(matrix, cmap=colormap, vmin=0, interpolation="nearest")
    k = graph.n_nodes
    start_name = "the root" if graph.root is not None else f"node {start}"
    described = (f"in tree order from {start_name}" if order == "tree"
                 else f"grouped by {obs_label(adata, groupby)}, then in tree order")
    if title is None:
        title = f"{method_name(adata, key)} adjacency"
    ax.set_title(title)
    labelled = k <= MAX_NODE_LABELS
    ticks = np.arange(k)
    ax.set_xticks(ticks if labelled else [], [str(n) for n in position] if labelled else [])
    ax.set_yticks(ticks if labelled else [], [str(n) for n in position] if labelled else [])
    ax.set_xlabel(f"{k} nodes, {described}" if not labelled else f"nodes {described}")

    divider = make_axes_locatable(ax)
    if unweighted:
        handles = [Patch(facecolor=edge_color, edgecolor="0.5", label="edge"),
                   Patch(facecolor="white", edgecolor="0.5", label="no edge")]
        legend = Legend(ax, handles, [h.get_label() for h in handles], loc="upper left", bbox_to_anchor=(1.02, 1.0),
                        fontsize="small", frameon=False)
        legend.set_gid(EDGE_LEGEND_GID)
        ax.add_artist(legend)
        legend.set_clip_on(False)  # add_artist clips to the axes; outside them it would be cut off when saved
    else:
        cax = divider.append_axes("right", size="4%", pad=0.1)
        fig.colorbar(image, cax=cax, label="edge weight")
    if groupby is not None:
        ordered = groups[position]
        rgba = np.array([to_rgba(colors[g]) if g >= 0 else to_rgba(NA_COLOR) for g in ordered])
        # Strips left of and above the heatmap, in the same node order as its rows and columns.
        left = divider.append_axes("left", size="4%", pad=0.05)
        left.imshow(rgba[:, None, :], aspect="auto", interpolation="nearest")
        top = divider.append_axes("top", size="4%", pad=0.05)
        top.imshow(rgba[None, :, :], aspect="auto", interpolation="nearest")
        for strip in (left, top):
            strip.set_xticks([])
            strip.set_yticks([])
        if labelled:
            # Move the node labels outside the strips, where they can be read.
            ax.tick_params(labelleft=False)
            left.set_yticks(ticks, [str(n) for n in position])
        ax.set_title("")
        top.set_title(title)
        if order == "group":
            bounds = np.flatnonzero(np.diff(ordered)) + 0.5
            for b in bounds:
                ax.axhline(b, color="tab:red", linewidth=0.6)
                ax.axvline(b, color="tab:red", linewidth=0.6)
        present = [g for g in range(len(labels)) if np.any(ordered == g)]
        handles = [Patch(facecolor=colors[g], label=str(labels[g])) for g in present]
        if np.any(ordered < 0):
            handles.append(Patch(facecolor=NA_COLOR, label="no cells"))
        # Below the heatmap: the right side already holds the colorbar.
        ax.legend(handles=handles, title=obs_label(adata, groupby), loc="upper center",
                  bbox_to_anchor=(0.5, -0.16 if labelled else -0.1),
                  ncol=min(len(handles), 4), fontsize="small", frameon=False)
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


@plot_doc
def convergence(
    adata: AnnData,
    key: str | None = None,
    *,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    log: bool = False,
    title: str | None = None,
) -> Figure | Axes | None:
    """Objective value per iteration of the solver behind ``adata.uns[key]`` (any scskeleton learner).

    Titled by the method and the outcome, e.g. ``"DDRTree: converged after 12 iterations"``.

    Parameters
    ----------
    {adata_graph}
    {key_fitted}
    {ax_new}
    {show_save_return}
    log
        Logarithmic y axis; needs a positive objective.
    title
        Title of the plot, instead of the method and the outcome.

    Returns
    -------
    {returns_axes}
    """
    key = resolve_key(adata, key)
    if key not in adata.uns or "objective" not in adata.uns[key]:
        raise KeyError(
            f"adata.uns[{key!r}] stores no objective; fit a scskeleton learner first (or pass the key_added "
            "you used)."
        )
    entry = adata.uns[key]
    objective = np.asarray(entry["objective"], dtype=float).ravel()
    if objective.size == 0:
        raise KeyError(f"adata.uns[{key!r}] stores no objective; refit with a scskeleton learner.")
    if log and not np.all(objective[np.isfinite(objective)] > 0):
        raise ValueError("log=True needs a positive objective; this one has values ≤ 0. Use log=False.")

    fig, ax, created = new_axes(ax)
    iterations = np.arange(1, objective.size + 1)
    ax.plot(iterations, objective, marker="o", markersize=4)
    if log:
        ax.set_yscale("log")
    ax.set_xlabel("iteration")
    ax.set_ylabel("objective")
    ax.xaxis.get_major_locator().set_params(integer=True)  # iterations are whole numbers
    method = method_name(adata, key)
    count = f"{objective.size} iteration{'s' if objective.size != 1 else ''}"
    if title is None and "converged" in entry:
        state = "converged" if bool(entry["converged"]) else "not converged"
        title = f"{method}: {state} after {count}"
    elif title is None:
        title = f"{method}: {count}"
    ax.set_title(title)
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def tree_order(adjacency: sparse.spmatrix, start: int) -> np.ndarray:
    """All nodes in depth-first order from ``start``; other components follow from their lowest node."""
    k = adjacency.shape[0]
    seen = np.zeros(k, dtype=bool)
    order: list[np.ndarray] = []
    for first in [start, *range(k)]:
        if seen[first]:
            continue
        visited = csgraph.depth_first_order(adjacency, first, directed=False, return_predecessors=False)
        seen[visited] = True
        order.append(visited)
    return np.concatenate(order).astype(int)


def _dominant_groups(adata: AnnData, graph: StoredGraph, groupby: str) -> tuple[np.ndarray, list, list]:
    """Each node's category with the most assignment mass (-1: none), the categories and their colours."""
    if groupby not in adata.obs.columns:
        raise KeyError(f"{groupby!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    column = adata.obs[groupby]
    if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column) \
            and not isinstance(column.dtype, pd.CategoricalDtype):
        raise ValueError(f"groupby={groupby!r} is numeric; pass a categorical .obs column.")
    values = pd.Categorical(column.astype(str) if pd.api.types.is_bool_dtype(column) else column)
    labels = list(values.categories)
    has_group = values.codes >= 0
    onehot = sparse.csr_matrix(
        (np.ones(has_group.sum()), (np.flatnonzero(has_group), values.codes[has_group])),
        shape=(adata.n_obs, len(labels)),
    )
    mass = onehot.T @ cell_assignment(adata, graph.key)  # groups × nodes, from sparse one-hot rows
    mass = np.asarray(mass.todense() if sparse.issparse(mass) else mass).T
    groups = np.where(mass.sum(axis=1) > 0, mass.argmax(axis=1), -1)
    return groups, labels, category_colors(adata, groupby, labels)
