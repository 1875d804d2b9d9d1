"""``pl.fates``: one panel per fate, the cells coloured by their probability of reaching it."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._schema import fate_probabilities_key, read_graph
from ._tree import draw_graph, gap_edges_of, graph_in_basis
from ._utils import basis_label, finish, panel_grid, panel_titles, scatter_cells, tidy_panels

#: The colour bar's label in every panel.
FATE_LABEL = "fate probability"


def fates(
    adata: AnnData,
    key: str = "ddrtree",
    *,
    fates: str | Sequence[str] | None = None,
    basis: str | None = None,
    components: Sequence[int] = (0, 1),
    ncols: int = 4,
    show_tree: bool = True,
    size: float | None = None,
    cmap: str = "viridis",
    title: str | Sequence[str] | None = None,
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | list[Axes] | None:
    """The cells on a basis, one panel per fate, coloured by their probability of reaching it.

    Reads ``obsm[f"{key}_fate_probabilities"]`` and the fate names
    ``uns[key]["fates"]`` written by ``sks.tl.fate_probabilities``; the colour
    scale runs from 0 to 1 in every panel, so panels compare, and its bar is
    labelled ``"fate probability"``. The graph is drawn as in :func:`tree`
    (under the cells, with a thin trace over them; no per-panel legend).

    Parameters
    ----------
    adata
        Annotated data matrix on which ``sks.tl.fate_probabilities(adata, key)`` has run.
    key
        Key of the graph, e.g. ``"ddrtree"``.
    fates
        The fates to draw, by name (``uns[key]["fates"]``); default all.
    basis
        ``obsm`` key to draw in, with or without ``X_``; default the graph's
        own space, as in :func:`tree`.
    components
        The two 0-based columns of the basis to plot. Default ``(0, 1)``.
    ncols
        Panels per row.
    show_tree
        Draw the graph's edges, root and branch points over the cells.
    size
        Cell marker size, as in :func:`scanpy.pl.embedding`.
    cmap
        Colour map of the probabilities.
    title
        Title of each panel: one string for all, or one per fate. Default:
        ``"fate: "`` and the fate's name (its milestone, e.g. ``"fate: Ery"``).
    frameon
        Draw a frame (and axis labels) around each panel; ``None`` follows
        scanpy's setting.
    ax
        Draw into this Axes (one fate only).
    show
        Show the figure; ``None`` shows it only when matplotlib is interactive.
    save
        File path to write the figure to (format from the extension).
    return_fig
        Return the Figure.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``vmin``, ``vmax``, ``colorbar_loc``, …).
        A probability gets a colour bar, not a legend, so ``legend_loc`` has nothing to place.

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several fates) when ``show=False``, else ``None``.
    """
    graph = read_graph(adata, key)
    name = fate_probabilities_key(key)
    if name not in adata.obsm or "fates" not in adata.uns[key]:
        raise KeyError(f"No fate probabilities for {key!r}; run sks.tl.fate_probabilities(adata, {key!r}) first.")
    stored = [str(fate) for fate in adata.uns[key]["fates"]]
    chosen = stored if fates is None else [fates] if isinstance(fates, str) else list(fates)
    if not chosen:
        raise ValueError(f"fates is empty; name some of {stored}, or pass None for all.")
    unknown = [fate for fate in chosen if fate not in stored]
    if unknown:
        raise KeyError(f"No fate(s) {unknown} in {key!r}; fates: {stored}.")
    space, coordinates, dims, nodes, drawn = graph_in_basis(adata, graph, basis, components)
    fig, panels, created = panel_grid(len(chosen), ncols=ncols, ax=ax, panel_size=(4.0, 3.6), what="fate")

    probabilities = np.asarray(adata.obsm[name], dtype=float)
    columns = pd.DataFrame(probabilities[:, [stored.index(f) for f in chosen]], index=adata.obs_names, columns=chosen)
    # the probabilities as obs columns of a stand-in, so that scatter_cells colours by them without touching adata
    stand_in = AnnData(obs=columns)
    gap_edges = gap_edges_of(adata.uns[key], graph)
    kwargs = {"size": size, "cmap": cmap, "vmin": 0.0, "vmax": 1.0, "frameon": frameon, **scatter_kwargs}
    axis_name = basis_label(adata, space)
    for panel, fate, panel_title in zip(panels, chosen, panel_titles(title, len(chosen))):
        scatter_cells(stand_in, coordinates, basis=space, components=dims, color=fate, ax=panel,
                      scatter_kwargs=kwargs, title=f"fate: {fate}" if panel_title is None else panel_title,
                      axis_name=axis_name, colorbar_label=FATE_LABEL)
        if show_tree:
            draw_graph(panel, adata.uns[key], graph, nodes, drawn, show_nodes=False, show_branch_points=True,
                       edge_color="black", edge_width=1.0, gap_edges=gap_edges, legend=False)
    tidy_panels(fig, panels, created=created)
    return finish(fig, panels[0] if len(panels) == 1 else panels, created=created, show=show, save=save,
                  return_fig=return_fig)
