"""The one pass over the cells that every spline fit reads: per-group sufficient statistics of the expression.

Everything a penalised spline of pseudotime needs from the expression is in its
sufficient statistics (:mod:`~.splines`): per group of cells the Gram matrix BᵀB,
the cross products BᵀY and Σ y², plus, per gene, the counts the degenerate-gene
check and the count test read. They are sums over cells, so sparse expression is
never densified: cells are visited in row chunks (:func:`sufficient_statistics`),
each summarised by :func:`block_statistics`; a chunked matrix (a dask array, through
:class:`scskeleton._dask.stats.ChunkedExpression`) maps that same function over its
chunks and adds the small results, in one pass over the cells.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

#: Elements of one dense chunk of expression (or non-zeros of a sparse one) held at a time.
CHUNK_ELEMENTS = 1 << 23
#: Evenly spaced cells whose values place each gene's bulk (:func:`sufficient_statistics`).
BULK_SAMPLE = 64
#: A cell lies outside its gene's bulk when it is further from the bulk's median than this many
#: times the bulk's spread (the median of the sampled cells' distances from that median, which
#: stays the bulk's while fewer than half of the cells lie outside it): 3.4 sd of a Gaussian.
BULK_WIDTH = 5.0
#: The cells outside a gene's bulk carry its variation when they hold at least this share of its
#: squared deviations from the bulk's median. Sparse genes hold 0.99 or more there as Pearson
#: residuals or ``sc.pp.regress_out`` output (2,000 cells, 20-400 cells with a count); genes whose
#: bulk varies too, and may differ between branches there, less (krumsiek11's SCL 0.48, Gata1 0.75:
#: at half, the count test gave SCL p = 1 beside F = 10).
CARRIED_SHARE = 0.9


@dataclass(frozen=True)
class SufficientStatistics:
    """Per group g of cells: Gram BᵀB (g × m × m), cross products BᵀY (g × m × G),
    Σ y² (g × G) and the number of cells (g); per gene, ``n_varying`` (G): how
    many cells differ from the gene's most common value, at most (the smaller
    count against the values of two reference cells), and ``n_carriers_by_group``
    (g × G; only where asked for, else ``None``): per group, the cells that
    carry the gene's variation; ``local_variance`` (G; only where ``bins``
    were given): each gene's variance within bins of cells that follow each
    other in time (:func:`local_variance`).

    The carriers are the varying cells where the gene's most common value is
    shared by at least half of the cells (log-normalised counts, scaled or
    not: the unexpressed cells share one value). Where no value is (Pearson
    residuals, ``sc.pp.regress_out``: each unexpressed cell has its own value)
    and the cells outside the gene's bulk (:data:`BULK_WIDTH`) hold nearly all
    of its squared deviations from the bulk's median (:data:`CARRIED_SHARE`), they are those
    cells: for a gene of a few counts, the cells that have any. Otherwise
    (Gaussian-like genes) every cell.
    """

    gram: np.ndarray
    cross: np.ndarray
    sumsq: np.ndarray
    n_cells: np.ndarray
    n_varying: np.ndarray
    n_carriers_by_group: np.ndarray | None
    local_variance: np.ndarray | None = None


def sufficient_statistics(
    matrix,
    rows: np.ndarray,
    design: np.ndarray,
    groups: np.ndarray,
    n_groups: int,
    columns: np.ndarray | None = None,
    *,
    count_carriers: bool = False,
    bins: np.ndarray | None = None,
) -> SufficientStatistics:
    """What every spline fit needs from the expression, in one pass over the cells.

    ``matrix`` is cells × genes, a dense array, any scipy sparse matrix or a
    chunked matrix (:func:`is_chunked`); ``rows`` are the cells to use,
    ``design`` their basis rows, ``groups`` their group label in [0, n_groups);
    ``columns`` selects genes (default: all). Dense and CSR input is read in
    chunks of rows, CSC in blocks of genes, a chunked matrix chunk by chunk, so
    at most one chunk is ever held as float64 and sparse input stays sparse.
    Each chunk is summarised by :func:`block_statistics` and the sums are added.
    ``count_carriers`` also counts the cells that carry each gene's variation
    (what the count test of the branch and fork tests reads); ``bins`` (one
    label in [0, n_bins) per row, from :func:`time_bins`) also sums each gene
    per bin, for :attr:`SufficientStatistics.local_variance`, in the same pass.
    """
    rows = np.asarray(rows, dtype=np.intp)
    n_genes = matrix.shape[1] if columns is None else len(columns)
    if n_genes == 0:
        raise ValueError("No genes to fit.")
    order = np.argsort(rows, kind="stable")  # ascending rows read CSR and dense input in memory order
    rows, design, groups = rows[order], np.asarray(design, dtype=float)[order], np.asarray(groups)[order]
    binned = bins is not None
    bins = np.asarray(bins, dtype=np.intp)[order] if binned else np.zeros(rows.size, dtype=np.intp)
    n_bins = int(bins.max(initial=0)) + 1 if binned else 0  # no bins: no per-bin sums
    n_basis = design.shape[1]
    indicator = np.eye(n_groups)[groups]  # n × g
    if sparse.issparse(matrix) and matrix.format not in ("csr", "csc"):
        matrix = sparse.csr_matrix(matrix)  # once, for the reference rows and the chunks alike
    if count_carriers:
        sample = rows[np.linspace(0, rows.size - 1, BULK_SAMPLE).astype(np.intp)]
        bulk = _bulk(_reference_values(matrix, sample, columns))
    else:  # NaN widths: no cell is compared with a bulk
        bulk = np.vstack([np.zeros(n_genes), np.full(n_genes, np.nan)])
    references = np.vstack([_reference_values(matrix, rows[[0, rows.size // 2]], columns), bulk])  # 4 × G
    if is_chunked(matrix):  # each chunk's cells summarised where the chunk lives; only the sums come back
        cross, sumsq, differing, outside, deviations, bin_sums = matrix.row_sum(
            grouped_block_statistics, rows, (design, groups, bins), columns, n_groups, references, n_bins,
        )
        differing, outside = np.asarray(differing, dtype=float), np.asarray(outside, dtype=float)
    else:
        expanded = group_design(design, indicator)
        bin_indicator = _one_hot(bins, n_bins)
        cross = np.zeros((n_genes, n_groups * n_basis))
        sumsq = np.zeros((n_genes, n_groups))
        differing = np.zeros((2, n_groups, n_genes))
        outside = np.zeros((n_groups, n_genes))
        deviations = np.zeros((2, n_genes))
        bin_sums = np.zeros((n_genes, bin_indicator.shape[1]))
        for cells, genes, chunk in _chunks(matrix, rows, columns):
            part = block_statistics(chunk, expanded[cells], indicator[cells], references[:, genes],
                                    bin_indicator[cells])
            cross[genes] += part[0]
            sumsq[genes] += part[1]
            differing[:, :, genes] += part[2]
            outside[:, genes] += part[3]
            deviations[:, genes] += part[4]
            bin_sums[genes] += part[5]
    gram = np.einsum("ng,ni,nj->gij", indicator, design, design)
    # the reference whose value more cells share is the gene's most common value, or nearer to it
    closer = np.argmin(differing.sum(axis=1), axis=0)
    by_group = np.take_along_axis(differing, closer[None, None, :], axis=0)[0]
    n_varying = by_group.sum(axis=0)
    carriers = None
    if count_carriers:  # which cells carry each gene's variation (SufficientStatistics)
        # a gene whose sample showed a shared value (NaN width) keeps its varying cells
        use_bulk = (n_varying > 0.5 * rows.size) & np.isfinite(references[3])
        carried_outside = deviations[1] >= CARRIED_SHARE * deviations[0]
        everyone = np.broadcast_to(indicator.sum(axis=0)[:, None], outside.shape)
        carriers = np.where(use_bulk, np.where(carried_outside, outside, everyone), by_group)
    return SufficientStatistics(
        gram=gram,
        cross=cross.reshape(n_genes, n_groups, n_basis).transpose(1, 2, 0).copy(),
        sumsq=sumsq.T.copy(),
        n_cells=indicator.sum(axis=0),
        n_varying=n_varying,
        n_carriers_by_group=carriers,
        local_variance=local_variance(sumsq.sum(axis=1), np.asarray(bin_sums), np.bincount(bins)) if binned else None,
    )


#: :func:`time_bins` gives each bin at least this many cells ...
MIN_BIN_CELLS = 5
#: ... and makes at most this many bins (their sums per gene are held for the whole pass).
MAX_TIME_BINS = 500


def time_bins(times: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each cell's bin (labels 0…n_bins − 1): each group's cells in time order, cut into runs of consecutive
    cells, :data:`MIN_BIN_CELLS` or more a run and at most :data:`MAX_TIME_BINS` runs over all groups."""
    times, groups = np.asarray(times, dtype=float), np.asarray(groups)
    size = max(MIN_BIN_CELLS, int(np.ceil(times.size / MAX_TIME_BINS)))
    bins = np.empty(times.size, dtype=np.intp)
    used = 0
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        n_runs = max(1, members.size // size)  # the last run takes the remainder
        bins[members[np.argsort(times[members], kind="stable")]] = used + np.minimum(
            np.arange(members.size) // size, n_runs - 1)
        used += n_runs
    return bins


def local_variance(sumsq: np.ndarray, bin_sums: np.ndarray, bin_counts: np.ndarray) -> np.ndarray:
    """Each gene's variance around its own mean in each bin of :func:`time_bins` (G), pooled over the bins:
    (Σ y² − Σ_bins S_b² / n_b) / (n − n_bins), from Σ y² (G), the per-bin sums S (G × n_bins) and counts.

    A smooth trend hardly moves within a run of cells that follow each other in time, so this is the noise
    alone, where a spline's residual also holds what its few degrees of freedom cannot follow (a sharp
    switch or bump); it is a piecewise-constant fit of very many pieces, as Rice's difference estimator
    (Rice 1984, Ann. Stat. 12:1215) is a pairwise one."""
    between = (bin_sums**2 / np.maximum(bin_counts, 1)[None, :]).sum(axis=1)
    return np.maximum(sumsq - between, 0.0) / max(int(bin_counts.sum()) - bin_counts.size, 1)


def _one_hot(labels: np.ndarray, n_labels: int) -> sparse.csr_matrix:
    """n × n_labels one-hot rows (sparse; no columns for ``n_labels=0``)."""
    if n_labels == 0:
        return sparse.csr_matrix((labels.size, 0))
    return sparse.csr_matrix((np.ones(labels.size), (np.arange(labels.size), labels)), shape=(labels.size, n_labels))



def is_chunked(matrix) -> bool:
    """Whether ``matrix`` is a chunked cells × genes matrix rather than an in-memory one.

    A chunked matrix has a ``shape``, ``take(rows, columns)`` (a few rows, as
    ``matrix[rows][:, columns]`` would give them) and ``row_sum(function, rows,
    per_row, columns, *args)``: Σ over its chunks of ``function(block, *parts,
    *args)``, where ``block`` holds the chunk's cells among ``rows`` (ascending)
    and the genes ``columns``, as float64 (:func:`pick_block`), and ``parts`` the
    same cells' slices of the ``per_row`` arrays (aligned with ``rows``).
    :class:`scskeleton._dask.stats.ChunkedExpression` wraps a dask array so.
    """
    return hasattr(matrix, "row_sum") and hasattr(matrix, "take")


def take_rows(matrix, rows: np.ndarray, columns: np.ndarray | None):
    """``matrix[rows][:, columns]`` (``columns=None``: every gene), in memory or from a chunked matrix."""
    if is_chunked(matrix):
        return matrix.take(rows, columns)
    picked = matrix[rows]
    return picked if columns is None else picked[:, columns]


def group_design(design: np.ndarray, indicator: np.ndarray) -> np.ndarray:
    """n × (g·m): each cell's basis row placed in the block of its group (``indicator``: n × g, one-hot)."""
    n_cells, n_groups = indicator.shape
    return (indicator[:, :, None] * design[:, None, :]).reshape(n_cells, n_groups * design.shape[1])


def block_statistics(chunk, expanded: np.ndarray, indicator: np.ndarray, references: np.ndarray,
                     bin_indicator: sparse.csr_matrix):
    """One chunk's share of :class:`SufficientStatistics`, six sums that add over chunks of cells.

    ``chunk`` is cells × genes as float64 (dense or sparse), ``expanded`` its
    cells' :func:`group_design` rows, ``indicator`` their groups (one-hot) and
    ``references`` (4 × genes): two values counted against, then each gene's
    bulk median and half-width (:func:`_bulk`). Returns BᵀY by group, Σ y² by
    group, the cells off each of the two values by group (2 × g × genes), the
    cells outside the bulk by group (g × genes) and Σ (y − median)² over all
    cells and over those outside the bulk (2 × genes); then each gene's sum per bin of ``bin_indicator``
    (the cells' one-hot :func:`time_bins`; genes × bins, no column without bins).
    """
    if sparse.issparse(chunk):
        data = chunk.data
        squared = chunk.multiply(chunk)
    else:
        data = chunk
        squared = chunk * chunk
    if not np.isfinite(data).all():
        raise ValueError(
            "The expression values contain NaN or infinite values; remove or impute them first (Pearson "
            "residuals are NaN for a gene with no count: sc.pp.filter_genes(adata, min_counts=1) before them)."
        )
    if bin_indicator.shape[1] == 0:
        binned = np.zeros((chunk.shape[1], 0))
    elif sparse.issparse(chunk):  # genes × bins from the chunk's transpose, which costs no conversion of the chunk
        binned = (chunk.T @ sparse.csc_matrix(bin_indicator)).toarray()
    else:
        binned = np.asarray(bin_indicator.T @ chunk).T
    return (
        np.asarray(chunk.T @ expanded),
        np.asarray(squared.T @ indicator),
        *_count_cells(chunk, references, indicator),
        binned,
    )


def grouped_block_statistics(chunk, design: np.ndarray, groups: np.ndarray, bins: np.ndarray, n_groups: int,
                             references: np.ndarray, n_bins: int):
    """:func:`block_statistics` from the chunk's cells' basis rows, group labels and time bins (``n_bins=0``:
    none), what a chunked pass sends."""
    indicator = np.eye(n_groups)[groups]
    return block_statistics(chunk, group_design(design, indicator), indicator, references, _one_hot(bins, n_bins))


def _reference_values(matrix, cells: np.ndarray, columns: np.ndarray | None) -> np.ndarray:
    """The values of a few cells (rows of ``matrix``), len(cells) × G, as float64."""
    picked = take_rows(matrix, cells, columns)
    return np.asarray(picked.toarray() if sparse.issparse(picked) else picked, dtype=np.float64)


def _bulk(sample: np.ndarray) -> np.ndarray:
    """Each gene's bulk from a sample of cells (cells × G): its median and half-width (2 × G), the width
    :data:`BULK_WIDTH` times the median of the sample's distances from the median. A gene that one
    value holds half the sample of (the median, then) has that value shared instead: its width is
    NaN and no cell is compared with its bulk."""
    median = np.median(sample, axis=0)
    width = BULK_WIDTH * np.median(np.abs(sample - median), axis=0)
    shared = 2 * (sample == median).sum(axis=0) >= sample.shape[0]
    return np.vstack([median, np.where(shared, np.nan, width)])


def _count_cells(chunk, references: np.ndarray, indicator: np.ndarray):
    """The counts and sums of :func:`block_statistics` that compare each cell of ``chunk`` with ``references``:
    cells off each of ``references[:2]`` (2 × groups × genes), cells outside the bulk ``references[2:]``
    (groups × genes), Σ (y − median)² over all cells and over those outside (2 × genes)."""
    n_cols = chunk.shape[1]
    n_groups = indicator.shape[1]
    group_of = np.argmax(indicator, axis=1)
    per_group = np.bincount(group_of, minlength=n_groups)[:, None]
    median, width = references[2], references[3]
    differing = np.empty((2, n_groups, n_cols))
    if not sparse.issparse(chunk):
        members = [np.flatnonzero(group_of == g) for g in range(n_groups)]
        for r in range(2):
            differs = chunk != references[r][None, :]  # one byte a value; each group's rows summed from it
            differing[r] = [differs[rows].sum(axis=0) for rows in members]
        compared = np.flatnonzero(np.isfinite(width))
        outside, deviations = np.zeros((n_groups, n_cols)), np.zeros((2, n_cols))
        if compared.size:
            every = compared.size == n_cols  # no copy of the chunk to pick its genes
            squared = np.square((chunk if every else chunk[:, compared]) - median[compared])
            out = squared > np.square(width[compared])
            outside[:, compared] = np.array([out[rows].sum(axis=0) for rows in members]).reshape(n_groups, -1)
            deviations[0, compared] = squared.sum(axis=0)
            squared[~out] = 0.0
            deviations[1, compared] = squared.sum(axis=0)
        return differing, outside, deviations
    csr = chunk if chunk.format == "csr" else sparse.csr_matrix(chunk)
    cols, data = csr.indices, csr.data
    # each stored value's (group, gene) slot; 32-bit where it fits, as the matrix's own indices
    index_type = np.int32 if n_groups * n_cols < np.iinfo(np.int32).max else np.int64
    slot = np.repeat(group_of.astype(index_type), np.diff(csr.indptr)) * index_type(n_cols) + cols.astype(index_type)
    size = n_groups * n_cols
    stored = np.bincount(slot, minlength=size).reshape(n_groups, n_cols)
    implicit = per_group - stored  # zeros not stored
    for r in range(2):
        equal = np.bincount(slot[data == references[r][cols]], minlength=size).reshape(n_groups, n_cols)
        differing[r] = per_group - equal - np.where(references[r][None, :] == 0, implicit, 0)
    compared = np.isfinite(width)
    outside, deviations = np.zeros((n_groups, n_cols)), np.zeros((2, n_cols))
    if compared.any():  # none where every gene has a shared value, as in sparse log counts
        keep = compared[cols]
        cols, slot = cols[keep], slot[keep]
        squared = (data[keep] - median[cols]) ** 2
        out = squared > width[cols] ** 2
        zero_out = compared & (median**2 > width**2)  # where an unstored zero lies outside the bulk
        outside += np.bincount(slot[out], minlength=size).reshape(n_groups, n_cols) + np.where(zero_out, implicit, 0)
        implicit_squares = np.where(compared, implicit.sum(axis=0), 0) * median**2
        deviations += [
            np.bincount(cols, weights=squared, minlength=n_cols) + implicit_squares,
            np.bincount(cols[out], weights=squared[out], minlength=n_cols) + np.where(zero_out, implicit_squares, 0),
        ]
    return differing, outside, deviations


def pick_block(matrix, rows, columns: np.ndarray | None):
    """``matrix``'s ``rows`` (indices or a slice) and genes ``columns`` (``None``: all) as float64,
    sparse input as CSR: one chunk of the pass over the cells."""
    if sparse.issparse(matrix):
        matrix = sparse.csr_matrix(matrix) if matrix.format != "csr" else matrix
        chunk = matrix[rows]
        return (chunk if columns is None else chunk[:, columns]).astype(np.float64)
    # pick rows and genes together, so a chunk never holds the genes left out
    if columns is None:
        picked = matrix[rows]
    elif isinstance(rows, slice):
        picked = matrix[rows][:, columns]
    else:
        picked = matrix[np.ix_(rows, columns)]
    return np.asarray(picked, dtype=np.float64)


def _chunks(matrix, rows: np.ndarray, columns: np.ndarray | None):
    """(positions in ``rows``, gene slice, float64 chunk of the matrix) covering rows × columns."""
    n_genes = matrix.shape[1] if columns is None else len(columns)
    if sparse.issparse(matrix) and matrix.format == "csc":
        per_gene = max(1, matrix.nnz // max(matrix.shape[1], 1))
        width = max(1, CHUNK_ELEMENTS // per_gene)
        for lo in range(0, n_genes, width):
            genes = slice(lo, min(lo + width, n_genes))
            picked = np.arange(genes.start, genes.stop) if columns is None else columns[genes]
            block = matrix[:, picked].tocsr()[rows].astype(np.float64)
            yield slice(None), genes, block
        return
    if sparse.issparse(matrix):
        matrix = sparse.csr_matrix(matrix) if matrix.format != "csr" else matrix
        per_row = max(1, matrix.nnz // max(matrix.shape[0], 1))
    else:
        per_row = max(1, n_genes)
    for cells in row_slices(rows.size, per_row):
        yield cells, slice(None), pick_block(matrix, rows[cells], columns)


def row_slices(n_rows: int, per_row: int):
    """Consecutive slices of ``n_rows`` rows, each at most :data:`CHUNK_ELEMENTS` values of ``per_row`` a row."""
    height = max(1, CHUNK_ELEMENTS // max(1, per_row))
    for lo in range(0, n_rows, height):
        yield slice(lo, min(lo + height, n_rows))
