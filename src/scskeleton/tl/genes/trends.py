"""``tl.trends`` and ``tl.branch_test``: gene expression along paths and across branches."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import check_key, expression_name, gene_columns, get_expression
from ..._anndata.results import plain_params
from ..._anndata.schema import (
    MAIN_MATRIX,
    phase_key,
    pseudotime_key,
    read_graph,
    resolve_key,
    segment_key,
    unique_names,
)
from ..._anndata.threads import chunked_solver_threads
from ..._core.stats import association as association_core
from ..._core.stats import branches as branch_core
from ..._core.stats import inference, splines
from ..._core.stats import lineages as lineage_core
from ..._core.stats import trends as trend_core
from ..._core.trees import trajectory as trajectory_core
from ..._core.validation import COUNT_CHECK_CELLS, looks_like_counts
from ..._dask import is_dask, require_dask
from ..trajectory.milestones import (
    lineage_label,
    milestone_name,
    node_name,
    resolve_node,
    resolve_segment,
    segment_label,
)
from ..trajectory.pseudotime import _path_end
from ..trajectory.pseudotime import path as path_cells

_MODEL = """
    Each gene's expression y is fitted against pseudotime t by a penalised
    regression spline, f = argmin Σ_i (y_i − f(t_i))² + λ ∫ f''(t)² dt, on
    cubic B-splines with ``n_knots`` knots at quantiles of t (the criterion
    of :func:`scipy.interpolate.make_smoothing_spline`). The RPG paper fits
    a quadratic along each path from normal tissue to a tumour subtype
    (§6.5, Fig. 8c–d); the spline has the same role with a tunable
    flexibility: ``df`` effective degrees of freedom (the trace of the hat
    matrix). All genes are fitted by one multi-column solve from their
    sufficient statistics, and sparse expression is read in chunks of cells,
    never densified. A dask ``adata.X`` or layer is read chunk by chunk, in one
    pass over the cells, and never loaded. See the documentation's background
    page on gene trends.
