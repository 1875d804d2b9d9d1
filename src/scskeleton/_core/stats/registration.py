"""Branch registration: one warp of every branch's time past a fork onto a common axis, shared by all genes.

A learner stretches the branches of a fork differently, and a gene that follows one
course of the process on every branch then follows different curves of pseudotime.
:func:`fit_branch_warps` fits a monotone piecewise-linear :class:`BranchWarp` per branch
that undoes that distortion, read from the genes that follow time best. The branch
and fork tests (:mod:`~.branches`) compare the branches on the axes it gives.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np
from scipy import sparse, stats

from .comparison import branch_fits, branch_forms, curve_weights, explained_difference, most_flexible_df, with_trunk
from .passes import take_rows
from .splines import adapt_df, needs_own_knots, penalized_fit, spline_basis

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
#: (:func:`~.branches._registrations`).
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
#: and the branches are then compared on the learned axis (:func:`~.branches._registrations`).
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
    before the test's null counts it (:func:`~.comparison._shared_null_means`): the branch
    and shared curves smooth a sharp shared course (a gene that switches or
    bumps within a tenth of the tree) differently, x_g is then large although
    nothing differs, and a warp, which moves the knots and the penalties, can
    shrink that difference instead of aligning anything. On the true time of
    forks whose genes switch, bump or ramp sharply, the search stretched the
    branches about 0.75 / 1.35 (their ends aligned) and the registered test
    flagged 58–64 % of the shared genes. So
    each gene below the cap c loses ν μ̂ᵀAμ̂ / RSS_branches
    (:func:`~.comparison.explained_difference`), what the test's form A makes of the
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
    tests then compare on the learned axis (:func:`~.branches._registrations`).
    """
    rows = np.asarray(rows, dtype=np.intp)
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups, dtype=np.intp)
    n_branches = int(groups.max())
    block, spread, sub_times, sub_groups = _warp_cells(matrix, rows, times, groups)
    fork = fork_time(times, groups)
    reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) for b in range(1, n_branches + 1)])
    identity = BranchWarp.identity(fork, np.maximum(reach, 0.0), n_pieces)
    if not np.any(spread > 0) or not np.all(reach > 0):
        return identity
    keep = _timed_genes(block, spread, identity(sub_times, sub_groups), n_knots=n_knots, df=df)
    values = _standardised(block, spread, keep)
    criteria = _WarpCriteria(values, sub_times, sub_groups, identity, n_knots=n_knots, df=df,
                             max_relative_stretch=max_relative_stretch)
    # the rounds try many warps more than once (a slope's factor 1, the shift a branch already has)
    loss, mismatch = _remembered(criteria.loss), _remembered(criteria.mismatch)
    stretched = _least(_stretch_candidates(identity, reach), loss)
    search = _WarpSearch.for_reach(reach, n_pieces)
    aligned = _aligned_warp(values, sub_times, sub_groups, fork, n_bins=ALIGN_BINS)
    started = _aligned_start(aligned, identity, search.may_slow(identity))
    searched = _least((search.refine(stretched, loss), search.refine(started, loss), aligned), loss)
    # the search's criterion finds the region cheaply; the exact one has the last word (docstring)
    # and the choice between no warp, the search's and the refined one is made without the smoothing
    # bias (docstring)
    chosen = _least((identity, _balanced(searched), _balanced(search.refine(searched, mismatch))),
                    functools.partial(criteria.unbounded_mismatch, smoothing_removed=True))
    if _pressed_against_bounds(chosen, lambda warp: criteria.unbounded_mismatch(_balanced(warp)), max_relative_stretch):
        return dataclasses.replace(chosen, at_bound=True)
    return chosen


