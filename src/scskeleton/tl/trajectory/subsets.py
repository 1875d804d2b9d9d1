"""``tl.subset_tree`` and ``tl.cleanup``: a smaller trajectory from a fitted one, as a result of its own."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.results import update_entry, write_graph
from ..._anndata.schema import (
    StoredGraph,
    cell_assignment,
    column_sums,
    fate_probabilities_key,
    is_cell_graph,
    latent_key,
    member_cells,
    phase_key,
    pseudotime_key,
    read_graph,
    resolve_key,
)
from ..._core.trees import trajectory as trajectory_core
from ..._core.trees.pruning import trim_branches
from ..._core.validation import check_positive
from .fates import fate_probabilities
from .milestones import node_names, resolve_node
from .phase import phase
from .pseudotime import pseudotime

#: Default of ``tl.cleanup(min_cells=)``: a terminal branch with fewer cells carries no trend or test.
MIN_BRANCH_CELLS = 10


def subset_tree(
    adata: AnnData,
    key: str | None = None,
    *,
    start=None,
    end=None,
    milestones: Sequence | None = None,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Keep a sub-trajectory of a fitted node graph as a result of its own.

    Give either ``start`` and ``end`` (the nodes on the path between them are
    kept) or ``milestones`` (the smallest subtree holding all of them: the
    union of the graph paths between them). The cells kept are those whose
    assignment lies mostly (its largest entry) on a kept node. Every cell of
    ``adata`` stays in it: the cells outside the sub-trajectory get an
    all-zero assignment row, and trajectory tools leave them out (NaN
    pseudotime, segment and milestone; no fate probabilities; not on any
    ``tl.path``), so results on the subtree and on the whole tree sit side by
    side, cell by cell. To work on the kept cells alone, slice them:
    ``adata[adata.obs[f"{key_added}_pseudotime"].notna()]``.

    The root(s) of ``key`` inside the sub-trajectory are carried over. When
    none is inside, the root becomes the kept node nearest the old root along
    the graph, where the trajectory enters the sub-trajectory (or ``start``
    when ``key`` has no root). When ``tl.pseudotime`` (and
    ``tl.fate_probabilities``) had run on ``key``, they are run on the result
    with the same pruning threshold; milestone names are the defaults again.
    A ``tl.phase`` is run again the same way round when the loop is kept whole
    (otherwise it is not carried over, with a warning).

    Parameters
    ----------
    adata
        Annotated data matrix with a node graph (``tl.ddrtree``, ``tl.rpg``,
        ``tl.rpg_l1``). The cell graphs of ``tl.mpme``, ``tl.spl``, ``tl.esl``
        and ``tl.fsl`` raise a ValueError: every cell is a node, so a subset
        needs its own fit.
    {key_fitted}
    start, end
        The ends of the path to keep: node indices or milestone names
        (``"root"``, ``"tip 2"``).
    milestones
        Instead of ``start``/``end``: two or more node indices or milestone
        names whose spanning subtree is kept.
    key_added
        Key of the result, different from ``key``; default ``f"{key}_subset"``.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following
    fields under ``key_added``, in the schema of every graph learner:

    ``adata.uns[key_added]``
        ``nodes``, ``adjacency``, ``space`` and the other fields of ``key``
        restricted to the kept nodes (``projection`` and ``mean`` unchanged);
        ``method`` as for ``key``; ``params`` those of ``key`` plus ``parent``
        and ``start``/``end`` or ``milestones``; ``root`` (see above).
    ``adata.obsm[f"{key_added}_assignment"]``
        The assignment restricted to the kept nodes, rows renormalised; zero
        rows for the cells outside.
    ``adata.obsm[f"X_{key_added}"]``
        The latent coordinates of ``key``, for learners with an embedding.

    and, when ``key`` had them, the fields of ``tl.pseudotime`` and
    ``tl.fate_probabilities``.
    """
    key = resolve_key(adata, key)
    graph = _node_graph(adata, key, "subset_tree")
    new_key = check_key(key_added, f"{key}_subset")
    if new_key == key:
        raise ValueError(f"key_added must differ from {key!r}: the sub-trajectory is written beside the whole one.")
    if milestones is None:
        if start is None or end is None:
            raise ValueError("Give start= and end= (a path), or milestones=[...] (a subtree).")
        ends = [start, end]
        what = dict(start=str(start), end=str(end))
    else:
        if start is not None or end is not None:
            raise ValueError("Give either start=/end= or milestones=, not both.")
        ends = [milestones] if isinstance(milestones, str | int) else list(milestones)
        what = dict(milestones=", ".join(str(m) for m in ends))
    terminals = [resolve_node(adata, key, value, n_nodes=graph.n_nodes, what="milestone") for value in ends]
    if len(set(terminals)) < 2:
        raise ValueError(f"A sub-trajectory needs two different ends; {ends!r} name(s) "
                         f"{node_names(adata, key, sorted(set(terminals)))}.")
    keep = np.zeros(graph.n_nodes, dtype=bool)
    keep[trajectory_core.spanned_nodes(graph.adjacency, graph.nodes, terminals)] = True

    assignment = cell_assignment(adata, key)
    nearest = np.asarray(assignment.argmax(axis=1)).ravel()
    inside = keep[nearest] & member_cells(adata, key)
    if not inside.any():
        raise ValueError(f"No cell of {key!r} is assigned mainly to the nodes between {ends!r}; pick other ends.")
    kept = assignment[:, keep]
    scale = np.zeros(adata.n_obs)
    scale[inside] = 1.0 / np.asarray(kept[inside].sum(axis=1), dtype=float).ravel()
    kept = sparse.csr_matrix(sparse.diags(scale) @ kept) if sparse.issparse(kept) else kept * scale[:, None]
    if sparse.issparse(kept):
        kept.eliminate_zeros()

    roots = _carried_roots(graph, keep, fallback=terminals[0])
    adata = adata.copy() if copy else adata
    _write_restricted(adata, key, new_key, graph, keep, kept, roots, dict(parent=key, **what), n_removed=0)
    logg.info(f"kept {int(keep.sum())} of {graph.n_nodes} nodes and {int(inside.sum())} of {adata.n_obs} cells "
              f"of {key!r} under {new_key!r}")
    return adata if copy else None


