"""The AnnData schema shared by every graph learner, trajectory tool and plot.

The one place for key names (every learner writes the same fields under its ``key``,
``adata.uns[key]`` and the ``obs``/``obsm`` columns named from it, so no other module
spells a key itself) and for reading a stored graph back with errors that say which
function to run first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from anndata import AnnData
from scipy import sparse

from .._core.trees.trajectory import GraphProjection, project_onto_graph
from .._dask import is_dask
from .learners import LEARNER_METHODS

#: ``params["layer"]`` of a gene-level result fitted on ``adata.X`` (on ``adata.raw.X`` with ``params["use_raw"]``).
MAIN_MATRIX = "X"


def learner_keys(adata: AnnData) -> list[str]:
    """Keys of ``adata.uns`` holding a fitted skeleton (a learner's result, or one derived from it by
    ``tl.subset_tree`` / ``tl.project``), in the order of ``adata.uns``."""
    return [
        key for key, entry in adata.uns.items()
        if isinstance(key, str) and isinstance(entry, Mapping) and entry.get("method") in LEARNER_METHODS
    ]


def resolve_key(adata: AnnData, key: str | None) -> str:
    """The learner key a tool or plot works on: ``key`` as given, or for ``None`` the key of the only
    fitted skeleton in ``adata.uns``.

    ``None`` with no skeleton fitted raises a KeyError (run a learner first),
    with several a ValueError listing them (pass ``key=``), so that a result
    is never read off a skeleton the user did not mean.
    """
    if not isinstance(adata, AnnData):
        raise TypeError(f"Expected an AnnData object; got {type(adata).__name__}.")
    if key is not None:
        if not isinstance(key, str):
            raise ValueError(f"key must be a key of adata.uns (a string) or None; got {key!r}.")
        return key
    fitted = learner_keys(adata)
    if not fitted:
        raise KeyError(
            "No fitted skeleton in adata.uns: run a learner first, e.g. sks.tl.ddrtree(adata) "
            f"(or sks.tl.rpg, sks.tl.mpme, …). Keys in .uns: {sorted(map(str, adata.uns))}."
        )
    if len(fitted) > 1:
        raise ValueError(
            f"adata.uns holds {len(fitted)} fitted skeletons, {fitted}; pass key= to choose one, "
            f"e.g. key={fitted[0]!r}."
        )
    return fitted[0]


def latent_key(key: str) -> str:
    """``obsm`` key of the latent coordinates a method learns."""
    return f"X_{key}"


def assignment_key(key: str) -> str:
    """``obsm`` key of the N × K soft assignment of cells to nodes."""
    return f"{key}_assignment"


def connectivities_key(key: str) -> str:
    """``obsp`` key of a learned N × N cell graph."""
    return f"{key}_connectivities"


def component_key(key: str) -> str:
    """``obs`` key of the connected component of the learned cell graph each cell is in."""
    return f"{key}_component"


def pseudotime_key(key: str) -> str:
    """``obs`` key of the pseudotime written by ``tl.pseudotime``."""
    return f"{key}_pseudotime"


def phase_key(key: str) -> str:
    """``obs`` key of the position of each cell around the graph's loop (``tl.phase``)."""
    return f"{key}_phase"


def segment_key(key: str) -> str:
    """``obs`` key of the segment each cell lies on."""
    return f"{key}_segment"


def milestone_key(key: str) -> str:
    """``obs`` key of the milestone nearest each cell along the graph."""
    return f"{key}_milestone"


def fate_probabilities_key(key: str) -> str:
    """``obsm`` key of the N × fates probabilities written by ``tl.fate_probabilities``."""
    return f"{key}_fate_probabilities"


def fate_entropy_key(key: str) -> str:
    """``obs`` key of the entropy of each cell's fate probabilities."""
    return f"{key}_fate_entropy"


def weight_key(key: str) -> str:
    """``var`` key of the gene weights θ learned by ``tl.fsl``."""
    return f"{key}_weight"


def selected_key(key: str) -> str:
    """``var`` key flagging the genes ``tl.fsl`` selected."""
    return f"{key}_selected"


