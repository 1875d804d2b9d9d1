"""``tl.fork_test``: which genes differ between the branches just after a fork, and in which branch they go up."""

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
    categorical,
    fork_fields,
    log_finished,
    warn_lowered_df,
    warn_warp_at_bound,
    write_fork_cells,
    write_genes,
)
from .selection import fork_cells, fork_edges


def fork_test(
    adata: AnnData,
    key: str | None = None,
    *,
    branch_point: int | str,
    window: float | None = None,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    registration: str = "fit",
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Which genes differ between the branches just after a branch point, and in which branch they go up.

    Where :func:`branch_test` asks whether a gene's whole course differs
    between the branches (trunk included), the fork test looks at the cells
    of the branches in a window past the fork, and says which way: the
    branch where the gene's fitted expression is highest (``up``) and the
    difference between the highest and lowest branch's mean over the window
    (``effect``, in the units of the expression; on log-normalised data a
    log fold change), each mean taken where every branch has cells, never
    over a curve's extrapolation. Per gene, one curve per branch is compared with one
    shared curve over the window's cells by an F test (p-values from its
    exact null under Gaussian noise around one shared curve, by a saddlepoint
    approximation; as in :func:`branch_test`, with its count test for
    sparse genes in a small branch) with Benjamini–Hochberg correction.
    {model}
    As in :func:`branch_test`, each branch's pseudotime past the fork is
    warped onto one axis (a shift and a monotone map per branch, shared by
    all genes), so that a learner's uneven stretching of the branches is not
    called a difference (``registration="none"`` turns this off;
    ``"both"`` calls a gene only where the comparison on the pseudotime as
    it is calls it too); a warp pressed against the bounds of its family is
    not used, and the branches are compared on the pseudotime as it is, as
    the log (at info level) and ``uns[name]["warp_at_bound"]`` say.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
    branch_point
        The fork: a node index, one of ``adata.uns[key]["branch_points"]``, or
        its milestone name (``"fork 1"``).
    window
        Length of the window past the fork, in (registered) pseudotime.
        Default: the stretch every branch covers (the shortest branch's reach,
        the 95th percentile of its cells' time past the fork), so no branch is
        compared where it has no cells; widened where needed until it holds
        at least 10 (and more than ``df``) cells of every branch, as when a
        branch's cells start well past the fork. A short window asks about the
        first decisions after the fork; one longer than the cells reach ends
        at the last of them (``uns[name]["window"]``).
    genes, layer, use_raw, gene_symbols, n_knots, n_grid
        As in :func:`trends`.
    df
        Effective degrees of freedom of each curve (> 2; default 6), lowered
        with a warning when the window's cells cannot carry it. A branch with
        no more cells than ``df`` is left out or lowers ``df``, as in
        :func:`branch_test`.
    registration
        ``"fit"`` (default), ``"both"`` or ``"none"``, as in :func:`branch_test`
        (with ``"both"`` each axis has its own default window; ``"fit"``
        compares on two warps, of five and nine pieces, and takes each gene's
        larger p-value). Unlike the branch test, the fork test registers alone
        by default: within its short window past the fork the warps hold the
        level about as well as both axes together, and its p-values stay
        uniform where ``"both"`` makes them conservative, so more branch genes
        are called.
    key_added
        Name of the result; default ``f"{key}_fork_test"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.var[f"{name}_F"]``, ``[f"{name}_pval"]``, ``[f"{name}_qval"]``, ``[f"{name}_effect"]``
        F statistic, p-value, BH-adjusted q-value and effect size (NaN for
        genes not tested).
    ``adata.var[f"{name}_pval_registered"]``, ``[f"{name}_pval_unregistered"]``
        With ``registration="both"``: the p-values on each axis, whose larger is ``pval``.
    ``adata.var[f"{name}_up"]``, ``[f"{name}_down"]``
        Categorical: the branch (label) with the highest and lowest mean.
    ``adata.varm[f"{name}_curves"]``, ``[f"{name}_shared"]``, ``[f"{name}_means"]``
        Genes × B × ``n_grid`` branch curves over the window (NaN where a
        branch has no cells), genes × ``n_grid`` shared curve, genes × B means
        over the stretch where every branch has cells.
    ``adata.obs[f"{name}_branch"]``, ``[f"{name}_time"]``
        The branch of each cell in the window and its registered time (NaN
        for the cells left out).
    ``adata.uns[name]``
        ``method`` (``"fork_test"``), ``params``, ``graph``, ``branch_point``,
        ``time``, ``stretch``, ``shift``, ``warp_at_bound`` (as in
        ``tl.branch_test``), ``branch_point_name`` (its milestone name),
        ``branches`` (each branch's label: that of the segment it starts
        with, ``"fork 1 → tip 2"``, as in ``up``, ``down`` and ``obs``),
        ``branch_ids`` (the id of that segment, in the same order: the keys
        of ``segments`` and ``edges``), ``segments``, ``fork`` and ``window`` (on
        the time axis), ``grid``, ``knots``, ``df``, ``n_cells`` (per branch,
        in the window) and ``edges`` (for ``pl.path``).

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.krumsiek11()
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.rpg(adata)
    >>> sks.tl.root(adata, "rpg", group=("cell_type", "progenitor"))
    >>> sks.tl.pseudotime(adata, "rpg")
    >>> fork = int(adata.uns["rpg"]["branch_points"][0])
    >>> sks.tl.fork_test(adata, "rpg", branch_point=fork)
    >>> adata.var.sort_values("rpg_fork_test_qval")[["rpg_fork_test_up", "rpg_fork_test_effect"]].head()
    """
    key = resolve_key(adata, key)
    name = check_key(key_added, f"{key}_fork_test")
    fork = fork_cells(adata, key, branch_point, df=df)
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    rows = fork.rows
    start = logg.info(
        f"testing {expression.tested.size} genes for differences just after the fork at "
        f"{node_name(adata, key, fork.branch_point)} ({len(fork.branches)} branches)"
    )
    result = run_test(
        expression, rows, branch_core.fork_test, fork.pseudotime[rows], fork.group[rows], window=window,
        n_knots=n_knots, df=fork.df, n_grid=n_grid, registration=registration, names=fork.messages(),
    )
    warn_lowered_df(fork.df, result.df)
    warn_warp_at_bound(result)

    adata = adata.copy() if copy else adata
    tested = expression.tested
    write_genes(
        adata, name, tested, varm=[("curves", result.curves), ("shared", result.shared), ("means", result.means)],
        var=[("F", result.fstat), ("pval", result.pvals), ("qval", result.qvals), ("effect", result.effect),
             *axis_pvalues(adata, name, result, registration)],
    )
    for suffix, which in (("up", result.up), ("down", result.down)):
        adata.var[f"{name}_{suffix}"] = categorical(
            adata.n_vars, tested, np.where(result.degenerate, -1, which), list(fork.labels)
        )
    in_window = np.isfinite(result.times)
    write_fork_cells(adata, name, fork, rows[in_window], result.times[in_window])
    members = dict(zip(fork.names, fork.branches))
    adata.uns[name] = {
        "method": "fork_test",
        "params": plain_params(dict(
            key=key, branch_point=fork.branch_point, window=result.window, **expression.source,
            n_genes=tested.size, n_knots=n_knots, df=df, n_grid=n_grid, registration=registration,
        )),
        **fork_fields(adata, key, fork, result, registration, members),
        "fork": result.fork,
        "window": result.window,
        "grid": result.grid,
        "knots": result.knots,
        "df": result.df,
        "n_cells": result.n_cells.astype(np.int64),
        "edges": fork_edges(fork, members),
    }
    log_finished(
        result, start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves', '{name}_shared', '{name}_means'], var['{name}_F', "
              f"'{name}_pval', '{name}_qval', '{name}_effect', '{name}_up', '{name}_down'"
              f"{axis_columns(name, registration)}], obs['{name}_branch', '{name}_time']"),
    )
    return adata if copy else None


fork_test.__doc__ = fork_test.__doc__.replace("{model}", MODEL)
fill_doc(fork_test)