def cleanup(
    adata: AnnData,
    key: str | None = None,
    *,
    min_cells: float = MIN_BRANCH_CELLS,
    min_length: float = 0.0,
    copy: bool = False,
) -> AnnData | None:
    """Remove the terminal branches too small to analyse, and rewrite the result.

    A terminal branch runs from a tip up to, not including, the first branch
    point. It is removed when it holds fewer than ``min_cells`` cells (its
    nodes' summed assignment mass) or is shorter than ``min_length`` along the
    graph; branches go one at a time, the lightest first, so a fork whose
    branch went is judged again as part of a longer branch. Branches holding
    the root are kept. The cells of a removed branch join the node it hung
    from (their assignment mass moves there). Unlike ``tl.pseudotime``'s
    ``min_branch_nodes``, which only merges stubs into their neighbours'
    segments, the nodes are gone from the graph.

    Parameters
    ----------
    adata
        Annotated data matrix with a node graph (``tl.ddrtree``, ``tl.rpg``,
        ``tl.rpg_l1``, or a ``tl.subset_tree`` result).
    {key_fitted}
    min_cells
        Smallest number of cells a terminal branch must hold; default 10.
    min_length
        Shortest length (sum of edge lengths, in the units of the nodes'
        space) a terminal branch must have; default 0, no limit.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Rewrites the result
    under ``key`` without the removed nodes (fields as in
    :func:`subset_tree`; ``n_pruned`` counts the branches removed too, and
    ``params`` gains ``cleanup_min_cells`` and ``cleanup_min_length``). When
    ``tl.pseudotime`` (and ``tl.fate_probabilities``) had run, they run again,
    and a ``tl.phase`` the same way round (a loop has no terminal branch, so
    it stays whole); milestone names are the defaults again, and results of
    other tools keyed by segments (``tl.branch_test``, …) refer to the old
    trajectory.
    """
    key = resolve_key(adata, key)
    graph = _node_graph(adata, key, "cleanup")
    min_cells = check_positive("min_cells", min_cells, allow_zero=True, role="cells a terminal branch must hold")
    min_length = check_positive("min_length", min_length, allow_zero=True, role="length a terminal branch must have")
    assignment = cell_assignment(adata, key)
    trimmed = trim_branches(
        graph.adjacency, graph.nodes, column_sums(assignment), min_mass=min_cells, min_length=min_length,
        protected=graph.roots,
    )
    adata = adata.copy() if copy else adata
    if not trimmed.removed_branches:
        logg.info(f"no terminal branch of {key!r} holds fewer than {min_cells:g} cells or is shorter than "
                  f"{min_length:g}; nothing removed")
        return adata if copy else None
    index = np.cumsum(trimmed.keep) - 1
    handover = sparse.csr_matrix(
        (np.ones(graph.n_nodes), (np.arange(graph.n_nodes), index[trimmed.attach])),
        shape=(graph.n_nodes, int(trimmed.keep.sum())),
    )
    merged = assignment @ handover
    merged = sparse.csr_matrix(merged) if sparse.issparse(merged) else np.asarray(merged)
    _write_restricted(
        adata, key, key, graph, trimmed.keep, merged, index[graph.roots],
        dict(cleanup_min_cells=min_cells, cleanup_min_length=min_length), n_removed=trimmed.removed_branches,
    )
    logg.info(f"removed {trimmed.removed_branches} terminal branch(es), {int((~trimmed.keep).sum())} nodes, of {key!r}")
    return adata if copy else None


