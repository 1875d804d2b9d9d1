"""Do the branches after a fork follow different trends? Branch registration and the branch test."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse

from ..validation import check_integer, check_positive
from .inference import MIN_VARYING_CELLS, benjamini_hochberg, blank_degenerate, f_test, form_f_pvalues
from .splines import (
    adapt_df,
    check_cells,
    check_df,
    explained_form,
    penalized_fit,
    spline_basis,
    sufficient_statistics,
    take_rows,
)


@dataclass(frozen=True)
class BranchTestResult:
    """Output of :func:`branch_test` for G genes and B branches.

    ``curves`` (G × B × n_grid) holds each branch's curve on ``grid``, NaN
    outside the pseudotime range of the branch's cells (trunk included);
    ``shared`` (G × n_grid) the shared curve; ``fstat``/``pvals``/``qvals``
    the F test of branch-specific against shared curves; ``df_shared``,
    ``df_branches`` (B) the effective degrees of freedom of the two models;
    ``n_cells`` per group (trunk first, then the branches); ``times`` the
    time of every tested cell on the axis of the curves (registered or not)
    and ``stretch`` (B) each branch's factor (ones without registration);
    ``degenerate`` as in :class:`TrendResult` (F = 0, p = 1).
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    df_shared: float
    df_branches: np.ndarray
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    degenerate: np.ndarray


#: How the branches' pseudotimes are put on one axis before they are compared.
REGISTRATIONS = ("fit", "none")
#: A branch's reach past the fork is this quantile of its cells' distance from it.
REACH_QUANTILE = 0.95
#: Candidate warps between no stretch and equal reach (geometric steps).
STRETCH_STEPS = 9
#: The warps are estimated on at most this many cells (evenly spread) and the
#: most variable genes, standardised: one shared time axis, not a per-gene fit.
WARP_CELLS = 3000
WARP_GENES = 300


def fork_time(times: np.ndarray, groups: np.ndarray) -> float:
    """Pseudotime of the fork: the earliest pseudotime of any branch cell (group ≥ 1)."""
    return float(np.asarray(times, dtype=float)[np.asarray(groups) >= 1].min())


def stretch_branches(times: np.ndarray, groups: np.ndarray, scales) -> np.ndarray:
    """t' = t_f + (t − t_f) · s_b for the cells of branch b (group b ≥ 1); trunk cells keep t."""
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups)
    scales = np.asarray(scales, dtype=float)
    fork = fork_time(times, groups)
    out = times.copy()
    on_branch = groups >= 1
    out[on_branch] = fork + (times[on_branch] - fork) * scales[groups[on_branch] - 1]
    return out


