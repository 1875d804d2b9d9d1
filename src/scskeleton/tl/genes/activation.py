"""``tl.activation``: where along each lineage a gene switches on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.inputs import check_key, gene_columns
from ..._anndata.results import plain_params
from ..._anndata.schema import read_graph, resolve_key, unique_names
from ..._core.stats import association as association_core
from ..trajectory.milestones import lineage_label
from .trends import (
    _count,
    _expression,
    _lineage_cells,
    _per_gene,
    _reading_threads,
    _warn_if_counts,
    _warn_lowered_df,
)


def activation(
    adata: AnnData,
    key: str | None = None,
    *,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    alpha: float = 0.05,
    min_rise: float = association_core.MIN_RISE,
    direction: str = "up",
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 200,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Activation timing: the pseudotime along each lineage where a gene's trend first rises significantly.

    Each gene gets one smooth curve per lineage (root to leaf), exactly as in
    :func:`association_test`. Along each lineage, its *rise* is the curve's
    value minus its value at the lineage's start (the root). The activation
    time is the first pseudotime at which the rise exceeds a simultaneous
    confidence band (Scheffé's critical value for the curve's ``df − 1``
    non-constant directions at level ``alpha``, with the variance of the
    weighted spline fit) *and* reaches ``min_rise`` of the gene's largest
    rise on that lineage, so that on many cells a rise of no biological size
    does not count. Genes that never rise (flat or falling) get NaN;
    ``direction="down"`` times the first significant fall instead (genes
    switching off). Use it
    on the genes :func:`association_test` calls, e.g.
    ``genes=adata.var_names[adata.var["rpg_association_qval"] < 0.05]``.
    A dask ``adata.X`` or layer is read chunk by chunk, in one pass over the
    cells, and never loaded.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.pseudotime(adata, key)`` has run.
    key
        Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.
        It must be a tree.
    genes, layer, use_raw, gene_symbols, n_knots
        As in :func:`trends`.
    alpha
        Chance that a curve which does not rise is called rising anywhere
        along a lineage (default 0.05).
    min_rise
        Share of the largest rise a curve must reach to count as activated
        (default 0.2; 0 keeps only the band).
    direction
        ``"up"`` (default): the first significant rise; ``"down"``: the first
        significant fall, with ``[f"{name}_rise"]`` holding the largest fall.
    df
        Effective degrees of freedom of every curve (> 2; default 6).
    n_grid
        Points per lineage at which the rise is checked (the time resolution).
    key_added
        Name of the result; default ``f"{key}_activation"``.
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields (``name`` = ``key_added``):

    ``adata.varm[f"{name}_time"]``, ``[f"{name}_rise"]``
        Genes × lineages: activation pseudotime (NaN: never, or not tested)
        and largest rise above the start.
    ``adata.var[f"{name}_time"]``, ``[f"{name}_lineage"]``
        The earliest activation over the lineages and the lineage it is on
        (Categorical: its label, ``"root → tip 2"``).
    ``adata.uns[name]``
        ``method`` (``"activation"``), ``params``, ``graph``, ``lineages``
        (``{leaf segment id: segment ids from the root}``, in the column order
        of the varm fields), ``lineage_labels`` (their labels, in that order),
        ``critical`` (the band's multiplier of the
        standard error), ``df``.

    Examples
    --------
    >>> sks.tl.association_test(adata, "rpg")
    >>> called = adata.var_names[adata.var["rpg_association_qval"] < 0.05]
    >>> sks.tl.activation(adata, "rpg", genes=called)
    >>> adata.var.loc[called, "rpg_activation_time"].sort_values()
    """
    key = resolve_key(adata, key)
    read_graph(adata, key)
    name = check_key(key_added, f"{key}_activation")
    chains, membership, group, rows, pseudotime = _lineage_cells(adata, key)
    matrix, source = _expression(adata, layer, use_raw)
    columns = gene_columns(adata, genes, gene_symbols=gene_symbols)
    if direction not in association_core.DIRECTIONS:
        raise ValueError(f"direction must be one of {association_core.DIRECTIONS}; got {direction!r}.")
    start = logg.info(f"timing the activation of {_count(columns, adata)} genes along {len(chains)} lineage(s)")
    _warn_if_counts(matrix, source, rows)
    with _reading_threads(matrix):
        result = association_core.activation(
            matrix, rows, pseudotime[rows], group[rows], membership, alpha=alpha, min_rise=min_rise,
            direction=direction, n_knots=n_knots, df=df, n_grid=n_grid, columns=columns,
        )
    _warn_lowered_df(df, result.df)

    adata = adata.copy() if copy else adata
    tested = np.arange(adata.n_vars) if columns is None else columns
    labels = unique_names([lineage_label(adata.uns[key], chain) for chain in chains])
    for suffix, values in (("time", result.times), ("rise", result.rise)):
        full = np.full((adata.n_vars, len(chains)), np.nan)
        full[tested] = values
        adata.varm[f"{name}_{suffix}"] = full
    active = np.isfinite(result.times).any(axis=1)
    earliest = np.where(active, np.nanmin(np.where(active[:, None], result.times, 0.0), axis=1), np.nan)
    adata.var[f"{name}_time"] = _per_gene(adata, tested, earliest)
    codes = np.full(adata.n_vars, -1)
    codes[tested] = np.where(active, np.nanargmin(np.where(np.isfinite(result.times), result.times, np.inf), axis=1),
                             -1)
    adata.var[f"{name}_lineage"] = pd.Categorical.from_codes(codes, categories=labels)
    adata.uns[name] = {
        "method": "activation",
        "params": plain_params(dict(key=key, **source, n_genes=tested.size, alpha=alpha, min_rise=min_rise,
                                    direction=direction, n_knots=n_knots, df=df, n_grid=n_grid)),
        "graph": key,
        "lineages": {chain[-1]: np.array(chain, dtype=object) for chain in chains},
        "lineage_labels": np.array(labels, dtype=object),
        "critical": result.critical,
        "df": result.df,
    }
    logg.info(
        f"    finished ({int(active.sum())} genes activate on some lineage)",
        time=start,
        deep=f"added\n    uns[{name!r}], varm['{name}_time', '{name}_rise'], var['{name}_time', '{name}_lineage']",
    )
    return adata if copy else None
