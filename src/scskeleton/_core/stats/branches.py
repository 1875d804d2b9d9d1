"""Do the branches after a fork follow different trends? Branch registration and the branch test."""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from scipy import linalg, sparse, stats

from ..validation import check_integer, check_positive
from .inference import (
    MIN_VARYING_CELLS,
    NullMean,
    benjamini_hochberg,
    blank_degenerate,
    f_test,
    form_f_pvalues,
    sparse_count_pvalues,
)
from .splines import (
    adapt_df,
    basis_for_curves,
    check_cells,
    check_df,
    explained_form,
    lam_for_df,
    needs_own_knots,
    penalized_fit,
    spline_basis,
    sufficient_statistics,
    take_rows,
    time_bins,
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
    time of every tested cell on the axis of the curves (registered or not),
    ``stretch`` (B) each branch's overall factor over its reach past the
    fork and ``shift`` (B) its shift (ones and zeros
    without registration; :class:`BranchWarp`);
    ``degenerate`` as in :class:`TrendResult` (F = 0, p = 1);
    ``pvals_registered`` and ``pvals_unregistered`` the p-values of the
    comparison on each axis (NaN for an axis not compared), of which
    ``pvals`` is the larger with ``registration="both"``; ``warp_at_bound``
    whether a warp of the registration pressed against a bound of its family
    (:func:`_pressed_against_bounds`), in which case the branches were
    compared on the learned axis alone, whatever ``registration`` asked
    (:func:`_registrations`: ``times`` unwarped, ``stretch`` ones, ``shift``
    zeros, ``pvals_registered`` NaN).
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    pvals_registered: np.ndarray
    pvals_unregistered: np.ndarray
    df_shared: float
    df_branches: np.ndarray
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    shift: np.ndarray
    degenerate: np.ndarray
    warp_at_bound: bool = False


#: How the branches' pseudotimes are put on one axis before they are compared: on the registered
#: axis and on the pseudotime as it is, a gene called only where both comparisons call it ("both");
#: on the registered axis alone ("fit"); on the pseudotime as it is ("none").
REGISTRATIONS = ("both", "fit", "none")
#: A branch's reach past the fork is this quantile of its cells' distance from it.
REACH_QUANTILE = 0.95
#: Candidate warps between no stretch and equal reach (geometric steps).
STRETCH_STEPS = 9
#: Candidate shifts of a branch's time, ± this share of the branches' mean reach past the fork ...
MAX_SHIFT = 0.15
#: ... in this many even steps (zero among them).
SHIFT_STEPS = 25
#: Each branch's time past the fork is warped in this many pieces (equal stretches of its reach) ...
WARP_PIECES = 5
#: ... and, for a second registered comparison whose larger p-value each gene gets, in this many
#: (:func:`_registrations`).
FINE_WARP_PIECES = 9
#: ... each piece's slope changed by factors up to this, in this many geometric steps per try ...
MAX_SLOPE_CHANGE = 2.0
SLOPE_STEPS = 13
#: ... and never outside this range: a branch squeezed into a moment leaves its curve no room
#: to differ from the shared one, which fits every gene "better" and tests nothing.
SLOPE_RANGE = (0.5, 2.0)
#: ... in rounds over the branches until a round moves nothing, at most this many.
MAX_WARP_ROUNDS = 10
#: Each branch's overall factor stays within this factor of the branches' geometric mean (so two
#: branches' paces differ at most 1.75² ≈ 3-fold). At the upper fork of PROSSTT-like three-fate trees,
#: whose genes nearly all part, the search otherwise stretched the branches 0.38 / 2.61 where the
#: learned pace was nearly equal, and one shared curve then followed each branch over its own stretch
#: of time (74.5 % of the shared genes flagged; 27 % within the bound). A uniform 3-fold stretch of one
#: branch is still registered. With 200 genes of the true time appended no warp chosen on two-fate trees came
#: near it; on the counts' own genes, nearly all of which part, warps do (BranchWarp.at_bound).
MAX_RELATIVE_STRETCH = 1.75
#: A warp pressed against MAX_RELATIVE_STRETCH is searched again within this factor (two branches'
#: paces up to 4-fold apart, as far as SLOPE_RANGE's pieces reach): a real difference of pace has its
#: best warp inside the wider bound, while a warp that parts the branches presses against any bound,
#: and the branches are then compared on the learned axis (:func:`_registrations`).
WIDE_RELATIVE_STRETCH = 2.0
#: A branch's end may slow down to this slope (below SLOPE_RANGE) as long as it never speeds up
#: again: differentiation ends in a steady terminal state whose cells pile up where the process
#: has stopped, while a learned tree runs on through the pile. One branch may stop early and the
#: other late, so the last stretch of a branch's pseudotime can stand for almost no process time
#: (on one simulate_trajectory tree the last quarter of a branch's pseudotime, half its cells,
#: all sat at its final true time). The branch's own curves, which the warp is compared with,
#: are fitted on its unwarped time, so flattening cannot absorb a gene that still changes there.
TERMINAL_MIN_SLOPE = 0.1
#: A warp keeps at least this share of the shorter branch's stretch past the fork beside the
#: others (:func:`branch_overlap`; all of it without a warp, every branch starting at the fork).
#: Registration puts branches that run side by side on one axis; sliding them apart instead lets
#: one "shared" curve follow each branch over its own stretch of time, which fits every gene and
#: tests nothing. The alignment by dynamic time warping, whose shift is not
#: bounded, did that on a simulate_trajectory fork (DDRTree, seed 4): the second branch moved past
#: nearly all of the first one's cells, the fork test's window held 10 of its cells and called no gene
#: of 2,000 (287 on the unwarped axis).
MIN_KEPT_OVERLAP = 0.5
#: A warp whose overlap is within this of MIN_KEPT_OVERLAP lies at that bound (:func:`_pressed_against_bounds`).
OVERLAP_MARGIN = 0.05
#: Relative differences below this are rounding, not a preference: the warp search's choices and slope
#: bounds hold up to it, so that its path is the same with every build of numpy and the BLAS (:func:`_least`).
TIE_TOLERANCE = 1e-9
#: A gene counts as shared under a warp below this quantile of the null's improvement.
SHARED_QUANTILE = 0.99
#: The final choice of warp takes out of each gene what the branch and shared curves' smoothing alone
#: makes of one shared course, read from the shared curve fitted with this many more effective degrees of
#: freedom than the tested ones (:func:`fit_branch_warps`).
WARP_BIAS_EXTRA_DF = 4.0
#: The alignment of branches by dynamic time warping cuts each into this many bins ...
ALIGN_BINS = 25
#: ... caps each gene's cost at this many variances of the difference of two bin means ...
ALIGN_CAP = 9.0
#: The warps are estimated on at most this many cells (evenly spread) and the
#: genes that follow time best, standardised: one shared time axis, not a per-gene fit.
WARP_CELLS = 3000
WARP_GENES = 300


def fork_time(times: np.ndarray, groups: np.ndarray) -> float:
    """Pseudotime of the fork: the earliest pseudotime of any branch cell (group ≥ 1)."""
    return float(np.asarray(times, dtype=float)[np.asarray(groups) >= 1].min())


@dataclass(frozen=True)
class BranchWarp:
    """A monotone, piecewise-linear map of each branch's time past the fork onto one axis.

    Branch b's time past the fork u = t − ``fork`` becomes
    ``shifts[b]`` + the integral of the slope from 0 to u, the slope being
    ``slopes[b, p]`` between ``breaks[b, p]`` and ``breaks[b, p + 1]`` (the
    last slope also beyond the last break, the branch's reach). Trunk cells
    keep their time. One slope and no shift is the stretch about the fork of
    tradeSeq's registration. ``at_bound``: the search's best warp pressed
    against a bound of the family (:func:`_pressed_against_bounds`).
    """

    fork: float
    breaks: np.ndarray
    slopes: np.ndarray
    shifts: np.ndarray
    at_bound: bool = False

    @classmethod
    def identity(cls, fork: float, reach: np.ndarray, n_pieces: int = 1) -> BranchWarp:
        """No warp; each branch's [0, reach] cut into ``n_pieces`` equal pieces."""
        reach = np.asarray(reach, dtype=float)
        breaks = reach[:, None] * np.linspace(0.0, 1.0, n_pieces + 1)[None, :]
        return cls(float(fork), breaks, np.ones((reach.size, n_pieces)), np.zeros(reach.size))

    @property
    def stretch(self) -> np.ndarray:
        """Each branch's overall factor: its warped reach over its reach (1 without a warp)."""
        lengths = np.diff(self.breaks, axis=1)
        return (self.slopes * lengths).sum(axis=1) / np.maximum(lengths.sum(axis=1), np.finfo(float).tiny)

    def replace(self, *, slopes=None, shifts=None) -> BranchWarp:
        return BranchWarp(self.fork, self.breaks, self.slopes if slopes is None else slopes,
                          self.shifts if shifts is None else shifts)

    def __call__(self, times: np.ndarray, groups: np.ndarray) -> np.ndarray:
        times = np.asarray(times, dtype=float)
        groups = np.asarray(groups)
        out = times.copy()
        on_branch = groups >= 1
        branch = groups[on_branch] - 1
        past = times[on_branch] - self.fork
        lengths = np.diff(self.breaks, axis=1)
        warped = np.zeros(past.size)
        for piece in range(self.slopes.shape[1]):
            start = self.breaks[branch, piece]
            last = piece == self.slopes.shape[1] - 1
            span = past - start if last else np.clip(past - start, 0.0, lengths[branch, piece])
            # times before the fork (u < 0) continue the first piece's slope backwards
            span = np.where(past < start, past - start, span) if piece == 0 else np.maximum(span, 0.0)
            warped += self.slopes[branch, piece] * span
        out[on_branch] = self.fork + self.shifts[branch] + warped
        return out


def fit_branch_warps(
    matrix, rows: np.ndarray, times: np.ndarray, groups: np.ndarray, *, n_knots: int, df: float,
    n_pieces: int = WARP_PIECES, max_relative_stretch: float = MAX_RELATIVE_STRETCH,
) -> BranchWarp:
    """The warp of every branch's time past the fork, shared by all genes.

    A learned pseudotime is a length along the tree, and a learner stretches
    the branches of a fork differently, by amounts that change along each
    branch, and may place the fork inside one of them. Genes that follow one
    curve of the process on every branch then follow different curves of
    pseudotime, and a test of branch-specific curves calls them different.
    The distortion is a property of the tree, not of a gene, so one
    :class:`BranchWarp` (a shift and a monotone piecewise-linear map per
    branch, slopes within :data:`SLOPE_RANGE`, or down to
    :data:`TERMINAL_MIN_SLOPE` at a branch's end that never speeds up again)
    is fitted for all genes.

    Criterion: each of the :data:`WARP_GENES` genes that follow time best
    (:func:`_timed_genes`; standardised, on at most
    :data:`WARP_CELLS` cells) is fitted by one shared curve of the warped
    time (``df`` degrees of freedom) or, at the price of its extra freedom,
    by its branches' own curves of the unwarped time; the warp minimises
    Σ_g min(RSS_shared, RSS_branches · (1 + c/ν)), c the
    :data:`SHARED_QUANTILE` quantile of χ² on (B − 1)·df degrees of freedom
    and ν the residual degrees of freedom. A gene whose branches differ costs
    the same under every warp and cannot pull it, which matters because
    branch-specific genes are most of the variable genes in real data; a warp
    that squeezes a branch until no shared curve fits it costs what it spoils.
    The branches' own curves are fitted once, for the search: a monotone warp
    within a branch changes their fit only slightly, but over hundreds of
    branch-specific genes such slight changes outweighed the shared genes the
    warp is for.

    The search's criterion has a bias that the final choice corrects: a warp
    bends the shared curve's axis, and on genes whose branches differ gradually
    (gene programs that part slowly after the fork) the bent shared curve can fit
    better than the branches' own curves left on the unwarped axis, so such
    genes pulled the warp although nothing in them is shared (on PROSSTT-like
    trees with the TRUE time, where no warp is needed, 112 of 228 such genes
    fitted the warped shared curve better than their own, and the warp stretched
    one branch 1.86-fold against the other). The search's best warp is therefore
    refined by, and chosen against, the exact criterion Σ_g min(x_g, c), x_g =
    ν (RSS_shared − RSS_branches) / RSS_branches with both fits on the same
    warped axis: the statistic the test computes, in which a warp gains a gene
    nothing unless one curve really serves all branches.

    The last choice, between no warp, the search's warp and the refined one,
    is made by that criterion less the smoothing bias it shares with the test
    before the test's null counts it (:func:`_shared_null_means`): the branch
    and shared curves smooth a sharp shared course (a gene that switches or
    bumps within a tenth of the tree) differently, x_g is then large although
    nothing differs, and a warp, which moves the knots and the penalties, can
    shrink that difference instead of aligning anything. On the true time of
    forks whose genes switch, bump or ramp sharply, the search stretched the
    branches about 0.75 / 1.35 (their ends aligned) and the registered test
    flagged 58–64 % of the shared genes. So
    each gene below the cap c loses ν μ̂ᵀAμ̂ / RSS_branches
    (:func:`_explained_difference`), what the test's form A makes of the
    shared course μ̂ fitted with :data:`WARP_BIAS_EXTRA_DF` more degrees of
    freedom, and counts between 0 and c. Genes at the cap keep c: for a gene
    whose branches differ μ̂ is a compromise between them whose smoothing
    moves with the warp too. Only for this choice: as the criterion of the
    refinement it also let genes whose branches differ a little (below the
    cap) pull the warp, and the fork test lost 5 points of power on
    ``simulate_trajectory`` forks.

    Search: one stretch per branch among those running geometrically from no
    stretch to equal reach past the fork (the :data:`REACH_QUANTILE` of
    t − t_f; the registration of tradeSeq's pattern test); a
    dynamic-time-warping alignment of the branches (:func:`_aligned_warp`);
    from the best stretch and from the alignment read at the pieces' breaks,
    rounds over the branches (until one moves nothing, at most :data:`MAX_WARP_ROUNDS`) of each shift (±
    :data:`MAX_SHIFT` of the mean reach), the branch's overall pace and each
    of the ``n_pieces`` slopes (default :data:`WARP_PIECES`) in turn; the best of the two refined
    warps and the alignment by the criterion; then the same rounds from there
    by the exact criterion (an alignment that won: its shifts and overall
    paces, not its many short pieces), and the best of the two and no warp by it
    without the smoothing bias (above).
    A branch that genuinely stops early keeps its pace over the stretch both
    branches cover. The branches' common stretch and shift are fixed (geometric
    mean of the stretches 1, mean shift 0): they move every branch alike against
    the trunk and change no comparison between branches. No warp may put the
    branches less than :data:`MIN_KEPT_OVERLAP` side by side (:func:`branch_overlap`).

    A warp that presses against a bound (:func:`_pressed_against_bounds`;
    ``max_relative_stretch`` in place of :data:`MAX_RELATIVE_STRETCH`) is
    returned with ``at_bound`` set: the bound, not the genes, placed it. Where
    nearly every gene the warp reads parts after the fork (the counts' own
    genes of ``simulate_trajectory``), sliding or stretching the branches apart
    lets one curve follow each, and the criterion keeps improving up to any
    bound, while the fork test's window loses most of one branch's cells. The
    tests then compare on the learned axis (:func:`_registrations`).
    """
    rows = np.asarray(rows, dtype=np.intp)
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups, dtype=np.intp)
    n_branches = int(groups.max())
    pick = np.unique(np.linspace(0, rows.size - 1, min(rows.size, WARP_CELLS)).astype(np.intp))
    block = take_rows(matrix, rows[pick], None)  # at most WARP_CELLS cells, every gene, from a chunked matrix too
    sub_times, sub_groups = times[pick], groups[pick]
    if sparse.issparse(block):  # choose the genes on the sparse block; densify only those
        block = sparse.csc_matrix(block, dtype=np.float64)
        mean = np.asarray(block.mean(axis=0)).ravel()
        spread = np.sqrt(np.maximum(np.asarray(block.multiply(block).mean(axis=0)).ravel() - mean**2, 0.0))
    else:
        block = np.asarray(block, dtype=np.float64)
        spread = block.std(axis=0)
    fork = fork_time(times, groups)
    reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) for b in range(1, n_branches + 1)])
    identity = BranchWarp.identity(fork, np.maximum(reach, 0.0), n_pieces)
    if not np.any(spread > 0) or not np.all(reach > 0):
        return identity
    keep = _timed_genes(block, spread, identity(sub_times, sub_groups), n_knots=n_knots, df=df)
    chosen = block[:, keep]
    chosen = chosen.toarray() if sparse.issparse(chosen) else chosen
    values = (chosen - chosen.mean(axis=0)) / spread[keep]

    members = [np.flatnonzero(sub_groups == group) for group in range(n_branches + 1)]
    member_values = [values[rows_] for rows_ in members]  # taken once: the exact criterion reads them per trial
    sumsq = [(part**2).sum(axis=0) for part in member_values]  # the same under every warp
    total_sumsq = sum(sumsq)

    def balanced(warp: BranchWarp) -> BranchWarp:
        # moving every branch alike against the trunk changes no comparison between branches, but it
        # changes where the shared curve's knots fall, and the search used that to squeeze all branches
        # together until their own genes fitted one curve: fix the branches' mean log-stretch and shift
        scale = np.exp(np.log(np.maximum(warp.stretch, np.finfo(float).tiny)).mean())
        shifts = warp.shifts / scale
        return warp.replace(slopes=warp.slopes / scale, shifts=shifts - shifts.mean())

    # whether the curves need their own knots is read once, on the unwarped time, not at every trial
    weights = _curve_weights(sub_groups, n_branches)
    own_knots = [weight > 0 for weight in weights] if needs_own_knots(
        identity(sub_times, sub_groups), n_knots, weights, df) else None

    def basis_at(warp: BranchWarp):
        warped = warp(sub_times, sub_groups)
        basis = spline_basis(warped, n_knots, curves=own_knots)
        return basis, basis.design(warped)

    def shared_rss(warp: BranchWarp) -> np.ndarray:
        basis, design = basis_at(warp)
        # a few thousand cells and genes, dense: direct products beat the chunked general pass
        return penalized_fit(design.T @ design, design.T @ values, total_sumsq, basis.penalty, df=df,
                             what="The trunk and branches together").rss

    # each gene is fitted by the shared curve or, at the price of its extra freedom, by its branches'
    # own curves. Those are fitted once, on the unwarped time: a monotone warp within each branch
    # barely changes how well a branch's own curve fits, and the small changes it does make, summed
    # over the many genes whose branches differ, would otherwise outweigh the genes the warp is for
    basis, design = basis_at(identity)
    gram = [design[rows_].T @ design[rows_] for rows_ in members]
    cross = [design[rows_].T @ values[rows_] for rows_ in members]
    names = [f"branch {b}" for b in range(1, n_branches + 1)]
    # a short branch on the warp's cells may carry fewer degrees of freedom than asked: lower them as
    # the test itself does (it reports the change), rather than fail before the test is reached
    df = adapt_df(df, [sum(gram)] + [_with_trunk(gram, b) for b in range(1, n_branches + 1)], basis.penalty,
                  "A branch (with the trunk)")
    # a gene counts as shared under a warp while its branch-specific curves improve on the
    # shared curve by less than the 99 % quantile of that improvement under the null
    threshold = stats.chi2.ppf(SHARED_QUANTILE, (n_branches - 1) * df)
    residual_df = max(sub_times.size - n_branches * df, 1.0)
    own_fits = _branch_fits(gram, cross, sumsq, basis.penalty, df=df, names=names, trunk_name="the trunk")
    alone = sum(fit.rss for fit in own_fits) * (1.0 + threshold / residual_df)

    def out_of_bounds(warp: BranchWarp) -> bool:
        log_stretch = np.log(np.maximum(warp.stretch, np.finfo(float).tiny))
        if np.any(np.abs(log_stretch) > np.log(max_relative_stretch)):
            return True
        return branch_overlap(warp) < MIN_KEPT_OVERLAP

    def loss(warp: BranchWarp) -> float:
        warp = balanced(warp)
        if out_of_bounds(warp):
            return np.inf
        try:
            return float(np.minimum(shared_rss(warp), alone).sum())
        except ValueError:  # as in the exact criterion: its knots cannot carry df, not a warp to choose
            return np.inf

    def mismatch(warp: BranchWarp) -> float:
        warp = balanced(warp)
        return np.inf if out_of_bounds(warp) else unbounded_mismatch(warp)

    def unbounded_mismatch(warp: BranchWarp, *, smoothing_removed: bool = False) -> float:
        # the exact criterion: each gene's shared and own curves on the same warped axis
        basis, design = basis_at(warp)
        gram_at = [design[rows_].T @ design[rows_] for rows_ in members]
        cross_at = [design[rows_].T @ part for rows_, part in zip(members, member_values)]
        total_gram, total_cross = sum(gram_at), sum(cross_at)
        try:
            shared = penalized_fit(total_gram, total_cross, total_sumsq, basis.penalty, df=df,
                                   what="The trunk and branches together")
            own = _branch_fits(gram_at, cross_at, sumsq, basis.penalty, df=df, names=names, trunk_name="the trunk")
        except ValueError:  # the warp leaves a branch too few knots for df: not a warp to choose
            return np.inf
        own_rss = np.maximum(sum(fit.rss for fit in own), np.finfo(float).tiny)
        statistic = residual_df * (shared.rss - own_rss) / own_rss
        if not smoothing_removed:
            return float(np.minimum(statistic, threshold).sum())
        # what the two models' smoothing alone makes of one shared course, taken out of every gene
        # below the cap (docstring): read from the shared curve fitted more flexibly
        most = _most_flexible_df(total_gram, basis.penalty, "The trunk and branches together")
        flexible = penalized_fit(total_gram, total_cross, total_sumsq, basis.penalty,
                                 df=min(df + WARP_BIAS_EXTRA_DF, most), what="The trunk and branches together")
        forms = _branch_forms(np.stack(gram_at), basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in own])
        smoothing = residual_df * _explained_difference(forms, flexible.coef) / own_rss
        statistic = np.where(statistic >= threshold, threshold, np.clip(statistic - smoothing, 0.0, threshold))
        return float(statistic.sum())

    # the rounds try many warps more than once (a slope's factor 1, the shift a branch already has)
    loss, mismatch = _remembered(loss), _remembered(mismatch)

    # the stretch that gives every branch the same reach past the fork (tradeSeq's registration),
    # and the way there from no stretch at all: the data choose among them
    equal_reach = reach.mean() / reach
    candidates = [equal_reach**share for share in np.linspace(0.0, 1.0, STRETCH_STEPS)]
    candidates = [identity.replace(slopes=np.repeat((c / np.exp(np.log(c).mean()))[:, None], n_pieces, axis=1))
                  for c in candidates]
    stretched = _least(candidates, loss)
    # then each branch's shift, overall pace and each piece's slope in turn, in rounds: a fork
    # placed inside one branch starts the other's time late or early by a constant, and a learned
    # tree's speed along a branch changes along it, neither of which one stretch about the fork removes
    shift_steps = np.linspace(-MAX_SHIFT, MAX_SHIFT, SHIFT_STEPS) * reach.mean()
    slope_steps = np.exp(np.linspace(-1.0, 1.0, SLOPE_STEPS) * np.log(MAX_SLOPE_CHANGE))

    # a branch's end may slow down only where another branch still has cells to be aligned with
    farthest_other = np.array([np.delete(reach, b).max(initial=0.0) for b in range(n_branches)])
    may_slow = identity.breaks[:, :-1] < farthest_other[:, None]

    def rescaled(warp: BranchWarp, branches, pieces, criterion) -> BranchWarp:
        slowing = warp.breaks[:, :-1] < farthest_other[:, None]  # the alignment has pieces of its own
        trials = [warp]  # a slope outside the range (from the equal-reach stretch) may stay
        for step in slope_steps:
            slopes = warp.slopes.copy()
            slopes[branches, pieces] *= step
            if _allowed_slopes(slopes[branches], slowing[branches]):
                trials.append(warp.replace(slopes=slopes))
        return _least(trials, criterion)

    def refine(warp: BranchWarp, criterion=loss) -> BranchWarp:
        # the whole branch, then each piece; the alignment's many short pieces (one per bin) only as
        # a whole: one slope per bin would let the criterion bend the time to each bin's noise
        pieces = [slice(None), *range(n_pieces)] if warp.slopes.shape[1] == n_pieces else [slice(None)]
        for _ in range(MAX_WARP_ROUNDS):
            start = warp
            for b in range(n_branches):
                trials = []
                for step in shift_steps:
                    shifts = warp.shifts.copy()
                    shifts[b] = step
                    trials.append(warp.replace(shifts=shifts))
                warp = _least(trials, criterion)
                for piece in pieces:
                    warp = rescaled(warp, b, piece, criterion)
            if np.array_equal(warp.slopes, start.slopes) and np.array_equal(warp.shifts, start.shifts):
                break  # a round that moved nothing: every later round would repeat it
        return warp

    aligned = _aligned_warp(values, sub_times, sub_groups, fork, n_bins=ALIGN_BINS)
    # the alignment read at the pieces' breaks, as a start the rounds can refine
    ends = fork + identity.breaks
    paced = aligned(ends.ravel(), np.repeat(np.arange(1, n_branches + 1), n_pieces + 1)).reshape(ends.shape)
    slopes = np.diff(paced, axis=1) / np.maximum(np.diff(identity.breaks, axis=1), np.finfo(float).tiny)
    slopes = np.asarray([row if _allowed_slopes(row, slowing) else np.clip(row, *SLOPE_RANGE)
                         for row, slowing in zip(np.clip(slopes, TERMINAL_MIN_SLOPE, SLOPE_RANGE[1]), may_slow)])
    started = identity.replace(slopes=slopes, shifts=paced[:, 0] - fork)
    searched = _least((refine(stretched), refine(started), aligned), loss)
    # the search's criterion finds the region cheaply; the exact one has the last word (docstring)
    # and the choice between no warp, the search's and the refined one is made without the smoothing
    # bias (docstring)
    chosen = _least((identity, balanced(searched), balanced(refine(searched, mismatch))),
                    functools.partial(unbounded_mismatch, smoothing_removed=True))
    if _pressed_against_bounds(chosen, lambda warp: unbounded_mismatch(balanced(warp)), max_relative_stretch):
        return dataclasses.replace(chosen, at_bound=True)
    return chosen


