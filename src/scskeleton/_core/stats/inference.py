"""What the tests share: the F test of two linear smoothers, degenerate genes, FDR.

Every test compares two linear smoothers by F = (yᵀAy / tr A) / (yᵀRy / tr R),
where yᵀAy is the drop in RSS from the smaller to the larger model and yᵀRy the
larger model's RSS, referred to F(ν₁, ν₂) with the Satterthwaite degrees of
freedom ν = (tr ·)² / tr(·²) (Hastie & Tibshirani 1990, §3.9; exact for
unpenalised regression splines). The traces are exact, computed in the
m-dimensional basis, so the p-values hold their nominal level on null genes
(tested) at 5 %, unlike the common approximation ν₁ = edf − 1. In the far
tail the two-moment reference is not enough, so every test's p-values are
the exact null of F under Gaussian noise, P(yᵀ(A/a − fR/r)y > 0), a
weighted sum of χ² variables whose tail :func:`chi2_mixture_positive`
evaluates by a saddlepoint approximation:

* trend: the spline against a constant. The explained and residual forms
  share the smoother's eigenvectors, so the weights are known per gene
  (:func:`smoother_f_pvalues`; the two-moment reference let 1.5× too many
  null genes below p = 0.001 at df = 3);
* branches (in the spirit of Monocle's BEAM), fork and association: several
  splines on weighted, overlapping sets of cells against one shared curve or
  a constant. The forms do not commute; the weights are the eigenvalues of a
  small matrix per gene (:func:`form_f_pvalues`; the two-moment reference
  let 1.3–1.6× too many through at 0.001, 1.24× at 0.01 with a short branch).
  For the branch and fork tests the null's mean is not zero but one shared
  curve (:class:`NullMean`): the fits smooth a switch-like shared trend
  differently on branches whose cells lie at different times, and that
  difference of bias is part of F under the null (non-central weights).
  Where a branch would hold too few of a sparse gene's non-zero values for
  their mean to be Gaussian, the p-value must also pass a count test
  (:func:`sparse_count_pvalues`).

p-values are corrected by Benjamini–Hochberg.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

#: A gene whose value differs from its most common one in fewer tested cells than this
#: carries no trend to test: it gets F = 0, p = 1 and R² = 0 (a handful of outlying values,
#: or rounding noise on a constant, could otherwise give any p-value at all).
MIN_VARYING_CELLS = 5

#: The F test of branches leans on a Gaussian mean of each branch's cells; where a branch expects
#: fewer than this many of the cells that carry a gene's variation (for a sparse gene, the cells
#: with any count: :class:`~.passes.SufficientStatistics`), its few values there are far from
#: Gaussian, and its p-value must also pass a count test (:func:`sparse_count_pvalues`). Cochran's
#: 5 for the χ² approximation was too few: log counts in a branch of 112 of 787 cells that
#: expected 5–10 such cells put 2.3 % below 0.01 and 0.57 % below 0.001.
MIN_EXPECTED_CARRIERS = 10.0


def f_test(rss_null, rss_alt, gain, gain_sq, residual, residual_sq) -> tuple[np.ndarray, np.ndarray]:
    """Moment-matched F test of a linear smoother against a smaller one.

    RSS_null − RSS_alt = yᵀAy and RSS_alt = yᵀRy are quadratic forms in y;
    with ``gain`` = tr A, ``gain_sq`` = tr A², ``residual`` = tr R and
    ``residual_sq`` = tr R², F = (yᵀAy / tr A) / (yᵀRy / tr R) is referred to
    F(ν₁, ν₂) with ν = (tr ·)² / tr ·², the Satterthwaite degrees of freedom
    (Hastie & Tibshirani 1990, §3.9). For projections this is the exact F test.
    A gene with nothing to explain (both RSS 0) gets F = 0 and p = 1.
    """
    rss_null, rss_alt = np.asarray(rss_null, dtype=float), np.asarray(rss_alt, dtype=float)
    gain, gain_sq, residual, residual_sq = (
        np.broadcast_to(np.asarray(v, dtype=float), rss_null.shape) for v in (gain, gain_sq, residual, residual_sq)
    )
    explained = np.maximum(rss_null - rss_alt, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fstat = (explained / gain) / (rss_alt / residual)
    fstat = np.where(explained > 0, fstat, 0.0)  # includes 0/0 for genes constant on the path
    pvals = stats.f.sf(fstat, gain**2 / gain_sq, residual**2 / residual_sq)
    return fstat, np.where(np.isnan(pvals), 1.0, pvals)


def smoother_f_pvalues(fstat: np.ndarray, hat: np.ndarray, n_cells: int) -> np.ndarray:
    """Exact-null p-values of :func:`f_test`'s F for a symmetric smoother against a constant.

    With H's non-zero eigenvalues h_j (m per gene, one of them the constant's
    h = 1) and unit weights, the explained form (I − H₀) − (I − H)² and the
    residual form (I − H)² share H's eigenvectors, so for Gaussian noise
    (z_j independent standard normal)

        F > f  ⇔  Q = Σ_j (g_j / a − f (1 − h_j)² / r) z_j² − (f / r) χ²_{N−m} > 0,

    g_j = 1 − (1 − h_j)², a = Σ g_j − 1, r = Σ (1 − h_j)² + N − m (the
    constant's direction, one of the h = 1, drops out of both), and P(Q > 0)
    is :func:`chi2_mixture_positive`. The saddlepoint is accurate in the far
    tail where the two-moment Satterthwaite reference of :func:`f_test` is not
    (it let 40 % too many null genes below p = 0.001 at df = 3). Genes with
    F = 0 get p = 1, F = ∞ p = 0; NaN where the saddlepoint is singular (F at
    its null mean, p ≈ 0.5): keep the Satterthwaite value there.
    """
    fstat = np.asarray(fstat, dtype=float)
    hat = np.sort(np.clip(np.asarray(hat, dtype=float), 0.0, 1.0), axis=0)[:-1]  # drop one h = 1: the constant
    n_basis = hat.shape[0] + 1
    gain = 1.0 - (1.0 - hat) ** 2
    residual_part = (1.0 - hat) ** 2
    a = gain.sum(axis=0)
    r = residual_part.sum(axis=0) + (n_cells - n_basis)
    pvals = np.where(np.isposinf(fstat), 0.0, 1.0)  # a perfect fit (no residual) against F = 0
    active = (fstat > 0) & np.isfinite(fstat)
    if active.any():
        f, a, r = fstat[active], np.broadcast_to(a, fstat.shape)[active], np.broadcast_to(r, fstat.shape)[active]
        weights = gain[:, active] / a - f * residual_part[:, active] / r  # (m − 1) × G
        pvals[active] = chi2_mixture_positive(weights, -f / r, float(n_cells - n_basis))
    return pvals


def form_f_pvalues(
    fstat: np.ndarray, cross: np.ndarray, explained: np.ndarray, fitted: np.ndarray, n_cells: int,
    *, mean: NullMean | None = None, chunk: int = 512,
) -> np.ndarray:
    """Exact-null p-values of F = (yᵀAy / tr A) / (yᵀRy / tr R) for smoothers that do not commute.

    The branch, fork and association tests compare several penalised
    splines on overlapping, weighted sets of cells; their explained form
    A = U C_A Uᵀ and residual form R = I − U C_Q Uᵀ act on the span of the
    stacked weighted bases U (n × p), given through ``cross`` = UᵀU,
    ``explained`` = C_A and ``fitted`` = C_Q (both p × p, symmetric). With
    UᵀU = V Λ Vᵀ (rank k) and L = V Λ^½, the cells' space splits into span(U),
    where A/a − fR/r acts as T(f) = Lᵀ(C_A/a + f C_Q/r)L − (f/r) I_k, and its
    complement, where it is −(f/r) I. For Gaussian noise, then,

        P(F > f) = P(Σ_j μ_j(f) z_j² − (f/r) χ²_{n−k} > 0),

    μ_j(f) the eigenvalues of T(f): one k × k eigenproblem per gene (k ≤ p,
    a few dozen), batched, then :func:`chi2_mixture_positive`. A is not
    positive semi-definite here (a penalised fit on more cells can explain
    more than the sum of fits on their parts), which a moment-matched F
    reference cannot represent: with one short branch it let 25 % too many
    null genes below p = 0.01. Same conventions as :func:`smoother_f_pvalues`
    (1 at F = 0, 0 at F = ∞, NaN where the saddlepoint is singular).

    With ``mean`` the null is y = Uα + σz rather than y = σz, so that the
    p-value counts what the smoothers' different biases on that mean add to
    F (:class:`NullMean`). In the rotated coordinates the mean is Lᵀα, and
    z_j² becomes a non-central χ² with non-centrality δ_j = (v_jᵀLᵀα)² / σ²,
    v_j the eigenvectors of T(f).
    """
    fstat = np.asarray(fstat, dtype=float)
    values, vectors = np.linalg.eigh((cross + cross.T) / 2.0)
    keep = values > values.max(initial=0.0) * 1e-10
    root = vectors[:, keep] * np.sqrt(values[keep])  # L, p × k
    t_explained = root.T @ ((explained + explained.T) / 2.0) @ root
    t_fitted = root.T @ ((fitted + fitted.T) / 2.0) @ root
    a = float(np.trace(t_explained))
    r = float(n_cells - np.trace(t_fitted))
    rank = int(keep.sum())
    pvals = np.where(np.isposinf(fstat), 0.0, 1.0)
    active = np.flatnonzero((fstat > 0) & np.isfinite(fstat))
    if mean is not None:
        centre = root.T @ mean.coef  # Lᵀα, k × G
        spread = root.T @ mean.noise @ root  # covariance of Lᵀα̂ over σ², k × k
    for lo in range(0, active.size, chunk):
        genes = active[lo : lo + chunk]
        f = fstat[genes]
        forms = t_explained / a + (f / r)[:, None, None] * t_fitted  # G × k × k
        if mean is None:
            weights, shift = np.linalg.eigvalsh(forms).T - f / r, None  # k × G
        else:
            values_, axes = np.linalg.eigh(forms)  # G × k, G × k × k
            weights = values_.T - f / r
            along = np.einsum("gkj,kg->jg", axes, centre[:, genes]) ** 2 / mean.variance[genes]
            # less the part of (v_jᵀLᵀα̂)² that α̂'s own noise brings: α̂ only estimates the mean
            shift = np.maximum(along - np.einsum("gkj,kl,glj->jg", axes, spread, axes), 0.0)
        pvals[genes] = chi2_mixture_positive(weights, -f / r, float(n_cells - rank), noncentrality=shift)
    return pvals


@dataclass(frozen=True)
class NullMean:
    """A mean for the null of :func:`form_f_pvalues`: y = Uα + σz per gene.

    ``coef`` (p × G) is α in the coefficients of the stacked bases U,
    ``variance`` (G) σ², and ``noise`` (p × p) the covariance of the estimate
    α̂ over σ² (its own noise, taken out of the non-centralities).
    """

    coef: np.ndarray
    variance: np.ndarray
    noise: np.ndarray


def chi2_mixture_positive(
    weights: np.ndarray, tail: np.ndarray, tail_dof: float, *, noncentrality: np.ndarray | None = None
) -> np.ndarray:
    """P(Σ_j w_j (z_j + √δ_j)² + w₀ χ²_ν > 0) per column, by the Lugannani–Rice saddlepoint (Kuonen 1999).

    ``weights`` (k × G) and ``tail`` (w₀ < 0, G) per gene, ``tail_dof`` ν the
    χ² part's degrees of freedom (0 for none), ``noncentrality`` δ ≥ 0
    (k × G; default 0). The cumulant generating function
    K(t) = Σ_j [−½ log(1 − 2t w_j) + δ_j w_j t / (1 − 2t w_j)] − ½ ν log(1 − 2t w₀)
    is finite for 1/(2 min w) < t < 1/(2 max w); its saddlepoint K'(t) = 0 is
    found by bisection (K' is increasing). A gene with no positive weight gets
    0. NaN where the saddlepoint lies at the origin (the mixture's mean near
    0, p ≈ 0.5), where the formula is singular.
    """
    w = np.asarray(weights, dtype=float)
    w0 = np.asarray(tail, dtype=float)
    dof = float(tail_dof)
    out = np.zeros(w0.shape)
    some_positive = w.max(axis=0) > 0
    if not some_positive.any():
        return out
    delta = np.zeros_like(w) if noncentrality is None else np.asarray(noncentrality, dtype=float)
    w, w0, delta = w[:, some_positive], w0[some_positive], delta[:, some_positive]
    lowest = np.minimum(w.min(axis=0), w0) if dof > 0 else w.min(axis=0)
    hi = 0.5 / w.max(axis=0)
    lo = np.full(hi.shape, -1e12)
    np.divide(0.5, lowest, out=lo, where=lowest < 0)

    def slope(t, columns):  # K'(t) of the genes in ``columns``
        w_, delta_, w0_ = w[:, columns], delta[:, columns], w0[columns]
        damp = 1.0 - 2.0 * t * w_
        return (w_ / damp + delta_ * w_ / damp**2).sum(axis=0) + dof * w0_ / (1.0 - 2.0 * t * w0_)

    bounds = lo.copy(), hi.copy()  # K' is infinite there: never evaluated, never the saddlepoint
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        open_ = (lo < mid) & (mid < hi)  # columns whose bracket has not yet shrunk to adjacent floats
        if not open_.any():
            break
        rising = slope(mid[open_], open_) > 0
        hi[open_] = np.where(rising, mid[open_], hi[open_])
        lo[open_] = np.where(rising, lo[open_], mid[open_])
    t = 0.5 * (lo + hi)
    t = np.where(t <= bounds[0], hi, np.where(t >= bounds[1], lo, t))
    damp = 1.0 - 2.0 * t * w
    cgf = (delta * w * t / damp - 0.5 * np.log1p(-2.0 * t * w)).sum(axis=0) - 0.5 * dof * np.log1p(-2.0 * t * w0)
    curvature = (2.0 * w**2 / damp**2 + 4.0 * delta * w**2 / damp**3).sum(axis=0) \
        + dof * 2.0 * w0**2 / (1.0 - 2.0 * t * w0) ** 2
    root = np.sign(t) * np.sqrt(np.maximum(-2.0 * cgf, 0.0))
    scaled = t * np.sqrt(curvature)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = stats.norm.sf(root) + stats.norm.pdf(root) * (1.0 / scaled - 1.0 / root)
    regular = (np.abs(root) > 1e-3) & np.isfinite(value)
    out[some_positive] = np.where(regular, np.clip(value, 0.0, 1.0), np.nan)
    return out


def sparse_count_pvalues(n_carriers_by_group: np.ndarray, n_cells: np.ndarray, compared: np.ndarray) -> np.ndarray:
    """Per gene (G): where a ``compared`` group expects fewer than :data:`MIN_EXPECTED_CARRIERS` of the
    cells that carry the gene's variation, the p-value of how many it holds; 0 elsewhere.

    Expected at the rate of all the groups' cells (``n_carriers_by_group``: groups × G, ``n_cells``: per
    group). Given the gene's K carriers, a group of n_b of the N cells holds Binomial(K, n_b / N)
    of them were the gene alike everywhere; the two-sided p-value (twice the smaller tail) of each
    group that expects too few, times their number (Bonferroni), capped at 1. The expectation reads
    only the gene's total, so a gene is checked whatever way its carriers fall among the groups.
    """
    counts = np.asarray(n_carriers_by_group, dtype=float)
    n_cells = np.asarray(n_cells, dtype=float)
    total = counts.sum(axis=0)
    share = n_cells / max(n_cells.sum(), 1.0)
    compared = np.asarray(compared)
    shares = share[compared][:, None]
    too_few = shares * total[None, :] < MIN_EXPECTED_CARRIERS  # compared × G
    observed = counts[compared]
    upper = stats.binom.sf(observed - 1, total[None, :], shares)
    lower = stats.binom.cdf(observed, total[None, :], shares)
    two_sided = np.minimum(1.0, 2.0 * np.minimum(upper, lower))
    n_checked = too_few.sum(axis=0)
    smallest = np.where(too_few, two_sided, np.inf).min(axis=0)
    return np.where(n_checked > 0, np.minimum(1.0, smallest * np.maximum(n_checked, 1)), 0.0)


def blank_degenerate(degenerate: np.ndarray, fstat: np.ndarray, pvals: np.ndarray, *more: np.ndarray):
    """F = 0, p = 1 (and 0 for every further statistic, e.g. R²) for the degenerate genes."""
    out = [np.where(degenerate, 0.0, fstat), np.where(degenerate, 1.0, pvals)]
    return (*out, *(np.where(degenerate, 0.0, m) for m in more))


def benjamini_hochberg(pvals: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values)."""
    pvals = np.asarray(pvals, dtype=float)
    if pvals.size == 0:
        return pvals.copy()
    return stats.false_discovery_control(pvals, method="bh")
