"""The cells' multiscale diffusion space: coordinates whose distances are diffusion pseudotime.

Let K be the symmetric affinity matrix of a kNN graph of the cells
(``sc.pp.neighbors``' connectivities), D = diag(K 1) and T = D⁻¹ K the
random walk over it. Its eigenpairs T ψ_k = λ_k ψ_k come from the symmetric
S = D^{-1/2} K D^{-1/2} (same eigenvalues, ψ_k = D^{-1/2} φ_k), λ_0 = 1 ≥ λ_1 ≥ ….
Walks of every length together, M = Σ_{t≥1} T^t − (stationary part), have
eigenvalues λ_k / (1 − λ_k), so in the coordinates

    y_i = (λ_k / (1 − λ_k) · ψ_k(i))_{k = 1 … m}

the Euclidean distance ‖y_i − y_j‖ is the diffusion pseudotime distance of
Haghverdi et al. (2016, *Nat. Methods* 13:845, Eq. 4, truncated to m
components) and the multiscale space of Palantir (Setty et al. 2019, *Nat.
Biotechnol.* 37:451, Methods). Every walk length averages a cell with more of
its neighbours, so the noise of single cells, which dominates nearest-node
positions on sparse counts, averages out. m is set by the largest gap between
consecutive non-trivial eigenvalues (at least 3): components past the gap
describe within-state noise rather than the trajectory. Eigenvalues within
:data:`NEAR_ONE` of 1 are left out: the stationary vector carries no
distance, and one per extra connected component or per piece joined to the
rest by a few weak edges would, weighted by λ/(1−λ), outweigh every
distance within the pieces.

The eigenpairs come from Lanczos iterations on the sparse S
(``scipy.sparse.linalg.eigsh``): O(nnz(K) · n_components) per iteration,
nothing N × N.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse.linalg import eigsh

#: Eigenpairs computed, the stationary one included; the eigengap picks how many are used. A tree of b
#: branches needs about b components, and the gap must fall among those computed: with 15, PHATE's comb of
#: 20 branches had its largest computed gap after the first component (Spearman with the true time 0.82;
#: 0.95 with 30, as with 50).
N_COMPONENTS = 30
#: Fewest diffusion components kept, whatever the eigengap (a fork needs at least two).
MIN_COMPONENTS = 3
#: Eigenvalues this close to 1 belong to the stationary vector, to a connected component of its own, or to
#: pieces joined by a few weak edges: weighted λ/(1−λ) > 1,600, the distance between such pieces would swamp
#: every distance within them (scanpy's krumsiek11: 1 − λ = 3·10⁻⁴ and 4·10⁻⁴ for two components; Spearman
#: with the true time 0.86 with them, 0.94 without; no component that close on 18 SERGIO and generated sets).
NEAR_ONE = 6e-4


def diffusion_components(
    connectivities: sparse.spmatrix, n_components: int = N_COMPONENTS
) -> tuple[np.ndarray, np.ndarray]:
    """Largest eigenvalues λ (descending) and right eigenvectors ψ (columns) of the random walk D⁻¹ K.

    ``connectivities`` is symmetrised as (K + Kᵀ)/2; a cell with no edge is
    given a degree of 1 so that it stays isolated instead of dividing by zero.
    The Lanczos start vector is fixed, so the result is the same on every run.
    """
    affinity = sparse.csr_matrix(connectivities, dtype=float)
    n_cells = affinity.shape[0]
    if affinity.shape != (n_cells, n_cells):
        raise ValueError(f"connectivities must be a square matrix; got shape {affinity.shape}.")
    if n_cells < MIN_COMPONENTS + 2:
        raise ValueError(f"a diffusion map needs at least {MIN_COMPONENTS + 2} cells; got {n_cells}.")
    affinity = (affinity + affinity.T) / 2
    degree = np.asarray(affinity.sum(axis=1)).ravel()
    degree[degree <= 0] = 1.0
    scale = sparse.diags(1 / np.sqrt(degree))
    n_components = min(n_components, n_cells - 2)
    start = np.random.default_rng(0).uniform(0.5, 1.5, n_cells)
    values, vectors = eigsh(scale @ affinity @ scale, k=n_components, which="LA", v0=start)
    order = np.argsort(-values)
    return values[order], vectors[:, order] / np.sqrt(degree)[:, None]


def multiscale_space(values: np.ndarray, vectors: np.ndarray, *, min_components: int = MIN_COMPONENTS) -> np.ndarray:
    """Cells × m coordinates ψ_k · λ_k / (1 − λ_k) of the non-trivial components up to the largest eigengap."""
    keep = values < 1 - NEAR_ONE
    values, vectors = values[keep], vectors[:, keep]
    if values.size == 0:
        raise ValueError("the neighbour graph has no non-trivial diffusion component (every cell is its own piece).")
    n_used = values.size
    if values.size > min_components:
        n_used = max(min_components, int(np.argmax(values[:-1] - values[1:])) + 1)
    values = values[:n_used]
    return vectors[:, :n_used] * (values / (1 - values))


def neighbour_distances(points: np.ndarray, n_neighbors: int) -> sparse.csr_matrix:
    """N × N sparse distances from each cell to its ``n_neighbors`` nearest others in ``points``."""
    from sklearn.neighbors import NearestNeighbors

    points = np.asarray(points, dtype=float)
    n_neighbors = int(min(n_neighbors, points.shape[0] - 1))
    return NearestNeighbors(n_neighbors=n_neighbors).fit(points).kneighbors_graph(mode="distance").tocsr()


def lengths_in(points: np.ndarray, graph: sparse.spmatrix) -> sparse.csr_matrix:
    """The edges of ``graph`` with their lengths ‖points_i − points_j‖ (duplicate points: the smallest positive float)."""
    graph = sparse.coo_matrix(graph)
    lengths = np.linalg.norm(points[graph.row] - points[graph.col], axis=1)
    return sparse.csr_matrix((np.maximum(lengths, np.finfo(float).tiny), (graph.row, graph.col)), shape=graph.shape)
