"""``tl.association_test``: which genes change anywhere along a tree, every lineage at once."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.results import plain_params
from ..._anndata.schema import read_graph, resolve_key
from ..._core.stats import association as association_core
from .expression import read_expression, run_test
from .results import log_finished, warn_lowered_df, write_genes
from .selection import lineage_cells


def association_test(
    adata: AnnData,
    key: str | None = None,
    *,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Which genes change anywhere along the tree: every lineage at once, against a constant.

    A *lineage* is the chain of segments from the root to one leaf
    (``tl.pseudotime``'s segments, oriented away from the root). Each gene
    gets one smooth curve of pseudotime per lineage (penalised cubic
    splines with ``df`` effective degrees of freedom on one common basis,
    with each lineage's own quantile knots where a short lineage needs them);
    cells on a segment shared by k lineages enter each with weight 1/k, so
    every cell counts once. The curves are tested together against one
    constant by an F test (p-values from its exact null under Gaussian
    noise), corrected by Benjamini–Hochberg. The effect size is the
    amplitude: the largest max − min of a gene's curve over any lineage, in
    the units of the expression. Genes with fewer than 5 tested cells off
    their most common value get F = 0, p = 1 and amplitude 0. Sparse input
    is read in chunks of cells and never densified; a dask ``adata.X`` or
    layer is read chunk by chunk, in one pass over the cells, and never loaded.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
        It must be a tree.
    genes, layer, use_raw, gene_symbols, n_knots, n_grid
        As in :func:`trends`.
    df
        Effective degrees of freedom of every curve (> 2; default 6), lowered
        with a warning when the cells of a lineage cannot carry it.
    key_added
        Name of the result; default ``f"{key}_association"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"association_test"``), ``params``, ``graph``,
        ``lineages`` (``{leaf segment id: segment ids from the root}``),
        ``lineage_labels`` (``"root → tip 2"``, in the same order),
        ``grid``, ``knots``, ``df``, ``n_cells`` (per lineage).
    ``adata.varm[f"{name}_curves"]``
        Genes × lineages × ``n_grid`` curves, NaN outside a lineage's
        pseudotime range and for genes not tested.
    ``adata.var[f"{name}_F"]``, ``[f"{name}_pval"]``, ``[f"{name}_qval"]``, ``[f"{name}_amplitude"]``
        F statistic, p-value, BH-adjusted q-value and amplitude (NaN for
        genes not tested).

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.krumsiek11()
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.rpg(adata)
    >>> sks.tl.root(adata, "rpg", group=("cell_type", "progenitor"))
    >>> sks.tl.pseudotime(adata, "rpg")
    >>> sks.tl.association_test(adata, "rpg")
    >>> adata.var.sort_values("rpg_association_qval").head()
    """
    key = resolve_key(adata, key)
    read_graph(adata, key)
    name = check_key(key_added, f"{key}_association")
    lineages = lineage_cells(adata, key)
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    rows = lineages.rows
    start = logg.info(
        f"testing {expression.tested.size} genes for change along {len(lineages.chains)} lineage(s) of {key!r} "
        f"({rows.size} cells)"
    )
    result = run_test(
        expression, rows, association_core.association_test, lineages.pseudotime[rows], lineages.group[rows],
        lineages.membership, n_knots=n_knots, df=df, n_grid=n_grid,
    )
    warn_lowered_df(df, result.df)

    adata = adata.copy() if copy else adata
    write_genes(
        adata, name, expression.tested, varm=[("curves", result.curves)],
        var=[("F", result.fstat), ("pval", result.pvals), ("qval", result.qvals), ("amplitude", result.amplitude)],
    )
    adata.uns[name] = {
        "method": "association_test",
        "params": plain_params(dict(key=key, **expression.source, n_genes=expression.tested.size, n_knots=n_knots,
                                    df=df, n_grid=n_grid)),
        "graph": key,
        **lineages.fields(lineages.labels(adata, key)),
        "grid": result.grid,
        "knots": result.knots,
        "df": result.df,
        "n_cells": result.n_cells.astype(np.int64),
    }
    log_finished(
        result, start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves'], var['{name}_F', '{name}_pval', "
              f"'{name}_qval', '{name}_amplitude']"),
    )
    return adata if copy else None


fill_doc(association_test)
