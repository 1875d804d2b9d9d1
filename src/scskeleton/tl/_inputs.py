"""Resolving and validating what a tool reads from AnnData (one place for all tools)."""

from __future__ import annotations

import numbers

import numpy as np
from anndata import AnnData
from scipy import sparse

from .._core.validation import as_float_matrix, check_integer
from .._dask import is_dask


def choose_representation(adata: AnnData, use_rep: str | None) -> str:
    """The representation a tool fits: ``use_rep`` as given, or for ``None``
    ``"X_pca"`` when ``adata.obsm`` holds it and ``"X"`` otherwise (as
    scanpy's ``_choose_representation`` does). Learners record the name this
    returns in their ``params``."""
    if not isinstance(adata, AnnData):
        raise TypeError(f"Expected an AnnData object; got {type(adata).__name__}.")
    if use_rep is None:
        return "X_pca" if "X_pca" in adata.obsm else "X"
    if not isinstance(use_rep, str):
        raise ValueError(f"use_rep must be None, 'X' or a key of adata.obsm; got {use_rep!r}.")
    return use_rep


def get_representation(adata: AnnData, *, use_rep: str | None, n_pcs: int | None, lazy: bool = False):
    """The cells × features matrix a tool fits, as finite float64.

    ``use_rep`` is ``"X"``, an ``obsm`` key, or ``None`` for ``"X_pca"`` when
    present and ``"X"`` otherwise (:func:`choose_representation`); ``n_pcs``
    keeps its first columns. Sparse and integer matrices are converted to
    dense float64. With ``lazy=True`` (tools with a chunked path) a dask
    array is returned as it is, sliced to ``n_pcs`` columns, never loaded:
    its values are checked and converted chunk by chunk by the fit.
    """
    use_rep = choose_representation(adata, use_rep)
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
    if lazy and is_dask(values):
        if values.ndim != 2:
            raise ValueError(f"{where} must be 2-D (cells × features); got shape {values.shape}.")
        if not np.issubdtype(values.dtype, np.number):
            raise ValueError(f"{where} must be numeric; got dtype {values.dtype}.")
        if n_pcs is not None:
            n_pcs = check_integer("n_pcs", n_pcs, low=1, high=values.shape[1], role=f"columns of {where} to use")
            values = values[:, :n_pcs]
        return values
    if sparse.issparse(values):
        values = values.toarray()
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"{where} must be 2-D (cells × features); got shape {values.shape}.")
    if n_pcs is not None:
        n_pcs = check_integer("n_pcs", n_pcs, low=1, high=values.shape[1], role=f"columns of {where} to use")
        values = values[:, :n_pcs]
    return as_float_matrix(values, where)


def get_expression(adata: AnnData, *, layer: str | None, lazy: bool = False):
    """The cells × genes matrix ``adata.X`` (``layer=None``) or ``adata.layers[layer]``,
    as stored (dense or sparse, not copied), and where it was found, for messages.

    With ``lazy=True`` (tools with a chunked path) a dask array is returned as
    it is, never loaded: its values are checked and converted chunk by chunk
    by the tool."""
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
    chunked = lazy and is_dask(values)
    if chunked and values.ndim != 2:
        raise ValueError(f"{where} must be 2-D (cells × genes); got shape {values.shape}.")
    if not (chunked or sparse.issparse(values) or isinstance(values, np.ndarray)):
        hint = ("load it into memory first (this tool has no chunked path)" if is_dask(values)
                else "load backed data into memory first")
        raise TypeError(f"{where} must be a numpy array or a scipy sparse matrix; got {type(values).__name__} "
                        f"({hint}).")
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise ValueError(f"{where} must be numeric; got dtype {values.dtype}.")
    return values, where


def get_features(adata: AnnData, *, layer: str | None) -> np.ndarray:
    """:func:`get_expression` as dense, finite float64, for tools that weight the genes themselves."""
    values, where = get_expression(adata, layer=layer)
    if sparse.issparse(values):
        values = values.toarray()
    return as_float_matrix(np.asarray(values), where)


#: Seeds drawn for ``random_state=None`` or from a Generator lie in [0, SEED_LIMIT): storable (int64) and
#: accepted by every numpy seeding interface, ``RandomState`` included.
SEED_LIMIT = 2**32


def check_random_state(random_state) -> int:
    """Resolve ``random_state`` to the non-negative integer seed the solvers use and ``params`` records.

    - an ``int`` ≥ 0 is used as given;
    - ``None`` draws a fresh seed from the operating system's entropy (via
      numpy): results differ from run to run, but the seed drawn is recorded
      in ``adata.uns[key]["params"]["random_state"]``, so passing it back
      reproduces the result;
    - a :class:`numpy.random.Generator` (or legacy
      :class:`numpy.random.RandomState`) gives one integer seed drawn from it,
      so a seeded Generator reproduces the result, and the result equals the
      one obtained with that integer.
    """
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, dtype=np.uint64)[0] % SEED_LIMIT)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(SEED_LIMIT))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(SEED_LIMIT, dtype=np.int64))
    if isinstance(random_state, bool) or not isinstance(random_state, numbers.Integral) or random_state < 0:
        raise ValueError(
            "random_state must be None, a non-negative integer or a numpy.random.Generator; "
            f"got {random_state!r}."
        )
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
