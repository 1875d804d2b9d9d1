"""The expression a gene test reads, and the one way every test runs over it.

Every gene test reads one cells × genes matrix (``adata.X``, a layer or ``adata.raw.X``; a dask
array chunk by chunk, never loaded) for the genes asked for, and hands it to a solver of
``_core.stats`` with the cells it fits. :func:`read_expression` resolves the matrix and the genes,
:func:`run_test` warns on raw counts and runs the solver with the threads the matrix wants, and
:data:`MODEL` is the paragraph the tests' docstrings share on how a gene is fitted.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import expression_name, gene_columns, get_expression
from ..._anndata.schema import MAIN_MATRIX
from ..._anndata.threads import chunked_solver_threads
from ..._core.stats import passes
from ..._core.validation import COUNT_CHECK_CELLS, looks_like_counts
from ..._dask import is_dask, require_dask

#: Substituted for ``{model}`` in the docstrings of the tests that fit this model.
MODEL = """
    Each gene's expression y is fitted against pseudotime t by a penalised
    regression spline, f = argmin Σ_i (y_i − f(t_i))² + λ ∫ f''(t)² dt, on
    cubic B-splines with ``n_knots`` knots at quantiles of t (the criterion
    of :func:`scipy.interpolate.make_smoothing_spline`). The RPG paper fits
    a quadratic along each path from normal tissue to a tumour subtype
    (§6.5, Fig. 8c–d); the spline has the same role with a tunable
    flexibility: ``df`` effective degrees of freedom (the trace of the hat
    matrix). All genes are fitted by one multi-column solve from their
    sufficient statistics, and sparse expression is read in chunks of cells,
    never densified. A dask ``adata.X`` or layer is read chunk by chunk, in one
    pass over the cells, and never loaded. See the documentation's background
    page on gene trends.
"""


@dataclass(frozen=True)
class Expression:
    """The matrix a gene test reads and the genes it tests."""

    matrix: object  # cells × genes, not copied; a dask array wrapped for the chunked pass
    source: dict  # ``layer`` and ``use_raw``, for ``params``
    columns: np.ndarray | None  # the genes tested, as the solvers take them: None for all
    tested: np.ndarray  # the genes tested, always as column indices: the rows of the results


def read_expression(
    adata: AnnData, genes, *, layer: str | None, use_raw: bool, gene_symbols: str | None
) -> Expression:
    """The cells × genes matrix to fit and the columns of ``genes`` in it
    (:func:`~scskeleton._anndata.inputs.gene_columns`).

    ``source`` holds where the matrix came from, for ``params``: ``layer`` (:data:`MAIN_MATRIX` for
    ``X``) and ``use_raw``, which the plots read back to draw what was fitted. A dask array is
    wrapped for the chunked pass (:class:`scskeleton._dask.stats.ChunkedExpression`) and never loaded.
    """
    matrix, _ = get_expression(adata, layer=layer, use_raw=use_raw, lazy=True)
    if is_dask(matrix):
        require_dask("This test")
        from ..._dask.stats import ChunkedExpression

        matrix = ChunkedExpression(matrix)
    source = {"layer": MAIN_MATRIX if layer is None else layer, "use_raw": bool(use_raw)}
    columns = gene_columns(adata, genes, gene_symbols=gene_symbols)
    tested = np.arange(adata.n_vars) if columns is None else columns
    return Expression(matrix=matrix, source=source, columns=columns, tested=tested)


def run_test(expression: Expression, rows: np.ndarray, test: Callable, *args, **kwargs):
    """``test(matrix, rows, *args, columns=..., **kwargs)``: a solver of ``_core.stats`` on the genes
    of ``expression`` and the cells ``rows``, after a warning where the matrix looks like raw counts."""
    _warn_if_counts(expression.matrix, expression.source, rows)
    with _reading_threads(expression.matrix):
        return test(expression.matrix, rows, *args, columns=expression.columns, **kwargs)


def _warn_if_counts(matrix, source: dict, rows: np.ndarray) -> None:
    """Raw counts differ between cells by their library sizes, which the Gaussian tests would read as
    expression: with one fate sequenced twice as deep, 89 % of genes at a constant share of every
    library had an association p below 0.05 on counts (37 % log-normalised, 6 % on Pearson
    residuals). Read from the first of the tested cells (``rows``), so that a dask
    matrix is read only where the test reads it."""
    head = passes.take_rows(matrix, np.sort(rows)[:COUNT_CHECK_CELLS], None)
    if looks_like_counts(head):
        layer = None if source["layer"] == MAIN_MATRIX else source["layer"]
        logg.warning(
            f"{expression_name(layer, source['use_raw'])} holds non-negative integers and looks like raw counts, "
            "so the tests, which fit Gaussian noise around each trend, read the cells' different library sizes as "
            "expression. Test Pearson residuals of the counts (sc.experimental.pp.normalize_pearson_residuals) or "
            "log-normalised values (sc.pp.normalize_total, then sc.pp.log1p) instead."
        )


def _reading_threads(matrix) -> AbstractContextManager:
    """One BLAS thread per task while a dask matrix is read: dask runs its chunks in parallel already
    (:func:`~scskeleton._anndata.threads.chunked_solver_threads`). In-memory input keeps the caller's threads."""
    return chunked_solver_threads() if passes.is_chunked(matrix) else nullcontext()
