"""Penalised regression splines of pseudotime, fitted to all genes at once.

Each gene's expression y is modelled as a smooth function of pseudotime t,
a penalised regression spline (O'Sullivan 1986; Wand & Ormerod 2008):

    f(t) = Σ_j β_j B_j(t),    β̂ = argmin Σ_i w_i (y_i − f(t_i))² + λ ∫ f''(t)² dt,

with cubic B-splines B_j on knots at quantiles of t — the criterion of
``scipy.interpolate.make_smoothing_spline``, on a fixed basis of a few knots
instead of one knot per cell. With the Gram matrix G = BᵀWB and the penalty
P_jk = ∫ B_j'' B_k'', the fit is β̂ = (G + λP)⁻¹ BᵀWy. Everything a gene needs is
in its sufficient statistics BᵀWy (m values) and Σ w y², so all genes are fitted
by one multi-column solve, and sparse expression is never densified: cells are
visited in row chunks (:func:`sufficient_statistics`), each summarised by
:func:`block_statistics`; a chunked matrix (a dask array, through
:class:`scskeleton._dask.stats.ChunkedExpression`) maps that same function over its
chunks and adds the small results, in one pass over the cells.

One generalized eigendecomposition diagonalises the fit for every λ:
V with Vᵀ(G + cP)V = I and Vᵀ(cP)V = diag(μ), 0 ≤ μ ≤ 1 (c balances the
scales). Then, with θ = λ / c and d_j = 1 − μ_j + θμ_j,

    β̂ = V a,  a = z / d,  z = VᵀBᵀWy,
    RSS = Σ w y² − Σ_j z_j² (1 − μ_j + 2θμ_j) / d_j²,
    edf = tr((G + λP)⁻¹G) = Σ_j (1 − μ_j) / d_j,

so the effective degrees of freedom (trace of the hat matrix) are matched to a
target by a scalar root search, and λ can be chosen per gene by generalised
cross-validation on a grid of θ by one matrix product (vectorised over genes).
G may be singular (a branch that ends early leaves the last B-splines without
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, linalg, optimize, sparse

from ..validation import check_integer, check_positive

DEGREE = 3
#: Generalized eigenvalues μ (in [0, 1]) closer than this to 0 or 1 count as exactly 0 or 1.
RELATIVE_ZERO = 1e-10
#: Points of the per-gene GCV search over log θ.
GCV_POINTS = 91
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
class SplineBasis:
    """Cubic B-spline basis on ``knots`` with its curvature penalty.

    ``knots`` are the distinct knots (boundary included); ``penalty`` is the
    m × m matrix P_jk = ∫ B_j''(t) B_k''(t) dt over the knots' range.
    """

    knots: np.ndarray
    penalty: np.ndarray

    @property
    def vector(self) -> np.ndarray:
        """The full knot vector, boundary knots repeated DEGREE + 1 times."""
        return _knot_vector(self.knots)

    @property
    def n_basis(self) -> int:
        return self.knots.size + DEGREE - 1

    def design(self, times: np.ndarray) -> np.ndarray:
        """The len(times) × m basis matrix; times are clipped to the knots' range."""
        times = np.clip(np.asarray(times, dtype=float), self.knots[0], self.knots[-1])
        return interpolate.BSpline.design_matrix(times, self.vector, DEGREE).toarray()


