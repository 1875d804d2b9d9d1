"""Embedding via structure learning (ESL): Algorithm 1 of Wang & Li.

Wang & Li, "Learning low-dimensional latent graph structures: a density
estimation approach", IEEE Transactions on Neural Networks and Learning Systems,
2020, §III. The dual (20) of the
density estimation problem (19) is a convex program over non-negative edge
weights W:

    min_W  f(W) = -(m/2) log det(I + 4L) + λ Σ_{i,j} w_ij (1 - p̄_ij),   0 ≤ w_ij ≤ C,

with p̄_ij = (p_{j|i} + p_{i|j}) / 2 the symmetrised perplexity affinities of
eq. (1) and L = diag(W1) - W. W is symmetric (its gradient is, eq. 23), so the
variables here are the undirected weights w_e = w_ij = w_ji on candidate edges
and the sum Σ_{i,j} runs over ordered pairs, i.e. twice over each edge:

    f(w) = -(m/2) log det(I + 4L(w)) + 2λ Σ_e w_e (1 - p̄_e),
    ∂f/∂w_e = 2λ(1 - p̄_e) - 2m (Q⁻¹_ii + Q⁻¹_jj - 2Q⁻¹_ij),      Q = I + 4L.

At W = 0 (Q = I) the gradient is 2λ(1 - p̄_e) - 4m, so some edge leaves zero
exactly when λ < 2m / (1 - p̄_e); with λ = λ^v λ^u, λ^u = min_e 2m / (1 - p̄_e)
(eq. 26) and 0 < λ^v < 1, every edge starts downhill and the trivial solution
W = 0 is excluded. Dividing f by m shows that the learned W does not depend
on m: λ^v alone sets the trade-off.

The decoder (§III-D) splits the learned graph into its connected components
and embeds each by kernel PCA of its block of m·Q⁻¹ (eq. 28), centred on the
component's own mean.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.sparse import csgraph

from .affinities import symmetric_edge_affinities
from ..embed import kernel_pca_per_component
from ..graphs import fewest_neighbours, from_edges
from .logdet import candidate_edges, check_candidate_edges, check_dense_size, laplacian_logdet, minimize_box
from ..validation import as_float_matrix, check_integer, check_positive

#: With ``n_neighbors=None``, all pairs are candidates up to this many points;
#: above, the symmetrised 3·perplexity nearest neighbours (as Barnes–Hut t-SNE).
#: L-BFGS-B over N(N-1)/2 weights dominates time and memory beyond it.
MAX_ALL_PAIRS = 1000

#: Learned weights at or below this fraction of C count as zero when the
#: graph is split into components. L-BFGS-B leaves most inactive weights at
#: exactly 0 (the bound); the threshold only removes the round-off residue of
#: weights that were still on their way to the bound when it stopped.
ZERO_WEIGHT = 1e-6


@dataclass(frozen=True)
class ESLResult:
    """Output of :func:`esl`.

    Attributes
    ----------
    coordinates
        N × m embedding; each connected component decoded on its own (eq. 28)
        and centred at the origin.
    labels
        Connected component of every point, 0 … n_structures - 1, largest
        component first.
    adjacency
        Learned W as a symmetric N × N CSR matrix (weights ≤ ZERO_WEIGHT · C dropped).
    edges, weights
        Candidate edges (E × 2) and their optimal weights as returned by the solver.
    affinities
        p̄_e = (p_{j|i} + p_{i|j}) / 2 on the candidate edges.
    bandwidths
        σ_i of eq. (1) for every point.
    lam, lam_u
        λ = λ^v λ^u used in (20) and λ^u of eq. (26).
    eigenvalues
        n_structures × m: the kernel eigenvalues kept for each component.
    n_neighbors
        Candidate neighbours per point used (N - 1: all pairs).
    objective
        f(W) of eq. (22) after every L-BFGS-B iteration.
    n_iter, converged
        L-BFGS-B iterations; whether it met its stopping rule.
    """

    coordinates: np.ndarray
    labels: np.ndarray
    adjacency: sparse.csr_matrix
    edges: np.ndarray
    weights: np.ndarray
    affinities: np.ndarray
    bandwidths: np.ndarray
    lam: float
    lam_u: float
    eigenvalues: np.ndarray
    n_neighbors: int
    objective: np.ndarray
    n_iter: int
    converged: bool

    @property
    def n_structures(self) -> int:
        return int(self.labels.max()) + 1


def resolve_neighbors(n_points: int, perplexity: float, n_neighbors: int | None) -> int:
    """Candidate neighbours per point; N - 1 means all pairs (see MAX_ALL_PAIRS)."""
    if n_neighbors is not None:
        return n_neighbors
    if n_points <= MAX_ALL_PAIRS:
        return n_points - 1
    return min(3 * int(np.ceil(perplexity)), n_points - 1)


def check_esl_parameters(
    n_points: int, *, n_components: int, perplexity: float, lam: float, C: float, n_neighbors: int | None
) -> None:
    """Validate ESL's parameters against the number of points, before any work."""
    check_dense_size(n_points, "ESL")
    if n_points < 3:
        raise ValueError(f"ESL needs at least 3 points; got {n_points}.")
    check_integer("n_components", n_components, low=1, high=n_points, role="m, the embedding dimension")
    check_positive("C", C, role="upper bound of the edge weights in (20)")
    check_positive("lam", lam, role="λ^v of eq. (26)")
    if not lam < 1:
        raise ValueError(
            f"lam (λ^v) must lie in (0, 1); got {lam!r}. With λ^v ≥ 1 the trivial graph W = 0 can be optimal "
            "(eq. 26); the paper uses values such as 0.6–0.9 (larger: sparser, smoother graph)."
        )
    check_positive("perplexity", perplexity, role="u of eq. (1)")
    if not perplexity < n_points - 1:
        raise ValueError(
            f"perplexity must be below the number of other points ({n_points - 1}); got {perplexity!r}. "
            "Lower it (typical values: 5–50)."
        )
    if n_neighbors is not None:
        check_integer("n_neighbors", n_neighbors, low=1, high=n_points - 1, role="candidate edges per point")
        if not perplexity < n_neighbors:
            raise ValueError(
                f"perplexity ({perplexity!r}) must be below n_neighbors ({n_neighbors}): the affinities of "
                "eq. (1) are normalised over the candidate neighbours. Use n_neighbors ≥ 3 · perplexity, "
                "or n_neighbors=None for all pairs."
            )