def _pressed_against_bounds(warp: BranchWarp, criterion, max_relative_stretch: float = MAX_RELATIVE_STRETCH) -> bool:
    """Whether a bound of the family, not the genes, set ``warp``: the branches' overlap within
    :data:`OVERLAP_MARGIN` of :data:`MIN_KEPT_OVERLAP` (:func:`branch_overlap`), or the most stretched
    branch's overall factor within one slope step of ``max_relative_stretch`` while one step more
    would lower ``criterion`` (the exact criterion without the bounds)."""
    if branch_overlap(warp) < MIN_KEPT_OVERLAP + OVERLAP_MARGIN:
        return True
    step = 2.0 * np.log(MAX_SLOPE_CHANGE) / (SLOPE_STEPS - 1)
    log_stretch = np.log(np.maximum(warp.stretch, np.finfo(float).tiny))
    b = int(np.argmax(np.abs(log_stretch)))
    if abs(log_stretch[b]) < np.log(max_relative_stretch) - step:
        return False
    slopes = warp.slopes.copy()
    slopes[b] *= np.exp(np.sign(log_stretch[b]) * step)
    return criterion(warp.replace(slopes=slopes)) < criterion(warp)


def branch_overlap(warp: BranchWarp) -> float:
    """How far the warped branches run side by side: the least, over the branches, of the share of
    the shorter of two stretches that lies within the longer, the stretches being where the warp
    puts a branch's [fork, fork + reach] and the hull of the other branches' (1 without a warp, all
    branches starting at the fork; 0 when a branch is put wholly before or after the others)."""
    lengths = np.diff(warp.breaks, axis=1)
    starts = warp.fork + warp.shifts
    spans = np.column_stack([starts, starts + (warp.slopes * lengths).sum(axis=1)])
    shares = []
    for b in range(spans.shape[0]):
        others = np.delete(spans, b, axis=0)
        hull = np.array([others[:, 0].min(), others[:, 1].max()])
        common = min(spans[b, 1], hull[1]) - max(spans[b, 0], hull[0])
        shorter = min(spans[b, 1] - spans[b, 0], hull[1] - hull[0])
        shares.append(1.0 if shorter <= 0 else float(np.clip(common / shorter, 0.0, 1.0)))
    return min(shares)