def _warp_cells(matrix, rows: np.ndarray, times: np.ndarray, groups: np.ndarray):
    """The cells the warp is fitted on (at most :data:`WARP_CELLS`, evenly spread over ``rows``) with
    every gene, each gene's standard deviation over them, and their times and groups."""
    pick = np.unique(np.linspace(0, rows.size - 1, min(rows.size, WARP_CELLS)).astype(np.intp))
    block = take_rows(matrix, rows[pick], None)  # at most WARP_CELLS cells, every gene, from a chunked matrix too
    if sparse.issparse(block):  # choose the genes on the sparse block; densify only those
        block = sparse.csc_matrix(block, dtype=np.float64)
        mean = np.asarray(block.mean(axis=0)).ravel()
        spread = np.sqrt(np.maximum(np.asarray(block.multiply(block).mean(axis=0)).ravel() - mean**2, 0.0))
    else:
        block = np.asarray(block, dtype=np.float64)
        spread = block.std(axis=0)
    return block, spread, times[pick], groups[pick]


def _standardised(block, spread: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The genes ``keep`` of ``block`` (dense or sparse), centred and divided by their ``spread``, dense."""
    chosen = block[:, keep]
    chosen = chosen.toarray() if sparse.issparse(chosen) else chosen
    return (chosen - chosen.mean(axis=0)) / spread[keep]


def _balanced(warp: BranchWarp) -> BranchWarp:
    """``warp`` with the branches' mean log-stretch and mean shift fixed at 0 (:func:`fit_branch_warps`)."""
    # moving every branch alike against the trunk changes no comparison between branches, but it
    # changes where the shared curve's knots fall, and the search used that to squeeze all branches
    # together until their own genes fitted one curve: fix the branches' mean log-stretch and shift
    scale = np.exp(np.log(np.maximum(warp.stretch, np.finfo(float).tiny)).mean())
    shifts = warp.shifts / scale
    return warp.replace(slopes=warp.slopes / scale, shifts=shifts - shifts.mean())


class _WarpCriteria:
    """The two criteria the warp search compares warps by, on the warp's cells (``times``, ``groups``)
    and standardised genes ``values`` (:func:`fit_branch_warps`): ``loss``, the search's, and
    ``mismatch``, the exact one."""

    def __init__(self, values: np.ndarray, times: np.ndarray, groups: np.ndarray, identity: BranchWarp, *,
                 n_knots: int, df: float, max_relative_stretch: float):
        n_branches = identity.shifts.size
        self.values, self.times, self.groups, self.n_knots = values, times, groups, n_knots
        self.max_relative_stretch = max_relative_stretch
        self.members = [np.flatnonzero(groups == group) for group in range(n_branches + 1)]
        # taken once: the exact criterion reads them per trial
        self.member_values = [values[rows_] for rows_ in self.members]
        self.sumsq = [(part**2).sum(axis=0) for part in self.member_values]  # the same under every warp
        self.total_sumsq = sum(self.sumsq)
        # whether the curves need their own knots is read once, on the unwarped time, not at every trial
        weights = curve_weights(groups, n_branches)
        self.own_knots = [weight > 0 for weight in weights] if needs_own_knots(
            identity(times, groups), n_knots, weights, df) else None
        # each gene is fitted by the shared curve or, at the price of its extra freedom, by its branches'
        # own curves. Those are fitted once, on the unwarped time: a monotone warp within each branch
        # barely changes how well a branch's own curve fits, and the small changes it does make, summed
        # over the many genes whose branches differ, would otherwise outweigh the genes the warp is for
        basis, design = self.basis_at(identity)
        gram = [design[rows_].T @ design[rows_] for rows_ in self.members]
        cross = [design[rows_].T @ values[rows_] for rows_ in self.members]
        self.names = [f"branch {b}" for b in range(1, n_branches + 1)]
        # a short branch on the warp's cells may carry fewer degrees of freedom than asked: lower them as
        # the test itself does (it reports the change), rather than fail before the test is reached
        self.df = adapt_df(df, [sum(gram)] + [with_trunk(gram, b) for b in range(1, n_branches + 1)], basis.penalty,
                           "A branch (with the trunk)")
        # a gene counts as shared under a warp while its branch-specific curves improve on the
        # shared curve by less than the 99 % quantile of that improvement under the null
        self.threshold = stats.chi2.ppf(SHARED_QUANTILE, (n_branches - 1) * self.df)
        self.residual_df = max(times.size - n_branches * self.df, 1.0)
        own_fits = branch_fits(gram, cross, self.sumsq, basis.penalty, df=self.df, names=self.names,
                               trunk_name="the trunk")
        self.alone = sum(fit.rss for fit in own_fits) * (1.0 + self.threshold / self.residual_df)

    def basis_at(self, warp: BranchWarp):
        """The spline basis on the cells' warped times, and its design matrix there."""
        warped = warp(self.times, self.groups)
        basis = spline_basis(warped, self.n_knots, curves=self.own_knots)
        return basis, basis.design(warped)

    def shared_rss(self, warp: BranchWarp) -> np.ndarray:
        basis, design = self.basis_at(warp)
        # a few thousand cells and genes, dense: direct products beat the chunked general pass
        return penalized_fit(design.T @ design, design.T @ self.values, self.total_sumsq, basis.penalty, df=self.df,
                             what="The trunk and branches together").rss

    def out_of_bounds(self, warp: BranchWarp) -> bool:
        log_stretch = np.log(np.maximum(warp.stretch, np.finfo(float).tiny))
        if np.any(np.abs(log_stretch) > np.log(self.max_relative_stretch)):
            return True
        return branch_overlap(warp) < MIN_KEPT_OVERLAP

    def loss(self, warp: BranchWarp) -> float:
        warp = _balanced(warp)
        if self.out_of_bounds(warp):
            return np.inf
        try:
            return float(np.minimum(self.shared_rss(warp), self.alone).sum())
        except ValueError:  # as in the exact criterion: its knots cannot carry df, not a warp to choose
            return np.inf

    def mismatch(self, warp: BranchWarp) -> float:
        warp = _balanced(warp)
        return np.inf if self.out_of_bounds(warp) else self.unbounded_mismatch(warp)

    def unbounded_mismatch(self, warp: BranchWarp, *, smoothing_removed: bool = False) -> float:
        # the exact criterion: each gene's shared and own curves on the same warped axis
        basis, design = self.basis_at(warp)
        gram_at = [design[rows_].T @ design[rows_] for rows_ in self.members]
        cross_at = [design[rows_].T @ part for rows_, part in zip(self.members, self.member_values)]
        total_gram, total_cross = sum(gram_at), sum(cross_at)
        try:
            shared = penalized_fit(total_gram, total_cross, self.total_sumsq, basis.penalty, df=self.df,
                                   what="The trunk and branches together")
            own = branch_fits(gram_at, cross_at, self.sumsq, basis.penalty, df=self.df, names=self.names,
                              trunk_name="the trunk")
        except ValueError:  # the warp leaves a branch too few knots for df: not a warp to choose
            return np.inf
        own_rss = np.maximum(sum(fit.rss for fit in own), np.finfo(float).tiny)
        statistic = self.residual_df * (shared.rss - own_rss) / own_rss
        if not smoothing_removed:
            return float(np.minimum(statistic, self.threshold).sum())
        # what the two models' smoothing alone makes of one shared course, taken out of every gene
        # below the cap (docstring): read from the shared curve fitted more flexibly
        most = most_flexible_df(total_gram, basis.penalty, "The trunk and branches together")
        flexible = penalized_fit(total_gram, total_cross, self.total_sumsq, basis.penalty,
                                 df=min(self.df + WARP_BIAS_EXTRA_DF, most), what="The trunk and branches together")
        forms = branch_forms(np.stack(gram_at), basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in own])
        smoothing = self.residual_df * explained_difference(forms, flexible.coef) / own_rss
        statistic = np.where(statistic >= self.threshold, self.threshold,
                             np.clip(statistic - smoothing, 0.0, self.threshold))
        return float(statistic.sum())


