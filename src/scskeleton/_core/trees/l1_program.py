"""The weighted ℓ1 graph's linear program (19)/(23)/(24) of the regularized principal graph.

Given the K landmarks z and the current nodes C, W is the optimum of the linear program
that rebuilds each landmark from its candidate neighbours (side information, §5.1) at the
cost of the graph's length, Σ_{k,k'} w_kk' ||c_k - c_k'||² + lam Σ_k ||z_k - Σ_k' w_k'k z_k'||_1
(Mao, Wang, Tsang & Sun, arXiv 2015, eq. 19). :class:`L1Program` builds it once for the
landmarks and solves it for every C of the fit (:func:`~.rpg.iterate`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import clarabel
import numpy as np
from scipy import sparse
from scipy.sparse import csgraph
from threadpoolctl import threadpool_info

from ..graphs import from_edges, knn_edges

#: Dual multipliers below this fraction of the largest are read as zero weights: the
#: interior-point method stops at a relative duality gap of ~1e-8, where the weights that are
#: zero at the optimum have shrunk to 1e-8 or less of the largest while the positive ones are
#: 1e-3 and above (K = 1,000, D = 154: 1-2 weights of 5,000 fell in between).
WEIGHT_FLOOR = 1e-6
#: Iteration limit of the interior-point method (it takes 20-30 on the programs measured).
LP_MAX_ITER = 200


class L1Program:
    """The sparse linear program (19)/(23)/(24) for the weighted ℓ1 graph.

    Primal: one weight w_e ≥ 0 per candidate undirected edge (so W is symmetric
    with a zero diagonal by construction) and the reconstruction error split
    as ξ = ξ⁺ - ξ⁻, ξ± ≥ 0 (K × D each), with, for every node k and feature m,
    Σ_k' w_kk' z_k'm + ξ⁺_km - ξ⁻_km = z_km, at cost
    Σ_{k,k'} w_kk' φ_kk' + lam Σ (ξ⁺ + ξ⁻) = 2 Σ_e w_e φ_e + lam ||ξ||₁.

    It is solved through its dual, max zᵀy s.t. Aᵀy ≤ 2φ, -lam ≤ y ≤ lam
    (A the K·D × E matrix of the equality constraints), by the primal-dual
    interior-point method of Clarabel (``clarabel``; Goulart & Chen 2024), as
    the paper solves it by Mosek's interior-point method. W is the dual's
    multipliers of the edge rows, with those below :data:`WEIGHT_FLOOR` of the
    largest read as zero. The constraint matrix stays the same between
    iterations, only the right-hand side 2φ changes, so each solver is built
    once and its symbolic factorisation reused (``update(b=...)``).

    The program separates over the connected components of the candidate
    graph (a node's reconstruction uses only its candidate edges), and one
    program is solved per component: on ten clusters of ~100 landmarks (D =
    154) a pass took 11 s against 17.6 s for the same program solved whole,
    and 6.6 s with the components on two threads (as many as the fit lets
    BLAS use).

    A simplex method warm-started from the previous basis (HiGHS, used before)
    paid only while the nodes moved little: at the RPG paper's MNIST size
    (K = 1,000, D = 154, 9,406 candidate edges) its re-solves took 1,700-5,000
    pivots at ~6 ms each (11-33 s), the fresh interior-point solves of HiGHS
    (IPX) 23 s, and first-order PDLP 23 s to a gap of 2e-6. This method takes
    20-30 iterations, ~6 s, whatever the nodes did, and returns the same
    optimum (same objective to 1e-9, the same positive weights). Its
    factorisation is single-threaded and ordered deterministically: the same
    W on every run.
    """

    def __init__(self, landmarks: np.ndarray, n_neighbors: int, lam: float):
        self.landmarks = landmarks
        self.lam = lam
        self.edges = knn_edges(landmarks, n_neighbors)
        # The program is solved in units of the landmarks' root-mean-square coordinate: the optimal
        # W is unchanged when z, φ and lam are divided by s, s² and s, and the interior-point
        # method's tolerances are absolute (coordinates of 1e5 to 1e8 left it "DualInfeasible", of 1e-6
        # stopped it at a W of 301 edges for the 74 of the same data at unit scale).
        scale = float(np.sqrt(np.mean(np.square(landmarks))))
        self.scale = scale if np.isfinite(scale) and scale > 0 else 1.0
        landmarks = landmarks / self.scale
        n_nodes = landmarks.shape[0]
        candidates = from_edges(self.edges, np.ones(self.edges.shape[0]), n_nodes)
        _, component = csgraph.connected_components(candidates, directed=False)
        edge_component = component[self.edges[:, 0]]
        self._blocks = []
        for label in np.unique(edge_component):
            nodes = np.flatnonzero(component == label)
            local = np.full(n_nodes, -1, dtype=np.intp)
            local[nodes] = np.arange(nodes.size)
            edges = np.flatnonzero(edge_component == label)
            self._blocks.append(_L1Block(landmarks[nodes], local[self.edges[edges]], edges))

    def solve(self, centers: np.ndarray) -> tuple[sparse.csr_matrix, float]:
        """Optimal W for the current centers, and ||Z - WZ||_1 at that W."""
        heads, tails = self.edges[:, 0], self.edges[:, 1]
        bound = 2.0 * np.sum((centers[heads] - centers[tails]) ** 2, axis=1) / self.scale**2
        lam = self.lam / self.scale
        weights = np.zeros(bound.size)
        threads = min(len(self._blocks), _blas_threads())
        if threads > 1:
            # the solver releases the GIL; each block's answer does not depend on the order
            with ThreadPoolExecutor(threads) as pool:
                solved = list(pool.map(lambda block: block.solve(bound[block.edges], lam), self._blocks))
        else:
            solved = [block.solve(bound[block.edges], lam) for block in self._blocks]
        for block, block_weights in zip(self._blocks, solved):
            weights[block.edges] = block_weights
        adjacency = from_edges(self.edges, weights, self.landmarks.shape[0])
        # The ℓ1 term at the returned W, computed from W itself rather than the solver's tolerances.
        reconstruction = float(np.abs(self.landmarks - adjacency @ self.landmarks).sum())
        return adjacency, reconstruction


def _blas_threads() -> int:
    """The threads BLAS may use here (the fit's thread policy, :mod:`scskeleton._anndata.threads`,
    sets that limit): the components of the ℓ1 program are solved on as many."""
    counts = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return max(1, min(counts)) if counts else 1


class _L1Block:
    """The dual program of :class:`L1Program` on one connected component of the candidate
    graph: ``landmarks`` its nodes, ``local_edges`` its edges in their numbering, ``edges``
    their indices in the whole program."""

    def __init__(self, landmarks: np.ndarray, local_edges: np.ndarray, edges: np.ndarray):
        self.landmarks = landmarks
        self.edges = edges
        dim = landmarks.shape[1]
        n_edges = local_edges.shape[0]
        heads, tails = local_edges[:, 0], local_edges[:, 1]
        # Edge e = (a, b) enters node a's rows with z_b and node b's rows with z_a.
        feature = np.arange(dim)
        cols = np.concatenate([(heads[:, None] * dim + feature).ravel(), (tails[:, None] * dim + feature).ravel()])
        rows = np.concatenate([np.repeat(np.arange(n_edges), dim)] * 2)
        vals = np.concatenate([landmarks[tails].ravel(), landmarks[heads].ravel()])
        self.edge_rows = sparse.csr_matrix((vals, (rows, cols)), shape=(n_edges, landmarks.size))  # Aᵀ
        self._solver = None

    def solve(self, bound: np.ndarray, lam: float) -> np.ndarray:
        """The edge weights that are optimal for the edge costs ``bound`` = 2φ."""
        # rows: Aᵀy + s = 2φ, y + s = lam, -y + s = lam, every s ≥ 0
        rhs = np.concatenate([bound, np.full(2 * self.landmarks.size, lam)])
        solved = (clarabel.SolverStatus.Solved, clarabel.SolverStatus.AlmostSolved)
        if self._solver is None:
            self._solver = self._build(rhs, refine=False)
        else:
            self._solver.update(b=rhs)
        solution = self._solver.solve()
        if solution.status not in solved:
            # Without iterative refinement each step costs a third less (K = 1,000, D = 154: 6 s
            # against 9 s, the same W); where the factorisation alone was not accurate enough, the
            # program is solved again with it.
            self._solver = self._build(rhs, refine=True)
            solution = self._solver.solve()
        if solution.status not in solved:
            self._solver = None
            raise ValueError(
                f"The ℓ1-graph linear program (eq. 19) failed: {solution.status}. "
                "Try another lam or n_neighbors, or the principal tree (tl.rpg)."
            )
        weights = np.maximum(np.asarray(solution.z[: bound.size]), 0.0)
        weights[weights < WEIGHT_FLOOR * weights.max(initial=0.0)] = 0.0
        return weights

    def _build(self, rhs: np.ndarray, *, refine: bool):
        size = self.landmarks.size
        settings = clarabel.DefaultSettings()
        settings.verbose = False
        settings.max_iter = LP_MAX_ITER
        settings.direct_solve_method = "qdldl"  # single-threaded: the same W on every run
        settings.max_threads = 1
        settings.iterative_refinement_enable = refine
        identity = sparse.identity(size, format="csr")
        constraints = sparse.vstack([self.edge_rows, identity, -identity]).tocsc()
        return clarabel.DefaultSolver(
            sparse.csc_matrix((size, size)), -self.landmarks.ravel(), constraints, rhs,
            [clarabel.NonnegativeConeT(rhs.size)], settings,
        )
