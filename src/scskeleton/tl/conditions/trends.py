"""``tl.condition_test``: which genes' trends along a lineage differ between conditions?"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.results import plain_params
from ..._anndata.schema import read_graph, resolve_key, segment_key
from ..._core.stats import condition_trends as condition_core
from ..._core.validation import check_integer
from ..genes.expression import MODEL, read_expression, run_test
from ..genes.results import log_finished, warn_lowered_df, write_genes
from ..genes.selection import lineage_cells
from ..trajectory.milestones import node_name, resolve_node
from .units import UNITS_DOC, Units, read_units

#: A sample enters the test with at least this many cells on the lineage.
MIN_SAMPLE_CELLS = 20


def condition_test(
    adata: AnnData,
    key: str | None = None,
    *,
    condition: str,
    sample: str | None = None,
    reference: str | None = None,
    lineage: int | str | None = None,
    genes: Sequence[str] | None = None,
    layer: str | None = None,
    use_raw: bool = False,
    gene_symbols: str | None = None,
    n_knots: int = 10,
    df: float = 6.0,
    n_grid: int = 100,
    n_components: int = condition_core.N_COMPONENTS,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Which genes' trends along a lineage differ between conditions, with samples as replicates.

    The cells of one lineage (the segments from the root to one tip) are
    compared: each condition's curve of a gene against pseudotime against
    one shared curve of all its cells, as :func:`branch_test` compares the
    branches of a fork.
    {model}
    With ``sample`` the samples are the units of replication. Each sample's
    own curve (with ``df``, from its cells within the stretch of the lineage
    that every sample covers) is read on that stretch and
    summarised by its level and slope there (``n_components``: its
    projections on the first orthonormal polynomials of the stretch), and
    these are compared between the conditions by the multivariate analysis
    of variance (Wilks' Λ with Rao's F; exact for two conditions, where it
    is Hotelling's T²). Whatever makes samples differ, the sampling of their
    cells, their own expression offsets or their mix of times, is counted
    as noise, and a delayed condition is compared where its cells are, not
    through a different mixture of times. ``n_components`` is at most the
    samples less the conditions less one (two samples a condition: the
    level alone).
    Without ``sample`` every cell is a unit: the curves are compared by the
    branch test's F with its exact null, valid only where samples do not
    differ (a warning says so; on data whose samples differ, most genes get
    small p-values). q-values are Benjamini–Hochberg over the genes.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
        It must be a tree.
    {units}
        A sample with fewer than 20 cells on the lineage is left out (with
        a warning).
    lineage
        The lineage's tip: a node index or its milestone name (``"tip 2"``).
        Needed where the tree has more than one tip.
    genes, layer, use_raw, gene_symbols, n_knots, n_grid
        As in :func:`trends`.
    df
        Effective degrees of freedom of each condition's curve (> 2; default
        6), lowered with a warning where the cells cannot carry it.
    n_components
        How many of a sample's curve's projections are compared (1 the
        level, 2 level and slope, 3 also the curvature); default 2.
    key_added
        Name of the result; default ``f"{key}_condition_test"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"condition_test"``), ``params``, ``graph``,
        ``conditions`` (the reference first), ``lineage`` (the tip's
        milestone name), ``segments`` (the lineage's segment ids from the
        root), ``test``
        (``"wilks"`` with samples, ``"f_cells"`` without), ``grid``,
        ``covered`` (the stretch of pseudotime every sample covers, where
        the samples' curves are compared; the lineage's range without
        samples), ``n_components``, ``df``, ``knots``, ``n_cells`` (per
        condition), ``units``, ``unit_condition`` and ``unit_cells`` (the
        samples tested and their cells on the lineage; empty without
        samples).
    ``adata.varm[f"{name}_curves"]``
        Genes × conditions × ``n_grid``: each condition's curve, NaN outside
        its cells' range and for genes not tested.
    ``adata.varm[f"{name}_shared"]``
        Genes × ``n_grid``: the curve of all the lineage's cells.
    ``adata.var[f"{name}_statistic"]``, ``[f"{name}_pval"]``, ``[f"{name}_qval"]``, ``[f"{name}_effect"]``
        Rao's F (with samples) or the F of the curves (without), p-value,
        q-value, and the largest difference of a condition's curve from the
        reference's within ``covered``, with its sign, in units of the
        expression (NaN for genes not tested).

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.simulate_trajectory(2000, n_genes=300, conditions=2, samples_per_condition=4,
    ...                                          condition_genes=0.1, random_state=1)
    >>> sc.pp.normalize_total(adata); sc.pp.log1p(adata); sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.rpg(adata)
    >>> sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    >>> sks.tl.pseudotime(adata, "rpg")
    >>> sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample", lineage="tip 1")
    >>> adata.var.sort_values("rpg_condition_test_qval").head()
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    name = check_key(key_added, f"{key}_condition_test")
    n_components = check_integer("n_components", n_components, low=1,
                                 role="projections of each sample's curve compared")
    lineages = lineage_cells(adata, key)
    chain, tip = _lineage(adata, key, lineages, lineage, graph.n_nodes)
    units = read_units(adata, condition=condition, sample=sample, reference=reference)
    cell_condition = _cell_condition(units)
    on_lineage = np.isin(np.asarray(adata.obs[segment_key(key)].astype(str)), chain)
    rows = np.flatnonzero(on_lineage & np.isfinite(lineages.pseudotime) & (units.cell_unit >= 0))
    tested_units, unit_code, rows = _tested_units(units, rows, name=node_name(adata, key, tip))
    expression = read_expression(adata, genes, layer=layer, use_raw=use_raw, gene_symbols=gene_symbols)
    start = logg.info(
        f"testing {expression.tested.size} genes for differences between {len(units.conditions)} conditions "
        f"along the lineage to {node_name(adata, key, tip)} ({rows.size} cells"
        f"{f', {tested_units.size} samples' if sample else ''})"
    )
    samples = {} if sample is None else dict(sample=unit_code[rows], sample_condition=units.condition[tested_units])
    result = run_test(
        expression, rows, condition_core.condition_trend_test, lineages.pseudotime[rows], cell_condition[rows],
        len(units.conditions), n_knots=n_knots, df=df, n_grid=n_grid, n_components=n_components,
        names=units.conditions, **samples,
    )
    warn_lowered_df(df, result.df)

    adata = adata.copy() if copy else adata
    write_genes(
        adata, name, expression.tested, varm=[("curves", result.curves), ("shared", result.shared)],
        var=[("statistic", result.statistic), ("pval", result.pvals), ("qval", result.qvals),
             ("effect", result.effect)],
    )
    adata.uns[name] = {
        "method": "condition_test",
        "params": plain_params(dict(key=key, condition=condition, sample=sample or "", reference=units.conditions[0],
                                    lineage=node_name(adata, key, tip), **expression.source,
                                    n_genes=expression.tested.size, n_knots=n_knots, df=df, n_grid=n_grid,
                                    n_components=n_components)),
        "graph": key,
        "conditions": np.asarray(units.conditions, dtype=object),
        "lineage": node_name(adata, key, tip),
        "segments": np.asarray(chain, dtype=object),
        "test": "wilks" if sample else "f_cells",
        "grid": result.grid,
        "covered": result.covered,
        "n_components": int(result.n_components),
        "df": result.df,
        "knots": result.knots,
        "n_cells": result.n_cells.astype(np.int64),
        "units": np.asarray(units.names[tested_units] if sample else [], dtype=object),
        "unit_condition": np.asarray(units.conditions, dtype=object)[units.condition[tested_units]] if sample
        else np.asarray([], dtype=object),
        "unit_cells": np.bincount(unit_code[rows], minlength=tested_units.size).astype(np.int64) if sample
        else np.zeros(0, dtype=np.int64),
    }
    log_finished(
        result, start,
        deep=(f"added\n    uns[{name!r}], varm['{name}_curves', '{name}_shared'], var['{name}_statistic', "
              f"'{name}_pval', '{name}_qval', '{name}_effect']"),
    )
    return adata if copy else None


def _lineage(adata: AnnData, key: str, lineages, lineage, n_nodes: int) -> tuple[list[str], int]:
    """The segment ids of the lineage to ``lineage`` (its tip) and the tip's node."""
    segments = adata.uns[key]["segments"]
    tips = {int(np.asarray(segments[chain[-1]])[-1]): chain for chain in lineages.chains}
    names = [node_name(adata, key, tip) for tip in tips]
    if lineage is None:
        if len(tips) > 1:
            raise ValueError(f"The tree of {key!r} has {len(tips)} lineages; name the one to test with "
                             f"lineage= (its tip): one of {names}.")
        return [str(s) for s in next(iter(tips.values()))], next(iter(tips))
    tip = resolve_node(adata, key, lineage, n_nodes=n_nodes, what="lineage")
    if tip not in tips:
        raise ValueError(f"lineage={lineage!r} is not a tip of the tree of {key!r}; its lineages end at {names}.")
    return [str(s) for s in tips[tip]], tip


