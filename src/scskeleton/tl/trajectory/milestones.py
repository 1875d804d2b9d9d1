"""``tl.milestones`` and ``tl.rename_milestones``: names for the root(s), forks and tips of a trajectory.

``tl.pseudotime`` names every milestone (each root, branch point and leaf of
its topology) by default and writes the nearest milestone of each cell; the
functions here rename them. Everything that takes a node also takes a
milestone name, through :func:`resolve_node`.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.results import update_entry
from ..._anndata.schema import fate_probabilities_key, milestone_key, read_graph, resolve_key, unique_names


def milestones(
    adata: AnnData, key: str | None = None, *, groupby: str | None = None, copy: bool = False
) -> AnnData | None:
    """Name the milestones of a trajectory after the cells around them.

    ``tl.pseudotime`` already names every milestone, the root(s), branch
    points and leaves of the trajectory: ``"root"`` (``"root 1"``,
    ``"root 2"``, … for several), ``"fork 1"``, ``"fork 2"``, … and
    ``"tip 1"``, ``"tip 2"``, …, each kind numbered in order of pseudotime
    (components without a root last). With ``groupby`` each milestone
    takes instead the most common label among the cells nearest to it
    (``obs[f"{key}_milestone"]``): roots and tips always, a label shared
    by several of them numbered (``"Ery"``, ``"Ery 2"``) in pseudotime order.
    A fork's nearest cells mostly belong to a branch through it, so a fork
    takes its label only when no root, tip or earlier fork has it already;
    otherwise it keeps its default name (the fork after the progenitors is
    ``"fork 1"``, not ``"progenitor 2"``). A milestone with no cells keeps
    its default name. Without ``groupby`` the default
    names come back. Either way segment labels and fate names follow.
    Rerunning ``tl.pseudotime`` resets the default names.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
    groupby
        An ``.obs`` column of labels, e.g. ``"cell_type"``; ``None`` restores
        the default names.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.uns[key]["milestones"]``
        ``nodes`` (node index of each milestone), ``names`` (its name, in the
        same order) and ``segment_labels`` (``"root → fork 1"`` for every
        segment id of ``uns[key]["segments"]``, in the order of the ids).
    ``adata.obs[f"{key}_milestone"]``
        The categories renamed.
    ``adata.uns[key]["fates"]``
        Renamed, when ``tl.fate_probabilities`` has run.
    """
    key = resolve_key(adata, key)
    stored = _stored(adata, key)
    if groupby is None:
        names = _default_names(adata, key, stored)
    else:
        names = _majority_names(adata, key, groupby, stored)
    adata = adata.copy() if copy else adata
    _write_names(adata, key, stored, names)
    logg.info(f"named the {len(names)} milestones of {key!r}{'' if groupby is None else f' by {groupby!r}'}: "
              f"{', '.join(names[:8])}{' …' if len(names) > 8 else ''}")
    return adata if copy else None


def rename_milestones(
    adata: AnnData, key: str | None = None, mapping: Mapping[str, str] | None = None, *, copy: bool = False
) -> AnnData | None:
    """Rename some milestones of a trajectory.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
    mapping
        ``{current name: new name}``, e.g. ``{"tip 1": "Ery", "tip 2": "Mk"}``;
        milestones not named keep their names. The new names must be non-empty
        strings, and all names unique afterwards.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the fields listed
    in :func:`milestones`. Unknown names raise a KeyError and duplicated names a
    ValueError, and leave ``adata`` unchanged.
    """
    key = resolve_key(adata, key)
    stored = _stored(adata, key)
    current = list(stored["names"])
    if not isinstance(mapping, Mapping):
        raise TypeError(f"mapping must be a dict {{current name: new name}}; got {type(mapping).__name__}.")
    unknown = [old for old in mapping if old not in current]
    if unknown:
        raise KeyError(f"No milestone(s) {unknown} in {key!r}; milestones: {current}.")
    for new in mapping.values():
        _check_name(new)
    names = [mapping.get(name, name) for name in current]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"Renaming would give several milestones the name(s) {repeated}; names must be unique.")
    adata = adata.copy() if copy else adata
    _write_names(adata, key, stored, names)
    logg.info(f"renamed {sum(old != new for old, new in zip(current, names))} milestone(s) of {key!r}")
    return adata if copy else None


def resolve_node(adata: AnnData, key: str, value, *, n_nodes: int, what: str = "node") -> int:
    """A node index given as an index or as a milestone name (``uns[key]["milestones"]``).

    The one place where tools turn a milestone name into a node; ``what``
    names the parameter in the error messages.
    """
    if isinstance(value, str):
        entry = adata.uns[key].get("milestones")
        if entry is None:
            raise KeyError(
                f"{what}={value!r} names a milestone, but {key!r} has none yet: run "
                f"sks.tl.pseudotime(adata, {key!r}) first, or give a node index."
            )
        names = [str(name) for name in entry["names"]]
        if value not in names:
            raise KeyError(f"No milestone {value!r} in {key!r}; milestones: {names}.")
        return int(np.asarray(entry["nodes"])[names.index(value)])
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 0 <= value < n_nodes:
        raise ValueError(f"{what} must be a node index in [0, {n_nodes - 1}] or a milestone name; got {value!r}.")
    return int(value)


def milestone_name(adata: AnnData, key: str, node) -> str | None:
    """The name of the milestone at ``node`` (``uns[key]["milestones"]``), or None when it is none."""
    entry = adata.uns.get(key, {})
    stored = entry.get("milestones") if isinstance(entry, Mapping) else None
    if stored is None:
        return None
    nodes = np.asarray(stored["nodes"]).tolist()
    return str(stored["names"][nodes.index(int(node))]) if int(node) in nodes else None


def node_name(adata: AnnData, key: str, node) -> str:
    """How messages name a node: its milestone name (``"fork 1"``) when it is one, else ``"node 12"``."""
    name = milestone_name(adata, key, node)
    return f"node {int(node)}" if name is None else name


def node_names(adata: AnnData, key: str, nodes) -> str:
    """:func:`node_name` of each of ``nodes``, joined by commas."""
    return ", ".join(node_name(adata, key, node) for node in np.atleast_1d(np.asarray(nodes)).tolist())


def node_argument(adata: AnnData, key: str, node) -> str:
    """How a message's example call passes a node: its milestone name quoted, else its index."""
    name = milestone_name(adata, key, node)
    return str(int(node)) if name is None else repr(name)