def _least(candidates, criterion):
    """The first of ``candidates`` whose ``criterion`` is within :data:`TIE_TOLERANCE` of the least.

    ``min`` would take whichever of two (nearly) tied candidates rounding favours, and rounding moves
    with numpy's and the BLAS's builds: the search then followed another path on another machine and
    the tests' p-values moved with it. A candidate replaces an earlier one only where it is better by
    more than rounding can make it.
    """
    candidates = list(candidates)
    values = np.array([criterion(candidate) for candidate in candidates], dtype=float)
    finite = np.isfinite(values)
    if not finite.any():
        return candidates[0]
    least = values[finite].min()
    return candidates[int(np.flatnonzero(values <= least + TIE_TOLERANCE * abs(least))[0])]


def _remembered(criterion):
    """``criterion`` of a :class:`BranchWarp`, computed once per warp."""
    seen = {}

    def remembered(warp: BranchWarp) -> float:
        key = (warp.breaks.tobytes(), warp.slopes.tobytes(), warp.shifts.tobytes())
        if key not in seen:
            seen[key] = criterion(warp)
        return seen[key]

    return remembered


def _timed_genes(block, spread: np.ndarray, times: np.ndarray, *, n_knots: int, df: float) -> np.ndarray:
    """The :data:`WARP_GENES` genes of ``block`` (cells × genes, dense or sparse) whose one curve of
    ``times`` (``df`` degrees of freedom) explains the largest share of their variance.

    The warp is read from genes that follow time; the most variable genes were the wrong choice where
    most of them differ between the branches (gene programs that part gradually): on PROSSTT-like trees
    2–18 % of 200 shared-trend genes were among the 300 most variable, and the warp fitted to the
    others flagged 20–90 % of the shared genes.
    """
    varying = np.flatnonzero(spread > 0)
    basis = spline_basis(times, n_knots)
    design = basis.design(times)
    # the test may carry more df than one curve on these knots (it adds each branch's own knots):
    # choosing the genes needs no more than the knots allow
    df = adapt_df(df, [design.T @ design], basis.penalty, "The cells the warp is fitted on")
    part = block[:, varying]
    means = np.asarray(part.mean(axis=0)).ravel()
    # Bᵀ(x - mean)/spread for every gene at once, without densifying a sparse block
    cross = (np.asarray((part.T @ design).T) - np.outer(design.sum(axis=0), means)) / spread[varying]
    fit = penalized_fit(design.T @ design, cross, np.full(varying.size, float(times.size)), basis.penalty, df=df,
                        what="The cells the warp is fitted on")
    return varying[np.argsort(fit.rss, kind="stable")[:WARP_GENES]]


