"""``tl.esl``: embeddings of disconnected structures by embedding via structure learning."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from ..._anndata.inputs import neighbors_edges
from ..._anndata.schema import component_key
from ..._core.cellgraphs import esl as core
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


def esl(
    adata: AnnData,
    *,
    use_rep: str | None = "X_pca",
    n_pcs: int | None = None,
    n_components: int = 2,
    perplexity: float = 30.0,
    lam: float = 0.9,
    C: float = 1.0,
    n_neighbors: int | None = None,
    neighbors_key: str | None = None,
    maxiter: int = 1000,
    tol: float = 1e-9,
    n_landmarks: int | None = None,
    key_added: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    copy: bool = False,
) -> AnnData | None:
    """Learn a cell graph and embed each of its connected components (ESL).

    Wang & Li, "Learning low-dimensional latent graph structures: a density
    estimation approach", IEEE Transactions on Neural Networks and Learning
    Systems, 2020 (§III, Algorithm 1). The density of the embedding Y (m × N) is estimated
    under the constraints E‖y_i - y_j‖² ≤ λ(1 - p̄_ij) (eq. 16), where
    p̄_ij = (p_{j|i} + p_{i|j}) / 2 are the symmetrised t-SNE affinities of
    eq. (1), calibrated per cell to the perplexity u. Its dual (20) is a
    convex program over non-negative symmetric weights W:

        min_W  -(m/2) log det(I + 4L) + λ Σ_{i,j} w_ij (1 - p̄_ij),   0 ≤ w_ij ≤ C,

    solved by L-BFGS-B with the gradient (23)–(24), one Cholesky
    factorisation of Q = I + 4L per evaluation. λ = ``lam`` · λ^u with
    λ^u = min 2m / (1 - p̄_ij) (eq. 26), which rules out the trivial W = 0.
    The learned graph falls apart into connected components; each is embedded
    separately by kernel PCA of its block of m·Q⁻¹ (eq. 28, §III-D), centred
    at the origin — the components are separate structures with their own
    coordinates (draw them with ``sks.pl.cell_graph(adata, key,
    side_by_side=True)``).

    Work and memory are O(N³) and O(N²) (dense Q): exact up to 5,000 cells,
    on landmarks above.
    {landmarks}
    With landmarks, ESL's components (each embedded on its own, centred at
    the origin) are laid side by side along the first axis of ``X_{key}`` and
    of ``uns[key]["embedding"]``, so that they never overlap (``pl.tree(adata,
    key, basis=f"X_{key}")`` draws them apart); each cell belongs to the
    component of its nearest landmark.

    Tuning (§V-A of the paper). ``lam`` ∈ (0, 1) is the main knob: larger
    values give a sparser, smoother graph and split it into more components;
    the paper uses 0.6–0.9 (0.7 on its line + circle data, 0.83 on COIL20).
    Larger ``perplexity`` gives a denser graph. ``C`` matters least (the
    paper fixes C = 1). The learned W does not depend on ``n_components``
    (dividing (20) by m leaves λ^v as the only trade-off).

    Why the default is 0.9. At the optimum every pair, near or far, satisfies
    E‖y_i - y_j‖² ≤ λ(1 - p̄_ij) with p̄ ≈ 0 for all but a cell's ~u nearest
    neighbours, so an edge to a far cell costs almost the same as one to a
    near cell and only the small differences of p̄ keep the graph local. At
    λ^v = 0.7 those differences are too small to leave well-separated clusters
    apart, while at 0.9 each separate cluster is its own component. The paper
    notes the same on real data ("ESL needs a value close to 1", §V-A). The
    price: a single curve with a density dip can be cut there (a spiral may
    lose its sparse outer part); pass ``lam=0.7`` (the paper's setting for its line + circle data, Fig. 6)
    for one continuous structure.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``: the points x_i of eq. (1).
        ``None``: ``"X_pca"`` when present, else ``"X"`` (as scanpy).
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``.
    n_components
        m, the dimension of each component's embedding (eq. 28). Default 2.
    perplexity
        u of eq. (1), the effective number of neighbours of each cell;
        below the number of candidate neighbours. Default 30.
    lam
        λ^v ∈ (0, 1), λ = λ^v λ^u (eq. 26). Default 0.9 (see above).
    C
        Upper bound of every weight in (20) (the slack penalty of (19)). Default 1.
    n_neighbors
        Candidate pairs. ``None``: all pairs up to 1,000 cells (the paper),
        the symmetrised 3·perplexity nearest neighbours above (as Barnes–Hut
        t-SNE; L-BFGS-B over N(N-1)/2 weights takes most of the time and
        memory beyond). An integer k: the symmetrised k-NN graph, with the
        affinities of eq. (1) normalised over each cell's candidates
        (k = N - 1 is all pairs). Must exceed ``perplexity``.
    neighbors_key
        Instead of building the candidate graph: reuse the kNN graph of
        ``sc.pp.neighbors`` stored under ``adata.uns[neighbors_key]``
        (``"neighbors"`` for its default ``key_added``), symmetrised; the
        distances φ stay those of ``use_rep``. Not with ``n_neighbors`` nor with
        landmarks. ``params`` records it, and as ``n_neighbors`` the fewest
        neighbours of a cell in it, which must exceed ``perplexity``
        (the affinities of eq. (1) are normalised over them).
    maxiter, tol
        L-BFGS-B stops after ``maxiter`` iterations or when the relative
        decrease of the objective falls below ``tol``.
    {n_landmarks}
    key_added
        Key of the results; default ``"esl"``.
    random_state
        Seed of the k-means landmarks; the exact fit (every cell) is
        deterministic (convex problem (20) solved from W = 0) and only records it.
        {seed_kinds}
    {copy}

    Returns
    -------
    {returns_fields}

    ``adata.obsm[f"X_{key}"]``
        N × m coordinates; each component decoded on its own and centred at the origin.
    ``adata.obs[f"{key}_component"]``
        Categorical connected component of the learned graph ("0" is the largest).
    ``adata.obsp[f"{key}_connectivities"]``
        W, the learned symmetric sparse graph (weights ≤ 1e-6·C dropped).
    ``adata.uns[key]``
        ``method`` (``"esl"``), ``params`` (every parameter used, with the
        resolved ``n_neighbors``, λ as ``lam_total`` and λ^u as ``lam_u``),
        ``objective`` (f of eq. 22 per L-BFGS-B iteration, non-increasing),
        ``n_iter``, ``converged``, ``n_structures`` (number of components),
        ``eigenvalues`` (n_structures × m kernel eigenvalues kept per component).
    {landmark_fields}
    ``adata.obs[f"{key}_component"]`` is then the component of each cell's
    nearest landmark, ``n_structures`` counts the components of the learned
    landmark graph.

    Raises ValueError, before anything is written, when the solution is the
    trivial W = 0 (the message says which parameter to change).

    Examples
    --------
    >>> import scskeleton as sks
    >>> adata = sks.datasets.line_and_circle()
    >>> sks.tl.esl(adata)
    >>> sks.pl.cell_graph(adata, "esl", side_by_side=True, color="true_component")
    """
    inputs = read_input(adata, key_added=key_added, method="esl", use_rep=use_rep, n_pcs=n_pcs,
                        random_state=random_state)
    data = inputs.data
    n_landmarks = landmark_count(n_landmarks, data.shape[0], limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS,
                                 name="ESL")
    n_points = data.shape[0] if n_landmarks is None else n_landmarks
    edges = neighbors_edges(adata, neighbors_key, n_neighbors=n_neighbors, n_landmarks=n_landmarks, method="ESL")
    core.check_esl_parameters(n_points, n_components=n_components, perplexity=perplexity, lam=lam, C=C,
                              n_neighbors=n_neighbors)
    points = fit_points(data, n_landmarks, inputs.random_state)

    with fit_run("ESL", inputs, maxiter=maxiter, size=n_points * n_points, dense=True,
                 detail=landmark_detail(n_landmarks)) as run:
        result = core.esl(
            points,
            n_components=n_components,
            perplexity=perplexity,
            lam=lam,
            C=C,
            n_neighbors=n_neighbors,
            maxiter=maxiter,
            tol=tol,
            edges=edges,
            callback=run.callback,
        )
        graph = None if n_landmarks is None else landmark_graph(
            data, points, result.coordinates, result.adjacency, groups=result.labels
        )
    if not result.converged:
        warn_unconverged("ESL", after=f"{result.n_iter} iterations", what="the embedding")

    own = {
        "n_components": n_components,
        "perplexity": perplexity,
        "lam": lam,
        "lam_u": result.lam_u,
        "lam_total": result.lam,
        "C": C,
        "n_neighbors": result.n_neighbors,
        "zero_weight": core.ZERO_WEIGHT * C,
    }
    params = fit_params(inputs, data.shape[1], own, maxiter=maxiter, tol=tol, neighbors_key=neighbors_key)
    uns = {"n_structures": result.n_structures, "eigenvalues": np.asarray(result.eigenvalues, dtype=float)}
    components = component_key(inputs.key)
    summary = cell_graph_summary(
        f"{result.n_iter} iterations, {result.adjacency.nnz // 2} edges, {result.n_structures} component(s)", graph,
        on_landmarks=f"{result.n_iter} iterations, {result.adjacency.nnz // 2} learned edges, "
                     f"{result.n_structures} component(s)",
    )
    return finish(adata, copy=copy, run=run, summary=summary, write=lambda target: write_cell_graph(
        target, inputs.key, method="esl", graph=graph, space=inputs.use_rep, params=params, uns=uns,
        latent=result.coordinates, connectivities=result.adjacency,
        obs={components: _categories(result.labels, result.n_structures)},
        landmark_obs=None if graph is None else {
            components: _categories(graph.cell_groups, int(graph.node_groups.max()) + 1)},
        objective=result.objective, n_iter=result.n_iter, converged=result.converged,
    ))


def _categories(labels: np.ndarray, n_labels: int) -> pd.Categorical:
    """Component labels as the categorical ``obs`` column ("0" = largest)."""
    return pd.Categorical(labels.astype(str), categories=[str(c) for c in range(n_labels)])


landmark_docs(esl, limit=MAX_DENSE_POINTS, default=DEFAULT_LANDMARKS)