def segment_label(entry: Mapping, segment) -> str:
    """The label of a segment id (``"fork 1 → tip 2"``, ``entry["milestones"]["segment_labels"]``);
    ``"segment <id>"`` when the trajectory has no labels for it."""
    labels = [str(label) for label in entry.get("milestones", {}).get("segment_labels", [])]
    ids = sorted((str(s) for s in entry.get("segments", {})), key=int)
    position = ids.index(str(segment)) if str(segment) in ids else -1
    return labels[position] if 0 <= position < len(labels) and len(labels) == len(ids) else f"segment {segment}"


def lineage_label(entry: Mapping, chain) -> str:
    """A lineage (segment ids from the root to a leaf) by its first and last milestone: ``"root → tip 2"``."""
    chain = [str(s) for s in np.asarray(chain).ravel()]
    segments = entry.get("segments", {})
    stored = entry.get("milestones", {})
    name_of = dict(zip(np.asarray(stored.get("nodes", [])).tolist(), [str(n) for n in stored.get("names", [])]))
    if chain[0] in segments and chain[-1] in segments:
        first = name_of.get(int(np.asarray(segments[chain[0]])[0]))
        last = name_of.get(int(np.asarray(segments[chain[-1]])[-1]))
        if first is not None and last is not None:
            return f"{first} → {last}"
    return f"lineage to segment {chain[-1]}"


def resolve_segment(entry: Mapping, segment) -> str | None:
    """The segment id of a segment given by id (``3``, ``"3"``) or by label (``"fork 1 → tip 2"``); None if unknown."""
    label = str(segment)
    if label in entry["segments"]:
        return label
    labels = [str(name) for name in entry.get("milestones", {}).get("segment_labels", [])]
    return str(labels.index(label)) if label in labels else None


def milestone_order(roots, branch_points, leaves, node_distance: np.ndarray, meeting_points=()) -> np.ndarray:
    """The milestone nodes: the roots as given, then the other branch points, leaves and meeting points, each by pseudotime.

    Ties (and unreachable nodes, at infinite distance) go by node index.
    """
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))

    def by_time(candidates):
        candidates = np.setdiff1d(np.asarray(candidates, dtype=np.intp), roots)
        return candidates[np.lexsort((candidates, node_distance[candidates]))]

    return np.concatenate(
        [roots, by_time(branch_points), by_time(leaves), by_time(np.asarray(meeting_points, dtype=np.intp))]
    ).astype(np.intp)


def default_names(nodes, roots, branch_points, leaves) -> list[str]:
    """``"root"`` (or ``"root 1"``, …), ``"fork 1"``, …, ``"tip 1"``, … and ``"meeting 1"``, …, numbered in the order of ``nodes``.

    A milestone that is neither a root, a branch point nor a leaf is where the
    pseudotime from two roots meets (:class:`~scskeleton._core.trees.trajectory.Topology`).
    """
    roots = set(np.atleast_1d(np.asarray(roots)).tolist())
    branch_points = set(np.asarray(branch_points).ravel().tolist())
    leaves = set(np.asarray(leaves).ravel().tolist())
    counts = {"root": 0, "fork": 0, "tip": 0, "meeting": 0}
    names = []
    for node in np.asarray(nodes).tolist():
        kind = (
            "root" if node in roots else "fork" if node in branch_points else "tip" if node in leaves else "meeting"
        )
        counts[kind] += 1
        names.append(f"{kind} {counts[kind]}")
    return ["root" if name == "root 1" and len(roots) == 1 else name for name in names]