def _allowed_slopes(slopes: np.ndarray, may_slow: np.ndarray) -> bool:
    """One branch's slopes within :data:`SLOPE_RANGE`, except a slowing end.

    Below the range (down to :data:`TERMINAL_MIN_SLOPE`) only in pieces
    marked ``may_slow`` (another branch reaches past their start) and where
    no later piece is faster. Without the first condition the end of the
    longest branch, which no other branch's cells share, is squeezed for a
    slightly better shared fit of its own cells, and the test's p-values
    drift up (null genes at p < 0.05: 6 % → 10 % on a fork whose second
    branch stops half way).
    """
    slopes = np.atleast_1d(slopes)
    # the bounds and the comparison of pieces hold up to rounding: slopes reached by scaling are often
    # exactly at a bound or equal to a neighbour's, and the last bit of exp/log differs between builds
    slack = 1.0 + TIE_TOLERANCE
    if not np.all((TERMINAL_MIN_SLOPE <= slopes * slack) & (slopes <= SLOPE_RANGE[1] * slack)):
        return False
    later_fastest = np.maximum.accumulate(slopes[::-1])[::-1]  # the fastest piece from each one on
    return bool(np.all((slopes * slack >= SLOPE_RANGE[0]) | (may_slow & (later_fastest <= slopes * slack))))