"""


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
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
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
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields (``name`` = ``key_added``):

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
    matrix, source = _expression(adata, layer, use_raw)
    columns = gene_columns(adata, genes, gene_symbols=gene_symbols)
    if path is not None:
        if not (isinstance(path, tuple | list) and len(path) == 2):
            raise ValueError(f"path must be (start, end), each a node index or (obs_key, value); got {path!r}.")
        first, last = (_path_end(adata, graph, end, which) for end, which in zip(path, ("start", "end")))
        if first == last:
            raise ValueError(f"The path starts and ends at {node_name(adata, key, first)}; give two different ends.")
        frame = path_cells(adata, key, path[0], path[1])
        rows = adata.obs_names.get_indexer(frame.index)
        times = frame["position"].to_numpy()
        nodes = trajectory_core.node_path(graph.adjacency, graph.nodes, first, last)
        time_kind, where = "position", f"path {node_name(adata, key, first)} → {node_name(adata, key, last)}"
    elif loop:
        if phase_key(key) not in adata.obs or "loop" not in adata.uns[key]:
            raise KeyError(f"{key!r} has no phase yet: run sks.tl.phase(adata, {key!r}) first.")
        phase = adata.obs[phase_key(key)].to_numpy(dtype=float)
        rows = np.flatnonzero(np.isfinite(phase))
        times = phase[rows]
        loop_nodes = np.asarray(adata.uns[key]["loop"], dtype=np.int64)
        nodes = np.append(loop_nodes, loop_nodes[:1])
        time_kind, where = "phase", "loop"
    else:
        segment, nodes = _segment(adata, key, segment)
        labels = adata.obs[segment_key(key)].astype(str).to_numpy()
        pseudotime = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
        rows = np.flatnonzero((labels == segment) & np.isfinite(pseudotime))
        times = pseudotime[rows]
        time_kind, where = "pseudotime", f"segment {segment_label(adata.uns[key], segment)}"
    if rows.size < 3:
        raise ValueError(f"The {where} of {key!r} holds {rows.size} cells; a trend needs more. Pick a longer path.")

    start = logg.info(f"fitting trends of {_count(columns, adata)} genes along the {where} ({rows.size} cells)")
    _warn_if_counts(matrix, source, rows)
    with _reading_threads(matrix):
        result = trend_core.trend_test(
            matrix, rows, times, n_knots=n_knots, df=df, n_grid=n_grid, columns=columns, periodic=bool(loop)
        )
    _warn_lowered_df(df, float(result.edf[0]))

    adata = adata.copy() if copy else adata
    fitted = np.arange(adata.n_vars) if columns is None else columns
    curves = np.full((adata.n_vars, result.grid.size), np.nan)
    curves[fitted] = result.curves
    adata.varm[f"{name}_curves"] = curves
    for suffix, values in (("r2", result.r2), ("pval", result.pvals), ("qval", result.qvals), ("edf", result.edf)):
        adata.var[f"{name}_{suffix}"] = _per_gene(adata, fitted, values)
    adata.obs[f"{name}_time"] = _per_cell(adata, rows, times)
    adata.uns[name] = {
        "method": "trends",
        "params": plain_params(dict(
            key=key,
            path=str(tuple(path)) if path is not None else "",
            segment=segment if segment is not None else "",
            loop=bool(loop),
            **source,
            n_genes=fitted.size,
            n_knots=n_knots,
            df=df if df is not None else "gcv",
            n_grid=n_grid,
        )),
        "graph": key,
        "grid": result.grid,
        "knots": result.knots,
        "n_cells": int(result.n_cells),
        "time": time_kind,
        "edges": {"path": _path_edges(nodes)},
    }
    logg.info(
        f"    finished ({int((result.qvals < 0.05).sum())} genes with q < 0.05{_degenerate_note(result)})",
        time=start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves'], var['{name}_r2', '{name}_pval', "
              f"'{name}_qval', '{name}_edf'], obs['{name}_time']"),
    )
    return adata if copy else None


trends.__doc__ = trends.__doc__.replace("{model}", _MODEL)


def branch_test(
    adata: AnnData,
    key: str | None = None,
    *,
    branch_point: int | str,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "both",
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Which genes' trends differ between the branches leaving a branch point.

    In the spirit of Monocle's BEAM (branch expression analysis modelling), a
    shared trend of each gene over all cells is compared with one trend per
    branch, by an F test (p-values from its exact null under Gaussian
    noise, a saddlepoint approximation) with Benjamini–Hochberg correction.
    The null's noise is around one shared curve, fitted with ``df + 2``
    degrees of freedom, so that the different smoothing of a switch-like
    shared trend on branches whose cells lie at different times is not
    read as a difference between them. A sparse
    gene whose expressing cells a branch would hold fewer than 10 of were it
    alike in every branch must also pass a count test there (its few
    non-zero values are not Gaussian; :func:`~scskeleton._core.stats.inference.sparse_count_pvalues`).
    The expressing cells are found on log-normalised values, scaled or not,
    and on Pearson residuals or ``sc.pp.regress_out`` output alike.
    {model}
    Which cells enter: the trajectory's segments are oriented away from the
    root (``tl.pseudotime``). The *trunk* is the chain of segments from the
    root to ``branch_point``; each *branch* is a segment leaving
    ``branch_point`` together with every segment downstream of it (its
    subtree). Cells elsewhere (other forks upstream, other components) are
    left out. As in BEAM the trunk cells enter every branch's curve, here
    with weight 1/B for B branches, so that every cell carries a total weight
    of one and the F test counts it once; each branch curve and the shared
    curve use ``df`` effective degrees of freedom on one common basis (knots
    at ``n_knots`` quantiles of the cells' pseudotimes; where a short branch
    beside a long one would then fall within too few knots to carry ``df``,
    each branch curve's own quantiles, merged).

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.pseudotime(adata, key)`` has run.
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
    branch_point
        The fork: a node index, one of ``adata.uns[key]["branch_points"]``, or
        its milestone name (``"fork 1"``).
    genes, layer, use_raw, gene_symbols, n_knots, n_grid
        As in :func:`trends`.
    df
        Effective degrees of freedom of each curve (> 2). Enough for the
        shared trend: when it cannot follow a gene, branches of unequal
        length fit it unequally well; the null counts that difference, at
        some cost in power. Default 6. Each branch needs more than ``df``
        cells of its own: a branch with fewer, beside two or more that have
        them, is left out of the comparison; at a fork of two branches every
        curve takes the df the smaller one carries (its cells less one), and
        a branch of fewer than 4 cells is an error (both with a message).
    registration
        ``"both"`` (default): the comparison below with ``"fit"`` and with
        ``"none"``, each gene given the larger of its p-values (an
        intersection–union test: its level holds wherever either axis is
        right). The default because neither is right everywhere: the warp
        undoes a learner's uneven pace along the branches, but where most
        genes part gradually after the fork it mistakes their delays for a
        difference of pace; the price is slightly fewer branch genes called.
        The curves, ``grid`` and ``obs[f"{name}_time"]`` are those of the
        registered axis; ``var`` also holds the two p-values.
        ``"fit"``: before the test, each branch's pseudotime past
        the fork is warped onto one axis, by a shift and a monotone
        piecewise-linear map per branch shared by all genes, chosen so that,
        among the 300 genes that follow pseudotime most closely, those one
        curve can fit once the branches are aligned are fitted best (genes
        whose branches differ cannot pull it). The 300 are chosen among all
        genes of the matrix, whichever ``genes`` are tested: the warp belongs
        to the tree, and a gene's p-value does not depend on the other genes
        tested. A learner
        stretches the branches of a fork differently and unevenly, and genes
        that follow the same curve of the process on both branches then look
        different without registration (see the documentation's background
        page on branch registration for the cases it does not fix). Branches that
        really span different stretches of the process keep their pace (a
        rescaling to equal ranges, as in tradeSeq's pattern test, would
        stretch a branch that stops early). The curves, ``grid`` and
        ``obs[f"{name}_time"]`` are on the registered axis;
        ``uns[name]["stretch"]`` holds each branch's overall factor over its
        reach past the fork and ``uns[name]["shift"]`` its shift (relative:
        the factors' geometric mean is 1 and the shifts' mean 0, since moving
        every branch alike changes no comparison between them). The
        comparison is made on two such warps, one of five pieces and one of
        nine, and each gene gets the larger of its two p-values: a learned
        tree's pace changes from edge to edge, in places faster than five
        pieces follow, while nine misread more forks whose genes part
        gradually (the curves are on the five-piece warp's axis). With
        ``"both"`` both warps are compared beside the unregistered axis, for
        learned trees whose pace changes from step to step, at the price of
        p-values a little more conservative where every axis is right.
        ``"none"``: compare the pseudotimes as they are (calibrated only when
        they are proportional to the process's time on every branch). Where
        the warp presses against the bounds of its family (a branch's pace
        more than 4-fold another's, or the branches slid past each other),
        genes that part after the fork placed it, not genes the branches
        share; the branches are then compared on the learned pseudotime, as
        the log (at info level) and ``uns[name]["warp_at_bound"]`` say. On a
        dask matrix, ``"fit"`` and ``"both"`` first read the (at most 3,000)
        cells the warps are fitted on; ``"fit"`` passes over the cells twice,
        ``"both"`` three times.
    key_added
        Name of the result; default ``f"{key}_branch_test"``.
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields (``name`` = ``key_added``):

    ``adata.uns[name]``
        ``method`` (``"branch_test"``), ``params``, ``graph``, ``branch_point``,
        ``time`` (``"registered pseudotime"``, or ``"pseudotime"`` with
        ``registration="none"`` or a warp at its bound), ``stretch`` (each
        branch's factor), ``shift`` (each branch's shift), ``warp_at_bound``
        (``True`` where the warp pressed against a bound of its family and the
        branches are compared on the learned pseudotime),
        ``branch_point_name`` (its milestone name), ``branches`` (each
        branch's label: that of the segment it starts with, ``"fork 1 →
        tip 2"``, as in ``obs``), ``branch_ids`` (the id of that segment, in
        the same order), ``segments`` (``{"trunk" or branch id: segment
        ids}``), ``grid``,
        ``knots``, ``df_shared``, ``df_branches``, ``n_cells`` (trunk first)
        and ``edges`` (``{"trunk" or branch id: E × 2 graph edges}``, for ``pl.path``).
    ``adata.varm[f"{name}_curves"]``
        Genes × B × ``n_grid``: each branch's curve (trunk included), NaN
        outside the pseudotime range of its cells and for genes not tested.
    ``adata.varm[f"{name}_shared"]``
        Genes × ``n_grid``: the shared curve.
    ``adata.var[f"{name}_F"]``, ``[f"{name}_pval"]``, ``[f"{name}_qval"]``
        F statistic (on the curves' axis), p-value and BH-adjusted q-value
        (NaN for genes not tested).
    ``adata.var[f"{name}_pval_registered"]``, ``[f"{name}_pval_unregistered"]``
        With ``registration="both"``: the p-values on each axis, whose larger
        is ``pval``.
    ``adata.obs[f"{name}_branch"]``
        Categorical: ``"trunk"`` or the branch label; NaN for cells left out.
    ``adata.obs[f"{name}_time"]``
        Time of the cells tested on the curves' axis (registered pseudotime by
        default); NaN elsewhere.

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.branching_expression(1000)
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.ddrtree(adata)
    >>> sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    >>> sks.tl.pseudotime(adata, "ddrtree")
    >>> fork = int(adata.uns["ddrtree"]["branch_points"][0])
    >>> sks.tl.branch_test(adata, "ddrtree", branch_point=fork)
    >>> adata.var.sort_values("ddrtree_branch_test_qval").head()
    >>> sks.pl.branch_heatmap(adata, "ddrtree_branch_test")
    """
    key = resolve_key(adata, key)
    name = check_key(key_added, f"{key}_branch_test")
    fork = _fork_cells(adata, key, branch_point, df=df)
    matrix, source = _expression(adata, layer, use_raw)
    columns = gene_columns(adata, genes, gene_symbols=gene_symbols)
    trunk, branches, branch_names, group, rows, pseudotime = (
        fork.trunk, fork.branches, fork.names, fork.group, fork.rows, fork.pseudotime
    )
    start = logg.info(
        f"testing {_count(columns, adata)} genes for differences between the {len(branches)} branches "
        f"at {node_name(adata, key, fork.branch_point)} ({rows.size} cells)"
    )
    _warn_if_counts(matrix, source, rows)
    with _reading_threads(matrix):
        result = branch_core.branch_test(
            matrix, rows, pseudotime[rows], group[rows], n_knots=n_knots, df=fork.df, n_grid=n_grid,
            registration=registration, columns=columns,
            names=fork.messages(),
        )
    _warn_lowered_df(fork.df, result.df_shared)
    _warn_warp_at_bound(result)

    adata = adata.copy() if copy else adata
    tested = np.arange(adata.n_vars) if columns is None else columns
    curves = np.full((adata.n_vars, len(branches), result.grid.size), np.nan)
    curves[tested] = result.curves
    shared = np.full((adata.n_vars, result.grid.size), np.nan)
    shared[tested] = result.shared
    adata.varm[f"{name}_curves"] = curves
    adata.varm[f"{name}_shared"] = shared
    for suffix, values in (("F", result.fstat), ("pval", result.pvals), ("qval", result.qvals),
                           *_axis_pvalues(adata, name, result, registration)):
        adata.var[f"{name}_{suffix}"] = _per_gene(adata, tested, values)
    categories = ["trunk", *fork.labels]
    codes = np.full(adata.n_obs, -1)
    codes[rows] = group[rows]
    adata.obs[f"{name}_branch"] = pd.Categorical.from_codes(codes, categories=categories)
    adata.obs[f"{name}_time"] = _per_cell(adata, rows, result.times)
    members = {"trunk": trunk, **dict(zip(branch_names, branches))}
    adata.uns[name] = {
        "method": "branch_test",
        "params": plain_params(dict(
            key=key, branch_point=fork.branch_point, **source, n_genes=tested.size, n_knots=n_knots, df=df,
            n_grid=n_grid, registration=registration,
        )),
        "graph": key,
        "branch_point": fork.branch_point,
        "time": "pseudotime" if registration == "none" or result.warp_at_bound else "registered pseudotime",
        "stretch": result.stretch,
        "shift": result.shift,
        "warp_at_bound": result.warp_at_bound,
        "branches": np.array(fork.labels, dtype=object),
        "branch_ids": np.array(branch_names, dtype=object),
        "branch_point_name": node_name(adata, key, fork.branch_point),
        "segments": {label: np.array(ids, dtype=object) for label, ids in members.items()},
        "grid": result.grid,
        "knots": result.knots,
        "df_shared": result.df_shared,
        "df_branches": result.df_branches,
        "n_cells": result.n_cells.astype(np.int64),
        "edges": _fork_edges(fork, members),
    }
    logg.info(
        f"    finished ({int((result.qvals < 0.05).sum())} genes with q < 0.05{_degenerate_note(result)})",
        time=start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves', '{name}_shared'], var['{name}_F', "
              f"'{name}_pval', '{name}_qval'{_axis_columns(name, registration)}], obs['{name}_branch', '{name}_time']"),
    )
    return adata if copy else None


