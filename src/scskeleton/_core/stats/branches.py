"""Do the branches after a fork follow different trends? The branch test and the fork test.

Both compare one curve per branch with one shared curve (:mod:`~.comparison`) on a time
axis on which the branches' pseudotimes are registered (:mod:`~.registration`): the
branch test over each branch's whole course, trunk included, the fork test in a window
just past the fork, with the direction of each difference.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from ..validation import check_integer, check_positive
from .comparison import compare_branches
from .inference import benjamini_hochberg
from .registration import (
    FINE_WARP_PIECES,
    REACH_QUANTILE,
    WARP_PIECES,
    WIDE_RELATIVE_STRETCH,
    BranchWarp,
    fit_branch_warps,
    fork_time,
)
from .splines import check_cells, check_df


@dataclass(frozen=True, kw_only=True)
class BranchComparisonResult:
    """What :func:`branch_test` and :func:`fork_test` both return, for G genes and B branches.

    ``grid`` (n_grid) is the time axis of the curves; ``curves`` (G × B × n_grid) each
    branch's curve on it, NaN where the branch has no cells; ``shared`` (G × n_grid)
    the shared curve (the null model); ``fstat``/``pvals``/``qvals`` the F test of
    branch-specific against shared curves; ``pvals_registered`` and
    ``pvals_unregistered`` the p-values of the comparison on each axis (NaN for an
    axis not compared), of which ``pvals`` is the larger with
    ``registration="both"``; ``knots`` those of the curves' basis; ``n_cells`` the
    cells compared; ``times`` the time of the cells on the axis of the curves
    (registered or not); ``stretch`` (B) each branch's overall factor over its reach
    past the fork and ``shift`` (B) its shift (ones and zeros without registration;
    :class:`~.registration.BranchWarp`); ``degenerate`` as in :class:`TrendResult`
    (F = 0, p = 1); ``warp_at_bound`` whether a warp of the registration pressed
    against a bound of its family (:func:`~.registration._pressed_against_bounds`),
    in which case the branches were compared on the learned axis alone, whatever
    ``registration`` asked (:func:`_registrations`: ``times`` unwarped, ``stretch``
    ones, ``shift`` zeros, ``pvals_registered`` NaN).
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    pvals_registered: np.ndarray
    pvals_unregistered: np.ndarray
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    shift: np.ndarray
    degenerate: np.ndarray
    warp_at_bound: bool = False


@dataclass(frozen=True, kw_only=True)
class BranchTestResult(BranchComparisonResult):
    """Output of :func:`branch_test` for G genes and B branches: the fields of
    :class:`BranchComparisonResult` and the models' degrees of freedom.

    ``curves`` (G × B × n_grid) holds each branch's curve on ``grid``, NaN
    outside the pseudotime range of the branch's cells (trunk included);
    ``shared`` (G × n_grid) the shared curve; ``df_shared``,
    ``df_branches`` (B) the effective degrees of freedom of the two models;
    ``n_cells`` per group (trunk first, then the branches); ``times`` the
    time of every tested cell on the axis of the curves (registered or not).
    """

    df_shared: float
    df_branches: np.ndarray


#: How the branches' pseudotimes are put on one axis before they are compared: on the registered
#: axis and on the pseudotime as it is, a gene called only where both comparisons call it ("both");
#: on the registered axis alone ("fit"); on the pseudotime as it is ("none").
REGISTRATIONS = ("both", "fit", "none")


