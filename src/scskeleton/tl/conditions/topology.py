"""``tl.condition_topology``: does one tree hold for every condition, fork by fork?"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key, check_random_state
from ..._anndata.results import plain_params
from ..._anndata.schema import resolve_key
from ..._core.stats import lineages as lineage_core
from ..._core.stats.conditions import permutation_pvalue, relabellings, share_spread
from ..._core.stats.inference import benjamini_hochberg
from ..._core.validation import check_integer
from ..genes.selection import stored_trajectory
from ..trajectory.milestones import node_name, segment_label
from .units import UNITS_DOC, read_units

#: A condition's cells reach along a branch as far as this quantile of their pseudotime there.
REACH_QUANTILE = 0.95


def condition_topology(
    adata: AnnData,
    key: str | None = None,
    *,
    condition: str,
    sample: str | None = None,
    reference: str | None = None,
    n_permutations: int = 999,
    random_state: int | None = 0,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Test, fork by fork, whether the conditions take the branches of one tree alike.

    Each condition's cells are placed on the common tree (``tl.pseudotime``'s
    segments). At every fork, each unit (a sample of ``obs[sample]``, or each
    cell without ``sample``) is summarised by how its cells past the fork
    split between the branches (a branch: the segment leaving the fork and
    everything downstream). A fork that one condition lacks shows as a
    branch its units leave (nearly) empty; a fork whose branches only hold
    different shares, as a shift of the split. The statistic is the spread of
    the conditions' mean splits against the spread of the units' splits
    within conditions (summed over the branches), and its null is the
    permutation of the condition labels among the units: every distinct
    relabelling where there are at most ``n_permutations``, else that many
    drawn. The p-value is exact for exchangeable units and makes no
    assumption about the shares' distribution; its resolution is that of the
    relabellings: two conditions of 3 samples have 10 distinct splits of the
    samples, so no p-value below 0.1 (a warning says so), 5 samples each
    allow 1/126, 10 samples each 1/1000. q-values are Benjamini–Hochberg over
    the forks. Without ``sample`` the cells are permuted, which treats them
    as independent (a warning says so).

    Besides the test, ``occupancy`` says how each condition fills each
    branch: its mean share of the branch divided by the share all units give
    it (1 for alike, 0 for a branch the condition never enters), and
    ``reach`` how far its cells go along the branch (the 95th percentile of
    their pseudotime there, as a share of the branch's span over all cells).

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
        It must be a tree with at least one fork.
    {units}
    n_permutations
        Relabellings drawn for the null where there are more distinct ones.
    random_state
        Seed of the drawn relabellings.
    key_added
        Name of the result; default ``f"{key}_condition_topology"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.uns[name]``
        ``method`` (``"condition_topology"``), ``params``, ``graph``,
        ``conditions`` (the reference first), ``test`` (``"permutation"``), ``forks`` (the forks' milestone
        names) and ``fork_nodes``; per fork ``statistic``, ``pval``, ``qval``,
        ``least_pval`` (the smallest p-value its relabellings can give) and
        ``n_relabellings``; ``branches`` (``{fork node: the branches' labels}``),
        ``shares``, ``occupancy`` and ``reach`` (``{fork node: conditions ×
        branches}``); and the units: ``units``, ``unit_condition``, and
        ``unit_shares`` (``{fork node: units × branches}``, NaN for a unit
        without cells past the fork).

    Examples
    --------
    >>> adata = sks.datasets.simulate_trajectory(2000, n_genes=200, conditions=("control", "treated"),
    ...                                          samples_per_condition=5, missing_fate="fate_2")
    >>> # … normalise, PCA, sks.tl.rpg, sks.tl.root, sks.tl.pseudotime
    >>> sks.tl.condition_topology(adata, "rpg", condition="condition", sample="sample")
    >>> adata.uns["rpg_condition_topology"]["occupancy"]
    """
    key = resolve_key(adata, key)
    name = check_key(key_added, f"{key}_condition_topology")
    n_permutations = check_integer("n_permutations", n_permutations, low=19, role="relabellings drawn")
    seed = check_random_state(random_state)
    rng = np.random.default_rng(seed)
    segments, labels, pseudotime = stored_trajectory(adata, key)
    forks = [int(node) for node in np.asarray(adata.uns[key].get("branch_points", []))]
    if not forks:
        raise ValueError(f"The tree of {key!r} has no fork: there is no split between branches to compare.")
    units = read_units(adata, condition=condition, sample=sample, reference=reference)
    start = logg.info(f"comparing the {len(forks)} fork(s) of {key!r} between {len(units.conditions)} conditions of "
                      f"obs[{condition!r}]")
    per_fork = [_fork(adata, key, segments, labels, pseudotime, units, node, n_permutations, rng) for node in forks]
    pvals = np.array([fork["pval"] for fork in per_fork])
    least = np.array([fork["least"] for fork in per_fork])
    if units.sample is not None and np.nanmin(least) > 0.05:
        logg.warning(f"With these samples the smallest p-value a relabelling of the conditions can give is "
                     f"{np.nanmin(least):.2g}: no fork can reach p < 0.05. Read the occupancy and reach, or add "
                     "samples (5 a condition allow p = 0.008).")

    adata = adata.copy() if copy else adata
    names = [node_name(adata, key, node) for node in forks]
    nodes = [str(node) for node in forks]
    adata.uns[name] = {
        "method": "condition_topology",
        "params": plain_params(dict(condition=condition, sample=sample or "", reference=units.conditions[0],
                                    n_permutations=n_permutations, random_state=seed)),
        "graph": key,
        "conditions": np.asarray(units.conditions, dtype=object),
        "test": "permutation",
        "forks": np.asarray(names, dtype=object),
        "fork_nodes": np.asarray(forks, dtype=np.int64),
        "statistic": np.array([fork["statistic"] for fork in per_fork]),
        "pval": pvals,
        "qval": benjamini_hochberg(pvals),
        "least_pval": least,
        "n_relabellings": np.array([fork["n_relabellings"] for fork in per_fork], dtype=np.int64),
        **{field: dict(zip(nodes, (fork[field] for fork in per_fork)))
           for field in ("branches", "shares", "occupancy", "reach", "unit_shares", "unit_reach")},
        "units": np.asarray(units.names, dtype=object),
        "unit_condition": np.asarray(units.conditions, dtype=object)[units.condition],
    }
    differ = [n for n, q in zip(names, adata.uns[name]["qval"]) if q < 0.05]
    logg.info(f"    finished ({len(differ)} fork(s) with q < 0.05{': ' + ', '.join(differ) if differ else ''})",
              time=start, deep=f"added\n    uns[{name!r}]")
    return adata if copy else None