def _aligned_warp(values: np.ndarray, times: np.ndarray, groups: np.ndarray, fork: float, *, n_bins: int) -> BranchWarp:
    """Each branch's time aligned to the most populous branch's by dynamic time warping.

    Both branches' cells are cut into ``n_bins`` quantile bins of their time
    past the fork; bin i of the reference and bin j of branch b cost
    Σ_g min((μ_ig − μ_jg)², :data:`ALIGN_CAP` · s_g² (1/n_i + 1/n_j)), so that a
    gene that differs between the branches costs a constant wherever it is
    matched and only the genes the branches share steer the path. The path
    runs from the fork (both first bins) to the end of either branch (open
    end: a branch may stop early), and branch b's bin j takes the mean
    reference time of the bins matched to it; the warp is piecewise linear
    between the bins' median times, slopes within :data:`SLOPE_RANGE`.
    """
    n_branches = int(groups.max())
    past = times - fork
    counts = np.array([np.sum(groups == b) for b in range(1, n_branches + 1)])
    reference = int(np.argmax(counts)) + 1
    binned = {}
    within = np.zeros(values.shape[1])
    for b in range(1, n_branches + 1):
        mine = np.flatnonzero(groups == b)
        order = mine[np.argsort(past[mine], kind="stable")]
        pieces = [piece for piece in np.array_split(order, min(n_bins, order.size)) if piece.size]
        centres = np.array([np.median(past[piece]) for piece in pieces])
        means = np.stack([values[piece].mean(axis=0) for piece in pieces])
        sizes = np.array([piece.size for piece in pieces], dtype=float)
        within += sum(((values[piece] - mean) ** 2).sum(axis=0) for piece, mean in zip(pieces, means))
        binned[b] = (centres, means, sizes)
    noise = within / max(float(counts.sum()) - n_bins * n_branches, 1.0)
    ref_centres, ref_means, ref_sizes = binned[reference]
    xs, ys = [], []
    for b in range(1, n_branches + 1):
        centres, means, sizes = binned[b]
        if b == reference:
            targets = centres
        else:
            scale = noise[None, None, :] * (1.0 / ref_sizes[:, None, None] + 1.0 / sizes[None, :, None])
            cost = np.minimum((ref_means[:, None, :] - means[None, :, :]) ** 2, ALIGN_CAP * scale).sum(axis=2)
            targets = _dtw_targets(cost, ref_centres)
        x = np.concatenate([[0.0], centres])
        y = np.concatenate([[targets[0] - centres[0]], targets])
        keep = np.concatenate([[True], np.diff(x) > 0])
        xs.append(x[keep])
        ys.append(y[keep])
    n_pieces = max(x.size for x in xs) - 1
    breaks = np.zeros((n_branches, n_pieces + 1))
    slopes = np.ones((n_branches, n_pieces))
    shifts = np.zeros(n_branches)
    for b, (x, y) in enumerate(zip(xs, ys)):
        # pad short branches with pieces of zero length past the end
        breaks[b, : x.size] = x
        breaks[b, x.size:] = x[-1]
        slope = np.clip(np.diff(y) / np.diff(x), *SLOPE_RANGE)
        slopes[b, : slope.size] = slope
        slopes[b, slope.size:] = slope[-1] if slope.size else 1.0
        shifts[b] = y[0]
    return BranchWarp(float(fork), breaks, slopes, shifts)