branch_test.__doc__ = branch_test.__doc__.replace("{model}", _MODEL)


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
    adata
        Annotated data matrix on which ``tl.pseudotime(adata, key)`` has run.
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
        It must be a tree.
    genes, layer, use_raw, gene_symbols, n_knots, n_grid
        As in :func:`trends`.
    df
        Effective degrees of freedom of every curve (> 2; default 6), lowered
        with a warning when the cells of a lineage cannot carry it.
    key_added
        Name of the result; default ``f"{key}_association"``.
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields (``name`` = ``key_added``):

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
    chains, membership, group, rows, pseudotime = _lineage_cells(adata, key)
    matrix, source = _expression(adata, layer, use_raw)
    columns = gene_columns(adata, genes, gene_symbols=gene_symbols)
    start = logg.info(
        f"testing {_count(columns, adata)} genes for change along {len(chains)} lineage(s) of {key!r} "
        f"({rows.size} cells)"
    )
    _warn_if_counts(matrix, source, rows)
    with _reading_threads(matrix):
        result = association_core.association_test(
            matrix, rows, pseudotime[rows], group[rows], membership, n_knots=n_knots, df=df,
            n_grid=n_grid, columns=columns,
        )
    _warn_lowered_df(df, result.df)

    adata = adata.copy() if copy else adata
    tested = np.arange(adata.n_vars) if columns is None else columns
    curves = np.full((adata.n_vars, len(chains), result.grid.size), np.nan)
    curves[tested] = result.curves
    adata.varm[f"{name}_curves"] = curves
    for suffix, values in (("F", result.fstat), ("pval", result.pvals), ("qval", result.qvals),
                           ("amplitude", result.amplitude)):
        adata.var[f"{name}_{suffix}"] = _per_gene(adata, tested, values)
    adata.uns[name] = {
        "method": "association_test",
        "params": plain_params(dict(key=key, **source, n_genes=tested.size, n_knots=n_knots, df=df,
                                    n_grid=n_grid)),
        "graph": key,
        "lineages": {chain[-1]: np.array(chain, dtype=object) for chain in chains},
        "lineage_labels": np.array(unique_names([lineage_label(adata.uns[key], chain) for chain in chains]),
                                   dtype=object),
        "grid": result.grid,
        "knots": result.knots,
        "df": result.df,
        "n_cells": result.n_cells.astype(np.int64),
    }
    logg.info(
        f"    finished ({int((result.qvals < 0.05).sum())} genes with q < 0.05{_degenerate_note(result)})",
        time=start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves'], var['{name}_F', '{name}_pval', "
              f"'{name}_qval', '{name}_amplitude']"),
    )
    return adata if copy else None


