"""Which cells a gene test fits, and the time each enters with.

Each gene test fits the cells of one part of a trajectory against a time: ``tl.trends`` those of a
path (their position along it), a segment (their pseudotime) or the loop (their phase);
``tl.branch_test`` and ``tl.fork_test`` the trunk and branches around a branch point;
``tl.association_test`` and ``tl.activation`` the lineages from the root. The cells are read here,
once for all the tests, from what ``tl.pseudotime`` and ``tl.phase`` wrote, with the errors that
name the milestones a user knows; so are the graph edges the results store for ``pl.path``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.schema import StoredGraph, phase_key, pseudotime_key, read_graph, segment_key, unique_names
from ..._core.stats import lineages as lineage_core
from ..._core.stats import splines
from ..._core.trees import trajectory as trajectory_core
from ..trajectory.milestones import (
    lineage_label,
    milestone_name,
    node_name,
    resolve_node,
    resolve_segment,
    segment_label,
)
from ..trajectory.paths import path as path_cells
from ..trajectory.paths import path_end


@dataclass(frozen=True)
class TrendCells:
    """The cells ``tl.trends`` fits: a path's, a segment's or the loop's."""

    rows: np.ndarray  # the cells, as row indices
    times: np.ndarray  # each one's time (position, pseudotime or phase)
    nodes: np.ndarray  # the graph nodes along the path, segment or loop (the loop's first at both ends)
    time: str  # which time: "position", "pseudotime" or "phase"
    where: str  # what the cells are, for messages ("segment fork 1 → tip 2")
    segment: str | None  # the segment's id, resolved from its label; ``None`` for a path or the loop


def trend_cells(adata: AnnData, key: str, graph: StoredGraph, *, path, segment, loop: bool) -> TrendCells:
    """The cells of the path, segment or loop ``tl.trends`` is asked for (exactly one is given), and their time.

    The cells of a path enter with their position along it, a segment's with their pseudotime and
    the loop's with their phase; at least 3 cells are needed for a trend.
    """
    if path is not None:
        if not (isinstance(path, tuple | list) and len(path) == 2):
            raise ValueError(f"path must be (start, end), each a node index or (obs_key, value); got {path!r}.")
        first, last = (path_end(adata, graph, end, which) for end, which in zip(path, ("start", "end")))
        if first == last:
            raise ValueError(f"The path starts and ends at {node_name(adata, key, first)}; give two different ends.")
        frame = path_cells(adata, key, path[0], path[1])
        rows = adata.obs_names.get_indexer(frame.index)
        times = frame["position"].to_numpy()
        nodes = trajectory_core.node_path(graph.adjacency, graph.nodes, first, last)
        time, where = "position", f"path {node_name(adata, key, first)} → {node_name(adata, key, last)}"
    elif loop:
        if phase_key(key) not in adata.obs or "loop" not in adata.uns[key]:
            raise KeyError(f"{key!r} has no phase yet: run sks.tl.phase(adata, {key!r}) first.")
        phase = adata.obs[phase_key(key)].to_numpy(dtype=float)
        rows = np.flatnonzero(np.isfinite(phase))
        times = phase[rows]
        loop_nodes = np.asarray(adata.uns[key]["loop"], dtype=np.int64)
        nodes = np.append(loop_nodes, loop_nodes[:1])
        time, where = "phase", "loop"
    else:
        segment, nodes = segment_nodes(adata, key, segment)
        labels = adata.obs[segment_key(key)].astype(str).to_numpy()
        pseudotime = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
        rows = np.flatnonzero((labels == segment) & np.isfinite(pseudotime))
        times = pseudotime[rows]
        time, where = "pseudotime", f"segment {segment_label(adata.uns[key], segment)}"
    if rows.size < 3:
        raise ValueError(f"The {where} of {key!r} holds {rows.size} cells; a trend needs more. Pick a longer path.")
    return TrendCells(rows=rows, times=times, nodes=nodes, time=time, where=where, segment=segment)


@dataclass(frozen=True)
class Fork:
    """The cells around a branch point, as ``tl.branch_test`` and ``tl.fork_test`` read them."""

    branch_point: int
    segments: dict
    trunk: list
    branches: list
    names: list  # each branch's first segment id: the keys of the results' segments and edges
    labels: list  # each branch's first segment label ("fork 1 → tip 2"): the names results show
    group: np.ndarray  # per cell: 0 trunk, b ≥ 1 branch, −1 elsewhere
    rows: np.ndarray  # cells in the trunk or a branch, with a pseudotime
    pseudotime: np.ndarray
    df: float | None = None  # the df the branches carry (fork_cells)

    def messages(self) -> list[str]:
        """How the solvers' messages name each branch."""
        return [f"The branch {label}" for label in self.labels]