def _dtw_targets(cost: np.ndarray, ref_centres: np.ndarray) -> np.ndarray:
    """Mean reference time matched to each bin of the other branch along the cheapest monotone path
    from both first bins to the last bin of either (the mean cost per step compared at the end)."""
    n_ref, n_other = cost.shape
    total = np.full((n_ref, n_other), np.inf)
    steps = np.zeros((n_ref, n_other))
    total[0, 0], steps[0, 0] = cost[0, 0], 1

    def pace(cell):
        return total[cell] / steps[cell]

    def before(i, j):
        return [cell for cell in ((i - 1, j), (i, j - 1), (i - 1, j - 1)) if min(cell) >= 0]

    for i in range(n_ref):
        for j in range(n_other):
            if i or j:
                previous = _least(before(i, j), pace)
                total[i, j], steps[i, j] = total[previous] + cost[i, j], steps[previous] + 1
    i, j = _least([(n_ref - 1, j) for j in range(n_other)] + [(i, n_other - 1) for i in range(n_ref)], pace)
    matched = [[] for _ in range(n_other)]
    matched[j].append(ref_centres[i])
    while i or j:
        i, j = _least(before(i, j), pace)
        matched[j].append(ref_centres[i])
    # bins past the path's end (the other branch runs on) continue at the reference's last pace
    targets = np.array([np.mean(m) if m else np.nan for m in matched])
    last = int(np.flatnonzero(np.isfinite(targets))[-1])
    pace_end = float(np.diff(ref_centres[-2:]).mean()) if ref_centres.size > 1 else 0.0
    targets[last + 1:] = targets[last] + np.arange(1, targets.size - last) * pace_end
    return np.maximum.accumulate(targets)


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
    one axis (:func:`fit_branch_warps`), so that a learner's uneven
    stretching of the branches does not count as a difference, twice: with
    :data:`WARP_PIECES` and with :data:`FINE_WARP_PIECES` pieces, each gene
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
    its own; :class:`~.splines.SufficientStatistics`) gets the larger of the
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
        return _compare_branches(matrix, rows, axis, groups, n_branches, n_knots=n_knots, df=df, columns=columns,
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


@dataclass(frozen=True)
class ForkTestResult:
    """Output of :func:`fork_test` for G genes and B branches.

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
    cells outside the window; ``stretch``, ``shift``, ``degenerate``, ``pvals_registered``,
    ``pvals_unregistered`` and ``warp_at_bound`` as in :class:`BranchTestResult`.
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
    pvals_registered: np.ndarray
    pvals_unregistered: np.ndarray
    df: float
    fork: float
    window: float
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    shift: np.ndarray
    degenerate: np.ndarray
    warp_at_bound: bool = False


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
    of the branches' reaches (:data:`REACH_QUANTILE` of their times past the
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
        comparison = _compare_branches(
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
    the first: for ``"fit"`` and ``"both"`` one of :data:`WARP_PIECES` and one of
    :data:`FINE_WARP_PIECES` pieces (:func:`fit_branch_warps`), each gene given the larger of its
    p-values (with ``"both"`` the unregistered comparison is a third); for ``"none"`` none.

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

    A warp pressed against :data:`MAX_RELATIVE_STRETCH` is searched again within
    :data:`WIDE_RELATIVE_STRETCH`; where a warp still presses against a bound of its family
    (:attr:`BranchWarp.at_bound`), no registration is returned but the identity, marked
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
    local_variance: np.ndarray

    def curves(self, grid: np.ndarray, times: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each branch's curve on ``grid`` (G × B × n_grid, NaN outside its cells' range, trunk included) and the shared one."""
        design = self.basis.design(grid)
        curves = np.full((self.shared.rss.size, len(self.fits), grid.size), np.nan)
        for b, fit in enumerate(self.fits, start=1):
            span = times[(groups == 0) | (groups == b)]
            inside = (grid >= span.min()) & (grid <= span.max())
            curves[:, b - 1, inside] = (design[inside] @ fit.coef).T
        return curves, (design @ self.shared.coef).T


def _compare_branches(matrix, rows, times, groups, n_branches, *, n_knots, df, columns, names, trunk_name,
                      local_variance=None):
    """Fit one curve per branch (trunk cells in each with weight 1/B) and one shared curve; F test them.

    The trunk (group 0) may be empty, as in :func:`fork_test`. ``local_variance`` (G): the genes'
    variance within runs of these cells in time order (:func:`~.splines.time_bins`), where an
    earlier comparison of the same cells computed it; read in this pass otherwise.
    """
    counts = np.bincount(groups, minlength=n_branches + 1)
    for b in range(1, n_branches + 1):
        if counts[b] <= df:
            raise ValueError(
                f"{names[b - 1]} has {counts[b]} cells, not more than df={df:g}: too few to fit its own curve. "
                "Lower df, choose another branch point, or prune short branches (tl.pseudotime's min_branch_nodes)."
            )
    basis = basis_for_curves(times, n_knots, _curve_weights(groups, n_branches), df)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_branches + 1, columns,
                                   count_carriers=True, bins=None if local_variance is not None else time_bins(times, groups))
    if local_variance is None:
        local_variance = stats_.local_variance
    # one df for every curve keeps the models nested: the least any of them can carry
    df = adapt_df(
        df,
        [stats_.gram.sum(0)] + [_with_trunk(stats_.gram, b) for b in range(1, n_branches + 1)],
        basis.penalty,
        f"A branch (with {trunk_name})",
    )
    shared = penalized_fit(stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0), basis.penalty, df=df,
                           what="The branches together")
    fits = _branch_fits(stats_.gram, stats_.cross, stats_.sumsq, basis.penalty, df=df, names=names,
                        trunk_name=trunk_name)
    forms = _branch_forms(stats_.gram, basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in fits])
    moments = _form_moments(*forms, stats_.gram.sum())
    rss = sum(fit.rss for fit in fits)
    fstat, approximate = f_test(shared.rss, rss, *moments)
    # the exact null of this F for Gaussian noise around one shared curve, the curve's smoothing
    # bias included; Satterthwaite's where the saddlepoint is singular, and for genes without
    # noise within runs of cells (the exact null's σ² is 0: a gene constant within each run)
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    exact = np.full(fstat.shape, np.nan)
    # noise below rounding of the gene's own scale (sd < 1e-12 of its root mean square) is none
    noisy = ~degenerate & (local_variance > 1e-24 * stats_.sumsq.sum(0) / float(stats_.gram.sum()))
    for genes, mean in _shared_null_means(stats_, basis.penalty, df, local_variance, n_blocks=n_branches + 1):
        genes, mean = _of_genes(genes, mean, noisy[genes])
        exact[genes] = form_f_pvalues(fstat[genes], *forms, float(stats_.gram.sum()), mean=mean)
    pvals = np.where(np.isnan(exact), approximate, exact)
    # a sparse gene's few non-zero values in a small branch are not Gaussian: its p-value must also
    # pass the count test there (MIN_EXPECTED_CARRIERS; an intersection-union of the two)
    pvals = np.fmax(pvals, sparse_count_pvalues(stats_.n_carriers_by_group, stats_.n_cells,
                                                np.arange(1, n_branches + 1)))
    fstat, pvals = blank_degenerate(degenerate, fstat, pvals)
    return _Comparison(basis=basis, shared=shared, fits=fits, fstat=fstat, pvals=pvals, counts=counts,
                       degenerate=degenerate, local_variance=local_variance)


