"""Gene tests along pseudotime on a dask expression matrix: one pass over its chunks of cells.

The spline tests (:mod:`scskeleton._core.stats`) need from the expression only
sums over cells (BᵀY and Σ y² by group of cells, and the cells off two reference
values per gene) and, for the branches' registration, at most a few thousand
rows. :class:`ChunkedExpression` gives them both from a dask array: the
in-memory path's block function (:func:`~scskeleton._core.stats.passes.block_statistics`)
runs on each chunk where it lives, on the chunk's cells that the test uses
(picked by position inside the chunk, never by indexing the dask array), and
the small per-chunk sums are added by a balanced tree (:func:`.blocks.tree_sum`).
Chunks holding none of the tested cells are not read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dask.array as da
import numpy as np
from dask import delayed
from scipy import sparse

from .._core.stats.passes import pick_block, row_slices
from .blocks import add_parts, rows_whole, tree_sum


class ChunkedExpression:
    """A dask cells × genes array (dense or scipy-sparse chunks) read by the gene tests chunk by chunk.

    Implements the chunked-matrix interface of
    :func:`scskeleton._core.stats.passes.is_chunked`: ``shape``,
    ``take(rows, columns)`` and ``row_sum(function, rows, per_row, columns, *args)``.
    Chunks split across genes are merged (each task sees all the genes it
    needs of its cells), after keeping only the genes ``columns``, so that
    only their chunks are read; large chunks are summarised in pieces of at
    most :data:`~scskeleton._core.stats.passes.CHUNK_ELEMENTS` values, as in memory.
    """

    def __init__(self, array: da.Array):
        if any(np.isnan(size) for size in array.chunks[0]):
            raise ValueError("The dask expression matrix has chunks of unknown size (e.g. after a boolean "
                             "selection); call .compute_chunk_sizes() on it first.")
        self.array = array
        self.shape = tuple(int(size) for size in array.shape)
        self.dtype = array.dtype
        self._starts = np.concatenate([[0], np.cumsum(array.chunks[0])]).astype(np.intp)

    def _blocks(self, columns: np.ndarray | None):
        """The delayed row chunks, each with every gene needed of its cells, and the genes left to pick in them.

        Chunks split across genes are merged after keeping only ``columns``, so only their chunks are read."""
        if columns is not None and len(self.array.chunks[1]) > 1:
            return rows_whole(self.array[:, np.asarray(columns, dtype=np.intp)]).to_delayed().ravel(), None
        return rows_whole(self.array).to_delayed().ravel(), columns

    def _cells_by_chunk(self, rows: np.ndarray, blocks):
        """(chunk's delayed block, positions in ``rows``, the cells' rows inside the chunk) for each chunk
        holding some of ``rows`` (ascending); the others are never read."""
        rows = np.asarray(rows, dtype=np.intp)
        if rows.size and (rows[0] < 0 or rows[-1] >= self.shape[0] or np.any(np.diff(rows) <= 0)):
            raise ValueError("rows must be ascending cell indices within the matrix.")
        bounds = np.searchsorted(rows, self._starts)
        for index, block in enumerate(blocks):
            lo, hi = int(bounds[index]), int(bounds[index + 1])
            if hi > lo:
                yield block, slice(lo, hi), _local_rows(rows[lo:hi] - self._starts[index])

    def take(self, rows: np.ndarray, columns: np.ndarray | None):
        """``array[rows][:, columns]`` (``columns=None``: every gene) in memory: dense or CSR as the
        chunks are, in their dtype. Reads only the chunks holding ``rows``."""
        rows = np.asarray(rows, dtype=np.intp)
        distinct, inverse = np.unique(rows, return_inverse=True)
        blocks, genes = self._blocks(columns)
        cells = self._cells_by_chunk(distinct, blocks)
        parts = [delayed(_take_block)(block, local, genes) for block, _, local in cells]
        parts = delayed(list)(parts).compute()
        if any(sparse.issparse(part) for part in parts):
            picked = sparse.vstack([sparse.csr_matrix(part) for part in parts], format="csr")
        else:
            picked = np.concatenate(parts, axis=0)
        in_order = distinct.size == rows.size and np.array_equal(distinct, rows)
        return picked if in_order else picked[inverse.ravel()]

    def row_sum(self, function: Callable, rows: np.ndarray, per_row: Sequence[np.ndarray],
                columns: np.ndarray | None, *args):
        """Σ over the chunks holding some of ``rows`` (ascending) of ``function(block, *parts, *args)``.

        ``block`` is the chunk's cells among ``rows``, genes ``columns``, as
        float64 (:func:`~scskeleton._core.stats.passes.pick_block`); ``parts``
        the same cells' slices of each ``per_row`` array (aligned with
        ``rows``). ``function`` returns arrays (or a tuple of arrays) that add
        over cells; only they travel back, summed pairwise.
        """
        blocks, genes = self._blocks(columns)
        # values every task uses are sent once (one key each), not with every task
        genes, *shared = [delayed(value, pure=True) if isinstance(value, np.ndarray) else value
                          for value in (genes, *args)]
        sums = [
            delayed(_chunk_sum)(block, local, [np.asarray(values)[cells] for values in per_row], function, genes,
                                *shared)
            for block, cells, local in self._cells_by_chunk(rows, blocks)
        ]
        if not sums:
            raise ValueError("No cells to sum over.")
        return tree_sum(sums).compute()


def _local_rows(local: np.ndarray):
    """Rows inside a chunk: a slice when they are consecutive (no copy of the chunk to pick them)."""
    if local[-1] - local[0] + 1 == local.size:
        return slice(int(local[0]), int(local[-1]) + 1)
    return local


def _take_block(block, local, columns):
    if sparse.issparse(block) and block.format != "csr":
        block = sparse.csr_matrix(block)
    picked = block[local]
    return picked if columns is None else picked[:, columns]


def _chunk_sum(block, local, parts: list, function: Callable, columns, *args):
    """``function`` over the chunk's picked cells, in pieces of at most CHUNK_ELEMENTS values, summed."""
    if sparse.issparse(block):
        block = sparse.csr_matrix(block) if block.format != "csr" else block
    elif not isinstance(block, np.ndarray):
        block = np.asarray(block)
    positions = np.arange(block.shape[0])[local]
    if sparse.issparse(block):
        per_row = max(1, block.nnz // max(block.shape[0], 1))
    else:
        per_row = block.shape[1] if columns is None else len(columns)
    total = None
    for piece in row_slices(positions.size, per_row):
        rows = positions[piece]
        if rows.size and rows[-1] - rows[0] + 1 == rows.size:
            rows = slice(int(rows[0]), int(rows[-1]) + 1)
        result = function(pick_block(block, rows, columns), *(part[piece] for part in parts), *args)
        total = result if total is None else add_parts(total, result)
    return total
