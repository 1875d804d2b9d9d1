"""How the gene tests write their results into AnnData, and the log lines that report them.

A test fits some genes on some cells; what it writes per gene fills the rows of the genes tested
(NaN, or no category, elsewhere) and what it writes per cell the cells tested. ``tl.branch_test``
and ``tl.fork_test`` write the same description of the fork and of its cells; every test reports
its calls, a lowered df and a warp at its bound in the same words.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._core.stats import inference
from ..trajectory.milestones import node_name
from .selection import Fork


def per_gene(adata: AnnData, tested: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (genes tested × …) in the rows ``tested`` of a genes × … array, NaN elsewhere."""
    out = np.full((adata.n_vars, *np.shape(values)[1:]), np.nan)
    out[tested] = values
    return out


def per_cell(adata: AnnData, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` at the cells ``rows``, NaN elsewhere."""
    out = np.full(adata.n_obs, np.nan)
    out[rows] = values
    return out


def categorical(size: int, where: np.ndarray, codes: np.ndarray, categories: list) -> pd.Categorical:
    """``categories[codes]`` at the positions ``where`` of ``size``, missing elsewhere (as are codes −1)."""
    full = np.full(size, -1)
    full[where] = codes
    return pd.Categorical.from_codes(full, categories=categories)


def write_genes(adata: AnnData, name: str, tested: np.ndarray, *, varm: Iterable = (), var: Iterable = ()) -> None:
    """``(suffix, values)`` of the genes tested into ``adata.varm[f"{name}_{suffix}"]``, then ``var``'s
    into ``adata.var``, by :func:`per_gene`."""
    for suffix, values in varm:
        adata.varm[f"{name}_{suffix}"] = per_gene(adata, tested, values)
    for suffix, values in var:
        adata.var[f"{name}_{suffix}"] = per_gene(adata, tested, values)


def axis_pvalues(adata: AnnData, name: str, result, registration: str) -> list:
    """``var`` columns of the p-values on each axis, written where the test combined them. Elsewhere
    those of an earlier result under the same name are dropped: they would not be this ``pval``'s."""
    if registration != "both":
        adata.var.drop(columns=[f"{name}_pval_registered", f"{name}_pval_unregistered"], errors="ignore",
                       inplace=True)
        return []
    return [("pval_registered", result.pvals_registered), ("pval_unregistered", result.pvals_unregistered)]


def axis_columns(name: str, registration: str) -> str:
    """The log's names of the columns of :func:`axis_pvalues`."""
    return f", '{name}_pval_registered', '{name}_pval_unregistered'" if registration == "both" else ""


def write_fork_cells(adata: AnnData, name: str, fork: Fork, rows: np.ndarray, times: np.ndarray) -> None:
    """Each tested cell's branch (``obs[f"{name}_branch"]``: ``"trunk"`` or the branch label) and time."""
    adata.obs[f"{name}_branch"] = categorical(adata.n_obs, rows, fork.group[rows], ["trunk", *fork.labels])
    adata.obs[f"{name}_time"] = per_cell(adata, rows, times)


def fork_fields(adata: AnnData, key: str, fork: Fork, result, registration: str, members: dict) -> dict:
    """The ``uns`` fields ``tl.branch_test`` and ``tl.fork_test`` share, from ``graph`` to ``segments``
    (``members``: the name of each group of segments, ``"trunk"`` or a branch id, → its segment ids)."""
    return {
        "graph": key,
        "branch_point": fork.branch_point,
        "time": "pseudotime" if registration == "none" or result.warp_at_bound else "registered pseudotime",
        "stretch": result.stretch,
        "shift": result.shift,
        "warp_at_bound": result.warp_at_bound,
        "branches": np.array(fork.labels, dtype=object),
        "branch_ids": np.array(fork.names, dtype=object),
        "branch_point_name": node_name(adata, key, fork.branch_point),
        "segments": {label: np.array(ids, dtype=object) for label, ids in members.items()},
    }


def warn_warp_at_bound(result) -> None:
    """Say where the registration fell back to the learned pseudotime."""
    if result.warp_at_bound:
        logg.info(
            "    registration could not match the branches' timing (the warp reached its limits), so they are "
            "compared on the learned pseudotime ('warp_at_bound' in the result's uns entry)"
        )


def warn_lowered_df(requested, used: float) -> None:
    """Warn where the curves carry fewer degrees of freedom than ``df`` asked for."""
    if requested is not None and used < requested - 1e-3:
        logg.warning(
            f"df={requested:g} is more than these cells carry (too few distinct pseudotimes), so each curve uses "
            f"{used:.2f} degrees of freedom instead and the result is still valid. Pass df={used:.1f} or less to "
            "silence this, or raise n_knots."
        )


def log_finished(result, start, deep: str) -> None:
    """The closing log line of a test: the genes called at q < 0.05 and those not tested."""
    logg.info(
        f"    finished ({int((result.qvals < 0.05).sum())} genes with q < 0.05{_degenerate_note(result)})",
        time=start,
        deep=deep,
    )


def _degenerate_note(result) -> str:
    count = int(np.sum(result.degenerate))
    if not count:
        return ""
    return (f"; {count} gene(s) with fewer than {inference.MIN_VARYING_CELLS} cells off their most common value "
            "were not tested (F = 0, p = 1)")