#: The null's shared curve (:func:`_shared_null_means`) uses at least this many effective degrees of
#: freedom more than the tested curves ...
NULL_MEAN_EXTRA_DF = 2.0
#: ... and more, in steps of this many, up to what the basis holds, where a gene's own course asks for it:
NULL_MEAN_DF_STEP = 2.0
#: where the most flexible of those fits beats a less flexible one at this level (:func:`_shared_null_means`).
NULL_MEAN_SELECTION_ALPHA = 0.01


def _shared_null_means(stats_, penalty: np.ndarray, df: float, variance: np.ndarray, *, n_blocks: int):
    """The mean of the F test's null, per gene: one shared curve, fitted more flexibly than the tested ones.

    Under the null every branch follows one curve μ(t), but the branch and
    shared fits smooth μ differently: each has its own cells, spread
    differently along t, and the same ``df``. Where μ bends faster than
    ``df`` can follow (a switch-like gene), the fits' biases differ and F
    reads them as a difference between the branches. Referred to the null of
    pure noise, the test was anti-conservative even on the true time: 200
    genes of one steep sigmoid at ``simulate_trajectory`` forks, df = 6,
    3.5–9 % below p = 0.05 and Kolmogorov–Smirnov p < 0.01 on 2 of 11 forks
    (df = 4: 33.5 and 38 % on two). The null is therefore y = μ̂ + σz: μ̂ the
    shared fit at df + :data:`NULL_MEAN_EXTRA_DF` effective degrees of
    freedom (less bias than the tested curves; more made the estimate's noise
    count, and the test conservative, where the trend is gentle) or, for a
    gene whose course that cannot follow, at more (in steps of
    :data:`NULL_MEAN_DF_STEP`, up to what the basis holds): each gene at the
    least flexible level that the most flexible one does not beat at
    :data:`NULL_MEAN_SELECTION_ALPHA` (a χ² test of its gain in Σ y² against
    σ², on the degrees of freedom it adds); σ² the gene's
    variance within runs of cells that follow each other in time
    (:attr:`~.splines.SufficientStatistics.local_variance`), not the branch
    model's residual variance, which the same bias inflates and which so hid
    it: genes that bump sharply on the trunk and keep their value on both
    branches, on the true time, fell below p = 0.05 for 98 % with df + 2 and
    the residual variance, 2 % so. The
    noise μ̂ carries is taken out of the non-centralities
    (:class:`~.inference.NullMean`). Yields (genes, NullMean) per level used.
    """
    gram, cross, sumsq = stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0)
    n_basis = gram.shape[0]
    ceiling = _most_flexible_df(gram, penalty, "The branches together")
    levels = list(np.arange(min(df + NULL_MEAN_EXTRA_DF, ceiling), ceiling, NULL_MEAN_DF_STEP)) + [ceiling]
    fits = [penalized_fit(gram, cross, sumsq, penalty, df=level, what="The branches together") for level in levels]
    # the least flexible level that the most flexible one does not beat (its gain in Σ y² against the
    # noise's local variance, a χ² of the edf it adds), so that a gene of gentle course keeps df + 2
    # a gene without noise within runs has no σ² to weigh its gain against: its null is not used
    gain = np.divide(np.vstack([fit.rss for fit in fits]) - fits[-1].rss, variance,
                     out=np.zeros((len(fits), variance.size)), where=variance > 0)
    edf = np.array([fit.edf[0] for fit in fits])
    added = np.maximum(edf[-1] - edf, np.finfo(float).eps)[:, None]
    beaten = stats.chi2.sf(np.maximum(gain, 0.0), added) < NULL_MEAN_SELECTION_ALPHA
    beaten[-1] = False
    chosen = np.argmax(~beaten, axis=0)
    for index in np.unique(chosen):
        genes = np.flatnonzero(chosen == index)
        fit = fits[index]
        inverse = linalg.pinvh(gram + fit.lam[0] * penalty)
        stacked = np.zeros((n_blocks * n_basis, genes.size))
        stacked[-n_basis:] = fit.coef[:, genes]  # the shared block of _branch_forms' U comes last
        noise = np.zeros((n_blocks * n_basis,) * 2)
        noise[-n_basis:, -n_basis:] = inverse @ gram @ inverse
        yield genes, NullMean(coef=stacked, variance=np.maximum(variance[genes], np.finfo(float).tiny), noise=noise)


