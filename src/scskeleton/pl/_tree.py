"""``pl.tree``: cells and the learned graph in one scatter plot."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from scipy import sparse

from .._anndata.schema import StoredGraph, cell_assignment, cell_coordinates, read_graph, resolve_key
from ._docs import plot_doc
from ._edges import NODE_ZORDER, TRACE_ZORDER, draw_edges
from ._figures import broadcast_panels, finish, panel_colors, panel_grid, panel_titles, tidy_panels
from ._labels import method_name, milestone_names, obs_label, with_method
from ._legends import add_extra_legend, visible_legends
from ._scatter import plot_dimensions, resolve_basis, scatter_cells

#: The gid of the edge collection, so that code (and tests) can find the graph's edges.
EDGES_GID = "scskeleton_edges"
#: The gid of the thin trace of the edges drawn over the cells.
EDGES_TRACE_GID = "scskeleton_edges_trace"
#: The gid of the dashed collection of gap edges (``uns[key]["gap_edges"]``).
GAP_EDGES_GID = "scskeleton_gap_edges"
#: The gid of the support labels (``uns[key]["branch_support"]``).
SUPPORT_GID = "scskeleton_support"
#: Marker area (points²) of the root star and the branch point diamonds: visible at a glance, small enough
#: that the cells at a root tip or a fork still show around and through them.
ROOT_SIZE, BRANCH_POINT_SIZE = 150.0, 45.0
#: Opacity of the root star's gold fill: the cells beneath show through it.
ROOT_FILL_ALPHA = 0.35
#: Where a support label may go, in points from its node: every 22.5° (starting up-right, where a reader looks
#: first) on five rings, near before far (the fifth reaches past a dense fork: at 60 points a fork of 3,000
#: simulated cells drawn on PCs 3-4 had its label over 134 cells, at 84 over none).
SUPPORT_ANGLES = np.deg2rad(45.0 + 22.5 * np.arange(16))
SUPPORT_RADII = (16.0, 28.0, 42.0, 60.0, 84.0)
#: A label this far (points) from every cell and node covers none of them; farther is no better, nearer wins.
SUPPORT_CLEARANCE = 8.0
#: The white box's padding around a support label, as a share of its font size.
SUPPORT_PAD = 0.25
#: A support label nearer than this (points) to a node would cover its marker (the root star's arms included).
NODE_MARGIN = 6.0


@plot_doc
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
    graph_label: str | None = None,
    axis_name: str | None = None,
    legend_loc: str | None = "right margin",
    graph_legend_loc: str | None = "right margin",
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
    (``uns[key]["root"]``, set by ``sks.tl.root``) as a gold star with a
    translucent fill and the branch points (``uns[key]["branch_points"]``,
    set by ``sks.tl.pseudotime``) as hollow diamonds, both over the cells yet
    small and see-through enough that the cells beneath them show, with a
    legend for the three. Edges listed in ``uns[key]["gap_edges"]`` (E × 2
    node pairs), when present, are drawn dashed in a collection of their own
    (``gid="scskeleton_gap_edges"``) instead. When ``sks.tl.branch_support``
    has run, each branch point and leaf it scored is labelled with its
    support (``gid="scskeleton_support"``), named by its milestone when
    there are milestones (``"fork 1: 0.50"``), on a leader line to a spot
    clear of the cells, the nodes and the other labels; the legend says what
    the numbers are.

    Parameters
    ----------
    {adata_graph}
    {key_fitted}
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
        Write the support (``uns[key]["branch_support"]``, from
        ``sks.tl.branch_support``) next to each branch point and leaf, as a
        number in [0, 1]: the share of refits that find it. ``None``
        (default) writes it when it is present. Each label goes to the first
        of a few spots around its node (five rings of 16, 16–84 points out)
        that lies inside the axes, clear of the earlier labels and farthest
        from the cells and nodes, joined to the node by a thin line.
    edge_color
        Colour of edges and nodes.
    edge_width
        Line width of the edges, in points.
    size
        Cell marker area in points², as in :func:`scanpy.pl.embedding`.
        Default: scanpy's ``120000 / n_cells``, kept within 0.5–60 so that a
        small data set's cells do not hide the graph.
    ncols
        Panels per row when ``color`` or the column pairs are a list.
    title
        Title of the panel, or one per colour. Default: what the colour shows
        and the method, e.g. ``"cell type — DDRTree"`` or ``"DDRTree pseudotime"``;
        the method's name alone without ``color``.
    graph_label
        How the graph's legend entry names it. Default: the method
        (``"principal tree (RPG)"``), followed by the key when it was stored
        under a name of its own (``key_added="fresh"``: ``"DDRTree (fresh)"``);
        a key that is the method's name with a suffix (``"rpg_mpme"``) adds
        nothing a reader needs and is left out.
    axis_name
        Name of the basis on the axis labels, numbered by column:
        ``axis_name="projection YW"`` gives ``"projection YW 1"``. Default: the
        method for a learned basis (``"DDRTree 1"``), scanpy's names for
        common ones with scanpy's spelling (``"PC1"``, ``"UMAP1"``), else the ``obsm`` key without
        ``X_`` and underscores.
    {legend_loc_categories}
        It is titled by what the colour shows (``"cell type"``).
    graph_legend_loc
        Where the legend of the graph (edges, root, branch points, support)
        goes: ``"right margin"`` (default: outside the axes, on top of the
        legend of the categories or right of the colour bar, so that it covers
        neither the cells nor the support labels), a matplotlib location inside
        the axes (``"best"``, ``"upper left"``, …; the support labels keep
        clear of it) or ``None`` for none.
    frameon
        Draw a frame (and axis labels) around the panel; ``None`` follows
        scanpy's setting.
    ax
        Draw into this Axes instead of a new figure (one panel only).
    {show_save_return}
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

    colors = panel_colors(color)
    colors, pairs = broadcast_panels(colors, pairs, ("colours", "column pairs"))
    placed = {pair: nodes_in_panel(adata, graph, space, coordinates, pair) for pair in dict.fromkeys(pairs)}
    titles = panel_titles(title, len(colors))
    if graph_label is None:
        graph_label = default_graph_label(adata, key)
    support_handles = [] if support is None else [_support_handle(adata.uns[key]["branch_support"])]
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
            axis_name=axis_name,
        )
        nodes, drawn = placed[pair]
        draw_graph(panel, adata.uns[key], graph, nodes, drawn, show_nodes=show_nodes,
                   show_branch_points=show_branch_points, edge_color=edge_color, edge_width=edge_width,
                   gap_edges=gap_edges, label=graph_label, extra_handles=support_handles,
                   legend_loc=graph_legend_loc)
    tidy_panels(fig, panels, created=created)
    if support is not None:
        # placed last, once the panels have their final size: the labels keep clear of cells in points on screen
        names = milestone_names(adata.uns[key])
        for panel, pair in zip(panels, pairs):
            nodes, drawn = placed[pair]
            _draw_support(panel, nodes, drawn, *support, names=names, cells=coordinates[:, list(pair)])
    return finish(fig, panels[0] if len(panels) == 1 else panels, created=created, show=show, save=save,
                  return_fig=return_fig)


def default_graph_label(adata: AnnData, key: str) -> str:
    """The graph's legend entry: the method, with the key only when it says more than the method's name.

    ``"rpg_mpme"`` (RPG on the MPME embedding) is ``"principal tree (RPG)"``:
    the key merely repeats the method with a suffix that the title, not the
    legend, should explain. ``"fresh"`` stays ``"DDRTree (fresh)"``.
    """
    entry = adata.uns.get(key, {})
    method = str(entry.get("method", "")) if hasattr(entry, "get") else ""
    repeats_method = bool(method) and key.startswith(f"{method}_")
    return method_name(adata, key, with_key=not repeats_method)


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


def _support_handle(stored) -> Patch:
    """The legend entry that says what the support labels' numbers are."""
    get = stored.get if hasattr(stored, "get") else (lambda name: None)
    n_boot, fraction = get("n_boot"), get("fraction")
    # tl.branch_support refits on subsamples drawn without replacement: not bootstrap resamples
    refits = f"{int(n_boot)} refits" if n_boot is not None else "refits"
    on = f"on {float(fraction):.0%} subsamples" if fraction is not None else "on subsamples"
    return Patch(facecolor="white", edgecolor="0.6", label=f"support: share of {refits}\n{on} that find the fork or tip")