def fork_cells(adata: AnnData, key: str, branch_point, *, df: float | None = None) -> Fork:
    """Validate ``branch_point`` and split the trajectory's cells into trunk and branches around it.

    With ``df``, a branch whose cells cannot carry a curve of ``df`` degrees of freedom (no more
    cells than ``df``: a stub that learners keep on a few hundred cells) is left out, as the
    log says at info level, and the others are compared; where fewer than two branches would be left, every
    curve takes the df the second largest branch carries (its cells less one; ``Fork.df``),
    with a warning, and a fork where that is 2 or less is an error.
    """
    graph = read_graph(adata, key)
    segments, labels, pseudotime = stored_trajectory(adata, key)
    try:
        branch_point = resolve_node(adata, key, branch_point, n_nodes=graph.n_nodes, what="branch_point")
    except ValueError as error:
        forks = np.asarray(adata.uns[key].get("branch_points", [])).tolist()
        order = np.asarray(adata.uns[key].get("milestones", {}).get("nodes", [])).tolist()
        forks = sorted(forks, key=lambda node: (order.index(node) if node in order else len(order), node))
        raise ValueError(f"{error} Branch points of {key!r}: "
                         f"{[node_name(adata, key, node) for node in forks]}.") from None
    try:
        trunk, branches = lineage_core.branch_cells(segments, branch_point, adata.uns[key]["root"])
    except ValueError as error:  # the solver knows nodes by index; the message names the milestone
        name = milestone_name(adata, key, branch_point)
        if name is None:
            raise
        raise ValueError(str(error).replace(f"Node {branch_point} ", f"Milestone {name!r} ", 1)) from None
    group_of_segment = {segment: 0 for segment in trunk}
    for number, members in enumerate(branches, start=1):
        group_of_segment.update({segment: number for segment in members})
    group = np.array([group_of_segment.get(label, -1) for label in labels])
    rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    counts = np.bincount(group[rows], minlength=len(branches) + 1)
    empty = [segment_label(adata.uns[key], members[0]) for members, count in zip(branches, counts[1:]) if count == 0]
    here = node_name(adata, key, branch_point)
    if empty:  # e.g. a branch outside a sub-trajectory, or emptied by a pruning
        raise ValueError(
            f"The branch(es) {', '.join(empty)} at {here} of {key!r} hold no "
            f"cell with a pseudotime, so there is nothing to compare. Remove branches too small to analyse with "
            f"sks.tl.cleanup(adata, {key!r}, min_cells=...), or choose another branch point."
        )
    if df is not None:
        df = splines.check_df(df, allow_none=False)
        second = int(np.sort(counts[1:])[-2])
        if second <= df:  # fewer than two branches carry df: every curve takes what the second largest carries
            if second < 4:  # a curve needs df > 2 and fewer df than its cells
                what = ("pass df=2.5 to compare them anyway, choose another branch point" if second == 3
                        else "choose another branch point")
                raise ValueError(
                    f"At {here} of {key!r}, {_branch_sizes(adata, key, branches, counts)}: a branch's own curve "
                    f"needs more cells than its degrees of freedom (more than 2), and only one branch has 4 or "
                    f"more cells. A stub this small is rarely a fate: {what}, or remove it with "
                    f"sks.tl.cleanup(adata, {key!r}, min_cells=...)."
                )
            logg.warning(
                f"At {here} of {key!r}, {_branch_sizes(adata, key, branches, counts)}: the smaller branch cannot "
                f"carry df={df:g}, so every curve uses df={second - 1:g} and the test is still valid. A branch this "
                f"small is rarely a fate: check it with sks.tl.branch_support."
            )
            df = float(second - 1)
        kept = np.flatnonzero(counts[1:] > df)
        if kept.size < len(branches):
            logg.info(
                f"    at {here} of {key!r}, the branch(es) with no more cells than df={df:g} are left out and the "
                f"other {kept.size} are compared ({_branch_sizes(adata, key, branches, counts)}; a lower df "
                "includes them)"
            )
            renumber = np.full(len(branches) + 1, -1)
            renumber[0] = 0
            renumber[kept + 1] = np.arange(1, kept.size + 1)
            group = np.where(group >= 0, renumber[np.maximum(group, 0)], -1)
            branches = [branches[b] for b in kept]
            rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    return Fork(branch_point=branch_point, segments=segments, trunk=trunk, branches=branches,
                names=[members[0] for members in branches],
                labels=[segment_label(adata.uns[key], members[0]) for members in branches],
                group=group, rows=rows, pseudotime=pseudotime, df=df)


