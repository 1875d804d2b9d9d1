"""``n_landmarks=`` of the dense cell-level learners: fit on k-means landmarks, write a node graph.

One place for the five adapters (``tl.mpme``, ``tl.spl``, ``tl.esl``, ``tl.fsl``,
``tl.convex_embedding``): how many landmarks, the log line when the default
switches to them, and the fields written. The math is in
:mod:`scskeleton._core.cellgraphs.landmarks`.
"""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.results import write_graph
from ..._anndata.schema import latent_key
from ..._core.cellgraphs import landmarks as core
from ..._core.trees.pruning import MIN_EXTENSION, MIN_MASS

#: The "Returns" entry every learner's docstring shares for its landmark fit.
LANDMARK_FIELDS = """
    With landmarks (``n_landmarks``, or more cells than the dense limit) the
    result is a node graph over the landmarks instead of a cell graph, read by
    ``sks.tl.root``, ``sks.tl.pseudotime``, ``sks.pl.tree`` and the other
    trajectory tools as they read ``tl.rpg``'s (no ``obsp`` field is written):

    ``adata.uns[key]``
        ``nodes`` (K' × D: the K' landmarks left after pruning, in the space of
        ``use_rep``, moved to the principal points of the skeleton),
        ``space`` (= ``use_rep``), ``adjacency`` (K' × K' sparse: the skeleton
        of the learned landmark graph, each edge with its learned weight),
        ``connectivities`` (K' × K' sparse: the learned graph itself among
        those landmarks), ``embedding`` (K' × d: the learner's embedding of
        them), ``node_groups`` (K': the part of the embedding each node
        belongs to, for ESL's separately embedded components; else 0), ``n_pruned`` (terminal branches removed), ``n_loops`` (rings
        kept); in ``params`` also ``n_landmarks`` (K, the landmarks fitted),
        ``assignment_sigma`` (σ), ``prune`` (``True``), ``min_branch_extension``
        and ``min_branch_fraction``. The learner's other fields (``objective``,
        ``n_iter``, ``eigenvalues``, …) describe its fit on the landmarks.
    ``adata.obsm[f"{key}_assignment"]``
        R, N × K' soft assignment of the cells to the nodes,
        r_ik ∝ exp(-‖x_i - c_k‖²/σ) (eq. 18 of the RPG paper), σ the median
        squared distance of the cells to their nearest landmark; each row
        restricted to the connected component of the cell's nearest node and
        summing to one.
    ``adata.obsm[f"X_{key}"]``
        N × d: R·``embedding``, each cell's assignment-weighted landmark embedding.
"""

#: The parameter entry every learner's docstring shares.
LANDMARK_PARAMETER = """n_landmarks
        Fit on this many k-means landmarks instead of the cells, then map every
        cell to them (see "Landmarks" above). ``None`` (default): every cell
        (the exact method) up to {limit:,} cells, else {default:,} landmarks
        (logged). An integer K forces K landmarks, 3 ≤ K ≤ min(N, {limit:,}).
        The k-means seeding follows ``random_state``."""

#: The method-note paragraph every learner's docstring shares.
LANDMARK_NOTE = """
    Landmarks. Above {limit:,} cells (or with ``n_landmarks``) the learner is
    fitted on K k-means centroids of the cells (deterministic for a
    ``random_state``), as Algorithm 2 of the regularized principal graph paper
    (Mao, Wang, Tsang & Sun, arXiv preprint 2015, IEEE TPAMI 2017; eq. 24)
    fits its graph, and every cell is mapped
    to them by that paper's soft assignment, eq. (18), with σ the median
    squared distance of the cells to their nearest landmark (scale-free). The
    learned landmark graph is a band of short edges in which every landmark is
    a branch point, so the node graph written is its skeleton: a spanning
    forest of the learned edges (shortest first, lengths in ``use_rep``);
    terminal branches with under 1 % of the cells or not standing 4 noise
    widths out of the rest removed, as ``tl.rpg`` prunes; learned edges that
    close a ring around a hole (at least a quarter of their component's
    length) added back; the nodes then moved to the principal points of that
    fixed skeleton by three rounds of the paper's eqs. (18) and (22). Its
    connected components are those of the learned graph, less those under
    1 % of the cells. ``tl.pseudotime`` measures the geodesic distance from
    the root within the root's component (cells of other components get NaN,
    with a warning: root each with ``tl.root(..., per_component=True)``), so
    on a ring it increases both ways from the root to the far side. Time
    O(N·K·D) for the cells plus the
    learner on K points.
"""


