"""``tl.mpme``: sparse similarity graph and embedding by maximum posterior manifold embedding."""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import neighbors_edges
from ..._core.cellgraphs import mpme as core
from ..._core.cellgraphs.landmarks import DEFAULT_LANDMARKS, landmark_graph
from ..._core.cellgraphs.logdet import MAX_DENSE_POINTS
from .landmarks import fit_points, landmark_count, landmark_docs
from .recipe import (
    cell_graph_summary,
    finish,
    fit_params,
    fit_run,
    landmark_detail,
    read_input,
    warn_unconverged,
    write_cell_graph,
)


def mpme(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_components: int = 2,
    lam: float = 0.3,
    C: float = 10.0,
    n_neighbors: int | None = None,
    neighbors_key: str | None = None,
    sigma: float | None = None,
    phi_scale: float | None = None,
    decoder: str = "kpca",
    maxiter: int = 1000,
    tol: float = 1e-12,
    n_landmarks: int | None = None,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a sparse positive similarity graph over the cells and embed them (MPME).

    Mao, Wang & Tsang, "A unified probabilistic framework for robust manifold
    learning and embedding", Machine Learning 106, 627–650, 2017, Algorithm 1. The posterior of the embedding is
    N(0, (L + λI)⁻¹) per dimension (eqs. 8, 11), with L the Laplacian of a
    similarity W learned from the pairwise distances φ by the convex
    box-constrained dual problem (13),

        max_W  log det(diag(W1) - W + λI) - (1/d) Σ_{j<i} w_ij φ_ij,   0 ≤ w_ij ≤ 4C,

    solved by L-BFGS-B with the analytic gradient (14)
    Tr(Q⁻¹A_ij) - φ_ij/d = Q⁻¹_ii + Q⁻¹_jj - 2Q⁻¹_ij - φ_ij/d, one Cholesky
    factorisation of Q = L + λI per evaluation. The objective never decreases.
    W is sparse: a pair keeps a positive weight only where its expected
    embedded distance matches φ (KKT conditions, §3.3), which gives a
    skeleton-like graph. The embedding is kernel PCA of (L + λI)⁻¹ (eq. 17),
    or the generalised eigenproblem (16).

    Work and memory are O(N³) and O(N²) (dense Q): exact up to 5,000 cells,
    on landmarks above.
    {landmarks}
    Distances and units. φ_ij = ‖y_i - y_j‖² / ``phi_scale``, so the model is
    fitted to the data divided by √phi_scale. By default ``phi_scale`` is
    the mean squared distance between cells (twice the total variance), which
    makes λ and C dimensionless and the defaults independent of the units of
    ``use_rep``; ``phi_scale=1`` gives the paper's raw distances. Since
    Tr(Q⁻¹A_ij) ≤ 2/λ, only pairs with φ_ij < 2d/λ can get a positive
    weight; √(d/λ) is the length (in units of √phi_scale) over which the
    posterior correlates cells.

    Tuning. ``lam`` sets the smoothing: smaller values join more of the data
    into one smooth structure, larger values cut it into pieces. On the
    generated data (C = ∞): the distorted S becomes a smooth bell
    for λ = 0.3–10, the circle stays a closed loop up to λ ≈ 3, the two
    moons split into two components from λ ≈ 3, and branching data
    (``sks.datasets.branching`` + ``sc.pp.pca``) keeps its branches up to
    λ ≈ 10 (one piece per branch beyond). ``C`` sets the sparsity: larger C,
    sparser W and smoother skeleton (Fig. 2 of the paper); C = ∞ is the
    paper's setting for skeletons.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``: the representation y_i.
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``.
    n_components
        d, dimension of the embedding; φ enters (13) as φ/d. Default 2.
    lam
        λ > 0, precision of the prior N(0, λ⁻¹I) (eq. 8), in units of
        1/phi_scale. Default 0.3: the posterior correlates cells over
        √(d/λ) ≈ 2.6 times the root-mean-square distance between cells, so
        the whole data set is one embedding (at C = 10; the circle and the
        two moons keep their shape for λ = 0.1–3).
    C
        C > 0 or ``np.inf``: every weight is bounded by 4C (eq. 13), in
        units of 1/φ. Default 10: no pair is tied more firmly than a pair at
        φ = d/(4C) (5 % of the mean squared distance between cells for
        d = 2), so the ties among closer cells, which differ by noise, are
        shared among them rather than given to a single edge. This keeps
        local class structure better than C = ∞ while the circle, the moons
        and branching data keep their shape. ``np.inf`` is the paper's setting for skeletons
        (sparsest W, Fig. 2); at C = ∞ coinciding cells (φ = 0), which would
        take an infinite weight, are capped at 10·d/φ_min (φ_min the
        smallest positive φ) and logged.
    n_neighbors
        Candidate pairs. ``None``: every pair up to 500 cells, the symmetrised
        30-nearest-neighbour graph above (O(N·k) variables; on the generated
        data its optimum matches the all-pairs one). An integer k: the
        symmetrised k-NN graph (1 ≤ k < N; k = N - 1 is all pairs).
    neighbors_key
        Instead of building the candidate graph: reuse the kNN graph of
        ``sc.pp.neighbors`` stored under ``adata.uns[neighbors_key]``
        (``"neighbors"`` for its default ``key_added``), symmetrised; the
        distances φ stay those of ``use_rep``. Not with ``n_neighbors`` nor with
        landmarks. ``params`` records it, and as ``n_neighbors`` the fewest
        neighbours of a cell in it.
    sigma
        ``None``: φ is the squared Euclidean distance. A positive value: the
        Gaussian-kernel distance φ_ij = 2 - 2·exp(-‖y_i - y_j‖²/sigma) (§3.2),
        sigma in squared units of ``use_rep``.
    phi_scale
        Divisor of φ. ``None``: the mean squared distance between cells for
        the Euclidean φ, 1 for the Gaussian-kernel φ. 1 reproduces the paper.
    decoder
        ``"kpca"``: kernel PCA of (L + λI)⁻¹ (eq. 17), the paper's setting.
        ``"eigenmap"``: the d smallest solutions of (L + λI)F = D_λFΛ with
        D_λ = diag((W + λI)1) and FᵀD_λF = I (eq. 16); for λ → 0 this is a
        Laplacian eigenmap of the learned graph. The first column keeps one
        sign and varies little (the eigenmap's trivial eigenvector), so ask
        for one component more than you plot.
    maxiter, tol
        L-BFGS-B stops after ``maxiter`` iterations or when the relative
        decrease of the objective falls below ``tol``.
    {n_landmarks}
    key_added
        Key of the results; default ``"mpme"``.
    random_state
        Seed of the k-means landmarks; the exact fit (every cell) is
        deterministic (convex problem (13) solved from W = 0) and only records it.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.obsm[f"X_{key}"]``
        X, the N × d embedding (eq. 17 or 16).
    ``adata.obsp[f"{key}_connectivities"]``
        W, the learned symmetric sparse similarity (exact zeros dropped).
    ``adata.uns[key]``
        ``method`` (``"mpme"``), ``params`` (every parameter used, with the
        resolved ``phi_scale`` and ``n_neighbors``), ``objective`` (value of
        (13) per L-BFGS-B iteration, non-decreasing), ``n_iter``,
        ``converged``, ``n_nonzero`` (non-zeros of W, both triangles, as
        'nz' in Fig. 2 of the paper), ``eigenvalues`` (of the decoder).
    {landmark_fields}
    Examples
    --------
    >>> import scskeleton as sks
    >>> adata = sks.datasets.distorted_s(100)
    >>> sks.tl.mpme(adata)
    >>> sks.pl.cell_graph(adata, "mpme", color="true_position")
    """
    inputs = read_input(adata, key_added=key_added, method="mpme", use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state)
    data = inputs.data
    n_landmarks = landmark_count(n_landmarks, data.shape[0], limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS,
                                 name="MPME")
    edges = neighbors_edges(adata, neighbors_key, n_neighbors=n_neighbors, n_landmarks=n_landmarks, method="MPME")
    points = fit_points(data, n_landmarks, inputs.random_state)
    n_points = points.shape[0]

    with fit_run("MPME", inputs, maxiter=maxiter, size=n_points * n_points, dense=True,
                 detail=landmark_detail(n_landmarks)) as run:
        result = core.mpme(
            points,
            n_components=n_components,
            lam=lam,
            C=C,
            n_neighbors=n_neighbors,
            sigma=sigma,
            phi_scale=phi_scale,
            decoder=decoder,
            maxiter=maxiter,
            tol=tol,
            edges=edges,
            callback=run.callback,
        )
        graph = None if n_landmarks is None else landmark_graph(data, points, result.embedding, result.similarity)
    if not result.converged:
        warn_unconverged("MPME", after=f"{result.n_iter} iterations", note=f" (optimizer: {result.message})",
                         what="the embedding")
    n_coinciding = int(np.count_nonzero(result.phi == 0))
    if n_coinciding and not np.isfinite(C):
        logg.info(f"    {n_coinciding} pairs of coinciding cells (φ = 0): with C = inf their weight is capped "
                  "at 10·d/φ_min instead of growing without limit")
    if result.n_nonzero == 0:
        logg.warning(f"MPME connected no two cells at lam={lam}, so the embedding shows no structure and should not "
                     "be used. Rerun with a smaller lam.")

    own = {
        "n_components": n_components,
        "lam": lam,
        "C": C,
        "n_neighbors": result.n_neighbors,
        "metric": "sqeuclidean" if sigma is None else "gaussian",
        "sigma": 0.0 if sigma is None else sigma,
        "phi_scale": result.phi_scale,
        "decoder": decoder,
    }
    params = fit_params(inputs, data.shape[1], own, maxiter=maxiter, tol=tol, neighbors_key=neighbors_key)
    uns = {"n_nonzero": result.n_nonzero, "eigenvalues": np.asarray(result.eigenvalues, dtype=float)}
    summary = cell_graph_summary(
        f"{result.n_iter} iterations, {result.n_nonzero // 2} edges", graph,
        on_landmarks=f"{result.n_iter} iterations, {result.n_nonzero // 2} learned edges",
    )
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_cell_graph(
        target, inputs.key, method="mpme", graph=graph, space=inputs.use_rep, params=params, uns=uns,
        latent=result.embedding, connectivities=result.similarity, objective=result.objective,
        n_iter=result.n_iter, converged=result.converged,
    ))


landmark_docs(mpme, limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS)
