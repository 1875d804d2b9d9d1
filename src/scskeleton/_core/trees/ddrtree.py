"""Discriminative dimensionality reduction via learning a tree (DDRTree).

L. Wang, "Probabilistic dimensionality reduction via structure learning", arXiv
preprint, 2016 (with Q. Mao in IEEE Transactions on Pattern Analysis and Machine
Intelligence, 2019; numbers of sections and equations are the preprint's), §4.2–4.3, problem (31):

    min_{W, Z, C, S, R}  ||Y - Z Wᵀ||²_F
                         + (lam / 2) Σ_{k,k'} s_kk' ||c_k - c_k'||²
                         + gamma [ Σ_{i,k} r_ik ||z_i - c_k||² + sigma Σ_{i,k} r_ik log r_ik ]
    s.t. WᵀW = I_d,  S a spanning tree over the K centers,  R ≥ 0,  R1 = 1.

Algorithm 2 alternates exact minimisations: S as a minimum spanning tree (eq. 28), R by
Lemma 1 (eq. 32), then {W, Z, C} jointly by Proposition 5 (eq. 33). Each step
is a global minimiser of its block, so the objective never increases.

Proposition 5 is evaluated without the N × N matrix Q. With
B = (lam/gamma) L + Gamma and M = ((1+gamma)/gamma) B - RᵀR (K × K, positive
definite by Lemma 2 — and also whenever the tree is connected and lam > 0,
because then B is positive definite even if a center holds no mass):

    Q      = (I_N + R M⁻¹ Rᵀ) / (1 + gamma)                   (never formed)
    YᵀQY   = (YᵀY + (YᵀR) M⁻¹ (RᵀY)) / (1 + gamma)            D × D
    Z      = QYW = (YW + R M⁻¹ (RᵀYW)) / (1 + gamma)          N × d
    C      = B⁻¹ RᵀZ                                          K × d

so one iteration costs O(nnz(R)·D + N·D·d + K³ + D³) time and O(N·(K + D))
memory (R is kept sparse when most of it underflows to zero).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, sparse

from ..embed import principal_directions
from ..graphs import laplacian, minimum_spanning_tree
from ..validation import as_float_matrix, check_integer, check_positive
from .assign import CHUNK_ROWS, kmeans, nearest_other_squared, soft_assignment
from .defaults import default_n_centers, default_n_components
from .gaps import bridging_edges
from .pruning import MIN_EXTENSION, MIN_MASS, check_pruning, prune_tree

#: Pruning judges each branch with every center that is nearest to at least this many cells moved
#: to the mean of their YW: the tree-length term pulls the centers off their cells (most near forks
#: and on curved branches), and the pruning would read that offset as noise (see ``prune_tree``).
CENTROID_CELLS = 10
#: The default ``sigma`` is this share of the squared spacing of the initial centers (nearly hard).
SIGMA_SHARE = 1e-3


@dataclass(frozen=True)
class DDRTreeResult:
    """Output of :func:`ddrtree`.

    Attributes
    ----------
    projection
        W, D × d with orthonormal columns (eq. 33).
    latent
        Z, N × d latent points (eq. 33). The quantization term pulls them onto
        the centers (Z = (YW + γ · their centers' pull) / (1 + γ)), so the
        cells of one center coincide there.
    cells
        YW, N × d: each cell's own coordinates in the latent space, Y (centred)
        times the final W. Cells are placed on the tree, and assigned to its
        centers, from these (see :func:`ddrtree`).
    centers
        C, K × d centers (eq. 33).
    tree
        S, K × K symmetric binary CSR adjacency of the spanning tree (eq. 28).
    assignment
        R, N × K soft assignment, rows sum to one: eq. (32) evaluated at the
        cells' coordinates YW and the final centers. Dense or CSR.
    objective
        Value of objective (31) after each iteration.
    n_iter
        Number of iterations run.
    converged
        Whether the relative change of the objective fell below ``tol``.
    mean
        Per-feature mean subtracted from Y before fitting (length D).
    sigma
        The bandwidth of eq. (32) used (the one given, or :func:`default_sigma`).
    n_pruned
        Terminal branches removed after the fit (``prune=True``); their centers
        are gone from ``centers``, ``tree`` and ``assignment``.
    gap_edges
        Edges of the tree that cross a gap in the data (E × 2), judged on YW
        (:func:`~scskeleton._core.trees.gaps.bridging_edges`).
    """

    projection: np.ndarray
    latent: np.ndarray
    centers: np.ndarray
    tree: sparse.csr_matrix
    assignment: np.ndarray | sparse.csr_matrix
    objective: np.ndarray
    n_iter: int
    converged: bool
    mean: np.ndarray
    cells: np.ndarray
    sigma: float
    n_pruned: int = 0
    gap_edges: np.ndarray = field(default_factory=lambda: np.empty((0, 2), dtype=np.intp))


def default_sigma(centers: np.ndarray) -> float:
    """Bandwidth of the soft assignment used when none is given: :data:`SIGMA_SHARE` times the
    median squared distance between each center and its nearest other center.

    Eq. (32) compares squared distances with ``sigma``, so a fixed value means
    hard assignments on data of one scale and uniform ones on data a hundred
    times smaller: the paper's 1e-3 on principal components multiplied by
    0.01 (or on a diffusion map, coordinates of about 0.03) gave trees without
    a branch point (pseudotime Spearman 0.23–0.75), where the same data at
    their usual scale give the right tree. Scaling Y by s scales every
    quadratic term of (31) by s², so ``sigma`` proportional to a squared
    length of the data makes the fit the same at every scale. The length is
    the spacing of the initial centers, the scale at which assignments
    compete; on 30 principal components of log-normalised counts its square
    is 1.4–1.9, so the default stays in the nearly hard regime of the
    paper's 1e-3 (Proposition 4), now at any scale. Coincident centers are
    skipped; when every center coincides the paper's 1e-3 is kept.
    """
    centers = np.asarray(centers, dtype=float)
    if centers.shape[0] < 2:
        return 1e-3
    spacing = nearest_other_squared(centers)
    spacing = spacing[spacing > 0]
    return float(SIGMA_SHARE * np.median(spacing)) if spacing.size else 1e-3


def default_lam(n_cells: int) -> float:
    """Tree-length weight used when none is given: lam = N / 4.

    R's DDRTree and Monocle 2 use 5 · N. On PCA coordinates that over-smooths:
    it contracts the tips of the tree into clumps and misses branches (on the
    generated branching data pseudotime Spearman 0.95–0.97 against 0.99; on
    scanpy's toggleswitch no bifurcation). Smaller values resolve more
    branches but also grow stubs through thick clouds of cells, which the
    pruning after the fit removes (:mod:`~scskeleton._core.trees.pruning`); N / 4
    keeps toggleswitch's short branch (N / 2 contracts it into the noise) and
    the generated trees' pseudotime at Spearman ≥ 0.99.
    """
    return 0.25 * n_cells


@dataclass(frozen=True)
class Settings:
    """The parameters of :func:`ddrtree`, validated, with the data-free defaults resolved
    (``n_components`` stays ``None`` until YᵀY is known)."""

    n_components: int | None
    n_centers: int
    sigma: float | None
    gamma: float
    lam: float
    maxiter: int
    tol: float
    random_state: int
    min_branch_extension: float
    min_branch_fraction: float


def check_settings(
    shape: tuple[int, int], *, n_components, n_centers, sigma, gamma, lam, maxiter, tol, random_state,
    min_branch_extension, min_branch_fraction,
) -> Settings:
    """Validate the parameters of :func:`ddrtree` for data of ``shape`` (N × D), before any work is done."""
    n_cells, n_features = shape
    if n_cells < 3:
        raise ValueError(f"DDRTree needs at least 3 cells; got {n_cells}.")
    if n_components is not None:
        n_components = check_integer(
            "n_components", n_components, low=1, high=n_features, role="latent dimension d, at most the number of features"
        )
    if n_centers is None:
        n_centers = default_n_centers(n_cells)
    n_centers = check_integer("n_centers", n_centers, low=2, high=n_cells, role="number of tree nodes K, 2 ≤ K ≤ N")
    if sigma is not None:
        sigma = check_positive("sigma", sigma, role="bandwidth of the soft assignment, eq. 32")
    gamma = check_positive("gamma", gamma, role="weight of the quantization term, eq. 31")
    lam = default_lam(n_cells) if lam is None else check_positive("lam", lam, role="weight of the tree length, eq. 31")
    maxiter = check_integer("maxiter", maxiter, low=1)
    min_branch_extension, min_branch_fraction = check_pruning(min_branch_extension, min_branch_fraction)
    tol = check_positive("tol", tol, allow_zero=True)
    random_state = check_integer("random_state", random_state, low=0)
    return Settings(
        n_components, n_centers, sigma, gamma, lam, maxiter, tol, random_state, min_branch_extension, min_branch_fraction
    )


def ddrtree(
    data,
    *,
    n_components: int | None = None,
    n_centers: int | None = None,
    sigma: float | None = None,
    gamma: float = 10.0,
    lam: float | None = None,
    maxiter: int = 100,
    tol: float = 1e-3,
    random_state: int = 0,
    prune: bool = False,
    min_branch_extension: float = MIN_EXTENSION,
    min_branch_fraction: float = MIN_MASS,
    callback: Callable[[int, float], None] | None = None,
) -> DDRTreeResult:
    """Fit DDRTree (Algorithm 2, objective 31) to ``data`` (N × D).

    Parameters
    ----------
    data
        N × D matrix Y of cells × features. It is centred column-wise first.
    n_components
        d, dimension of the latent space. ``None``: :func:`~.defaults.default_n_components`.
    n_centers
        K ≤ N, number of tree nodes. ``None`` uses :func:`~.defaults.default_n_centers`.
        K = N is Algorithm 2 as printed (C initialised to Z); K < N seeds C by
        deterministic k-means on Z.
    sigma
        Bandwidth of the soft assignment (eq. 32), in squared latent units;
        small values give hard k-means-like assignments (Proposition 4).
        ``None``: :func:`default_sigma` of the initial centers (nearly hard at
        any scale of the data).
    gamma
        Weight of the quantization term tying latent points to centers.
    lam
        Weight of the tree length; ``None`` uses N / 4 (:func:`default_lam`).
    maxiter, tol
        Stop after ``maxiter`` iterations or when the relative change of the
        objective falls below ``tol``.
    random_state
        Seed of the k-means initialisation (the only random step).
    prune, min_branch_extension, min_branch_fraction
        After the fit, remove terminal branches that do not stand out of the
        noise (:func:`~scskeleton._core.trees.pruning.prune_tree`), judged on the
        projected data YW (not on Z, which the quantization term pulls onto the
        centers), with each center holding at least :data:`CENTROID_CELLS` cells
        judged at the mean of their YW; the assignment is then recomputed by
        eq. (32) for the centers that remain (at their fitted positions).
    callback
        Called as ``callback(iteration, objective)`` after every iteration.

    Notes
    -----
    The result places the cells on the tree by their own coordinates YW (Y times
    the final W), and its assignment R is eq. (32) at YW, not at Z. Z minimises
    (31), whose quantization term pulls every latent point towards its centers:
    with gamma = 10 a cell keeps 1/11 of its own position, so the cells of one
    center coincide there, and a cell's position along the tree, and with it
    its pseudotime, is its center's. Monocle 2 orders cells by Z, which gives
    pseudotime in steps of one center; YW keeps each cell's own position. The
    fit itself (W, Z, C, S) is Algorithm 2's.
    """
    data = as_float_matrix(data, "data")
    settings = check_settings(
        data.shape, n_components=n_components, n_centers=n_centers, sigma=sigma, gamma=gamma, lam=lam,
        maxiter=maxiter, tol=tol, random_state=random_state,
        min_branch_extension=min_branch_extension, min_branch_fraction=min_branch_fraction,
    )
    n_components, n_centers, sigma, gamma, lam = (
        settings.n_components, settings.n_centers, settings.sigma, settings.gamma, settings.lam
    )
    maxiter, tol, random_state = settings.maxiter, settings.tol, settings.random_state
    min_branch_extension, min_branch_fraction = settings.min_branch_extension, settings.min_branch_fraction
    n_cells = data.shape[0]

    mean = data.mean(axis=0)
    data = data - mean
    gram = data.T @ data  # YᵀY, reused every iteration
    data_norm2 = float(np.trace(gram))
    if n_components is None:
        n_components = default_n_components(gram)

    projection = principal_directions(gram, n_components)
    latent = data @ projection
    if n_centers == n_cells:
        centers = latent.copy()
    else:
        centers = kmeans(latent, n_centers, random_state=random_state)
    if sigma is None:
        sigma = default_sigma(centers)

    objective: list[float] = []
    converged = False
    assignment = None
    for iteration in range(1, maxiter + 1):
        tree = minimum_spanning_tree(centers)  # eq. (28)
        graph_laplacian = laplacian(tree)
        # eq. (32); the previous R is no longer needed, so its memory is reused
        assignment = soft_assignment(latent, centers, sigma, reuse=None if assignment is None else assignment.matrix)
        resp = assignment.matrix
        step = proposition5(
            data, gram, resp, assignment.neg_entropy, graph_laplacian, gamma=gamma, lam=lam, n_components=n_components
        )
        projection, latent, centers, data_proj = step.projection, step.latent, step.centers, step.data_proj
        value = objective_value(
            projection, centers, step.sums, step.latent_part,
            data_norm2=data_norm2, gram=gram, graph_laplacian=graph_laplacian, sigma=sigma, gamma=gamma, lam=lam,
        )
        if record_iteration(objective, value, iteration, callback, tol):
            converged = True
            break

    # S and R consistent with the final centers and latent points.
    tree = minimum_spanning_tree(centers)
    n_pruned = 0
    if prune:
        pruned = prune_tree(
            data_proj, centers, tree, min_extension=min_branch_extension, min_mass=min_branch_fraction,
            centroid_cells=CENTROID_CELLS,
        )
        centers, tree, n_pruned = centers[pruned.keep], pruned.adjacency, pruned.removed_branches
    # Cells are placed from their own coordinates YW, not from Z: the quantization term pulls Z onto
    # the centers, so the cells of a center would share one point of the tree (see the docstring).
    final_assignment = soft_assignment(data_proj, centers, sigma, reuse=assignment.matrix).matrix
    return DDRTreeResult(
        projection=projection,
        latent=latent,
        centers=centers,
        tree=tree,
        assignment=final_assignment,
        objective=np.asarray(objective),
        n_iter=len(objective),
        converged=converged,
        mean=mean,
        cells=data_proj,
        sigma=sigma,
        n_pruned=n_pruned,
        gap_edges=bridging_edges(data_proj, centers, tree),
    )


def has_converged(objective: list[float], tol: float) -> bool:
    """Whether the relative change of the objective over the last iteration is at most ``tol``."""
    previous, value = objective[-2], objective[-1]
    return abs(previous - value) <= tol * max(abs(previous), np.finfo(float).tiny)


def record_iteration(objective: list[float], value: float, iteration: int, callback, tol: float) -> bool:
    """Append iteration ``iteration``'s objective ``value`` to ``objective``, report it to ``callback``
    (when given), and say whether the fit has converged (:func:`has_converged`; never after the first)."""
    objective.append(value)
    if callback is not None:
        callback(iteration, value)
    return iteration > 1 and has_converged(objective, tol)


# Proposition 5 as sums over cells and small solves. Each sum is additive over any partition of
# the cells, so the in-memory fit evaluates it on all cells at once and the chunked fit
# (scskeleton._dask) on each block of cells, adding the blocks' sums; the solves see only
# K × K, K × D and D × D arrays.


@dataclass(frozen=True)
class AssignmentSums:
    """Sums over the cells of one soft assignment R (eq. 32) that Proposition 5 needs.

    ``resp_gram`` = RᵀR (K × K), ``resp_data`` = RᵀY (K × D, Y centred),
    ``mass`` = 1ᵀR (Gamma's diagonal), ``neg_entropy`` = Σ r log r.
    """

    resp_gram: np.ndarray
    resp_data: np.ndarray
    mass: np.ndarray
    neg_entropy: float

    def __add__(self, other: AssignmentSums) -> AssignmentSums:
        return AssignmentSums(
            self.resp_gram + other.resp_gram, self.resp_data + other.resp_data,
            self.mass + other.mass, self.neg_entropy + other.neg_entropy,
        )


def assignment_sums(resp, data: np.ndarray, neg_entropy: float) -> AssignmentSums:
    """:class:`AssignmentSums` of the cells in ``resp`` (R, dense or CSR) and ``data`` (their centred Y)."""
    return AssignmentSums(
        _gram_of(resp), np.asarray(resp.T @ data), np.asarray(resp.sum(axis=0)).ravel(), float(neg_entropy)
    )


@dataclass(frozen=True)
class ProjectionStep:
    """The K × K / D × D part of Proposition 5 for fixed {S, R}.

    ``projection`` = W (eq. 33: top eigenvectors of YᵀQY), ``latent_rhs`` =
    M⁻¹ RᵀYW (K × d; each cell's Z needs only its row of R and this),
    ``smoothing_factor`` = Cholesky factor of B = (lam/gamma) L + Gamma.
    """

    projection: np.ndarray
    latent_rhs: np.ndarray
    smoothing_factor: tuple


def solve_projection(
    gram: np.ndarray, sums: AssignmentSums, graph_laplacian: np.ndarray, *, gamma: float, lam: float, n_components: int
) -> ProjectionStep:
    """W of eq. (33) from YᵀY and the assignment sums, through K × K systems only (Cholesky).

    Q = (I + R M⁻¹ Rᵀ)/(1 + gamma) is never formed:
    YᵀQY = (YᵀY + (RᵀY)ᵀ M⁻¹ (RᵀY)) / (1 + gamma).
    """
    smoothing = (lam / gamma) * graph_laplacian + np.diag(sums.mass)
    woodbury = ((1.0 + gamma) / gamma) * smoothing - sums.resp_gram
    woodbury_factor = _cholesky(woodbury, "M = ((1+gamma)/gamma)(lam/gamma L + Gamma) - RᵀR")
    resp_data = sums.resp_data
    projected_gram = (gram + resp_data.T @ linalg.cho_solve(woodbury_factor, resp_data)) / (1.0 + gamma)
    projection = principal_directions(projected_gram, n_components)
    return ProjectionStep(
        projection=projection,
        latent_rhs=linalg.cho_solve(woodbury_factor, resp_data @ projection),
        smoothing_factor=_cholesky(smoothing, "lam/gamma L + Gamma"),
    )


def update_latent(data: np.ndarray, resp, step: ProjectionStep, *, gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """YW and Z = QYW = (YW + R M⁻¹ RᵀYW) / (1 + gamma) (eq. 33) for the cells in ``data`` / ``resp``."""
    data_proj = data @ step.projection
    return data_proj, (data_proj + resp @ step.latent_rhs) / (1.0 + gamma)


@dataclass(frozen=True)
class LatentSums:
    """Sums over the cells after the Z update: RᵀZ (K × d), ||YW - Z||² and ||Z||²."""

    resp_latent: np.ndarray
    residual_inside: float
    latent_norm2: float

    def __add__(self, other: LatentSums) -> LatentSums:
        return LatentSums(
            self.resp_latent + other.resp_latent,
            self.residual_inside + other.residual_inside,
            self.latent_norm2 + other.latent_norm2,
        )


def latent_sums(resp, data_proj: np.ndarray, latent: np.ndarray) -> LatentSums:
    """:class:`LatentSums` of the cells in ``resp``, ``data_proj`` (YW) and ``latent`` (Z)."""
    return LatentSums(
        np.asarray(resp.T @ latent), float(np.sum((data_proj - latent) ** 2)), float(np.sum(latent**2))
    )


def latent_sums_from_assignment(
    sums: AssignmentSums, gram: np.ndarray, step: ProjectionStep, *, gamma: float
) -> LatentSums:
    """:func:`latent_sums` of the updated Z without a pass over the cells.

    Z = (YW + RΨ)/(1 + gamma) with Ψ = M⁻¹RᵀYW (eq. 33), so its sums follow from
    YᵀY and the assignment sums alone:

        RᵀZ         = (RᵀY W + RᵀR Ψ) / (1 + gamma)
        ||Z||²      = (tr WᵀYᵀYW + 2 tr Ψᵀ(RᵀY W) + tr ΨᵀRᵀRΨ) / (1 + gamma)²
        ||YW − Z||² = (gamma² tr WᵀYᵀYW − 2 gamma tr Ψᵀ(RᵀY W) + tr ΨᵀRᵀRΨ) / (1 + gamma)²

    The chunked fit (:mod:`scskeleton._dask.ddrtree`) uses this to finish an
    iteration after one pass over the cells instead of two.
    """
    projection, rhs = step.projection, step.latent_rhs
    resp_proj = sums.resp_data @ projection  # RᵀYW, K × d
    spread = float(np.sum(projection * (gram @ projection)))
    cross = float(np.sum(resp_proj * rhs))
    fitted = float(np.sum(rhs * (sums.resp_gram @ rhs)))
    scale = 1.0 + gamma
    return LatentSums(
        (resp_proj + sums.resp_gram @ rhs) / scale,
        max(gamma**2 * spread - 2.0 * gamma * cross + fitted, 0.0) / scale**2,
        (spread + 2.0 * cross + fitted) / scale**2,
    )


def solve_centers(step: ProjectionStep, sums: LatentSums) -> np.ndarray:
    """C = B⁻¹ RᵀZ (eq. 33)."""
    return linalg.cho_solve(step.smoothing_factor, sums.resp_latent)


@dataclass(frozen=True)
class Proposition5Step:
    """The {W, Z, C} block update of all cells and the sums the objective reuses."""

    projection: np.ndarray
    latent: np.ndarray
    centers: np.ndarray
    data_proj: np.ndarray  # YW
    sums: AssignmentSums
    latent_part: LatentSums


def proposition5(
    data: np.ndarray,
    gram: np.ndarray,
    resp,
    neg_entropy: float,
    graph_laplacian: np.ndarray,
    *,
    gamma: float,
    lam: float,
    n_components: int,
) -> Proposition5Step:
    """Exact minimiser of (31) over {W, Z, C} for fixed {S, R} (Proposition 5, eq. 33), on all cells.

    ``data`` is the centred Y (N × D), ``gram`` = YᵀY, ``resp`` = R (dense or
    CSR) with Σ r log r = ``neg_entropy``, ``graph_laplacian`` = L of S.
    """
    sums = assignment_sums(resp, data, neg_entropy)
    solve = solve_projection(gram, sums, graph_laplacian, gamma=gamma, lam=lam, n_components=n_components)
    data_proj, latent = update_latent(data, resp, solve, gamma=gamma)
    latent_part = latent_sums(resp, data_proj, latent)
    return Proposition5Step(
        solve.projection, latent, solve_centers(solve, latent_part), data_proj, sums, latent_part
    )


def _gram_of(resp, chunk_rows: int = CHUNK_ROWS) -> np.ndarray:
    """RᵀR as a dense K × K array.

    A sparse R is densified one row block at a time so the product runs in BLAS:
    O(N·K²) flops but far faster than scipy's sparse-sparse product here.
    """
    if not sparse.issparse(resp):
        return resp.T @ resp
    gram = np.zeros((resp.shape[1], resp.shape[1]))
    for start in range(0, resp.shape[0], chunk_rows):
        block = resp[start : start + chunk_rows].toarray()
        gram += block.T @ block
    return gram


def _cholesky(matrix: np.ndarray, name: str):
    try:
        return linalg.cho_factor(matrix, lower=True, check_finite=False)
    except linalg.LinAlgError as err:
        raise ValueError(
            f"The K × K matrix {name} is not positive definite (Lemma 2 needs every center "
            "to hold some assignment mass, or lam > 0). Increase sigma or lam, or lower n_centers."
        ) from err


def objective_value(
    projection: np.ndarray,
    centers: np.ndarray,
    sums: AssignmentSums,
    latent_part: LatentSums,
    *,
    data_norm2: float,
    gram: np.ndarray,
    graph_laplacian: np.ndarray,
    sigma: float,
    gamma: float,
    lam: float,
) -> float:
    """Exact value of objective (31) from the sums over cells.

    Reconstruction: with WᵀW = I, Y - ZWᵀ = (Y - YWWᵀ) + (YW - Z)Wᵀ and the two
    parts are orthogonal, so ||Y - ZWᵀ||² = (||Y||² - ||YW||²) + ||YW - Z||²,
    evaluated from the D × D Gram matrix and N × d arrays only.
    Tree length: (lam/2) Σ s_kk' ||c_k - c_k'||² = lam · Tr(Cᵀ L C).
    Quantization: Σ r_ik ||z_i - c_k||² = ||Z||² - 2 Tr(Cᵀ RᵀZ) + Σ_k Gamma_k ||c_k||²
    (rows of R sum to one).
    """
    residual_outside = data_norm2 - float(np.sum(projection * (gram @ projection)))
    tree_length = lam * float(np.sum(centers * (graph_laplacian @ centers)))
    quantization = (
        latent_part.latent_norm2
        - 2.0 * float(np.sum(centers * latent_part.resp_latent))
        + float(np.sum(sums.mass * np.sum(centers**2, axis=1)))
    )
    return (
        residual_outside + latent_part.residual_inside + tree_length
        + gamma * (quantization + sigma * sums.neg_entropy)
    )