def branch_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    *,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "both",
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
    basis (knots at quantiles of all the cells' pseudotimes, or of each
    branch curve's cells where those leave a curve unable to carry ``df``:
    :func:`~.splines.basis_for_curves`), so the models are nested and the F
    test has Σ_b df − df = (B − 1)·df numerator degrees of freedom.

    ``registration="fit"`` first warps each branch's time past the fork onto
    one axis (:func:`~.registration.fit_branch_warps`), so that a learner's uneven
    stretching of the branches does not count as a difference, twice: with
    :data:`~.registration.WARP_PIECES` and with :data:`~.registration.FINE_WARP_PIECES` pieces, each gene
    given the larger of its two p-values (:func:`_registrations`); the curves
    and ``grid`` are then on the first warp's axis. ``"none"`` compares the
    pseudotimes as they are (calibrated when they are proportional to the
    process's time on every branch, e.g. a true time). The warp's few
    parameters are shared by all genes; the test does not count them against
    any gene. ``"both"`` (default) compares the branches on both axes and
    gives each gene the larger of its two p-values (curves and ``grid`` on
    the registered axis): an intersection–union test, whose level holds
    wherever either axis is right. Neither is right everywhere: a learned
    pseudotime runs at different paces on different branches, which only the
    warp undoes, while where most genes part gradually after the fork, the
    warp mistakes their delays for a difference of pace (:func:`_combined`).
    A warp that presses against the bounds of its family is not used: the
    branches are then compared on the learned axis alone, whatever
    ``registration`` asks (:func:`_registrations`, ``warp_at_bound``).

    A sparse gene in a small branch (fewer than
    :data:`~.inference.MIN_EXPECTED_CARRIERS` of the cells that carry its
    variation expected there: the cells with any count, whether the
    unexpressed cells share one value or, as in Pearson residuals, each has
    its own; :class:`~.passes.SufficientStatistics`) gets the larger of the
    F test's p-value and a count test's
    (:func:`~.inference.sparse_count_pvalues`), in both tests.

    ``names`` name the branches in error messages (default ``"branch b"``).
    A branch with no more cells than ``df``, or whose cells cannot support
    ``df`` degrees of freedom, raises a ValueError.
    """
    rows, times, groups, df, n_grid = _check_branch_input(rows, times, groups, df, n_grid, registration)
    n_branches = int(groups.max())
    warp, *finer = _registrations(matrix, rows, times, groups, registration, n_knots=n_knots, df=df)
    names = [f"branch {b}" for b in range(1, n_branches + 1)] if names is None else list(names)

    def compare(axis, local_variance=None):
        return compare_branches(matrix, rows, axis, groups, n_branches, n_knots=n_knots, df=df, columns=columns,
                                 names=names, trunk_name="the trunk", local_variance=local_variance)

    warped = warp(times, groups)
    comparison = compare(warped)
    # a warp is monotone within each branch, so every axis puts each group's cells in the same order:
    # the same runs of cells, the same local variance, read in the first pass alone
    compare = functools.partial(compare, local_variance=comparison.local_variance)
    registered = comparison.pvals
    for other in finer:
        registered = np.fmax(registered, compare(other(times, groups)).pvals)
    # a warp at its bound was not used (_registrations): the comparison above is on the learned axis
    used = "none" if warp.at_bound else registration
    pvals, registered, unregistered = _combined(used, registered, lambda: compare(times).pvals)
    grid = np.linspace(comparison.basis.knots[0], comparison.basis.knots[-1], n_grid)
    curves, shared = comparison.curves(grid, warped, groups)
    return BranchTestResult(
        grid=grid,
        curves=curves,
        shared=shared,
        fstat=comparison.fstat,
        pvals=pvals,
        qvals=benjamini_hochberg(pvals),
        pvals_registered=registered,
        pvals_unregistered=unregistered,
        df_shared=float(comparison.shared.edf[0]),
        df_branches=np.array([float(fit.edf[0]) for fit in comparison.fits]),
        knots=comparison.basis.knots,
        n_cells=comparison.counts,
        times=warped,
        stretch=warp.stretch,
        shift=warp.shifts,
        degenerate=comparison.degenerate,
        warp_at_bound=warp.at_bound,
    )

@dataclass(frozen=True, kw_only=True)
class ForkTestResult(BranchComparisonResult):
    """Output of :func:`fork_test` for G genes and B branches: the fields of
    :class:`BranchComparisonResult`, the direction of each difference and the window.

    ``grid`` (n_grid) spans the window past the fork, on the (registered)
    time axis; ``curves`` (G × B × n_grid) each branch's curve on it (NaN
    where the branch has no cells) and ``shared`` (G × n_grid) the shared
    curve (the null model); ``means`` (G × B) each curve's mean over the
    stretch where every branch has cells (:func:`_window_means`); ``effect`` (G) the
    largest difference between two branches' means and ``up`` / ``down`` (G)
    the branches (0…B−1) with the highest and lowest mean;
    ``fstat``/``pvals``/``qvals`` the F test of branch-specific against one
    shared curve over the window's cells; ``fork`` and ``window`` the fork's
    time and the window's length; ``n_cells`` (B) the cells of each branch in
    the window; ``times`` the time of every cell given (registered), NaN for
    cells outside the window.
    """

    means: np.ndarray
    effect: np.ndarray
    up: np.ndarray
    down: np.ndarray
    df: float
    fork: float
    window: float


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
    the cells given, trunk included, but ``"fit"`` by default: see
    :func:`_combined`), and reports the direction: which branch
    a gene goes up in. The test compares one penalised spline per branch
    with one shared spline over the window's cells (``df`` effective degrees
    of freedom each, one basis, the F test of :func:`branch_test`); the effect size is the largest difference between
    two branches' mean fitted expression over the stretch of the window where
    every branch has cells, in the units of the expression.

    ``window`` is the length of the window in (registered) pseudotime past
    the fork; by default the stretch that every branch covers, the smallest
    of the branches' reaches (:data:`~.registration.REACH_QUANTILE` of their times past the
    fork), so that no branch is compared where it has no cells, widened where
    needed until it holds at least :data:`MIN_WINDOW_CELLS` (and more than
    ``df``) cells of every branch. A longer window than the cells reach ends
    at the last of them.
    ``groups`` labels cells 0 (trunk) or b = 1…B (branch), B ≥ 2.
    """
    rows, times, groups, df, n_grid = _check_branch_input(rows, times, groups, df, n_grid, registration)
    n_branches = int(groups.max())
    names = [f"branch {b}" for b in range(1, n_branches + 1)] if names is None else list(names)
    requested = None if window is None else check_positive("window", window, role="pseudotime past the fork")
    warp, *finer = _registrations(matrix, rows, times, groups, registration, n_knots=n_knots, df=df)

    def compare(axis):  # each axis gets its own default window
        fork, span, inside = _fork_window(axis, groups, requested, df=df, names=names)
        comparison = compare_branches(
            matrix, rows[inside], axis[inside], groups[inside], n_branches, n_knots=n_knots, df=df, columns=columns,
            names=[f"{name} (within the window of {span:.3g} past the fork)" for name in names], trunk_name="no trunk",
        )
        return comparison, fork, span, inside

    warped = warp(times, groups)
    comparison, fork, window, inside = compare(warped)
    registered = comparison.pvals
    for other in finer:
        registered = np.fmax(registered, compare(other(times, groups))[0].pvals)
    # a warp at its bound was not used (_registrations): the comparison above is on the learned axis
    used = "none" if warp.at_bound else registration
    pvals, registered, unregistered = _combined(used, registered, lambda: compare(times)[0].pvals)
    window = min(window, float(warped[groups >= 1].max()) - fork)  # a window asked for past every cell ends at them
    grid = np.linspace(fork, fork + window, n_grid)
    curves, shared = comparison.curves(grid, warped[inside], groups[inside])
    means = _window_means(curves)
    effect = np.where(comparison.degenerate, 0.0, means.max(axis=1) - means.min(axis=1))
    tested_times = np.full(rows.size, np.nan)
    tested_times[inside] = warped[inside]
    return ForkTestResult(
        grid=grid,
        curves=curves,
        shared=shared,
        means=means,
        effect=effect,
        up=means.argmax(axis=1),
        down=means.argmin(axis=1),
        fstat=comparison.fstat,
        pvals=pvals,
        qvals=benjamini_hochberg(pvals),
        pvals_registered=registered,
        pvals_unregistered=unregistered,
        df=float(comparison.shared.edf[0]),
        fork=fork,
        window=window,
        knots=comparison.basis.knots,
        n_cells=comparison.counts[1:],
        times=tested_times,
        stretch=warp.stretch,
        shift=warp.shifts,
        degenerate=comparison.degenerate,
        warp_at_bound=warp.at_bound,
    )