def spline_basis(times: np.ndarray, n_knots: int, *, curves=None) -> SplineBasis:
    """Cubic B-splines with knots at ``n_knots`` quantiles of ``times`` (the minimum
    and maximum included; knots closer than :data:`MIN_KNOT_SPACING` of the mean
    spacing merge), and their curvature penalty.

    Quantile knots give every basis function cells to rest on wherever the
    cells are spread unevenly in pseudotime. Nearly tied quantiles merge too: a
    tenth of the cells at the root's time 0 and one cell at 9·10⁻⁵ put two knots
    that close, and the penalty's eigenvalues then spanned 10¹⁶, so that no
    smoothing brought a curve below 11 degrees of freedom (a branch test on
    RPG's tree of 4,000 ``simulate_trajectory`` cells raised at df = 6).
    ``curves`` (boolean masks over ``times``, one per curve to be fitted on the
    basis) takes the union of ``n_knots`` quantiles of each curve's own cells
    instead (:func:`basis_for_curves` chooses between the two).
    """
    n_knots = check_integer("n_knots", n_knots, low=2)
    times = np.asarray(times, dtype=float)
    levels = np.linspace(0.0, 1.0, n_knots)
    if curves is None:
        knots = _spaced(np.unique(np.quantile(times, levels)))
    else:
        knots = _spaced(np.unique(np.concatenate([np.quantile(times[mask], levels) for mask in curves if np.any(mask)])))
    if knots.size < 2:
        raise ValueError("All cells have the same pseudotime; a trend needs cells at two or more times.")
    second = interpolate.BSpline(_knot_vector(knots), np.eye(knots.size + DEGREE - 1), DEGREE).derivative(2)
    penalty = _curvature_products(second, knots)
    return SplineBasis(knots=knots, penalty=(penalty + penalty.T) / 2.0)


def basis_for_curves(times: np.ndarray, n_knots: int, weights: list[np.ndarray], df: float) -> SplineBasis:
    """The common basis of several curves fitted to weighted cells (``weights``: one vector over
    ``times`` per curve), each to carry ``df`` effective degrees of freedom.

    Knots at quantiles of all the cells, unless some curve's cells then touch
    too few basis functions to carry ``df`` (a short branch beside a long,
    crowded one falls within one or two knot intervals); then the union of each
    curve's own quantiles (:func:`spline_basis` with ``curves``). Lowering the
    df instead, for every curve alike, left the shared curve of a branch test
    too stiff for switch-like genes on the long branch: 15 % of shared genes
    below p = 0.05 on the true time, against 4 % with the curves' own knots.
    Only where needed (:func:`needs_own_knots`): the union's extra knots moved
    the warp a branch test fits on PROSSTT-like trees and cost calibration
    elsewhere.
    """
    if not needs_own_knots(times, n_knots, weights, df):
        return spline_basis(times, n_knots)
    return spline_basis(times, n_knots, curves=[weight > 0 for weight in weights])


def needs_own_knots(times: np.ndarray, n_knots: int, weights: list[np.ndarray], df: float) -> bool:
    """Whether some curve's weighted cells cannot carry ``df`` on knots at quantiles of all ``times``."""
    basis = spline_basis(times, n_knots)
    design = basis.design(times)
    grams = [(design * weight[:, None]).T @ design for weight in weights]
    least, most = _df_range(grams, basis.penalty)
    return not least < df < most - 1e-6


#: Knots of several curves closer than this share of the mean knot spacing merge: curves that share
#: cells (the trunk) put quantiles almost on top of each other, and a basis function a hundredth of
#: the spacing wide makes the curvature penalty so ill-conditioned (∝ 1/width³) that it loses its
#: straight-line null space numerically.
MIN_KNOT_SPACING = 0.1


def _spaced(knots: np.ndarray) -> np.ndarray:
    """``knots`` (sorted, distinct) without those closer than :data:`MIN_KNOT_SPACING` of the
    mean spacing to the previous one kept; both ends stay."""
    if knots.size < 3:
        return knots
    least = MIN_KNOT_SPACING * (knots[-1] - knots[0]) / (knots.size - 1)
    kept = [knots[0]]
    for knot in knots[1:-1]:
        if knot - kept[-1] >= least and knots[-1] - knot >= least:
            kept.append(knot)
    kept.append(knots[-1])
    return np.asarray(kept)


@dataclass(frozen=True)
class PeriodicSplineBasis:
    """Cyclic cubic B-splines of a phase in [0, 1) with their curvature penalty.

    ``knots`` are the m distinct knots in [0, 1) followed by the first plus one (the
    period closes there); the m basis functions wrap round (each B-spline that runs
    past 1 continues from 0), sum to one at every phase, and the penalty
    P_jk = ∫₀¹ B_j''(t) B_k''(t) dt leaves only the constant unpenalised: a trend of a
    phase has no straight line to fall back on, it returns where it started.
    """

    knots: np.ndarray
    penalty: np.ndarray

    @property
    def n_basis(self) -> int:
        return self.knots.size - 1

    def design(self, times: np.ndarray) -> np.ndarray:
        """The len(times) × m basis matrix; times are taken modulo 1 from the first knot."""
        start = self.knots[0]
        times = start + np.mod(np.asarray(times, dtype=float) - start, 1.0)
        return _fold(interpolate.BSpline.design_matrix(times, _periodic_vector(self.knots), DEGREE).toarray(),
                     self.n_basis)