def fit_branch_warps(
    matrix, rows: np.ndarray, times: np.ndarray, groups: np.ndarray, *, n_knots: int, df: float,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """Stretch factor s_b of every branch's time past the fork, shared by all genes.

    A learned pseudotime is a length along the tree, and a learner stretches
    the branches of a fork differently (DDRTree's latent tree by 10–20 %).
    Genes that follow one curve of the process on every branch then follow
    differently stretched curves of pseudotime, and a test of branch-specific
    curves calls them different. The stretch is a property of the tree, not
    of a gene: s = (s_1, …, s_B) minimises the residual sum of squares of the
    *shared* model (one curve per gene over all cells, ``df`` degrees of
    freedom), summed over the better-fitted half of the most variable genes
    (standardised), on the time axis t' = t_f + (t − t_f) · s_b
    (:func:`stretch_branches`). Genes that follow one curve on every branch
    pin the warp down; branch-specific genes, which no shared curve fits, fall
    in the worse half and do not pull it. The candidates run geometrically
    from no stretch (s = 1) to the stretch that makes the branches reach
    equally far past the fork (the :data:`REACH_QUANTILE` of t − t_f; the
    registration of tradeSeq's pattern test): when the branches genuinely
    span different stretches of the process (one stops early) the data keep
    s near 1, which a rescaling to equal reach would not do. A free search
    over every factor was tried and ran into degenerate warps (one branch
    doubled, the other halved). The result is scaled to geometric mean 1, so
    that the overall length is kept.
    """
    rows = np.asarray(rows, dtype=np.intp)
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups, dtype=np.intp)
    n_branches = int(groups.max())
    pick = np.unique(np.linspace(0, rows.size - 1, min(rows.size, WARP_CELLS)).astype(np.intp))
    sub_rows, sub_times, sub_groups = rows[pick], times[pick], groups[pick]
    columns = np.arange(matrix.shape[1]) if columns is None else np.asarray(columns, dtype=np.intp)
    block = take_rows(matrix, sub_rows, columns)  # at most WARP_CELLS cells, read from a chunked matrix too
    if sparse.issparse(block):  # choose the genes on the sparse block; densify only those
        block = sparse.csc_matrix(block, dtype=np.float64)
        mean = np.asarray(block.mean(axis=0)).ravel()
        spread = np.sqrt(np.maximum(np.asarray(block.multiply(block).mean(axis=0)).ravel() - mean**2, 0.0))
    else:
        block = np.asarray(block, dtype=np.float64)
        spread = block.std(axis=0)
    keep = np.argsort(-spread, kind="stable")[: min(WARP_GENES, int((spread > 0).sum()))]
    if keep.size == 0:
        return np.ones(n_branches)
    chosen = block[:, keep]
    chosen = chosen.toarray() if sparse.issparse(chosen) else chosen
    values = (chosen - chosen.mean(axis=0)) / spread[keep]
    zeros = np.zeros(sub_rows.size, dtype=np.intp)

    def loss(scales: np.ndarray) -> float:
        warped = stretch_branches(sub_times, sub_groups, scales)
        basis = spline_basis(warped, n_knots)
        stats_ = sufficient_statistics(values, np.arange(sub_rows.size), basis.design(warped), zeros, 1)
        fit = penalized_fit(stats_.gram[0], stats_.cross[0], stats_.sumsq[0], basis.penalty, df=df,
                            what="The trunk and branches together")
        # the better-fitted half of the genes: branch-specific genes, which no shared curve
        # fits, must not pull the warp towards whatever helps them
        return float(np.sort(fit.rss)[: max(1, fit.rss.size // 2)].sum())

    # the stretch that gives every branch the same reach past the fork (tradeSeq's registration),
    # and the way there from no stretch at all: the data choose among them
    fork = fork_time(times, groups)
    reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) for b in range(1, n_branches + 1)])
    if not np.all(reach > 0):
        return np.ones(n_branches)
    equal_reach = reach.mean() / reach
    candidates = [equal_reach**weight for weight in np.linspace(0.0, 1.0, STRETCH_STEPS)]
    best = candidates[int(np.argmin([loss(c) for c in candidates]))]
    return best / np.exp(np.log(best).mean())


def branch_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    *,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "fit",
    columns: np.ndarray | None = None,
    names: list[str] | None = None,
) -> BranchTestResult:
    """Test per gene whether its trend differs between the branches after a fork.

    ``groups`` labels each cell 0 (trunk: before the fork) or b = 1…B (its
    branch), B ≥ 2. The interaction model fits one penalised spline per
    branch on the trunk cells plus that branch's cells; each trunk cell enters
    all B branch fits with weight 1/B, so that every cell carries a total
    weight of one (BEAM duplicates the trunk cells into every branch with
    weight one). The shared model is one spline on all cells. Every curve,
    shared or not, uses ``df`` effective degrees of freedom on one common
    basis (knots at quantiles of all the cells' pseudotimes), so the models
    are nested and the F test has Σ_b df − df = (B − 1)·df numerator degrees
    of freedom.

    ``registration="fit"`` (default) first stretches each branch's time past
    the fork by the factor that lets one shared curve per gene fit all genes
    best (:func:`fit_branch_warps`), so that a learner's uneven stretching of
    the branches does not count as a difference; the curves and ``grid`` are
    then on that registered axis. ``"none"`` compares the pseudotimes as they
    are (calibrated when they are proportional to the process's time on every
    branch, e.g. a true time). The warp has B − 1 free parameters shared by
    all genes; the test does not count them against any gene.

    ``names`` name the branches in error messages (default ``"branch b"``).
    A branch with no more cells than ``df``, or whose cells cannot support
    ``df`` degrees of freedom, raises a ValueError.
    """
    rows, times, groups, df, n_grid = _check_branch_input(rows, times, groups, df, n_grid, registration)
    n_branches = int(groups.max())
    scales = _registration(matrix, rows, times, groups, registration, n_knots=n_knots, df=df, columns=columns)
    times = stretch_branches(times, groups, scales)
    names = [f"branch {b}" for b in range(1, n_branches + 1)] if names is None else list(names)
    comparison = _compare_branches(matrix, rows, times, groups, n_branches, n_knots=n_knots, df=df, columns=columns,
                                   names=names, trunk_name="the trunk")
    grid = np.linspace(comparison.basis.knots[0], comparison.basis.knots[-1], n_grid)
    curves, shared = comparison.curves(grid, times, groups)
    return BranchTestResult(
        grid=grid,
        curves=curves,
        shared=shared,
        fstat=comparison.fstat,
        pvals=comparison.pvals,
        qvals=benjamini_hochberg(comparison.pvals),
        df_shared=float(comparison.shared.edf[0]),
        df_branches=np.array([float(fit.edf[0]) for fit in comparison.fits]),
        knots=comparison.basis.knots,
        n_cells=comparison.counts,
        times=times,
        stretch=scales,
        degenerate=comparison.degenerate,
    )


