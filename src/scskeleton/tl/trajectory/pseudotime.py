"""``tl.root``, ``tl.pseudotime`` and ``tl.path``: trajectories on any stored graph."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
import scanpy as sc
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from ..._anndata.inputs import check_unique_obs_names, stored_neighbors
from ..._anndata.results import update_entry
from ..._anndata.schema import (
    StoredGraph,
    cell_assignment,
    cell_coordinates,
    cell_projection,
    column_sums,
    is_cell_graph,
    member_cells,
    milestone_key,
    pseudotime_key,
    read_graph,
    resolve_key,
    segment_key,
)
from ..._core.cellgraphs.diffusion import (
    diffusion_components,
    lengths_in,
    multiscale_space,
    neighbour_distances,
)
from ..._core.graphs import degrees
from ..._core.trees import trajectory as core
from ..._core.trees.cell_order import segment_geodesic
from ..._core.validation import check_integer
from ..._dask import is_dask
from .fates import clear_fates
from .milestones import (
    default_names,
    milestone_entry,
    milestone_order,
    node_argument,
    node_name,
    node_names,
    resolve_node,
)

#: ``obs_min`` / ``obs_max`` pick the root near the cells in this extreme quantile.
EXTREME_QUANTILE = 0.05
#: Neighbours per cell in the diffusion space when the stored graph does not say how many it used (scanpy's default).
DEFAULT_NEIGHBORS = 15


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
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
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
    copy
        Return a copy instead of writing to ``adata``.

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
    labels = _group_labels(group) if how == "group" else None
    if per_component and labels is not None:
        raise ValueError("per_component=True takes one group label; with a list of labels each label gives one root.")
    if how == "node":
        chosen = core.check_roots(graph.adjacency, _node_indices(adata, key, node, graph.n_nodes), several=several)
        _warn_inner_roots(adata, graph, chosen, reason=f"node={node!r} was given")
    elif labels is not None:
        assignment = cell_assignment(adata, key)
        total_mass = column_sums(assignment)
        group_masses = [column_sums(assignment, _group_cells(adata, (group[0], label))) for label in labels]
        chosen = core.check_roots(
            graph.adjacency,
            [core.root_node(graph.adjacency, graph.nodes, mass, total_mass) for mass in group_masses],
            several=several,
        )
        chosen = core.check_roots(graph.adjacency, _settle_on_stubs(adata, key, graph, chosen), several=several)
        _warn_inner_roots(adata, graph, chosen, reason=f"the cells of group={group!r} reach no tip")
    else:
        assignment = cell_assignment(adata, key)
        cells = _select_cells(adata, how, value)
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
        return _select_cells(adata, how, value)
    coordinates = cell_coordinates(adata, graph)
    if is_dask(coordinates):  # order="diffusion" is not offered for chunked fits
        return None
    node_distance = core.geodesic_from(graph.adjacency, graph.nodes, roots)
    groups = [_group_cells(adata, (value[0], label)) for label in labels] if labels is not None else None
    chosen = _select_cells(adata, how, value) if groups is None else None
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


def pseudotime(
    adata: AnnData,
    key: str | None = None,
    *,
    min_branch_nodes: int | None = None,
    min_support: float = 0.0,
    order: str = "auto",
    neighbors_key: str = "neighbors",
    copy: bool = False,
) -> AnnData | None:
    """Geodesic pseudotime, branch points, leaves and segments of a stored graph.

    Every cell is projected onto the graph (its nearest node, then the closest
    point on that node's edges) and its pseudotime is the length of the
    shortest path along the graph from the root to that point. Segments are the
    maximal unbranched node paths, oriented away from the root. Terminal
    branches shorter than ``min_branch_nodes`` nodes — stubs that spanning
    trees over noisy nodes grow — do not count as branches: their cells join
    the segment they hang from, and they create no branch point (pseudotime is
    unaffected). Cells in a connected component without the root get NaN, with
    a warning. With several roots in one component (``tl.root(...,
    several=True)``) each cell is measured from the nearest root, and a node
    where the stretches of two roots meet ends the segments through it, so
    that pseudotime increases along every segment. Every root, branch point,
    leaf and meeting point becomes a *milestone*, named ``"root"``,
    ``"fork 1"``, …, ``"tip 1"``, …, ``"meeting 1"``, … in order of pseudotime
    (:func:`milestones` names them after cell labels,
    :func:`rename_milestones` by hand); tools that take a node also take
    its milestone name.

    Parameters
    ----------
    adata
        Annotated data matrix with a graph and a root (:func:`root`).
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
    min_branch_nodes
        Terminal branches with fewer nodes are pruned from the topology; 0 or 1
        keeps every branch. ``None``: 0 for trees the learner already pruned
        (``tl.ddrtree`` and ``tl.rpg`` with ``prune=True``, whose remaining
        branches all stand out of the noise), else 3.
    min_support
        Terminal branches whose leaf has bootstrap support below this
        (``tl.branch_support``) are pruned the same way. Default 0 keeps all.
    order
        How cells are ordered within the tree's segments. ``"tree"``: the
        geodesic along the graph to each cell's projection (above).
        ``"diffusion"``: the shortest path from the root's start cell through
        the cells' multiscale diffusion space
        (:mod:`~scskeleton._core.cellgraphs.diffusion`, the metric of
        diffusion pseudotime), over each cell's nearest neighbours there and
        stepping only between cells on the same or adjacent segments
        (:mod:`~scskeleton._core.trees.cell_order`); it starts from the cell
        :func:`root` was given (``cell=``) or, of its group, the one the tree
        places nearest the root, together with that cell's neighbours. It
        needs ``sc.pp.neighbors`` and a fit held in memory. Topology,
        segments and milestones are the tree's either way. ``"auto"``
        (default): ``"diffusion"`` for a principal tree or graph held in
        memory when ``neighbors_key`` names a neighbour graph, else
        ``"tree"`` (a cell-level learner's graph, e.g. ``tl.mpme``, is
        itself a graph of the cells and is measured along); the order used
        is stored. Why diffusion where it can: on sparse, noisy counts a cell's
        nearest node is set as much by its noise as by its stage, and
        diffusion averages each cell with its neighbours at every scale; on
        low-noise data it is within a few hundredths of the tree's order.
    neighbors_key
        With ``order="diffusion"``: the ``sc.pp.neighbors`` result whose
        ``connectivities`` are diffused over (its ``n_neighbors`` is reused
        in the diffusion space).
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.obs[f"{key}_pseudotime"]``
        Geodesic distance from the (nearest) root, in the units of the nodes'
        space (``order="diffusion"``: of the diffusion space).
    ``adata.obs[f"{key}_segment"]``
        Categorical segment id of each cell (``"0"`` starts at the root).
    ``adata.obs[f"{key}_milestone"]``
        Categorical: the milestone nearest each cell along the graph.
    ``adata.uns[key]["branch_points"]``, ``["leaves"]``
        Node indices of degree ≥ 3 and of degree 1.
    ``adata.uns[key]["segments"]``
        ``{segment id: node path}``.
    ``adata.uns[key]["milestones"]``
        The root(s), branch points and leaves by name (:func:`milestones`):
        ``nodes`` and ``names`` (parallel arrays) and ``segment_labels``
        (``"root → fork 1"``, one per segment id, in the order of the ids).
        Segment ids stay ``"0"``, ``"1"``, … so that results keyed by them
        (``tl.branch_test``, ``tl.association_test``) survive a renaming.
    ``adata.uns[key]["min_branch_nodes"]``, ``["pseudotime_order"]``
        The pruning threshold and the ``order`` used.

    Fate probabilities of an earlier ``tl.fate_probabilities`` run refer to
    the old topology and are removed.
    """
    key = resolve_key(adata, key)
    graph = rooted_graph(adata, key)
    if order not in ("auto", "tree", "diffusion"):
        raise ValueError(f"order must be 'auto', 'tree' or 'diffusion'; got {order!r}.")
    coordinates = cell_coordinates(adata, graph)
    if order == "auto":
        order = _default_order(adata, graph, neighbors_key, chunked=is_dask(coordinates))
    if order == "diffusion" and is_dask(coordinates):
        raise ValueError(
            f"order='diffusion' reads a kNN graph over all cells, which a chunked fit of {key!r} does not hold in "
            "memory; use order='tree' (what the default does for chunked fits), or load the cells into memory "
            "and fit again."
        )
    if order == "diffusion":
        connectivities = stored_neighbors(adata, neighbors_key, fields=("connectivities",))[0]
        # h5ad files of older scanpy versions hold it as a one-element array
        n_neighbors = int(np.ravel(adata.uns[neighbors_key].get("params", {}).get("n_neighbors", DEFAULT_NEIGHBORS))[0])
    if min_branch_nodes is None:
        min_branch_nodes = 0 if adata.uns[key].get("params", {}).get("prune", False) else 3
    min_branch_nodes = check_integer("min_branch_nodes", min_branch_nodes, low=0)
    drop_leaves = _unsupported_leaves(adata.uns[key], min_support)
    start = logg.info(f"computing pseudotime on {key!r} ({order} order)")
    # a chunked fit's cells are placed chunk by chunk where they live (place_cells)
    located = coordinates if is_dask(coordinates) else core.project_onto_graph(
        coordinates, graph.nodes, graph.adjacency
    )
    shape = core.topology(
        graph.adjacency, graph.nodes, roots=graph.roots, min_branch_nodes=min_branch_nodes, drop_leaves=drop_leaves
    )
    names = [str(i) for i in range(len(shape.segments))]
    segments = {name: path.astype(np.int64) for name, path in zip(names, shape.segments)}
    node_distance = core.geodesic_from(graph.adjacency, graph.nodes, graph.roots).min(axis=0)
    milestone_nodes = milestone_order(
        graph.roots, shape.branch_points, shape.leaves, node_distance, meeting_points=shape.meeting_points
    )
    milestone_names = default_names(milestone_nodes, graph.roots, shape.branch_points, shape.leaves)
    adata = adata.copy() if copy else adata
    times = place_cells(adata, key, graph, located, shape, milestone_nodes, milestone_names)
    unrooted = np.isnan(times) & member_cells(adata, key)
    if order == "diffusion":
        _diffusion_order(adata, key, graph, located, times, connectivities, n_neighbors, shape)
    if unrooted.any():
        logg.warning(
            f"{int(unrooted.sum())} cells lie in a part of {key!r} not connected to a root, so their pseudotime "
            f"is NaN; the other cells' is usable. Root every part with "
            f"sks.tl.root(adata, {key!r}, group=..., per_component=True) or node=[...]."
        )
    update_entry(
        adata,
        key,
        branch_points=shape.branch_points.astype(np.int64),
        leaves=shape.leaves.astype(np.int64),
        segments=segments,
        milestones=milestone_entry(milestone_nodes, milestone_names, segments),
        min_branch_nodes=min_branch_nodes,
        pseudotime_order=order,
    )
    clear_fates(adata, key)
    branch_points = set(shape.branch_points.tolist())
    forks = [name for node, name in zip(milestone_nodes.tolist(), milestone_names) if node in branch_points]
    logg.info(
        f"    finished ({'forks: ' + ', '.join(forks) if forks else 'no forks'}; {len(names)} segments)",
        time=start,
        deep=(
            f"added\n    obs[{pseudotime_key(key)!r}], obs[{segment_key(key)!r}], obs[{milestone_key(key)!r}], "
            f"uns[{key!r}]['branch_points', 'leaves', 'segments', 'milestones']"
        ),
    )
    return adata if copy else None


def _default_order(adata: AnnData, graph: StoredGraph, neighbors_key: str, *, chunked: bool) -> str:
    """``order="auto"``: through the cells' diffusion space when a neighbour graph is stored and the fit is
    an in-memory node graph, else along the graph. A cell-level learner's graph (``tl.mpme``, ``tl.spl``,
    …) is itself the cells' graph: the order along it is that learner's result."""
    if is_cell_graph(adata, graph.key):
        return "tree"
    if chunked:
        return "tree"
    try:
        stored_neighbors(adata, neighbors_key, fields=("connectivities",))
    except KeyError:
        return "tree"
    return "diffusion"


def _diffusion_order(adata, key, graph, projection, tree_times, connectivities, n_neighbors, shape) -> np.ndarray:
    """Pseudotime over the cells' diffusion space within the tree's segments (``order="diffusion"``),
    written over the tree's (:mod:`~scskeleton._core.trees.cell_order`): each root's start cell and its
    neighbours in the stored graph are at 0."""
    member = member_cells(adata, key)
    segment_ids = np.where(member, adata.obs[segment_key(key)].cat.codes.to_numpy(), -1)
    space = multiscale_space(*diffusion_components(connectivities))
    # the stored graph's edges join cells whose diffusion-space neighbours all lie on segments they may not step to
    steps = neighbour_distances(space, n_neighbors).maximum(lengths_in(space, connectivities))
    starts = _start_positions(adata, key, graph, projection)
    # a start cell and its neighbours together: a path from one cell alone carries that cell's own noise
    # (SERGIO counts, true root cell given: Spearman 0.19/0.18 on the worst data set, against -0.01/-0.31 alone)
    sources = np.union1d(starts, sparse.csr_matrix(connectivities)[starts].indices)
    times = segment_geodesic(steps, segment_ids, shape.segments, sources[member[sources]])
    stranded = np.isnan(times) & np.isfinite(tree_times)
    if stranded.any():
        logg.warning(
            f"{int(stranded.sum())} cells of {key!r} have no path from the root through the neighbour graph along "
            "their branch of the tree, so their pseudotime is NaN; the other cells' is usable. Recompute "
            "sc.pp.neighbors on the representation the tree was learned in (more neighbours join stray cells), "
            "or use order='tree'."
        )
    adata.obs[pseudotime_key(key)] = times
    return times


def _start_positions(adata: AnnData, key: str, graph: StoredGraph, projection) -> np.ndarray:
    """Per root, the cell ``tl.root`` named (``uns[key]["root_cells"]``) or, where it named none or the
    cell is gone (a subset), the cell the tree places nearest the root."""
    member = member_cells(adata, key)
    named = np.asarray(adata.uns[key].get("root_cells", []), dtype=str)
    if named.size != graph.roots.size:
        named = np.full(graph.roots.size, "", dtype=object)
    positions = adata.obs_names.get_indexer(named)
    node_distance = core.geodesic_from(graph.adjacency, graph.nodes, graph.roots)
    starts = []
    for position, distance in zip(positions, node_distance):
        if position >= 0 and member[position]:
            starts.append(int(position))
            continue
        near = np.where(member, core.cell_geodesic(projection, distance, graph.nodes), np.inf)
        if np.isfinite(near).any():
            starts.append(int(np.argmin(near)))
    return np.array(starts, dtype=np.intp)


def rooted_graph(adata: AnnData, key: str, *, why: str = "") -> StoredGraph:
    """The graph stored under ``key``; ``KeyError`` saying how to choose a root when it has none."""
    graph = read_graph(adata, key)
    if not graph.roots.size:
        raise KeyError(
            f"The graph {key!r} has no root{why}. Choose one first with "
            f"sks.tl.root(adata, {key!r}, group=(...)) or node=/cell=/obs_min=."
        )
    return graph


def place_cells(
    adata: AnnData, key: str, graph: StoredGraph, projection, shape: core.Topology,
    milestone_nodes: np.ndarray, milestone_names: list[str],
) -> np.ndarray:
    """Write each cell's pseudotime, segment and nearest milestone on the trajectory of ``graph``.

    ``projection`` places the cells of ``adata`` on the graph (their own or,
    for ``tl.project``, new cells); for a chunked fit it is the dask array of
    the cells' coordinates, placed chunk by chunk where the chunks live. Cells outside the result (no assignment
    mass, outside a sub-trajectory of ``tl.subset_tree``) get NaN in all three.
    Returns the pseudotime.
    """
    if is_dask(projection):
        from ..._dask.trajectory import place_chunked

        times, segment_ids, nearest = place_chunked(
            projection, graph.nodes, graph.adjacency, graph.roots, shape, milestone_nodes
        )
    else:
        times = core.pseudotime(projection, graph.adjacency, graph.nodes, graph.roots)
        segment_ids = shape.segment_of(projection)
        nearest = core.nearest_milestone(projection, graph.adjacency, graph.nodes, milestone_nodes)
    outside = ~member_cells(adata, key)
    times[outside], segment_ids[outside], nearest[outside] = np.nan, -1, -1
    adata.obs[pseudotime_key(key)] = times
    adata.obs[segment_key(key)] = pd.Categorical.from_codes(
        segment_ids, categories=[str(i) for i in range(len(shape.segments))]
    )
    adata.obs[milestone_key(key)] = pd.Categorical.from_codes(nearest, categories=milestone_names)
    return times


def stored_topology(adata: AnnData, key: str, graph: StoredGraph) -> core.Topology:
    """The topology ``tl.pseudotime`` wrote for ``key``, rebuilt (its edge-to-segment map is not stored).

    The same pruning threshold and the same leaves dropped (those of the
    graph missing from ``uns[key]["leaves"]``, e.g. by ``min_support``) give
    the same segments, in the same order.
    """
    entry = adata.uns[key]
    leaves = np.flatnonzero(degrees(graph.adjacency) == 1)
    shape = core.topology(
        graph.adjacency, graph.nodes, roots=graph.roots, min_branch_nodes=int(entry.get("min_branch_nodes", 0)),
        drop_leaves=np.setdiff1d(leaves, np.asarray(entry["leaves"])),
    )
    if len(shape.segments) != len(entry["segments"]):
        raise ValueError(f"The stored trajectory of {key!r} is out of date; rerun sks.tl.pseudotime(adata, {key!r}).")
    return shape


def _unsupported_leaves(entry, min_support) -> np.ndarray:
    """Leaves whose support (``tl.branch_support``) is below ``min_support``."""
    if not isinstance(min_support, (int, float)) or isinstance(min_support, bool) or not 0 <= min_support <= 1:
        raise ValueError(f"min_support must be a number in [0, 1]; got {min_support!r}.")
    if min_support <= 0:
        return np.empty(0, dtype=np.intp)
    if "branch_support" not in entry:
        raise KeyError("min_support needs branch support: run sks.tl.branch_support(adata, key) first.")
    support = entry["branch_support"]
    return np.asarray(support["leaves"])[np.asarray(support["leaf_support"]) < min_support]


def path(adata: AnnData, key: str | None = None, start=None, end=None) -> pd.DataFrame:
    """The cells on the shortest graph path between two nodes or two groups.

    Parameters
    ----------
    adata
        Annotated data matrix with a fitted graph.
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
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
    first = _path_end(adata, graph, start, "start")
    last = _path_end(adata, graph, end, "end")
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