def _of_genes(genes: np.ndarray, mean: NullMean | None, keep: np.ndarray) -> tuple[np.ndarray, NullMean | None]:
    """``genes`` and their :class:`NullMean` restricted to those marked ``keep`` (all genes where the
    null is pure noise, ``mean`` None: its σ² is not read)."""
    if mean is None:
        return genes, None
    return genes[keep], NullMean(coef=mean.coef[:, keep], variance=mean.variance[keep], noise=mean.noise)


def _curve_weights(groups: np.ndarray, n_branches: int) -> list[np.ndarray]:
    """The cells' weights in the shared curve (all) and in each branch curve (its cells, and the
    trunk's at 1/B)."""
    return [np.ones(groups.size)] + [(groups == b) + (groups == 0) / n_branches for b in range(1, n_branches + 1)]


def _with_trunk(parts, branch: int):
    """Branch ``branch``'s statistic with the trunk's (``parts[0]``) at weight 1/B: each trunk cell
    enters every branch's fit and counts once over all of them."""
    return (1.0 / (len(parts) - 1)) * parts[0] + parts[branch]


def _branch_fits(gram, cross, sumsq, penalty, *, df, names, trunk_name) -> list:
    """Each branch's own curve, fitted to its cells and the trunk's (:func:`_with_trunk`), from the
    groups' sufficient statistics (trunk first); a loop over the few branches, genes vectorised."""
    return [
        penalized_fit(_with_trunk(gram, b), _with_trunk(cross, b), _with_trunk(sumsq, b), penalty, df=df,
                      what=f"{names[b - 1]} (with {trunk_name})")
        for b in range(1, len(gram))
    ]


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


def _most_flexible_df(gram: np.ndarray, penalty: np.ndarray, what: str) -> float:
    """The most effective degrees of freedom a fit on ``gram`` can use (:func:`~.splines.adapt_df` of
    nearly as many as the basis has functions)."""
    return adapt_df(gram.shape[0] - 0.5, [gram], penalty, what)


def _explained_difference(forms, coef: np.ndarray) -> np.ndarray:
    """μᵀAμ per gene for a course μ = Xβ that every branch follows (``coef``: β, m × G) and the branch
    test's form A (``forms`` from :func:`_branch_forms`): how much more the branches' own curves than
    the shared curve explain of one shared course, their smoothing alone. Uᵀμ = UᵀX β, UᵀX being the
    last block column of UᵀU."""
    cross, explained, _ = forms
    projected = cross[:, -coef.shape[0]:] @ coef
    return (projected * (explained @ projected)).sum(axis=0)


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