def _draw_support(ax: Axes, nodes: np.ndarray, drawn: np.ndarray, ids: np.ndarray, values: np.ndarray, *,
                  names: dict[int, str], cells: np.ndarray) -> None:
    """Each support as a boxed label, ``"fork 1: 0.50"``, on a leader line to its node (see :func:`_place_labels`).

    A fixed offset put the labels of close nodes on top of each other and the
    root star, and their boxes over the tips' cells. Placement works in points
    on screen, so it holds at any dpi.
    """
    to_points = 72.0 / ax.figure.dpi
    ax.autoscale_view()
    frame = ax.get_window_extent()
    data = ax.transData
    markers = data.transform(nodes[drawn]) * to_points
    obstacles = np.vstack([data.transform(cells[np.isfinite(cells).all(axis=1)]) * to_points, markers])
    # to the nearest point: a label cannot tell cells 1 pt apart, and piles of cells shrink to a few obstacles
    obstacles = np.unique(np.round(obstacles), axis=0)
    style = {"fontsize": "small", "color": "0.1"}
    # legends inside the axes (graph_legend_loc="best", ...) are taken as labels placed already: none goes under one
    boxes = [legend.get_window_extent() for legend in visible_legends(ax)]
    blocked = [np.array([box.x0, box.y0, box.x1, box.y1]) * to_points for box in boxes if box.overlaps(frame)]
    shown = [(node, f"{names[node]}: {value:.2f}" if node in names else f"{value:.2f}")
             for node, value in zip(ids.tolist(), values.tolist()) if drawn[node]]
    halves = []
    for _, text in shown:
        probe = ax.text(0, 0, text, **style)
        extent, fontsize = probe.get_window_extent(), probe.get_fontsize()
        probe.remove()
        # the text, the box's pad around it (SUPPORT_PAD of the font size) and a hair of room between boxes
        halves.append(np.array([extent.width, extent.height]) * to_points / 2 + SUPPORT_PAD * fontsize + 1.0)
    anchors = np.array([data.transform(nodes[node]) * to_points for node, _ in shown]).reshape(-1, 2)
    offsets = _place_labels(anchors, np.array(halves).reshape(-1, 2), markers, obstacles,
                            np.array([frame.x0, frame.y0, frame.x1, frame.y1]) * to_points, blocked=blocked)
    for (node, text), offset in zip(shown, offsets):
        ax.annotate(
            text, xy=(nodes[node, 0], nodes[node, 1]), xytext=tuple(offset), textcoords="offset points",
            ha="center", va="center", zorder=7, gid=SUPPORT_GID, annotation_clip=False, **style,
            bbox={"boxstyle": f"round,pad={SUPPORT_PAD}", "facecolor": "white", "edgecolor": "0.6", "alpha": 0.9,
                  "linewidth": 0.6},
            arrowprops={"arrowstyle": "-", "color": "0.35", "linewidth": 0.7, "shrinkA": 0, "shrinkB": 2},
        )