def _select_cells(adata: AnnData, how: str, value) -> np.ndarray:
    """Positions of the cells a root criterion refers to."""
    if how == "cell":
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if not 0 <= value < adata.n_obs:
                raise ValueError(f"cell position {value} is outside [0, {adata.n_obs - 1}].")
            return np.array([int(value)])
        check_unique_obs_names(adata, why=f"cell={value!r} could name several cells")
        if value not in adata.obs_names:
            raise KeyError(f"cell {value!r} is not in adata.obs_names.")
        return np.flatnonzero(adata.obs_names == value)
    if how == "group":
        return _group_cells(adata, value)
    values = _obs_or_gene(adata, value)
    finite = np.isfinite(values)
    if not finite.any():
        raise ValueError(f"{value!r} has no finite values.")
    if how == "obs_min":
        cut = np.quantile(values[finite], EXTREME_QUANTILE)
        return np.flatnonzero(finite & (values <= cut))
    cut = np.quantile(values[finite], 1.0 - EXTREME_QUANTILE)
    return np.flatnonzero(finite & (values >= cut))


def _group_labels(group) -> list | None:
    """The labels of ``group=(obs_key, [label, ...])`` (one root each); ``None`` for a single label."""
    if not (isinstance(group, tuple) and len(group) == 2) or not isinstance(group[1], list | np.ndarray | pd.Index):
        return None
    labels = list(group[1])
    if not labels:
        raise ValueError(f"group=(obs_key, [labels]) needs at least one label; got {group!r}.")
    return labels


