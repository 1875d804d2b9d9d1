"""``tl.trends``: the smooth trend of every gene along a path, a segment or the loop of a trajectory."""

from __future__ import annotations

from collections.abc import Sequence

from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.results import plain_params
from ..._anndata.schema import read_graph, resolve_key
from ..._core.stats import trends as trend_core
from .expression import MODEL, read_expression, run_test
from .results import log_finished, per_cell, warn_lowered_df, write_genes
from .selection import path_edges, trend_cells


def trends(
    adata: AnnData,
    key: str | None = None,
    *,
    path: tuple | None = None,
    segment: str | int | None = None,
    loop: bool = False,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    n_knots: int = 10,
    df: float | None = 6.0,
    n_grid: int = 100,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Smooth trend of every gene along a path or a segment of a trajectory, or round its loop.
    {model}
    Each trend is tested against a constant by an F test whose p-values
    come from its exact null under Gaussian noise (a saddlepoint
    approximation); they are corrected by
    Benjamini–Hochberg over the genes fitted.

    Parameters
    ----------
    adata
        Annotated data matrix with a graph, e.g. from ``tl.ddrtree`` or ``tl.rpg``.
    {key_fitted}
    path
        ``(start, end)``: node indices, milestone names (``("root", "tip 2")``)
        or ``(obs_key, value)`` groups, as in :func:`~scskeleton.tl.path`. The cells on the shortest graph path
        between them are fitted against their position along it (distance
        from ``start``), which is their pseudotime when ``start`` is the root.
    segment
        Instead of ``path``: a segment id of ``obs[f"{key}_segment"]`` (set by
        :func:`~scskeleton.tl.pseudotime`) or its label
        (``"fork 1 → tip 2"``, ``uns[key]["milestones"]["segment_labels"]``);
        its cells are fitted against their pseudotime.
    loop
        Instead of ``path`` or ``segment``: fit the cells round the graph's loop
        against their phase (``obs[f"{key}_phase"]``, set by
        :func:`~scskeleton.tl.phase`) with cyclic splines, whose curves return
        where they started after one turn (genes of the cell cycle). The test
        against a constant is the same.
    genes
        Genes to fit (names in ``var_names``, or in ``adata.var[gene_symbols]``,
        or a boolean mask over the genes); default all.
    layer
        Layer holding the expression; default ``adata.X``. Use log-normalised
        values: the model is Gaussian with constant variance.
    use_raw
        Fit ``adata.raw.X`` instead, for the genes of ``adata.var`` (the results
        fill their ``var`` / ``varm`` rows); not together with ``layer``.
        Default ``False``: unlike scanpy's plots, a tool does not switch to
        ``adata.raw`` because it exists. ``params`` records ``layer`` and
        ``use_raw``, and ``sks.pl.trends`` draws the cells from that matrix.
    gene_symbols
        An ``adata.var`` column that ``genes`` are named by, as in scanpy,
        instead of ``var_names``.
    n_knots
        Knots at quantiles of the cells' pseudotime, the two ends included;
        n_knots + 2 cubic B-splines. More knots allow sharper changes only when
        ``df`` rises too. Default 10.
    df
        Effective degrees of freedom of each curve, > 2 (a straight line has 2;
        3 is about a quadratic). Default 6, enough for a rise, a fall or one
        transient bump along the path; raise it for genes that change more
        often, lower it for more power on simple trends. ``None`` chooses λ
        per gene by generalised cross-validation (as ``make_smoothing_spline``);
        the curves follow sharp changes better, but the p-values then ignore
        that λ was chosen from the data and are optimistic (too many null
        genes below 0.05).
    n_grid
        Number of points of the common pseudotime grid the curves are stored on.
    key_added
        Name of the result; default ``f"{key}_trends"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"trends"``), ``params``, ``graph`` (= ``key``), ``grid``
        (the pseudotime of the curves' columns; with ``loop=True`` one turn of
        phase), ``knots``, ``n_cells``, ``time`` (``"position"``,
        ``"pseudotime"`` or ``"phase"``) and ``edges`` (the graph edges of the
        path or loop, ``{"path": E × 2}``, for ``pl.path``).
    ``adata.varm[f"{name}_curves"]``
        Genes × ``n_grid`` fitted curves (NaN for genes not fitted).
    ``adata.var[f"{name}_r2"]``, ``[f"{name}_pval"]``, ``[f"{name}_qval"]``, ``[f"{name}_edf"]``
        Fraction of the variance along the path explained by the trend, the
        p-value against a constant, its BH-adjusted q-value and the effective
        degrees of freedom (NaN for genes not fitted; genes constant on the
        path get R² = 0 and p = 1).
    ``adata.obs[f"{name}_time"]``
        The pseudotime (or position) each fitted cell entered with; NaN elsewhere.

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.branching_expression(1000)
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.ddrtree(adata)
    >>> sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    >>> sks.tl.pseudotime(adata, "ddrtree")
    >>> root = int(adata.uns["ddrtree"]["root"])
    >>> tips = [int(n) for n in adata.uns["ddrtree"]["leaves"] if n != root]
    >>> sks.tl.trends(adata, "ddrtree", path=(root, tips[0]))
    >>> sks.pl.trends(adata, "ddrtree_trends", ["gene_0", "gene_45"])
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    name = check_key(key_added, f"{key}_trends")
    if (path is not None) + (segment is not None) + bool(loop) != 1:
        raise ValueError("Give exactly one of path=(start, end), segment=<segment id> or loop=True.")
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    cells = trend_cells(adata, key, graph, path=path, segment=segment, loop=loop)

    start = logg.info(
        f"fitting trends of {expression.tested.size} genes along the {cells.where} ({cells.rows.size} cells)"
    )
    result = run_test(
        expression, cells.rows, trend_core.trend_test, cells.times, n_knots=n_knots, df=df, n_grid=n_grid,
        periodic=bool(loop),
    )
    warn_lowered_df(df, float(result.edf[0]))

    adata = adata.copy() if copy else adata
    write_genes(
        adata, name, expression.tested, varm=[("curves", result.curves)],
        var=[("r2", result.r2), ("pval", result.pvals), ("qval", result.qvals), ("edf", result.edf)],
    )
    adata.obs[f"{name}_time"] = per_cell(adata, cells.rows, cells.times)
    adata.uns[name] = {
        "method": "trends",
        "params": plain_params(dict(
            key=key,
            path=str(tuple(path)) if path is not None else "",
            segment=cells.segment if segment is not None else "",
            loop=bool(loop),
            **expression.source,
            n_genes=expression.tested.size,
            n_knots=n_knots,
            df=df if df is not None else "gcv",
            n_grid=n_grid,
        )),
        "graph": key,
        "grid": result.grid,
        "knots": result.knots,
        "n_cells": int(result.n_cells),
        "time": cells.time,
        "edges": {"path": path_edges(cells.nodes)},
    }
    log_finished(
        result, start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves'], var['{name}_r2', '{name}_pval', "
              f"'{name}_qval', '{name}_edf'], obs['{name}_time']"),
    )
    return adata if copy else None


trends.__doc__ = trends.__doc__.replace("{model}", MODEL)
fill_doc(trends)
