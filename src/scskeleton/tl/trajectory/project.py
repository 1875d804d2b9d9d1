"""``tl.project``: place new cells on a skeleton fitted to reference cells."""

from __future__ import annotations

from copy import deepcopy

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg
from scipy import sparse

from ..._anndata.inputs import check_key, get_expression, get_representation
from ..._anndata.learners import LEARNERS
from ..._anndata.results import clear_result
from ..._anndata.schema import (
    assignment_key,
    cell_assignment,
    column_sums,
    fate_entropy_key,
    fate_probabilities_key,
    is_cell_graph,
    latent_key,
    milestone_key,
    pseudotime_key,
    read_graph,
    resolve_key,
    segment_key,
    weight_key,
)
from ..._core.cellgraphs import neighbour_map
from ..._core.cellgraphs.fsl import weighted_features
from ..._core.cellgraphs.landmarks import node_parts, restrict_to_parts
from ..._core.trees import fates as fates_core
from ..._core.trees import trajectory as trajectory_core
from ..._core.trees.assign import soft_assignment
from ..._core.validation import as_float_matrix, check_integer
from .fates import node_fate_table
from .pseudotime import place_cells, stored_topology

#: Learners that fit a node graph, whose nodes new cells are assigned to.
NODE_GRAPH_METHODS = tuple(method for method, learner in LEARNERS.items() if learner.nodes in ("latent", "space"))
#: Cell-level learners, which write a node graph over landmarks when fitted with ``n_landmarks``.
LANDMARK_METHODS = tuple(method for method, learner in LEARNERS.items() if learner.nodes == "cells")
#: Reference cells placing each new cell on a cell-level learner fitted on every cell (sc.pp.neighbors' default).
DEFAULT_NEIGHBORS = 15


