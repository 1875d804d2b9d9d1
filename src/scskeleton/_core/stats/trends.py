"""Gene trends along pseudotime and branch-dependence tests, for all genes at once.

Each gene's expression y is modelled as a smooth function of pseudotime t,
a penalised regression spline (O'Sullivan 1986; Wand & Ormerod 2008):

    f(t) = Σ_j β_j B_j(t),    β̂ = argmin Σ_i w_i (y_i − f(t_i))² + λ ∫ f''(t)² dt,

with cubic B-splines B_j on knots at quantiles of t — the criterion of
``scipy.interpolate.make_smoothing_spline``, on a fixed basis of a few knots
instead of one knot per cell. With the Gram matrix G = BᵀWB and the penalty
P_jk = ∫ B_j'' B_k'', the fit is β̂ = (G + λP)⁻¹ BᵀWy. Everything a gene needs is
in its sufficient statistics BᵀWy (m values) and Σ w y², so all genes are fitted
by one multi-column solve, and sparse expression is never densified: cells are
visited in row chunks (:func:`sufficient_statistics`).

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
cells); the fit is still unique because the penalty's null space (straight
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

from dataclasses import dataclass

import numpy as np
from scipy import interpolate, linalg, optimize, sparse, stats

from ..validation import check_integer, check_positive

DEGREE = 3
#: Generalized eigenvalues μ (in [0, 1]) closer than this to 0 or 1 count as exactly 0 or 1.
RELATIVE_ZERO = 1e-10
#: Points of the per-gene GCV search over log θ.
GCV_POINTS = 91
#: Elements of one dense chunk of expression (or non-zeros of a sparse one) held at a time.
CHUNK_ELEMENTS = 1 << 23


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


def spline_basis(times: np.ndarray, n_knots: int) -> SplineBasis:
    """Cubic B-splines with knots at ``n_knots`` quantiles of ``times`` (the minimum
    and maximum included; tied quantiles merge), and their curvature penalty.

    Quantile knots give every basis function cells to rest on wherever the
    cells are spread unevenly in pseudotime.
    """
    n_knots = check_integer("n_knots", n_knots, low=2)
    times = np.asarray(times, dtype=float)
    knots = np.unique(np.quantile(times, np.linspace(0.0, 1.0, n_knots)))
    if knots.size < 2:
        raise ValueError("All cells have the same pseudotime; a trend needs cells at two or more times.")
    second = interpolate.BSpline(_knot_vector(knots), np.eye(knots.size + DEGREE - 1), DEGREE).derivative(2)
    # B'' is linear on each knot interval, so 2-point Gauss–Legendre integrates B_j'' B_k'' exactly.
    nodes, weights = np.polynomial.legendre.leggauss(2)
    half = np.diff(knots) / 2.0
    middle = (knots[:-1] + knots[1:]) / 2.0
    points = (middle[:, None] + half[:, None] * nodes[None, :]).ravel()
    point_weights = (half[:, None] * weights[None, :]).ravel()
    values = second(points)
    penalty = values.T @ (point_weights[:, None] * values)
    return SplineBasis(knots=knots, penalty=(penalty + penalty.T) / 2.0)


def _knot_vector(knots: np.ndarray) -> np.ndarray:
    return np.concatenate([np.repeat(knots[0], DEGREE), knots, np.repeat(knots[-1], DEGREE)])


@dataclass(frozen=True)
class SufficientStatistics:
    """Per group g of cells: Gram BᵀB (g × m × m), cross products BᵀY (g × m × G),
    Σ y² (g × G) and the number of cells (g); per gene, ``n_varying`` (G): how
    many cells differ from the gene's most common value, at most (the smaller
    count against the values of two reference cells)."""

    gram: np.ndarray
    cross: np.ndarray
    sumsq: np.ndarray
    n_cells: np.ndarray
    n_varying: np.ndarray


def sufficient_statistics(
    matrix, rows: np.ndarray, design: np.ndarray, groups: np.ndarray, n_groups: int, columns: np.ndarray | None = None
) -> SufficientStatistics:
    """What every spline fit needs from the expression, in one pass over the cells.

    ``matrix`` is cells × genes, a dense array or any scipy sparse matrix;
    ``rows`` are the cells to use, ``design`` their basis rows, ``groups`` their
    group label in [0, n_groups); ``columns`` selects genes (default: all).
    Dense and CSR input is read in chunks of rows, CSC in blocks of genes, so
    at most one chunk is ever held as float64 and sparse input stays sparse.
    """
    rows = np.asarray(rows, dtype=np.intp)
    n_genes = matrix.shape[1] if columns is None else len(columns)
    if n_genes == 0:
        raise ValueError("No genes to fit.")
    order = np.argsort(rows, kind="stable")  # ascending rows read CSR and dense input in memory order
    rows, design, groups = rows[order], np.asarray(design, dtype=float)[order], np.asarray(groups)[order]
    n_basis = design.shape[1]
    indicator = np.eye(n_groups)[groups]  # n × g
    expanded = (indicator[:, :, None] * design[:, None, :]).reshape(rows.size, n_groups * n_basis)
    cross = np.zeros((n_genes, n_groups * n_basis))
    sumsq = np.zeros((n_genes, n_groups))
    if sparse.issparse(matrix) and matrix.format not in ("csr", "csc"):
        matrix = sparse.csr_matrix(matrix)  # once, for the reference rows and the chunks alike
    references = _reference_values(matrix, rows[[0, rows.size // 2]], columns)  # 2 × G
    differing = np.zeros((2, n_genes))
    for cells, genes, chunk in _chunks(matrix, rows, columns):
        if sparse.issparse(chunk):
            data = chunk.data
            squared = chunk.multiply(chunk)
        else:
            data = chunk
            squared = chunk * chunk
        if not np.isfinite(data).all():
            raise ValueError("The expression values contain NaN or infinite values; remove or impute them first.")
        cross[genes] += np.asarray(chunk.T @ expanded[cells])
        sumsq[genes] += np.asarray(squared.T @ indicator[cells])
        differing[:, genes] += _count_differing(chunk, references[:, genes])
    gram = np.einsum("ng,ni,nj->gij", indicator, design, design)
    return SufficientStatistics(
        gram=gram,
        cross=cross.reshape(n_genes, n_groups, n_basis).transpose(1, 2, 0).copy(),
        sumsq=sumsq.T.copy(),
        n_cells=indicator.sum(axis=0),
        n_varying=differing.min(axis=0),
    )


def _reference_values(matrix, cells: np.ndarray, columns: np.ndarray | None) -> np.ndarray:
    """The values of a few cells (rows of ``matrix``), len(cells) × G, as float64."""
    picked = matrix[cells]
    if columns is not None:
        picked = picked[:, columns]
    return np.asarray(picked.toarray() if sparse.issparse(picked) else picked, dtype=np.float64)


def _count_differing(chunk, references: np.ndarray) -> np.ndarray:
    """Per reference row r and gene (column), the cells of ``chunk`` whose value differs from ``references[r]``."""
    n_rows, n_cols = chunk.shape
    if not sparse.issparse(chunk):
        return np.stack([(chunk != reference[None, :]).sum(axis=0) for reference in references])
    if chunk.format == "csr":
        cols, data = chunk.indices, chunk.data
    else:
        coo = chunk.tocoo()
        cols, data = coo.col, coo.data
    stored = np.bincount(cols, minlength=n_cols)
    out = np.empty((len(references), n_cols))
    for r, reference in enumerate(references):
        equal = np.bincount(cols[data == reference[cols]], minlength=n_cols)
        implicit_equal = np.where(reference == 0, n_rows - stored, 0)  # zeros not stored
        out[r] = n_rows - equal - implicit_equal
    return out


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
    height = max(1, CHUNK_ELEMENTS // per_row)
    for lo in range(0, rows.size, height):
        cells = slice(lo, min(lo + height, rows.size))
        if sparse.issparse(matrix):
            chunk = matrix[rows[cells]]
            chunk = (chunk if columns is None else chunk[:, columns]).astype(np.float64)
        else:  # pick rows and genes together, so a chunk never holds the genes left out
            picked = matrix[rows[cells]] if columns is None else matrix[np.ix_(rows[cells], columns)]
            chunk = np.asarray(picked, dtype=np.float64)
        yield cells, slice(None), chunk


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
    least, most = 0.0, np.inf
    for gram in grams:
        low_edf, high_edf = _edf_bounds(_eigen(gram, penalty))
        least, most = max(least, low_edf), min(most, high_edf)
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


def check_df(df: float | None, *, allow_none: bool) -> float | None:
    """Effective degrees of freedom of a curve: > 2 (a straight line has 2)."""
    if df is None and allow_none:
        return None
    df = check_positive("df", df, role="effective degrees of freedom of each curve")
    if df <= 2.0:
        raise ValueError(f"df must be > 2 (a straight line already has 2 degrees of freedom); got {df:g}.")
    return df


def trend_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    *,
    n_knots: int = 10,
    df: float | None = 6.0,
    n_grid: int = 100,
    columns: np.ndarray | None = None,
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
    """
    rows, times = _check_cells(rows, times)
    df = check_df(df, allow_none=True)
    n_grid = check_integer("n_grid", n_grid, low=2)
    n_cells = rows.size
    if df is not None and n_cells <= df + 1:
        raise ValueError(f"The path holds {n_cells} cells; df={df:g} needs more than {df + 1:g}. Lower df.")
    basis = spline_basis(times, n_knots)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), np.zeros(n_cells, dtype=np.intp), 1, columns)
    if df is not None:
        df = adapt_df(df, [stats_.gram[0]], basis.penalty, "The path")
    fit = penalized_fit(stats_.gram[0], stats_.cross[0], stats_.sumsq[0], basis.penalty, df=df)
    total = stats_.cross[0].sum(axis=0)  # Σ y, since the B-splines sum to one
    rss0 = np.maximum(stats_.sumsq[0] - total**2 / n_cells, 0.0)
    gain, gain_sq, loss = fit.moments()
    # the constant (in the fit's unpenalised null space, a = 1) is what the null model explains already
    fstat, pvals = _f_test(rss0, fit.rss, gain - 1.0, gain_sq - 1.0, n_cells - gain, n_cells - loss)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(rss0 > 0, 1.0 - fit.rss / rss0, 0.0)
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals, r2 = _blank(degenerate, fstat, pvals, r2)
    grid = np.linspace(basis.knots[0], basis.knots[-1], n_grid)
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


