"""``tl.fsl``: unsupervised gene selection with a learned cell graph (feature selection via structure learning)."""

from __future__ import annotations

import numpy as np
from anndata import AnnData

from ..._anndata.inputs import check_key, check_random_state, get_features
from ..._anndata.progress import solver_run
from ..._anndata.schema import latent_key
from ..._core.cellgraphs import fsl as core
from ..._core.cellgraphs.landmarks import DEFAULT_LANDMARKS, landmark_graph, medoid_landmarks
from ..._core.cellgraphs.logdet import MAX_DENSE_POINTS
from ..._core.validation import check_integer
from .landmarks import landmark_count, landmark_docs
from .recipe import cell_graph_summary, finish, warn_unconverged, write_cell_graph


def fsl(
    adata: AnnData,
    *,
    layer: str | None = None,
    n_features: int | None = None,
    b: float | None = None,
    lam: float = 10.0,
    gamma: float = 100.0,
    n_components: int = 2,
    maxiter: int = 300,
    tol: float = 1e-6,
    n_landmarks: int | None = None,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Weight the genes and learn a cell graph on the weighted genes (FSL).

    Wang & Li, "Learning low-dimensional latent graph structures: a density
    estimation approach", IEEE Transactions on Neural Networks and Learning
    Systems, 2020 (§IV, Algorithm 2). Each gene r gets a weight
    θ_r ∈ [0, 1], Σ_r θ_r = b (eq. 30); cells are compared by the weighted
    distance ψ(x_i, x_j; θ) = Σ_r θ_r (x_ri - x_rj)² (eq. 29). Proposition 4
    turns the density estimation problem (33) into

        min_{W, θ}  -½ Σ_r log det(γI + 4θ_r L_W) + Σ_{i,j} w_ij ψ(x_i, x_j; θ)      (34)

    over directed graphs W with rows summing to λ and θ ∈ Θ, solved by
    projected gradient descent: rows of W projected onto the simplex by
    sorting, θ onto Θ by the bisection of Proposition 5, Armijo backtracking
    so that the objective never increases. All M log-determinants come from
    one eigendecomposition of L_W per iteration: O(N³ + N²·M) time and
    O(N² + N·M) memory. The genes that vary least between neighbouring cells
    of the learned graph get the weight, and the graph connects cells that
    are close in the weighted genes. The cells are embedded by kernel PCA of
    the learned density's covariance Σ_r θ_r (γI + 4θ_r L_W)⁻¹.

    Scale matters. θ rewards small squared differences between graph
    neighbours in the genes' own units, and the uniform start graph ranks
    genes by variance, so a gene with little spread starts ahead; a pair is
    joined only where ψ_ij < about 2b/γ. Genes constant across cells are
    refused. The problem is not convex, and which genes are selected depends
    on their spread (see the documentation's background page on ESL and FSL).
    Work and memory are
    O(N³) and O(N² + N·M): exact up to 5,000 cells, on landmarks above.
    {landmarks}
    For FSL the landmarks are cells: the cell nearest each k-means centroid.
    FSL weighs genes by how little they vary between neighbours, and a
    centroid, the mean of its cells, shrinks every gene's noise by the square
    root of their number, which would put the noisiest genes first. The cells
    are assigned to the landmarks, and the skeleton is built, in the genes
    weighted by the learned θ (the distance ψ of eq. 29); the nodes live in
    the embedding ``X_{key}``.

    Parameters
    ----------
    adata
        Annotated data matrix (cells × genes).
    layer
        ``None`` for ``adata.X`` (dense or sparse), or a key of ``adata.layers``.
    n_features
        How many genes to flag in ``var[f"{key}_selected"]``: the largest θ
        (only genes with θ > 0 are flagged). ``None``: 50, or all genes when
        there are fewer.
    b
        Σ_r θ_r (eq. 30), at most the number of genes; with θ_r ≤ 1 at least
        ⌈b⌉ genes get weight. ``None``: ``n_features / 2`` (the paper's
        two-moon setting: 2 features, b = 1).
    lam
        λ, each row of W sums to λ (self-loop included: Σ_{j≠i} w_ij ≤ λ);
        larger values select more genes and give a denser graph (Fig. 8 of the
        paper). Default 10.
    gamma
        γ, precision of the prior N(0, γ⁻¹I) (Criterion 2); larger values give
        sparser θ. Default 100 (the paper's setting).
    n_components
        Dimension of the embedding in ``obsm[f"X_{key}"]``. Default 2.
    maxiter, tol
        Stop after ``maxiter`` iterations, or when an iteration lowers the
        objective by less than ``tol`` times the decrease since the start.
    {n_landmarks}
    key_added
        Key of the results; default ``"fsl"``.
    random_state
        Seed of the k-means landmarks; the exact fit (every cell) is
        deterministic (fixed start θ = b1/M, W = λ11ᵀ/N) and only records it.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.var[f"{key}_weight"]``
        θ, the weight of every gene.
    ``adata.var[f"{key}_selected"]``
        Boolean: the ``n_features`` genes of largest positive θ.
    ``adata.obsp[f"{key}_connectivities"]``
        (W + Wᵀ)/2 without self-loops, the learned cell graph.
    ``adata.obsm[f"X_{key}"]``
        N × n_components kernel PCA embedding of the cells.
    ``adata.uns[key]``
        ``method`` (``"fsl"``), ``params`` (every parameter used, with the
        resolved ``b``), ``objective`` (g of eq. 34 at the start and after
        every iteration, non-increasing), ``n_iter``, ``converged``,
        ``n_weighted`` (genes with θ > 0), ``eigenvalues`` (of the embedding).
    {landmark_fields}
    For FSL the nodes are the landmarks' embedding (``space`` = ``f"X_{key}"``),
    and ``uns[key]`` holds no ``embedding``.

    Examples
    --------
    >>> import scskeleton as sks
    >>> adata = sks.datasets.noisy_moons()
    >>> sks.tl.fsl(adata, n_features=2)
    >>> adata.var.loc[adata.var["fsl_selected"]].index.tolist()
    ['x', 'y']
    """
    key = check_key(key_added, "fsl")
    random_state = check_random_state(random_state)
    data = get_features(adata, layer=layer)
    n_cells, n_genes = data.shape
    n_features = min(50, n_genes) if n_features is None else n_features
    n_features = check_integer("n_features", n_features, low=1, high=n_genes, role="genes to flag as selected")
    b = n_features / 2.0 if b is None else b
    constant = np.ptp(data, axis=0) == 0
    if constant.any():
        names = adata.var_names[constant][:5].tolist()
        raise ValueError(
            f"{int(constant.sum())} gene(s) are constant across cells (e.g. {names}): their ψ is zero, so FSL "
            "would weight them first. Remove them, e.g. sc.pp.filter_genes(adata, min_cells=1) or subset "
            "adata[:, adata.X.max(0) > adata.X.min(0)]."
        )

    n_landmarks = landmark_count(n_landmarks, n_cells, limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS, name="FSL")
    n_points = n_cells if n_landmarks is None else n_landmarks
    core.check_fsl_parameters(n_points, n_genes, b=b, lam=lam, gamma=gamma, n_components=n_components)
    points = data if n_landmarks is None else data[medoid_landmarks(data, n_landmarks, random_state=random_state)]
    n_points = points.shape[0]

    where = "adata.X" if layer is None else f"adata.layers[{layer!r}]"
    with solver_run(
        "FSL", use_rep=where, shape=(n_cells, n_genes), maxiter=maxiter, size=n_points * n_genes, dense=True,
        features="genes", detail="" if n_landmarks is None else f" over {n_points} landmark cells",
    ) as run:
        result = core.fsl(points, b=b, lam=lam, gamma=gamma, n_components=n_components, maxiter=maxiter, tol=tol,
                          callback=run.callback)
        graph = None
        if n_landmarks is not None:
            graph = landmark_graph(core.weighted_features(data, result.theta),
                                   core.weighted_features(points, result.theta), result.coordinates, result.adjacency)
    if not result.converged:
        warn_unconverged("FSL", after=f"maxiter={maxiter} iterations", note=f" (tol={tol})",
                         what="the gene weights and the graph")

    order = np.argsort(-result.theta, kind="stable")[:n_features]
    selected = np.zeros(n_genes, dtype=bool)
    selected[order[result.theta[order] > 0]] = True
    params = {
        "layer": "X" if layer is None else layer,
        "n_features": n_features,
        "b": b,
        "lam": lam,
        "gamma": gamma,
        "n_components": n_components,
        "maxiter": maxiter,
        "tol": tol,
        "random_state": random_state,
    }
    uns = {"n_weighted": int(np.count_nonzero(result.theta)), "eigenvalues": result.eigenvalues}
    summary = cell_graph_summary(f"{result.n_iter} iterations, {int(np.count_nonzero(result.theta))} genes weighted, "
                                 f"{result.adjacency.nnz // 2} edges", graph)
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_cell_graph(
        target, key, method="fsl", graph=graph, space=latent_key(key), params=params, uns=uns,
        latent=result.coordinates, connectivities=result.adjacency, objective=result.objective,
        n_iter=result.n_iter, converged=result.converged,
        var={f"{key}_weight": result.theta, f"{key}_selected": selected},
    ))


landmark_docs(fsl, limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS)