def _window_means(curves: np.ndarray) -> np.ndarray:
    """Each branch's mean (G × B) of its curve (G × B × grid, NaN where the branch has no cells) over the
    stretch of the window where every branch has cells, so that a branch whose cells start late is not
    averaged over its curve's extrapolation; over each branch's own stretch where they share none."""
    everywhere = np.isfinite(curves).all(axis=(0, 1))
    if everywhere.any():
        return curves[:, :, everywhere].mean(axis=2)
    return np.nanmean(curves, axis=2)


#: The default window of :func:`fork_test` holds at least this many cells of every branch.
MIN_WINDOW_CELLS = 10


def _fork_window(times: np.ndarray, groups: np.ndarray, window: float | None, *, df: float, names: list[str]):
    """The fork's time, the window's length past it and the branch cells within it (:func:`fork_test`)."""
    n_branches = int(groups.max())
    fork = fork_time(times, groups)
    if window is None:
        reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) if np.any(groups == b) else 0.0
                          for b in range(1, n_branches + 1)])
        window = float(reach.min())
        if window <= 0:
            empty = names[int(np.argmin(reach))]
            raise ValueError(f"{empty} reaches no further than the fork: there is no window to compare the branches in.")
        # A branch whose cells start well past the fork (a gap of unsampled transit cells) may hold
        # none of them within the shortest reach: widen the window until every branch holds enough
        # cells for its own curve rather than refuse the default.
        need = max(MIN_WINDOW_CELLS, int(np.floor(df)) + 1)
        window = max(window, max(_time_of_nth_cell(times[groups == b] - fork, need) for b in range(1, n_branches + 1)))
    inside = (groups >= 1) & (times <= fork + window)
    held = np.bincount(groups[inside], minlength=n_branches + 1)[1:]
    if np.any(held <= df):  # only a window asked for can hold too few: the default widens until it does not
        b = int(np.argmin(held))
        raise ValueError(
            f"{names[b]} has {held[b]} cells within the window of {window:.3g} past the fork, not more than "
            f"df={df:g}: widen the window, or leave window=None, which holds at least {MIN_WINDOW_CELLS} cells of "
            f"every branch."
        )
    return fork, window, inside


