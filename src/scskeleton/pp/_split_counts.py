"""``pp.split_counts``: one half of the counts to learn the tree on, the other to test genes on."""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from .._anndata.inputs import check_key, check_random_state, get_expression
from .._anndata.results import plain_params
from .._core.stats import splitting as splitting_core


def split_counts(
    adata: AnnData,
    *,
    layer: str | None = None,
    fraction: float = 0.5,
    dispersion: float | str | np.ndarray | None = None,
    random_state: int | np.random.Generator | None = 0,
    key_added: tuple[str, str] = ("counts_tree", "counts_test"),
    copy: bool = False,
) -> AnnData | None:
    """Split raw counts into two independent halves: one to learn the tree on, one to test genes on.

    A gene that entered the principal components a tree was learned on is not
    a null gene for a test along that tree: the learner ordered the cells
    partly by that gene's own noise, and the gene tests (:func:`~scskeleton.tl.association_test`,
    :func:`~scskeleton.tl.branch_test`, :func:`~scskeleton.tl.fork_test`,
    :func:`~scskeleton.tl.trends`) then find it changing more often than their
    level says (see the documentation's background page on gene trends,
    *Genes that shaped the tree*).
    Count splitting removes that dependence: every count ``X`` is split into
    ``X_tree + X_test``, with ``X_tree | X ~ Binomial(X, fraction)``. For
    Poisson counts of mean μ the two halves are independent, Poisson of means
    ``fraction·μ`` and ``(1 − fraction)·μ`` (Neufeld et al. 2024, Biostatistics
    25:270): the same cells, the same genes, the same expected profile up to a
    factor, and noise of their own. Normalise and reduce ``X_tree`` as usual to
    learn the tree, and pass the normalised ``X_test`` to the tests as their
    ``layer``.

    For negative-binomial counts (variance μ + φμ²) binomial thinning leaves
    the halves correlated (by φμ / (2 + φμ) at ``fraction=0.5``); with
    ``dispersion=φ`` each count's share is drawn from ``Beta(fraction/φ,
    (1 − fraction)/φ)`` first (beta-binomial thinning), which makes the halves
    independent negative binomials when φ is the counts' dispersion
    (Neufeld, Dharamshi, Gao & Witten 2024, JMLR 25:57). φ is the
    dispersion of the counts *given* the cell's state, not of the whole data
    set (which the trajectory itself inflates): a φ larger than the truth
    makes the halves negatively correlated, a smaller one (``None``)
    positively.

    Parameters
    ----------
    adata
        Annotated data matrix with raw counts (non-negative integers, dense or
        sparse) in ``adata.X`` or ``layer``.
    layer
        Layer holding the counts; ``None`` reads ``adata.X``.
    fraction
        Share of every count given to the first half (the tree's), in (0, 1);
        default 0.5. The tests' power follows the second half's share.
    dispersion
        ``None`` (default): binomial thinning (exact for Poisson counts). A
        number ≥ 0, a column of ``adata.var`` or one value ≥ 0 per gene:
        negative-binomial dispersion φ for beta-binomial thinning.
    random_state
        Seed (an int, ``None`` for a fresh one that is recorded, or a
        :class:`numpy.random.Generator`).
    key_added
        The two layers written: the tree's half and the tests' half.
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.layers[key_added[0]]``, ``adata.layers[key_added[1]]``
        The two halves, of the counts' dtype, sparse (CSR) where the counts are;
        they add up to the counts.
    ``adata.uns["split_counts"]``
        ``params``.

    Examples
    --------
    >>> adata.layers["counts"] = adata.X.copy()
    >>> sks.pp.split_counts(adata, layer="counts")
    >>> adata.X = adata.layers["counts_tree"].copy()       # learn the tree on one half
    >>> sc.pp.normalize_total(adata); sc.pp.log1p(adata)
    >>> sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    >>> sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    >>> sks.tl.ddrtree(adata); sks.tl.root(adata, "ddrtree", group=("cell_type", "HSC"))
    >>> sks.tl.pseudotime(adata, "ddrtree")
    >>> adata.layers["test"] = adata.layers["counts_test"].copy()  # test on the other
    >>> sc.pp.normalize_total(adata, layer="test"); sc.pp.log1p(adata, layer="test")
    >>> sks.tl.association_test(adata, "ddrtree", layer="test")
    """
    counts, where = get_expression(adata, layer=layer)
    values = counts.data if sparse.issparse(counts) else np.asarray(counts)
    if values.dtype == bool or (values.size and not (np.all(np.isfinite(values)) and np.all(values >= 0)
                                                      and np.all(values == np.rint(values)))):
        raise ValueError(
            f"{where} must hold raw counts (non-negative integers) to be split; it holds other values "
            "(normalised or scaled?). Keep the counts before normalising, e.g. adata.layers['counts'] = "
            "adata.X.copy(), and pass layer='counts'."
        )
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not 0 < fraction < 1:
        raise ValueError(f"fraction must be a number strictly between 0 and 1 (the tree's share); got {fraction!r}.")
    phi, dispersion_param = _gene_dispersion(adata, dispersion)
    names = _layer_names(key_added, source=layer)
    seed = check_random_state(random_state)
    start = logg.info(f"splitting the counts of {where} ({fraction:g} / {1 - fraction:g})")
    first, second = splitting_core.split_counts(counts, float(fraction), phi, np.random.default_rng(seed))
    adata = adata.copy() if copy else adata
    adata.layers[names[0]], adata.layers[names[1]] = first, second
    adata.uns["split_counts"] = {
        "params": plain_params(dict(layer=where, fraction=float(fraction), dispersion=dispersion_param,
                                    random_state=seed, key_added=", ".join(names))),
    }
    logg.info("    finished", time=start,
              deep=f"added\n    layers[{names[0]!r}], layers[{names[1]!r}], uns['split_counts']")
    return adata if copy else None