def periodic_spline_basis(phases: np.ndarray, n_knots: int) -> PeriodicSplineBasis:
    """Cyclic cubic B-splines with knots at ``n_knots`` quantiles of ``phases`` (in [0, 1);
    tied quantiles merge), and their curvature penalty over one period."""
    n_knots = check_integer("n_knots", n_knots, low=4)
    phases = np.mod(np.asarray(phases, dtype=float), 1.0)
    knots = np.unique(np.quantile(phases, np.linspace(0.0, 1.0, n_knots, endpoint=False)))
    if knots.size < 4:
        raise ValueError("The cells' phases take too few distinct values for a periodic trend (4 knots at least).")
    knots = np.append(knots, knots[0] + 1.0)
    vector = _periodic_vector(knots)
    n_basis = knots.size - 1
    second = interpolate.BSpline(vector, np.eye(vector.size - DEGREE - 1), DEGREE).derivative(2)
    penalty = _fold(_fold(_curvature_products(second, knots), n_basis).T, n_basis)
    return PeriodicSplineBasis(knots=knots, penalty=(penalty + penalty.T) / 2.0)


def _periodic_vector(knots: np.ndarray) -> np.ndarray:
    """The knot vector of one period (``knots`` closing at the first plus one) extended periodically by DEGREE
    knots on each side."""
    spacing = np.diff(knots)
    before = knots[0] - np.cumsum(spacing[::-1][:DEGREE])[::-1]
    after = knots[-1] + np.cumsum(spacing[:DEGREE])
    return np.concatenate([before, knots, after])


def _fold(columns: np.ndarray, n_basis: int) -> np.ndarray:
    """Add the B-splines past the period's end onto the first ones they continue (the last DEGREE columns)."""
    folded = columns[:, :n_basis].copy()
    folded[:, : columns.shape[1] - n_basis] += columns[:, n_basis:]
    return folded


_GAUSS_LEGENDRE_2 = np.polynomial.legendre.leggauss(2)


def _curvature_products(second, knots: np.ndarray) -> np.ndarray:
    """∫ B_j'' B_k'' over ``knots``' range, exact: B'' is linear on each knot interval, so 2-point
    Gauss–Legendre integrates the products exactly."""
    nodes, weights = _GAUSS_LEGENDRE_2
    half = np.diff(knots) / 2.0
    middle = (knots[:-1] + knots[1:]) / 2.0
    points = (middle[:, None] + half[:, None] * nodes[None, :]).ravel()
    point_weights = (half[:, None] * weights[None, :]).ravel()
    values = second(points)
    return values.T @ (point_weights[:, None] * values)


def _knot_vector(knots: np.ndarray) -> np.ndarray:
    return np.concatenate([np.repeat(knots[0], DEGREE), knots, np.repeat(knots[-1], DEGREE)])


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


