"""Words: every title, axis label, colour-bar label and p-value a plot writes.

They are made here (:func:`method_name`, :func:`obs_label`, :func:`basis_label`,
:func:`component_label`, :func:`format_pvalue`; branch names in ``_results``), so that all plots
speak alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from anndata import AnnData

from .._anndata.learners import LEARNERS

#: How a learner (``uns[key]["method"]``) is named in titles, legends and axis labels.
METHOD_NAMES = {method: learner.title for method, learner in LEARNERS.items()}
#: How the gene-level results (``uns[key]["method"]``) are named.
RESULT_NAMES = {
    "trends": "trend test",
    "branch_test": "branch test",
    "fork_test": "fork test",
    "association_test": "association test",
    "trend_modules": "trend modules",
    "activation": "activation",
}
#: Axis names of common scanpy bases (``obsm["X_<name>"]``), as scanpy's papers and tutorials write them.
BASIS_NAMES = {
    "pca": "PC",
    "umap": "UMAP",
    "tsne": "tSNE",
    "diffmap": "DC",
    "phate": "PHATE",
    "spring": "SPRING",
    "draw_graph_fa": "FA",
    "draw_graph_fr": "FR",
    "draw_graph_drl": "DrL",
    "draw_graph_kk": "KK",
}
#: A gene whose q-value is this or more is called "not significant" in titles (the tools' default level).
SIGNIFICANCE = 0.05
#: A p-value (or q-value) of exactly 0 underflowed: it is smaller than this, not 0.
SMALLEST_PVALUE = "1e-300"


def method_entry(adata: AnnData, key: str) -> Mapping | None:
    """``adata.uns[key]`` when a scskeleton tool wrote it (it names its ``method``), else None."""
    entry = adata.uns.get(key)
    return entry if isinstance(entry, Mapping) and "method" in entry else None


def method_name(adata: AnnData, key: str, *, with_key: bool = True) -> str:
    """How the learner (or gene-level result) under ``adata.uns[key]`` is named: ``"DDRTree"``.

    The name comes from ``uns[key]["method"]`` (:data:`METHOD_NAMES`,
    :data:`RESULT_NAMES`). When ``key`` is not the method's own name
    (``key_added=``), it follows in parentheses, so that two fits of one
    method tell apart: ``"DDRTree (fresh)"``, ``"principal tree (RPG, rpg_mpme)"``.
    A key with no method is returned with spaces for underscores.
    """
    entry = method_entry(adata, key)
    method = str(entry["method"]) if entry is not None else ""
    if not method:
        return key.replace("_", " ")
    name = METHOD_NAMES.get(method, RESULT_NAMES.get(method, method.replace("_", " ")))
    if not with_key or key == method:
        return name
    return f"{name[:-1]}, {key})" if name.endswith(")") else f"{name} ({key})"


def is_gene(adata: AnnData, name: str) -> bool:
    """Whether ``name`` is a gene (in ``var_names`` or ``raw.var_names``) rather than an ``.obs`` column."""
    if name in adata.obs.columns:
        return False
    return name in adata.var_names or (adata.raw is not None and name in adata.raw.var_names)


def obs_label(adata: AnnData, name: str, *, short: bool = False) -> str:
    """A readable name for an ``.obs`` column or a gene.

    Genes keep their names (``"Gata1"``, ``"gene_0"``). A column written by a
    learner or trajectory tool is named by its method and what it holds:
    ``"ddrtree_pseudotime"`` → ``"DDRTree pseudotime"`` (``short=True``:
    ``"pseudotime"``, for colour bars). Any other column has its underscores
    turned into spaces: ``"cell_type"`` → ``"cell type"``.
    """
    if is_gene(adata, name):
        return name
    keys = sorted((k for k in adata.uns if isinstance(k, str) and method_entry(adata, k) is not None), key=len,
                  reverse=True)
    for key in keys:
        if name.startswith(f"{key}_") and len(name) > len(key) + 1:
            what = name[len(key) + 1:].replace("_", " ")
            if what == "milestone":
                what = "nearest milestone"
            return what if short else f"{method_name(adata, key)} {what}"
    return name.replace("_", " ")


def with_method(label: str, adata: AnnData, key: str) -> str:
    """``label`` followed by the method of ``key`` unless it names it already: ``"cell type — DDRTree"``."""
    method = method_name(adata, key)
    return label if method in label else f"{label} — {method}"


def basis_label(adata: AnnData, basis: str) -> str:
    """The axis name of an ``obsm`` basis: ``"X_pca"`` → ``"PC"``, ``"X_ddrtree"`` → ``"DDRTree"``.

    A basis learned by a scskeleton method (``X_<key>``) is named by the
    method, without its key: ``"X_ce_neg_trace"`` → ``"convex embedding"``.
    """
    name = basis[2:] if basis.startswith("X_") else basis
    if method_entry(adata, name) is not None:
        return method_name(adata, name, with_key=False)
    if name.lower() in BASIS_NAMES:
        return BASIS_NAMES[name.lower()]
    return name.replace("_", " ")


def component_label(axis_name: str, dimension: int) -> str:
    """The axis label of a basis' ``dimension`` (from 0): ``"PC1"`` as scanpy writes its own bases, else ``"DDRTree 1"``.

    Figures of this package sit beside scanpy's in the same notebook, so scanpy's
    short names keep its spelling; a name of words needs the space.
    """
    joiner = "" if axis_name in BASIS_NAMES.values() else " "
    return f"{axis_name}{joiner}{dimension + 1}"


def format_pvalue(value: float, name: str = "q") -> str:
    """``"q = 0.012"``, ``"q = 3.2e-5"`` (two significant digits); ``"q < 1e-300"`` for an underflowed 0.

    Never ``"q = 0"``: a p-value of 0 only means it was too small for a float;
    and 1 is written ``"q = 1.0"``, so that it reads as a value, not a count.
    NaN (not tested, or a degenerate gene) is written ``"q = n/a"``.
    """
    value = float(value)
    if not np.isfinite(value):
        return f"{name} = n/a"
    if value <= 0.0:
        return f"{name} < {SMALLEST_PVALUE}"
    if value >= 0.01:
        text = f"{value:.2g}"
        return f"{name} = {text if '.' in text else text + '.0'}"
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{name} = {mantissa}e{int(exponent)}"


def milestone_names(entry: Mapping) -> dict[int, str]:
    """Node → milestone name, from ``entry["milestones"]`` (empty when there is none)."""
    stored = entry.get("milestones", {}) if isinstance(entry, Mapping) else {}
    return dict(zip(np.asarray(stored.get("nodes", []), dtype=np.intp).tolist(),
                    [str(name) for name in stored.get("names", [])]))


def segment_names(entry: Mapping, ids: Sequence) -> list[str]:
    """Each segment's label (``"root → fork 1"``, from ``uns[key]["milestones"]``), or ``"segment <id>"``."""
    stored = entry.get("milestones", {}) if isinstance(entry, Mapping) else {}
    labels = [str(label) for label in stored.get("segment_labels", [])]
    segments = entry.get("segments", {}) if isinstance(entry, Mapping) else {}
    order = sorted((str(s) for s in segments), key=lambda s: (len(s), s))
    label_of = dict(zip(order, labels)) if len(order) == len(labels) else {}
    return [label_of.get(str(i), f"segment {i}") for i in ids]


def lineage_title(groupby: str | None) -> str:
    """The title of the legend of lineages: what names them."""
    return "lineage" if groupby is None else f"lineage (named by {groupby.replace('_', ' ')})"