@dataclass(frozen=True)
class _Fork:
    """The cells around a branch point, as ``tl.branch_test`` and ``tl.fork_test`` read them."""

    branch_point: int
    segments: dict
    trunk: list
    branches: list
    names: list  # each branch's first segment id: the keys of the results' segments and edges
    labels: list  # each branch's first segment label ("fork 1 → tip 2"): the names results show
    group: np.ndarray  # per cell: 0 trunk, b ≥ 1 branch, −1 elsewhere
    rows: np.ndarray  # cells in the trunk or a branch, with a pseudotime
    pseudotime: np.ndarray
    df: float | None = None  # the df the branches carry (_fork_cells)

    def messages(self) -> list[str]:
        return [f"The branch {label}" for label in self.labels]


def _axis_pvalues(adata: AnnData, name: str, result, registration: str) -> list:
    """``var`` columns of the p-values on each axis, written where the test combined them. Elsewhere
    those of an earlier result under the same name are dropped: they would not be this ``pval``'s."""
    if registration != "both":
        adata.var.drop(columns=[f"{name}_pval_registered", f"{name}_pval_unregistered"], errors="ignore",
                       inplace=True)
        return []
    return [("pval_registered", result.pvals_registered), ("pval_unregistered", result.pvals_unregistered)]


def _axis_columns(name: str, registration: str) -> str:
    """The log's names of the columns of :func:`_axis_pvalues`."""
    return f", '{name}_pval_registered', '{name}_pval_unregistered'" if registration == "both" else ""


