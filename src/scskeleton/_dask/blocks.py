"""Maps over row chunks of a dask array and reductions of their small results on the driver."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dask
import dask.array as da
import numpy as np
from dask import delayed
from scipy import sparse

from .._core.trees.assign import soft_assignment
from .._core.validation import check_integer


def rows_whole(array: da.Array) -> da.Array:
    """``array`` chunked over rows only: each chunk holds every column of its cells."""
    if array.ndim != 2:
        raise ValueError(f"Expected a 2-D (cells × features) dask array; got shape {array.shape}.")
    return array if len(array.chunks[1]) == 1 else array.rechunk({1: -1})


def rechunk_rows(array: da.Array, chunk_rows: int | None) -> da.Array:
    """``array`` with ``chunk_rows`` cells per chunk (``None``: as stored), every column in each chunk."""
    array = rows_whole(array)
    if chunk_rows is None:
        return array
    chunk_rows = check_integer("chunks", chunk_rows, low=1, role="cells per chunk")
    return array.rechunk({0: chunk_rows})


def tree_sum(parts: Sequence) -> delayed:
    """Delayed sum of ``parts`` (anything with ``+``, or tuples of such, added element-wise) by a
    balanced binary tree: no task adds more than two blocks, so the driver and each worker hold
    a few small results at a time however many chunks there are."""
    parts = list(parts)
    if not parts:
        raise ValueError("Nothing to add: the array has no chunks.")
    while len(parts) > 1:
        paired = [delayed(add_parts)(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        if len(parts) % 2:
            paired.append(parts[-1])
        parts = paired
    return parts[0]


def add_parts(first, second):
    """``first + second``, tuples (of arrays, numbers or tuples) added element by element: how
    :func:`tree_sum` adds two blocks' results."""
    if isinstance(first, tuple):
        return tuple(add_parts(a, b) for a, b in zip(first, second))
    return first + second


def block_sum(function: Callable, arrays: Sequence[da.Array], *args):
    """Σ over row chunks of ``function(*blocks, *args)``, computed: one pass over the cells.

    ``arrays`` must share their row chunks; ``args`` are small driver-side values
    sent with every task.
    """
    blocks = [list(array.to_delayed().ravel()) for array in arrays]
    return tree_sum([delayed(function)(*row, *args) for row in zip(*blocks)]).compute()


def float_block(block) -> np.ndarray:
    """A chunk of the data as a float64 numpy array, as every block function reads it."""
    return np.asarray(block, dtype=float)


def finite_column_sums(array: da.Array) -> np.ndarray:
    """Each column's sum over the cells of ``array``, in one pass, which also checks that every value is
    finite (a ValueError counting those that are not)."""
    column_sum, non_finite = block_sum(_column_sums, [array])
    if non_finite:
        raise ValueError(
            f"The data contain {int(non_finite)} NaN or infinite values; remove or impute them before fitting."
        )
    return column_sum


def _column_sums(block) -> tuple[np.ndarray, int]:
    block = float_block(block)
    return block.sum(axis=0), int(np.count_nonzero(~np.isfinite(block)))


def from_blocks(blocks: Sequence, sizes: Sequence[int], width: int) -> da.Array:
    """A dask array stacking delayed (or persisted) row blocks of ``width`` float columns."""
    return da.concatenate(
        [da.from_delayed(block, shape=(size, width), dtype=float) for block, size in zip(blocks, sizes)], axis=0
    )


def gather_rows(array: da.Array, rows: np.ndarray | None) -> np.ndarray:
    """The rows ``rows`` (sorted positions; ``None``: all) of ``array`` as a float64 numpy array."""
    part = array if rows is None else array[rows]
    return np.asarray(part.compute(), dtype=float)


def lazy_assignment(points: da.Array, centers: np.ndarray, sigma: float) -> da.Array:
    """The N × K soft assignment (eq. 32 / 18) of ``points`` to ``centers``, recomputed chunk by chunk
    whenever it is read: never stored, dense within each chunk."""
    return points.map_blocks(_assignment_chunk, centers, sigma, chunks=(points.chunks[0], (centers.shape[0],)),
                             dtype=float)


def _assignment_chunk(block, centers: np.ndarray, sigma: float) -> np.ndarray:
    matrix = soft_assignment(np.asarray(block, dtype=float), centers, sigma).matrix
    return matrix.toarray() if sparse.issparse(matrix) else matrix


def judged_rows(array: da.Array, limit: int, random_state: int) -> np.ndarray:
    """All rows of ``array`` up to ``limit``, beyond that a uniform sample of ``limit`` drawn from
    ``random_state`` (in order), as float64: the cells that pruning and the gap test judge."""
    rows = None
    if array.shape[0] > limit:
        rows = np.sort(np.random.default_rng(random_state).choice(array.shape[0], size=limit, replace=False))
    return gather_rows(array, rows)


def persist(*collections):
    """``dask.persist``: keep results in (worker) memory for the next pass."""
    return dask.persist(*collections)
