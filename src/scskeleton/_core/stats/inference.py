"""What the tests share: the F test of two linear smoothers, degenerate genes, FDR.

lines) is supported by any two distinct times.

Tests. Both compare two linear smoothers by F = (yᵀAy / tr A) / (yᵀRy / tr R),
where yᵀAy is the drop in RSS from the smaller to the larger model and yᵀRy the
larger model's RSS, referred to F(ν₁, ν₂) with the Satterthwaite degrees of
freedom ν = (tr ·)² / tr(·²) (Hastie & Tibshirani 1990, §3.9; exact for
unpenalised regression splines). The traces are exact, computed in the
m-dimensional basis, so the p-values hold their nominal level on null genes
(tested), unlike the common approximation ν₁ = edf − 1:

* trend: the spline against a constant. Here the explained and residual
  forms share the smoother's eigenvectors, so the null distribution of F is
  that of a weighted sum of χ² variables, whose tail
  :func:`smoother_f_pvalues` evaluates by a saddlepoint approximation instead
  (the two-moment reference let 1.5× too many null genes below p = 0.001 at
  df = 3);
* branches (in the spirit of Monocle's BEAM): one spline per branch after a
  fork, each fitted to the trunk (before the fork) and its branch, against
  one shared spline fitted to all those cells.

p-values are corrected by Benjamini–Hochberg.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

#: A gene whose value differs from its most common one in fewer tested cells than this
#: carries no trend to test: it gets F = 0, p = 1 and R² = 0 (a handful of outlying values,
#: or rounding noise on a constant, could otherwise give any p-value at all).
MIN_VARYING_CELLS = 5


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
    constant's direction, one of the h = 1, drops out of both). P(Q > 0) is
    the Lugannani–Rice saddlepoint approximation for a weighted sum of χ²
    variables (Kuonen 1999), accurate in the far tail where the two-moment
    Satterthwaite reference of :func:`f_test` is not (it let 40 % too many
    null genes below p = 0.001 at df = 3). Genes with F = 0 get p = 1, F = ∞ p = 0; where
    the saddlepoint lies at the origin (F at its null mean, p ≈ 0.5) the
    formula is singular and the Satterthwaite value is kept.
    """
    fstat = np.asarray(fstat, dtype=float)
    hat = np.sort(np.clip(np.asarray(hat, dtype=float), 0.0, 1.0), axis=0)[:-1]  # drop one h = 1: the constant
    n_basis = hat.shape[0] + 1
    gain = 1.0 - (1.0 - hat) ** 2
    residual_part = (1.0 - hat) ** 2
    a = gain.sum(axis=0)
    r = residual_part.sum(axis=0) + (n_cells - n_basis)
    weights = gain / a - fstat * residual_part / r  # (m − 1) × G
    tail = -fstat / r  # weight of the χ²_{N−m} part
    pvals = np.where(np.isposinf(fstat), 0.0, 1.0)  # a perfect fit (no residual) against F = 0
    active = (fstat > 0) & np.isfinite(fstat)
    if not active.any():
        return pvals
    w, w0, dof = weights[:, active], tail[active], float(n_cells - n_basis)
    upper = 0.5 / w.max(axis=0)  # K is finite for 1 − 2tλ > 0 for every weight λ
    lower = 0.5 / np.minimum(w.min(axis=0), w0)

    def slope(t):  # K'(t)
        return (w / (1.0 - 2.0 * t * w)).sum(axis=0) + dof * w0 / (1.0 - 2.0 * t * w0)

    lo, hi = lower.copy(), upper.copy()
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        rising = slope(mid) > 0
        hi = np.where(rising, mid, hi)
        lo = np.where(rising, lo, mid)
    t = 0.5 * (lo + hi)
    cgf = -0.5 * (np.log1p(-2.0 * t * w).sum(axis=0) + dof * np.log1p(-2.0 * t * w0))
    curvature = (2.0 * w**2 / (1.0 - 2.0 * t * w) ** 2).sum(axis=0) + dof * 2.0 * w0**2 / (1.0 - 2.0 * t * w0) ** 2
    root = np.sign(t) * np.sqrt(np.maximum(-2.0 * cgf, 0.0))
    scaled = t * np.sqrt(curvature)
    with np.errstate(divide="ignore", invalid="ignore"):
        value = stats.norm.sf(root) + stats.norm.pdf(root) * (1.0 / scaled - 1.0 / root)
    regular = (np.abs(root) > 1e-3) & np.isfinite(value)
    pvals[active] = np.where(regular, np.clip(value, 0.0, 1.0), np.nan)
    return pvals


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