def _node_graph(adata: AnnData, key: str, tool: str) -> StoredGraph:
    graph = read_graph(adata, key)
    if is_cell_graph(adata, key):
        raise ValueError(
            f"tl.{tool} works on node graphs; {key!r} is a cell graph ({graph.method}), whose every cell is a "
            f"node. Fit a principal tree on its embedding, e.g. sks.tl.rpg(adata, use_rep={graph.space!r}), "
            "or refit on the cells you want."
        )
    return graph


def _carried_roots(graph: StoredGraph, keep: np.ndarray, *, fallback: int) -> np.ndarray:
    """The roots inside ``keep`` (renumbered); else the kept node nearest the old root; else ``fallback``."""
    index = np.cumsum(keep) - 1
    inside = graph.roots[keep[graph.roots]]
    if inside.size:
        return index[inside]
    if graph.roots.size:
        distance = trajectory_core.geodesic_from(graph.adjacency, graph.nodes, graph.roots).min(axis=0)
        distance = np.where(keep, distance, np.inf)
        if np.isfinite(distance).any():
            return index[[int(np.argmin(distance))]]
    return index[[fallback]]


def _write_restricted(
    adata: AnnData, key: str, new_key: str, graph: StoredGraph, keep: np.ndarray, assignment, roots: np.ndarray,
    extra_params: dict, *, n_removed: int,
) -> None:
    """Write ``key``'s result restricted to the ``keep`` nodes under ``new_key`` (which may be ``key``),
    then rerun the trajectory tools that had run on ``key``."""
    entry = adata.uns[key]
    index = np.cumsum(keep) - 1
    had_pseudotime = pseudotime_key(key) in adata.obs and "segments" in entry
    had_fates = fate_probabilities_key(key) in adata.obsm
    old_loop = np.asarray(entry["loop"], dtype=np.intp) if phase_key(key) in adata.obs and "loop" in entry else None
    min_branch_nodes = entry.get("min_branch_nodes")
    embedded = graph.space == latent_key(key)
    latent = np.asarray(adata.obsm[latent_key(key)]) if embedded else None
    gap_edges = None
    if "gap_edges" in entry:
        edges = np.asarray(entry["gap_edges"], dtype=np.int64).reshape(-1, 2)
        gap_edges = index[edges[keep[edges].all(axis=1)]]
    params = {name: value for name, value in entry["params"].items() if name != "version"}
    adjacency = graph.adjacency[keep][:, keep]
    write_graph(
        adata,
        new_key,
        method=str(entry["method"]),
        params={**params, **extra_params},
        nodes=graph.nodes[keep],
        space=latent_key(new_key) if embedded else graph.space,
        adjacency=adjacency,
        projection=entry.get("projection"),
        mean=entry.get("mean"),
        gap_edges=gap_edges,
        n_pruned=int(entry.get("n_pruned", 0)) + n_removed if "n_pruned" in entry or n_removed else None,
        lp_adjacency=sparse.csr_matrix(entry["lp_adjacency"])[keep][:, keep] if "lp_adjacency" in entry else None,
        objective=graph.objective,
        n_iter=int(entry.get("n_iter", 0)),
        converged=bool(entry.get("converged", True)),
        latent=latent,
        assignment=assignment,
    )
    if not roots.size:
        return
    # several roots in one component were allowed by tl.root(several=True); a restriction only splits components
    roots = trajectory_core.check_roots(adjacency, roots, several=True)
    update_entry(adata, new_key, root=int(roots[0]) if roots.size == 1 else roots.astype(np.int64))
    if had_pseudotime:
        pseudotime(adata, new_key, min_branch_nodes=min_branch_nodes)
        if had_fates:
            fate_probabilities(adata, new_key)
    if old_loop is not None:
        _rerun_phase(adata, key, new_key, old_loop, keep, index, adjacency, roots)


def _rerun_phase(adata, key, new_key, old_loop, keep, index, adjacency, roots) -> None:
    """Run ``tl.phase`` on the restricted graph the same way round as before, when its loop is whole."""
    if not keep[old_loop].all():
        if new_key == key:
            del adata.obs[phase_key(key)]
        logg.warning(f"The subset cuts the loop of {key!r}, so {new_key!r} gets no phase; the rest of the result is "
                     "usable. To keep the phase, keep every cell of the loop in the subset.")
        return
    loop = index[old_loop]
    try:
        start = int(trajectory_core.single_loop(adjacency, int(roots[0]))[0])
    except ValueError:  # the root now lies in a component without that loop
        start = -1
    if start not in loop:
        if new_key == key:
            del adata.obs[phase_key(key)]
        logg.warning(f"The root of {new_key!r} no longer reaches the loop of {key!r}, so {new_key!r} gets no phase; "
                     f"the rest of the result is usable. To get one, root {new_key!r} on the loop and run "
                     f"sks.tl.phase(adata, {new_key!r}).")
        return
    following = int(loop[(int(np.flatnonzero(loop == start)[0]) + 1) % loop.size])
    phase(adata, new_key, toward=following)


fill_doc(subset_tree)
fill_doc(cleanup)
