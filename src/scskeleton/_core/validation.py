"""Checks on arrays and parameters shared by every solver.

Each check raises a ``ValueError`` that names the offending argument, what was
received and how to fix it, before any work is done.
"""

from __future__ import annotations

import numbers

import numpy as np


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
