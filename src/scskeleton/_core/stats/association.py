"""Does a gene change anywhere along the tree? One curve per lineage against a constant."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg

from ..validation import check_integer
from .inference import MIN_VARYING_CELLS, benjamini_hochberg, blank_degenerate, f_test
from .splines import adapt_df, check_cells, check_df, explained_form, penalized_fit, spline_basis, sufficient_statistics


@dataclass(frozen=True)
class AssociationResult:
    """Output of :func:`association_test` for G genes and L lineages.

    ``curves`` (G × L × n_grid) is each lineage's curve on ``grid``, NaN
    outside its cells' pseudotime range; ``amplitude`` (G) the largest
    max − min of a gene's curve over any lineage; ``fstat``/``pvals``/``qvals``
    the F test of one curve per lineage against a constant; ``df`` the
    effective degrees of freedom of every curve; ``n_cells`` per lineage (a
    cell on a shared segment counts in each); ``degenerate`` as in
    :class:`TrendResult`.
    """

    grid: np.ndarray
    curves: np.ndarray
    amplitude: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    df: float
    knots: np.ndarray
    n_cells: np.ndarray
    degenerate: np.ndarray


def association_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    membership: np.ndarray,
    *,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    columns: np.ndarray | None = None,
) -> AssociationResult:
    """Test per gene whether it changes anywhere along a tree: one curve per lineage against a constant.

    ``groups`` gives each cell's segment (0…S−1) and ``membership`` (S × L)
    the weight of segment s in lineage l: 1/k_s when s lies on l and k_s
    lineages pass through it, 0 otherwise, so that every cell carries a total
    weight of one (as the trunk in :func:`branch_test`). The alternative fits
    one penalised spline per lineage (root to leaf) with ``df`` effective
    degrees of freedom on a common basis, weighted by W_l; the null is one
    constant over all cells. With Q = Σ_l W_l X S_l Xᵀ W_l the lineage fits
    explain yᵀQy; constants pass through every fit unchanged (the penalty
    leaves them free), so Q1 = 1 and the null's projection P₁ = 11ᵀ/n gives
    A = Q − P₁, tr A = tr Q − 1, tr A² = tr Q² − 1, and R = I − Q. The
    traces follow from UᵀU, U = [W_1X, …, W_LX], built from the segments'
    Gram matrices; the F test is :func:`f_test`'s (Satterthwaite).
    """
    rows, times = check_cells(rows, times)
    df = check_df(df, allow_none=False)
    n_grid = check_integer("n_grid", n_grid, low=2)
    groups = np.asarray(groups, dtype=np.intp)
    membership = np.asarray(membership, dtype=float)
    n_segments, n_lineages = membership.shape
    if groups.shape != rows.shape or groups.min(initial=0) < 0 or groups.max(initial=0) >= n_segments:
        raise ValueError("groups must give every cell a segment index in [0, number of segments).")
    if not np.allclose(membership.sum(axis=1), 1.0):
        raise ValueError("membership must give every segment weights that sum to 1 over the lineages.")
    basis = spline_basis(times, n_knots)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_segments, columns)
    grams = np.einsum("sl,sij->lij", membership, stats_.gram)
    crosses = np.einsum("sl,sjg->ljg", membership, stats_.cross)
    sumsqs = membership.T @ stats_.sumsq
    df = adapt_df(df, list(grams), basis.penalty, "A lineage")
    fits = [penalized_fit(grams[l], crosses[l], sumsqs[l], basis.penalty, df=df, what=f"Lineage {l + 1}")
            for l in range(n_lineages)]
    n_cells = float(rows.size)
    total = stats_.cross.sum(axis=(0, 1))  # Σ y (the B-splines sum to one)
    rss0 = np.maximum(stats_.sumsq.sum(axis=0) - total**2 / n_cells, 0.0)
    # UᵀU: block (l, k) = Σ_s w_sl w_sk G_s
    cross_blocks = np.einsum("sl,sk,sij->likj", membership, membership, stats_.gram)
    m = basis.penalty.shape[0]
    utu = cross_blocks.reshape(n_lineages * m, n_lineages * m)
    forms = [explained_form(grams[l], basis.penalty, float(fits[l].lam[0])) for l in range(n_lineages)]
    product = linalg.block_diag(*forms) @ utu
    q_trace, q_trace_sq = float(np.trace(product)), float(np.sum(product * product.T))
    fstat, pvals = f_test(
        rss0, sum(fit.rss for fit in fits),
        q_trace - 1.0, q_trace_sq - 1.0, n_cells - q_trace, n_cells - 2.0 * q_trace + q_trace_sq,
    )
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals = blank_degenerate(degenerate, fstat, pvals)
    grid = np.linspace(basis.knots[0], basis.knots[-1], n_grid)
    grid_design = basis.design(grid)
    curves = np.full((rss0.size, n_lineages, n_grid), np.nan)
    in_lineage = membership[groups] > 0  # n × L
    for l, fit in enumerate(fits):
        span = times[in_lineage[:, l]]
        inside = (grid >= span.min()) & (grid <= span.max())
        curves[:, l, inside] = (grid_design[inside] @ fit.coef).T
    with np.errstate(invalid="ignore"):
        amplitude = np.nanmax(np.nanmax(curves, axis=2) - np.nanmin(curves, axis=2), axis=1)
    amplitude = np.where(degenerate, 0.0, amplitude)
    return AssociationResult(
        grid=grid, curves=curves, amplitude=amplitude, fstat=fstat, pvals=pvals,
        qvals=benjamini_hochberg(pvals), df=float(fits[0].edf[0]), knots=basis.knots,
        n_cells=in_lineage.sum(axis=0), degenerate=degenerate,
    )
