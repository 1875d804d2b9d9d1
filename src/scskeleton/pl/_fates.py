"""``pl.fates``: one panel per fate, the cells coloured by their probability of reaching it."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._schema import fate_probabilities_key, read_graph, resolve_key
from ._tree import basis_coordinates, draw_graph, gap_edges_of, nodes_in_panel
from ._utils import (
    basis_label,
    broadcast_panels,
    finish,
    panel_grid,
    panel_titles,
    plot_dimensions,
    scatter_cells,
    tidy_panels,
)

#: The colour bar's label in every panel.
FATE_LABEL = "fate probability"


def fates(
    adata: AnnData,
    key: str | None = None,
    *,
    fates: str | Sequence[str] | None = None,
    basis: str | None = None,
    components: str | Sequence[str] | None = None,
    dimensions: Sequence[int] | Sequence[Sequence[int]] | None = None,
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
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
    fates
        The fates to draw, by name (``uns[key]["fates"]``); default all.
    basis
        ``obsm`` key to draw in, with or without ``X_``; default the graph's
        own space, as in :func:`tree`.
    components, dimensions
        The columns of the basis to plot, as in :func:`tree`: ``"1,2"`` (from 1,
        as in scanpy; a list or ``"all"`` for one panel each) or ``(0, 1)`` (from
        0). Several fates and several pairs go together panel by panel.
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
        Draw into this Axes (one panel only).
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
    key = resolve_key(adata, key)
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
    space, coordinates = basis_coordinates(adata, graph, basis)
    pairs = plot_dimensions(components, dimensions, n_columns=coordinates.shape[1], basis=space)
    shown = list(dict.fromkeys(chosen))
    chosen, pairs = broadcast_panels(chosen, pairs, ("fates", "column pairs"))
    placed = {pair: nodes_in_panel(adata, graph, space, coordinates, pair) for pair in dict.fromkeys(pairs)} \
        if show_tree else {}
    fig, panels, created = panel_grid(len(chosen), ncols=ncols, ax=ax, panel_size=(4.0, 3.6),
                                      what="fate or column pair")

    probabilities = np.asarray(adata.obsm[name], dtype=float)
    columns = pd.DataFrame(probabilities[:, [stored.index(f) for f in shown]], index=adata.obs_names, columns=shown)
    # the probabilities as obs columns of a stand-in, so that scatter_cells colours by them without touching adata
    stand_in = AnnData(obs=columns)
    gap_edges = gap_edges_of(adata.uns[key], graph)
    kwargs = {"size": size, "cmap": cmap, "vmin": 0.0, "vmax": 1.0, "frameon": frameon, **scatter_kwargs}
    axis_name = basis_label(adata, space)
    for panel, fate, pair, panel_title in zip(panels, chosen, pairs, panel_titles(title, len(chosen))):
        scatter_cells(stand_in, coordinates, basis=space, dimensions=pair, color=fate, ax=panel,
                      scatter_kwargs=kwargs, title=f"fate: {fate}" if panel_title is None else panel_title,
                      axis_name=axis_name, colorbar_label=FATE_LABEL)
        if show_tree:
            nodes, drawn = placed[pair]
            draw_graph(panel, adata.uns[key], graph, nodes, drawn, show_nodes=False, show_branch_points=True,
                       edge_color="black", edge_width=1.0, gap_edges=gap_edges, legend=False)
    tidy_panels(fig, panels, created=created)
    return finish(fig, panels[0] if len(panels) == 1 else panels, created=created, show=show, save=save,
                  return_fig=return_fig)