def _place_labels(anchors: np.ndarray, halves: np.ndarray, markers: np.ndarray, obstacles: np.ndarray,
                  frame: np.ndarray, *, blocked: Sequence[np.ndarray] = ()) -> np.ndarray:
    """Offsets (points) of labels of half-size ``halves`` from their ``anchors``, one at a time, greedily.

    Each label takes, of the spots :data:`SUPPORT_RADII` × :data:`SUPPORT_ANGLES`
    around its anchor, the one whose box overlaps the earlier labels least,
    then stays inside ``frame`` (x0, y0, x1, y1), then covers no node marker
    (within :data:`NODE_MARGIN`), then whose leader line crosses fewest
    earlier ones and passes over fewest other nodes (either pairs a number
    with the wrong node), then lies farthest (up to :data:`SUPPORT_CLEARANCE`)
    from every cell and node (``obstacles``), then is nearest its anchor. The
    labels are placed in three orders (as given, reversed, most crowded
    first); the order whose placement scores best on the same criteria, summed,
    wins. ``blocked`` boxes (x0, y0, x1, y1; legends inside the axes) count as
    labels placed before all others. Everything is in points; ties go to the
    earlier candidate, so the result is deterministic.
    """
    rings = np.array([(r * np.cos(a), r * np.sin(a)) for r in SUPPORT_RADII for a in SUPPORT_ANGLES])
    radius = np.hypot(rings[:, 0], rings[:, 1])
    n = len(anchors)
    if not n:
        return np.empty((0, 2))
    reach = SUPPORT_RADII[-1] + halves.max(axis=0) + SUPPORT_CLEARANCE
    # the scores that do not depend on the other labels, once per label
    fixed = []
    for anchor, half in zip(anchors, halves):
        centres = anchor + rings
        outside = (np.clip(frame[:2] - (centres - half), 0, None)
                   + np.clip(centres + half - frame[2:], 0, None)).sum(axis=1)
        # only the obstacles within reach of some candidate can matter, which keeps this cheap for many cells
        near = obstacles[(np.abs(obstacles - anchor) <= reach).all(axis=1)]
        clearance = np.minimum(_box_distance(centres, half, near), SUPPORT_CLEARANCE)
        covers_node = _box_distance(centres, half, markers) < NODE_MARGIN
        # a leader line over another node reads as pointing at it
        others = markers[(np.abs(markers - anchor) <= reach).all(axis=1) & (np.hypot(*(markers - anchor).T) > 1e-9)]
        fixed.append((outside, covers_node, _passes_near(anchor, centres, others, NODE_MARGIN), -clearance, radius))
    crowding = [int((np.abs(anchors - anchor) <= 2 * reach).all(axis=1).sum()) for anchor in anchors]
    orders = [list(range(n)), list(range(n))[::-1], sorted(range(n), key=lambda i: -crowding[i])]
    best_cost, best_choice = None, None
    for order in orders:
        choice, cost = _greedy_labels(order, anchors, halves, rings, fixed, blocked)
        if best_cost is None or cost < best_cost:
            best_cost, best_choice = cost, choice
    return rings[best_choice]


