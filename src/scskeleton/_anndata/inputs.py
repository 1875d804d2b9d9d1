"""Resolving and validating what a tool reads from AnnData (one place for all tools)."""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from .._core.graphs import graph_edges
from .._core.validation import (
    COUNT_CHECK_CELLS,
    as_float_matrix,
    check_cells_differ,
    check_integer,
    looks_like_counts,
    looks_scaled,
)
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


#: Whether adata.X looks scaled is read from at most this many cells, spread over them.
SCALED_SAMPLE_CELLS = 2000


def representation_source(adata: AnnData, use_rep: str):
    """``(matrix, genes, name)``: the expression ``use_rep`` was computed from, for ``"X"`` and
    ``"X_pca"`` — ``adata.X``, or the layer and genes scanpy's PCA recorded it read
    (``uns["pca"]["params"]``: ``layer``, ``mask_var``); ``genes`` indexes columns."""
    matrix, genes, name = adata.X, slice(None), "adata.X"
    params = adata.uns.get("pca", {}).get("params", {}) if use_rep == "X_pca" else {}
    if isinstance(params, Mapping):
        layer, mask = params.get("layer"), params.get("mask_var")
        if isinstance(layer, str) and layer in adata.layers:
            matrix, name = adata.layers[layer], f"adata.layers[{layer!r}]"
        if isinstance(mask, str) and mask in adata.var:
            genes = adata.var[mask].to_numpy(dtype=bool)
    return matrix, genes, name


def warn_if_counts(adata: AnnData, use_rep: str, method: str) -> bool:
    """Warn when a tree is about to be fitted on raw counts or on their principal components.

    For ``"X_pca"`` the PCA must be scanpy's (``uns["pca"]``) and its source
    (:func:`representation_source`) hold non-negative integers on its first
    :data:`~scskeleton._core.validation.COUNT_CHECK_CELLS` cells
    (:func:`~scskeleton._core.validation.looks_like_counts`); for ``"X"`` the
    same check on ``adata.X``. The leading components of unnormalised counts
    follow each cell's sequencing depth more than its state. Returns whether
    it warned.
    """
    if use_rep not in ("X", "X_pca") or (use_rep == "X_pca" and "pca" not in adata.uns):
        return False
    matrix, genes, name = representation_source(adata, use_rep)
    if not (isinstance(matrix, np.ndarray) or sparse.issparse(matrix)):
        return False  # a lazy matrix is not read for a warning
    if not looks_like_counts(sparse.csr_matrix(matrix[:COUNT_CHECK_CELLS])[:, genes]):
        return False
    read = "the principal components of " if use_rep == "X_pca" else ""
    logg.warning(
        f"{name} holds whole numbers, as raw counts do, and {method} is fitted on {read}them, so the tree may "
        "follow each cell's sequencing depth more than its state. Normalise first: "
        "sc.pp.normalize_total(adata); sc.pp.log1p(adata); sc.pp.pca(adata)."
    )
    return True


def warn_if_few_cells(n_cells: int, method: str) -> bool:
    """Warn when there are too few cells for a tree's forks to be told from noise
    (:data:`~scskeleton._core.trees.pruning.FEW_CELLS`). Returns whether it warned."""
    from .._core.trees.pruning import FEW_CELLS, MIN_BRANCH_CELLS

    if n_cells >= FEW_CELLS:
        return False
    logg.warning(
        f"{method} is fitted on {n_cells} cells, too few to tell forks from noise (a branch needs at least "
        f"{MIN_BRANCH_CELLS} cells, and below {FEW_CELLS} cells forks are often missed), so read the result as one "
        "curve through the cells, not as a test of whether they branch. Fit on more cells to look for branches."
    )
    return True


