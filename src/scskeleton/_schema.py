"""The AnnData schema shared by every graph learner, trajectory tool and plot.

The one place for key names (see ``shared/DESIGN.md``) and for reading a stored
graph back with errors that say which function to run first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from anndata import AnnData
from scipy import sparse


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


def segment_key(key: str) -> str:
    """``obs`` key of the segment each cell lies on."""
    return f"{key}_segment"


@dataclass(frozen=True)
class StoredGraph:
    """A node graph read back from ``adata.uns[key]``."""

    key: str
    method: str
    nodes: np.ndarray
    adjacency: sparse.csr_matrix
    space: str
    objective: np.ndarray
    roots: np.ndarray  # node indices, at most one per connected component; empty when none is set

    @property
    def n_nodes(self) -> int:
        return self.nodes.shape[0]

    @property
    def root(self) -> int | None:
        """The first root, or ``None`` when no root is set."""
        return int(self.roots[0]) if self.roots.size else None


def read_graph(adata: AnnData, key: str) -> StoredGraph:
    """Read the graph stored under ``adata.uns[key]``; KeyError if absent."""
    if key not in adata.uns:
        raise KeyError(
            f"No graph under adata.uns[{key!r}]. Fit one first, e.g. sks.tl.ddrtree(adata) "
            f"(or pass the key_added you used). Keys in .uns: {sorted(adata.uns)}."
        )
    entry = adata.uns[key]
    missing = [field for field in ("nodes", "adjacency", "space") if field not in entry]
    if missing:
        raise KeyError(f"adata.uns[{key!r}] is not a scskeleton graph: it lacks {missing}.")
    root = entry.get("root")
    return StoredGraph(
        key=key,
        method=str(entry.get("method", "")),
        nodes=np.asarray(entry["nodes"], dtype=float),
        adjacency=sparse.csr_matrix(entry["adjacency"]),
        space=str(entry["space"]),
        objective=np.asarray(entry.get("objective", []), dtype=float),
        roots=np.empty(0, dtype=np.intp) if root is None else np.atleast_1d(np.asarray(root, dtype=np.intp)),
    )


def cell_coordinates(adata: AnnData, graph: StoredGraph) -> np.ndarray:
    """Cell coordinates in the nodes' space: the first ``d`` columns of
    ``obsm[space]``, or of ``adata.X`` for graphs fitted on ``use_rep="X"``."""
    if graph.space == "X":
        values = adata.X[:, : graph.nodes.shape[1]]
        values = values.toarray() if sparse.issparse(values) else np.asarray(values)
        return np.ascontiguousarray(values, dtype=float)
    if graph.space not in adata.obsm:
        raise KeyError(
            f"The graph {graph.key!r} lives in adata.obsm[{graph.space!r}], which is missing; "
            "refit the graph on this AnnData."
        )
    coords = np.asarray(adata.obsm[graph.space])[:, : graph.nodes.shape[1]]
    return np.ascontiguousarray(coords, dtype=float)


def cell_assignment(adata: AnnData, key: str) -> sparse.csr_matrix:
    """The N × K soft assignment written by a graph learner, as CSR."""
    name = assignment_key(key)
    if name not in adata.obsm:
        raise KeyError(f"adata.obsm[{name!r}] is missing; refit the graph {key!r} on this AnnData.")
    return sparse.csr_matrix(adata.obsm[name])