def _fork_cells(adata: AnnData, key: str, branch_point, *, df: float | None = None) -> _Fork:
    """Validate ``branch_point`` and split the trajectory's cells into trunk and branches around it.

    With ``df``, a branch whose cells cannot carry a curve of ``df`` degrees of freedom (no more
    cells than ``df``: a stub that learners keep on a few hundred cells) is left out, as the
    log says at info level, and the others are compared; where fewer than two branches would be left, every
    curve takes the df the second largest branch carries (its cells less one; ``_Fork.df``),
    with a warning, and a fork where that is 2 or less is an error.
    """
    graph = read_graph(adata, key)
    segments, labels, pseudotime = _trajectory(adata, key)
    try:
        branch_point = resolve_node(adata, key, branch_point, n_nodes=graph.n_nodes, what="branch_point")
    except ValueError as error:
        forks = np.asarray(adata.uns[key].get("branch_points", [])).tolist()
        order = np.asarray(adata.uns[key].get("milestones", {}).get("nodes", [])).tolist()
        forks = sorted(forks, key=lambda node: (order.index(node) if node in order else len(order), node))
        raise ValueError(f"{error} Branch points of {key!r}: "
                         f"{[node_name(adata, key, node) for node in forks]}.") from None
    try:
        trunk, branches = lineage_core.branch_cells(segments, branch_point, adata.uns[key]["root"])
    except ValueError as error:  # the solver knows nodes by index; the message names the milestone
        name = milestone_name(adata, key, branch_point)
        if name is None:
            raise
        raise ValueError(str(error).replace(f"Node {branch_point} ", f"Milestone {name!r} ", 1)) from None
    group_of_segment = {segment: 0 for segment in trunk}
    for number, members in enumerate(branches, start=1):
        group_of_segment.update({segment: number for segment in members})
    group = np.array([group_of_segment.get(label, -1) for label in labels])
    rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    counts = np.bincount(group[rows], minlength=len(branches) + 1)
    empty = [segment_label(adata.uns[key], members[0]) for members, count in zip(branches, counts[1:]) if count == 0]
    here = node_name(adata, key, branch_point)
    if empty:  # e.g. a branch outside a sub-trajectory, or emptied by a pruning
        raise ValueError(
            f"The branch(es) {', '.join(empty)} at {here} of {key!r} hold no "
            f"cell with a pseudotime, so there is nothing to compare. Remove branches too small to analyse with "
            f"sks.tl.cleanup(adata, {key!r}, min_cells=...), or choose another branch point."
        )
    if df is not None:
        df = splines.check_df(df, allow_none=False)
        second = int(np.sort(counts[1:])[-2])
        if second <= df:  # fewer than two branches carry df: every curve takes what the second largest carries
            if second < 4:  # a curve needs df > 2 and fewer df than its cells
                what = ("pass df=2.5 to compare them anyway, choose another branch point" if second == 3
                        else "choose another branch point")
                raise ValueError(
                    f"At {here} of {key!r}, {_branch_sizes(adata, key, branches, counts)}: a branch's own curve "
                    f"needs more cells than its degrees of freedom (more than 2), and only one branch has 4 or "
                    f"more cells. A stub this small is rarely a fate: {what}, or remove it with "
                    f"sks.tl.cleanup(adata, {key!r}, min_cells=...)."
                )
            logg.warning(
                f"At {here} of {key!r}, {_branch_sizes(adata, key, branches, counts)}: the smaller branch cannot "
                f"carry df={df:g}, so every curve uses df={second - 1:g} and the test is still valid. A branch this "
                f"small is rarely a fate: check it with sks.tl.branch_support."
            )
            df = float(second - 1)
        kept = np.flatnonzero(counts[1:] > df)
        if kept.size < len(branches):
            logg.info(
                f"    at {here} of {key!r}, the branch(es) with no more cells than df={df:g} are left out and the "
                f"other {kept.size} are compared ({_branch_sizes(adata, key, branches, counts)}; a lower df "
                "includes them)"
            )
            renumber = np.full(len(branches) + 1, -1)
            renumber[0] = 0
            renumber[kept + 1] = np.arange(1, kept.size + 1)
            group = np.where(group >= 0, renumber[np.maximum(group, 0)], -1)
            branches = [branches[b] for b in kept]
            rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    return _Fork(branch_point=branch_point, segments=segments, trunk=trunk, branches=branches,
                 names=[members[0] for members in branches],
                 labels=[segment_label(adata.uns[key], members[0]) for members in branches],
                 group=group, rows=rows, pseudotime=pseudotime, df=df)