def upper_lambda(cost: np.ndarray, n_components: int) -> float:
    """λ^u = min_e 2m / (1 - p̄_e) of eq. (26), from the costs 1 - p̄_e of the candidate edges."""
    return 2.0 * n_components / float(cost.max())


def objective(weights: np.ndarray, edges: np.ndarray, n_points: int, *, cost: np.ndarray, lam: float,
              n_components: int) -> tuple[float, np.ndarray]:
    """f(w) of eq. (22) and its gradient (23) in undirected weights:
    f = -(m/2) log det(I + 4L) + 2λ Σ_e w_e (1 - p̄_e), one Cholesky factorisation."""
    logdet = laplacian_logdet(edges, weights, n_points, shift=1.0, scale=4.0)
    linear = 2.0 * lam * cost
    half_m = n_components / 2.0
    return -half_m * logdet.value + float(linear @ weights), linear - half_m * logdet.edge_gradient


def esl(
    points: np.ndarray,
    *,
    n_components: int = 2,
    perplexity: float = 30.0,
    lam: float = 0.9,
    C: float = 1.0,
    n_neighbors: int | None = None,
    maxiter: int = 1000,
    tol: float = 1e-9,
    edges: np.ndarray | None = None,
    callback: Callable[[int, float], None] | None = None,
) -> ESLResult:
    """Algorithm 1: affinities, λ by eq. (26), W by L-BFGS-B on (20), per-component KPCA.

    ``points`` is N × D. Candidate edges are the symmetrised
    ``n_neighbors``-nearest-neighbour graph (N - 1: all pairs, the paper);
    ``None`` takes all pairs up to MAX_ALL_PAIRS points and the 3·perplexity
    nearest neighbours above (affinities of eq. 1 then normalised over them).
    L-BFGS-B stops at relative decrease < ``tol`` or after ``maxiter``
    iterations. ``edges`` (E × 2 point pairs, e.g. the kNN graph of
    ``sc.pp.neighbors``) gives the candidate edges directly instead of
    ``n_neighbors``; the affinities are then normalised over each point's
    neighbours on it, which must outnumber the perplexity. Raises ValueError
    when the solution is the trivial W = 0.
    """
    points = as_float_matrix(points, "points")
    n_points = points.shape[0]
    check_esl_parameters(n_points, n_components=n_components, perplexity=perplexity, lam=lam, C=C,
                         n_neighbors=n_neighbors)
    check_integer("maxiter", maxiter, low=1)
    check_positive("tol", tol)

    if edges is not None:
        edges = check_candidate_edges(edges, n_points)
        neighbours = fewest_neighbours(edges, n_points)
        if not perplexity < neighbours:
            raise ValueError(
                f"perplexity ({perplexity!r}) must be below the fewest neighbours of a point in the given graph "
                f"({neighbours}): the affinities of eq. (1) are normalised over them. Lower perplexity, or build "
                "the graph with more neighbours, e.g. "
                f"sc.pp.neighbors(adata, n_neighbors={3 * int(np.ceil(perplexity)) + 1})."
            )
        all_pairs = False
    else:
        neighbours = resolve_neighbors(n_points, perplexity, n_neighbors)
        all_pairs = neighbours == n_points - 1
        edges = candidate_edges(points, None if all_pairs else neighbours)
    affinity = symmetric_edge_affinities(points, edges, perplexity, all_pairs=all_pairs)
    cost = 1.0 - affinity.symmetric
    lam_u = upper_lambda(cost, n_components)
    lam_total = lam * lam_u

    def value_and_gradient(weights: np.ndarray) -> tuple[float, np.ndarray]:
        return objective(weights, edges, n_points, cost=cost, lam=lam_total, n_components=n_components)

    solution = minimize_box(value_and_gradient, np.zeros(edges.shape[0]), upper=C, maxiter=maxiter, tol=tol,
                            callback=callback)
    kept = solution.weights > ZERO_WEIGHT * C
    if not kept.any():
        raise ValueError(
            f"ESL returned the trivial solution W = 0 (no edge weight above {ZERO_WEIGHT:g} · C). "
            f"Decrease lam (λ^v = {lam:g}) towards 0.5, or increase C (= {C:g})."
        )
    adjacency = from_edges(edges[kept], solution.weights[kept], n_points)
    labels = _components_by_size(adjacency)

    decoder = laplacian_logdet(edges[kept], solution.weights[kept], n_points, shift=1.0, scale=4.0)
    coordinates, spectra = kernel_pca_per_component(n_components * decoder.inverse, labels, n_components)
    return ESLResult(
        coordinates=coordinates,
        labels=labels,
        adjacency=adjacency,
        edges=edges,
        weights=solution.weights,
        affinities=affinity.symmetric,
        bandwidths=affinity.bandwidths,
        lam=lam_total,
        lam_u=lam_u,
        eigenvalues=np.vstack(spectra),
        n_neighbors=neighbours,
        objective=solution.objective,
        n_iter=solution.n_iter,
        converged=solution.converged,
    )


def _components_by_size(adjacency: sparse.csr_matrix) -> np.ndarray:
    """Connected-component labels renumbered largest first (ties: lowest first point)."""
    _, raw = csgraph.connected_components(adjacency, directed=False)
    sizes = np.bincount(raw)
    first = np.full(sizes.size, raw.size)
    np.minimum.at(first, raw, np.arange(raw.size))
    order = np.lexsort((first, -sizes))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[raw]
