"""``tl.condition_progression``: do the cells of the conditions progress alike along each lineage?"""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.schema import fate_probabilities_key, pseudotime_key, resolve_key
from ..._core.stats.conditions import compare_conditions, unit_means
from .units import UNITS_DOC, comparison_entry, counted_units, read_units, stored_fates


def condition_progression(
    adata: AnnData,
    key: str | None = None,
    *,
    condition: str,
    sample: str | None = None,
    reference: str | None = None,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Test whether the cells of the conditions have gone equally far along each lineage, with
    samples as replicates.

    Each unit (a sample of ``obs[sample]``, or each cell without ``sample``)
    is summarised, per lineage (fate), by the mean pseudotime of its cells
    weighted by their probability of that fate: cells committed to the
    lineage count fully, cells before its fork by their share of it, cells
    of other lineages not at all. These summaries are compared between the
    conditions lineage by lineage, as :func:`~scskeleton.tl.condition_fates`
    compares fate shares: Student's t test for two conditions (the effect is
    the second condition's mean pseudotime minus the reference's, in units
    of pseudotime), the one-way analysis of variance for more; q-values are
    Benjamini–Hochberg over the lineages. A delay of differentiation lowers
    the effect on every lineage it slows. A change of fate shares moves it
    too, since a lineage that receives more cells holds more of them late:
    read it with ``tl.condition_fates``. Without ``sample`` every cell is a
    unit, and a warning says that the p-values are then too small wherever
    samples differ.

    Parameters
    ----------
    {adata_pseudotime}
        ``tl.fate_probabilities(adata, key)`` must have run.
    {key_fitted}
    {units}
    key_added
        Name of the result; default ``f"{key}_condition_progression"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"condition_progression"``), ``params``, ``graph``,
        ``lineages`` (the fates), ``conditions`` (the reference first),
        ``test``, per lineage ``effect``, ``statistic``, ``pval`` and
        ``qval``, ``means`` (conditions × lineages: the mean of the units'
        pseudotime), and the units: ``units``, ``unit_condition``,
        ``unit_weight`` (units × lineages: the fate probabilities summed
        over the unit's cells) and ``unit_pseudotime`` (units × lineages).

    Examples
    --------
    >>> sks.tl.condition_progression(adata, "rpg", condition="condition", sample="sample")
    >>> adata.uns["rpg_condition_progression"]["effect"]
    """
    key = resolve_key(adata, key)
    name = check_key(key_added, f"{key}_condition_progression")
    lineages = stored_fates(adata, key, with_pseudotime=True)
    column, times = fate_probabilities_key(key), pseudotime_key(key)
    units = read_units(adata, condition=condition, sample=sample, reference=reference)
    start = logg.info(f"comparing the progression along the lineages of {key!r} between {len(units.conditions)} "
                      f"conditions of obs[{condition!r}]")
    probabilities = np.asarray(adata.obsm[column], dtype=float)
    pseudotime = np.repeat(adata.obs[times].to_numpy(dtype=float)[:, None], len(lineages), axis=1)
    summaries, weight = unit_means(pseudotime, units.cell_unit, units.names.size, weights=probabilities)
    counted = counted_units(units, weight.min(axis=1), key)
    comparison = compare_conditions(summaries[counted], units.condition[counted], len(units.conditions))

    adata = adata.copy() if copy else adata
    adata.uns[name] = comparison_entry(
        "condition_progression", key, units, counted, comparison, condition=condition, sample=sample,
        lineages=np.asarray(lineages, dtype=object), unit_weight=weight[counted], unit_pseudotime=summaries[counted],
    )
    best = int(np.argmin(comparison.pvals))
    logg.info(f"    finished (smallest p = {comparison.pvals[best]:.3g}, {lineages[best]})", time=start,
              deep=f"added\n    uns[{name!r}]")
    return adata if copy else None


fill_doc(condition_progression, units=UNITS_DOC)
