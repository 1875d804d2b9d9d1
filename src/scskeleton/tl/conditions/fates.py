"""``tl.condition_fates``: do the conditions send cells to different fates?"""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.schema import cell_assignment, column_sums, fate_probabilities_key, read_graph, resolve_key
from ..._core.stats.conditions import compare_conditions, unit_means
from ..._core.trees.fates import cell_fates
from ..trajectory.fates import node_fate_table
from .units import UNITS_DOC, comparison_entry, counted_units, read_units, stored_fates


def condition_fates(
    adata: AnnData,
    key: str | None = None,
    *,
    condition: str,
    sample: str | None = None,
    reference: str | None = None,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Test whether the conditions send cells to different fates, with samples as replicates.

    Each sample of ``obs[sample]`` is summarised by its fate shares, a
    composition over the fates: the mean of its cells' fate probabilities
    with the walk from the root split at every fork by the sample's own cells
    downstream (``tl.fate_probabilities`` splits by all cells, the same for
    every sample, which would pull each sample's undecided cells towards the
    common shares). Without ``sample`` each cell is a unit, its shares its
    fate probabilities.
    For each fate the units' shares are compared between the conditions:
    Student's t test for two conditions (the effect is the second condition's
    mean share minus the reference's), the one-way analysis of variance for
    more; both pool the variance within conditions, as exchangeable
    conditions have one. The samples are the replicates, so sample-to-sample variation sets
    the noise the effect is measured against; the cells of one sample are not
    independent, and testing cells instead (no ``sample``) gives p-values
    that are far too small wherever samples differ (a warning says so). The
    fates' shares sum to one, so a shift into one fate is a shift out of
    others: read the effects together. q-values are Benjamini–Hochberg over
    the fates.

    Parameters
    ----------
    {adata_pseudotime}
        ``tl.fate_probabilities(adata, key)`` must have run.
    {key_fitted}
    {units}
    key_added
        Name of the result; default ``f"{key}_condition_fates"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"condition_fates"``), ``params``, ``graph`` (= ``key``),
        ``fates``, ``conditions`` (the reference first), ``test``
        (``"student_t"`` or ``"anova_f"``), per fate ``effect``, ``statistic``,
        ``pval`` and ``qval``, ``means`` (conditions × fates: the mean share
        of the units of each condition), and the units: ``units`` (names),
        ``unit_condition``, ``unit_n_cells`` and ``unit_shares`` (units ×
        fates).

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.simulate_trajectory(1200, n_genes=200, conditions=("control", "treated"),
    ...                                          fate_shift=0.2, sample_sd=0.2)
    >>> sc.pp.normalize_total(adata); sc.pp.log1p(adata); sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.rpg(adata)
    >>> sks.tl.root(adata, "rpg", obs_min="true_pseudotime"); sks.tl.pseudotime(adata, "rpg")
    >>> sks.tl.fate_probabilities(adata, "rpg")
    >>> sks.tl.condition_fates(adata, "rpg", condition="condition", sample="sample")
    >>> adata.uns["rpg_condition_fates"]["pval"]
    """
    key = resolve_key(adata, key)
    name = check_key(key_added, f"{key}_condition_fates")
    fates = stored_fates(adata, key)
    column = fate_probabilities_key(key)
    units = read_units(adata, condition=condition, sample=sample, reference=reference)
    start = logg.info(f"comparing the fates of {key!r} between {len(units.conditions)} conditions of "
                      f"obs[{condition!r}] over {'the samples of obs[' + repr(sample) + ']' if sample else 'cells'}")
    if sample is None:
        shares, n_cells = unit_means(np.asarray(adata.obsm[column]), units.cell_unit, units.names.size)
        n_cells = n_cells[:, 0].astype(np.int64)
    else:
        shares, n_cells = _sample_fate_shares(adata, key, units)
    counted = counted_units(units, n_cells, key)
    comparison = compare_conditions(shares[counted], units.condition[counted], len(units.conditions))

    adata = adata.copy() if copy else adata
    adata.uns[name] = comparison_entry(
        "condition_fates", key, units, counted, comparison, condition=condition, sample=sample,
        fates=np.asarray(fates, dtype=object), unit_n_cells=n_cells[counted], unit_shares=shares[counted],
    )
    best = int(np.argmin(comparison.pvals))
    logg.info(f"    finished (smallest p = {comparison.pvals[best]:.3g}, {fates[best]})", time=start,
              deep=f"added\n    uns[{name!r}]")
    return adata if copy else None


def _sample_fate_shares(adata: AnnData, key: str, units) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's fate shares under its own splits at the forks, and its cells with a fate.

    ``tl.fate_probabilities`` splits a cell's walk at every fork by the mass of all cells
    downstream, the same for every sample; a cell before a fork then carries the split of the whole
    data set, which would pull every sample towards the common shares. Here the walk splits by
    the sample's own cells downstream, so a sample that sends more cells into a branch gives its
    undecided cells more of that branch too; the sample's share of a fate is the mean of its
    cells' probabilities under those splits (the share of its cells heading there)."""
    graph = read_graph(adata, key)
    assignment = cell_assignment(adata, key)
    n_fates = len(adata.uns[key]["fates"])
    shares = np.full((units.names.size, n_fates), np.nan)
    n_cells = np.zeros(units.names.size, dtype=np.int64)
    for unit in range(units.names.size):
        rows = np.flatnonzero(units.cell_unit == unit)
        own = assignment[rows]
        distributions, _ = node_fate_table(adata, key, graph, column_sums(own))
        probabilities, _ = cell_fates(own, distributions)
        reached = np.isfinite(probabilities).all(axis=1)
        n_cells[unit] = int(reached.sum())
        if n_cells[unit]:
            shares[unit] = probabilities[reached].mean(axis=0)
    return shares, n_cells


fill_doc(condition_fates, units=UNITS_DOC)
