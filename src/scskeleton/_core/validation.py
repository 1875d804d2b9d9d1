"""Checks on arrays and parameters shared by every solver.

Each check raises a ``ValueError`` that names the offending argument, what was
received and how to fix it, before any work is done.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy import sparse


def as_float_matrix(values, name: str = "X") -> np.ndarray:
    """Return ``values`` as a finite, C-contiguous float64 N × D array."""
    array = np.asarray(values)
    if array.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array of cells × features; got shape {array.shape}.")
    if not (np.issubdtype(array.dtype, np.number) or array.dtype == bool):
        raise ValueError(f"{name} must be numeric; got dtype {array.dtype}.")
    array = np.ascontiguousarray(array, dtype=np.float64)
    if not np.isfinite(array).all():
        bad = int((~np.isfinite(array)).any(axis=1).sum())
        raise ValueError(
            f"{name} contains NaN or infinite values in {bad} cell(s); remove or impute them first."
        )
    return array


def check_cells_differ(spread: float, name: str = "X") -> None:
    """Refuse a representation in which every cell has the same coordinates.

    ``spread`` is any measure that is zero exactly then (the largest range of a
    column, or the centred data's total sum of squares). A learner handed such
    data has no structure to fit: the k-means seeding collapses onto one point
    and the tree, graph or embedding it returns is an artefact of round-off.
    """
    if not spread > 0:
        raise ValueError(
            f"Every cell has the same coordinates in {name}: there is no structure to fit. "
            "Check the preprocessing, or pass the representation you meant as use_rep=."
        )


def check_positive(name: str, value, *, role: str = "", allow_zero: bool = False) -> float:
    """Validate a real parameter that must be > 0 (or >= 0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number{role and ' (' + role + ')'}; got {value!r}.")
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}{role and ' (' + role + ')'}; got {value!r}.")
    return float(value)


def check_positive_or_inf(name: str, value, *, role: str = "") -> float:
    """Validate a parameter that must be > 0 and may be ``np.inf`` (e.g. an optional bound)."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and value == np.inf:
        return np.inf
    return check_positive(name, value, role=role)


def check_integer(name: str, value, *, low: int, high: int | None = None, role: str = "") -> int:
    """Validate an integer parameter in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer{role and ' (' + role + ')'}; got {value!r}.")
    if value < low or (high is not None and value > high):
        span = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {span}{role and ' (' + role + ')'}; got {value}.")
    return int(value)


#: Columns of a sample look scaled (``sc.pp.scale``) when they take negative values (log-normalised
#: expression never does) and their standard deviation lies within these bounds (1 where the genes were
#: scaled, a little less where ``max_value`` clips them, 0.85–1.07 in a subset of the cells, e.g. one
#: lineage) ...
SCALED_SD = (0.5, 1.5)
#: ... for at least this share of at least this many varying columns.
SCALED_SHARE, SCALED_MIN_COLUMNS = 0.9, 10


def looks_scaled(sample: np.ndarray) -> bool:
    """Whether the columns (genes) of a sample of cells look scaled to unit variance around 0.

    Log-normalised expression is never negative and, for a weakly expressed gene,
    has a small spread; a gene scaled by ``sc.pp.scale`` is centred (its zeros
    become negative) with standard deviation 1, and still near 1 in a subset of
    the cells, whose means need not be 0. Only a matrix most of whose columns
    look so counts; a handful of such genes among others does not, nor do
    centred genes of unequal spread (centring alone leaves the principal
    components as they are).
    """
    if sample.ndim != 2 or sample.shape[1] < SCALED_MIN_COLUMNS or sample.shape[0] < 3:
        return False
    spreads = sample.std(axis=0)
    varying = spreads > 0  # a gene with no counts stays constant when scaled: it says nothing either way
    if varying.sum() < SCALED_MIN_COLUMNS:
        return False
    spreads, lowest = spreads[varying], sample.min(axis=0)[varying]
    scaled = (lowest < 0) & (spreads > SCALED_SD[0]) & (spreads < SCALED_SD[1])
    return bool(scaled.mean() >= SCALED_SHARE)


#: Cells (the first ones) whose values :func:`looks_like_counts` is shown.
COUNT_CHECK_CELLS = 500


def looks_like_counts(sample) -> bool:
    """Whether a sample of cells (cells × genes, dense or sparse) holds only non-negative integers, not all
    zero, as raw counts do. Log-normalised values, Pearson residuals and scaled values never do."""
    values = sample.data if sparse.issparse(sample) else np.asarray(sample)
    if not values.size or not np.any(values):
        return False
    return bool(np.all(values >= 0) and np.all(values == np.round(values)))
