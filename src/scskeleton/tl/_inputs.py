"""Resolving and validating what a tool reads from AnnData (one place for all tools)."""

from __future__ import annotations

import numbers

import numpy as np
from anndata import AnnData
from scipy import sparse

from .._core.validation import as_float_matrix, check_integer


def get_representation(adata: AnnData, *, use_rep: str, n_pcs: int | None) -> np.ndarray:
    """The cells × features matrix a tool fits, as finite float64.

    ``use_rep`` is ``"X"`` or an ``obsm`` key; ``n_pcs`` keeps its first
    columns. Sparse and integer matrices are converted to dense float64.
    """
    if not isinstance(adata, AnnData):
        raise TypeError(f"Expected an AnnData object; got {type(adata).__name__}.")
    if not isinstance(use_rep, str):
        raise ValueError(f"use_rep must be 'X' or a key of adata.obsm; got {use_rep!r}.")
    if use_rep == "X":
        if adata.X is None:
            raise KeyError("adata.X is empty; pass use_rep=<an obsm key> instead.")
        values, where = adata.X, "adata.X"
    elif use_rep in adata.obsm:
        values, where = adata.obsm[use_rep], f"adata.obsm[{use_rep!r}]"
    else:
        hint = " Run sc.pp.pca(adata) first" if use_rep == "X_pca" else " Compute it first"
        raise KeyError(
            f"adata.obsm[{use_rep!r}] not found.{hint}, or pass use_rep='X' or one of "
            f"{sorted(adata.obsm.keys())}."
        )
    if sparse.issparse(values):
        values = values.toarray()
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"{where} must be 2-D (cells × features); got shape {values.shape}.")
    if n_pcs is not None:
        n_pcs = check_integer("n_pcs", n_pcs, low=1, high=values.shape[1], role=f"columns of {where} to use")
        values = values[:, :n_pcs]
    return as_float_matrix(values, where)


def get_expression(adata: AnnData, *, layer: str | None):
    """The cells × genes matrix ``adata.X`` (``layer=None``) or ``adata.layers[layer]``,
    as stored (dense or sparse, not copied), and where it was found, for messages."""
    if not isinstance(adata, AnnData):
        raise TypeError(f"Expected an AnnData object; got {type(adata).__name__}.")
    if layer is None:
        if adata.X is None:
            raise KeyError("adata.X is empty; pass layer=<a key of adata.layers> instead.")
        values, where = adata.X, "adata.X"
    elif not isinstance(layer, str) or layer not in adata.layers:
        raise KeyError(f"adata.layers[{layer!r}] not found; use layer=None for adata.X or one of "
                       f"{sorted(adata.layers.keys())}.")
    else:
        values, where = adata.layers[layer], f"adata.layers[{layer!r}]"
    if not (sparse.issparse(values) or isinstance(values, np.ndarray)):
        raise TypeError(f"{where} must be a numpy array or a scipy sparse matrix; got {type(values).__name__} "
                        "(load backed data into memory first).")
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise ValueError(f"{where} must be numeric; got dtype {values.dtype}.")
    return values, where


def get_features(adata: AnnData, *, layer: str | None) -> np.ndarray:
    """:func:`get_expression` as dense, finite float64, for tools that weight the genes themselves."""
    values, where = get_expression(adata, layer=layer)
    if sparse.issparse(values):
        values = values.toarray()
    return as_float_matrix(np.asarray(values), where)


def check_random_state(random_state) -> int:
    """Seeds are non-negative integers, so results are reproducible and storable."""
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral) or random_state < 0:
        raise ValueError(f"random_state must be a non-negative integer; got {random_state!r}.")
    return int(random_state)


def check_key(key_added: str | None, default: str) -> str:
    """Resolve ``key_added``; it names the ``uns`` entry and prefixes obsm/obs keys.

    Keys become HDF5 group names in an h5ad file. ``/`` nests groups
    (``uns/a/b``) and then ``read_h5ad`` cannot read the whole file back, a
    NUL character cannot be stored, and ``"."``/``".."`` name the group itself
    or its parent: all are refused here, before any work is done.
    """
    key = default if key_added is None else key_added
    if not isinstance(key, str) or not key:
        raise ValueError(f"key_added must be a non-empty string; got {key_added!r}.")
    if "/" in key or "\x00" in key or key in (".", ".."):
        raise ValueError(
            f"key_added={key!r} cannot be stored in an .h5ad file: keys name HDF5 groups, so they must not "
            "contain '/' or NUL characters nor be '.' or '..'. Use e.g. '_' instead of '/'."
        )
    return key


def check_unique_obs_names(adata: AnnData, *, why: str) -> None:
    """Refuse duplicated cell names where cells are looked up or reported by name (``why`` says where)."""
    if not adata.obs_names.is_unique:
        raise ValueError(
            f"adata.obs_names are not unique, so {why}; run adata.obs_names_make_unique() first."
        )