def _group_cells(adata: AnnData, group) -> np.ndarray:
    if not (isinstance(group, tuple) and len(group) == 2):
        raise ValueError(f"A group is given as (obs_key, value), e.g. ('cell_type', 'HSC'); got {group!r}.")
    column, label = group
    if column not in adata.obs:
        raise KeyError(f"{column!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    cells = np.flatnonzero((adata.obs[column] == label).to_numpy())
    if cells.size == 0:
        raise ValueError(f"No cell has adata.obs[{column!r}] == {label!r}.")
    return cells


def _obs_or_gene(adata: AnnData, name: str) -> np.ndarray:
    if name not in adata.obs and name not in adata.var_names:
        raise KeyError(f"{name!r} is neither a column of adata.obs nor a gene in adata.var_names.")
    values = sc.get.obs_df(adata, keys=[name])[name]
    if not pd.api.types.is_numeric_dtype(values):
        raise ValueError(f"{name!r} is not numeric; obs_min/obs_max need numbers. Use group= for categories.")
    return values.to_numpy(dtype=float)


def _path_end(adata: AnnData, graph: StoredGraph, end, which: str) -> int:
    if isinstance(end, tuple):
        cells = _group_cells(adata, end)
        return int(column_sums(cell_assignment(adata, graph.key), cells).argmax())
    if isinstance(end, str | numbers.Integral):
        return resolve_node(adata, graph.key, end, n_nodes=graph.n_nodes, what=f"{which} node")
    raise ValueError(f"{which} must be a node index, a milestone name or (obs_key, value); got {end!r}.")