@dataclass(frozen=True)
class ForkTestResult:
    """Output of :func:`fork_test` for G genes and B branches.

    ``grid`` (n_grid) spans the window past the fork, on the (registered)
    time axis; ``curves`` (G × B × n_grid) each branch's curve on it and
    ``shared`` (G × n_grid) the shared curve (the null model);
    ``means`` (G × B) each curve's mean over the window; ``effect`` (G) the
    largest difference between two branches' means and ``up`` / ``down`` (G)
    the branches (0…B−1) with the highest and lowest mean;
    ``fstat``/``pvals``/``qvals`` the F test of branch-specific against one
    shared curve over the window's cells; ``fork`` and ``window`` the fork's
    time and the window's length; ``n_cells`` (B) the cells of each branch in
    the window; ``times`` the time of every cell given (registered), NaN for
    cells outside the window; ``stretch`` and ``degenerate`` as in
    :class:`BranchTestResult`.
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    means: np.ndarray
    effect: np.ndarray
    up: np.ndarray
    down: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    df: float
    fork: float
    window: float
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    degenerate: np.ndarray


def fork_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    *,
    window: float | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "fit",
    columns: np.ndarray | None = None,
    names: list[str] | None = None,
) -> ForkTestResult:
    """Test per gene whether the branches leaving a fork differ just after it, and which way.

    Where :func:`branch_test` asks whether a gene's whole course differs
    between branches (trunk included), the fork test looks only at the
    branches' cells in a window past the fork, on the same registered time
    axis (``registration`` as in :func:`branch_test`, the warp fitted on all
    the cells given, trunk included), and reports the direction: which branch
    a gene goes up in. The test compares one penalised spline per branch
    with one shared spline over the window's cells (``df`` effective degrees
    of freedom each, one basis, the F test of :func:`branch_test`); the effect size is the largest difference between
    two branches' mean fitted expression over the window, in the units of
    the expression.

    ``window`` is the length of the window in (registered) pseudotime past
    the fork; by default the stretch that every branch covers, the smallest
    of the branches' reaches (:data:`REACH_QUANTILE` of their times past the
    fork), so that no branch is compared where it has no cells.
    ``groups`` labels cells 0 (trunk) or b = 1…B (branch), B ≥ 2.
    """
    rows, times, groups, df, n_grid = _check_branch_input(rows, times, groups, df, n_grid, registration)
    n_branches = int(groups.max())
    names = [f"branch {b}" for b in range(1, n_branches + 1)] if names is None else list(names)
    scales = _registration(matrix, rows, times, groups, registration, n_knots=n_knots, df=df, columns=columns)
    times = stretch_branches(times, groups, scales)
    fork = fork_time(times, groups)
    reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) if np.any(groups == b) else 0.0
                      for b in range(1, n_branches + 1)])
    if window is None:
        window = float(reach.min())
        if window <= 0:
            empty = names[int(np.argmin(reach))]
            raise ValueError(f"{empty} reaches no further than the fork: there is no window to compare the branches in.")
    else:
        window = check_positive("window", window, role="pseudotime past the fork")
    inside = (groups >= 1) & (times <= fork + window)
    comparison = _compare_branches(
        matrix, rows[inside], times[inside], groups[inside], n_branches, n_knots=n_knots, df=df, columns=columns,
        names=[f"{name} (within the window of {window:.3g} past the fork)" for name in names], trunk_name="no trunk",
    )
    grid = np.linspace(fork, fork + window, n_grid)
    design = comparison.basis.design(grid)  # clipped to the cells' range at both ends
    curves = np.stack([(design @ fit.coef).T for fit in comparison.fits], axis=1)  # G × B × n_grid
    means = curves.mean(axis=2)
    effect = np.where(comparison.degenerate, 0.0, means.max(axis=1) - means.min(axis=1))
    tested_times = np.full(rows.size, np.nan)
    tested_times[inside] = times[inside]
    return ForkTestResult(
        grid=grid,
        curves=curves,
        shared=(design @ comparison.shared.coef).T,
        means=means,
        effect=effect,
        up=means.argmax(axis=1),
        down=means.argmin(axis=1),
        fstat=comparison.fstat,
        pvals=comparison.pvals,
        qvals=benjamini_hochberg(comparison.pvals),
        df=float(comparison.shared.edf[0]),
        fork=fork,
        window=window,
        knots=comparison.basis.knots,
        n_cells=comparison.counts[1:],
        times=tested_times,
        stretch=scales,
        degenerate=comparison.degenerate,
    )


def _check_branch_input(rows, times, groups, df, n_grid, registration):
    rows, times = check_cells(rows, times)
    df = check_df(df, allow_none=False)
    n_grid = check_integer("n_grid", n_grid, low=2)
    if registration not in REGISTRATIONS:
        raise ValueError(f"registration must be one of {REGISTRATIONS}; got {registration!r}.")
    groups = np.asarray(groups, dtype=np.intp)
    if groups.shape != rows.shape or groups.min(initial=0) < 0:
        raise ValueError("groups must label every cell with 0 (trunk) or a branch number 1…B.")
    n_branches = int(groups.max(initial=0))
    if n_branches < 2:
        raise ValueError(f"A branch test needs at least two branches; got {n_branches}.")
    return rows, times, groups, df, n_grid


def _registration(matrix, rows, times, groups, registration, *, n_knots, df, columns) -> np.ndarray:
    """Each branch's stretch factor: fitted (:func:`fit_branch_warps`) or ones."""
    n_branches = int(groups.max())
    if registration == "fit":
        return fit_branch_warps(matrix, rows, times, groups, n_knots=n_knots, df=df, columns=columns)
    return np.ones(n_branches)