def result_fields(key: str) -> dict[str, tuple[str, ...]]:
    """Every field outside ``uns[key]`` that a learner or trajectory tool writes under ``key``,
    by AnnData attribute: what a new fit under ``key`` removes first, whichever learner wrote them.
    A new field written under ``key`` belongs here."""
    return {
        "obsm": (latent_key(key), assignment_key(key), fate_probabilities_key(key)),
        "obsp": (connectivities_key(key),),
        "obs": (component_key(key), pseudotime_key(key), segment_key(key), milestone_key(key), fate_entropy_key(key)),
        "var": (weight_key(key), selected_key(key)),
    }


def unique_names(names: list[str]) -> list[str]:
    """``names`` with repeats numbered in order: ``["Ery", "Ery", "Mk"]`` → ``["Ery", "Ery 2", "Mk"]``
    (milestone names, and the legends that show them, must be unique)."""
    used: set[str] = set()
    out = []
    for name in names:
        candidate, number = name, 1
        while candidate in used:
            number += 1
            candidate = f"{name} {number}"
        used.add(candidate)
        out.append(candidate)
    return out


@dataclass(frozen=True)
class StoredGraph:
    """A node graph read back from ``adata.uns[key]``."""

    key: str
    method: str
    nodes: np.ndarray
    adjacency: sparse.csr_matrix
    space: str
    objective: np.ndarray
    roots: np.ndarray  # node indices (several in one component after tl.root(..., several=True)); empty when none

    @property
    def n_nodes(self) -> int:
        return self.nodes.shape[0]

    @property
    def root(self) -> int | None:
        """The first root, or ``None`` when no root is set."""
        return int(self.roots[0]) if self.roots.size else None


def read_graph(adata: AnnData, key: str) -> StoredGraph:
    """Read the graph stored under ``adata.uns[key]``; KeyError if absent.

    Node-graph learners (DDRTree, RPG) store ``nodes``, ``adjacency`` and
    ``space`` in ``uns[key]``. Cell-level learners (MPME, SPL, ESL, FSL)
    store a graph over the cells instead: its nodes are the cells at their
    embedding ``obsm[f"X_{key}"]`` and its adjacency is
    ``obsp[f"{key}_connectivities"]``, so trajectories can be read off it the
    same way (each cell is its own node).
    """
    if key not in adata.uns:
        raise KeyError(
            f"No graph under adata.uns[{key!r}]. Fit one first, e.g. sks.tl.ddrtree(adata) "
            f"(or pass the key_added you used). Keys in .uns: {sorted(adata.uns)}."
        )
    entry = adata.uns[key]
    root = entry.get("root")
    common = dict(
        key=key,
        method=str(entry.get("method", "")),
        objective=np.asarray(entry.get("objective", []), dtype=float),
        roots=np.empty(0, dtype=np.intp) if root is None else np.atleast_1d(np.asarray(root, dtype=np.intp)),
    )
    if all(field in entry for field in ("nodes", "adjacency", "space")):
        return StoredGraph(
            nodes=np.asarray(entry["nodes"], dtype=float),
            adjacency=sparse.csr_matrix(entry["adjacency"]),
            space=str(entry["space"]),
            **common,
        )
    if is_cell_graph(adata, key):
        _check_fitted_cells(adata, key)
        return StoredGraph(
            nodes=np.asarray(adata.obsm[latent_key(key)], dtype=float),
            adjacency=sparse.csr_matrix(adata.obsp[connectivities_key(key)]),
            space=latent_key(key),
            **common,
        )
    raise KeyError(
        f"adata.uns[{key!r}] is not a scskeleton graph: it has neither nodes/adjacency/space nor "
        f"adata.obsm[{latent_key(key)!r}] with adata.obsp[{connectivities_key(key)!r}]."
    )


def _check_fitted_cells(adata: AnnData, key: str) -> None:
    """Refuse a cell graph read on other cells than it was fitted on.

    Every cell is a node of a cell graph, and its root, leaves and segments
    are cell positions: on a subset, slicing ``obsp`` keeps only the edges
    among the remaining cells (often no longer connected) and the stored
    positions point at other cells. A node graph needs no such check: each
    remaining cell keeps its own row of the assignment. Only the number of
    cells is compared (``uns[key]["n_obs"]``, absent from results written
    before it was stored), which catches any subset of a different size.
    """
    entry = adata.uns[key]
    fitted = entry.get("n_obs")
    if fitted is not None and int(fitted) != adata.n_obs:
        raise ValueError(
            f"The cell graph {key!r} was fitted on {int(fitted)} cells, but this AnnData has {adata.n_obs}: "
            "every cell is a node of it, so a subset of the cells needs its own fit. Refit on the subset, "
            f"e.g. sub = adata[mask].copy(); sks.tl.{entry.get('method', '<learner>')}(sub, key_added={key!r})."
        )