def _combined(registration: str, registered: np.ndarray, unregistered) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The test's p-values, and those on the registered and on the unregistered axis (NaN where not compared).

    ``registered`` are the p-values on the axis of the warp (no warp with ``"none"``);
    ``unregistered()`` computes those on the pseudotime as it is, only where needed. With
    ``"both"`` each gene gets the larger of the two: the comparison on the wrong axis cannot
    call a shared gene alone, so the level holds if either axis is right (an intersection–union
    test). Measured on 87 forks of learned trees (2,000 cells, 200 genes on one sigmoid of the
    true time): forks at most 5 % of those genes flagged at FDR 0.05,
    ``"fit"`` → ``"both"``: 22 → 22 and 23 → 24 of 22 and 24 on ``simulate_trajectory`` (worst
    3.5 → 1.5 %, 5.5 → 2.5 %), 16 → 19 and 14 → 16 of 20 and 21 on PROSSTT-like random-walk trees
    (worst 14 → 6 %, 33.5 → 21 %), where ``"none"`` alone holds 4, 10, 3 and 5; the branch genes
    called fall by 3 points (0.83 → 0.80 and 0.61 → 0.57). Where both axes are right the larger
    p-value is conservative (a quarter below the level for shared trends, a tenth for pure noise).
    That is why the fork test keeps ``"fit"`` by default: within its window past the fork the
    warp alone holds the level about as often (78 of 87 forks; ``"both"``: 84, worst 28 → 15 %),
    and its p-values on ``simulate_trajectory`` are uniform (Kolmogorov–Smirnov p > 0.01 at 44
    of 46 forks, with ``"both"`` 30), for 4–5 points more branch genes called.
    """
    if registration == "both":
        unregistered = np.asarray(unregistered(), dtype=float)
        return np.fmax(registered, unregistered), registered, unregistered
    missing = np.full(registered.shape, np.nan)
    return (registered, registered, missing) if registration == "fit" else (registered, missing, registered)


def _time_of_nth_cell(past_fork: np.ndarray, n: int) -> float:
    """Time past the fork of a branch's ``n``-th earliest cell (its last when it has fewer)."""
    if past_fork.size == 0:
        return 0.0
    rank = min(n, past_fork.size) - 1
    return float(np.partition(past_fork, rank)[rank])


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


