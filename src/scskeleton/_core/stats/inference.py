"""What the tests share: the F test of two linear smoothers, degenerate genes, FDR.

lines) is supported by any two distinct times.

Tests. Both compare two linear smoothers by F = (yᵀAy / tr A) / (yᵀRy / tr R),
where yᵀAy is the drop in RSS from the smaller to the larger model and yᵀRy the
larger model's RSS, referred to F(ν₁, ν₂) with the Satterthwaite degrees of
freedom ν = (tr ·)² / tr(·²) (Hastie & Tibshirani 1990, §3.9; exact for
unpenalised regression splines). The traces are exact, computed in the
m-dimensional basis, so the p-values hold their nominal level on null genes
(tested), unlike the common approximation ν₁ = edf − 1:

* trend: the spline against a constant;
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
