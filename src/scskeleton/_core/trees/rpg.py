"""Regularized principal graphs: a principal tree or a weighted ℓ1 graph.

Mao, Wang, Tsang & Sun, "A novel regularized principal graph learning
framework on explicit graph representation", arXiv preprint, 2015; published as
"Principal graph and structure learning based on reversed graph embedding", IEEE
Transactions on Pattern Analysis and Machine Intelligence, 2017. Numbers of sections and
equations are the preprint's: §4–5.
With K nodes C (K × D) learned from N points X (N × D), problem (17) / (24):

    min_{C, W, P}  Σ_{k,k'} w_kk' ||c_k - c_k'||²                      (graph length)
                   + lam Σ_k || z_k - Σ_{k'≠k} w_k'k z_k' ||_1         (ℓ1 graph only)
                   + gamma Σ_{i,k} p_ik [ ||x_i - c_k||² + sigma log p_ik ]
    s.t. W ≥ 0, W = Wᵀ, diag(W) = 0 (ℓ1 graph) or W a spanning tree (eq. 20),
         P ≥ 0, P1 = 1,

where z are the landmarks: the points themselves when K = N (Algorithm 1),
k-means centroids of X when K < N (Algorithm 2, eq. 24). One iteration solves
each block exactly — P by eq. (18), W as a minimum spanning tree (eq. 20) or by the linear
program (19)/(23) restricted to candidate edges from the landmarks' nearest
neighbours (side information, §5.1), C by eq. (22) — so the objective never
increases (Theorem 1). The ℓ1 graph returned is the skeleton of the last W
(:mod:`~scskeleton._core.trees.skeleton`); W itself is ``lp_adjacency``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, sparse
from scipy.sparse import csgraph

from ..embed import top_eigenpairs
from ..graphs import laplacian, minimum_spanning_tree
from ..validation import as_float_matrix, check_integer, check_positive
from .assign import kmeans, nearest_other_squared, soft_assignment
from .defaults import MAX_COMPONENTS, default_n_centers, default_n_components, signal_to_noise
from .gaps import bridging_edges
from .l1_program import L1Program
from .pruning import MIN_EXTENSION, MIN_MASS, check_pruning, prune_tree
from .skeleton import adjacent_cells, gap_profiles, kept_edges, l1_skeleton, prune_skeleton, shared_mass

GRAPHS = ("tree", "l1")
#: Default sigma is at most this share of the nodes' largest variance: a quarter of the
#: critical bandwidth 2 λ_max above which the soft assignment puts every node at the mean.
CRITICAL_SHARE = 0.5
#: By default the principal tree reads at most this many leading principal components ...
MAX_TREE_COMPONENTS = 30
#: ... and below this signal-to-noise ratio (:func:`tree_columns`) only those above the noise
#: floor, with MIN_NODES nodes.
LOW_SIGNAL = 0.5
#: The representation is read from at most this many cells ...
SIGNAL_CELLS = 20_000
#: ... and of at most this many columns (principal components, not genes: the D × D Gram stays cheap).
SIGNAL_COLUMNS = 200
#: Leading columns stand for the leading principal directions when they hold at least this share
#: of their variance (a subset of cells keeps it: its principal-component scores are nearly so).
PRINCIPAL_SHARE = 0.95


@dataclass(frozen=True)
class TreeColumns:
    """Result of :func:`tree_columns`: which leading columns of a representation the tree reads.

    Attributes
    ----------
    n_columns
        The leading columns to fit in (all of them when nothing is cut).
    signal_to_noise
        :func:`~scskeleton._core.trees.defaults.signal_to_noise` of those columns
        before a cut to the signal, or None where it was not measured.
    weak
        The structure barely stands out of the noise (below :data:`LOW_SIGNAL`).
    principal
        The columns kept hold the variance of as many leading principal directions
        (:data:`PRINCIPAL_SHARE`), so that keeping them cuts the noise, not the structure.
    """

    n_columns: int
    signal_to_noise: float | None = None
    weak: bool = False
    principal: bool = False


@dataclass(frozen=True)
class RPGResult:
    """Output of :func:`rpg`.

    Attributes
    ----------
    centers
        C, K × D principal points in the input space (eq. 22).
    landmarks
        z, K × D: the points (K = N) or their k-means centroids (K < N).
    adjacency
        K × K symmetric CSR: the binary spanning tree, or the skeleton of the ℓ1
        graph (:func:`~scskeleton._core.trees.skeleton.l1_skeleton`: its curves,
        loops and components, each edge with its weight in W).
    assignment
        P, N × K soft assignment (eq. 18), dense or CSR; rows sum to one.
    objective
        Objective (17) / (24) after each kept step (tree: without the ℓ1 term).
    n_iter, converged
        Passes over the cells (iterations, rejected over-relaxed steps included);
        whether the relative change fell below ``tol``.
    sigma
        The bandwidth used (resolved when ``None`` was given).
    candidate_edges
        E × 2 candidate edges of the ℓ1 program (empty for the tree).
    n_pruned
        Terminal branches removed after the fit (tree, ``prune=True``).
    gap_edges
        Edges that cross a gap in the data (E × 2,
        :func:`~scskeleton._core.trees.gaps.bridging_edges`); tree only.
    lp_adjacency
        ℓ1 graph only: W, the solution of the linear program (19) at the last
        iteration (the graph the objective is evaluated on).
    """

    centers: np.ndarray
    landmarks: np.ndarray
    adjacency: sparse.csr_matrix
    assignment: np.ndarray | sparse.csr_matrix
    objective: np.ndarray
    n_iter: int
    converged: bool
    sigma: float
    candidate_edges: np.ndarray
    n_pruned: int = 0
    gap_edges: np.ndarray = field(default_factory=lambda: np.empty((0, 2), dtype=np.intp))
    lp_adjacency: sparse.csr_matrix | None = None


def default_n_nodes(n_points: int) -> int:
    """K used when none is given: DDRTree's rule without its cap
    (:func:`~scskeleton._core.trees.defaults.default_n_centers` with ``most=None``),
    a node per ten points, 50 to about 150 nodes. Algorithm 1's K = N puts a
    node on every point, and the spanning tree then branches at every outlier."""
    return default_n_centers(n_points, most=None)


#: Candidate neighbours per landmark of the ℓ1 graph used when none is given (fewer on graphs of at most this many nodes).
L1_NEIGHBORS = 10


def default_l1_nodes(n_points: int) -> int:
    """K used by the ℓ1 graph when none is given: the principal tree's
    :func:`default_n_nodes` (a node per ten points, 50 to about 150 k-means landmarks).

    With a node per point (Algorithm 1) the nodes sit on the noise: the program
    (19) rebuilds each from neighbours across the band, and the skeleton of that
    band has hairs and small loops; landmarks a few noise widths apart draw the
    curve itself.
    """
    return default_n_nodes(n_points)


def reads_columns(n_columns: int) -> bool:
    """Whether :func:`tree_columns` looks at a representation of ``n_columns`` columns: more than
    :data:`~scskeleton._core.trees.defaults.MAX_COMPONENTS` and at most :data:`SIGNAL_COLUMNS`."""
    return MAX_COMPONENTS < n_columns <= SIGNAL_COLUMNS


def tree_columns(sample: np.ndarray, *, allow_weak: bool = True) -> TreeColumns:
    """The leading columns of a representation the principal tree is fitted in, from a sample of cells.

    The tree is fitted in the whole representation, where a small population
    keeps the direction that sets it apart (a fate of 2.5 % of the cells, lost by
    DDRTree's few latent dimensions), but in at most :data:`MAX_TREE_COMPONENTS`
    principal components. Each further component of noise moves the k-means
    landmarks apart, and with them the default bandwidth (:func:`default_sigma`),
    until short branches fall below the critical bandwidth of the soft
    assignment and their nodes gather at the fork. On ``simulate_trajectory``
    trees (1,000 cells, 2–5 fates, seeds 0–9) 20, 30, 40 and 50 principal
    components gave 36, 39, 33 and 31 of 40 exact topologies (five-fate trees 8,
    10, 5 and 1 of 10; scanpy computes 50 by default); the bandwidth rule and the
    pruning were calibrated on 30. With more cells per landmark the harm fades
    (10,000 cells: 39 of 40 with 50 components, 40 with 30).

    When the structure barely stands out of the noise (signal-to-noise below
    :data:`LOW_SIGNAL`) and ``allow_weak``, only the components above the noise
    floor are kept (:func:`~scskeleton._core.trees.defaults.default_n_components`):
    the many directions of noise then decide which nodes each cell is nearest,
    every node moves with the noise of its few cells, and the spanning tree
    wanders through the cloud. On Splatter-style counts at ~8,000 counts per cell
    (signal-to-noise 0.1–0.4, 30 principal components; 3 topologies × 1,000 and
    4,000 cells × seeds 0–5) the pruned trees kept no branch point in 23 of 36
    runs, had the right number in 8, and a median pseudotime Spearman of 0.73
    (below 0.6 in 14). In the components above the noise floor and with
    :data:`~scskeleton._core.trees.defaults.MIN_NODES` nodes, each averaging more
    cells, the right number in 23 of 36 and a median Spearman of 0.88 (below 0.6
    in 1; one branch point too many in 8), as DDRTree does in its latent space
    (22 of 36, 0.86); on seeds 6–11, generated afterwards, 20 of 36 and 0.86
    against 7 and 0.65. With 70 nodes, 13 of 36: more nodes follow the noise
    again. The generated trees of the topology benchmark (signal-to-noise
    1.2–4.7) and 50-dimensional random-walk trees (2.2–2.6) are not cut; of the
    Splatter-style counts with dropout (0.47–1.5) two runs of 36 fall below 0.5,
    and both go from a wrong to the right number of branch points.

    Nothing is cut in a representation of at most
    :data:`~scskeleton._core.trees.defaults.MAX_COMPONENTS` columns (reduced that
    far, it has no tail of noise to measure), of more than :data:`SIGNAL_COLUMNS`
    (genes rather than components) or whose columns are not principal axes; the
    last is still reported ``weak`` when its structure barely stands out.
    """
    n_columns = sample.shape[1]
    if not reads_columns(n_columns) or sample.shape[0] <= n_columns:
        return TreeColumns(n_columns)
    centred = sample - sample.mean(axis=0)
    gram = centred.T @ centred

    principal = _leading_columns_principal(gram, min(n_columns, MAX_TREE_COMPONENTS))
    if principal:
        n_columns = min(n_columns, MAX_TREE_COMPONENTS)
        gram = gram[:n_columns, :n_columns]
    ratio = signal_to_noise(gram)
    weak = allow_weak and ratio < LOW_SIGNAL
    if weak:
        signal = default_n_components(gram)
        principal = principal and _leading_columns_principal(gram, signal)
        if principal:
            n_columns = signal
    return TreeColumns(n_columns, ratio, weak, principal)


def _leading_columns_principal(gram: np.ndarray, n: int) -> bool:
    """Whether the first ``n`` columns of a Gram matrix hold at least :data:`PRINCIPAL_SHARE` of the
    variance of its directions of signal (those above the noise floor,
    :func:`~scskeleton._core.trees.defaults.default_n_components`, at most ``n``), so that keeping them
    cuts noise, not structure.

    Only the signal directions count: in a subset of the cells (one lineage, a quarter of them) the
    principal components' scores are no longer exactly principal, and the nearly equal variances of
    the noise components reshuffle among all columns; measured against all ``n`` leading directions,
    a quarter of 1,000 simulated cells fell below the share and the 30-component cap was lost.
    """
    values, vectors = linalg.eigh(gram)
    signal = min(default_n_components(gram), n)
    values, vectors = values[::-1][:signal], vectors[:, ::-1][:, :signal]
    total = values.sum()
    if total <= 0:
        return True
    kept = float(values @ np.sum(vectors[:n] ** 2, axis=0))  # each direction's variance inside the first n columns
    return kept >= PRINCIPAL_SHARE * total


def default_sigma(nodes: np.ndarray) -> float:
    """Median squared distance from each node to its nearest other node, at most
    :data:`CRITICAL_SHARE` times the nodes' largest variance.

    A "small" bandwidth in the sense of §6.1's tuning recipe: each point's soft
    assignment spreads over its closest few nodes. Falls back to the mean
    squared spread of the nodes when they all coincide in pairs.

    The cap keeps the bandwidth well below the critical one of the soft
    assignment (18): p ∝ exp(−‖x − c‖² / sigma) is the Gibbs distribution of
    deterministic annealing (Rose, Proc. IEEE 1998), and for sigma above
    2 λ_max, twice the largest variance of the data, every node sits at the
    mean (the graph term only pulls them closer). On low-depth counts the
    k-means landmarks of a thick cloud stand as far apart as the cloud is wide,
    the median rule gave sigma ≈ 2 λ_max (Splatter-style simulations at
    ~8,000 counts per cell, 30 PCs), and all nodes collapsed onto a segment at
    the centre of the data. The nodes' own variance (between the landmarks;
    the data's within-landmark spread left out) makes the cap conservative.
    """
    value = float(np.median(nearest_other_squared(nodes)))
    if value <= 0:
        value = float(np.mean(np.sum((nodes - nodes.mean(0)) ** 2, axis=1))) or 1.0
    spread = _largest_variance(nodes)
    return min(value, CRITICAL_SHARE * spread) if spread > 0 else value


def _largest_variance(points: np.ndarray) -> float:
    """Largest eigenvalue of the points' covariance, from the smaller of their two Gram matrices."""
    centred = points - points.mean(axis=0)
    gram = centred @ centred.T if centred.shape[0] < centred.shape[1] else centred.T @ centred
    return float(top_eigenpairs(gram, 1)[0][0]) / max(points.shape[0] - 1, 1)


def rpg(
    data,
    *,
    graph: str = "tree",
    n_nodes: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float = 1.0,
    n_neighbors: int = 5,
    maxiter: int = 50,
    tol: float = 1e-5,
    over_relax: bool = False,
    random_state: int = 0,
    prune: bool = False,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    callback: Callable[[int, float], None] | None = None,
) -> RPGResult:
    """Learn a principal tree (``graph="tree"``) or ℓ1 graph (``graph="l1"``).

    Parameters
    ----------
    data
        N × D points X.
    graph
        ``"tree"``: W is a spanning tree (eq. 20). ``"l1"``: W is the weighted
        ℓ1 graph of the linear program (19)/(23)/(24), which may hold loops and
        several connected components.
    n_nodes
        K. ``None``: :func:`default_n_nodes`. K = N runs Algorithm 1 (C = X at
        start); K < N runs Algorithm 2 with k-means landmarks.
    sigma
        Bandwidth of the soft assignment (18), in squared units of X.
        ``None``: :func:`default_sigma` of the initial nodes.
    gamma
        Weight of the quantization error against the graph length; small
        values shorten (and smooth) the graph.
    lam
        Weight of the ℓ1 reconstruction error (ℓ1 graph only); larger values
        give more edges.
    n_neighbors
        Candidate edges of the ℓ1 program: each landmark's ``n_neighbors``
        nearest landmarks, symmetrised (side information, §5.1).
    maxiter, tol
        Stop after ``maxiter`` iterations or when the change of the objective
        falls below ``tol`` times the sum of its terms' sizes (the paper divides
        by |objective| and uses 1e-5; the objective can cross zero).
    over_relax
        Take adaptive over-relaxed steps (:func:`descend`): fewer passes to the
        same kind of optimum. Off, the paper's plain alternation.
    random_state
        Seed of the k-means landmarks (the only random step).
    prune, min_branch_extension, min_branch_fraction
        Tree: after the fit, remove terminal branches that do not stand
        out of the noise (:func:`~scskeleton._core.trees.pruning.prune_tree`); P is
        then recomputed by eq. (18) for the nodes that remain. ℓ1 graph:
        components of the skeleton holding less than ``min_branch_fraction`` of
        the cells are joined to the nearest other component.
    callback
        Called as ``callback(iteration, objective)`` after each iteration.
    """
    data = as_float_matrix(data, "data")
    settings = check_settings(
        data.shape, graph=graph, n_nodes=n_nodes, gamma=gamma, lam=lam, n_neighbors=n_neighbors, maxiter=maxiter,
        tol=tol, random_state=random_state, min_branch_extension=min_branch_extension,
        min_branch_fraction=min_branch_fraction,
    )
    n_points, n_nodes = data.shape[0], settings.n_nodes
    landmarks = data.copy() if n_nodes == n_points else kmeans(data, n_nodes, random_state=settings.random_state)
    sigma = default_sigma(landmarks) if sigma is None else check_positive(
        "sigma", sigma, role="bandwidth of the soft assignment, eq. 18"
    )
    centers = landmarks.copy()
    program = L1Program(landmarks, settings.n_neighbors, settings.lam) if graph == "l1" else None
    data_norm2 = float(np.sum(data**2))

    state = {"assignment": None}

    def step(start):
        # eq. (18); the previous P is no longer needed, so its memory is reused
        previous = state["assignment"]
        assignment = soft_assignment(data, start, sigma, reuse=None if previous is None else previous.matrix)
        state["assignment"] = assignment
        sums = assignment_sums(assignment.matrix, data, assignment.neg_entropy)
        return iterate(start, sums, program, data_norm2=data_norm2, gamma=settings.gamma, lam=settings.lam, sigma=sigma)

    descent = descend(
        centers, step, maxiter=settings.maxiter, tol=settings.tol, over_relax=over_relax, callback=callback
    )
    return finish_graph(
        data, descent, landmarks, program, settings, sigma, prune=prune,
        skeleton_sums=lambda edges: (*shared_mass(state["assignment"].matrix, edges),
                                     adjacent_cells(data, descent.centers, edges),
                                     gap_profiles(data, descent.centers, edges)),
        assignment=state["assignment"].matrix, reassign=lambda nodes: soft_assignment(data, nodes, sigma).matrix,
    )


def finish_graph(
    points: np.ndarray, descent: Descent, landmarks: np.ndarray, program: L1Program | None, settings: Settings,
    sigma: float, *, prune: bool, skeleton_sums: Callable, assignment, reassign: Callable,
) -> RPGResult:
    """The result of :func:`rpg` from its descent: the ℓ1 graph's skeleton, or the tree, pruned where asked.

    Shared by the in-memory and the chunked fit (:mod:`scskeleton._dask.rpg`), which differ only in
    how they read the cells: ``points`` are the cells the skeleton, the pruning and the gap test
    judge; ``skeleton_sums(edges)`` returns the cells' sums the skeleton reads along the candidate
    ``edges`` (:func:`~scskeleton._core.trees.skeleton.shared_mass` of the last step's assignment,
    then :func:`~scskeleton._core.trees.skeleton.adjacent_cells` and
    :func:`~scskeleton._core.trees.skeleton.gap_profiles` at the final centers); ``assignment`` is
    the last step's P and ``reassign(centers)`` P (eq. 18) of the nodes that pruning leaves.
    """
    centers, adjacency = descent.centers, descent.adjacency
    n_pruned = 0
    lp_adjacency = None
    gap_edges = np.empty((0, 2), dtype=np.intp)
    candidates = program.edges if program is not None else np.empty((0, 2), dtype=np.intp)
    if program is not None:
        # the loop's W is the optimum of (19), a band of short edges; report the curves, loops
        # and components that band draws (skeleton.py), and keep W itself alongside
        lp_adjacency = adjacency
        mass, shared, adjacent, profiles = skeleton_sums(program.edges)
        adjacency = l1_skeleton(
            centers, adjacency, program.edges, mass, shared, min_mass=settings.min_branch_fraction,
            adjacent=adjacent, profiles=profiles, points=points,
        )
        if prune:
            keep, adjacency, n_pruned = prune_skeleton(
                points, centers, adjacency,
                min_extension=settings.min_branch_extension, min_mass=settings.min_branch_fraction,
            )
            if n_pruned:
                centers, landmarks, lp_adjacency = centers[keep], landmarks[keep], lp_adjacency[keep][:, keep]
                candidates = kept_edges(candidates, keep)
    else:
        if prune:
            # the tree of the final centers (the loop's W belongs to the centers before the last update)
            adjacency = minimum_spanning_tree(centers)
            pruned = prune_tree(
                points, centers, adjacency,
                min_extension=settings.min_branch_extension, min_mass=settings.min_branch_fraction,
            )
            n_pruned = pruned.removed_branches
            if n_pruned:
                centers, landmarks, adjacency = centers[pruned.keep], landmarks[pruned.keep], pruned.adjacency
        gap_edges = bridging_edges(points, centers, adjacency)
    return RPGResult(
        centers=centers,
        landmarks=landmarks,
        adjacency=adjacency,
        assignment=reassign(centers) if n_pruned else assignment,
        objective=descent.objective,
        n_iter=descent.n_passes,
        converged=descent.converged,
        sigma=sigma,
        candidate_edges=candidates,
        n_pruned=n_pruned,
        gap_edges=gap_edges,
        lp_adjacency=lp_adjacency,
    )


#: Growth of the over-relaxation factor after each accepted step (:func:`descend`).
RELAXATION_GROWTH = 1.5


@dataclass(frozen=True)
class Descent:
    """Output of :func:`descend`: the last accepted centers C and graph W, the
    objective after each accepted step (non-increasing), the passes over the cells
    (accepted and rejected steps) and whether the stopping rule was met. The last
    step's soft assignment P belongs to ``assigned``, the centers it started from."""

    centers: np.ndarray
    assigned: np.ndarray
    adjacency: sparse.csr_matrix
    objective: np.ndarray
    n_passes: int
    converged: bool


def descend(
    centers: np.ndarray,
    step: Callable[[np.ndarray], tuple[np.ndarray, sparse.csr_matrix, float, float]],
    *,
    maxiter: int,
    tol: float,
    over_relax: bool = True,
    callback: Callable[[int, float], None] | None = None,
) -> Descent:
    """Alternate the exact block updates of (17)/(24), over-relaxed and safeguarded.

    ``step(C)`` is one iteration from centers C: P(C) by eq. (18), then W and C'
    (:func:`iterate`); it returns (C', W, objective, size) and is one pass over the
    cells. Plain alternation is Theorem 1's monotone descent, but on curves the nodes
    slide along the data by a near-constant small step per iteration (26–50
    iterations on Table 1's tree set). Adaptive over-relaxation (Salakhutdinov &
    Roweis, "Adaptive overrelaxed bound optimization methods", ICML 2003) starts the
    next step from C + eta (C' - C) instead of C', growing eta by
    :data:`RELAXATION_GROWTH` after each success. A step is kept only if its
    objective is no higher than the last one kept; otherwise eta returns to 1 and
    the plain step is taken, so the recorded objective never increases and the
    fixed points are those of the paper's algorithm. ``over_relax=False`` takes
    the plain steps only. Stops after ``maxiter`` passes or when the change of the
    objective is at most ``tol`` times the sum of its terms' sizes.
    """
    objective: list[float] = []
    eta, previous, passes = 1.0, centers, 0
    converged = False
    while passes < maxiter:
        # an over-relaxed step needs room for the plain step that replaces it if rejected
        relaxed = eta > 1.0 and passes + 2 <= maxiter
        start = previous + eta * (centers - previous) if relaxed else centers
        updated, adjacency, value, size = step(start)
        passes += 1
        if relaxed and value > objective[-1]:
            start = centers
            updated, adjacency, value, size = step(start)
            passes += 1
            eta = RELAXATION_GROWTH
        elif relaxed:
            eta *= RELAXATION_GROWTH
        elif objective and over_relax:
            eta = RELAXATION_GROWTH
        previous, centers, last = start, updated, adjacency
        objective.append(value)
        if callback is not None:
            callback(passes, value)
        if len(objective) > 1 and abs(objective[-2] - value) <= tol * max(size, np.finfo(float).tiny):
            converged = True
            break
    return Descent(centers, previous, last, np.asarray(objective), passes, converged)


@dataclass(frozen=True)
class Settings:
    """The parameters of :func:`rpg`, validated, with ``n_nodes`` resolved."""

    n_nodes: int
    gamma: float
    lam: float
    n_neighbors: int
    maxiter: int
    tol: float
    random_state: int
    min_branch_extension: float
    min_branch_fraction: float


def check_settings(
    shape: tuple[int, int], *, graph, n_nodes, gamma, lam, n_neighbors, maxiter, tol, random_state,
    min_branch_extension, min_branch_fraction,
) -> Settings:
    """Validate the parameters of :func:`rpg` for data of ``shape`` (N × D), before any work is done."""
    n_points = shape[0]
    if graph not in GRAPHS:
        raise ValueError(f"graph must be one of {GRAPHS}; got {graph!r}.")
    if n_points < 3:
        raise ValueError(f"A principal graph needs at least 3 cells; got {n_points}.")
    n_nodes = default_n_nodes(n_points) if n_nodes is None else n_nodes
    n_nodes = check_integer("n_nodes", n_nodes, low=2, high=n_points, role="number of graph nodes K, 2 ≤ K ≤ N")
    gamma = check_positive("gamma", gamma, role="weight of the quantization error, eq. 17")
    lam = check_positive("lam", lam, role="weight of the ℓ1 reconstruction error, eq. 17")
    if graph == "l1":
        n_neighbors = check_integer(
            "n_neighbors", n_neighbors, low=1, high=n_nodes - 1, role="candidate neighbours per node, fewer than K"
        )
    maxiter = check_integer("maxiter", maxiter, low=1)
    min_branch_extension, min_branch_fraction = check_pruning(min_branch_extension, min_branch_fraction)
    tol = check_positive("tol", tol, allow_zero=True)
    random_state = check_integer("random_state", random_state, low=0)
    return Settings(
        n_nodes, gamma, lam, n_neighbors, maxiter, tol, random_state, min_branch_extension, min_branch_fraction
    )


def assignment_sums(resp, data: np.ndarray, neg_entropy: float) -> tuple[np.ndarray, np.ndarray, float]:
    """PᵀX (K × D), 1ᵀP (Lambda's diagonal) and Σ p log p of the cells in ``resp`` / ``data``.

    Everything an iteration needs from the cells, and additive over any
    partition of them: the chunked fit (:mod:`scskeleton._dask.rpg`) adds the
    blocks' sums.
    """
    return np.asarray(resp.T @ data), np.asarray(resp.sum(axis=0)).ravel(), float(neg_entropy)


def iterate(
    centers: np.ndarray, sums, program, *, data_norm2: float, gamma: float, lam: float, sigma: float
) -> tuple[np.ndarray, sparse.csr_matrix, float, float]:
    """One iteration after eq. (18): W (eq. 20, or the ℓ1 program 19/23/24 when ``program``
    is given), then C by eq. (22), from the cells' :func:`assignment_sums`.

    Returns the new centers, W, the objective (17)/(24) and the sum of its terms' sizes
    (the scale of the stopping rule).
    """
    resp_data, mass, neg_entropy = sums
    if program is None:
        adjacency = minimum_spanning_tree(centers)  # eq. (20)
        reconstruction = 0.0
    else:
        adjacency, reconstruction = program.solve(centers)  # eq. (19)/(23)/(24)
    graph_laplacian = laplacian(adjacency)
    centers = update_centers(centers, graph_laplacian, adjacency, mass, resp_data, gamma)  # eq. (22)
    quantization = data_norm2 - 2.0 * float(np.sum(centers * resp_data)) + float(mass @ np.sum(centers**2, axis=1))
    length = 2.0 * float(np.sum(centers * (graph_laplacian @ centers)))
    entropy = gamma * sigma * neg_entropy
    value = length + lam * reconstruction + gamma * quantization + entropy
    # The paper's rule divides the change by |objective|, but the entropy term is negative and
    # the objective can pass through zero (two moons, Table 1), which stalls that rule for
    # 100+ iterations; the sum of the terms' sizes is the same scale and never vanishes.
    size = length + lam * reconstruction + gamma * quantization + abs(entropy)
    return centers, adjacency, value, size


def update_centers(centers, graph_laplacian, adjacency, mass, resp_data, gamma) -> np.ndarray:
    """Eq. (22), C = (2/gamma L + Lambda)⁻¹ PᵀX, by Cholesky.

    The system is singular only on connected components that hold no
    assignment mass (possible for isolated ℓ1-graph nodes far from every
    point); the objective does not depend on those nodes, so they keep their
    position and the rest is solved exactly.
    """
    system = (2.0 / gamma) * graph_laplacian + np.diag(mass)
    _, component = csgraph.connected_components(adjacency, directed=False)
    free = np.bincount(component, weights=mass)[component] > 0
    updated = centers.copy()
    if free.all():
        updated = linalg.cho_solve(linalg.cho_factor(system, lower=True, check_finite=False), resp_data)
    else:
        sub = np.ix_(free, free)
        updated[free] = linalg.cho_solve(linalg.cho_factor(system[sub], lower=True, check_finite=False), resp_data[free])
    return updated