def _stretch_candidates(identity: BranchWarp, reach: np.ndarray) -> list[BranchWarp]:
    """One stretch per branch, from none to the one that gives every branch the same reach past the fork."""
    # the stretch that gives every branch the same reach past the fork (tradeSeq's registration),
    # and the way there from no stretch at all: the data choose among them
    n_pieces = identity.slopes.shape[1]
    equal_reach = reach.mean() / reach
    candidates = [equal_reach**share for share in np.linspace(0.0, 1.0, STRETCH_STEPS)]
    return [identity.replace(slopes=np.repeat((c / np.exp(np.log(c).mean()))[:, None], n_pieces, axis=1))
            for c in candidates]


def _aligned_start(aligned: BranchWarp, identity: BranchWarp, may_slow: np.ndarray) -> BranchWarp:
    """The alignment ``aligned`` read at the pieces' breaks of ``identity``, as a start the rounds can refine."""
    n_branches, n_pieces = identity.slopes.shape
    fork = identity.fork
    ends = fork + identity.breaks
    paced = aligned(ends.ravel(), np.repeat(np.arange(1, n_branches + 1), n_pieces + 1)).reshape(ends.shape)
    slopes = np.diff(paced, axis=1) / np.maximum(np.diff(identity.breaks, axis=1), np.finfo(float).tiny)
    slopes = np.asarray([row if _allowed_slopes(row, slowing) else np.clip(row, *SLOPE_RANGE)
                         for row, slowing in zip(np.clip(slopes, TERMINAL_MIN_SLOPE, SLOPE_RANGE[1]), may_slow)])
    return identity.replace(slopes=slopes, shifts=paced[:, 0] - fork)