def _branch_sizes(adata: AnnData, key: str, branches: list, counts: np.ndarray) -> str:
    return "the branches hold " + ", ".join(
        f"{count} cells ({segment_label(adata.uns[key], members[0])})"
        for members, count in zip(branches, counts[1:]))


def fork_edges(fork: Fork, members: dict) -> dict:
    """The graph edges (E × 2) of each group of a fork's segments (``members``: name → segment ids)."""
    return {
        label: np.concatenate([path_edges(fork.segments[s]) for s in ids]) if ids else np.empty((0, 2), np.int64)
        for label, ids in members.items()
    }


@dataclass(frozen=True)
class Lineages:
    """The lineages of a tree (root-to-leaf segment chains) and the cells on them, as
    ``tl.association_test`` and ``tl.activation`` read them."""

    chains: list  # each lineage's segment ids, from the root
    membership: np.ndarray  # segments on a lineage × lineages: which lineages pass through each segment
    group: np.ndarray  # per cell: the index of its segment among those on a lineage, −1 elsewhere
    rows: np.ndarray  # cells on a lineage, with a pseudotime
    pseudotime: np.ndarray

    def labels(self, adata: AnnData, key: str) -> list[str]:
        """Each lineage's label (``"root → tip 2"``), told apart where two would read alike."""
        return unique_names([lineage_label(adata.uns[key], chain) for chain in self.chains])

    def fields(self, labels: list[str]) -> dict:
        """The ``uns`` fields naming the lineages, in the order of the results' columns: ``lineages``
        (leaf segment id → segment ids from the root) and ``lineage_labels`` (``labels``)."""
        return {
            "lineages": {chain[-1]: np.array(chain, dtype=object) for chain in self.chains},
            "lineage_labels": np.array(labels, dtype=object),
        }


def lineage_cells(adata: AnnData, key: str) -> Lineages:
    """The lineages of the trajectory of ``key`` and the cells on them."""
    segments, labels, pseudotime = stored_trajectory(adata, key)
    chains = lineage_core.lineages(segments, adata.uns[key]["root"])
    on_lineage, membership = lineage_core.lineage_membership(chains)
    index = {segment: i for i, segment in enumerate(on_lineage)}
    group = np.array([index.get(label, -1) for label in labels])
    rows = np.flatnonzero((group >= 0) & np.isfinite(pseudotime))
    return Lineages(chains=chains, membership=membership, group=group, rows=rows, pseudotime=pseudotime)


def segment_nodes(adata: AnnData, key: str, segment) -> tuple[str, np.ndarray]:
    """The id of ``segment`` (an id or a label) and its nodes."""
    segments, _, _ = stored_trajectory(adata, key)
    label = resolve_segment(adata.uns[key], segment)
    if label is None:
        labels = list(adata.uns[key].get("milestones", {}).get("segment_labels", []))
        raise KeyError(f"No segment {segment!r} in the trajectory of {key!r}; segments: {sorted(segments, key=int)}"
                       f"{f' or by label {labels}' if labels else ''}.")
    return label, np.asarray(segments[label], dtype=np.intp)


def stored_trajectory(adata: AnnData, key: str) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    """Segments, each cell's segment label and pseudotime, as written by ``tl.pseudotime``."""
    missing = [field for field in (pseudotime_key(key), segment_key(key)) if field not in adata.obs]
    if missing or "segments" not in adata.uns[key]:
        raise KeyError(f"The trajectory of {key!r} is missing ({missing or 'segments'}); run "
                       f"sks.tl.root(adata, {key!r}, ...) and sks.tl.pseudotime(adata, {key!r}) first.")
    segments = {str(k): np.asarray(v, dtype=np.intp) for k, v in adata.uns[key]["segments"].items()}
    labels = adata.obs[segment_key(key)].astype(str).to_numpy()
    return segments, labels, adata.obs[pseudotime_key(key)].to_numpy(dtype=float)


def path_edges(nodes: np.ndarray) -> np.ndarray:
    """The E × 2 edges between consecutive nodes of a path."""
    nodes = np.asarray(nodes, dtype=np.int64)
    return np.column_stack([nodes[:-1], nodes[1:]])