def milestone_entry(nodes: np.ndarray, names: list[str], segments: Mapping) -> dict:
    """``uns[key]["milestones"]``: parallel arrays of nodes and names, and the segments' labels (h5ad-safe)."""
    name_of = dict(zip(np.asarray(nodes).tolist(), names))
    labels = []
    for segment_id in sorted(segments, key=int):
        path = np.asarray(segments[segment_id])
        ends = (name_of.get(int(node), f"node {int(node)}") for node in (path[0], path[-1]))
        labels.append(" → ".join(ends))
    return {
        "nodes": np.asarray(nodes, dtype=np.int64),
        "names": np.asarray(names, dtype=object),
        "segment_labels": np.asarray(unique_names(labels), dtype=object),
    }


def _stored(adata: AnnData, key: str) -> dict:
    read_graph(adata, key)
    entry = adata.uns[key]
    if "milestones" not in entry or milestone_key(key) not in adata.obs:
        raise KeyError(
            f"The trajectory of {key!r} has no milestones; run sks.tl.root(adata, {key!r}, ...) and "
            f"sks.tl.pseudotime(adata, {key!r}) first."
        )
    stored = entry["milestones"]
    return {"nodes": np.asarray(stored["nodes"], dtype=np.intp), "names": [str(n) for n in stored["names"]]}


def _default_names(adata: AnnData, key: str, stored: dict) -> list[str]:
    entry = adata.uns[key]
    return default_names(stored["nodes"], entry["root"], entry["branch_points"], entry["leaves"])


def _majority_names(adata: AnnData, key: str, groupby, stored: dict) -> list[str]:
    """Each milestone's most common ``groupby`` label among its nearest cells (ties: the first label).

    Roots, tips and meeting points take it, numbered when shared. A fork takes it only when no root, tip
    or earlier fork has that label already (its nearest cells are mostly those of a branch through it);
    otherwise it keeps its default name.
    """
    if not isinstance(groupby, str) or groupby not in adata.obs:
        raise KeyError(f"groupby={groupby!r} is not a column of adata.obs; columns: {list(adata.obs.columns)}.")
    codes = adata.obs[milestone_key(key)].cat.codes.to_numpy()
    labels = adata.obs[groupby]
    known = (codes >= 0) & labels.notna().to_numpy()
    table = pd.crosstab(codes[known], labels.to_numpy()[known])
    majority = {int(code): str(row.idxmax()) for code, row in table.iterrows() if row.max() > 0}
    defaults = _default_names(adata, key, stored)
    # a fork's cells are its branches' cells too: a label a root or tip has already leaves the fork its default name
    is_fork = np.isin(stored["nodes"], np.asarray(adata.uns[key]["branch_points"])) & ~np.isin(
        stored["nodes"], np.atleast_1d(adata.uns[key]["root"]))
    others = np.flatnonzero(~is_fork).tolist()
    names = list(defaults)
    for i, name in zip(others, unique_names([majority.get(i, defaults[i]) for i in others])):
        names[i] = name
    taken = {majority[i] for i in others if i in majority} | {names[i] for i in others}
    for i in np.flatnonzero(is_fork).tolist():  # in milestone order: the earlier fork keeps a label two share
        if i in majority and majority[i] not in taken:
            names[i] = majority[i]
            taken.add(majority[i])
    priority = np.argsort(is_fork, kind="stable")  # any clash left (a label like "fork 2"): roots and tips first
    unique = unique_names([names[i] for i in priority])
    return [unique[i] for i in np.argsort(priority)]


def _write_names(adata: AnnData, key: str, stored: dict, names: list[str]) -> None:
    """Write ``names`` everywhere milestone names appear: the entry, the cells' categories and the fates."""
    renamed = dict(zip(stored["names"], names))
    column = adata.obs[milestone_key(key)]
    # written first: on a view this makes adata an AnnData of its own before uns is touched
    adata.obs[milestone_key(key)] = pd.Categorical.from_codes(column.cat.codes.to_numpy(), categories=names)
    fields = {"milestones": milestone_entry(stored["nodes"], names, adata.uns[key]["segments"])}
    if "fates" in adata.uns[key] and fate_probabilities_key(key) in adata.obsm:
        fields["fates"] = np.asarray([renamed.get(str(f), str(f)) for f in adata.uns[key]["fates"]], dtype=object)
    update_entry(adata, key, **fields)


def _check_name(name) -> None:
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"Milestone names must be non-empty strings; got {name!r}.")


fill_doc(milestones)
fill_doc(rename_milestones)
