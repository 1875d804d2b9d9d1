"""``tl.fate_probabilities``: for each cell, the probability of ending in each tip of the trajectory."""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.results import update_entry
from ..._anndata.schema import (
    cell_assignment,
    column_sums,
    fate_entropy_key,
    fate_probabilities_key,
    member_cells,
    read_graph,
    resolve_key,
)
from ..._core.trees import fates as core


def fate_probabilities(adata: AnnData, key: str | None = None, *, copy: bool = False) -> AnnData | None:
    """Probability of each cell to end in each tip (leaf) of the trajectory, and the entropy of that choice.

    The trajectory of ``tl.pseudotime`` is read as a tree directed
    downstream: every edge points the way its segment runs, towards higher
    pseudotime (away from the root, or with several roots from the nearest
    one). A walk from a node moves downstream and, at each fork, into a
    branch with probability proportional to the cell mass downstream of it
    (the soft assignment summed over the branch's nodes), so that a fork
    splits the way its cells actually went; it stops where it can go no
    further. A node's fate distribution is where that walk stops: one tip
    with certainty on a terminal segment, the mass-weighted mix of the
    branches before a fork. A cell's fate probabilities are its
    soft-assignment-weighted mix of its nodes' distributions, P = R D
    (``R = obsm[f"{key}_assignment"]``, read block by block, dense or sparse,
    never densified). Cells of pruned stubs (``min_branch_nodes``) follow the
    node they hang from. The fates are the terminal nodes reached from a
    root, named by their milestones (:func:`milestones`).

    **Several roots in one component** (``tl.root(..., several=True)``, e.g.
    two progenitor populations converging). The walks from every root run
    downstream alike: where two roots' branches join at a fork, the cells of
    both go on into the branches after it and share its split. Where the
    stretches of two roots meet on a path instead (a ``"meeting"``
    milestone of ``tl.pseudotime``: a local maximum of pseudotime that is not
    a tip; likewise a fork all of whose branches lead back to roots), the
    cells on either side flow into that point and no further: it is a
    *terminal state* with a fate column of its own, named by its milestone
    (``"meeting 1"``). Its cells are the most advanced the pseudotime knows
    of, and sending them on to a tip would run against that pseudotime. Two
    roots whose arms join at a fork meet at the fork itself only when it is
    about equally far from both (within the last edge of the longer arm);
    otherwise their stretches meet on the longer arm, whose cells up to that
    point end there, and root the arms at about equal distances from the fork
    when both populations should flow on into it.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
        The trajectory must be a tree
        in every rooted component: a graph with cycles (``tl.rpg_l1``, the cell
        graphs of ``tl.mpme``, ``tl.spl``, ``tl.esl``, ``tl.fsl``) has no single
        way down from the root, and raises a ValueError; fit a principal tree
        on its embedding instead, e.g. ``sks.tl.rpg(adata, use_rep="X_mpme")``.
    {copy}

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields:

    ``adata.obsm[f"{key}_fate_probabilities"]``
        Cells × fates, float; rows sum to 1 (NaN for cells in a component
        without a root).
    ``adata.uns[key]["fates"]``
        The milestone name of each column's terminal node, in milestone order:
        the tips by pseudotime, then any meeting points (renamed with the
        milestones).
    ``adata.obs[f"{key}_fate_entropy"]``
        Entropy of each cell's fate probabilities, in nats: 0 for a certain
        fate, log(number of fates) when all are equally likely.

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.branching(1000, n_leaves=3)
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.ddrtree(adata)
    >>> sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    >>> sks.tl.pseudotime(adata, "ddrtree")
    >>> sks.tl.milestones(adata, "ddrtree", groupby="true_branch")
    >>> sks.tl.fate_probabilities(adata, "ddrtree")
    >>> sks.pl.fates(adata, "ddrtree")
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    entry = adata.uns[key]
    if "milestones" not in entry or "segments" not in entry:
        raise KeyError(
            f"The trajectory of {key!r} is missing; run sks.tl.root(adata, {key!r}, ...) and "
            f"sks.tl.pseudotime(adata, {key!r}) first."
        )
    assignment = cell_assignment(adata, key)
    if assignment.shape != (adata.n_obs, graph.n_nodes):
        raise ValueError(
            f"The assignment of {key!r} has shape {assignment.shape}, expected ({adata.n_obs}, {graph.n_nodes}); "
            f"refit the graph {key!r} on this AnnData."
        )
    start = logg.info(f"computing fate probabilities on {key!r}")
    distributions, names = node_fate_table(adata, key, graph, column_sums(assignment))
    probabilities, entropy = core.cell_fates(assignment, distributions)

    adata = adata.copy() if copy else adata
    adata.obsm[fate_probabilities_key(key)] = probabilities
    adata.obs[fate_entropy_key(key)] = entropy
    update_entry(adata, key, fates=np.asarray(names, dtype=object))
    unreached = int((np.isnan(entropy) & member_cells(adata, key)).sum())  # not the cells outside a subtree
    if unreached:
        logg.warning(f"{unreached} cells lie in a part of {key!r} not connected to a root, so their fate "
                     "probabilities are NaN; the other cells' are usable. Root every part with "
                     f"sks.tl.root(adata, {key!r}, group=..., per_component=True), then rerun sks.tl.pseudotime and this function.")
    logg.info(
        f"    finished ({len(names)} fates: {', '.join(names)})",
        time=start,
        deep=(f"added\n    obsm[{fate_probabilities_key(key)!r}], obs[{fate_entropy_key(key)!r}], "
              f"uns[{key!r}]['fates']"),
    )
    return adata if copy else None


def node_fate_table(adata: AnnData, key: str, graph, mass: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """Each node's distribution over the fates (K × fates, columns in milestone order) and the fates' names.

    ``mass`` is each node's cell mass, which splits the walk at the forks:
    the reference's, also when new cells are placed on it (``tl.project``).
    """
    entry = adata.uns[key]
    segments = [np.asarray(entry["segments"][name], dtype=np.intp) for name in sorted(entry["segments"], key=int)]
    try:
        node_fates = core.node_fates(graph.adjacency, graph.nodes, segments, graph.roots, mass)
    except ValueError as error:
        raise ValueError(
            f"{error} The trajectory of {key!r} ({graph.method or 'graph'}) has cycles; fit a principal tree, "
            f"e.g. sks.tl.rpg(adata, use_rep={graph.space!r}), and compute fates on it."
        ) from None
    if not node_fates.leaves.size:
        raise ValueError(f"No tip of {key!r} lies downstream of its root, so there is no fate to reach.")
    # columns in milestone order (tips by pseudotime, then meeting points), named by their milestones
    milestone_nodes = np.asarray(entry["milestones"]["nodes"]).tolist()
    milestone_names = [str(name) for name in entry["milestones"]["names"]]
    order = np.argsort([milestone_nodes.index(int(leaf)) for leaf in node_fates.leaves], kind="stable")
    names = [milestone_names[milestone_nodes.index(int(leaf))] for leaf in node_fates.leaves[order]]
    return node_fates.distributions[:, order], names


def clear_fates(adata: AnnData, key: str) -> None:
    """Remove fate probabilities written for an earlier topology of ``key`` (``tl.pseudotime`` changes it)."""
    if fate_probabilities_key(key) in adata.obsm:
        del adata.obsm[fate_probabilities_key(key)]
    if fate_entropy_key(key) in adata.obs:
        del adata.obs[fate_entropy_key(key)]
    if "fates" in adata.uns.get(key, {}):
        del adata.uns[key]["fates"]


fill_doc(fate_probabilities)
