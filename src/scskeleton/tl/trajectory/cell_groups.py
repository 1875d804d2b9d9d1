"""The cells a user names for a root or a path end: a group of an ``obs`` column, or the cells at
the extreme of an ``obs`` column or a gene."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
import scanpy as sc
from anndata import AnnData

from ..._anndata.inputs import check_unique_obs_names

#: ``obs_min`` / ``obs_max`` pick the root near the cells in this extreme quantile.
EXTREME_QUANTILE = 0.05


def select_cells(adata: AnnData, how: str, value) -> np.ndarray:
    """Positions of the cells a root criterion refers to."""
    if how == "cell":
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if not 0 <= value < adata.n_obs:
                raise ValueError(f"cell position {value} is outside [0, {adata.n_obs - 1}].")
            return np.array([int(value)])
        check_unique_obs_names(adata, why=f"cell={value!r} could name several cells")
        if value not in adata.obs_names:
            raise KeyError(f"cell {value!r} is not in adata.obs_names.")
        return np.flatnonzero(adata.obs_names == value)
    if how == "group":
        return group_cells(adata, value)
    values = obs_or_gene(adata, value)
    finite = np.isfinite(values)
    if not finite.any():
        raise ValueError(f"{value!r} has no finite values.")
    if how == "obs_min":
        cut = np.quantile(values[finite], EXTREME_QUANTILE)
        return np.flatnonzero(finite & (values <= cut))
    cut = np.quantile(values[finite], 1.0 - EXTREME_QUANTILE)
    return np.flatnonzero(finite & (values >= cut))


def group_labels(group) -> list | None:
    """The labels of ``group=(obs_key, [label, ...])`` (one root each); ``None`` for a single label."""
    if not (isinstance(group, tuple) and len(group) == 2) or not isinstance(group[1], list | np.ndarray | pd.Index):
        return None
    labels = list(group[1])
    if not labels:
        raise ValueError(f"group=(obs_key, [labels]) needs at least one label; got {group!r}.")
    return labels


def group_cells(adata: AnnData, group) -> np.ndarray:
    if not (isinstance(group, tuple) and len(group) == 2):
        raise ValueError(f"A group is given as (obs_key, value), e.g. ('cell_type', 'HSC'); got {group!r}.")
    column, label = group
    if column not in adata.obs:
        raise KeyError(f"{column!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    cells = np.flatnonzero((adata.obs[column] == label).to_numpy())
    if cells.size == 0:
        raise ValueError(f"No cell has adata.obs[{column!r}] == {label!r}.")
    return cells


def obs_or_gene(adata: AnnData, name: str) -> np.ndarray:
    if name not in adata.obs and name not in adata.var_names:
        raise KeyError(f"{name!r} is neither a column of adata.obs nor a gene in adata.var_names.")
    values = sc.get.obs_df(adata, keys=[name])[name]
    if not pd.api.types.is_numeric_dtype(values):
        raise ValueError(f"{name!r} is not numeric; obs_min/obs_max need numbers. Use group= for categories.")
    return values.to_numpy(dtype=float)
