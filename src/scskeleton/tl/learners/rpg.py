"""``tl.rpg`` and ``tl.rpg_l1``: regularized principal graphs."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.results import write_graph
from ..._core.trees import rpg as core
from ..._core.trees.defaults import MIN_NODES
from ..._core.trees.pruning import MIN_EXTENSION, MIN_MASS
from ..._dask import is_dask
from .recipe import check_tree_input, depth_list, finish, fit_params, fit_run, read_input
from .recipe import warn_unconverged, without_depth

_TUNING = """
    Tuning (§6.1 of the paper): start with a small ``sigma``, then lower
    ``gamma`` from large to small until the graph fits the data without
    overshooting, finally raise ``sigma`` for a smoother structure. For the
    ℓ1 graph, first pick ``lam`` (and ``n_neighbors``) so that the graph holds
    the key structure. The paper's Table 1 (2-D data of unit scale; the
    principal tree and the ℓ1 graph share them):

    ===================  =====  ======  ======  ====  ====
    data set             N      sigma   gamma   lam   nn
    ===================  =====  ======  ======  ====  ====
    distorted S-shape    100    0.01    0.5     1.0   5
    spiral               200    0.01    0.5     1.0   10
    circle               100    0.1     0.5     1.0   10
    two moons            200    0.01    3       0.1   5
    tree                 300    0.01    10      1.0   5
    three clusters       300    0.01    0.5     0.1   5
    ===================  =====  ======  ======  ====  ====

    ``sigma`` is in squared units of the representation, so it must follow
    its scale; the default (``None``) takes the median squared distance from
    each initial node to its nearest other node.
"""


def rpg(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_nodes: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    maxiter: int = 200,
    tol: float = 1e-4,
    over_relax: bool = False,
    prune: bool = True,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    ignore_depth: bool = True,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a principal tree with the regularized principal graph (RPG) method.

    Mao, Wang, Tsang & Sun, "A novel regularized principal graph learning
    framework on explicit graph representation", arXiv preprint, 2015 (published
    as "Principal graph and structure learning based on reversed graph
    embedding", IEEE TPAMI, 2017; equations numbered as in the preprint),
    problem (17) with the spanning-tree constraint: K principal points C in
    the space of ``use_rep`` joined by a spanning tree W, and a soft
    assignment P of cells to points. Algorithm 1 (K = N) or Algorithm 2
    (K landmarks): P by eq. (18), W as a minimum spanning tree (eq. 20), C by eq. (22) as a
    K × K Cholesky solve. The objective never increases (Theorem 1).
    {tuning}
    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``; the graph's nodes live in
        this space.
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
        A dask array is fitted chunk by chunk over cells, one pass per
        iteration, on the active dask scheduler or ``distributed`` client,
        never loaded whole (``scskeleton[dask]``); the assignment stays lazy.
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``. ``None``: all of
        them, but at most 30 principal components (more components of noise
        widen the default ``sigma`` until short branches collapse), and when
        their structure barely stands out of the noise (signal-to-noise below
        0.5, :func:`~scskeleton._core.trees.rpg.tree_columns`; e.g. low
        sequencing depth) only those above the noise floor, with 50 nodes and
        a warning. Columns are cut only where the leading ones are the
        principal directions (``X_pca``).
    n_nodes
        K. ``None``: one node per ten cells, between 50 (or N, if fewer) and
        round(2·100·ln N / (ln N + ln 100)) (about 100–150 for 10³–10⁶ cells),
        seeded by k-means (Algorithm 2); 50 on weak structure (``n_pcs``). The
        paper's Algorithm 1 uses a node per cell (``n_nodes=adata.n_obs``); on
        single-cell data that draws a node per cell's noise and a branch at
        every outlier.
    sigma
        Bandwidth of the soft assignment, eq. (18), in squared units of
        ``use_rep``; ``None`` estimates a small one from the data (see above).
    gamma
        Weight of the quantization error against the tree length in (17);
        smaller values give a shorter, smoother tree. Default 10 (Table 1, tree).
    maxiter, tol
        Stop after ``maxiter`` iterations or at relative change < ``tol``.
        The paper's rule uses 1e-5; the nodes' slow slide along the curve takes
        100–200 iterations to reach it at 10³ cells for no visible change,
        so the default is 1e-4 (25–60 iterations).
    over_relax
        Start each iteration from an over-relaxed step (stretched by a growing
        factor, kept only if the objective does not rise; Salakhutdinov &
        Roweis 2003): about half the passes over the cells to a lower
        objective. Off by default for the tree: its lower optima are bushier
        trees with more spurious branches, while the paper's plain alternation
        stops where the tree is still smooth.
    prune, min_branch_extension, min_branch_fraction
        Remove terminal branches that do not stand out of the noise after the
        fit (not in the paper), as in :func:`~scskeleton.tl.ddrtree`: a branch
        is kept when its cells lie at least ``min_branch_extension`` robust
        noise widths out of the rest of the tree along its direction and it
        holds at least ``min_branch_fraction`` of the cells, and never fewer
        than 10 cells (on a few hundred cells a share of 1 % is a stub of 2–3).
    {ignore_depth}
    key_added
        Key of the results; default ``"rpg"``.
    random_state
        Seed of the k-means landmarks; the same seed gives identical results.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.uns[key]``
        ``method`` (``"rpg"``), ``params`` (with the ``n_pcs`` and ``n_nodes``
        used and, when measured, the representation's ``signal_to_noise``),
        ``nodes`` (C, K × D), ``space``
        (= ``use_rep``), ``adjacency`` (the tree, K × K sparse), ``objective``
        (per kept step), ``n_iter`` (passes over the cells), ``converged``, ``gap_edges`` (E × 2 tree edges
        that cross a gap between groups of cells, i.e. bridge separate clusters;
        a warning names them, and ``pl.tree`` draws them dashed), ``n_pruned``
        (terminal branches removed by the pruning, 0 with ``prune=False``).
    ``adata.obsm[f"{key}_assignment"]``
        P, N × K soft assignment of cells to nodes.

    ``tl.root``, ``tl.pseudotime``, ``tl.path`` and every ``pl`` function work
    on the result.
    """
    # every parameter as given; the principal tree is the graph of (17) without the ℓ1 terms
    arguments = {name: value for name, value in locals().items() if name != "adata"}
    return _fit(adata, graph="tree", default_key="rpg", lam=1.0, n_neighbors=0, **arguments)


