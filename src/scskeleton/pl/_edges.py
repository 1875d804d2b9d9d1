"""Lines of a graph drawn with the cells: under them, so that no cell hides, with a thin trace over them."""

from __future__ import annotations

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection

#: Where the graph's edges go: under the cells (scanpy draws cells at zorder 1), so no cell hides.
EDGE_ZORDER = 0.8
#: Nodes as small dots, also under the cells.
NODE_ZORDER = 0.9
#: A thin, translucent trace of the edges over the cells, so the skeleton stays visible where cells are dense.
TRACE_ZORDER = 1.5
#: Width of that trace relative to the edges, and its opacity.
TRACE_WIDTH, TRACE_ALPHA = 0.4, 0.5


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
