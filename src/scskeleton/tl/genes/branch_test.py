"""``tl.branch_test``: which genes' trends differ between the branches leaving a branch point."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.results import plain_params
from ..._anndata.schema import resolve_key
from ..._core.stats import branches as branch_core
from ..trajectory.milestones import node_name
from .expression import MODEL, read_expression, run_test
from .results import (
    axis_columns,
    axis_pvalues,
    fork_fields,
    log_finished,
    warn_lowered_df,
    warn_warp_at_bound,
    write_fork_cells,
    write_genes,
)
from .selection import fork_cells, fork_edges


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
    {adata_pseudotime}
    {key_fitted}
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
    {copy}

    Returns
    -------
    {returns_named}

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
    fork = fork_cells(adata, key, branch_point, df=df)
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    rows = fork.rows
    start = logg.info(
        f"testing {expression.tested.size} genes for differences between the {len(fork.branches)} branches "
        f"at {node_name(adata, key, fork.branch_point)} ({rows.size} cells)"
    )
    result = run_test(
        expression, rows, branch_core.branch_test, fork.pseudotime[rows], fork.group[rows], n_knots=n_knots,
        df=fork.df, n_grid=n_grid, registration=registration, names=fork.messages(),
    )
    warn_lowered_df(fork.df, result.df_shared)
    warn_warp_at_bound(result)

    adata = adata.copy() if copy else adata
    write_genes(
        adata, name, expression.tested, varm=[("curves", result.curves), ("shared", result.shared)],
        var=[("F", result.fstat), ("pval", result.pvals), ("qval", result.qvals),
             *axis_pvalues(adata, name, result, registration)],
    )
    write_fork_cells(adata, name, fork, rows, result.times)
    members = {"trunk": fork.trunk, **dict(zip(fork.names, fork.branches))}
    adata.uns[name] = {
        "method": "branch_test",
        "params": plain_params(dict(
            key=key, branch_point=fork.branch_point, **expression.source, n_genes=expression.tested.size,
            n_knots=n_knots, df=df, n_grid=n_grid, registration=registration,
        )),
        **fork_fields(adata, key, fork, result, registration, members),
        "grid": result.grid,
        "knots": result.knots,
        "df_shared": result.df_shared,
        "df_branches": result.df_branches,
        "n_cells": result.n_cells.astype(np.int64),
        "edges": fork_edges(fork, members),
    }
    log_finished(
        result, start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves', '{name}_shared'], var['{name}_F', "
              f"'{name}_pval', '{name}_qval'{axis_columns(name, registration)}], obs['{name}_branch', '{name}_time']"),
    )
    return adata if copy else None


branch_test.__doc__ = branch_test.__doc__.replace("{model}", MODEL)
fill_doc(branch_test)
