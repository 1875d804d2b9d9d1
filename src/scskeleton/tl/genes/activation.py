"""``tl.activation``: where along each lineage a gene switches on."""

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
from .results import categorical, warn_lowered_df, write_genes
from .selection import lineage_cells


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
    {adata_pseudotime}
    {key_fitted}
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
    {copy}

    Returns
    -------
    {returns_named}

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
    lineages = lineage_cells(adata, key)
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    if direction not in association_core.DIRECTIONS:
        raise ValueError(f"direction must be one of {association_core.DIRECTIONS}; got {direction!r}.")
    rows = lineages.rows
    start = logg.info(
        f"timing the activation of {expression.tested.size} genes along {len(lineages.chains)} lineage(s)"
    )
    result = run_test(
        expression, rows, association_core.activation, lineages.pseudotime[rows], lineages.group[rows],
        lineages.membership, alpha=alpha, min_rise=min_rise, direction=direction, n_knots=n_knots, df=df,
        n_grid=n_grid,
    )
    warn_lowered_df(df, result.df)

    adata = adata.copy() if copy else adata
    tested = expression.tested
    labels = lineages.labels(adata, key)
    active = np.isfinite(result.times).any(axis=1)
    earliest = np.where(active, np.nanmin(np.where(active[:, None], result.times, 0.0), axis=1), np.nan)
    write_genes(adata, name, tested, varm=[("time", result.times), ("rise", result.rise)], var=[("time", earliest)])
    first = np.where(active, np.nanargmin(np.where(np.isfinite(result.times), result.times, np.inf), axis=1), -1)
    adata.var[f"{name}_lineage"] = categorical(adata.n_vars, tested, first, labels)
    adata.uns[name] = {
        "method": "activation",
        "params": plain_params(dict(key=key, **expression.source, n_genes=tested.size, alpha=alpha,
                                    min_rise=min_rise, direction=direction, n_knots=n_knots, df=df, n_grid=n_grid)),
        "graph": key,
        **lineages.fields(labels),
        "critical": result.critical,
        "df": result.df,
    }
    logg.info(
        f"    finished ({int(active.sum())} genes activate on some lineage)",
        time=start,
        deep=f"added\n    uns[{name!r}], varm['{name}_time', '{name}_rise'], var['{name}_time', '{name}_lineage']",
    )
    return adata if copy else None


fill_doc(activation)