def project(adata_new: AnnData, adata_ref: AnnData, key: str | None = None, *, n_neighbors: int | None = None,
            key_added: str | None = None, copy: bool = False) -> AnnData | None:
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

    A cell-level learner fitted on every cell (``tl.mpme``, ``tl.spl``,
    ``tl.esl``, ``tl.fsl``, ``tl.convex_embedding``: a cell graph whose nodes
    are the reference cells, or an embedding alone) learns no map for new
    cells: its embedding solves a program over all cells at once. A new cell
    is placed through its neighbours instead, as ``sc.tl.ingest`` places
    cells on a UMAP: its ``n_neighbors`` nearest reference cells in the
    space the learner was fitted on (``use_rep``; for ``tl.fsl`` the genes
    weighted by √θ, the learner's own distance), weighted as UMAP weights a
    cell's neighbours (w_j = exp(-(d_j - d_1)/σ) with Σ_j w_j = log₂ k, then
    normalised; see :mod:`scskeleton._core.cellgraphs.neighbour_map`). These
    weights are its soft assignment to the reference cells, the graph's
    nodes; its embedding and pseudotime are the weighted means of its
    neighbours', its segment and milestone their weighted vote, and its fate
    probabilities the weighted mean of theirs (rows sum to 1). Neighbours
    the reference left without a value (a component without a root) do not
    count.

    The new cells must be in the reference's representation ``use_rep``
    (``adata_ref.uns[key]["params"]["use_rep"]``), with the same meaning: a
    PCA computed on the new cells alone has other axes. Project them with
    the reference's loadings, e.g. ``sc.tl.ingest(adata_new, adata_ref)``,
    or ``(X_new - mean_ref) @ adata_ref.varm["PCs"]`` on the same genes.

    Parameters
    ----------
    adata_new
        The new cells, with ``obsm[use_rep]`` (or ``X``) in the reference's
        space; for ``tl.fsl``, the reference's weighted genes (by name) in
        the ``layer`` it was fitted on.
    adata_ref
        The reference, fitted under ``key`` by any learner, and, for
        pseudotime and the rest, ``tl.pseudotime`` (and
        ``tl.fate_probabilities``) run. Refused with a ValueError:
        ``tl.fsl``'s landmark graph, whose nodes live in its embedding only,
        so no new cell can be placed among them.
    key
        Key of the fitted skeleton in ``adata_ref.uns``; ``None`` uses the only one fitted.
    n_neighbors
        For a cell-level learner fitted on every cell: k, how many reference
        cells place each new cell (1 ≤ k ≤ the reference's cells). ``None``
        (default): 15, as ``sc.pp.neighbors``, which ``sc.tl.ingest`` reads its
        k from; the learner's own ``n_neighbors`` is the candidate set of its
        program (every other cell for MPME's default), not a neighbourhood.
        Not for node graphs, whose learners map cells themselves.
    key_added
        Key of the result in ``adata_new``; default ``key``.
    copy
        Return a copy of ``adata_new`` instead of writing to it.

    Returns
    -------
    ``None``, or the modified copy of ``adata_new`` when ``copy=True``. Sets the
    following fields in ``adata_new`` (``key`` = ``key_added``): those of the reference's
    learner and trajectory tools, so that ``tl.trends``, ``pl.tree`` and the
    rest work on it:

    ``adata_new.uns[key]``
        A copy of the reference's entry (graph, root, segments, milestones,
        fates), with ``n_obs`` of the new cells and ``projected_from`` = ``key``.
        For a cell graph, the reference's cells become the graph's nodes:
        ``nodes`` (their embedding), ``adjacency`` (their learned graph) and
        ``space`` (``f"X_{key}"``), so that the root, segments and milestones,
        which are reference cells, stay valid; ``projection_n_neighbors`` is k.
    ``adata_new.obsm[f"{key}_assignment"]``
        The new cells' soft assignment to the reference's nodes; for a
        cell-level learner fitted on every cell, to the reference's cells: a
        sparse (CSR) new cells × reference cells matrix with k non-zeros per
        row, rows summing to 1.
    ``adata_new.obsm[f"X_{key}"]``
        For ``tl.ddrtree``: the new cells' latent points; for a landmark
        graph: their embedding; for a cell-level learner fitted on every
        cell: the weighted mean of the neighbours' embedding.
    ``adata_new.obs[f"{key}_pseudotime"]``, ``[f"{key}_segment"]``, ``[f"{key}_milestone"]``
        When the reference has a trajectory (``tl.pseudotime``).
    ``adata_new.obsm[f"{key}_fate_probabilities"]``, ``adata_new.obs[f"{key}_fate_entropy"]``
        When the reference has fate probabilities.
    """
    key = resolve_key(adata_ref, key)
    if _is_cell_level(adata_ref, key):
        return _project_through_neighbours(adata_new, adata_ref, key, n_neighbors=n_neighbors,
                                           key_added=key_added, copy=copy)
    graph = read_graph(adata_ref, key)
    entry = adata_ref.uns[key]
    new_key = check_key(key_added, key)
    params = entry.get("params", {})
    landmarks = graph.method in LANDMARK_METHODS and "assignment_sigma" in params
    if not (graph.method in NODE_GRAPH_METHODS or landmarks) and "projected_from" in entry:
        raise ValueError(
            f"{key!r} holds cells projected through their neighbours onto the cell graph "
            f"{entry['projected_from']!r} of another AnnData; project onto that reference instead."
        )
    if not (graph.method in NODE_GRAPH_METHODS or landmarks):
        raise ValueError(
            f"tl.project places cells on the graphs of tl.ddrtree, tl.rpg, tl.rpg_l1 and of the cell-level learners "
            f"(tl.mpme, tl.spl, tl.esl, tl.fsl, tl.convex_embedding); {key!r} was fitted by "
            f"{graph.method or 'an unknown learner'!r}. Fit one of them, e.g. sks.tl.rpg(adata_ref, "
            f"use_rep={graph.space!r}), and project onto that."
        )
    if landmarks and (graph.space != params.get("use_rep") or "embedding" not in entry):
        raise ValueError(
            f"The landmark graph {key!r} ({graph.method}) keeps its nodes in its embedding "
            f"{graph.space!r} only, not in the space it was fitted in, so new cells cannot be placed on it. Fit a "
            f"principal tree on the embedding, e.g. sks.tl.rpg(adata_ref, use_rep={graph.space!r}), and project "
            f"onto that, or refit {key!r} on every cell (no n_landmarks) to place new cells through their neighbours."
        )
    if n_neighbors is not None:
        raise ValueError(
            f"n_neighbors places new cells through their neighbours on a cell-level learner fitted on every cell; "
            f"{key!r} ({graph.method}) has a node graph that maps cells itself. Leave n_neighbors=None."
        )
    use_rep, n_pcs = str(params["use_rep"]), int(params["n_pcs"])
    data = _new_representation(adata_new, use_rep, n_pcs, key)
    start = logg.info(f"projecting {adata_new.n_obs} cells onto {key!r}")
    if graph.method == "ddrtree":
        if "mean" not in entry or "projection" not in entry:
            raise ValueError(
                f"The DDRTree result {key!r} stores no centring (uns[{key!r}]['mean']): it was fitted by an older "
                f"version. Refit it with sks.tl.ddrtree(adata_ref, key_added={key!r}) to project cells onto it."
            )
        # as tl.ddrtree places its own cells: their coordinates YW, and eq. (32) there
        latent = (data - np.asarray(entry["mean"])) @ np.asarray(entry["projection"])
        assignment = soft_assignment(latent, graph.nodes, float(params["sigma"])).matrix
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
        _warn_no_trajectory(key)
    if "fates" in entry and fate_probabilities_key(key) in adata_ref.obsm:
        distributions, _ = node_fate_table(adata_ref, key, graph, column_sums(cell_assignment(adata_ref, key)))
        _write_fates(adata_new, new_key, assignment, distributions, written)
    logg.info("    finished", time=start, deep="added\n    " + ", ".join(written))
    return adata_new if copy else None


def _write_fates(adata_new: AnnData, new_key: str, weights, fates: np.ndarray, written: list[str]) -> None:
    """The new cells' fate probabilities (their weights over the reference's nodes or cells times
    those fates) and entropy, written under ``new_key``."""
    probabilities, entropy = fates_core.cell_fates(weights, fates)
    adata_new.obsm[fate_probabilities_key(new_key)] = probabilities
    adata_new.obs[fate_entropy_key(new_key)] = entropy
    written.append("fate probabilities")


def _is_cell_level(adata_ref: AnnData, key: str) -> bool:
    """Whether ``key`` is a cell-level learner fitted on every cell: a cell graph (``is_cell_graph``) or, for
    ``tl.convex_embedding``, which learns no graph there, an embedding alone; no node graph either way."""
    entry = adata_ref.uns.get(key, {})
    return (
        is_cell_graph(adata_ref, key)
        or (entry.get("method") in LANDMARK_METHODS and "nodes" not in entry and latent_key(key) in adata_ref.obsm)
    )


def _project_through_neighbours(adata_new: AnnData, adata_ref: AnnData, key: str, *, n_neighbors: int | None,
                                key_added: str | None, copy: bool) -> AnnData | None:
    """:func:`project` for a cell-level learner fitted on every cell: each new cell through its nearest
    reference cells (:mod:`scskeleton._core.cellgraphs.neighbour_map`). Everything is checked before
    ``adata_new`` is touched."""
    entry = adata_ref.uns[key]
    new_key = check_key(key_added, key)
    graph = read_graph(adata_ref, key) if is_cell_graph(adata_ref, key) else None  # checks the cells fitted
    n_ref = adata_ref.n_obs
    k = min(DEFAULT_NEIGHBORS, n_ref) if n_neighbors is None else check_integer(
        "n_neighbors", n_neighbors, low=1, high=n_ref, role="reference cells placing each new cell")
    trajectory = "segments" in entry and graph is not None and graph.roots.size > 0
    if trajectory:
        missing = [name for name in (pseudotime_key(key), segment_key(key), milestone_key(key))
                   if name not in adata_ref.obs]
        if missing:
            raise KeyError(f"adata_ref.obs lacks {missing}, written by sks.tl.pseudotime; rerun "
                           f"sks.tl.pseudotime(adata_ref, {key!r}) before projecting onto its trajectory.")
    data, reference, space = _neighbour_spaces(adata_new, adata_ref, key)

    start = logg.info(f"projecting {adata_new.n_obs} cells onto {key!r} through their {k} nearest reference cells "
                      f"in {space}")
    weights = neighbour_map.neighbour_weights(data, reference, k)
    embedding = neighbour_map.weighted_mean(weights, np.asarray(adata_ref.obsm[latent_key(key)], dtype=float))

    adata_new = adata_new.copy() if copy else adata_new
    clear_result(adata_new, new_key, keep=entry.get("params", {}).get("use_rep"))
    result = {**deepcopy(dict(entry)), "n_obs": adata_new.n_obs, "projected_from": key, "projection_n_neighbors": k}
    if graph is not None:
        # the reference's cells are the nodes: the root, segments and milestones, all reference cells, stay valid
        result.update(nodes=graph.nodes.copy(), adjacency=graph.adjacency.copy(), space=latent_key(new_key))
    adata_new.uns[new_key] = result
    adata_new.obsm[latent_key(new_key)] = embedding
    adata_new.obsm[assignment_key(new_key)] = weights
    written = [f"uns[{new_key!r}]", f"obsm[{latent_key(new_key)!r}]", f"obsm[{assignment_key(new_key)!r}]"]
    if trajectory:
        times = np.asarray(adata_ref.obs[pseudotime_key(key)], dtype=float)
        adata_new.obs[pseudotime_key(new_key)] = neighbour_map.weighted_mean(weights, times)
        for name in (segment_key, milestone_key):
            labels = pd.Categorical(adata_ref.obs[name(key)])
            codes = neighbour_map.weighted_vote(weights, labels.codes, len(labels.categories))
            adata_new.obs[name(new_key)] = pd.Categorical.from_codes(codes, categories=labels.categories)
        written.append("obs[pseudotime, segment, milestone]")
    elif graph is not None:  # an embedding alone (tl.convex_embedding) has no graph to root
        _warn_no_trajectory(key)
    if "fates" in entry and fate_probabilities_key(key) in adata_ref.obsm:
        # a reference cell's fates are its node's: the weighted mean of the neighbours' (NaN rows drop out)
        fates = np.nan_to_num(np.asarray(adata_ref.obsm[fate_probabilities_key(key)], dtype=float), nan=0.0)
        _write_fates(adata_new, new_key, weights, fates, written)
    logg.info("    finished", time=start, deep="added\n    " + ", ".join(written))
    return adata_new if copy else None


def _neighbour_spaces(adata_new: AnnData, adata_ref: AnnData, key: str) -> tuple[np.ndarray, np.ndarray, str]:
    """The new and the reference cells in the space the learner compared cells in, and its name for the log.

    ``use_rep`` (first ``n_pcs`` columns) for every learner but ``tl.fsl``,
    which fits the genes of ``layer`` and compares cells by the θ-weighted
    distance ψ (eq. 29): the genes with θ > 0, scaled by √θ, as its landmark
    map does. Genes are matched by name.
    """
    entry = adata_ref.uns[key]
    params = entry.get("params", {})
    if entry.get("method") != "fsl":
        if "use_rep" not in params or "n_pcs" not in params:
            raise KeyError(
                f"adata_ref.uns[{key!r}]['params'] does not record use_rep and n_pcs, the representation {key!r} was "
                "fitted on, in which each new cell's nearest reference cells are found. Refit it, e.g. "
                f"sks.tl.{entry.get('method', '<learner>')}(adata_ref, key_added={key!r})."
            )
        use_rep, n_pcs = str(params["use_rep"]), int(params["n_pcs"])
        if use_rep != "X" and use_rep not in adata_ref.obsm:
            raise KeyError(f"adata_ref.obsm[{use_rep!r}] is missing: {key!r} was fitted on it, and the new cells are "
                           "placed by their nearest reference cells there. Restore it on the reference.")
        data = _new_representation(adata_new, use_rep, n_pcs, key)
        return data, get_representation(adata_ref, use_rep=use_rep, n_pcs=n_pcs), repr(use_rep)
    layer = None if params.get("layer", "X") == "X" else str(params["layer"])
    if weight_key(key) not in adata_ref.var:
        raise KeyError(f"adata_ref.var[{weight_key(key)!r}] (the gene weights θ of tl.fsl) is missing; refit "
                       f"sks.tl.fsl(adata_ref, key_added={key!r}).")
    theta = np.asarray(adata_ref.var[weight_key(key)], dtype=float)
    weighted = theta > 0
    genes = adata_ref.var_names[weighted]
    columns = adata_new.var_names.get_indexer(genes)
    if (columns < 0).any():
        absent = list(genes[columns < 0][:5])
        raise KeyError(f"{int((columns < 0).sum())} of the {genes.size} genes tl.fsl weighted under {key!r} are not "
                       f"in adata_new.var_names (e.g. {absent}); the new cells need the reference's genes.")
    where = "adata.X" if layer is None else f"adata.layers[{layer!r}]"
    data = weighted_features(_gene_columns(adata_new, layer, columns, f"adata_new: {where}"), theta[weighted])
    reference = weighted_features(
        _gene_columns(adata_ref, layer, np.flatnonzero(weighted), f"adata_ref: {where}"), theta[weighted]
    )
    return data, reference, f"the {genes.size} genes weighted by tl.fsl"


def _gene_columns(adata: AnnData, layer: str | None, columns: np.ndarray, where: str) -> np.ndarray:
    """The ``columns`` of ``layer`` (``None``: ``X``), dense and finite: only those genes are densified."""
    values, _ = get_expression(adata, layer=layer)
    values = values[:, columns]
    return as_float_matrix(values.toarray() if sparse.issparse(values) else np.asarray(values), where)


def _warn_no_trajectory(key: str) -> None:
    """Say that ``key`` has no root or pseudotime yet, so only the placement is written."""
    logg.warning(f"{key!r} has no root or pseudotime yet, so the new cells are placed on the graph but get no "
                 "pseudotime. To get one, run sks.tl.root and sks.tl.pseudotime on the reference, then project again.")


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
