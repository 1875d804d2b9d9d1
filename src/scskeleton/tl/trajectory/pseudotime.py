"""``tl.pseudotime``: each cell's distance from the root along a stored graph, its segment and milestone."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import get_representation, stored_neighbors
from ..._anndata.results import update_entry
from ..._anndata.schema import (
    StoredGraph,
    cell_coordinates,
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
from ..learners.recipe import stored_depth
from .fates import clear_fates
from .milestones import (
    default_names,
    milestone_entry,
    milestone_order,
)

#: Neighbours per cell in the diffusion space when the stored graph does not say how many it used (scanpy's default).
DEFAULT_NEIGHBORS = 15


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
    {key_fitted}
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
    {copy}

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
        depth = stored_depth(adata.uns[key].get("params", {}))
        if depth.size:
            connectivities = _depth_free_connectivities(adata, key, depth, n_neighbors)
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


def _depth_free_connectivities(adata: AnnData, key: str, depth: np.ndarray, n_neighbors: int):
    """A kNN graph (scanpy's connectivities, exact neighbours) of the cells in the representation the
    tree was fitted in, without the components it ignored as sequencing depth. The stored graph was
    built with them and joins cells of equal depth, not of equal state: on SERGIO counts the
    diffusion order through it reached a Spearman of 0.53–0.60 with the true time, through this one
    0.80–0.90."""
    import scanpy as sc

    params = adata.uns[key]["params"]
    data = get_representation(adata, use_rep=str(params["use_rep"]), n_pcs=int(params["n_pcs"])).copy()
    depth = depth[depth < data.shape[1]]
    data[:, depth] = data[:, depth].mean(axis=0)
    logg.info(f"    the diffusion order reads a {n_neighbors}-nearest-neighbour graph of {params['use_rep']!r} without "
              f"component(s) {', '.join(str(c + 1) for c in depth)}, which the fit ignored as sequencing depth")
    cells = AnnData(obs=pd.DataFrame(index=adata.obs_names.copy()), obsm={"X_tree": data})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scanpy's notes on the transformer it was handed
        sc.pp.neighbors(cells, n_neighbors=n_neighbors, use_rep="X_tree", transformer="sklearn")
    return cells.obsp["connectivities"]


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


fill_doc(pseudotime)