def _fork(adata, key, segments, labels, pseudotime, units, node, n_permutations, rng) -> dict:
    """The test and the summaries of one fork (:func:`condition_topology`)."""
    _, branches = lineage_core.branch_cells(segments, node, adata.uns[key]["root"])
    branch = np.full(labels.size, -1, dtype=np.intp)
    for b, members in enumerate(branches):
        branch[np.isin(labels, members)] = b
    counted = (branch >= 0) & (units.cell_unit >= 0) & np.isfinite(pseudotime)
    n_units, n_branches = units.names.size, len(branches)
    counts = np.zeros((n_units, n_branches))
    np.add.at(counts, (units.cell_unit[counted], branch[counted]), 1.0)
    totals = counts.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        unit_shares = counts / totals[:, None]
    present = totals > 0
    conditions = units.condition[present]
    n_conditions = len(units.conditions)
    unit_reach = _unit_reach(pseudotime, branch, units.cell_unit, counted, n_units, n_branches)
    summaries = np.hstack([unit_shares, unit_reach])[present]

    def by_condition(values):
        return np.vstack([values[conditions == c].mean(axis=0) if np.any(conditions == c)
                          else np.full(values.shape[1], np.nan) for c in range(n_conditions)])

    shares, reach = by_condition(unit_shares[present]), by_condition(unit_reach[present])
    with np.errstate(invalid="ignore", divide="ignore"):
        occupancy = shares / unit_shares[present].mean(axis=0)
    result = {
        "branches": np.asarray([segment_label(adata.uns[key], members[0]) for members in branches], dtype=object),
        "shares": shares, "occupancy": occupancy, "reach": reach, "unit_shares": unit_shares,
        "unit_reach": np.where(present[:, None], unit_reach, np.nan),
        "statistic": np.nan, "pval": np.nan, "least": np.nan, "n_relabellings": 0,
    }
    least_units = 2 if units.sample is not None else 1
    if min(np.sum(conditions == c) for c in range(n_conditions)) < least_units:
        logg.warning(f"At {node_name(adata, key, node)} some condition has fewer than {least_units} unit(s) with "
                     "cells past the fork: it is not tested (p = NaN).")
        return result
    blocks, exhaustive = relabellings(conditions, n_permutations, rng)
    statistics = share_spread(summaries, blocks, n_conditions)
    sizes = np.bincount(conditions, minlength=n_conditions)
    # a labelling and its mirror (conditions of equal size swapped) split the units alike
    mirrors = math.prod(math.factorial(int(k)) for k in np.bincount(sizes))
    result.update(statistic=float(statistics[0]), pval=permutation_pvalue(statistics), n_relabellings=statistics.size,
                  least=float(mirrors / statistics.size) if exhaustive else 1.0 / statistics.size)
    return result


def _unit_reach(pseudotime, branch, unit, counted, n_units: int, n_branches: int) -> np.ndarray:
    """Units × branches: how far a unit's cells go along each branch, as a share of the span of all
    cells there (the :data:`REACH_QUANTILE` of their pseudotime, from the branch's first cell); 0 for
    a branch the unit has no cells on."""
    reach = np.zeros((n_units, n_branches))
    frame = pd.DataFrame({"unit": unit[counted], "branch": branch[counted], "time": pseudotime[counted]})
    begin = frame.groupby("branch")["time"].min()
    span = frame.groupby("branch")["time"].quantile(REACH_QUANTILE) - begin
    far = frame.groupby(["unit", "branch"])["time"].quantile(REACH_QUANTILE).reset_index()
    shares = (far["time"].to_numpy() - begin[far["branch"]].to_numpy()) / np.maximum(span[far["branch"]].to_numpy(),
                                                                                      np.finfo(float).tiny)
    reach[far["unit"].to_numpy(), far["branch"].to_numpy()] = np.clip(shares, 0.0, None)
    return reach


fill_doc(condition_topology, units=UNITS_DOC)
