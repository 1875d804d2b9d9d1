"""The latent tree of :func:`~scskeleton.datasets.simulate_trajectory`: a Yule tree of branches (parent,
start and end node, length, kind), with the extra cycle and separate lineage, and its nodes' names."""

from __future__ import annotations

import numpy as np

#: Branch lengths are drawn uniformly in this range (units of pseudotime).
LENGTH_RANGE = (0.6, 1.4)


def grow_tree(rng, n_fates: int, cycle: bool, disconnected: bool) -> dict:
    """Branches (parent, start/end node, length, kind) of the Yule tree plus the extras.

    A dict of per-branch ``names``, ``parent`` (−1 for none), ``start`` and ``end`` (node indices),
    ``length``, ``start_time``, ``kind`` and ``lineage``; the ``nodes``' names and ``node_kind``; the
    ``fates``; and the cycle's ``cycle_from``, ``cycle_to`` and ``cycle_target_branch``.
    """
    parent, start, end = [-1], [0], [1]
    node_kind = ["root", "fate"]
    tips = [0]  # branches that end at a leaf
    for _ in range(n_fates - 1):
        split = tips.pop(int(rng.integers(len(tips))))
        node_kind[end[split]] = "fork"
        for _side in range(2):
            parent.append(split)
            start.append(end[split])
            end.append(len(node_kind))
            node_kind.append("fate")
            tips.append(len(parent) - 1)
    n_tree = len(parent)
    # Name the nodes: forks and fates numbered in the order of their branches.
    nodes = [""] * len(node_kind)
    nodes[0] = "root"
    forks = fates = 0
    for b in range(n_tree):
        node = end[b]
        if node_kind[node] == "fork":
            forks += 1
            nodes[node] = f"fork_{forks}"
        else:
            fates += 1
            nodes[node] = f"fate_{fates}"
    fate_names = [nodes[end[b]] for b in range(n_tree) if node_kind[end[b]] == "fate"]
    kind = ["tree"] * n_tree
    lineage = [0] * n_tree

    cycle_from = cycle_to = ""
    cycle_target_branch = -1  # the branch whose start node the cycle rejoins
    if cycle:
        last = next(b for b in range(n_tree) if nodes[end[b]] == fate_names[-1])
        path = branch_path(parent, last)
        candidates = path[:-1] if len(path) > 1 else path  # a node before the tip's own fork
        cycle_target_branch = candidates[int(rng.integers(len(candidates)))]
        cycle_from, cycle_to = nodes[end[last]], nodes[start[cycle_target_branch]]
        parent.append(last)
        start.append(end[last])
        end.append(start[cycle_target_branch])
        kind.append("cycle")
        lineage.append(0)
    if disconnected:
        nodes += ["lineage_2_root", "lineage_2_end"]
        node_kind += ["root", "fate"]
        parent.append(-1)
        start.append(len(nodes) - 2)
        end.append(len(nodes) - 1)
        kind.append("lineage")
        lineage.append(1)
        fate_names.append("lineage_2_end")

    n_branches = len(parent)
    length = rng.uniform(*LENGTH_RANGE, size=n_branches)
    parent = np.array(parent, dtype=np.int64)
    start_time = np.zeros(n_branches)
    for b in range(n_branches):  # parents come before their children
        if parent[b] >= 0:
            start_time[b] = start_time[parent[b]] + length[parent[b]]
    return {
        "names": [f"branch_{b}" for b in range(n_branches)],
        "parent": parent,
        "start": np.array(start, dtype=np.int64),
        "end": np.array(end, dtype=np.int64),
        "length": length,
        "start_time": start_time,
        "kind": kind,
        "lineage": np.array(lineage, dtype=np.int64),
        "nodes": nodes,
        "node_kind": node_kind,
        "fates": fate_names,
        "cycle_from": cycle_from,
        "cycle_to": cycle_to,
        "cycle_target_branch": cycle_target_branch,
    }


def branch_path(parent, branch: int) -> list[int]:
    """Branches from the root down to ``branch``."""
    path = [branch]
    while parent[path[-1]] >= 0:
        path.append(int(parent[path[-1]]))
    return path[::-1]
