"""``tl.project``: place new cells on a skeleton fitted to reference cells."""

from __future__ import annotations

from copy import deepcopy

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from .._core.cellgraphs.landmarks import node_parts, restrict_to_parts
from .._core.trees import fates as fates_core
from .._core.trees import trajectory as trajectory_core
from .._core.trees.assign import soft_assignment
from .._core.trees.ddrtree import embed_new_cells
from .._schema import (
    assignment_key,
    cell_assignment,
    column_sums,
    fate_entropy_key,
    fate_probabilities_key,
    is_cell_graph,
    latent_key,
    read_graph,
    resolve_key,
)
from ._fates import node_fate_table
from ._inputs import check_key, get_representation
from ._results import clear_result
from ._trajectory import place_cells, stored_topology

#: Learners whose nodes live in the space of ``use_rep`` itself.
NODE_SPACE_METHODS = ("rpg", "rpg_l1")
#: Cell-level learners that write a node graph over landmarks when fitted with ``n_landmarks``.
LANDMARK_METHODS = ("mpme", "spl", "esl", "fsl", "convex_embedding")


def project(adata_new: AnnData, adata_ref: AnnData, key: str | None = None, *, key_added: str | None = None,
            copy: bool = False) -> AnnData | None:
    """Place new cells on a skeleton fitted to reference cells.

    The graph, root, segments, milestones and fates stay those of the
    reference: the new cells are mapped, nothing is refitted. Each new cell
    is placed as the learner would place a cell of its own fit with every
    learned quantity held fixed. For ``tl.ddrtree``, its latent point z and
    soft assignment r minimise objective (31) with W and the centers fixed
    (alternating eq. (32) and z = (yW + gamma Σ_k r_k c_k) / (1 + gamma),
    y centred by the reference's mean). For ``tl.rpg`` and ``tl.rpg_l1`` the
    nodes live in the space of ``use_rep`` and r is the soft assignment of
    eq. (18) with the stored sigma. Pseudotime, segment and nearest milestone
    follow from the cell's position on the graph, exactly as
    ``tl.pseudotime`` computes them; fate probabilities mix the reference's
    node fates by the cell's assignment (``tl.fate_probabilities``, with the
    reference's cell mass splitting the forks). A cell-level learner fitted
    on landmarks (``n_landmarks``, or by default above its dense limit) has
    a node graph too, in the space of ``use_rep``: r is eq. (18) with the
    stored ``assignment_sigma``, restricted to the part of the cell's
    nearest landmark as in the fit, and the cell's embedding is
    r · ``uns[key]["embedding"]``, exactly as the reference's cells got theirs.

    The new cells must be in the reference's representation ``use_rep``
    (``adata_ref.uns[key]["params"]["use_rep"]``), with the same meaning: a
    PCA computed on the new cells alone has other axes. Project them with
    the reference's loadings, e.g. ``sc.tl.ingest(adata_new, adata_ref)``,
    or ``(X_new - mean_ref) @ adata_ref.varm["PCs"]`` on the same genes.

    Parameters
    ----------
    adata_new
        The new cells, with ``obsm[use_rep]`` (or ``X``) in the reference's
        space.
    adata_ref
        The reference, with a node graph fitted under ``key`` (by
        ``tl.ddrtree``, ``tl.rpg``, ``tl.rpg_l1``, or a cell-level learner
        with landmarks) and, for pseudotime and the rest, ``tl.pseudotime``
        (and ``tl.fate_probabilities``) run. Cell-level learners fitted on
        every cell (a cell graph, no nodes) learn no map for new cells and
        raise a ValueError, as does ``tl.fsl``'s landmark graph, whose nodes
        live in its embedding only.
    key
        Key of the fitted skeleton in ``adata_ref.uns``; ``None`` uses the only one fitted.
    key_added
        Key of the result in ``adata_new``; default ``key``.
    copy
        Return a copy of ``adata_new`` instead of writing to it.

    Returns
    -------
    ``None``, or the modified copy of ``adata_new`` when ``copy=True``. Sets,
    in ``adata_new`` (``key`` = ``key_added``), the fields of the reference's
    learner and trajectory tools, so that ``tl.trends``, ``pl.tree`` and the
    rest work on it:

    ``adata_new.uns[key]``
        A copy of the reference's entry (graph, root, segments, milestones,
        fates), with ``n_obs`` of the new cells and ``projected_from`` = ``key``.
    ``adata_new.obsm[f"{key}_assignment"]``
        The new cells' soft assignment to the reference's nodes.
    ``adata_new.obsm[f"X_{key}"]``
        For ``tl.ddrtree``: the new cells' latent points; for a landmark
        graph: their embedding.
    ``adata_new.obs[f"{key}_pseudotime"]``, ``[f"{key}_segment"]``, ``[f"{key}_milestone"]``
        When the reference has a trajectory (``tl.pseudotime``).
    ``adata_new.obsm[f"{key}_fate_probabilities"]``, ``adata_new.obs[f"{key}_fate_entropy"]``
        When the reference has fate probabilities.
    """
    key = resolve_key(adata_ref, key)
    graph = read_graph(adata_ref, key)
    entry = adata_ref.uns[key]
    new_key = check_key(key_added, key)
    params = entry.get("params", {})
    landmarks = graph.method in LANDMARK_METHODS and "assignment_sigma" in params
    if is_cell_graph(adata_ref, key) or not (graph.method in ("ddrtree", *NODE_SPACE_METHODS) or landmarks):
        raise ValueError(
            f"tl.project places cells on the node graphs of tl.ddrtree, tl.rpg, tl.rpg_l1 and of cell-level "
            f"learners fitted on landmarks; {key!r} was fitted by {graph.method or 'an unknown learner'!r} on "
            f"every cell, which learns no map for new cells. Refit it with n_landmarks=… (e.g. "
            f"sks.tl.{graph.method}(adata_ref, n_landmarks=1000)), or fit a principal tree on its embedding, e.g. "
            f"sks.tl.rpg(adata_ref, use_rep={graph.space!r}), and project onto that."
        )
    use_rep, n_pcs = str(params["use_rep"]), int(params["n_pcs"])
    if landmarks and (graph.space != use_rep or "embedding" not in entry):
        raise ValueError(
            f"The landmark graph {key!r} ({graph.method}) keeps its nodes in its embedding "
            f"{graph.space!r} only, not in {use_rep!r}, so new cells cannot be placed on it. Fit a principal "
            f"tree on the embedding, e.g. sks.tl.rpg(adata_ref, use_rep={graph.space!r}), and project onto that."
        )
    data = _new_representation(adata_new, use_rep, n_pcs, key)
    start = logg.info(f"projecting {adata_new.n_obs} cells onto {key!r}")
    if graph.method == "ddrtree":
        if "mean" not in entry or "projection" not in entry:
            raise ValueError(
                f"The DDRTree result {key!r} stores no centring (uns[{key!r}]['mean']): it was fitted by an older "
                f"version. Refit it with sks.tl.ddrtree(adata_ref, key_added={key!r}) to project cells onto it."
            )
        latent, assignment = embed_new_cells(
            data - np.asarray(entry["mean"]), np.asarray(entry["projection"]), graph.nodes,
            sigma=float(params["sigma"]), gamma=float(params["gamma"]),
        )
        coordinates = latent
    elif landmarks:  # as the fit mapped its own cells (tl._landmarks, _core.cellgraphs.landmarks)
        coordinates = data
        groups = np.asarray(entry.get("node_groups", np.zeros(graph.nodes.shape[0])), dtype=np.intp)
        assignment, _ = restrict_to_parts(soft_assignment(data, graph.nodes, float(params["assignment_sigma"])).matrix,
                                          node_parts(graph.adjacency, groups))
        latent = np.asarray(assignment @ np.asarray(entry["embedding"]))
    else:
        coordinates = data
        latent = None
        assignment = soft_assignment(data, graph.nodes, float(params["sigma"])).matrix

    adata_new = adata_new.copy() if copy else adata_new
    clear_result(adata_new, new_key, keep=use_rep)
    adata_new.uns[new_key] = {**deepcopy(dict(entry)), "n_obs": adata_new.n_obs, "projected_from": key}
    if graph.method == "ddrtree":
        adata_new.uns[new_key]["space"] = latent_key(new_key)
    if latent is not None:
        adata_new.obsm[latent_key(new_key)] = latent
    adata_new.obsm[assignment_key(new_key)] = assignment
    written = [f"uns[{new_key!r}]", f"obsm[{assignment_key(new_key)!r}]"]
    if "segments" in entry and graph.roots.size:
        shape = stored_topology(adata_ref, key, graph)
        projection = trajectory_core.project_onto_graph(coordinates, graph.nodes, graph.adjacency)
        milestones = entry["milestones"]
        place_cells(adata_new, new_key, graph, projection, shape, np.asarray(milestones["nodes"], dtype=np.intp),
                    [str(name) for name in milestones["names"]])
        written.append("obs[pseudotime, segment, milestone]")
    else:
        logg.warning(f"{key!r} has no trajectory yet: only the assignment is written. Run sks.tl.root and "
                     f"sks.tl.pseudotime on the reference first to place the cells in pseudotime.")
    if "fates" in entry and fate_probabilities_key(key) in adata_ref.obsm:
        distributions, _ = node_fate_table(adata_ref, key, graph, column_sums(cell_assignment(adata_ref, key)))
        probabilities, entropy = fates_core.cell_fates(assignment, distributions)
        adata_new.obsm[fate_probabilities_key(new_key)] = probabilities
        adata_new.obs[fate_entropy_key(new_key)] = entropy
        written.append("fate probabilities")
    logg.info("    finished", time=start, deep="added\n    " + ", ".join(written))
    return adata_new if copy else None


def _new_representation(adata_new: AnnData, use_rep: str, n_pcs: int, key: str) -> np.ndarray:
    """The new cells' ``use_rep``, first ``n_pcs`` columns, with an error that says how to get it."""
    hint = (
        f"The reference {key!r} was fitted on {use_rep!r} ({n_pcs} columns); the new cells need the same "
        "representation in the reference's coordinates: project them with the reference's PCA, e.g. "
        "sc.tl.ingest(adata_new, adata_ref) or adata_new.obsm['X_pca'] = (X_new - mean_ref) @ "
        "adata_ref.varm['PCs'] (same genes, same normalisation)."
    )
    if use_rep != "X" and use_rep not in adata_new.obsm:
        raise KeyError(f"adata_new.obsm[{use_rep!r}] is missing. {hint}")
    width = adata_new.n_vars if use_rep == "X" else adata_new.obsm[use_rep].shape[1]
    if width < n_pcs:
        raise ValueError(f"adata_new's {use_rep!r} has {width} columns, fewer than the {n_pcs} the reference used. "
                         f"{hint}")
    return get_representation(adata_new, use_rep=use_rep, n_pcs=n_pcs)