def _branch_sizes(adata: AnnData, key: str, branches: list, counts: np.ndarray) -> str:
    return "the branches hold " + ", ".join(
        f"{count} cells ({segment_label(adata.uns[key], members[0])})"
        for members, count in zip(branches, counts[1:]))


def _fork_edges(fork: _Fork, members: dict) -> dict:
    return {
        label: np.concatenate([_path_edges(fork.segments[s]) for s in ids]) if ids else np.empty((0, 2), np.int64)
        for label, ids in members.items()
    }


def _lineage_cells(adata: AnnData, key: str):
    """Lineages (root-to-leaf segment chains), segment weights, each cell's segment index and the cells on them."""
    segments, labels, pseudotime = _trajectory(adata, key)
    chains = lineage_core.lineages(segments, adata.uns[key]["root"])
    on_lineage, membership = lineage_core.lineage_membership(chains)
    index = {segment: i for i, segment in enumerate(on_lineage)}
    group = np.array([index.get(label, -1) for label in labels])
    rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    return chains, membership, group, rows, pseudotime


def _warn_warp_at_bound(result) -> None:
    if result.warp_at_bound:
        logg.info(
            "    registration could not match the branches' timing (the warp reached its limits), so they are "
            "compared on the learned pseudotime ('warp_at_bound' in the result's uns entry)"
        )


