"""``tl.convex_embedding``: regularized loss minimisation plus truncation."""

from __future__ import annotations

import numpy as np
from anndata import AnnData

from ..._core.cellgraphs.landmarks import DEFAULT_CONVEX_LANDMARKS, landmark_graph
from ..._core.convex import regularized as core
from ..._core.graphs import from_edges, knn_edges
from .landmarks import fit_points, landmark_count, landmark_docs
from .recipe import cell_graph_summary, finish, fit_params, fit_run, read_input, warn_unconverged, write_cell_graph


def convex_embedding(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_components: int = 2,
    loss: str = "mvu",
    regularizer: str = "biconjugate",
    n_neighbors: int = 10,
    alpha: float = 1.0,
    beta: float = 0.1,
    gamma: float = 1e-3,
    sigma: float | None = None,
    loss_weight: float = 10.0,
    standardize: bool = True,
    maxiter: int = 1000,
    tol: float = 1e-6,
    n_landmarks: int | None = None,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Embed the cells by regularized loss minimisation over kernels, then truncation.

    Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
    nonlinear dimensionality reduction", ICML 2012.
    With D the squared distances of the cells in ``use_rep`` (eq. 2), solve
    problem (14),

        min_{K̃ ⪰ 0, K̃1 = 0}  w L(D(K̃); D) + R(K̃),   D(K) = δ(K)1ᵀ + 1δ(K)ᵀ - 2K  (3),

    with K̃ = YYᵀ by L-BFGS over the factor Y (with a certificate that the
    minimum is global), then keep the top d eigenvalues: X̂ = Q_{1:d} Λ_{1:d}^½.
    The loss relates the reconstruction to the data, the regularizer encodes
    the target topology; w is set by ``loss_weight`` (Scale). Kernel PCA is
    ``loss="kpca"`` (22) with ``"trace"`` (16); regularized maximum variance
    unfolding is ``loss="mvu"`` (29) with ``"neg_trace"`` (17). The default
    pairs the MVU loss with the paper's new convex regularizer (44), the
    tightest convex relaxation of "spread the top d directions, shrink the
    rest" (41).

    Size: the work is dense N × N, O(N²r) per iteration for a rank-r factor
    plus a partial eigendecomposition when the rank is checked, O(N²) memory:
    exact up to 2,000 cells, on landmarks above. A run takes 50–700
    iterations.
    {landmarks}
    The convex embedding learns a kernel, not a graph: the graph over the
    landmarks whose skeleton is written is their symmetrised ``n_neighbors``
    nearest-neighbour graph, the neighbourhood N(D) of the MVU loss (29).

    Scale: the loss is weighed in units of its own curvature under a uniform
    stretch of the data (``loss_weight``), so that the distance-spreading
    regularizer -α tr K̃ stretches the data by about α/``loss_weight`` for
    every loss; the default 10 is the "losses scaled by 10" of the paper's
    Table 1. The spectral regularizers (41)–(44) pull the top d eigenvalues of
    K̃ towards α/γ (1,000 with the defaults α = 1, γ = 10⁻³ of Table 1), so
    they act relative to the size of the data: with ``standardize=True``
    (default) the centred cells are divided by their root mean squared norm
    (tr K of the data = N), which puts a few hundred cells at the scale of
    Table 1 whatever the units of ``use_rep``; for many more cells lower γ
    (about α over the top eigenvalue you expect). ``uns[key]["eigenvalues"]``
    shows where the spectrum of K̃ ended up.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``: the points whose
        squared distances D are the target.
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``.
    n_components
        d, the embedding dimension and the d of the partitioned regularizers
        (19)–(20), (41)–(44); 1 ≤ d < N. Default 2.
    loss
        ``"kpca"`` (22) ||H(D - D̂)H||², ``"squared"`` (23) ||D - D̂||²,
        ``"sammon"`` (26) Σ (D - D̂)²/D, ``"mvu"`` (29) the regularized-MVU
        loss on the ``n_neighbors`` neighbourhood (default),
        ``"exp_bregman"`` (31) the exponential Bregman divergence with scale
        ``sigma``, ``"sne"`` (34)–(35) the matrix-wise SNE divergence of the
        paper's experiments, ``"sne_rows"`` (32)–(33) its row-wise form.
    regularizer
        ``"trace"`` (16) β tr K̃, ``"neg_trace"`` (17) -α tr K̃ (MVU),
        ``"partitioned"`` (41) (γ = 0: eq. 19; not convex, a local
        minimum), ``"completed_square"`` (42) and ``"biconjugate"``
        (43)–(44) (default), the two convex relaxations of (41).
    n_neighbors
        k of the neighbourhood N(D) of the ``"mvu"`` loss (symmetrised
        k-nearest neighbours; the graph must be connected) and of the default
        ``sigma``. Default 10.
    alpha
        α ≥ 0, weight spreading the top d directions (17), (19), (41)–(44).
    beta
        β ≥ 0, weight shrinking the other directions (16), (19), (41)–(44).
    gamma
        γ, quadratic smoother of (41)–(44); > 0 for ``"completed_square"`` and
        ``"biconjugate"``, ≥ 0 for ``"partitioned"``. Default 10⁻³.
    sigma
        σ > 0, scale of the exponential in ``"exp_bregman"`` (31) and of the
        transfers p ∝ exp(-D/σ) of ``"sne"``/``"sne_rows"``, in squared units of
        the (standardised) representation. Default (``None``): the median
        squared distance from a cell to its ``n_neighbors``-th neighbour.
    loss_weight
        Weight of the loss in units of its uniform-stretch curvature (see
        Scale above). Default 10 (Table 1). With ``"neg_trace"`` (or
        ``"partitioned"`` with γ = 0) the exponential and SNE losses need it
        large enough for the problem to be bounded; a ValueError says how much.
    standardize
        Divide the centred representation by its root mean squared norm before
        fitting (see Scale above). ``False`` fits ``use_rep`` as it is.
    maxiter, tol
        At most ``maxiter`` L-BFGS iterations; stop when the last 10 lowered
        the objective by at most ``tol`` per iteration (relative) and the
        certificate of a global minimum holds.
    {n_landmarks}
    key_added
        Key of the results; default ``"convex_embedding"``.
    random_state
        Seed of the k-means landmarks; the exact fit (every cell) is
        deterministic (it starts from the data's own centred kernel) and
        only records it.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.obsm[f"X_{key}"]``
        X̂, the N × d truncated embedding.
    ``adata.uns[key]``
        ``method`` (``"convex_embedding"``), ``params``, ``objective`` (value
        of (14) per iteration, non-increasing), ``n_iter`` (iterations),
        ``converged``,
        ``reconstruction_loss`` (L(D(X̂X̂ᵀ); D), the paper's quality figure),
        ``loss_value`` and ``regularizer_value`` (at K̃, before truncation),
        ``loss_scale`` (the weight on the loss in its raw units),
        ``eigenvalues`` (all N eigenvalues of K̃, descending: how much of it
        the top d hold).

    The exact fit learns no graph, so ``tl.root``/``tl.pseudotime`` need the
    landmark fit (or a tree fitted on ``X_{key}``).
    {landmark_fields}
    Examples
    --------
    >>> import scanpy as sc
    >>> import scskeleton as sks
    >>> adata = sks.datasets.sine_surface(150, width=8.0)
    >>> sks.tl.convex_embedding(adata)
    >>> sc.pl.embedding(adata, basis="convex_embedding", color="true_u")
    """
    inputs = read_input(adata, key_added=key_added, method="convex_embedding", use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state)
    use_rep, data = inputs.use_rep, inputs.data
    n_cells = data.shape[0]
    n_landmarks = landmark_count(n_landmarks, n_cells, limit=core.MAX_POINTS, default=DEFAULT_CONVEX_LANDMARKS,
                                 name="convex_embedding")
    if not isinstance(standardize, bool):
        raise ValueError(f"standardize must be True or False; got {standardize!r}.")
    raw = data
    centred = data - data.mean(axis=0)
    scale = float(np.sqrt(np.mean(np.sum(centred**2, axis=1)))) if standardize else 1.0
    if scale <= 0:
        raise ValueError(f"All cells coincide in {use_rep!r} (zero spread); there is nothing to embed.")
    data = data / scale
    points = fit_points(data, n_landmarks, inputs.random_state)
    n_points = points.shape[0]

    # an iteration costs O(N³): show the bar from about 800 cells (runs of tens of seconds)
    with fit_run(
        "convex embedding", inputs, maxiter=maxiter, size=n_points**3 // 100, dense=True,
        detail=f" ({loss} loss, {regularizer} regularizer"
        + ("" if n_landmarks is None else f", over {n_landmarks} k-means landmarks") + ")",
    ) as run:
        result = core.convex_embedding(
            points,
            n_components=n_components,
            loss=loss,
            regularizer=regularizer,
            n_neighbors=n_neighbors,
            alpha=alpha,
            beta=beta,
            gamma=gamma,
            sigma=sigma,
            loss_weight=loss_weight,
            maxiter=maxiter,
            tol=tol,
            callback=run.callback,
        )
        graph = None
        if n_landmarks is not None:
            edges = knn_edges(points, n_neighbors)
            neighbourhood = from_edges(edges, np.ones(edges.shape[0]), n_points)
            graph = landmark_graph(raw, points * scale, result.embedding, neighbourhood)
    if not result.converged:
        warn_unconverged("The convex embedding", after=f"maxiter={maxiter} iterations", note=f" (tol={tol})",
                         what="it")

    own = {
        "n_components": n_components,
        "loss": loss,
        "regularizer": regularizer,
        "n_neighbors": n_neighbors,
        "alpha": alpha,
        "beta": beta,
        "gamma": gamma,
        "loss_weight": loss_weight,
        "standardize": standardize,
        "scale": scale,
    }
    params = fit_params(inputs, data.shape[1], own, maxiter=maxiter, tol=tol)
    if np.isfinite(result.sigma):  # only the exponential and SNE losses have a σ
        params["sigma"] = result.sigma
    uns = {
        "reconstruction_loss": float(result.reconstruction_loss),
        "loss_value": float(result.loss_value),
        "regularizer_value": float(result.regularizer_value),
        "loss_scale": float(result.loss_scale),
        "eigenvalues": result.eigenvalues,
    }
    top = result.eigenvalues[:n_components].sum() / max(result.eigenvalues.sum(), 1e-300)
    summary = cell_graph_summary(f"{result.n_iter} iterations, reconstruction loss {result.reconstruction_loss:.4g}, "
                                 f"top {n_components} eigenvalues hold {100 * top:.1f} % of tr K̃", graph)
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_cell_graph(
        target, inputs.key, method="convex_embedding", graph=graph, space=use_rep, params=params, uns=uns,
        latent=result.embedding, objective=result.objective, n_iter=result.n_iter, converged=result.converged,
    ))


landmark_docs(convex_embedding, limit=core.MAX_POINTS, default=DEFAULT_CONVEX_LANDMARKS)