def _greedy_labels(order, anchors, halves, rings, fixed, blocked=()):
    """One greedy pass of :func:`_place_labels` in ``order``: each label's ring index and the summed scores.

    ``fixed`` holds each label's scores that do not depend on the others:
    (outside, covers a node, other nodes under the leader, -clearance, radius);
    ``blocked`` boxes are taken as labels placed before the first.
    """
    choice = np.zeros(len(anchors), dtype=int)
    total = np.zeros(6)
    boxes: list[np.ndarray] = [np.asarray(box, dtype=float) for box in blocked]  # earlier labels as (x0, y0, x1, y1)
    leaders: list[np.ndarray] = []  # earlier leader lines as (node x, node y, label x, label y)
    for i in order:
        anchor, half = anchors[i], halves[i]
        outside, covers_node, passes, clearance, radius = fixed[i]
        centres = anchor + rings
        lower, upper = centres - half, centres + half
        overlap = np.zeros(len(centres))
        for box in boxes:
            width = np.clip(np.minimum(upper[:, 0], box[2]) - np.maximum(lower[:, 0], box[0]), 0, None)
            height = np.clip(np.minimum(upper[:, 1], box[3]) - np.maximum(lower[:, 1], box[1]), 0, None)
            overlap += width * height
        crossings = passes.astype(float)
        for leader in leaders:
            crossings += _crosses(anchor, centres, leader[:2], leader[2:])
        scores = (overlap, outside, covers_node, crossings, clearance, radius)
        best = int(np.lexsort((np.arange(len(centres)), *scores[::-1]))[0])
        choice[i] = best
        total += [score[best] for score in scores]
        boxes.append(np.concatenate([lower[best], upper[best]]))
        leaders.append(np.concatenate([anchor, centres[best]]))
    return choice, tuple(total)