def warn_if_scaled(adata: AnnData, use_rep: str, method: str) -> bool:
    """Warn when a tree is about to be fitted on genes scaled to unit variance (``sc.pp.scale``).

    Read, on at most :data:`SCALED_SAMPLE_CELLS` cells, from the dense in-memory
    matrix the tree's representation came from: ``adata.X`` for ``X``, and for
    ``X_pca`` the layer and genes scanpy's PCA recorded it read
    (``uns["pca"]["params"]``: ``layer``, ``mask_var``). Scaling lifts weakly
    expressed, noisy genes to the weight of marker genes, and both learners lose
    short branches on the principal components of such data (see the
    documentation's background page on trusting a tree, *Known limits*).
    Returns whether it warned.
    """
    if use_rep not in ("X", "X_pca"):
        return False
    matrix, genes, name = representation_source(adata, use_rep)
    if not isinstance(matrix, np.ndarray):
        return False
    step = max(1, -(-adata.n_obs // SCALED_SAMPLE_CELLS))
    if not looks_scaled(np.asarray(matrix[::step][:, genes], dtype=float)):
        return False
    logg.warning(
        f"{name} looks scaled to unit variance per gene (sc.pp.scale), and {method} reads {use_rep!r} of it: "
        "scaling gives weakly expressed, noisy genes the weight of markers, so the tree may miss short branches. "
        "Fit on the principal components of log-normalised expression without scaling (keep it in a layer before "
        "sc.pp.scale and run sc.pp.pca(adata, layer=...)), and check the tree with sks.tl.branch_support."
    )
    return True


#: A tree fitted on ``adata.X`` with more columns than this is fitted on genes, not on a reduction.
MAX_GENE_COLUMNS = 100


def warn_if_genes(use_rep: str, n_columns: int, method: str) -> bool:
    """Warn when a tree is about to be fitted on hundreds of genes (``use_rep="X"``) rather than on
    their principal components.

    Each of many noisy genes adds its noise to every distance between cells, while the
    directions of the trajectory are few. On simulated 2–4-fate trees of 1,000 cells
    (``simulate_trajectory``, seeds 0–2) fitted on their 1,000 highly variable genes, DDRTree
    drew the right number of branch points in 6 of 9 runs (8 of 9 on 30 principal components of
    the same genes; median pseudotime Spearman 0.965 against 0.981), and RPG kept 16–71 of its
    nodes after pruning (83–96 on the components); on all 2,000 genes 9–21. DDRTree's projection
    step also solves a D × D eigenproblem: 172 s on 8,000 genes of 1,000 cells. Returns whether
    it warned.
    """
    if use_rep != "X" or n_columns <= MAX_GENE_COLUMNS:
        return False
    logg.warning(
        f"{method} reads {n_columns} columns of adata.X, so it is fitted on genes: each adds its noise to every "
        "distance, and the tree is noisier and slower than on their principal components. Run sc.pp.pca(adata) "
        "and fit on 'X_pca' (the default)."
    )
    return True


def warn_if_diffusion_map(adata: AnnData, use_rep: str, method: str) -> bool:
    """Warn when a tree is about to be fitted on scanpy's diffusion map (``sc.tl.diffmap``).

    ``obsm["X_diffmap"]`` holds the eigenvectors of the diffusion operator
    unweighted (each column of unit length) and, first, the trivial one of
    eigenvalue 1: a fine-scale component weighs as much as the trajectory's,
    and the learners draw trees that follow it (see the documentation's
    background page on trusting a tree, *Known limits*). Returns whether it warned.
    """
    if use_rep != "X_diffmap" or "diffmap_evals" not in adata.uns:
        return False
    logg.warning(
        f"{method} reads 'X_diffmap', scanpy's diffusion components unweighted (each of unit length, the first "
        "one constant), so fine-scale noise weighs as much as the trajectory and the tree may follow it. "
        "Fit on 'X_pca' (the default), or on the components weighted by their eigenvalues λ, e.g. "
        "adata.obsm['X_diffusion'] = adata.obsm['X_diffmap'][:, 1:] * λ / (1 - λ) with "
        "λ = adata.uns['diffmap_evals'][1:], and check the tree with sks.tl.branch_support."
    )
    return True


def get_representation(
    adata: AnnData, *, use_rep: str | None, n_pcs: int | None, lazy: bool = False, varying: bool = False
):
    """The cells × features matrix a tool fits, as finite float64.

    ``use_rep`` is ``"X"``, an ``obsm`` key, or ``None`` for ``"X_pca"`` when
    present and ``"X"`` otherwise (:func:`choose_representation`); ``n_pcs``
    keeps its first columns. Sparse and integer matrices are converted to
    dense float64. With ``lazy=True`` (tools with a chunked path) a dask
    array is returned as it is, sliced to ``n_pcs`` columns, never loaded:
    its values are checked and converted chunk by chunk by the fit.
    ``varying=True`` (the learners) refuses a matrix whose cells all have the
    same coordinates; a chunked fit checks that in its first pass.
    """
    use_rep = choose_representation(adata, use_rep)
    if use_rep == "X":
        if adata.X is None:
            raise KeyError("adata.X is empty; pass use_rep=<an obsm key> instead.")
        values, where = adata.X, expression_name(None)
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
    values = as_float_matrix(values, where)
    if varying:
        check_cells_differ(float(np.ptp(values, axis=0).max(initial=0.0)), where)
    return values


def expression_name(layer: str | None, use_raw: bool = False) -> str:
    """Where :func:`get_expression` reads the expression, for messages: ``"adata.X"``,
    ``"adata.layers['counts']"`` or ``"adata.raw.X"``."""
    if use_raw:
        return "adata.raw.X"
    return "adata.X" if layer is None else f"adata.layers[{layer!r}]"


def get_expression(adata: AnnData, *, layer: str | None, use_raw: bool = False, lazy: bool = False):
    """The cells × genes matrix ``adata.X`` (``layer=None``), ``adata.layers[layer]`` or, with
    ``use_raw=True``, ``adata.raw.X`` for the genes of ``adata.var_names`` (:func:`raw_expression`), as
    stored (dense or sparse, not copied), and where it was found, for messages.

    ``layer`` and ``use_raw`` mean what they mean in scanpy; passing both is an
    error, as there. With ``lazy=True`` (tools with a chunked path) a dask
    array is returned as it is, never loaded: its values are checked and
    converted chunk by chunk by the tool."""
    if not isinstance(adata, AnnData):
        raise TypeError(f"Expected an AnnData object; got {type(adata).__name__}.")
    if not isinstance(use_raw, bool | np.bool_):
        raise ValueError(f"use_raw must be True or False; got {use_raw!r}.")
    if use_raw:
        if layer is not None:
            raise ValueError(f"Pass either use_raw=True or layer={layer!r}, not both (as in scanpy).")
        values, where = raw_expression(adata), expression_name(None, use_raw=True)
    elif layer is None:
        if adata.X is None:
            raise KeyError("adata.X is empty; pass layer=<a key of adata.layers> instead.")
        values, where = adata.X, expression_name(None)
    elif not isinstance(layer, str) or layer not in adata.layers:
        raise KeyError(f"adata.layers[{layer!r}] not found; use layer=None for adata.X or one of "
                       f"{sorted(adata.layers.keys())}.")
    else:
        values, where = adata.layers[layer], expression_name(layer)
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


def raw_expression(adata: AnnData):
    """``adata.raw.X`` with the columns of ``adata.var_names``, in their order.

    Gene-level results are stored per gene of ``adata.var`` (``var``/``varm``
    columns), so ``use_raw`` reads the raw values of those genes; ``adata.raw``
    usually holds more (all genes before a highly-variable selection). Not a
    copy when the genes are the same; otherwise only those columns are copied.
    """
    raw = adata.raw
    if raw is None:
        raise ValueError("use_raw=True, but adata.raw is None: set adata.raw = adata before filtering or scaling "
                         "the genes, or pass layer= instead.")
    if raw.var_names.equals(adata.var_names):
        return raw.X
    if not raw.var_names.is_unique:
        raise ValueError("adata.raw.var_names are not unique, so use_raw cannot tell which raw column is which gene.")
    index = raw.var_names.get_indexer(adata.var_names)
    missing = adata.var_names[index < 0]
    if missing.size:
        raise KeyError(f"use_raw=True reads the genes of adata.var from adata.raw, but {missing.size} of them are "
                       f"not in adata.raw.var_names: {list(missing[:5])}.")
    return raw.X[:, index]


def check_gene_symbols(adata: AnnData, gene_symbols: str | None) -> None:
    """KeyError unless ``gene_symbols`` is ``None`` or a column of ``adata.var`` (scanpy's ``gene_symbols``)."""
    if gene_symbols is not None and (not isinstance(gene_symbols, str) or gene_symbols not in adata.var.columns):
        raise KeyError(f"gene_symbols={gene_symbols!r} is not a column of adata.var; columns: "
                       f"{list(adata.var.columns)}.")


def gene_columns(adata: AnnData, genes, *, gene_symbols: str | None = None) -> np.ndarray | None:
    """Column indices into ``adata.var`` of ``genes`` (``None``: all genes), named by ``var_names`` or, as
    scanpy's ``gene_symbols``, by the ``adata.var`` column ``gene_symbols`` (compared as strings), or
    picked by a boolean mask with one value per gene."""
    check_gene_symbols(adata, gene_symbols)
    if genes is None:
        return None
    genes = [genes] if isinstance(genes, str) else list(genes)
    if not genes:
        raise ValueError("genes is empty; pass gene names or None for all genes.")
    if all(isinstance(gene, (bool, np.bool_)) for gene in genes):
        if len(genes) != adata.n_vars:
            raise ValueError(f"genes as a boolean mask needs one value per gene ({adata.n_vars}); got {len(genes)}.")
        index = np.flatnonzero(np.asarray(genes, dtype=bool))
        if not index.size:
            raise ValueError("genes (a boolean mask) selects no gene; pass gene names or None for all genes.")
        return index.astype(np.intp)
    if gene_symbols is None:
        where = "adata.var_names"
        if not adata.var_names.is_unique:
            raise ValueError("adata.var_names are not unique; run adata.var_names_make_unique() first.")
        index = adata.var_names.get_indexer(genes)
    else:
        where = f"adata.var[{gene_symbols!r}]"
        genes = [str(gene) for gene in genes]  # as the symbols are read: a numeric column names gene 4 "4"
        names = pd.Index(adata.var[gene_symbols].astype(str))
        # a symbol column may repeat a name elsewhere; only the genes asked for must be unambiguous
        repeated = names.duplicated(keep=False)
        ambiguous = sorted(set(genes) & set(names[repeated]))
        if ambiguous:
            raise ValueError(f"{ambiguous[:5]} name several genes in {where}; name them by var_names instead "
                             "(gene_symbols=None).")
        positions = pd.Series(np.arange(names.size), index=names)[~repeated]
        index = positions.reindex(genes).fillna(-1).to_numpy(dtype=np.intp)
    unknown = [gene for gene, position in zip(genes, index) if position < 0]
    if unknown:
        raise KeyError(f"{len(unknown)} gene(s) not in {where}: {unknown[:5]}{' …' if len(unknown) > 5 else ''}.")
    if np.unique(index).size != index.size:
        raise ValueError("genes lists a gene more than once.")
    return index.astype(np.intp)


def get_features(adata: AnnData, *, layer: str | None) -> np.ndarray:
    """:func:`get_expression` as dense, finite float64, for tools that weight the genes themselves
    (whose cells must differ, as for the learners' representation)."""
    values, where = get_expression(adata, layer=layer)
    if sparse.issparse(values):
        values = values.toarray()
    values = as_float_matrix(np.asarray(values), where)
    check_cells_differ(float(np.ptp(values, axis=0).max(initial=0.0)), where)
    return values


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


def neighbors_edges(adata: AnnData, neighbors_key: str | None, *, n_neighbors: int | None,
                    n_landmarks: int | None, method: str) -> np.ndarray | None:
    """The candidate edges (E × 2, i < j) a cell-level learner reuses from ``sc.pp.neighbors``, or ``None``
    (``neighbors_key=None``) for the learner to build its own kNN graph.

    The graph is read by :func:`stored_neighbors`. The
    edges are the stored entries of the distances, each cell's nearest
    neighbours, in either direction (the connectivities' when no distances are
    stored): the symmetrised kNN graph the learner would build.
    ``n_neighbors`` (the learner's own graph) and landmarks (``n_landmarks``,
    a graph over other points) conflict with it and raise a ValueError.
    """
    if neighbors_key is None:
        return None
    if not isinstance(neighbors_key, str):
        raise ValueError(f"neighbors_key must be a key of adata.uns written by sc.pp.neighbors, or None; "
                         f"got {neighbors_key!r}.")
    if n_neighbors is not None:
        raise ValueError(f"Pass either n_neighbors= ({method} builds its own kNN graph) or neighbors_key= (it "
                         "reuses the graph of sc.pp.neighbors), not both.")
    if n_landmarks is not None:
        raise ValueError(
            f"neighbors_key={neighbors_key!r} gives a graph over the cells, but {method} is fitted on "
            f"{n_landmarks:,} k-means landmarks here (n_landmarks, or more cells than its exact limit), which get "
            "a kNN graph of their own. Leave neighbors_key=None, or fit the exact method on fewer cells."
        )
    graph, where = stored_neighbors(adata, neighbors_key)
    edges = graph_edges(graph)
    if edges.shape[0] == 0:
        raise ValueError(f"{where} holds no edge between two cells; rerun sc.pp.neighbors on this AnnData.")
    return edges


def stored_neighbors(adata: AnnData, neighbors_key: str, *, fields=("distances", "connectivities")):
    """The first of ``fields`` that ``sc.pp.neighbors`` stored under ``neighbors_key``, and where it is.

    Read as scanpy reads it: ``adata.uns[neighbors_key]`` names the ``obsp``
    matrices in ``distances_key`` / ``connectivities_key`` (for ``"neighbors"``
    they default to ``"distances"`` / ``"connectivities"``; graphs of old
    scanpy versions, stored in the ``uns`` entry itself, are read too).
    ``KeyError`` when none is there, ``ValueError`` when it is over other cells.
    """
    if not isinstance(neighbors_key, str):
        raise ValueError(f"neighbors_key must be a key of adata.uns written by sc.pp.neighbors; got {neighbors_key!r}.")
    entry = adata.uns.get(neighbors_key)
    hint = "sc.pp.neighbors(adata)" if neighbors_key == "neighbors" else \
        f"sc.pp.neighbors(adata, key_added={neighbors_key!r})"
    if not isinstance(entry, Mapping):
        raise KeyError(f"neighbors_key={neighbors_key!r} names no neighbors graph in adata.uns; run {hint} first, "
                       f"or pass the key_added you used. Keys in .uns: {sorted(map(str, adata.uns))}.")
    default = neighbors_key == "neighbors"
    graph, where = None, None
    for field in fields:
        name = entry.get(f"{field}_key", field if default else None)
        if name is not None and name in adata.obsp:
            graph, where = adata.obsp[name], f"adata.obsp[{name!r}]"
            break
        if field in entry:  # scanpy < 1.5 kept the graph in uns itself
            graph, where = entry[field], f"adata.uns[{neighbors_key!r}][{field!r}]"
            break
    if graph is None:
        raise KeyError(f"adata.uns[{neighbors_key!r}] names no {' or '.join(fields)} in adata.obsp; "
                       f"rerun {hint}.")
    if graph.shape != (adata.n_obs, adata.n_obs):
        raise ValueError(f"{where} has shape {graph.shape}, but adata has {adata.n_obs} cells: the graph was "
                         f"computed on other cells (a subset?). Rerun {hint} on this AnnData.")
    return graph, where


#: ``obs`` columns of scanpy's quality metrics that count the genes detected in each cell.
DETECTED_COLUMNS = ("n_genes_by_counts", "n_genes")
#: A matrix whose zeros are detections has at least this share of zeros (scaled values have none).
MIN_ZERO_SHARE = 0.05


def detected_genes(adata: AnnData, rows: np.ndarray) -> tuple[np.ndarray | None, str]:
    """The number of detected genes of the cells ``rows`` and where it was read: the non-zeros of
    ``adata.X`` (in memory, with zeros for undetected genes: counts or log-normalised values, not
    scaled ones), else ``obs["n_genes_by_counts"]`` or ``obs["n_genes"]`` (scanpy's quality
    metrics); ``None`` where neither is there. Only those rows of ``X`` are read."""
    matrix = adata.X
    if matrix is not None and not is_dask(matrix) and 0 not in matrix.shape:
        matrix = matrix[rows]
        if sparse.issparse(matrix):
            csr = sparse.csr_matrix(matrix)
            stored = np.diff(csr.indptr)
            explicit_zeros = np.bincount(np.repeat(np.arange(csr.shape[0]), stored)[csr.data == 0],
                                         minlength=csr.shape[0])
            detected = stored - explicit_zeros
            zeros = 1.0 - detected.sum() / float(np.prod(csr.shape))
        else:
            dense = np.asarray(matrix)
            detected = np.count_nonzero(dense, axis=1)
            zeros = 1.0 - detected.sum() / float(dense.size)
        if zeros >= MIN_ZERO_SHARE:
            return np.asarray(detected, dtype=float), expression_name(None)
    for column in DETECTED_COLUMNS:
        if column in adata.obs and pd.api.types.is_numeric_dtype(adata.obs[column]):
            return adata.obs[column].to_numpy(dtype=float)[rows], f"obs[{column!r}]"
    return None, ""
