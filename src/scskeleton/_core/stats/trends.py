"""One gene trend per path: a penalised spline of pseudotime against a constant (:mod:`.splines`, :mod:`.inference`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..validation import check_integer
from .inference import MIN_VARYING_CELLS, benjamini_hochberg, blank_degenerate, f_test, smoother_f_pvalues
from .passes import sufficient_statistics
from .splines import (
    adapt_df,
    check_cells,
    check_df,
    penalized_fit,
    periodic_spline_basis,
    spline_basis,
)


@dataclass(frozen=True)
class TrendResult:
    """Output of :func:`trend_test` for G genes.

    ``grid`` (n_grid) is the common pseudotime grid and ``curves`` (G × n_grid)
    the fitted trends on it; ``r2`` the fraction of variance explained,
    ``fstat``/``pvals``/``qvals`` the F test against a constant and its
    Benjamini–Hochberg correction; ``edf``, ``lam`` per gene; ``knots`` the
    spline's distinct knots; ``n_cells`` the cells fitted; ``degenerate``
    (G) the genes with fewer than :data:`MIN_VARYING_CELLS` cells off their
    most common value, reported with F = 0, p = 1, R² = 0.
    """

    grid: np.ndarray
    curves: np.ndarray
    r2: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    edf: np.ndarray
    lam: np.ndarray
    knots: np.ndarray
    n_cells: int
    degenerate: np.ndarray


def trend_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    *,
    n_knots: int = 10,
    df: float | None = 6.0,
    n_grid: int = 100,
    columns: np.ndarray | None = None,
    periodic: bool = False,
) -> TrendResult:
    """Fit each gene's expression against pseudotime and test it against a constant.

    Parameters
    ----------
    matrix
        Cells × genes expression, dense or scipy sparse (never densified).
    rows
        The cells on the path (row indices of ``matrix``).
    times
        Their pseudotime (or position along the path).
    n_knots
        Knots at quantiles of ``times``, boundaries included; m = n_knots + 2
        cubic B-splines.
    df
        Effective degrees of freedom of every curve; ``None``: λ per gene by GCV.
    n_grid
        Points of the common grid the curves are evaluated on.
    columns
        Genes to fit (column indices); default all.
    periodic
        ``times`` are a phase in [0, 1) round a loop (``tl.phase``): cyclic cubic
        B-splines (:func:`~scskeleton._core.stats.splines.periodic_spline_basis`),
        whose curves return where they started and whose penalty leaves only the
        constant free, so the F test against a constant is the same; ``n_knots``
        knots at quantiles of the phase, as many B-splines; the grid covers one turn.
    """
    rows, times = check_cells(rows, times)
    df = check_df(df, allow_none=True)
    n_grid = check_integer("n_grid", n_grid, low=2)
    n_cells = rows.size
    if df is not None and n_cells <= df + 1:
        raise ValueError(f"The path holds {n_cells} cells; df={df:g} needs more than {df + 1:g}. Lower df.")
    basis = periodic_spline_basis(times, n_knots) if periodic else spline_basis(times, n_knots)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), np.zeros(n_cells, dtype=np.intp), 1, columns)
    if df is not None:
        df = adapt_df(df, [stats_.gram[0]], basis.penalty, "The path")
    fit = penalized_fit(stats_.gram[0], stats_.cross[0], stats_.sumsq[0], basis.penalty, df=df)
    total = stats_.cross[0].sum(axis=0)  # Σ y, since the B-splines sum to one
    rss0 = np.maximum(stats_.sumsq[0] - total**2 / n_cells, 0.0)
    gain, gain_sq, loss = fit.moments()
    # the constant (in the fit's unpenalised null space, a = 1) is what the null model explains already
    fstat, approximate = f_test(rss0, fit.rss, gain - 1.0, gain_sq - 1.0, n_cells - gain, n_cells - loss)
    # the exact null of this F (one smoother against a constant); Satterthwaite's where it is singular
    exact = smoother_f_pvalues(fstat, fit.hat, n_cells)
    pvals = np.where(np.isnan(exact), approximate, exact)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(rss0 > 0, 1.0 - fit.rss / rss0, 0.0)
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals, r2 = blank_degenerate(degenerate, fstat, pvals, r2)
    grid = np.linspace(basis.knots[0], basis.knots[-1], n_grid, endpoint=not periodic)
    return TrendResult(
        grid=grid,
        curves=(basis.design(grid) @ fit.coef).T,
        r2=np.clip(r2, 0.0, 1.0),
        fstat=fstat,
        pvals=pvals,
        qvals=benjamini_hochberg(pvals),
        edf=fit.edf,
        lam=fit.lam,
        knots=basis.knots,
        n_cells=n_cells,
        degenerate=degenerate,
    )