def _warn_lowered_df(requested, used: float) -> None:
    if requested is not None and used < requested - 1e-3:
        logg.warning(
            f"df={requested:g} is more than these cells carry (too few distinct pseudotimes), so each curve uses "
            f"{used:.2f} degrees of freedom instead and the result is still valid. Pass df={used:.1f} or less to "
            "silence this, or raise n_knots."
        )


def _degenerate_note(result) -> str:
    count = int(np.sum(result.degenerate))
    if not count:
        return ""
    return (f"; {count} gene(s) with fewer than {inference.MIN_VARYING_CELLS} cells off their most common value "
            "were not tested (F = 0, p = 1)")


def _expression(adata: AnnData, layer: str | None, use_raw: bool) -> tuple[object, dict]:
    """The cells × genes matrix to fit (not copied) and where it came from, for ``params``: ``layer``
    (:data:`MAIN_MATRIX` for ``X``) and ``use_raw``, which the plots read back to draw what was fitted.

    A dask array is wrapped for the chunked pass (:class:`scskeleton._dask.stats.ChunkedExpression`)
    and never loaded."""
    matrix, _ = get_expression(adata, layer=layer, use_raw=use_raw, lazy=True)
    if is_dask(matrix):
        require_dask("This test")
        from ..._dask.stats import ChunkedExpression

        matrix = ChunkedExpression(matrix)
    return matrix, {"layer": MAIN_MATRIX if layer is None else layer, "use_raw": bool(use_raw)}


