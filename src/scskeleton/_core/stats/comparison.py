"""The comparison both branch tests make: one curve per branch against one shared curve, fitted and F-tested.

The branch test and the fork test (:mod:`~.branches`) differ in which cells they compare
and on which time axis (:mod:`~.registration`); both then fit one penalised spline per
branch (trunk cells in each with weight 1/B) and one shared spline on a common basis,
and refer the F statistic of the two to its exact null, whose quadratic forms
A = U C_A Uᵀ and R = I − U C_Q Uᵀ (:func:`branch_forms`) are built from the groups'
sufficient statistics (:mod:`~.passes`) without touching the cells again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg, stats

from .inference import MIN_VARYING_CELLS, NullMean, blank_degenerate, f_test, form_f_pvalues, sparse_count_pvalues
from .passes import sufficient_statistics, time_bins
from .splines import adapt_df, basis_for_curves, explained_form, penalized_fit


@dataclass(frozen=True)
class Comparison:
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


def compare_branches(matrix, rows, times, groups, n_branches, *, n_knots, df, columns, names, trunk_name,
                     local_variance=None):
    """Fit one curve per branch (trunk cells in each with weight 1/B) and one shared curve; F test them.

    The trunk (group 0) may be empty, as in :func:`~.branches.fork_test`. ``local_variance`` (G): the genes'
    variance within runs of these cells in time order (:func:`~.passes.time_bins`), where an
    earlier comparison of the same cells computed it; read in this pass otherwise.
    """
    counts = np.bincount(groups, minlength=n_branches + 1)
    for b in range(1, n_branches + 1):
        if counts[b] <= df:
            raise ValueError(
                f"{names[b - 1]} has {counts[b]} cells, not more than df={df:g}: too few to fit its own curve. "
                "Lower df, choose another branch point, or prune short branches (tl.pseudotime's min_branch_nodes)."
            )
    basis = basis_for_curves(times, n_knots, curve_weights(groups, n_branches), df)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_branches + 1, columns,
                                   count_carriers=True, bins=None if local_variance is not None else time_bins(times, groups))
    if local_variance is None:
        local_variance = stats_.local_variance
    # one df for every curve keeps the models nested: the least any of them can carry
    df = adapt_df(
        df,
        [stats_.gram.sum(0)] + [with_trunk(stats_.gram, b) for b in range(1, n_branches + 1)],
        basis.penalty,
        f"A branch (with {trunk_name})",
    )
    shared = penalized_fit(stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0), basis.penalty, df=df,
                           what="The branches together")
    fits = branch_fits(stats_.gram, stats_.cross, stats_.sumsq, basis.penalty, df=df, names=names,
                        trunk_name=trunk_name)
    forms = branch_forms(stats_.gram, basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in fits])
    moments = form_moments(*forms, stats_.gram.sum())
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
    return Comparison(basis=basis, shared=shared, fits=fits, fstat=fstat, pvals=pvals, counts=counts,
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
    (:attr:`~.passes.SufficientStatistics.local_variance`), not the branch
    model's residual variance, which the same bias inflates and which so hid
    it: genes that bump sharply on the trunk and keep their value on both
    branches, on the true time, fell below p = 0.05 for 98 % with df + 2 and
    the residual variance, 2 % so. The
    noise μ̂ carries is taken out of the non-centralities
    (:class:`~.inference.NullMean`). Yields (genes, NullMean) per level used.
    """
    gram, cross, sumsq = stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0)
    n_basis = gram.shape[0]
    ceiling = most_flexible_df(gram, penalty, "The branches together")
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
        stacked[-n_basis:] = fit.coef[:, genes]  # the shared block of branch_forms' U comes last
        noise = np.zeros((n_blocks * n_basis,) * 2)
        noise[-n_basis:, -n_basis:] = inverse @ gram @ inverse
        yield genes, NullMean(coef=stacked, variance=np.maximum(variance[genes], np.finfo(float).tiny), noise=noise)


def _of_genes(genes: np.ndarray, mean: NullMean | None, keep: np.ndarray) -> tuple[np.ndarray, NullMean | None]:
    """``genes`` and their :class:`NullMean` restricted to those marked ``keep`` (all genes where the
    null is pure noise, ``mean`` None: its σ² is not read)."""
    if mean is None:
        return genes, None
    return genes[keep], NullMean(coef=mean.coef[:, keep], variance=mean.variance[keep], noise=mean.noise)


def curve_weights(groups: np.ndarray, n_branches: int) -> list[np.ndarray]:
    """The cells' weights in the shared curve (all) and in each branch curve (its cells, and the
    trunk's at 1/B)."""
    return [np.ones(groups.size)] + [(groups == b) + (groups == 0) / n_branches for b in range(1, n_branches + 1)]


def with_trunk(parts, branch: int):
    """Branch ``branch``'s statistic with the trunk's (``parts[0]``) at weight 1/B: each trunk cell
    enters every branch's fit and counts once over all of them."""
    return (1.0 / (len(parts) - 1)) * parts[0] + parts[branch]


def branch_fits(gram, cross, sumsq, penalty, *, df, names, trunk_name) -> list:
    """Each branch's own curve, fitted to its cells and the trunk's (:func:`with_trunk`), from the
    groups' sufficient statistics (trunk first); a loop over the few branches, genes vectorised."""
    return [
        penalized_fit(with_trunk(gram, b), with_trunk(cross, b), with_trunk(sumsq, b), penalty, df=df,
                      what=f"{names[b - 1]} (with {trunk_name})")
        for b in range(1, len(gram))
    ]


def branch_forms(gram: np.ndarray, penalty: np.ndarray, lam_shared: float, lam_branches: list[float]):
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


def most_flexible_df(gram: np.ndarray, penalty: np.ndarray, what: str) -> float:
    """The most effective degrees of freedom a fit on ``gram`` can use (:func:`~.splines.adapt_df` of
    nearly as many as the basis has functions)."""
    return adapt_df(gram.shape[0] - 0.5, [gram], penalty, what)


def explained_difference(forms, coef: np.ndarray) -> np.ndarray:
    """μᵀAμ per gene for a course μ = Xβ that every branch follows (``coef``: β, m × G) and the branch
    test's form A (``forms`` from :func:`branch_forms`): how much more the branches' own curves than
    the shared curve explain of one shared course, their smoothing alone. Uᵀμ = UᵀX β, UᵀX being the
    last block column of UᵀU."""
    cross, explained, _ = forms
    projected = cross[:, -coef.shape[0]:] @ coef
    return (projected * (explained @ projected)).sum(axis=0)


def form_moments(cross: np.ndarray, explained: np.ndarray, fitted: np.ndarray, n_cells: float):
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
