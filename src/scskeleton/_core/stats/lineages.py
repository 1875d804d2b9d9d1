"""The topology the tests need: root-to-leaf lineages of segments, their weights, the cells around a fork."""

from __future__ import annotations

import numpy as np


def lineages(segments: dict[str, np.ndarray], roots) -> list[list[str]]:
    """Every root-to-leaf chain of segments (ids), one per leaf segment, ordered by leaf segment id.

    ``segments`` maps ids to node paths oriented away from the root(s), as
    ``tl.pseudotime`` stores them. A graph with a cycle has no unique way up
    from some leaf and raises a ValueError.
    """
    first = {name: int(path[0]) for name, path in segments.items()}
    last = {name: int(path[-1]) for name, path in segments.items()}
    roots = {int(r) for r in np.atleast_1d(roots)}
    leaves = sorted((name for name in segments
                     if not any(first[o] == last[name] and o != name for o in segments)), key=segment_order)
    out = []
    for leaf in leaves:
        chain, here = [leaf], first[leaf]
        while here not in roots:
            arriving = [name for name in segments if last[name] == here and first[name] != here]
            if len(arriving) != 1 or len(chain) > len(segments):
                raise ValueError(
                    f"The way from the root to segment {leaf} is not unique; the association test needs a tree "
                    "(tl.rpg or tl.ddrtree), not a graph with cycles."
                )
            chain.append(arriving[0])
            here = first[arriving[0]]
        out.append(chain[::-1])
    return out


def lineage_membership(chains: list[list[str]]) -> tuple[list[str], np.ndarray]:
    """The segments on some lineage (ordered by id) and their S × L weights for :func:`association_test`.

    A segment that k of the lineages pass through weighs 1/k in each of them, 0 in the others.
    """
    on_lineage = sorted({segment for chain in chains for segment in chain}, key=segment_order)
    index = {segment: i for i, segment in enumerate(on_lineage)}
    membership = np.zeros((len(on_lineage), len(chains)))
    for l, chain in enumerate(chains):
        membership[[index[segment] for segment in chain], l] = 1.0
    return on_lineage, membership / membership.sum(axis=1, keepdims=True)


def branch_cells(segments: dict[str, np.ndarray], branch_point: int, roots) -> tuple[list[str], list[list[str]]]:
    """Which segments form the trunk before a branch point and each branch after it.

    ``segments`` maps segment ids to node paths oriented away from the root
    (as ``tl.pseudotime`` stores them). The trunk is the chain of segments from
    a root to ``branch_point``; the branches are the segments that start at
    ``branch_point``, each with every segment downstream of it (its subtree).
    Returns (trunk segment ids, one list of segment ids per branch), branches
    ordered by segment id.
    """
    first = {name: int(path[0]) for name, path in segments.items()}
    last = {name: int(path[-1]) for name, path in segments.items()}
    roots = {int(r) for r in np.atleast_1d(roots)}
    children = sorted((name for name in segments if first[name] == branch_point and last[name] != branch_point),
                      key=segment_order)
    if len(children) < 2:
        raise ValueError(
            f"Node {branch_point} is not a branch point of the pseudotime topology: {len(children)} segment(s) "
            "leave it away from the root. Pick one of uns[key]['branch_points'] (rerun tl.pseudotime after "
            "changing the root)."
        )
    trunk: list[str] = []
    here = branch_point
    while here not in roots:
        arriving = [name for name in segments if last[name] == here and first[name] != here]
        if len(arriving) != 1:
            raise ValueError(
                f"The way from the root to node {branch_point} is not unique ({len(arriving)} segments end at "
                f"node {here}); branch_test needs a tree around the branch point."
            )
        trunk.append(arriving[0])
        here = first[arriving[0]]
        if len(trunk) > len(segments):
            raise ValueError(f"No root leads to node {branch_point}; rerun tl.root and tl.pseudotime.")
    branches: list[list[str]] = []
    seen: set[str] = set(trunk)
    for child in children:
        members, frontier = [], [child]
        while frontier:
            name = frontier.pop()
            if name in seen:
                continue
            seen.add(name)
            members.append(name)
            frontier.extend(other for other in segments if first[other] == last[name] and other not in seen)
        branches.append(sorted(members, key=segment_order))
    # In a tree the trunk and the branches share only the branch point; any other node in common closes a cycle.
    node_sets = [set(np.concatenate([segments[name] for name in group]).tolist()) - {branch_point}
                 for group in ([trunk] if trunk else []) + branches]
    for i, nodes_i in enumerate(node_sets):
        for nodes_j in node_sets[i + 1 :]:
            if nodes_i & nodes_j:
                raise ValueError(
                    f"The branches leaving node {branch_point} meet again (at node {min(nodes_i & nodes_j)}); the "
                    "graph has a cycle there and branch_test needs a tree. Use a principal tree (e.g. tl.rpg or "
                    "tl.ddrtree)."
                )
    return sorted(trunk, key=segment_order), branches


def segment_order(name: str):
    return (0, int(name), "") if name.isdigit() else (1, 0, name)
