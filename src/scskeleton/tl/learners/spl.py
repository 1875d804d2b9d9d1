"""``tl.spl``: structured projection learning (similarity graph, projection and embedding)."""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import neighbors_edges
from ..._core.cellgraphs import spl as core
from ..._core.cellgraphs.landmarks import DEFAULT_LANDMARKS, landmark_graph
from ..._core.cellgraphs.logdet import MAX_DENSE_POINTS
from ..._core.graphs import fewest_neighbours
from .landmarks import fit_points, landmark_count, landmark_docs
from .recipe import (
    cell_graph_summary,
    finish,
    fit_params,
    fit_run,
    landmark_detail,
    read_input,
    write_cell_graph,
)

#: k of the kNN graph S lives on when neither n_neighbors nor neighbors_key is given (the paper's setting).
DEFAULT_NEIGHBORS = 10


def spl(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_components: int = 2,
    n_neighbors: int | None = None,
    neighbors_key: str | None = None,
    gamma: float = 1e-3,
    C: float = 1e3,
    phi_scale: float | None = None,
    maxiter: int = 500,
    tol: float = 1e-10,
    n_landmarks: int | None = None,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a similarity graph, a projection and an embedding by structured projection learning.

    L. Wang, "Probabilistic dimensionality reduction via structure learning",
    arXiv preprint, 2016 (IEEE TPAMI, 2019, with Q. Mao), §3.3, Algorithm 1
    (numbered as in the preprint). A PPCA likelihood
    y_i = W x_i + ε with noise precision γ (eq. 5) is combined with
    expected-distance constraints on the kNN graph; the dual (17) learns a
    symmetric S ≥ 0 on the graph's edges and an orthonormal projection W
    (D × d). With Q = diag(S1) - S + (γ + 1)/4·I, W is the top-d eigenvectors
    of YᵀQ⁻¹Y, and the embedding is the MAP estimate X = (γ/4)Q⁻¹YW
    (eq. 22), or kernel PCA of (4L + I)⁻¹ when γ = 0 (eq. 23).

    The gradient is derived from (17) by the envelope theorem,
    ∂f/∂s_ij = (d/2)(Q⁻¹_ii + Q⁻¹_jj - 2Q⁻¹_ij) + (γ²/8)‖x̃_i - x̃_j‖²
    - 2φ_ij - s_ij/C with x̃ = Q⁻¹YW (so the N × N matrix P of (20) is never
    formed); it equals the printed (20) when the sums of (17) count each edge
    in both directions. (21) as printed has the wrong sign on γTr(XᵀYW); the
    embedding follows the algebra of the posterior, which gives (22).

    Solver. f is concave in S, so (17) has one maximum over S ≥ 0. Algorithm
    1 climbs it by projected subgradient steps α_t = 1/t; those steps ignore
    f's curvature (which scales with φ⁻²), overshoot and leave S = 0 — plain
    PCA — as the best iterate on most of the paper's own Table 1 grid on
    iris. The same problem is solved here by L-BFGS-B on rescaled weights
    (see :func:`scskeleton._core.cellgraphs.spl.spl`), which reaches the
    sparse optimum in a few dozen iterations: most kNN edges end at exactly
    s_ij = 0. ``objective`` records f after each iteration (non-decreasing).

    Work and memory are O(N³ + N²·D) per iteration and O(N²) (dense Q):
    exact up to 5,000 cells, on landmarks above.
    {landmarks}
    Distances and units. φ_ij = ‖y_i - y_j‖² / ``phi_scale``, i.e. (17) is
    fitted to Y/√phi_scale (the embedding is reported in the units of Y). The
    default is the total variance of Y over 2d (see
    :func:`scskeleton._core.cellgraphs.spl.default_phi_scale`), which makes
    the fit independent of the units of Y. ``phi_scale=1`` gives the paper's
    raw distances. If every neighbour is too far apart for the prior
    (φ_ij ≥ 2d/(γ + 1) on every edge), the optimum is S = 0 and the
    embedding is the PCA projection; a warning says so.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``: Y, centred per feature.
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``.
    n_components
        d, dimension of the embedding and of W (≤ the number of features).
        Default 2.
    n_neighbors
        k of the symmetrised kNN graph on which S lives (1 ≤ k < N). ``None``
        (default): 10, the paper's setting for its synthetic data.
    neighbors_key
        Instead of building that graph: reuse the kNN graph of
        ``sc.pp.neighbors`` stored under ``adata.uns[neighbors_key]``
        (``"neighbors"`` for its default ``key_added``), symmetrised; the
        distances φ stay those of ``use_rep``. Not with ``n_neighbors`` nor with
        landmarks. ``params`` records it, and as ``n_neighbors`` the fewest
        neighbours of a cell in it.
    gamma
        γ ≥ 0, noise precision of the likelihood (eq. 5). Small values
        (default 1e-3, the paper's choice) keep the data's shape; γ = 0
        learns S from the distances only and embeds by KPCA.
    C
        C > 0 (``np.inf`` allowed): distances may be exceeded by
        ξ_ij = s_ij/(2C) (Proposition 1). Default 1e3 (the paper's choice).
    phi_scale
        Divisor of the squared distances; ``None`` for the default above.
    maxiter, tol
        L-BFGS-B stops after ``maxiter`` iterations or when f changes by
        less than ``tol`` (relative) in one iteration. Defaults 500 and 1e-10.
    {n_landmarks}
    key_added
        Key of the results; default ``"spl"``.
    random_state
        Seed of the k-means landmarks; the exact fit (every cell) is
        deterministic ((17) is concave; the solver starts at S = 0) and only
        records it.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.obsm[f"X_{key}"]``
        X, the N × d embedding (eq. 22, or KPCA when γ = 0).
    ``adata.obsp[f"{key}_connectivities"]``
        S, the learned symmetric sparse similarity (exact zeros dropped).
    ``adata.uns[key]``
        ``method`` (``"spl"``), ``params`` (every parameter used, with the
        resolved ``phi_scale``), ``projection`` (W, D × d), ``objective``
        (f(S) after each iteration, non-decreasing), ``n_iter``,
        ``converged``, ``n_nonzero`` (non-zeros of S, both triangles).
    {landmark_fields}
    Examples
    --------
    >>> import scskeleton as sks
    >>> adata = sks.datasets.circle(200)
    >>> sks.tl.spl(adata)
    >>> sks.pl.cell_graph(adata, "spl", color="true_angle")
    """
    inputs = read_input(adata, key_added=key_added, method="spl", use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state)
    data = inputs.data
    n_landmarks = landmark_count(n_landmarks, data.shape[0], limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS,
                                 name="SPL")
    edges = neighbors_edges(adata, neighbors_key, n_neighbors=n_neighbors, n_landmarks=n_landmarks, method="SPL")
    if edges is None and n_neighbors is None:
        n_neighbors = DEFAULT_NEIGHBORS
    elif edges is not None:
        n_neighbors = fewest_neighbours(edges, adata.n_obs)
    points = fit_points(data, n_landmarks, inputs.random_state)
    n_points = points.shape[0]

    with fit_run("SPL", inputs, maxiter=maxiter, size=n_points * n_points, dense=True,
                 detail=landmark_detail(n_landmarks)) as run:
        result = core.spl(
            points,
            n_components=n_components,
            n_neighbors=n_neighbors,
            gamma=gamma,
            C=C,
            phi_scale=phi_scale,
            maxiter=maxiter,
            tol=tol,
            edges=edges,
            callback=run.callback,
        )
        graph = None if n_landmarks is None else landmark_graph(data, points, result.embedding, result.similarity)
    if result.n_nonzero == 0:
        logg.warning(f"SPL connected no two cells at phi_scale={result.phi_scale:.3g}, so the embedding is the plain "
                     "PCA projection and shows no structure. Pass a larger phi_scale, or leave it at None to scale "
                     "it to the data.")

    own = {"n_components": n_components, "n_neighbors": n_neighbors, "gamma": gamma, "C": C,
           "phi_scale": result.phi_scale}
    params = fit_params(inputs, data.shape[1], own, maxiter=maxiter, tol=tol, neighbors_key=neighbors_key)
    uns = {"projection": result.projection, "n_nonzero": result.n_nonzero}
    edges_found = f"{result.n_iter} iterations, {result.n_nonzero // 2} of {result.edges.shape[0]} candidate edges"
    return finish(adata, copy=copy, run=run, summary=cell_graph_summary(edges_found, graph),
                  write=lambda target: write_cell_graph(
                      target, inputs.key, method="spl", graph=graph, space=inputs.use_rep, params=params, uns=uns,
                      latent=result.embedding, connectivities=result.similarity, objective=result.objective,
                      n_iter=result.n_iter, converged=result.converged,
                  ))


landmark_docs(spl, limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS)
