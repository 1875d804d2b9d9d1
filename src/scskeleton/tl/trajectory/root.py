"""``tl.root``: the root node(s) of a stored graph, from cells, a group, a node or a column's extreme."""

from __future__ import annotations

import numbers

import numpy as np
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from ..._anndata.docs import fill_doc
from ..._anndata.results import update_entry
from ..._anndata.schema import (
    StoredGraph,
    cell_assignment,
    cell_coordinates,
    column_sums,
    read_graph,
    resolve_key,
)
from ..._core.graphs import degrees
from ..._core.trees import trajectory as core
from ..._dask import is_dask
from .cell_groups import group_cells, group_labels, select_cells
from .milestones import (
    node_argument,
    node_name,
    node_names,
    resolve_node,
)


def root(
    adata: AnnData,
    key: str | None = None,
    *,
    node: int | None = None,
    cell: str | int | None = None,
    group: tuple[str, object] | None = None,
    obs_min: str | None = None,
    obs_max: str | None = None,
    per_component: bool = False,
    several: bool = False,
    copy: bool = False,
) -> AnnData | None:
    """Choose the root of the graph stored under ``key``.

    Give exactly one of ``node``, ``cell``, ``group``, ``obs_min``, ``obs_max``.
    ``node`` is used as given, and ``cell`` selects the node holding most of
    that cell's assignment. For ``group``, ``obs_min`` and ``obs_max`` the root
    becomes the leaf that fits the chosen cells best: among the leaves where
    those cells make up at least half of the assignment mass, the one with the
    smallest mean geodesic distance (along the graph) to them. When the cells
    reach no leaf, for example progenitors sitting at a fork, the root is the
    node in the middle of them (their geodesic medoid). Only the connected
    component that holds most of the cells is considered, unless
    ``per_component=True``.

    Graphs with several connected components (e.g. from ``tl.rpg_l1``) can
    have one root per component: pass several nodes, ``node=[3, 41]``, or
    ``per_component=True`` to root every component the chosen cells reach.
    ``tl.pseudotime`` then measures each cell from the root of its component.

    With ``several=True`` one component may hold several roots, e.g. two
    progenitor populations converging: ``node=[a, b]``, or one group per
    label, ``group=("cell_type", ["HSC", "CLP"])``. Each cell's pseudotime is
    then its distance to the nearest root, and where the distances from two
    roots meet inside a segment a ``"meeting"`` milestone ends it, so that
    pseudotime increases along every segment.

    Parameters
    ----------
    adata
        Annotated data matrix with a graph fitted, e.g. by ``tl.ddrtree``.
    {key_fitted}
        Node graphs (``tl.ddrtree``, ``tl.rpg``, ``tl.rpg_l1``) and the cell
        graphs of ``tl.mpme``, ``tl.spl``, ``tl.esl`` and ``tl.fsl`` (every
        cell is a node, at its embedding ``obsm[f"X_{key}"]``) both work.
    node
        Use this node as the root, as given (leaf or not): a node index or a
        milestone name of the current trajectory (e.g. ``"tip 2"``, see
        :func:`milestones`), or a list of them, at most one per connected
        component unless ``several=True``.
    cell
        A cell name (``adata.obs_names``) or integer position.
    group
        ``(obs_key, value)``: the cells of this category, e.g.
        ``("cell_type", "progenitor")``, or ``(obs_key, [value, ...])``: one
        root for the cells of each category (at most one per connected
        component unless ``several=True``).
    obs_min, obs_max
        An ``obs`` column or a gene: the cells in its lowest (highest) 5 %.
    per_component
        With ``group``/``obs_min``/``obs_max``: choose a root in every connected
        component that holds some of the chosen cells, not only in the one
        holding most of them.
    several
        Allow more than one root in a connected component; pseudotime is then
        measured from the nearest root. Default ``False``: two roots in one
        component raise a ValueError, since that is usually a mistake.
        ``pl.dendrogram`` then draws a tree from each root, joined where
        they meet.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.uns[key]["root"]``
        The root node index, or an array of node indices (one per root).
    ``adata.uns[key]["root_cells"]``
        Except with ``node=``: per root, the name of the cell pseudotime
        ``order="diffusion"`` starts from — the cell given, or of the chosen
        cells the one the tree places nearest the root.

    Run :func:`pseudotime` next.
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    given = {
        name: value
        for name, value in dict(node=node, cell=cell, group=group, obs_min=obs_min, obs_max=obs_max).items()
        if value is not None
    }
    if len(given) != 1:
        raise ValueError(
            "Give exactly one of node=, cell=, group=, obs_min=, obs_max= to choose the root; "
            f"got {sorted(given) or 'none'}."
        )
    (how, value), = given.items()
    if per_component and how in ("node", "cell"):
        raise ValueError("per_component=True applies to group=, obs_min= and obs_max=; pass several nodes as node=[...].")
    labels = group_labels(group) if how == "group" else None
    if per_component and labels is not None:
        raise ValueError("per_component=True takes one group label; with a list of labels each label gives one root.")
    if how == "node":
        chosen = core.check_roots(graph.adjacency, _node_indices(adata, key, node, graph.n_nodes), several=several)
        _warn_inner_roots(adata, graph, chosen, reason=f"node={node!r} was given")
    elif labels is not None:
        assignment = cell_assignment(adata, key)
        total_mass = column_sums(assignment)
        group_masses = [column_sums(assignment, group_cells(adata, (group[0], label))) for label in labels]
        chosen = core.check_roots(
            graph.adjacency,
            [core.root_node(graph.adjacency, graph.nodes, mass, total_mass) for mass in group_masses],
            several=several,
        )
        chosen = core.check_roots(graph.adjacency, _settle_on_stubs(adata, key, graph, chosen), several=several)
        _warn_inner_roots(adata, graph, chosen, reason=f"the cells of group={group!r} reach no tip")
    else:
        assignment = cell_assignment(adata, key)
        cells = select_cells(adata, how, value)
        group_mass = column_sums(assignment, cells)
        if how == "cell":
            chosen = _settle_on_stubs(adata, key, graph, np.array([group_mass.argmax()]))
            _warn_inner_roots(adata, graph, chosen, reason=f"cell {value!r} sits there")
        else:
            total_mass = column_sums(assignment)
            if per_component:
                chosen = core.root_nodes_per_component(graph.adjacency, graph.nodes, group_mass, total_mass)
            else:
                chosen = np.array([core.root_node(graph.adjacency, graph.nodes, group_mass, total_mass)])
            chosen = core.check_roots(graph.adjacency, _settle_on_stubs(adata, key, graph, chosen), several=True)
            _warn_inner_roots(adata, graph, chosen, reason=f"the cells of {how}={value!r} reach no tip")
    starts = _start_cells(adata, graph, chosen, how, value, labels)
    adata = adata.copy() if copy else adata
    # a single root stays a plain int, as before; several are stored as an int array (h5ad-safe)
    update_entry(adata, key, root=int(chosen[0]) if chosen.size == 1 else chosen.astype(np.int64))
    if starts is None:
        adata.uns[key].pop("root_cells", None)
    else:
        update_entry(adata, key, root_cells=np.asarray(adata.obs_names[starts], dtype=str))
    logg.info(f"root of {key!r} set to {node_names(adata, key, chosen)} (from {how}={value!r})")
    return adata if copy else None


def _start_cells(adata: AnnData, graph: StoredGraph, roots: np.ndarray, how: str, value, labels) -> np.ndarray | None:
    """The cell each root's pseudotime starts from with ``order="diffusion"``, one per root; ``None`` for ``node=``.

    ``cell=`` names it. For a group or an ``obs`` extreme it is, of the chosen
    cells (for a list of labels, of that label's cells), the one the tree
    places nearest the root: the trajectory starts at its earliest cell, not
    at the middle of the group.
    """
    if how == "node":
        return None
    if how == "cell":
        return select_cells(adata, how, value)
    coordinates = cell_coordinates(adata, graph)
    if is_dask(coordinates):  # order="diffusion" is not offered for chunked fits
        return None
    node_distance = core.geodesic_from(graph.adjacency, graph.nodes, roots)
    groups = [group_cells(adata, (value[0], label)) for label in labels] if labels is not None else None
    chosen = select_cells(adata, how, value) if groups is None else None
    starts = []
    for position in range(roots.size):
        cells = groups[position] if groups is not None else chosen
        located = core.project_onto_graph(np.asarray(coordinates[cells], dtype=float), graph.nodes, graph.adjacency)
        starts.append(int(cells[np.argmin(core.cell_geodesic(located, node_distance[position], graph.nodes))]))
    return np.array(starts, dtype=np.intp)


def _warn_inner_roots(adata: AnnData, graph: StoredGraph, roots: np.ndarray, *, reason: str) -> None:
    """Warn when a root is not a leaf: pseudotime would then run both ways from it."""
    degree = degrees(graph.adjacency)
    for node in roots[degree[roots] > 1]:
        leaf = core.nearest_leaf(graph.adjacency, graph.nodes, int(node))
        if leaf is None:  # a cycle: any node is as good a start as another
            continue
        logg.warning(
            f"The root of {graph.key!r} is {node_name(adata, graph.key, node)} ({reason}): not a tip of the graph, "
            f"so pseudotime will increase in both directions from it. If the trajectory starts at the nearest tip, "
            f"{node_name(adata, graph.key, leaf)}, root there: "
            f"sks.tl.root(adata, {graph.key!r}, node={node_argument(adata, graph.key, leaf)})."
        )


def _settle_on_stubs(adata: AnnData, key: str, graph: StoredGraph, roots: np.ndarray) -> np.ndarray:
    """Move each root that is not a leaf to a tip just past it when only short stubs leave it.

    Spanning trees over noisy nodes often reach a node or two past the
    earliest cells, so the node that holds them is not the tip. Of the
    stretches leaving a root (:func:`~scskeleton._core.trees.trajectory.arms`),
    a *stub* ends in a leaf, passes no branch point and is at most
    :data:`~scskeleton._core.trees.trajectory.STUB_WIDTHS` noise widths long,
    the width read from the cells on it along it
    (:func:`~scskeleton._core.trees.trajectory.stub_width`). When all
    stretches but one are stubs, the trajectory starts here: the root moves
    to the nearest stub's tip, and the move is logged. A root with two or more
    longer stretches (at a fork, or inside a branch) stays, and is warned about.
    """
    degree = degrees(graph.adjacency)
    settled = roots.copy()
    for position, node in enumerate(roots):
        if degree[node] <= 1:
            continue
        stubs, others = [], 0
        for arm in core.arms(graph.adjacency, int(node)):
            length = core.stub_length(graph.nodes, arm)
            if degree[arm[-1]] == 1 and length <= core.STUB_WIDTHS * _stretch_width(adata, key, graph, arm):
                stubs.append((length, int(arm[-1])))
            else:
                others += 1
        if stubs and others <= 1:
            length, tip = min(stubs)
            settled[position] = tip
            logg.info(
                f"root of {key!r} moved from {node_name(adata, key, node)} to {node_name(adata, key, tip)}, the tip "
                f"just past it ({length:.3g} away, within {core.STUB_WIDTHS:g} noise widths of the cells there)"
            )
    return settled


def _stretch_width(adata: AnnData, key: str, graph: StoredGraph, path: np.ndarray) -> float:
    """The cells' noise width along a node path (:func:`~scskeleton._core.trees.trajectory.stub_width`),
    read from the cells with assignment mass on it."""
    weights = cell_assignment(adata, key)[:, path]
    if is_dask(weights):
        weights = weights.compute()
    weights = weights.toarray() if sparse.issparse(weights) else np.asarray(weights, dtype=float)
    cells = np.flatnonzero(weights.sum(axis=1) > 0)
    if not cells.size:
        return 0.0
    points = cell_coordinates(adata, graph)[cells]
    if is_dask(points):
        points = points.compute()
    return core.stub_width(np.asarray(points, dtype=float), weights[cells], graph.nodes, path)


def _node_indices(adata: AnnData, key: str, node, n_nodes: int) -> np.ndarray:
    """``node=`` as an array of valid node indices: a node index or milestone name, or a non-empty list of them."""
    values = [node] if isinstance(node, str | numbers.Integral) else node
    try:
        values = list(values)
    except TypeError:
        values = [node]
    if not values:
        raise ValueError(f"node must be a node index or milestone name, or a non-empty list of them; got {node!r}.")
    return np.asarray([resolve_node(adata, key, value, n_nodes=n_nodes) for value in values], dtype=np.intp)


fill_doc(root)