def _warn_if_counts(matrix, source: dict, rows: np.ndarray) -> None:
    """Raw counts differ between cells by their library sizes, which the Gaussian tests would read as
    expression: with one fate sequenced twice as deep, 89 % of genes at a constant share of every
    library had an association p below 0.05 on counts (37 % log-normalised, 6 % on Pearson
    residuals). Read from the first of the tested cells (``rows``), so that a dask
    matrix is read only where the test reads it."""
    head = splines.take_rows(matrix, np.sort(rows)[:COUNT_CHECK_CELLS], None)
    if looks_like_counts(head):
        layer = None if source["layer"] == MAIN_MATRIX else source["layer"]
        logg.warning(
            f"{expression_name(layer, source['use_raw'])} holds non-negative integers and looks like raw counts, "
            "so the tests, which fit Gaussian noise around each trend, read the cells' different library sizes as "
            "expression. Test Pearson residuals of the counts (sc.experimental.pp.normalize_pearson_residuals) or "
            "log-normalised values (sc.pp.normalize_total, then sc.pp.log1p) instead."
        )


def _reading_threads(matrix) -> AbstractContextManager:
    """One BLAS thread per task while a dask matrix is read: dask runs its chunks in parallel already
    (:func:`~scskeleton._anndata.threads.chunked_solver_threads`). In-memory input keeps the caller's threads."""
    return chunked_solver_threads() if splines.is_chunked(matrix) else nullcontext()


def _segment(adata: AnnData, key: str, segment) -> tuple[str, np.ndarray]:
    segments, _, _ = _trajectory(adata, key)
    label = resolve_segment(adata.uns[key], segment)
    if label is None:
        labels = list(adata.uns[key].get("milestones", {}).get("segment_labels", []))
        raise KeyError(f"No segment {segment!r} in the trajectory of {key!r}; segments: {sorted(segments, key=int)}"
                       f"{f' or by label {labels}' if labels else ''}.")
    return label, np.asarray(segments[label], dtype=np.intp)


def _trajectory(adata: AnnData, key: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Segments, each cell's segment label and pseudotime, as written by ``tl.pseudotime``."""
    missing = [field for field in (pseudotime_key(key), segment_key(key)) if field not in adata.obs]
    if missing or "segments" not in adata.uns[key]:
        raise KeyError(f"The trajectory of {key!r} is missing ({missing or 'segments'}); run "
                       f"sks.tl.root(adata, {key!r}, ...) and sks.tl.pseudotime(adata, {key!r}) first.")
    segments = {str(k): np.asarray(v, dtype=np.intp) for k, v in adata.uns[key]["segments"].items()}
    labels = adata.obs[segment_key(key)].astype(str).to_numpy()
    return segments, labels, adata.obs[pseudotime_key(key)].to_numpy(dtype=float)


def _path_edges(nodes: np.ndarray) -> np.ndarray:
    """The E × 2 edges between consecutive nodes of a path."""
    nodes = np.asarray(nodes, dtype=np.int64)
    return np.column_stack([nodes[:-1], nodes[1:]])


def _per_gene(adata: AnnData, columns: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.full(adata.n_vars, np.nan)
    out[columns] = values
    return out


def _per_cell(adata: AnnData, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.full(adata.n_obs, np.nan)
    out[rows] = values
    return out


def _count(columns, adata: AnnData) -> int:
    return adata.n_vars if columns is None else columns.size