@dataclass(frozen=True)
class BranchTestResult:
    """Output of :func:`branch_test` for G genes and B branches.

    ``curves`` (G × B × n_grid) holds each branch's curve on ``grid``, NaN
    outside the pseudotime range of the branch's cells (trunk included);
    ``shared`` (G × n_grid) the shared curve; ``fstat``/``pvals``/``qvals``
    the F test of branch-specific against shared curves; ``df_shared``,
    ``df_branches`` (B) the effective degrees of freedom of the two models;
    ``n_cells`` per group (trunk first, then the branches); ``times`` the
    time of every tested cell on the axis of the curves (registered or not)
    and ``stretch`` (B) each branch's factor (ones without registration);
    ``degenerate`` as in :class:`TrendResult` (F = 0, p = 1).
    """

    grid: np.ndarray
    curves: np.ndarray
    shared: np.ndarray
    fstat: np.ndarray
    pvals: np.ndarray
    qvals: np.ndarray
    df_shared: float
    df_branches: np.ndarray
    knots: np.ndarray
    n_cells: np.ndarray
    times: np.ndarray
    stretch: np.ndarray
    degenerate: np.ndarray


#: A gene whose value differs from its most common one in fewer tested cells than this
#: carries no trend to test: it gets F = 0, p = 1 and R² = 0 (a handful of outlying values,
#: or rounding noise on a constant, could otherwise give any p-value at all).
MIN_VARYING_CELLS = 5


