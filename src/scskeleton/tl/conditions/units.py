"""The units of replication of a comparison between conditions: the samples, or else the cells."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.results import plain_params
from ..._anndata.schema import fate_probabilities_key, pseudotime_key
from ..._core.stats.inference import benjamini_hochberg

#: The parameters every condition tool takes to define its units, for its docstring.
UNITS_DOC = """\
condition
    The ``obs`` column of the conditions (at least two).
sample
    The ``obs`` column of the samples: each sample belongs to one
    condition, and each condition has at least two. ``None``: every cell
    is a unit (only for data without sample-to-sample variation).
reference
    The condition the others are compared with; default the first
    category of ``obs[condition]``."""


@dataclass(frozen=True)
class Units:
    """Which unit every cell belongs to, and the condition of every unit."""

    #: The conditions in the order compared (the reference first).
    conditions: list[str]
    #: The units' names: the samples, or the cells' names without ``sample``.
    names: np.ndarray
    #: Code (into ``conditions``) of every unit.
    condition: np.ndarray
    #: Code (into ``names``) of every cell's unit; -1 for cells without a condition or sample.
    cell_unit: np.ndarray
    #: The ``obs`` column of the samples, or ``None`` (each cell its own unit).
    sample: str | None


def read_units(adata: AnnData, *, condition: str, sample: str | None, reference: str | None = None) -> Units:
    """The units of a comparison of ``obs[condition]``, checked: at least two conditions and, with
    ``sample``, every sample in one condition and at least two samples in each.

    Without ``sample`` every cell is a unit, which treats the cells of a condition as independent
    draws; a warning says so, since cells of one sample share its deviation."""
    labels = _obs_labels(adata, condition, "condition")
    conditions = [str(c) for c in pd.unique(labels.dropna())]
    conditions = sorted(conditions) if not isinstance(labels.dtype, pd.CategoricalDtype) else [
        str(c) for c in labels.cat.categories if str(c) in conditions]
    if len(conditions) < 2:
        raise ValueError(f"obs[{condition!r}] holds {len(conditions)} condition(s), {conditions}: a comparison "
                         "needs at least two.")
    if reference is not None:
        if reference not in conditions:
            raise ValueError(f"reference={reference!r} is not a condition of obs[{condition!r}]: {conditions}.")
        conditions.remove(reference)
        conditions.insert(0, reference)
    code = {name: c for c, name in enumerate(conditions)}
    cell_condition = np.array([code.get(str(v), -1) if pd.notna(v) else -1 for v in labels], dtype=np.int64)
    if sample is None:
        logg.warning("Without sample=, each cell counts as an independent replicate of its condition, so p-values "
                     "are too small wherever samples differ from each other. Pass sample= (the obs column of "
                     "the samples) to compare the samples.")
        return Units(conditions, np.asarray(adata.obs_names, dtype=str), cell_condition,
                     np.where(cell_condition >= 0, np.arange(adata.n_obs), -1), None)
    samples = _obs_labels(adata, sample, "sample").astype(object)
    known = (cell_condition >= 0) & samples.notna().to_numpy()
    table = pd.DataFrame({"sample": samples[known].astype(str).to_numpy(), "condition": cell_condition[known]})
    per_sample = table.groupby("sample", sort=False)["condition"].unique()
    mixed = [name for name, found in per_sample.items() if len(found) > 1]
    if mixed:
        raise ValueError(f"Sample(s) {mixed[:5]} of obs[{sample!r}] hold cells of several conditions; each sample "
                         f"must belong to one condition of obs[{condition!r}].")
    names = per_sample.index.to_numpy(dtype=str)
    unit_condition = np.array([found[0] for found in per_sample], dtype=np.int64)
    few = [conditions[c] for c in range(len(conditions)) if np.sum(unit_condition == c) < 2]
    if few:
        raise ValueError(f"Condition(s) {few} have fewer than two samples in obs[{sample!r}]: with one sample a "
                         "condition, sample-to-sample variation cannot be told from the condition's effect. "
                         "Compare conditions with at least two samples each.")
    index = {name: u for u, name in enumerate(names)}
    cell_unit = np.full(adata.n_obs, -1, dtype=np.int64)
    cell_unit[known] = [index[s] for s in table["sample"]]
    return Units(conditions, names, unit_condition, cell_unit, sample)


def _obs_labels(adata: AnnData, column: str, role: str) -> pd.Series:
    if not isinstance(column, str):
        raise ValueError(f"{role} must name a column of adata.obs; got {column!r}.")
    if column not in adata.obs:
        raise KeyError(f"{role}={column!r} is not a column of adata.obs; columns: {list(map(str, adata.obs.columns))}.")
    return adata.obs[column]


def counted_units(units: Units, weight: np.ndarray, key: str) -> np.ndarray:
    """The units that hold cells with values (``weight`` > 0), checked: at least two a condition with
    samples, one without."""
    counted = np.asarray(weight) > 0
    present = {c: int(np.sum(counted & (units.condition == k))) for k, c in enumerate(units.conditions)}
    if min(present.values()) < (2 if units.sample else 1):
        raise ValueError(f"Too few units with values in some condition ({present}): their cells lie where no root "
                         f"of {key!r} reaches. Root every part of {key!r} and rerun sks.tl.pseudotime and "
                         "sks.tl.fate_probabilities.")
    return counted


def comparison_entry(method: str, key: str, units: Units, counted: np.ndarray, comparison, *, condition: str,
                     sample: str | None, **fields) -> dict:
    """``uns[name]`` of a comparison between conditions: what was compared, the test per column, and
    the units (``fields`` add the method's own, e.g. each unit's summaries)."""
    return {
        "method": method,
        "params": plain_params(dict(condition=condition, sample=sample or "", reference=units.conditions[0])),
        "graph": key,
        "conditions": np.asarray(units.conditions, dtype=object),
        "test": comparison.test,
        "effect": comparison.effect,
        "statistic": comparison.statistic,
        "pval": comparison.pvals,
        "qval": benjamini_hochberg(comparison.pvals),
        "means": comparison.means,
        "units": np.asarray(units.names[counted], dtype=object),
        "unit_condition": np.asarray(units.conditions, dtype=object)[units.condition[counted]],
        **fields,
    }


def stored_fates(adata: AnnData, key: str, *, with_pseudotime: bool = False) -> list[str]:
    """The fates of ``key`` whose probabilities ``tl.fate_probabilities`` stored (and, with
    ``with_pseudotime``, checked that ``tl.pseudotime`` ran); a KeyError that says what to run."""
    missing = fate_probabilities_key(key) not in adata.obsm or "fates" not in adata.uns.get(key, {})
    if with_pseudotime and (missing or pseudotime_key(key) not in adata.obs):
        raise KeyError(f"No pseudotime or fate probabilities of {key!r}; run sks.tl.pseudotime(adata, {key!r}) and "
                       f"sks.tl.fate_probabilities(adata, {key!r}) first.")
    if missing:
        raise KeyError(f"No fate probabilities of {key!r}; run sks.tl.fate_probabilities(adata, {key!r}) first.")
    return [str(f) for f in adata.uns[key]["fates"]]