def _registrations(matrix, rows, times, groups, registration, *, n_knots, df) -> list[BranchWarp]:
    """The warps of every branch's time the registered comparison is made on, the curves drawn on
    the first: for ``"fit"`` and ``"both"`` one of :data:`~.registration.WARP_PIECES` and one of
    :data:`~.registration.FINE_WARP_PIECES` pieces (:func:`~.registration.fit_branch_warps`), each gene
    given the larger of its p-values (with ``"both"`` the unregistered comparison is a third); for
    ``"none"`` none.

    The larger of two p-values is an intersection–union test over the two resolutions, whose level
    holds where either warp is right. A learned tree's pace changes from edge to edge, in places
    faster than five pieces follow; nine follow it there but misread other forks. Measured with the
    fork test (``"fit"``, its default): on the curved generator (``_testing.curved_tree``, 24 forks)
    5 % held on 22 forks with five pieces (p-values uniform, Kolmogorov–Smirnov p > 0.01, on 19),
    24 with nine (23), 24 with both (24); on 87 forks of learned trees, with five, nine and
    both: 78, 80 and 83, both criteria met on 68, 73 and 74; the branch genes called fall by about
    one point. The branch test's ``"fit"``: both criteria on 62 → 74 of the 87 forks (24 of 24 on
    the curved generator). ``"both"`` used the five-piece warp alone beside the unregistered axis
    until PHATE's trees of random walks (``_testing.dla_with_genes``), whose learned pace changes from
    step to step: there it held 5 % on 13 of 21 forks, with both warps 18 (KS p > 0.01 on 11 → 18).
    The price is the third p-value's conservatism where every axis is right: on ``simulate_trajectory``
    (21 forks) 5 % held on 20 → 20 and KS p > 0.01 on 20 → 14 (too few small p-values), the
    fate genes called 0.847 → 0.842.

    The warp is read from every gene of ``matrix``, whichever genes are tested: the distortion
    belongs to the tree, and read from the tested genes alone it made a gene's p-value depend on
    the others tested (20 markers of the fate branches with 5 shared-trend genes, realistic
    generator, seeds 0–2: p-values moved by a median factor of 10^0.7–10^19 against the test of
    all genes, and up to a fifth of the markers called fewer).

    A warp pressed against :data:`~.registration.MAX_RELATIVE_STRETCH` is searched again within
    :data:`~.registration.WIDE_RELATIVE_STRETCH`; where a warp still presses against a bound of its family
    (:attr:`~.registration.BranchWarp.at_bound`), no registration is returned but the identity, marked
    ``at_bound``, and the branches are compared on the learned axis. Such a warp was placed by
    genes that part after the fork, not by genes the branches share: on the counts' own genes of
    ``simulate_trajectory`` (no genes appended) the warp pressed against its bounds on 7 of 10
    trees (DDRTree seeds 2–4, RPG seeds 0, 2–4), stretching the branches 3-fold apart or sliding
    them along each other, and the fork test called 0.16–0.46 of the expressed fate genes there;
    on the learned axis 0.61–0.89 (a map onto the true time, DDRTree: 0.77–0.85), flagging at
    most 3.9 % of any set of null genes. The cost: where a learned fork's branches do not run side by side
    in the process (one fork of 21 with genes of the true time appended, whose second branch starts
    where the first ends), the learned axis flags shared genes (19.5 % there, 0.5 % at the bound),
    and a difference of pace beyond 4-fold is no longer registered.
    """
    identity = BranchWarp.identity(fork_time(times, groups), np.ones(int(groups.max())))
    if registration == "none":
        return [identity]
    warps = []
    for n_pieces in (WARP_PIECES, FINE_WARP_PIECES):
        warp = fit_branch_warps(matrix, rows, times, groups, n_knots=n_knots, df=df, n_pieces=n_pieces)
        if warp.at_bound:
            warp = fit_branch_warps(matrix, rows, times, groups, n_knots=n_knots, df=df, n_pieces=n_pieces,
                                    max_relative_stretch=WIDE_RELATIVE_STRETCH)
        if warp.at_bound:  # no other warp is searched: the comparison is on the learned axis
            return [dataclasses.replace(identity, at_bound=True)]
        warps.append(warp)
    return warps