#: How the branches' pseudotimes are put on one axis before they are compared.
REGISTRATIONS = ("fit", "none")
#: A branch's reach past the fork is this quantile of its cells' distance from it.
REACH_QUANTILE = 0.95
#: Candidate warps between no stretch and equal reach (geometric steps).
STRETCH_STEPS = 9
#: The warps are estimated on at most this many cells (evenly spread) and the
#: most variable genes, standardised: one shared time axis, not a per-gene fit.
WARP_CELLS = 3000
WARP_GENES = 300


def fork_time(times: np.ndarray, groups: np.ndarray) -> float:
    """Pseudotime of the fork: the earliest pseudotime of any branch cell (group ≥ 1)."""
    return float(np.asarray(times, dtype=float)[np.asarray(groups) >= 1].min())


def stretch_branches(times: np.ndarray, groups: np.ndarray, scales) -> np.ndarray:
    """t' = t_f + (t − t_f) · s_b for the cells of branch b (group b ≥ 1); trunk cells keep t."""
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups)
    scales = np.asarray(scales, dtype=float)
    fork = fork_time(times, groups)
    out = times.copy()
    on_branch = groups >= 1
    out[on_branch] = fork + (times[on_branch] - fork) * scales[groups[on_branch] - 1]
    return out


def fit_branch_warps(
    matrix, rows: np.ndarray, times: np.ndarray, groups: np.ndarray, *, n_knots: int, df: float,
    columns: np.ndarray | None = None,
) -> np.ndarray:
    """Stretch factor s_b of every branch's time past the fork, shared by all genes.

    A learned pseudotime is a length along the tree, and a learner stretches
    the branches of a fork differently (DDRTree's latent tree by 10–20 %).
    Genes that follow one curve of the process on every branch then follow
    differently stretched curves of pseudotime, and a test of branch-specific
    curves calls them different. The stretch is a property of the tree, not
    of a gene: s = (s_1, …, s_B) minimises the residual sum of squares of the
    *shared* model (one curve per gene over all cells, ``df`` degrees of
    freedom), summed over the better-fitted half of the most variable genes
    (standardised), on the time axis t' = t_f + (t − t_f) · s_b
    (:func:`stretch_branches`). Genes that follow one curve on every branch
    pin the warp down; branch-specific genes, which no shared curve fits, fall
    in the worse half and do not pull it. The candidates run geometrically
    from no stretch (s = 1) to the stretch that makes the branches reach
    equally far past the fork (the :data:`REACH_QUANTILE` of t − t_f; the
    registration of tradeSeq's pattern test): when the branches genuinely
    span different stretches of the process (one stops early) the data keep
    s near 1, which a rescaling to equal reach would not do. A free search
    over every factor was tried and ran into degenerate warps (one branch
    doubled, the other halved). The result is scaled to geometric mean 1, so
    that the overall length is kept.
    """
    rows = np.asarray(rows, dtype=np.intp)
    times = np.asarray(times, dtype=float)
    groups = np.asarray(groups, dtype=np.intp)
    n_branches = int(groups.max())
    pick = np.unique(np.linspace(0, rows.size - 1, min(rows.size, WARP_CELLS)).astype(np.intp))
    sub_rows, sub_times, sub_groups = rows[pick], times[pick], groups[pick]
    columns = np.arange(matrix.shape[1]) if columns is None else np.asarray(columns, dtype=np.intp)
    block = matrix[sub_rows][:, columns]
    if sparse.issparse(block):  # choose the genes on the sparse block; densify only those
        block = sparse.csc_matrix(block, dtype=np.float64)
        mean = np.asarray(block.mean(axis=0)).ravel()
        spread = np.sqrt(np.maximum(np.asarray(block.multiply(block).mean(axis=0)).ravel() - mean**2, 0.0))
    else:
        block = np.asarray(block, dtype=np.float64)
        spread = block.std(axis=0)
    keep = np.argsort(-spread, kind="stable")[: min(WARP_GENES, int((spread > 0).sum()))]
    if keep.size == 0:
        return np.ones(n_branches)
    chosen = block[:, keep]
    chosen = chosen.toarray() if sparse.issparse(chosen) else chosen
    values = (chosen - chosen.mean(axis=0)) / spread[keep]
    zeros = np.zeros(sub_rows.size, dtype=np.intp)

    def loss(scales: np.ndarray) -> float:
        warped = stretch_branches(sub_times, sub_groups, scales)
        basis = spline_basis(warped, n_knots)
        stats_ = sufficient_statistics(values, np.arange(sub_rows.size), basis.design(warped), zeros, 1)
        fit = penalized_fit(stats_.gram[0], stats_.cross[0], stats_.sumsq[0], basis.penalty, df=df,
                            what="The trunk and branches together")
        # the better-fitted half of the genes: branch-specific genes, which no shared curve
        # fits, must not pull the warp towards whatever helps them
        return float(np.sort(fit.rss)[: max(1, fit.rss.size // 2)].sum())

    # the stretch that gives every branch the same reach past the fork (tradeSeq's registration),
    # and the way there from no stretch at all: the data choose among them
    fork = fork_time(times, groups)
    reach = np.array([np.quantile(times[groups == b] - fork, REACH_QUANTILE) for b in range(1, n_branches + 1)])
    if not np.all(reach > 0):
        return np.ones(n_branches)
    equal_reach = reach.mean() / reach
    candidates = [equal_reach**weight for weight in np.linspace(0.0, 1.0, STRETCH_STEPS)]
    best = candidates[int(np.argmin([loss(c) for c in candidates]))]
    return best / np.exp(np.log(best).mean())


def branch_test(
    matrix,
    rows: np.ndarray,
    times: np.ndarray,
    groups: np.ndarray,
    *,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "fit",
    columns: np.ndarray | None = None,
    names: list[str] | None = None,
) -> BranchTestResult:
    """Test per gene whether its trend differs between the branches after a fork.

    ``groups`` labels each cell 0 (trunk: before the fork) or b = 1…B (its
    branch), B ≥ 2. The interaction model fits one penalised spline per
    branch on the trunk cells plus that branch's cells; each trunk cell enters
    all B branch fits with weight 1/B, so that every cell carries a total
    weight of one (BEAM duplicates the trunk cells into every branch with
    weight one). The shared model is one spline on all cells. Every curve,
    shared or not, uses ``df`` effective degrees of freedom on one common
    basis (knots at quantiles of all the cells' pseudotimes), so the models
    are nested and the F test has Σ_b df − df = (B − 1)·df numerator degrees
    of freedom.

    ``registration="fit"`` (default) first stretches each branch's time past
    the fork by the factor that lets one shared curve per gene fit all genes
    best (:func:`fit_branch_warps`), so that a learner's uneven stretching of
    the branches does not count as a difference; the curves and ``grid`` are
    then on that registered axis. ``"none"`` compares the pseudotimes as they
    are (calibrated when they are proportional to the process's time on every
    branch, e.g. a true time). The warp has B − 1 free parameters shared by
    all genes; the test does not count them against any gene.

    ``names`` name the branches in error messages (default ``"branch b"``).
    A branch with no more cells than ``df``, or whose cells cannot support
    ``df`` degrees of freedom, raises a ValueError.
    """
    rows, times = _check_cells(rows, times)
    df = check_df(df, allow_none=False)
    n_grid = check_integer("n_grid", n_grid, low=2)
    if registration not in REGISTRATIONS:
        raise ValueError(f"registration must be one of {REGISTRATIONS}; got {registration!r}.")
    groups = np.asarray(groups, dtype=np.intp)
    if groups.shape != rows.shape or groups.min(initial=0) < 0:
        raise ValueError("groups must label every cell with 0 (trunk) or a branch number 1…B.")
    scales = np.ones(int(groups.max(initial=0)))
    if registration == "fit" and scales.size >= 2:
        scales = fit_branch_warps(matrix, rows, times, groups, n_knots=n_knots, df=df, columns=columns)
        times = stretch_branches(times, groups, scales)
    n_branches = int(groups.max(initial=0))
    if n_branches < 2:
        raise ValueError(f"A branch test needs at least two branches; got {n_branches}.")
    names = [f"branch {b}" for b in range(1, n_branches + 1)] if names is None else list(names)
    counts = np.bincount(groups, minlength=n_branches + 1)
    for b in range(1, n_branches + 1):
        if counts[b] <= df:
            raise ValueError(
                f"{names[b - 1]} has {counts[b]} cells, not more than df={df:g}: too few to fit its own curve. "
                "Lower df, choose another branch point, or prune short branches (tl.pseudotime's min_branch_nodes)."
            )
    basis = spline_basis(times, n_knots)
    stats_ = sufficient_statistics(matrix, rows, basis.design(times), groups, n_branches + 1, columns)

    trunk_weight = 1.0 / n_branches
    # one df for every curve keeps the models nested: the least any of them can carry
    df = adapt_df(
        df,
        [stats_.gram.sum(0)] + [trunk_weight * stats_.gram[0] + stats_.gram[b] for b in range(1, n_branches + 1)],
        basis.penalty,
        "A branch (with the trunk)",
    )
    shared = penalized_fit(stats_.gram.sum(0), stats_.cross.sum(0), stats_.sumsq.sum(0), basis.penalty, df=df,
                           what="The trunk and branches together")
    fits = [  # a loop over the few branches; genes are vectorised inside each fit
        penalized_fit(
            trunk_weight * stats_.gram[0] + stats_.gram[b],
            trunk_weight * stats_.cross[0] + stats_.cross[b],
            trunk_weight * stats_.sumsq[0] + stats_.sumsq[b],
            basis.penalty,
            df=df,
            what=f"{names[b - 1]} (with the trunk)",
        )
        for b in range(1, n_branches + 1)
    ]
    fstat, pvals = _f_test(
        shared.rss, sum(fit.rss for fit in fits),
        *_branch_moments(stats_.gram, basis.penalty, float(shared.lam[0]), [float(fit.lam[0]) for fit in fits]),
    )
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals = _blank(degenerate, fstat, pvals)
    grid = np.linspace(basis.knots[0], basis.knots[-1], n_grid)
    grid_design = basis.design(grid)
    curves = np.full((shared.rss.size, n_branches, n_grid), np.nan)
    for b, fit in enumerate(fits, start=1):
        span = times[(groups == 0) | (groups == b)]
        inside = (grid >= span.min()) & (grid <= span.max())
        curves[:, b - 1, inside] = (grid_design[inside] @ fit.coef).T
    return BranchTestResult(
        grid=grid,
        curves=curves,
        shared=(grid_design @ shared.coef).T,
        fstat=fstat,
        pvals=pvals,
        qvals=benjamini_hochberg(pvals),
        df_shared=float(shared.edf[0]),
        df_branches=np.array([float(fit.edf[0]) for fit in fits]),
        knots=basis.knots,
        n_cells=counts,
        times=times,
        stretch=scales,
        degenerate=degenerate,
    )


def _branch_moments(gram: np.ndarray, penalty: np.ndarray, lam_shared: float, lam_branches: list[float]):
    """tr A, tr A², tr R, tr R² of the branch test's quadratic forms, exactly.

    With the basis rows X of all n cells, branch weights W_b (1/B on the trunk,
    1 on branch b, 0 elsewhere; Σ_b W_b = I) and S = 2M⁻¹ − M⁻¹GM⁻¹ for a fit
    with M = G + λP, the branch fits explain yᵀQy with
    Q = Σ_b W_b X S_b Xᵀ W_b and the shared fit Q₀ = X S₀ Xᵀ; A = Q − Q₀ and
    R = I − Q. Both are U C Uᵀ with U = [W_1X, …, W_BX, X], so their traces
    follow from the (B + 1)m × (B + 1)m matrix UᵀU, built from the groups'
    Gram matrices without touching the n cells again.
    """
    n_branches = len(lam_branches)
    weight = 1.0 / n_branches
    trunk, own = gram[0], gram[1:]
    blocks = [[weight**2 * trunk + (own[b] if b == c else 0.0) for c in range(n_branches)]
              + [weight * trunk + own[b]] for b in range(n_branches)]
    blocks.append([weight * trunk + own[c] for c in range(n_branches)] + [gram.sum(axis=0)])
    cross = np.block(blocks)
    forms = [_explained_form(trunk * weight + own[b], penalty, lam) for b, lam in enumerate(lam_branches)]
    forms.append(-_explained_form(gram.sum(axis=0), penalty, lam_shared))
    product = linalg.block_diag(*forms) @ cross  # C UᵀU
    size = n_branches * penalty.shape[0]
    branch_part = product[:size, :size]  # C_int U_intᵀU_int
    n_cells = float(gram.sum())
    q_trace, q_trace_sq = np.trace(branch_part), np.sum(branch_part * branch_part.T)
    return (
        np.trace(product),
        np.sum(product * product.T),
        n_cells - q_trace,
        n_cells - 2.0 * q_trace + q_trace_sq,
    )


def _explained_form(gram: np.ndarray, penalty: np.ndarray, lam: float) -> np.ndarray:
    """S = 2M⁻¹ − M⁻¹GM⁻¹, M = G + λP: a fit explains the form (Xᵀy)ᵀ S (Xᵀy) of Σ y²."""
    inverse = linalg.pinvh(gram + lam * penalty)
    return 2.0 * inverse - inverse @ gram @ inverse


def _check_cells(rows, times) -> tuple[np.ndarray, np.ndarray]:
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


def _f_test(rss_null, rss_alt, gain, gain_sq, residual, residual_sq) -> tuple[np.ndarray, np.ndarray]:
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


def _blank(degenerate: np.ndarray, fstat: np.ndarray, pvals: np.ndarray, *more: np.ndarray):
    """F = 0, p = 1 (and 0 for every further statistic, e.g. R²) for the degenerate genes."""
    out = [np.where(degenerate, 0.0, fstat), np.where(degenerate, 1.0, pvals)]
    return (*out, *(np.where(degenerate, 0.0, m) for m in more))


def benjamini_hochberg(pvals: np.ndarray) -> np.ndarray:
    """Benjamini–Hochberg adjusted p-values (q-values)."""
    pvals = np.asarray(pvals, dtype=float)
    if pvals.size == 0:
        return pvals.copy()
    return stats.false_discovery_control(pvals, method="bh")


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
    Gram matrices; the F test is :func:`_f_test`'s (Satterthwaite).
    """
    rows, times = _check_cells(rows, times)
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
    forms = [_explained_form(grams[l], basis.penalty, float(fits[l].lam[0])) for l in range(n_lineages)]
    product = linalg.block_diag(*forms) @ utu
    q_trace, q_trace_sq = float(np.trace(product)), float(np.sum(product * product.T))
    fstat, pvals = _f_test(
        rss0, sum(fit.rss for fit in fits),
        q_trace - 1.0, q_trace_sq - 1.0, n_cells - q_trace, n_cells - 2.0 * q_trace + q_trace_sq,
    )
    degenerate = stats_.n_varying < MIN_VARYING_CELLS
    fstat, pvals = _blank(degenerate, fstat, pvals)
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


def lineages(segments: dict[str, np.ndarray], roots) -> list[list[str]]:
    """Every root-to-leaf chain of segments (ids), one per leaf segment, ordered by leaf segment id.

    ``segments`` maps ids to node paths oriented away from the root(s), as
    ``tl.pseudotime`` stores them. A graph with a cycle has no unique way up
    from some leaf and raises a ValueError.
    """
    first = {name: int(path[0]) for name, path in segments.items()}
    last = {name: int(path[-1]) for name, path in segments.items()}
    roots = {int(r) for r in np.atleast_1d(roots)}
    leaves = sorted((name for name in segments
                     if not any(first[o] == last[name] and o != name for o in segments)), key=_segment_order)
    out = []
    for leaf in leaves:
        chain, here = [leaf], first[leaf]
        while here not in roots:
            arriving = [name for name in segments if last[name] == here and first[name] != here]
            if len(arriving) != 1 or len(chain) > len(segments):
                raise ValueError(
                    f"The way from the root to segment {leaf} is not unique; the association test needs a tree "
                    "(tl.rpg or tl.ddrtree), not a graph with cycles."
                )
            chain.append(arriving[0])
            here = first[arriving[0]]
        out.append(chain[::-1])
    return out


def lineage_membership(chains: list[list[str]]) -> tuple[list[str], np.ndarray]:
    """The segments on some lineage (ordered by id) and their S × L weights for :func:`association_test`.

    A segment that k of the lineages pass through weighs 1/k in each of them, 0 in the others.
    """
    on_lineage = sorted({segment for chain in chains for segment in chain}, key=_segment_order)
    index = {segment: i for i, segment in enumerate(on_lineage)}
    membership = np.zeros((len(on_lineage), len(chains)))
    for l, chain in enumerate(chains):
        membership[[index[segment] for segment in chain], l] = 1.0
    return on_lineage, membership / membership.sum(axis=1, keepdims=True)


def branch_cells(segments: dict[str, np.ndarray], branch_point: int, roots) -> tuple[list[str], list[list[str]]]:
    """Which segments form the trunk before a branch point and each branch after it.

    ``segments`` maps segment ids to node paths oriented away from the root
    (as ``tl.pseudotime`` stores them). The trunk is the chain of segments from
    a root to ``branch_point``; the branches are the segments that start at
    ``branch_point``, each with every segment downstream of it (its subtree).
    Returns (trunk segment ids, one list of segment ids per branch), branches
    ordered by segment id.
    """
    first = {name: int(path[0]) for name, path in segments.items()}
    last = {name: int(path[-1]) for name, path in segments.items()}
    roots = {int(r) for r in np.atleast_1d(roots)}
    children = sorted((name for name in segments if first[name] == branch_point and last[name] != branch_point),
                      key=_segment_order)
    if len(children) < 2:
        raise ValueError(
            f"Node {branch_point} is not a branch point of the pseudotime topology: {len(children)} segment(s) "
            "leave it away from the root. Pick one of uns[key]['branch_points'] (rerun tl.pseudotime after "
            "changing the root)."
        )
    trunk: list[str] = []
    here = branch_point
    while here not in roots:
        arriving = [name for name in segments if last[name] == here and first[name] != here]
        if len(arriving) != 1:
            raise ValueError(
                f"The way from the root to node {branch_point} is not unique ({len(arriving)} segments end at "
                f"node {here}); branch_test needs a tree around the branch point."
            )
        trunk.append(arriving[0])
        here = first[arriving[0]]
        if len(trunk) > len(segments):
            raise ValueError(f"No root leads to node {branch_point}; rerun tl.root and tl.pseudotime.")
    branches: list[list[str]] = []
    seen: set[str] = set(trunk)
    for child in children:
        members, frontier = [], [child]
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            members.append(name)
            frontier.extend(other for other in segments if first[other] == last[name] and other not in seen)
        branches.append(sorted(members, key=_segment_order))
    # In a tree the trunk and the branches share only the branch point; any other node in common closes a cycle.
    node_sets = [set(np.concatenate([segments[name] for name in group]).tolist()) - {branch_point}
                 for group in ([trunk] if trunk else []) + branches]
    for i, nodes_i in enumerate(node_sets):
        for nodes_j in node_sets[i + 1 :]:
            if nodes_i & nodes_j:
                raise ValueError(
                    f"The branches leaving node {branch_point} meet again (at node {min(nodes_i & nodes_j)}); the "
                    "graph has a cycle there and branch_test needs a tree. Use a principal tree (e.g. tl.rpg or "
                    "tl.ddrtree)."
                )
    return sorted(trunk, key=_segment_order), branches


def _segment_order(name: str):
    return (0, int(name), "") if name.isdigit() else (1, 0, name)