@dataclass(frozen=True)
class SplineFit:
    """Penalised spline fits of G genes on one basis.

    ``coef`` (m × G) are the B-spline coefficients β̂, ``rss`` the (weighted)
    residual sums of squares, ``lam`` the penalty λ of each gene and ``hat``
    (m × G) the non-zero eigenvalues h_j = (1 − μ_j) / d_j of each gene's hat
    matrix, from which the degrees of freedom of the tests follow.
    """

    coef: np.ndarray
    rss: np.ndarray
    lam: np.ndarray
    hat: np.ndarray

    @property
    def edf(self) -> np.ndarray:
        """Effective degrees of freedom, tr H."""
        return self.hat.sum(axis=0)

    def moments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Σ_j a_j, Σ_j a_j² with a_j = 1 − (1 − h_j)², and Σ_j (1 − (1 − h_j)⁴).

        ``I − (I − H)²`` (the part of the variance a fit explains) has the
        eigenvalues a_j, and ``(I − H)²`` (its residual form) has
        1 − a_j ≠ 1 only on these m dimensions.
        """
        gain = 1.0 - (1.0 - self.hat) ** 2
        return gain.sum(axis=0), (gain**2).sum(axis=0), (1.0 - (1.0 - self.hat) ** 4).sum(axis=0)


@dataclass(frozen=True)
class _Eigen:
    vectors: np.ndarray  # V, m × m
    mu: np.ndarray  # m, in [0, 1]
    scale: float  # c: λ = θ c

    def edf(self, theta):
        theta = np.asarray(theta, dtype=float)[..., None]
        return ((1.0 - self.mu) / (1.0 - self.mu + theta * self.mu)).sum(axis=-1)

    def theta_range(self) -> tuple[float, float]:
        """θ from where no supported direction is shrunk yet to where all penalised ones are.

        Direction j is halved at θ = (1 − μ_j) / μ_j; the range spans those of
        the directions that are both penalised and supported by cells, with
        six decades of margin, since uneven knots spread them over many decades.
        """
        active = (self.mu > RELATIVE_ZERO) & (1.0 - self.mu > RELATIVE_ZERO)
        if not active.any():
            return 1.0, 1.0
        halves = (1.0 - self.mu[active]) / self.mu[active]
        return float(halves.min()) * 1e-6, float(halves.max()) * 1e6


def _eigen(gram: np.ndarray, penalty: np.ndarray) -> _Eigen:
    scale = np.trace(gram) / np.trace(penalty)
    try:
        mu, vectors = linalg.eigh(scale * penalty, gram + scale * penalty)
    except linalg.LinAlgError:
        raise ValueError("The cells' pseudotimes do not determine a trend (fewer than two distinct values).") from None
    return _Eigen(vectors=vectors, mu=np.clip(mu, 0.0, 1.0), scale=float(scale))


def _theta_for_df(eigen: _Eigen, df: float, what: str) -> float:
    """θ at which the fit uses ``df`` effective degrees of freedom (edf falls with θ)."""
    low, high = eigen.theta_range()
    most, least = float(eigen.edf(low)), float(eigen.edf(high))
    if not least < df < most:
        raise ValueError(
            f"{what}: its cells support between {least:.3f} and {most:.3f} effective degrees of freedom, and "
            f"df={df:g} is outside. Too few cells, or cells covering only part of the knots (a branch that "
            "ends early): lower df, or raise n_knots so that more knots fall within its pseudotime range."
        )
    return float(np.exp(optimize.brentq(
        lambda log_theta: float(eigen.edf(np.exp(log_theta))) - df, np.log(low), np.log(high), xtol=1e-10
    )))


def lam_for_df(gram: np.ndarray, penalty: np.ndarray, df: float, what: str) -> float:
    """The penalty λ at which a fit with this Gram matrix uses ``df`` effective degrees of freedom."""
    eigen = _eigen(gram, penalty)
    return _theta_for_df(eigen, df, what) * eigen.scale


def adapt_df(df: float, grams: list[np.ndarray], penalty: np.ndarray, what: str) -> float:
    """The ``df`` every fit in ``grams`` can use: ``df`` itself, or less when the cells cannot carry it.

    The effective degrees of freedom a set of cells supports run from 2 (a
    straight line, the penalty's null space) up to the number of basis
    functions its cells touch. Cells with many tied pseudotimes (many cells
    projected onto one node) or a branch that ends early touch few, so a
    default of 6 can exceed what they carry. Then the largest usable value is
    taken, 90 % of the way from the least to the most the cells support (the
    caller reports the change); only when even that leaves no room for a curve
    (under 2.5) does it raise, saying what would work.
    """
    least, most = _df_range(grams, penalty)
    if least < df < most - 1e-6:
        return float(df)
    usable = least + 0.9 * (most - least)
    if usable < 2.5:
        raise ValueError(
            f"{what}: its cells support at most {most:.2f} effective degrees of freedom, too few for a curve "
            "(a straight line takes 2). Its pseudotimes take too few distinct values: choose a longer path or "
            "segment, or raise n_knots."
        )
    return float(min(df, usable))


def _df_range(grams: list[np.ndarray], penalty: np.ndarray) -> tuple[float, float]:
    """The effective degrees of freedom every fit in ``grams`` can use: (least, most)."""
    bounds = [_edf_bounds(_eigen(gram, penalty)) for gram in grams]
    return max(low for low, _ in bounds), min(high for _, high in bounds)


def _edf_bounds(eigen: _Eigen) -> tuple[float, float]:
    low, high = eigen.theta_range()
    return float(eigen.edf(high)), float(eigen.edf(low))


def penalized_fit(
    gram: np.ndarray,
    cross: np.ndarray,
    sumsq: np.ndarray,
    penalty: np.ndarray,
    *,
    df: float | None,
    what: str = "The path",
) -> SplineFit:
    """Fit every gene by the penalised spline, from its sufficient statistics.

    ``df`` fixes the effective degrees of freedom, the same for all genes
    (λ solved from it); ``None`` chooses λ per gene by generalised
    cross-validation, GCV(λ) = n · RSS(λ) / (n − edf(λ))², over a grid of λ.
    ``what`` names the data in error messages.
    """
    eigen = _eigen(gram, penalty)
    z = eigen.vectors.T @ cross  # m × G
    n_obs = float(gram.sum())  # Σ_jk G_jk = Σ_i w_i, since the B-splines sum to one
    one_minus = 1.0 - eigen.mu
    if df is None:
        thetas = np.geomspace(*eigen.theta_range(), GCV_POINTS)
        d = one_minus[None, :] + thetas[:, None] * eigen.mu[None, :]  # L × m
        shrink = (one_minus[None, :] + 2.0 * thetas[:, None] * eigen.mu[None, :]) / d**2
        rss = np.maximum(sumsq[None, :] - shrink @ z**2, 0.0)  # L × G
        edf = eigen.edf(thetas)  # L
        with np.errstate(divide="ignore", invalid="ignore"):
            gcv = n_obs * rss / np.maximum(n_obs - edf[:, None], 1e-12) ** 2
        theta = thetas[np.argmin(gcv, axis=0)]  # G
    else:
        theta = np.full(z.shape[1], _theta_for_df(eigen, df, what))
    d = one_minus[:, None] + theta[None, :] * eigen.mu[:, None]  # m × G
    coef = eigen.vectors @ (z / d)
    shrink = (one_minus[:, None] + 2.0 * theta[None, :] * eigen.mu[:, None]) / d**2
    rss = np.maximum(sumsq - (shrink * z**2).sum(axis=0), 0.0)
    return SplineFit(coef=coef, rss=rss, lam=theta * eigen.scale, hat=one_minus[:, None] / d)


def check_df(df: float | None, *, allow_none: bool) -> float | None:
    """Effective degrees of freedom of a curve: > 2 (a straight line has 2)."""
    if df is None and allow_none:
        return None
    df = check_positive("df", df, role="effective degrees of freedom of each curve")
    if df <= 2.0:
        raise ValueError(f"df must be > 2 (a straight line already has 2 degrees of freedom); got {df:g}.")
    return df


def explained_form(gram: np.ndarray, penalty: np.ndarray, lam: float) -> np.ndarray:
    """S = 2M⁻¹ − M⁻¹GM⁻¹, M = G + λP: a fit explains the form (Xᵀy)ᵀ S (Xᵀy) of Σ y²."""
    inverse = linalg.pinvh(gram + lam * penalty)
    return 2.0 * inverse - inverse @ gram @ inverse


def check_cells(rows, times) -> tuple[np.ndarray, np.ndarray]:
    rows = np.asarray(rows, dtype=np.intp).ravel()
    times = np.asarray(times, dtype=float).ravel()
    if rows.shape != times.shape:
        raise ValueError(f"rows and times must have the same length; got {rows.size} and {times.size}.")
    if not np.isfinite(times).all():
        raise ValueError("Pseudotimes must be finite; leave out cells without a pseudotime.")
    if rows.size < 3:
        raise ValueError(f"A trend needs at least 3 cells; got {rows.size}.")
    if np.unique(rows).size != rows.size:
        raise ValueError("rows must not repeat a cell.")
    return rows, times
