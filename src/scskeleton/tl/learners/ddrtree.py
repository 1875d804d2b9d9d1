"""``tl.ddrtree``: principal tree and latent embedding by DDRTree."""

from __future__ import annotations

import numpy as np
from anndata import AnnData

from ..._anndata.docs import fill_doc
from ..._anndata.results import write_graph
from ..._anndata.schema import latent_key
from ..._core.trees import ddrtree as core
from ..._core.trees.pruning import MIN_EXTENSION, MIN_MASS
from ..._dask import is_dask
from .recipe import check_tree_input, depth_list, finish, fit_params, fit_run, read_input
from .recipe import warn_unconverged, without_depth


def ddrtree(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_components: int | None = None,
    n_centers: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float | None = None,
    maxiter: int = 100,
    tol: float = 1e-3,
    prune: bool = True,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    ignore_depth: bool = True,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a principal tree and a low-dimensional embedding with DDRTree.

    Solves problem (31) of the DDRTree paper (L. Wang, "Probabilistic
    dimensionality reduction via structure learning", arXiv preprint, 2016; IEEE
    TPAMI, 2019, with Q. Mao; §4.3, numbered as in the preprint) by Algorithm 2: a projection W (D × d), latent points Z = one per cell,
    K centers C joined by a spanning tree S, and a soft assignment R of cells to
    centers, all learned together. Each iteration solves eq. (28) (minimum
    spanning tree of the centers), eq. (32) (soft assignment) and eq. (33)
    (Proposition 5, through K × K systems only), so the objective never
    increases. It is the reduction behind Monocle 2.

    Cells are placed on the tree, and assigned to its centers, by their own
    coordinates in the latent space, Wᵀ(y - mean), not by Z: the quantization
    term pulls Z onto the centers, so the cells of a center would share one
    pseudotime.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        Representation to fit: a key of ``adata.obsm`` (default ``"X_pca"``,
        from ``sc.pp.pca``) or ``"X"``. The input is centred per feature.
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
        A dask array (e.g. opened lazily from zarr) is fitted chunk by chunk
        over cells, on the active dask scheduler or ``distributed`` client,
        and never loaded whole (needs ``scskeleton[dask]``): the same
        iterations as in memory, equal to round-off; ``obsm`` results stay
        lazy (:mod:`scskeleton._dask.ddrtree`).
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``; ``None`` uses all.
    n_components
        d, dimension of the latent space in which the tree is learned (≤ the
        number of features). ``None``: the number of directions of
        ``use_rep`` whose variance exceeds twice the median eigenvalue
        of its covariance (the noise level), between 2 and 10; a
        representation of at most 10 dimensions is used whole. Two dimensions,
        the paper's and Monocle 2's choice, cannot hold a tree whose branches
        leave in more directions (krumsiek11's four lineages merge in pairs);
        pass ``n_components=2`` for a planar embedding to plot.
    n_centers
        K, number of tree nodes, 2 ≤ K ≤ N. ``None``: a node per ten cells,
        at least 50 (or N) and at most 80 (R's DDRTree / Monocle 2 rule
        round(2·100·ln N / (ln N + ln 100)) gives about 120–150, and a dense
        terminal state then becomes a ball of centers whose spanning tree is a
        star). Monocle's rule alone gives 107 nodes to 200 cells, a node per
        two cells' noise.
        K = N is Algorithm 2 as printed; K < N seeds the centers by k-means on
        the initial latent points.
    sigma
        Bandwidth of the soft assignment, eq. (32), in squared latent units.
        ``None``: a thousandth of the median squared distance between
        neighbouring initial centers, which makes assignments nearly hard
        (Proposition 4: the k-means form of problem (30)) at any scale of the
        data. The paper and Monocle 2 use 1e-3, which on ``X_pca`` of
        log-normalised counts (squared spacing 1.4–1.9) is the same regime but
        on data a hundred times smaller (a diffusion map) makes the assignments
        uniform and the tree meaningless; pass ``sigma=1e-3`` for it. Raise it
        for smoother, overlapping assignments. The value used is stored.
    gamma
        Weight of the quantization term in (31) that ties each cell's latent
        point to its centers. Default 10.
    lam
        Weight of the tree length in (31). ``None`` uses N / 4, which keeps the
        tree term in proportion to the N-cell reconstruction error. R's DDRTree
        and Monocle 2 use 5 · N; on PCA input that contracts the tips of the
        tree into clumps and misses branches (toggleswitch loses its
        bifurcation), so the default here is twenty times smaller; the stubs a
        weakly smoothed tree grows are removed by ``prune``. Raise it for a
        smoother, shorter tree; lower it to resolve more branches.
    maxiter
        Maximum number of iterations of Algorithm 2. Default 100; typical fits
        reach ``tol`` in 10–40 (R's DDRTree stops at 20, often before ``tol``).
    tol
        Stop when the relative change of objective (31) falls below ``tol``.
    prune
        Remove spurious terminal branches after the fit (not in the paper; see
        ``min_branch_extension``). ``False`` keeps the spanning tree of eq. (28)
        as it is.
    min_branch_extension
        A terminal branch is kept only if its cells stand this many noise
        widths out of the rest of the tree: the upper quartile of the offsets of
        the branch's cells from the rest of the tree, along the branch's
        direction, divided by the robust spread (1.4826 · MAD) of the
        neighbouring cells' offsets in that direction. Default 4: real
        branches stand well beyond it, while the stubs a spanning tree grows
        through a thick cloud of cells stay below it (the cells nearest a stub
        are the cloud's own outliers, and log-normalised counts have heavy
        tails). Measured on the
        projected data YW (free of units), with every center that is nearest to
        at least 10 cells placed at the mean of their YW: the tree-length term
        pulls the centers off their cells, most near forks, and that offset
        would read as noise.
    min_branch_fraction
        A terminal branch must also hold at least this share of the cells, and
        never fewer than 10 cells (on a few hundred cells a share of 1 % is a
        stub of 2–3); 0 lifts both.
    {ignore_depth}
    key_added
        Key of the results; default ``"ddrtree"``.
    random_state
        Seed of the k-means initialisation; the same seed gives bit-identical
        results.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.obsm[f"X_{key}"]``
        YW, the N × d coordinates of the cells in the latent space of the
        tree (the centred ``use_rep`` times W).
    ``adata.obsm[f"{key}_assignment"]``
        R, N × K soft assignment of cells to tree nodes (rows sum to 1;
        eq. 32 at the stored coordinates).
    ``adata.uns[key]``
        ``method``, ``params`` (every parameter used), ``nodes`` (C, K × d, in
        ``space`` = ``f"X_{key}"``), ``adjacency`` (S, K × K sparse tree),
        ``projection`` (W, D × d), ``mean`` (the per-feature mean of
        ``use_rep`` subtracted before the fit, length D; with W it maps new
        cells, ``tl.project``), ``objective`` (value of (31) per iteration),
        ``n_iter``, ``converged``, ``gap_edges`` (E × 2 tree edges
        that cross a gap between groups of cells, i.e. bridge separate clusters;
        a warning names them, and ``pl.tree`` draws them dashed), ``n_pruned``
        (terminal branches removed by the pruning, 0 with ``prune=False``).

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.branching(1000, n_leaves=3)
    >>> sc.pp.pca(adata, n_comps=20)
    >>> sks.tl.ddrtree(adata)
    >>> sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    >>> sks.tl.pseudotime(adata, "ddrtree")
    """
    inputs = read_input(adata, key_added=key_added, method="ddrtree", use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state, lazy=True)
    check_tree_input(adata, inputs, "DDRTree")
    inputs, depth = without_depth(adata, inputs, "DDRTree", ignore_depth=ignore_depth)
    n_cells = inputs.data.shape[0]
    resolved_centers = core.default_n_centers(n_cells) if n_centers is None else n_centers
    resolved_lam = core.default_lam(n_cells) if lam is None else lam
    if is_dask(inputs.data):
        from ..._dask.ddrtree import ddrtree_chunked as fit
    else:
        fit = core.ddrtree

    pruning = {"prune": prune, "min_branch_extension": min_branch_extension,
               "min_branch_fraction": min_branch_fraction}
    with fit_run("DDRTree", inputs, maxiter=maxiter, size=n_cells * int(resolved_centers)) as run:
        result = fit(
            inputs.data,
            n_components=n_components,
            n_centers=resolved_centers,
            sigma=sigma,
            gamma=gamma,
            lam=resolved_lam,
            maxiter=maxiter,
            tol=tol,
            random_state=inputs.random_state,
            **pruning,
            callback=run.callback,
        )
    if not result.converged:
        warn_unconverged("DDRTree", after=f"maxiter={maxiter} iterations", note=f" (tol={tol})", what="the tree")

    own = {"n_components": result.projection.shape[1], "n_centers": resolved_centers, "sigma": result.sigma,
           "gamma": gamma, "lam": resolved_lam}
    params = fit_params(inputs, inputs.data.shape[1], own, maxiter=maxiter, tol=tol) | pruning | {
        "ignore_depth": ignore_depth, "depth_components": depth_list(depth)}
    summary = f"{result.n_iter} iterations, {result.centers.shape[0]} nodes, {result.n_pruned} spurious branches pruned"
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_graph(
        target,
        inputs.key,
        method="ddrtree",
        params=params,
        nodes=result.centers,
        space=latent_key(inputs.key),
        adjacency=result.tree,
        objective=result.objective,
        n_iter=result.n_iter,
        converged=result.converged,
        projection=result.projection,
        mean=result.mean,
        latent=result.cells,
        assignment=result.assignment,
        gap_edges=result.gap_edges,
        n_pruned=result.n_pruned,
    ))


fill_doc(ddrtree)
