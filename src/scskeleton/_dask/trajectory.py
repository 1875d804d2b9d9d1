"""Projection of cells onto a node graph, chunk by chunk (the K-node graph is sent with every task)."""

from __future__ import annotations

import dask.array as da
import numpy as np
from scipy import sparse

from .._core.trees.trajectory import GraphProjection, project_onto_graph
from .blocks import rows_whole

#: Columns of the packed per-cell result: edge start, edge end, fraction, distance, overhang.
_FIELDS = 5


def project_onto_graph_chunked(points: da.Array, nodes: np.ndarray, adjacency: sparse.spmatrix) -> GraphProjection:
    """:func:`~scskeleton._core.trees.trajectory.project_onto_graph` of a dask array of cells.

    Each chunk is projected where it lives; only the per-cell result (five
    numbers a cell: what pseudotime, segments and milestones are read from)
    comes back to the driver, never the coordinates.
    """
    points = rows_whole(points)
    adjacency = sparse.csr_matrix(adjacency)
    packed = points.map_blocks(
        _project_block, nodes, adjacency, chunks=(points.chunks[0], (_FIELDS,)), dtype=float
    ).compute()
    return GraphProjection(
        edge_start=packed[:, 0].astype(np.intp),
        edge_end=packed[:, 1].astype(np.intp),
        fraction=packed[:, 2].copy(),
        distance=packed[:, 3].copy(),
        overhang=packed[:, 4].copy(),
    )


def _project_block(block, nodes: np.ndarray, adjacency: sparse.csr_matrix) -> np.ndarray:
    result = project_onto_graph(np.asarray(block, dtype=float), nodes, adjacency)
    # node indices are below 2**53, so float64 holds them exactly
    return np.column_stack([result.edge_start, result.edge_end, result.fraction, result.distance, result.overhang])