def is_cell_graph(adata: AnnData, key: str) -> bool:
    """Whether ``key`` is a cell-level learner: a learned cell graph and an embedding, no node graph."""
    entry = adata.uns.get(key, {})
    return (
        "nodes" not in entry
        and connectivities_key(key) in adata.obsp
        and latent_key(key) in adata.obsm
    )


def cell_coordinates(adata: AnnData, graph: StoredGraph) -> np.ndarray:
    """Cell coordinates in the nodes' space: the first ``d`` columns of
    ``obsm[space]``, or of ``adata.X`` for graphs fitted on ``use_rep="X"``."""
    if graph.space == "X":
        values = adata.X[:, : graph.nodes.shape[1]]
        if is_dask(values):
            return values
        values = values.toarray() if sparse.issparse(values) else np.asarray(values)
        return np.ascontiguousarray(values, dtype=float)
    if graph.space not in adata.obsm:
        raise KeyError(
            f"The graph {graph.key!r} lives in adata.obsm[{graph.space!r}], which is missing; "
            "refit the graph on this AnnData."
        )
    stored = adata.obsm[graph.space]
    if is_dask(stored):  # a chunked fit's latent coordinates stay lazy
        return stored[:, : graph.nodes.shape[1]]
    coords = np.asarray(stored)[:, : graph.nodes.shape[1]]
    return np.ascontiguousarray(coords, dtype=float)


def cell_projection(adata: AnnData, graph: StoredGraph) -> GraphProjection:
    """Where each cell lands on ``graph`` (its nearest node, then the closest point on that node's edges).

    Cells held as a dask array are projected chunk by chunk where they live.
    """
    coordinates = cell_coordinates(adata, graph)
    if is_dask(coordinates):
        from .._dask.trajectory import project_onto_graph_chunked

        return project_onto_graph_chunked(coordinates, graph.nodes, graph.adjacency)
    return project_onto_graph(coordinates, graph.nodes, graph.adjacency)


def cell_assignment(adata: AnnData, key: str) -> np.ndarray | sparse.csr_matrix:
    """The N × K soft assignment written by a graph learner, as stored (dense or CSR).

    It is never converted: at 10⁶ cells × 10³ nodes a dense assignment takes
    8 GB, and a CSR copy of it more; callers read the rows or sums they need
    (:func:`column_sums`). A chunked fit's assignment is a lazy dask array,
    recomputed chunk by chunk for each sum. For a cell-level learner (see :func:`read_graph`)
    every cell is its own node: the identity.
    """
    name = assignment_key(key)
    if name not in adata.obsm and is_cell_graph(adata, key):
        return sparse.identity(adata.n_obs, format="csr")
    if name not in adata.obsm:
        raise KeyError(f"adata.obsm[{name!r}] is missing; refit the graph {key!r} on this AnnData.")
    value = adata.obsm[name]
    return value if sparse.issparse(value) or is_dask(value) else np.asarray(value)


def column_sums(assignment, rows=None) -> np.ndarray:
    """Σ_i r_ik over all cells, or over ``rows`` only: each node's (soft) number of cells."""
    part = assignment if rows is None else assignment[rows]
    return np.asarray(part.sum(axis=0), dtype=float).ravel()


def member_cells(adata: AnnData, key: str) -> np.ndarray:
    """Which cells belong to the result under ``key``: those with assignment mass.

    A sub-trajectory (``tl.subset_tree``) keeps every cell of the AnnData but
    gives the cells outside it an all-zero assignment row; trajectory tools
    leave them out (NaN pseudotime). All cells when no assignment is stored.
    """
    name = assignment_key(key)
    if name not in adata.obsm:
        return np.ones(adata.n_obs, dtype=bool)
    return np.asarray(adata.obsm[name].sum(axis=1), dtype=float).ravel() > 0