def _box_distance(centres: np.ndarray, half: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Distance from each box (``centres`` ± ``half``) to the nearest of ``points`` (inf when there is none)."""
    if not len(points):
        return np.full(len(centres), np.inf)
    gap = np.clip(np.abs(points[None, :, :] - centres[:, None, :]) - half, 0, None)
    return np.hypot(gap[..., 0], gap[..., 1]).min(axis=1)


def _passes_near(start: np.ndarray, ends: np.ndarray, points: np.ndarray, margin: float) -> np.ndarray:
    """How many of ``points`` lie within ``margin`` of each segment ``start``–``ends[i]``."""
    if not len(points):
        return np.zeros(len(ends))
    direction = ends - start  # M × 2
    length = np.maximum((direction ** 2).sum(axis=1), 1e-12)
    along = np.clip(((points[None, :, :] - start) * direction[:, None, :]).sum(axis=2) / length[:, None], 0, 1)
    nearest = start + along[..., None] * direction[:, None, :]
    return (np.hypot(*(points[None, :, :] - nearest).transpose(2, 0, 1)) < margin).sum(axis=1)


def _crosses(start: np.ndarray, ends: np.ndarray, other_start: np.ndarray, other_end: np.ndarray) -> np.ndarray:
    """Whether each segment ``start``–``ends[i]`` properly crosses the segment ``other_start``–``other_end``."""
    def side(a, b, c):  # sign of the turn a → b → c, for each row of whichever argument has rows
        return np.sign((b[..., 0] - a[..., 0]) * (c[..., 1] - a[..., 1])
                       - (b[..., 1] - a[..., 1]) * (c[..., 0] - a[..., 0]))

    return ((side(start, ends, other_start) * side(start, ends, other_end) < 0)
            & (side(other_start, other_end, start) * side(other_start, other_end, ends) < 0))


def draw_graph(ax: Axes, entry, graph: StoredGraph, nodes: np.ndarray, drawn: np.ndarray, *,
               show_nodes: bool, show_branch_points: bool, edge_color: str, edge_width: float,
               gap_edges: np.ndarray, legend_loc: str | None = "best", label: str | None = None,
               extra_handles: Sequence = ()) -> None:
    """Edges (gap edges dashed) and nodes under the cells with a thin trace over them, root and branch
    points on top, and a legend naming the graph ``label`` (default its key), then ``extra_handles``,
    placed by ``legend_loc`` (:func:`~scskeleton.pl._legends.add_extra_legend`; ``None``: none)."""
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
            nodes[branch_points, 0], nodes[branch_points, 1], s=BRANCH_POINT_SIZE, marker="D", facecolors="none",
            edgecolors=edge_color, linewidths=1.2, zorder=5, label="branch point",
        ))
    roots = graph.roots[drawn[graph.roots]]
    if roots.size:
        # over the cells so that it is found at once, but see-through: a root tip's cells show beneath it
        handles.append(ax.scatter(
            nodes[roots, 0], nodes[roots, 1], s=ROOT_SIZE, marker="*", facecolors=[to_rgba("gold", ROOT_FILL_ALPHA)],
            edgecolors=edge_color, linewidths=1.0, zorder=6, label="root" if roots.size == 1 else "roots",
        ))
    handles.extend(extra_handles)

    # inside the axes it leaves the other legends where they are: a plot drawn over this one (pl.path)
    # moves them when its own legend lands on them
    add_extra_legend(ax, handles, legend_loc, move_others=False)
