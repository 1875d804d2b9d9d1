"""``pl.fates``: one panel per fate, the cells coloured by their probability of reaching it, or for three
fates a ternary view: each cell at the barycentric point of its three probabilities in a triangle."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._anndata.schema import fate_probabilities_key, read_graph, resolve_key
from ._docs import plot_doc
from ._figures import broadcast_panels, finish_panels, panel_colors, panel_grid, panel_titles
from ._labels import basis_label, obs_label
from ._scatter import plot_dimensions, scatter_cells
from ._tree import basis_coordinates, default_graph_label, draw_graph, gap_edges_of, nodes_in_panel

#: The colour bar's label in every panel.
FATE_LABEL = "fate probability"
#: The views ``kind=`` chooses between.
KINDS = ("panels", "ternary")
#: Corners of the ternary view's equilateral triangle (side 1): the first fate bottom left, the second
#: bottom right, the third on top; a cell sits at Σ p_i · corner_i.
TERNARY_CORNERS = np.array([[0.0, 0.0], [1.0, 0.0], [0.5, np.sqrt(3.0) / 2.0]])
#: gids of the ternary view's triangle and corner labels, for finding them in the Axes.
TRIANGLE_GID, CORNER_GID = "scskeleton_fate_triangle", "scskeleton_fate_corner"


@plot_doc
def fates(
    adata: AnnData,
    key: str | None = None,
    *,
    fates: str | Sequence[str] | None = None,
    kind: str = "panels",
    color: str | Sequence[str] | None = None,
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
    """The cells on a basis, one panel per fate, coloured by their probability of reaching it; or, for three
    fates, the cells in a triangle whose corners are the fates.

    Reads ``obsm[f"{key}_fate_probabilities"]`` and the fate names
    ``uns[key]["fates"]`` written by ``sks.tl.fate_probabilities``; nothing is
    recomputed.

    ``kind="panels"`` (default): one panel per fate on a basis. The colour
    scale runs from 0 to 1 in every panel, so panels compare, and its bar is
    labelled ``"fate probability"``. The graph is drawn as in :func:`tree`
    (under the cells, with a thin trace over them), and one legend of its marks (root,
    branch points) in the right margin of the first row's last panel.

    ``kind="ternary"``: for exactly three fates, each cell drawn at the
    barycentric point ``p₁ c₁ + p₂ c₂ + p₃ c₃`` of its three probabilities in
    an equilateral triangle whose corners ``c₁`` (bottom left), ``c₂``
    (bottom right) and ``c₃`` (top) are labelled with the fates' names, in
    the order of ``fates`` (default: of ``uns[key]["fates"]``). A cell certain
    of a fate sits on its corner, a cell torn between two on the side joining
    them, and an undecided cell (1/3 each) in the centre. The cells are
    coloured by ``color`` like :func:`tree` (an ``.obs`` column or a gene;
    a list for one panel each; ``None`` grey). With more than three fates,
    ``fates=[three names]`` draws those three with each cell's probabilities
    renormalised over them, ``p_i / (p₁ + p₂ + p₃)``: where the cell ends,
    given that it ends in one of the three. Cells with no probability on the
    three (NaN rows, cells of components without a root) are left out.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``sks.tl.fate_probabilities(adata, key)`` has run.
    {key_fitted}
    fates
        The fates to draw, by name (``uns[key]["fates"]``); default all. For
        ``kind="ternary"`` exactly three, in the order of the corners.
    kind
        ``"panels"`` (default): one panel per fate on a basis; ``"ternary"``:
        the triangle of three fates (see above). A ValueError says how many
        fates there are when they are not three.
    color
        ``kind="ternary"`` only: an ``.obs`` column or a gene name to colour
        the cells by, or a list of them for one panel each (as in
        :func:`scanpy.pl.embedding`); ``None`` draws them in grey. The panels
        are coloured by the probability itself.
    basis
        ``obsm`` key to draw in, with or without ``X_``; default the graph's
        own space, as in :func:`tree`. Panels only.
    components, dimensions
        The columns of the basis to plot, as in :func:`tree`: ``"1,2"`` (from 1,
        as in scanpy; a list or ``"all"`` for one panel each) or ``(0, 1)`` (from
        0). Several fates and several pairs go together panel by panel. Panels only.
    ncols
        Panels per row.
    show_tree
        Draw the graph's edges, root and branch points over the cells. Panels
        only (the triangle has no place for the graph's nodes).
    size
        Cell marker area in points², as in :func:`scanpy.pl.embedding`
        (default: ``120000 / n_cells`` kept within 0.5–60, as in :func:`~scskeleton.pl.tree`).
    cmap
        Colour map of the probabilities (panels) or of a continuous ``color``
        (ternary).
    title
        Title of each panel: one string for all, or one per panel. Default:
        ``"fate: "`` and the fate's name (its milestone, e.g. ``"fate: Ery"``);
        in the ternary view what ``color`` shows (e.g. ``"cell type"``), or
        ``"fate probabilities"`` without it.
    frameon
        Draw a frame (and axis labels) around each panel; ``None`` follows
        scanpy's setting. The triangle is drawn without one.
    ax
        Draw into this Axes (one panel only).
    {show_save_return}
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``vmin``, ``vmax``, ``colorbar_loc``, …).
        A probability gets a colour bar, not a legend, so ``legend_loc`` has nothing to place.

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several panels) when ``show=False``, else ``None``.

    Examples
    --------
    >>> sks.pl.fates(adata, "ddrtree")                                       # one panel per fate
    >>> sks.pl.fates(adata, "ddrtree", kind="ternary", color="cell_type")    # three fates in a triangle
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    name = fate_probabilities_key(key)
    if name not in adata.obsm or "fates" not in adata.uns[key]:
        raise KeyError(f"No fate probabilities for {key!r}; run sks.tl.fate_probabilities(adata, {key!r}) first.")
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {list(KINDS)}; got {kind!r}.")
    stored = [str(fate) for fate in adata.uns[key]["fates"]]
    chosen = stored if fates is None else [fates] if isinstance(fates, str) else list(fates)
    if not chosen:
        raise ValueError(f"fates is empty; name some of {stored}, or pass None for all.")
    unknown = [fate for fate in chosen if fate not in stored]
    if unknown:
        raise KeyError(f"No fate(s) {unknown} in {key!r}; fates: {stored}.")
    if kind == "ternary":
        given = [label for label, value in (("basis", basis), ("components", components),
                                            ("dimensions", dimensions)) if value is not None]
        if given:
            raise ValueError(f"{', '.join(given)} place the cells on a basis (kind='panels'); the ternary view "
                             "places them by their fate probabilities. Leave them out, or pass kind='panels'.")
        return _ternary(adata, key, stored, chosen, given_fates=fates is not None, color=color, ncols=ncols,
                        size=size, cmap=cmap, title=title, ax=ax, show=show, save=save, return_fig=return_fig,
                        scatter_kwargs=scatter_kwargs)
    if color is not None:
        raise ValueError("color= colours the cells of the ternary view (kind='ternary'); the panels are coloured "
                         "by the fate probability. Use sks.pl.tree(adata, key, color=...) to colour by it on a basis.")
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
    # one legend of the tree's marks (edges, root, branch points), right of the first row's last colour bar
    legend_panel = min(ncols, len(panels)) - 1
    for index, (panel, fate, pair, panel_title) in enumerate(zip(panels, chosen, pairs, panel_titles(title, len(chosen)))):
        scatter_cells(stand_in, coordinates, basis=space, dimensions=pair, color=fate, ax=panel,
                      scatter_kwargs=kwargs, title=f"fate: {fate}" if panel_title is None else panel_title,
                      axis_name=axis_name, colorbar_label=FATE_LABEL)
        if show_tree:
            nodes, drawn = placed[pair]
            draw_graph(panel, adata.uns[key], graph, nodes, drawn, show_nodes=False, show_branch_points=True,
                       edge_color="black", edge_width=1.0, gap_edges=gap_edges, label=default_graph_label(adata, key),
                       legend_loc="right margin" if index == legend_panel else None)
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def _ternary(
    adata: AnnData, key: str, stored: list[str], chosen: list[str], *, given_fates: bool, color, ncols: int,
    size, cmap: str, title, ax: Axes | None, show, save, return_fig: bool, scatter_kwargs: dict,
) -> Figure | Axes | list[Axes] | None:
    """The ternary view of :func:`fates`: each cell at the barycentric point of its three fate probabilities."""
    if len(chosen) != 3 or len(set(chosen)) != 3:
        if given_fates:
            problem = f"fates={chosen!r} names {len(set(chosen))} distinct fate(s)"
        else:
            problem = f"{key!r} has {len(stored)} fate(s), {stored}"
        hint = (f", e.g. fates={stored[:3]!r} (their probabilities renormalised to sum to 1)"
                if len(stored) > 3 else "")
        raise ValueError(f"A ternary plot needs exactly three fates, but {problem}. Draw one panel per fate with "
                         f"kind='panels', or choose three with fates=[three names]{hint}.")
    probabilities = np.asarray(adata.obsm[fate_probabilities_key(key)], dtype=float)[:, [stored.index(f)
                                                                                         for f in chosen]]
    total = probabilities.sum(axis=1)
    # renormalised over the three: the fate given that the cell ends in one of them (1 when they are all)
    kept = np.isfinite(total) & (total > 0)
    points = (probabilities[kept] / total[kept, None]) @ TERNARY_CORNERS
    cells = adata if kept.all() else adata[kept]  # a view: read, never written

    colors = panel_colors(color)
    fig, panels, created = panel_grid(len(colors), ncols=ncols, ax=ax, panel_size=(4.8, 4.2), what="colour")
    kwargs = {"size": size, "cmap": cmap, **scatter_kwargs, "frameon": False}
    for panel, name, panel_title in zip(panels, colors, panel_titles(title, len(colors))):
        if panel_title is None:
            panel_title = "fate probabilities" if name is None else obs_label(adata, name)
        scatter_cells(cells, points, basis="ternary", dimensions=(0, 1), color=name, ax=panel,
                      scatter_kwargs=kwargs, title=panel_title)
        _draw_triangle(panel, chosen)
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def _draw_triangle(ax: Axes, names: list[str]) -> None:
    """The triangle's sides under the cells and each fate's name outside its corner; no axes (they mean nothing)."""
    outline = np.vstack([TERNARY_CORNERS, TERNARY_CORNERS[:1]])
    ax.plot(outline[:, 0], outline[:, 1], color="black", linewidth=1.0, zorder=0.8, gid=TRIANGLE_GID)
    placement = (("right", "top"), ("left", "top"), ("center", "bottom"))
    nudge = np.array([[-0.03, -0.03], [0.03, -0.03], [0.0, 0.03]])
    for corner, offset, name, (ha, va) in zip(TERNARY_CORNERS, nudge, names, placement):
        ax.text(*(corner + offset), name, ha=ha, va=va, gid=CORNER_GID)
    ax.set_xlim(-0.15, 1.15)
    ax.set_ylim(-0.12, TERNARY_CORNERS[2, 1] + 0.12)
    ax.set_aspect("equal")
    ax.set_xlabel("")
    ax.set_ylabel("")
    ax.set_axis_off()
