"""``tl.condition_fates``: do the conditions send cells to different fates?"""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key
from ..._anndata.schema import fate_probabilities_key, resolve_key
from ..._core.stats.conditions import compare_conditions, unit_means
from .units import comparison_entry, counted_units, read_units


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

    Each unit (a sample of ``obs[sample]``, or each cell without ``sample``)
    is summarised by its fate shares: the mean of its cells' fate
    probabilities (``tl.fate_probabilities``), a composition over the fates.
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
    condition
        The ``obs`` column of the conditions (at least two).
    sample
        The ``obs`` column of the samples: each sample belongs to one
        condition, and each condition has at least two. ``None``: every cell
        is a unit (only for data without sample-to-sample variation).
    reference
        The condition the others are compared with; default the first
        category of ``obs[condition]``.
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
    column = fate_probabilities_key(key)
    if column not in adata.obsm or "fates" not in adata.uns.get(key, {}):
        raise KeyError(f"No fate probabilities of {key!r}; run sks.tl.fate_probabilities(adata, {key!r}) first.")
    fates = [str(f) for f in adata.uns[key]["fates"]]
    units = read_units(adata, condition=condition, sample=sample, reference=reference)
    start = logg.info(f"comparing the fates of {key!r} between {len(units.conditions)} conditions of "
                      f"obs[{condition!r}] over {'the samples of obs[' + repr(sample) + ']' if sample else 'cells'}")
    shares, n_cells = unit_means(np.asarray(adata.obsm[column]), units.cell_unit, units.names.size)
    n_cells = n_cells[:, 0].astype(np.int64)
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


fill_doc(condition_fates)
