"""Euclidean projections onto the feasible sets of FSL (Wang & Li, §IV-C).

Both are exact: the projection onto a simplex by sorting (Duchi, Shalev-Shwartz,
Singer & Chandra 2008, the paper's ref. [50]), vectorised over the rows of a
matrix; the projection onto the capped simplex {Σθ = b, 0 ≤ θ ≤ 1} by the
bisection of Proposition 5, finished in closed form on the bracketed active
set.
"""

from __future__ import annotations

import numpy as np

#: Relative width at which the bisection bracket of Proposition 5 is round-off.
_RESOLUTION = 4 * np.finfo(float).eps


def project_rows_to_simplex(values: np.ndarray, total: float) -> np.ndarray:
    """Project every row of ``values`` onto {w : Σ_j w_j = total, w ≥ 0}.

    Row i's projection is max(v_ij - τ_i, 0) with τ_i the threshold at which the
    row sums to ``total``: sort the row decreasingly, u_1 ≥ u_2 ≥ …; ρ is the
    largest k with u_k - (Σ_{l≤k} u_l - total) / k > 0 and
    τ = (Σ_{l≤ρ} u_l - total) / ρ. O(K log K) per row of length K, all rows at once.
    """
    values = np.asarray(values, dtype=float)
    ordered = -np.sort(-values, axis=1)
    cumulative = np.cumsum(ordered, axis=1) - total
    ranks = np.arange(1, values.shape[1] + 1)
    support = ordered - cumulative / ranks > 0
    rho = values.shape[1] - np.argmax(support[:, ::-1], axis=1)  # last k where the test holds
    tau = cumulative[np.arange(values.shape[0]), rho - 1] / rho
    return np.maximum(values - tau[:, None], 0.0)


def project_to_capped_simplex(values: np.ndarray, total: float) -> np.ndarray:
    """Project ``values`` onto Θ = {θ : Σ_r θ_r = total, 0 ≤ θ_r ≤ 1} (problem 35).

    Proposition 5: θ_r(τ) = min(max(μ_r - τ, 0), 1) with τ such that
    Σ_r θ_r(τ) = total. Σ θ(τ) is continuous and non-increasing in τ, equal to
    M at τ = min μ - 1 and to 0 at τ = max μ, so bisection brackets τ; once
    the bracket is down to round-off, the coordinates strictly between the
    bounds are known and τ is solved for exactly from
    Σ_free (μ_r - τ) + #(θ_r = 1) = total. Requires 0 ≤ total ≤ M.
    """
    values = np.asarray(values, dtype=float)
    low, high = values.min() - 1.0, values.max()
    while high - low > _RESOLUTION * max(1.0, abs(low), abs(high)):
        middle = 0.5 * (low + high)
        if np.clip(values - middle, 0.0, 1.0).sum() > total:
            low = middle
        else:
            high = middle
    middle = 0.5 * (low + high)
    shifted = values - middle
    at_one = shifted >= 1.0
    free = (shifted > 0.0) & ~at_one
    if free.any():
        middle = (values[free].sum() + at_one.sum() - total) / free.sum()
    return np.clip(values - middle, 0.0, 1.0)