def _gene_dispersion(adata: AnnData, dispersion) -> tuple[np.ndarray | None, str | float]:
    """φ per gene (``None``: binomial thinning) and how ``params`` records it."""
    if dispersion is None:
        return None, "none (binomial)"
    if isinstance(dispersion, str):
        if dispersion not in adata.var:
            raise KeyError(f"dispersion={dispersion!r} is not a column of adata.var; pass a number, one value per "
                           "gene, or None for Poisson counts.")
        phi, recorded = adata.var[dispersion].to_numpy(), f"var[{dispersion!r}]"
    elif isinstance(dispersion, numbers.Real) and not isinstance(dispersion, bool):
        phi, recorded = np.full(adata.n_vars, float(dispersion)), float(dispersion)
    else:
        phi, recorded = np.asarray(dispersion.to_numpy() if isinstance(dispersion, pd.Series) else dispersion), "per gene"
        if phi.shape != (adata.n_vars,):
            raise ValueError(f"dispersion must be one value per gene ({adata.n_vars}); got shape {phi.shape}.")
    if not np.issubdtype(phi.dtype, np.number) or not np.all(np.isfinite(phi) & (phi >= 0)):
        raise ValueError("dispersion must be finite and ≥ 0 (the negative-binomial φ of variance μ + φμ²; 0 for "
                         "Poisson counts).")
    return phi.astype(np.float64), recorded


def _layer_names(key_added, *, source: str | None) -> tuple[str, str]:
    if not isinstance(key_added, tuple | list) or len(key_added) != 2:
        raise ValueError(f"key_added must name two layers, the tree's half and the tests' half; got {key_added!r}.")
    names = tuple(check_key(name, name) for name in key_added)
    if names[0] == names[1] or source in names:
        raise ValueError(f"key_added must name two new layers, apart from each other and from the counts' layer "
                         f"{source!r}; got {key_added!r}.")
    return names