@dataclass(frozen=True)
class _Comparison:
    """Branch-specific against shared curves, fitted and tested (the part both tests share)."""

    basis: object
    shared: object
    fits: list
    fstat: np.ndarray
    pvals: np.ndarray
    counts: np.ndarray
    degenerate: np.ndarray

    def curves(self, grid: np.ndarray, times: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each branch's curve on ``grid`` (G × B × n_grid, NaN outside its cells' range, trunk included) and the shared one."""
        design = self.basis.design(grid)
        curves = np.full((self.shared.rss.size, len(self.fits), grid.size), np.nan)
        for b, fit in enumerate(self.fits, start=1):
            span = times[(groups == 0) | (groups == b)]
            inside = (grid >= span.min()) & (grid <= span.max())
            curves[:, b - 1, inside] = (design[inside] @ fit.coef).T
        return curves, (design @ self.shared.coef).T


def _compare_branches(matrix, rows, times, groups, n_branches, *, n_knots, df, columns, names, trunk_name):
    """Fit one curve per branch (trunk cells in each with weight 1/B) and one shared curve; F test them.

    The trunk (group 0) may be empty, as in :func:`fork_test`.
    """
    counts = np.bincount(groups, minlength=n_branches + 1)
    for b in range(1, n_branches + 1):
        if counts[b] <= df:
            raise ValueError(
                f"{names[b - 1]} has {counts[b]} cells, not more than df={df:g}: too few to fit its own curve. "
                "Lower df, choose another branch point, or prune short branches (tl.pseudotime's min_branch_nodes)."
            )
    basis = spline_basis(times, n_knots)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_branches + 1, columns)
    trunk_weight = 1.0 / n_branches
    # one df for every curve keeps the models nested: the least any of them can carry
    df = adapt_df(
        df,
        [stats_.gram.sum(0)] + [trunk_weight * stats_.gram[0] + stats_.gram[b] for b in range(1, n_branches + 1)],
        basis.penalty,
        f"A branch (with {trunk_name})",
    )
    shared = penalized_fit(stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0), basis.penalty, df=df,
                           what="The branches together")
    fits = [  # a loop over the few branches; genes are vectorised inside each fit
        penalized_fit(
            trunk_weight * stats_.gram[0] + stats_.gram[b],
            trunk_weight * stats_.cross[0] + stats_.cross[b],
            trunk_weight * stats_.sumsq[0] + stats_.sumsq[b],
            basis.penalty,
            df=df,
            what=f"{names[b - 1]} (with {trunk_name})",
        )
        for b in range(1, n_branches + 1)
    ]
    forms = _branch_forms(stats_.gram, basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in fits])
    fstat, approximate = f_test(shared.rss, sum(fit.rss for fit in fits), *_form_moments(*forms, stats_.gram.sum()))
    # the exact null of this F for Gaussian noise; Satterthwaite's where the saddlepoint is singular
    exact = form_f_pvalues(fstat, *forms, float(stats_.gram.sum()))
    pvals = np.where(np.isnan(exact), approximate, exact)
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals = blank_degenerate(degenerate, fstat, pvals)
    return _Comparison(basis=basis, shared=shared, fits=fits, fstat=fstat, pvals=pvals, counts=counts,
                       degenerate=degenerate)


def _branch_forms(gram: np.ndarray, penalty: np.ndarray, lam_shared: float, lam_branches: list[float]):
    """UᵀU, C_A and C_Q of the branch test's quadratic forms A = U C_A Uᵀ and R = I − U C_Q Uᵀ.

    With the basis rows X of all n cells, branch weights W_b (1/B on the trunk,
    1 on branch b, 0 elsewhere; Σ_b W_b = I) and S = 2M⁻¹ − M⁻¹GM⁻¹ for a fit
    with M = G + λP, the branch fits explain yᵀQy with
    Q = Σ_b W_b X S_b Xᵀ W_b and the shared fit Q₀ = X S₀ Xᵀ; A = Q − Q₀ and
    R = I − Q. With U = [W_1X, …, W_BX, X], C_Q = diag(S_1, …, S_B, 0) and
    C_A = diag(S_1, …, S_B, −S₀); UᵀU is built from the groups' Gram
    matrices (``gram[0]`` the trunk's) without touching the n cells again.
    """
    n_branches = len(lam_branches)
    weight = 1.0 / n_branches
    trunk, own = gram[0], gram[1:]
    blocks = [[weight**2 * trunk + (own[b] if b == c else 0.0) for c in range(n_branches)]
              + [weight * trunk + own[b]] for b in range(n_branches)]
    blocks.append([weight * trunk + own[c] for c in range(n_branches)] + [gram.sum(axis=0)])
    cross = np.block(blocks)
    branch_forms = [explained_form(trunk * weight + own[b], penalty, lam) for b, lam in enumerate(lam_branches)]
    shared_form = explained_form(gram.sum(axis=0), penalty, lam_shared)
    explained = linalg.block_diag(*branch_forms, -shared_form)
    fitted = linalg.block_diag(*branch_forms, np.zeros_like(shared_form))
    return cross, explained, fitted


def _form_moments(cross: np.ndarray, explained: np.ndarray, fitted: np.ndarray, n_cells: float):
    """tr A, tr A², tr R, tr R² for A = U C_A Uᵀ, R = I − U C_Q Uᵀ, from the p × p pieces (traces of C·UᵀU)."""
    product_a = explained @ cross
    product_q = fitted @ cross
    q_trace, q_trace_sq = np.trace(product_q), np.sum(product_q * product_q.T)
    return (
        np.trace(product_a),
        np.sum(product_a * product_a.T),
        n_cells - q_trace,
        n_cells - 2.0 * q_trace + q_trace_sq,
    )