def rpg_l1(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_nodes: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float = 1.0,
    n_neighbors: int | None = None,
    maxiter: int = 50,
    tol: float = 1e-4,
    over_relax: bool = True,
    prune: bool = True,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    ignore_depth: bool = True,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a weighted ℓ1 principal graph: loops and several components allowed.

    Problem (17) of the regularized principal graph paper (Mao, Wang, Tsang &
    Sun, arXiv preprint 2015, IEEE TPAMI 2017; see :func:`rpg`) with the ℓ1 graph: besides the graph length and the quantization error,
    each landmark z_k must be reconstructed from its neighbours,
    z_k ≈ Σ_k' w_k'k z_k', at a cost ``lam`` · ||ξ_k||₁. W is the solution of
    the linear program (19)/(23) — (24) with landmarks — restricted to the
    symmetrised ``n_neighbors`` nearest neighbours of each landmark (side
    information, §5.1), solved by an interior-point method (Clarabel; the
    paper uses Mosek's), one program per connected component of the candidate
    graph, with the factorisation's symbolic analysis kept between
    iterations. P by eq. (18) and C by eq. (22) as in
    :func:`rpg`; the objective never increases (Theorem 1).

    The optimum of (19) is a band of short edges (each landmark rebuilt from
    about D neighbours), which the paper's figures draw as a curve; the
    ``adjacency`` written is its skeleton — the curves, loops and components
    that band draws (cells must join an edge's two ends; a spanning forest of
    the LP's edges; LP edges that close a cycle of 8 or more edges around a
    hole, i.e. a ring with no node near its centre (a cycle across a dense
    state or a thick band has nodes there; a loop more elongated than about
    5:3 is drawn as a path); across a stretch that no cell covers, pieces of a
    curve joined and a ring closed only where that stretch is no longer than
    uniform sampling of the cells leaves; components under 1 % of the cells
    joined to the nearest one). W
    itself is written as ``lp_adjacency``. See the documentation's background
    page on RPG.
    {tuning}
    Parameters
    ----------
    adata, use_rep, n_pcs, sigma, gamma, random_state, copy
        As in :func:`rpg`.
    n_nodes
        K. ``None``: as in :func:`rpg`, a node per ten cells, 50 (or N) to about
        150 k-means landmarks (Algorithm 2). ``n_nodes=adata.n_obs`` runs the
        paper's Algorithm 1 (a node per cell).
    lam
        Weight of the ℓ1 reconstruction error; larger values keep more edges.
        In units of ``use_rep`` (the graph length is in squared units).
    n_neighbors
        Candidate edges per landmark (symmetrised), fewer than K. ``None``: 10,
        or K − 1 on graphs of fewer than 11 nodes. Edges outside this set are
        never created, so it bounds which parts of the data can be joined.
    {ignore_depth}
    key_added
        Key of the results; default ``"rpg_l1"``.

    maxiter, tol
        As in :func:`rpg` (default 50 and 1e-4).
    over_relax
        Over-relaxed steps, as in :func:`rpg`; on by default here: on the
        paper's Table 1 sets the ℓ1 graph converges in 5–29 passes instead of
        5–50, with the same curves, loops and components.
    prune, min_branch_extension, min_branch_fraction
        As in :func:`rpg`, on the skeleton: terminal branches that do not stand
        out of the noise are removed (not in the paper). Where the program's
        band is thick, the skeleton's spanning forest leaves nodes of its far
        side hanging off the curve as hairs of one to three nodes, which the
        pruning removes; hence on by default. Cycles and components are kept.

    Returns
    -------
    ``None``, or the copy. Sets the fields listed in :func:`rpg`, with
    ``method`` = ``"rpg_l1"``, ``adjacency`` holding the skeleton of the ℓ1
    graph (each edge with its weight in W), ``lp_adjacency`` the solution W
    of (19) at the last iteration (both over the nodes the pruning kept) and
    ``n_pruned``.
    ``tl.pseudotime`` measures pseudotime within the root's connected
    component; cells of other components get NaN (with a warning).
    """
    arguments = {name: value for name, value in locals().items() if name != "adata"}  # every parameter as given
    return _fit(adata, graph="l1", default_key="rpg_l1", **arguments)


rpg.__doc__ = rpg.__doc__.replace("{tuning}", _TUNING)
rpg_l1.__doc__ = rpg_l1.__doc__.replace("{tuning}", _TUNING)


def _fit(adata, *, graph, default_key, use_rep, n_pcs, n_nodes, sigma, gamma, lam, n_neighbors, maxiter, tol,
         over_relax, prune, min_branch_extension, min_branch_fraction, ignore_depth, key_added, random_state, copy):
    inputs = read_input(adata, key_added=key_added, method=default_key, use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state, lazy=True)
    check_tree_input(adata, inputs, "RPG")
    inputs, depth = without_depth(adata, inputs, "RPG", ignore_depth=ignore_depth)
    data = inputs.data
    n_cells = data.shape[0]
    default_nodes = core.default_n_nodes if graph == "tree" else core.default_l1_nodes
    resolved_nodes = default_nodes(n_cells) if n_nodes is None else n_nodes
    name = "principal tree" if graph == "tree" else "ℓ1 principal graph"
    columns = None
    if graph == "tree" and n_pcs is None:
        # the components set aside as depth carry no variance: the noise floor is read without them
        columns = _tree_columns(np.delete(data, depth, axis=1) if depth else data, inputs.use_rep,
                                allow_weak=n_nodes is None)
        kept = np.flatnonzero(~np.isin(np.arange(data.shape[1]), depth))
        n_columns = int(kept[columns.n_columns - 1]) + 1 if columns.n_columns < kept.size else data.shape[1]
        if n_columns < data.shape[1]:
            data = data[:, :n_columns]
        if columns.weak and columns.principal:
            resolved_nodes = min(MIN_NODES, n_cells)
    if graph == "l1" and n_neighbors is None:
        n_neighbors = min(core.L1_NEIGHBORS, max(int(resolved_nodes) - 1, 1))
    if is_dask(data):
        from ..._dask.rpg import rpg_chunked as fit
    else:
        fit = core.rpg

    pruning = {"prune": prune, "min_branch_extension": min_branch_extension,
               "min_branch_fraction": min_branch_fraction}
    with fit_run(name, replace(inputs, data=data), maxiter=maxiter, size=n_cells * int(resolved_nodes)) as run:
        result = fit(
            data,
            graph=graph,
            n_nodes=resolved_nodes,
            sigma=sigma,
            gamma=gamma,
            lam=lam,
            n_neighbors=n_neighbors,
            maxiter=maxiter,
            tol=tol,
            over_relax=over_relax,
            random_state=inputs.random_state,
            **pruning,
            callback=run.callback,
        )
    if not result.converged:
        warn_unconverged(name, after=f"maxiter={maxiter} iterations", note=f" (tol={tol})", what="the graph")

    params = fit_params(inputs, data.shape[1], {"n_nodes": resolved_nodes, "sigma": result.sigma, "gamma": gamma},
                        maxiter=maxiter, tol=tol)
    params.update(over_relax=over_relax, **pruning, ignore_depth=ignore_depth,
                  depth_components=depth_list(depth))
    if graph == "l1":
        params.update(lam=lam, n_neighbors=n_neighbors, n_candidate_edges=result.candidate_edges.shape[0])
    if columns is not None and columns.signal_to_noise is not None:
        params.update(signal_to_noise=columns.signal_to_noise)
    summary = (f"{result.n_iter} iterations, {result.centers.shape[0]} nodes, "
               f"{result.adjacency.nnz // 2} edges, {result.n_pruned} spurious branches pruned")
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_graph(
        target,
        inputs.key,
        method=default_key,
        params=params,
        nodes=result.centers,
        space=inputs.use_rep,
        adjacency=result.adjacency,
        objective=result.objective,
        n_iter=result.n_iter,
        converged=result.converged,
        assignment=result.assignment,
        gap_edges=result.gap_edges if graph == "tree" else None,
        lp_adjacency=result.lp_adjacency,
        n_pruned=result.n_pruned,
    ))


def _tree_columns(data, use_rep: str, *, allow_weak: bool) -> core.TreeColumns:
    """:func:`~scskeleton._core.trees.rpg.tree_columns` of ``data`` read from at most
    ``SIGNAL_CELLS`` cells spread over it, and the warning when the structure is weak."""
    if not core.reads_columns(data.shape[1]):
        return core.TreeColumns(data.shape[1])
    step = max(1, -(-data.shape[0] // core.SIGNAL_CELLS))
    sample = data[::step]
    sample = np.asarray(sample.compute() if is_dask(sample) else sample, dtype=float)
    columns = core.tree_columns(sample, allow_weak=allow_weak)
    if columns.weak and columns.principal:
        logg.warning(
            f"The structure of {use_rep!r} stands barely out of its noise (signal-to-noise "
            f"{columns.signal_to_noise:.2f} < {core.LOW_SIGNAL}; e.g. low sequencing depth), so the tree is fitted "
            f"in its first {columns.n_columns} components, those above the noise, with {MIN_NODES} nodes. "
            "Check the tree with sks.tl.branch_support, or pass n_pcs= and n_nodes= to choose otherwise."
        )
    elif columns.weak:
        logg.warning(
            f"The structure of {use_rep!r} stands barely out of its noise (signal-to-noise "
            f"{columns.signal_to_noise:.2f} < {core.LOW_SIGNAL}; e.g. low sequencing depth), and its leading columns "
            "are not its principal directions, so the tree is fitted in all of them and may follow the noise. Fit "
            "it on 'X_pca' with few components (n_pcs=), and check it with sks.tl.branch_support."
        )
    return columns


fill_doc(rpg)
fill_doc(rpg_l1)
