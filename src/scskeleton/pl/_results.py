"""Reading the results a plot draws: which gene-level result a key stands for, the branches and
lineages of a result (their cells and names), the ``groupby`` labels that name them, and the
expression of the genes a result fitted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from anndata import AnnData
from scipy import sparse

from .._anndata.inputs import gene_columns, get_expression
from .._anndata.schema import LEARNER_METHODS, MAIN_MATRIX, unique_names
from .._dask import is_dask
from ._labels import method_entry, method_name, milestone_names, segment_names

#: Results with one curve per branch, cells split by branch.
BRANCHED = ("branch_test", "fork_test")
#: What each gene-level result (``uns[key]["method"]``) is made by, for messages.
RESULT_TOOLS = {
    "trends": "sks.tl.trends(adata, {graph!r}, path=(start, end))",
    "branch_test": "sks.tl.branch_test(adata, {graph!r}, branch_point=...)",
    "fork_test": "sks.tl.fork_test(adata, {graph!r}, branch_point=...)",
    "association_test": "sks.tl.association_test(adata, {graph!r})",
    "activation": "sks.tl.activation(adata, {graph!r})",
    "trend_modules": "sks.tl.trend_modules(adata, <test key>) after a test on {graph!r}",
}


def result_graph(adata: AnnData, key: str) -> str | None:
    """The key of the graph the gene-level result ``uns[key]`` was computed on, or None.

    Tests and ``tl.activation`` record it in ``uns[key]["graph"]``; the modules of
    ``tl.trend_modules`` are those of the graph of the test they clustered (``uns[key]["result"]``).
    """
    entry = adata.uns.get(key)
    if not isinstance(entry, Mapping):
        return None
    if "graph" in entry:
        return str(entry["graph"])
    if entry.get("method") == "trend_modules" and "result" in entry and str(entry["result"]) != key:
        return result_graph(adata, str(entry["result"]))
    return None


def resolve_result(adata: AnnData, key: str, methods: Sequence[str], *, caller: str) -> str:
    """The key of the gene-level result a plot draws, from the result's own key or from its graph's key.

    ``key`` holding a result (or naming nothing a graph learner wrote) is
    returned as it is, for the plot to check. The key of a fitted skeleton
    (``"rpg"``) stands for the one result of a kind in ``methods`` computed on
    that graph (:func:`result_graph`): ``pl.trends(adata, "rpg", ...)`` draws
    ``"rpg_branch_test"`` when it is the only test run on ``"rpg"``. No such
    result, or several, raise a KeyError that says what to run or lists the
    candidates to pass instead.
    """
    entry = adata.uns.get(key) if isinstance(key, str) else None
    if not isinstance(entry, Mapping) or entry.get("method") not in LEARNER_METHODS:
        return key
    found = [name for name, other in adata.uns.items()
             if isinstance(name, str) and isinstance(other, Mapping) and other.get("method") in methods
             and result_graph(adata, name) == key]
    if len(found) == 1:
        return found[0]
    kinds = ", ".join(f"tl.{method}" for method in methods)
    if not found:
        tools = " or ".join(RESULT_TOOLS.get(method, f"sks.tl.{method}(adata, {{graph!r}})").format(graph=key)
                            for method in methods)
        raise KeyError(f"{caller}: {key!r} is a graph, and no result it draws ({kinds}) was computed on it. Run "
                       f"{tools} first, or pass the key of a result.")
    listed = ", ".join(f"{name!r} ({adata.uns[name]['method']})" for name in found)
    raise KeyError(f"{caller}: {len(found)} results computed on the graph {key!r} could be drawn: {listed}. "
                   f"Pass the one you mean as key, e.g. {caller}(adata, {found[0]!r}, ...).")


def branch_key(result: Mapping, label) -> str:
    """The key under which ``result["segments"]`` and ``result["edges"]`` hold the branch ``label`` of a
    branch or fork test: its first segment's id (``result["branch_ids"]``, stored beside the names that
    ``result["branches"]`` shows), or the label itself in results that name branches by segment id."""
    ids = result.get("branch_ids") if isinstance(result, Mapping) else None
    if ids is None:
        return str(label)
    lookup = dict(zip((str(b) for b in result.get("branches", [])), (str(i) for i in np.asarray(ids).ravel())))
    return lookup.get(str(label), str(label))


def check_groupby(adata: AnnData, groupby: str | None) -> None:
    """``groupby`` names labels of the cells: a categorical, string or boolean column of ``adata.obs``
    (``KeyError`` when it is none; ``ValueError`` for a numeric column, whose every value would be a label)."""
    if groupby is None:
        return
    if not isinstance(groupby, str) or groupby not in adata.obs.columns:
        raise KeyError(f"groupby={groupby!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    column = adata.obs[groupby]
    if (not isinstance(column.dtype, pd.CategoricalDtype) and pd.api.types.is_numeric_dtype(column.dtype)
            and not pd.api.types.is_bool_dtype(column.dtype)):
        raise ValueError(
            f"groupby={groupby!r} names a numeric column; it needs labels of the cells: a categorical or string "
            f"column (adata.obs[{groupby!r}].astype('category') for cluster numbers, pd.cut(...) for a "
            "continuous value)."
        )


def group_labels(adata: AnnData, groupby: str) -> pd.Categorical:
    """``obs[groupby]`` (checked by :func:`check_groupby`) as categories: a categorical column as it is,
    strings or booleans in sorted order; ``adata`` is not changed."""
    column = adata.obs[groupby]
    return column.array if isinstance(column.dtype, pd.CategoricalDtype) else pd.Categorical(column)


def majority_label(adata: AnnData, groupby: str, cells: np.ndarray) -> str | None:
    """The most common ``obs[groupby]`` label among ``cells`` (boolean mask), or None when they have none.

    Labels that tie for the most cells are all named, joined by ``"/"`` in
    their category order (sorted for a non-categorical column): a branch of
    80 Ery and 80 Mk cells is ``"Ery/Mk"``, not whichever came first.
    """
    values = adata.obs[groupby][np.asarray(cells, dtype=bool)]
    counts = values.value_counts(sort=False, dropna=True)
    counts = counts[counts > 0]
    if not len(counts):
        return None
    tied = [str(label) for label in counts.index[counts.to_numpy() == counts.max()]]
    if not isinstance(values.dtype, pd.CategoricalDtype):
        tied = sorted(tied)
    return "/".join(tied)


def branch_names(adata: AnnData, key: str, groupby: str | None = None) -> dict[str, str]:
    """Readable names of the branches (or lineages) of the gene-level result ``uns[key]``.

    A branch of ``tl.branch_test`` / ``tl.fork_test`` is named by the
    milestones of its first segment (``"fork 1 → tip 2"``); a lineage of
    ``tl.association_test`` or ``tl.activation`` by its first and last milestone (``"root → tip 2"``).
    With ``groupby`` each is named instead by the most common label of its
    cells (for a lineage: the cells of its last segment, where it ends);
    labels that tie are joined (``"Ery/Mk"``, see :func:`majority_label`), and
    a label shared by several branches is followed by the milestone name.
    ``"trunk"`` stays ``"trunk"``. Without milestones, ``"branch <id>"`` /
    ``"lineage to segment <id>"``.
    """
    check_groupby(adata, groupby)
    named, cells = branch_cells(adata, key)
    if groupby is not None:
        majority = {label: majority_label(adata, groupby, mask) for label, mask in cells.items()}
        shared = [m for m in majority.values() if m is not None]
        for label, label_majority in majority.items():
            if label_majority is None:
                continue
            named[label] = label_majority if shared.count(label_majority) == 1 \
                else f"{label_majority} ({named[label]})"
    return named


def branch_cells(adata: AnnData, key: str) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    """The milestone names of the branches (or lineages) of ``uns[key]`` (:func:`branch_names` without
    ``groupby``) and the cells that name them by majority (boolean masks; none without segments)."""
    result = adata.uns[key]
    graph_key = str(result.get("graph", ""))
    graph = adata.uns.get(graph_key, {})
    segment_column = f"{graph_key}_segment"
    segments = adata.obs[segment_column].astype(str).to_numpy() if segment_column in adata.obs else None
    named: dict[str, str] = {}
    cells: dict[str, np.ndarray] = {}
    if result.get("method") in ("association_test", "activation"):
        nodes = milestone_names(graph)
        for leaf, chain in result["lineages"].items():
            chain = [str(s) for s in np.asarray(chain).ravel()]
            paths = graph.get("segments", {})
            if nodes and chain[0] in paths and chain[-1] in paths:
                first = nodes.get(int(np.asarray(paths[chain[0]])[0]))
                last = nodes.get(int(np.asarray(paths[chain[-1]])[-1]))
                named[str(leaf)] = f"{first} → {last}" if first and last else f"lineage to segment {leaf}"
            else:
                named[str(leaf)] = f"lineage to segment {leaf}"
            if segments is not None:
                cells[str(leaf)] = segments == chain[-1]
    else:
        for label in [str(b) for b in result.get("branches", [])]:
            ids = [str(s) for s in np.asarray(result.get("segments", {}).get(branch_key(result, label),
                                                                              [label])).ravel()]
            first = segment_names(graph, ids[:1])[0] if ids else f"segment {label}"
            named[label] = first if not first.startswith("segment ") else f"branch {label}"
            if segments is not None:
                cells[label] = np.isin(segments, ids)
            elif f"{key}_branch" in adata.obs:
                cells[label] = (adata.obs[f"{key}_branch"].astype(str) == label).to_numpy()
        named["trunk"] = "trunk"
    return named, cells


def category_names(adata: AnnData, color: str, categories: Sequence) -> list[str]:
    """Readable names of the categories of ``obs[color]``.

    Segment ids (``obs[f"{key}_segment"]``) become their milestone labels
    (``"fork 1 → tip 2"``) and branch ids of a branch or fork test
    (``obs[f"{key}_branch"]``) their branch names (:func:`branch_names`);
    every other category is kept.
    """
    plain = [str(c) for c in categories]
    for key in adata.uns:
        entry = method_entry(adata, key) if isinstance(key, str) else None
        if entry is None:
            continue
        if color == f"{key}_segment" and "segments" in entry:
            return unique_names(segment_names(entry, plain))
        if color == f"{key}_branch" and entry.get("method") in ("branch_test", "fork_test"):
            named = branch_names(adata, key)
            return unique_names([named.get(c, c) for c in plain])
    return plain


def time_label(adata: AnnData, result: Mapping) -> str:
    """The x axis of a result: ``"DDRTree pseudotime"``, ``"registered DDRTree pseudotime"`` or the path position."""
    kind = result.get("time", "pseudotime")
    method = method_name(adata, str(result["graph"])) if str(result.get("graph", "")) in adata.uns else ""
    pseudotime = f"{method} pseudotime".strip()
    if kind == "pseudotime":
        return pseudotime
    if kind == "registered pseudotime":
        return f"registered {pseudotime}"
    return "position along the path"


def cell_times(adata: AnnData, key: str, result: dict) -> np.ndarray:
    """Each cell's time on the result's axis, NaN for cells the result did not use."""
    if result["method"] != "association_test":
        return adata.obs[f"{key}_time"].to_numpy(dtype=float)
    on_lineage = {str(s) for chain in result["lineages"].values() for s in chain}
    graph = result["graph"]
    times = adata.obs[f"{graph}_pseudotime"].to_numpy(dtype=float).copy()
    if f"{graph}_segment" in adata.obs:
        times[~adata.obs[f"{graph}_segment"].astype(str).isin(on_lineage).to_numpy()] = np.nan
    return times


def curve_spans(curves: np.ndarray, n_grid: int) -> list[tuple[int, int]]:
    """Per block (axis 1 of genes × blocks × grid curves), the grid columns [first, end) its curves are defined on."""
    spans = []
    for b in range(curves.shape[1]):
        defined = np.flatnonzero(np.isfinite(curves[:, b, :]).any(axis=0))
        spans.append((int(defined[0]), int(defined[-1]) + 1) if defined.size else (0, n_grid))
    return spans


def fitted_genes(adata: AnnData, key: str, result: dict, genes: list[str], gene_symbols: str | None) -> np.ndarray:
    """Column indices of genes (named by ``var_names`` or ``adata.var[gene_symbols]``) that the result
    holds a curve for."""
    index = gene_columns(adata, genes, gene_symbols=gene_symbols)
    curves = np.asarray(adata.varm[f"{key}_curves"], dtype=float)
    fitted = ~np.isnan(curves[index].reshape(len(index), -1)).all(axis=1)
    if not fitted.all():
        missing = [gene for gene, ok in zip(genes, fitted) if not ok]
        tool = f"tl.{result['method']}"
        raise KeyError(f"Gene(s) {missing[:5]} were not fitted by the {tool} run {key!r}; rerun it with "
                       "these genes in genes= (or genes=None for all).")
    return index


def fitted_expression(adata: AnnData, result: dict, columns: np.ndarray, cells: np.ndarray, *, use_raw: bool | None,
                layer: str | None) -> tuple[np.ndarray, str]:
    """cells × genes values, from the matrix the fit used (``use_raw=None, layer=None``) or the one asked
    for, and that matrix's name for the axis label (``"X"``, ``"raw"`` or the layer)."""
    if use_raw is None and layer is None:  # what was fitted (results written before use_raw: not raw)
        use_raw = bool(result["params"].get("use_raw", False))
        recorded = str(result["params"]["layer"])
        layer = None if recorded == MAIN_MATRIX else recorded
        if layer is not None and layer not in adata.layers:
            raise KeyError(f"The fit used adata.layers[{layer!r}], which is gone; restore it or refit.")
    matrix, _ = get_expression(adata, layer=layer, use_raw=bool(use_raw), lazy=True)
    shown = "raw" if use_raw else MAIN_MATRIX if layer is None else layer
    if sparse.issparse(matrix):  # the few genes' columns first: rows of all genes would copy most of X
        return sparse.csr_matrix(matrix[:, columns])[cells].toarray().astype(float), shown
    if is_dask(matrix):  # a chunked fit's matrix: only these cells and genes are computed
        return np.asarray(matrix[:, columns][cells], dtype=float), shown
    return np.asarray(matrix[np.ix_(cells, columns)], dtype=float), shown