def _cell_condition(units: Units) -> np.ndarray:
    """Every cell's condition code (−1 without a unit)."""
    out = np.full(units.cell_unit.size, -1, dtype=np.intp)
    has = units.cell_unit >= 0
    out[has] = units.condition[units.cell_unit[has]]
    return out


def _tested_units(units: Units, rows: np.ndarray, *, name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples with enough cells on the lineage (``MIN_SAMPLE_CELLS``), each cell's code among
    them (−1 for none) and the lineage's cells of those samples; without samples every cell."""
    codes = np.full(units.cell_unit.size, -1, dtype=np.intp)
    if units.sample is None:
        return np.zeros(0, dtype=np.intp), codes, rows
    counts = np.bincount(units.cell_unit[rows], minlength=units.names.size)
    kept = np.flatnonzero(counts >= MIN_SAMPLE_CELLS)
    dropped = np.flatnonzero((counts > 0) & (counts < MIN_SAMPLE_CELLS))
    if dropped.size:
        logg.warning(f"Sample(s) {list(units.names[dropped])} have fewer than {MIN_SAMPLE_CELLS} cells on the lineage "
                     f"to {name} and are left out of the test.")
    few = [c for k, c in enumerate(units.conditions) if np.sum(units.condition[kept] == k) < 2]
    if few:
        raise ValueError(f"Condition(s) {few} have fewer than two samples with {MIN_SAMPLE_CELLS} or more cells on "
                         f"the lineage to {name}: too few to tell the condition from its samples. Test another "
                         "lineage, or one whose cells every sample reaches.")
    index = np.full(units.names.size, -1, dtype=np.intp)
    index[kept] = np.arange(kept.size)
    has = units.cell_unit >= 0
    codes[has] = index[units.cell_unit[has]]
    return kept, codes, rows[codes[rows] >= 0]


condition_test.__doc__ = condition_test.__doc__.replace("{model}", MODEL)
fill_doc(condition_test, units=UNITS_DOC)