@dataclass(frozen=True)
class _WarpSearch:
    """The rounds of the warp search: each branch's shift, overall pace and each piece's slope in turn."""

    n_pieces: int
    shift_steps: np.ndarray
    slope_steps: np.ndarray
    farthest_other: np.ndarray  # per branch, the farthest reach of any other branch

    @classmethod
    def for_reach(cls, reach: np.ndarray, n_pieces: int) -> _WarpSearch:
        # then each branch's shift, overall pace and each piece's slope in turn, in rounds: a fork
        # placed inside one branch starts the other's time late or early by a constant, and a learned
        # tree's speed along a branch changes along it, neither of which one stretch about the fork removes
        shift_steps = np.linspace(-MAX_SHIFT, MAX_SHIFT, SHIFT_STEPS) * reach.mean()
        slope_steps = np.exp(np.linspace(-1.0, 1.0, SLOPE_STEPS) * np.log(MAX_SLOPE_CHANGE))
        farthest_other = np.array([np.delete(reach, b).max(initial=0.0) for b in range(reach.size)])
        return cls(n_pieces, shift_steps, slope_steps, farthest_other)

    def may_slow(self, warp: BranchWarp) -> np.ndarray:
        """Which pieces of ``warp`` may slow down below :data:`SLOPE_RANGE` (:func:`_allowed_slopes`)."""
        # a branch's end may slow down only where another branch still has cells to be aligned with
        return warp.breaks[:, :-1] < self.farthest_other[:, None]

    def rescaled(self, warp: BranchWarp, branches, pieces, criterion) -> BranchWarp:
        """The best by ``criterion`` of ``warp`` and its slopes ``[branches, pieces]`` scaled by each slope step."""
        slowing = self.may_slow(warp)  # the alignment has pieces of its own
        trials = [warp]  # a slope outside the range (from the equal-reach stretch) may stay
        for step in self.slope_steps:
            slopes = warp.slopes.copy()
            slopes[branches, pieces] *= step
            if _allowed_slopes(slopes[branches], slowing[branches]):
                trials.append(warp.replace(slopes=slopes))
        return _least(trials, criterion)

    def refine(self, warp: BranchWarp, criterion) -> BranchWarp:
        """``warp`` improved by ``criterion`` in rounds over the branches, until a round moves nothing."""
        # the whole branch, then each piece; the alignment's many short pieces (one per bin) only as
        # a whole: one slope per bin would let the criterion bend the time to each bin's noise
        pieces = [slice(None), *range(self.n_pieces)] if warp.slopes.shape[1] == self.n_pieces else [slice(None)]
        for _ in range(MAX_WARP_ROUNDS):
            start = warp
            for b in range(self.farthest_other.size):
                trials = []
                for step in self.shift_steps:
                    shifts = warp.shifts.copy()
                    shifts[b] = step
                    trials.append(warp.replace(shifts=shifts))
                warp = _least(trials, criterion)
                for piece in pieces:
                    warp = self.rescaled(warp, b, piece, criterion)
            if np.array_equal(warp.slopes, start.slopes) and np.array_equal(warp.shifts, start.shifts):
                break  # a round that moved nothing: every later round would repeat it
        return warp


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