def landmark_docs(function, *, limit: int, default: int) -> None:
    """Fill the shared landmark paragraphs into ``function.__doc__`` (``{landmarks}``, ``{n_landmarks}``,
    ``{landmark_fields}``), and the paragraphs every tool shares (:func:`~scskeleton._anndata.docs.fill_doc`)."""
    function.__doc__ = (
        function.__doc__
        .replace("    {landmarks}", LANDMARK_NOTE.format(limit=limit))
        .replace("{n_landmarks}", LANDMARK_PARAMETER.format(limit=limit, default=min(default, limit)))
        .replace("    {landmark_fields}", LANDMARK_FIELDS)
    )
    fill_doc(function)


def landmark_count(n_landmarks, n_cells: int, *, limit: int, default: int, name: str) -> int | None:
    """The number of landmarks to fit on (``None``: every cell, the exact method); logs the switch."""
    resolved = core.resolve_n_landmarks(n_landmarks, n_cells, limit=limit, default=default)
    if n_landmarks is None and resolved is not None:
        logg.info(
            f"{name} fits at most {limit:,} cells exactly (dense N × N work); with {n_cells:,} cells it is "
            f"fitted on {resolved:,} k-means landmarks and every cell is mapped to them "
            "(pass n_landmarks= to choose how many)"
        )
    return resolved


def fit_points(data: np.ndarray, n_landmarks: int | None, random_state: int) -> np.ndarray:
    """The points the learner fits: the cells, or their ``n_landmarks`` k-means centroids."""
    if n_landmarks is None:
        return data
    return core.choose_landmarks(data, n_landmarks, random_state=random_state)


def write_landmark_graph(
    adata: AnnData,
    key: str,
    *,
    graph: core.LandmarkGraph,
    space: str,
    params: dict,
    uns: dict | None = None,
    **fields,
) -> list[str]:
    """Store the node graph over the landmarks under ``key`` (``LANDMARK_FIELDS``).

    ``space`` is where the nodes live: the fitted representation (``use_rep``;
    nodes = the landmarks' positions, their embedding in ``uns[key]["embedding"]``)
    or ``f"X_{key}"`` (nodes = the landmarks' embedding).
    """
    params = {
        **params,
        "n_landmarks": int(graph.keep.size),
        "assignment_sigma": graph.sigma,
        "prune": True,
        "min_branch_extension": MIN_EXTENSION,
        "min_branch_fraction": MIN_MASS,
    }
    in_embedding = space == latent_key(key)
    return write_graph(
        adata,
        key,
        nodes=graph.nodes if in_embedding else graph.positions,
        space=space,
        adjacency=graph.adjacency,
        n_pruned=graph.n_pruned,
        params=params,
        uns={
            **(uns or {}),
            **({} if in_embedding else {"embedding": graph.nodes}),
            "connectivities": graph.connectivities,
            "n_loops": int(graph.n_loops),
            "node_groups": graph.node_groups.astype(np.int64),
        },
        latent=graph.embedding,
        assignment=graph.assignment,
        **fields,
    )


def landmark_summary(graph: core.LandmarkGraph) -> str:
    """The end-of-run log's description of the node graph."""
    return (
        f"node graph over {graph.nodes.shape[0]} of {graph.keep.size} landmarks, "
        f"{graph.adjacency.nnz // 2} edges, {graph.n_pruned} branches pruned, {graph.n_loops} loops"
    )
