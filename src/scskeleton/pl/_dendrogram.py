"""``pl.dendrogram``: the trajectory as a subway map, pseudotime along one axis."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._anndata.schema import StoredGraph, pseudotime_key, read_graph, resolve_key, segment_key
from .._core.trees.trajectory import components
from ._docs import plot_doc
from ._edges import draw_edges
from ._figures import finish_panels, panel_colors, panel_grid, panel_titles, set_frame
from ._labels import method_name, milestone_names, obs_label
from ._scatter import scatter_cells

#: The gid of the segment lines (one per ``uns[key]["segments"]`` entry, in the order of the ids).
SEGMENTS_GID = "scskeleton_dendrogram_segments"
#: The gid of the connectors drawn at the forks, from a parent's end to each child's line.
CONNECTORS_GID = "scskeleton_dendrogram_connectors"
#: The gid of the dashed lines joining segments that end at one node (where two roots' stretches meet).
MEETINGS_GID = "scskeleton_dendrogram_meetings"
#: The gid of the milestone labels.
MILESTONES_GID = "scskeleton_dendrogram_milestones"
#: The panel's extent across the segments (inches) is never below this.
MIN_ACROSS = 3.0
#: Half the spread of the cells around their segment's line, in units of the gap between two leaves.
JITTER = 0.15
#: Fixed seed of the jitter: the same data give the same picture, pixel for pixel.
JITTER_SEED = 0


@dataclass(frozen=True)
class Layout:
    """Where each segment is drawn: its pseudotime span and its position across the pseudotime axis."""

    ids: list[str]  # segment ids, in the order of the lines
    start: np.ndarray  # pseudotime of each segment's first node
    end: np.ndarray  # pseudotime of each segment's last node
    position: np.ndarray  # across the pseudotime axis; leaves at 0, 1, 2, …
    parent: list[int | None]  # index of the parent segment, None for one that starts at a root
    meetings: list[list[int]]  # segments ending at one node: where the stretches from several roots meet


@plot_doc
def dendrogram(
    adata: AnnData,
    key: str | None = None,
    *,
    color: str | Sequence[str] | None = None,
    orientation: str = "horizontal",
    show_labels: bool = True,
    edge_color: str = "black",
    edge_width: float = 2.0,
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
    """The trajectory drawn as a dendrogram, with the cells along their segments.

    Each segment of ``uns[key]["segments"]`` is a straight line spanning its
    pseudotime, the pseudotime of its nodes measured along the tree from the
    root. Leaf segments lie side by side in depth-first order and each fork
    sits centred over its children, so no two branches overlap; connectors
    join a parent's end to its children. Milestones (``uns[key]["milestones"]``)
    are marked and named. Each cell sits on its segment
    (``obs[f"{key}_segment"]``) at its pseudotime (``obs[f"{key}_pseudotime"]``),
    with a small jitter across the line from a fixed seed; cells with NaN
    pseudotime (outside every rooted component) are not drawn. Several
    connected components are drawn one below the other; components without
    a root are left out. Several roots in one component
    (``tl.root(..., several=True)``) each start a tree at pseudotime 0; where
    the stretches measured from two roots meet, the segments that end there
    are joined by a dashed line.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
    color
        An ``.obs`` column or a gene name to colour the cells by, or a list of
        them for one panel each. Default: the segment (legend entries named by
        milestones, ``"root → fork 1"``).
    orientation
        ``"horizontal"``: pseudotime runs left to right; ``"vertical"``: top
        to bottom.
    show_labels
        Write each milestone's name next to it.
    edge_color
        Colour of the segment lines, connectors and milestone markers.
    edge_width
        Line width of the segments and connectors, in points.
    ncols
        Panels per row when ``color`` is a list.
    title
        Title of the panel, or one per colour. Default: what the colour shows,
        e.g. ``"cell type"``, ``"DDRTree segment"``.
    {legend_loc_categories}
    frameon
        Draw the box around the panel; ``None`` follows scanpy's setting. The
        pseudotime axis keeps its ticks and label either way.
    ax
        Draw into this Axes instead of a new figure (one colour only).
    {show_save_return}
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``size``, ``palette``, ``cmap``,
        ``use_raw``, ``layer``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of Axes for
    several colours) when ``show=False``, else ``None``.
    """
    key = resolve_key(adata, key)
    if orientation not in ("horizontal", "vertical"):
        raise ValueError(f"orientation must be 'horizontal' or 'vertical'; got {orientation!r}.")
    graph = read_graph(adata, key)
    entry = adata.uns[key]
    missing = [name for name in (pseudotime_key(key), segment_key(key)) if name not in adata.obs]
    if "segments" not in entry or missing:
        raise KeyError(
            f"No trajectory on {key!r} (adata.obs lacks {missing or 'nothing'}, segments in uns: "
            f"{'segments' in entry}); run sks.tl.pseudotime(adata, {key!r}) first "
            f"(after choosing a root with sks.tl.root)."
        )
    colors = panel_colors(color, default=segment_key(key), none_means="the segment")
    layout = segment_layout(entry, graph)
    coordinates = _cell_coordinates(adata, key, layout)
    line_end = _line_ends(coordinates, adata.obs[segment_key(key)], layout)
    # scanpy's embedding draws columns (first, second) as (x, y): swapping them turns the map.
    dims = (0, 1) if orientation == "horizontal" else (1, 0)

    # room for a line and its milestone label per segment; a map of three segments 1.8 inches high
    # crammed its labels against each other and the frame
    across = max(MIN_ACROSS, 1.0 + 0.45 * len(layout.ids))
    size = (6.4, across) if orientation == "horizontal" else (across + 1.5, 5.0)
    titles = panel_titles(title, len(colors))
    fig, panels, created = panel_grid(len(colors), ncols=ncols, ax=ax, panel_size=size, what="colour")
    for panel, name, panel_title in zip(panels, colors, titles):
        # scanpy's frameon=False would switch the axes off, and with them the pseudotime axis
        scatter_cells(adata, coordinates, basis="X_dendrogram", dimensions=dims, color=name, ax=panel,
                      scatter_kwargs={"legend_loc": legend_loc, **scatter_kwargs, "frameon": True},
                      title=obs_label(adata, name) if panel_title is None else panel_title)
        _draw_layout(panel, entry, graph, layout, dims, line_end=line_end, edge_color=edge_color,
                     edge_width=edge_width, show_labels=show_labels)
        _axes_labels(panel, f"{method_name(adata, key)} pseudotime", orientation)
        set_frame(panel, frameon)
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def segment_layout(entry, graph: StoredGraph) -> Layout:
    """Pseudotime span and position of every segment of a rooted tree or forest (any number of roots).

    A segment's parent is the one that ends at its first node (the first of
    them where several roots' stretches meet there; the others are listed in
    ``meetings``, as are segments that end at one meeting point). Node
    pseudotime is read off the stored nodes along the segments' paths (the
    sum of Euclidean edge lengths from the root, which is what
    ``tl.pseudotime`` measures on a tree), so the lines and the cells agree.
    """
    ids = sorted(entry["segments"], key=lambda name: (len(str(name)), str(name)))
    paths = [np.asarray(entry["segments"][name], dtype=np.intp).ravel() for name in ids]
    ends: dict[int, list[int]] = {}
    for index, path in enumerate(paths):
        ends.setdefault(int(path[-1]), []).append(index)
    parent = [ends.get(int(path[0]), [None])[0] for path in paths]
    meetings = [into for into in ends.values() if len(into) > 1]
    children: list[list[int]] = [[] for _ in paths]
    for index, up in enumerate(parent):
        if up is not None:
            children[up].append(index)

    roots = set(np.asarray(graph.roots).tolist())
    tops = [index for index, up in enumerate(parent) if up is None and int(paths[index][0]) in roots]
    lengths = [float(np.linalg.norm(np.diff(graph.nodes[path], axis=0), axis=1).sum()) for path in paths]
    start = np.full(len(paths), np.nan)
    end = np.full(len(paths), np.nan)
    position = np.full(len(paths), np.nan)
    next_leaf = 0.0

    meeting = {index for group in meetings for index in group}

    def meets(index: int) -> bool:
        return index in meeting or any(meets(child) for child in children[index])

    def place(index: int, begin: float, meeting_last: bool) -> float:
        # Depth-first, so the leaves under one fork get neighbouring positions and never interleave.
        # The branches that meet another root's go to the side facing that root's tree.
        nonlocal next_leaf
        start[index], end[index] = begin, begin + lengths[index]
        if children[index]:
            order = sorted(children[index], key=lambda child: meets(child) == meeting_last)
            below = [place(child, end[index], meeting_last) for child in order]
            position[index] = (min(below) + max(below)) / 2.0
        else:
            position[index], next_leaf = next_leaf, next_leaf + 1.0
        return position[index]

    if not tops:
        raise ValueError(f"No segment of {graph.key!r} starts at its root; rerun sks.tl.pseudotime(adata, {graph.key!r}).")
    component = components(graph.adjacency)
    for number, top in enumerate(tops):
        first_of_component = not number or component[paths[top][0]] != component[paths[tops[number - 1]][0]]
        if number and first_of_component:
            next_leaf += 1.0  # a blank row between components; roots of one component stay close
        place(top, 0.0, meeting_last=first_of_component)
    return Layout(ids=[str(name) for name in ids], start=start, end=end, position=position, parent=parent,
                  meetings=meetings)


def _cell_coordinates(adata: AnnData, key: str, layout: Layout) -> np.ndarray:
    """(pseudotime, position) of each cell; NaN, so not drawn, off every drawn segment or without pseudotime."""
    times = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
    segments = adata.obs[segment_key(key)]
    row_of = pd.Series(layout.position, index=layout.ids)
    rows = segments.astype(object).map(lambda s: row_of.get(str(s), np.nan) if pd.notna(s) else np.nan)
    rows = rows.to_numpy(dtype=float)
    jitter = np.random.default_rng(JITTER_SEED).uniform(-JITTER, JITTER, size=adata.n_obs)
    coordinates = np.column_stack([times, rows + jitter])
    coordinates[~np.isfinite(coordinates).all(axis=1)] = np.nan
    return coordinates


def _line_ends(coordinates: np.ndarray, segments: pd.Series, layout: Layout) -> np.ndarray:
    """Where each segment's line ends: at its last node, or further for a terminal segment whose cells
    lie beyond its tip (``tl.pseudotime`` adds their overhang), so that every cell sits on a line."""
    ends = layout.end.copy()
    has_child = {up for up in layout.parent if up is not None}
    labels = segments.astype(object).map(lambda s: str(s) if pd.notna(s) else None).to_numpy()
    for index, name in enumerate(layout.ids):
        if index in has_child:
            continue
        times = coordinates[labels == name, 0]
        times = times[np.isfinite(times)]
        if times.size:
            ends[index] = max(ends[index], float(times.max()))
    return ends


def _draw_layout(ax: Axes, entry, graph: StoredGraph, layout: Layout, dims: tuple[int, int], *,
                 line_end: np.ndarray, edge_color: str, edge_width: float, show_labels: bool) -> None:
    """Segment lines (to ``line_end``), fork connectors, milestone markers and names, over the cells."""
    drawn = np.isfinite(layout.position)

    def xy(points: np.ndarray) -> np.ndarray:  # (time, position) pairs in the panel's orientation
        return points[..., list(dims)]

    lines = np.stack([np.column_stack([layout.start, layout.position]),
                      np.column_stack([line_end, layout.position])], axis=1)[drawn]
    connectors = np.asarray([
        [[layout.end[up], layout.position[up]], [layout.start[child], layout.position[child]]]
        for child, up in enumerate(layout.parent) if up is not None and drawn[child]
    ]).reshape(-1, 2, 2)
    # under the cells, which sit on them, with a thin trace over them (see draw_edges)
    for segments, gid, width in ((lines, SEGMENTS_GID, edge_width), (connectors, CONNECTORS_GID, edge_width * 0.6)):
        draw_edges(ax, xy(segments), color=edge_color, width=width, gid=gid)
    # each segment's end is its length from its own root, so the ends that meet need not line up
    meetings = []
    for group in layout.meetings:
        group = sorted((index for index in group if drawn[index]), key=lambda index: layout.position[index])
        meetings += [[[layout.end[a], layout.position[a]], [layout.end[b], layout.position[b]]]
                     for a, b in zip(group[:-1], group[1:])]
    meetings = np.asarray(meetings, dtype=float).reshape(-1, 2, 2)
    draw_edges(ax, xy(meetings), color=edge_color, width=edge_width * 0.6, gid=MEETINGS_GID, linestyle="--")
    ax.autoscale_view()

    milestones = _milestone_points(entry, graph, layout)
    if not milestones:
        return
    points = xy(np.asarray([point for point, _ in milestones]))
    ax.scatter(points[:, 0], points[:, 1], s=30, facecolors="white", edgecolors=edge_color, linewidths=1.2,
               zorder=4)
    if show_labels:
        named = set()
        starts = {(float(layout.start[i]), float(layout.position[i])) for i, up in enumerate(layout.parent)
                  if up is None and drawn[i]}
        for (x, y), ((time, place), name) in zip(points, milestones):
            if name in named:  # segments that meet end at one node: its name once, at the first of its points
                continue
            named.add(name)
            # a root's name before it along pseudotime: after it, it ran into the name of a fork close by
            before = (float(time), float(place)) in starts and dims[0] == 0
            ax.annotate(name, xy=(x, y), xytext=(-3, 4) if before else (3, 4), textcoords="offset points",
                        ha="right" if before else "left", fontsize="small",
                        color=edge_color, zorder=5, gid=MILESTONES_GID,
                        bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.7})


def _milestone_points(entry, graph: StoredGraph, layout: Layout) -> list[tuple[tuple[float, float], str]]:
    """(time, position) and name of each drawn milestone: roots at their segment's start, the rest at its end."""
    names = milestone_names(entry)
    points = []
    for index, name in enumerate(layout.ids):
        if not np.isfinite(layout.position[index]):
            continue
        path = np.asarray(entry["segments"][name], dtype=np.intp).ravel()
        if layout.parent[index] is None and int(path[0]) in names:
            points.append(((layout.start[index], layout.position[index]), names[int(path[0])]))
        if int(path[-1]) in names:
            points.append(((layout.end[index], layout.position[index]), names[int(path[-1])]))
    return points


def _axes_labels(ax: Axes, label: str, orientation: str) -> None:
    """Ticks on the pseudotime axis only: the other one places branches, it measures nothing."""
    time_axis, other_axis = (ax.xaxis, ax.yaxis) if orientation == "horizontal" else (ax.yaxis, ax.xaxis)
    # scanpy removes the ticks of embeddings; pseudotime carries meaning.
    time_axis.set_major_locator(ticker.AutoLocator())
    time_axis.set_label_text(label)
    other_axis.set_major_locator(ticker.NullLocator())
    other_axis.set_label_text("")
    if orientation == "vertical" and not ax.yaxis_inverted():
        ax.invert_yaxis()  # the root on top, as dendrograms hang
