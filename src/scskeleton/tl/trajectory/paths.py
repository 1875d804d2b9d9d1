"""``tl.path``: the cells on the way between two nodes of a stored graph, in order."""

from __future__ import annotations

import numbers

import pandas as pd
from anndata import AnnData

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_unique_obs_names
from ..._anndata.schema import (
    StoredGraph,
    cell_assignment,
    cell_projection,
    column_sums,
    member_cells,
    pseudotime_key,
    read_graph,
    resolve_key,
)
from ..._core.trees import trajectory as core
from .cell_groups import group_cells
from .milestones import (
    resolve_node,
)


def path(adata: AnnData, key: str | None = None, start=None, end=None) -> pd.DataFrame:
    """The cells on the shortest graph path between two nodes or two groups.

    Parameters
    ----------
    adata
        Annotated data matrix with a fitted graph.
    {key_fitted}
    start, end
        A node index, a milestone name (``"root"``, ``"tip 1"``, see
        :func:`milestones`), or ``(obs_key, value)`` for a group of cells,
        which stands for the node holding most of that group's assignment mass.

    Returns
    -------
    DataFrame indexed by cell name, ordered along the path, with columns
    ``position`` (distance from the start along the path), ``node`` (the cell's
    nearest node) and, when :func:`pseudotime` has run, ``pseudotime``.
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    check_unique_obs_names(adata, why="the cells of a path, indexed by name, could not be told apart")
    first = path_end(adata, graph, start, "start")
    last = path_end(adata, graph, end, "end")
    nodes_on_path = core.node_path(graph.adjacency, graph.nodes, first, last)
    projection = cell_projection(adata, graph)
    cells, position = core.cells_on_path(projection, nodes_on_path, graph.nodes)
    inside = member_cells(adata, key)[cells]  # a sub-trajectory leaves out the cells outside it
    cells, position = cells[inside], position[inside]
    frame = pd.DataFrame(
        {"position": position, "node": projection.edge_start[cells]},
        index=adata.obs_names[cells],
    )
    if pseudotime_key(key) in adata.obs:
        frame["pseudotime"] = adata.obs[pseudotime_key(key)].to_numpy()[cells]
    return frame


def path_end(adata: AnnData, graph: StoredGraph, end, which: str) -> int:
    """The node an end of a path stands for: a node index, a milestone name, or ``(obs_key, value)``, the
    node holding most of that group's assignment mass. ``which`` names the end in the error."""
    if isinstance(end, tuple):
        cells = group_cells(adata, end)
        return int(column_sums(cell_assignment(adata, graph.key), cells).argmax())
    if isinstance(end, str | numbers.Integral):
        return resolve_node(adata, graph.key, end, n_nodes=graph.n_nodes, what=f"{which} node")
    raise ValueError(f"{which} must be a node index, a milestone name or (obs_key, value); got {end!r}.")


fill_doc(path)
