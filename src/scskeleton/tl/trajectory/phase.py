"""``tl.phase``: where each cell lies around the loop of a graph (a cell cycle, an oscillation)."""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.results import update_entry
from ..._anndata.schema import cell_projection, member_cells, phase_key, resolve_key
from ..._core.trees import trajectory as core
from .milestones import node_name
from .paths import path_end
from .pseudotime import rooted_graph


def phase(
    adata: AnnData,
    key: str | None = None,
    *,
    toward=None,
    copy: bool = False,
) -> AnnData | None:
    """Position of each cell around the loop of a graph, from its root, as a phase in [0, 1).

    Pseudotime measures the shortest way along the graph, so on a loop it runs
    both ways from the root and meets itself opposite; a cell cycle is read
    once round instead. The loop is the one independent cycle of the root's
    connected component (what remains of it once every branch and hair hanging
    off the loop is removed; ``tl.rpg_l1`` draws loops only around a hole in the
    cells). The phase starts at the loop node nearest the root (:func:`root`;
    for a loop ``root(adata, key, group=("phase", "G1"))`` picks the node in the
    middle of those cells) and grows with the length travelled round the loop,
    one turn being 1. Cells are placed as for :func:`pseudotime` (nearest node,
    then the closest point on its edges).

    Parameters
    ----------
    adata
        Annotated data matrix with a graph holding a loop and a root.
    key
        Key of the fitted graph in ``adata.uns``; ``None`` uses the only one fitted.
    toward
        Which way round: the phase runs from the root towards this node, milestone
        name or ``(obs_key, value)`` group (the node holding most of the group's
        assignment), reaching it within the first half turn; e.g. cells scored as S
        phase by ``sc.tl.score_genes_cell_cycle``. ``None``: from the loop's start
        towards its neighbour of lower node index (deterministic, not biological).
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.obs[f"{key}_phase"]``
        The phase in [0, 1); NaN for cells whose projection is off the loop (on a
        branch leaving it) or in another component.
    ``adata.uns[key]["loop"]``
        The loop's nodes in the order the phase runs through them, from the start.
    """
    key = resolve_key(adata, key)
    graph = rooted_graph(adata, key, why=" (the phase starts there)")
    start = int(graph.roots[0])
    if graph.roots.size > 1:
        logg.warning(
            f"{key!r} has {graph.roots.size} roots, so the phase starts at the first, {node_name(adata, key, start)}. "
            f"To start elsewhere, root the loop once: sks.tl.root(adata, {key!r}, node=...)."
        )
    target = None if toward is None else path_end(adata, graph, toward, "toward")
    start_time = logg.info(f"computing the phase around the loop of {key!r}")
    adata = adata.copy() if copy else adata
    loop, cells, phases = core.loop_phases(
        cell_projection(adata, graph), graph.adjacency, graph.nodes, start, toward=target
    )
    values = np.full(adata.n_obs, np.nan)
    values[cells] = phases
    values[~member_cells(adata, key)] = np.nan
    adata.obs[phase_key(key)] = values
    update_entry(adata, key, loop=loop.astype(np.int64))
    off = int(np.isnan(values).sum())
    logg.info(
        f"    finished ({loop.size} nodes round the loop; {off} cells off it get NaN)",
        time=start_time,
        deep=f"added\n    obs[{phase_key(key)!r}], uns[{key!r}]['loop']",
    )
    return adata if copy else None


fill_doc(phase)
