"""Projection of cells onto a node graph, chunk by chunk (the K-node graph is sent with every task)."""

from __future__ import annotations

from dataclasses import fields

import dask
import dask.array as da
import numpy as np
from dask import delayed
from scipy import sparse

from .._core.trees.trajectory import GraphProjection, Topology, nearest_milestone, project_onto_graph, pseudotime
from .blocks import rows_whole


def project_onto_graph_chunked(points: da.Array, nodes: np.ndarray, adjacency: sparse.spmatrix) -> GraphProjection:
    """:func:`~scskeleton._core.trees.trajectory.project_onto_graph` of a dask array of cells.

    Each chunk is projected where it lives; only the per-cell result (five
    numbers a cell: what pseudotime, segments and milestones are read from)
    comes back to the driver, never the coordinates. The chunks' results are
    joined one field at a time, each chunk's copy of a field released as soon
    as it is joined, so the driver holds the result and one field's copy at most.
    """
    adjacency = sparse.csr_matrix(adjacency)
    parts = [delayed(_project_block)(block, nodes, adjacency) for block in rows_whole(points).to_delayed().ravel()]
    pieces = [vars(result).copy() for result in dask.compute(*parts)]
    joined = {}
    for field in fields(GraphProjection):
        joined[field.name] = np.concatenate([piece.pop(field.name) for piece in pieces])
    return GraphProjection(**joined)


def place_chunked(points: da.Array, nodes: np.ndarray, adjacency: sparse.spmatrix, roots: np.ndarray, shape: Topology,
                  milestone_nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each cell's pseudotime, segment and nearest milestone (as ``tl.pseudotime`` writes them), chunk by chunk.

    The chunk is projected onto the graph and placed where it lives (the
    graph, its topology and the roots go with every task; the geodesic
    distances of the K nodes are recomputed per chunk, a few milliseconds),
    so the driver receives 16 bytes a cell and never the projection.
    """
    adjacency = sparse.csr_matrix(adjacency)
    parts = [
        delayed(_place_block)(block, nodes, adjacency, roots, shape, milestone_nodes)
        for block in rows_whole(points).to_delayed().ravel()
    ]
    pieces = list(dask.compute(*parts))
    joined = []
    for index in range(3):
        joined.append(np.concatenate([piece[index] for piece in pieces]))
        for piece in pieces:
            piece[index] = None
    return tuple(joined)


def _place_block(block, nodes, adjacency, roots, shape: Topology, milestone_nodes) -> list[np.ndarray]:
    projection = _project_block(block, nodes, adjacency)
    return [
        pseudotime(projection, adjacency, nodes, roots),
        shape.segment_of(projection).astype(np.int32),
        nearest_milestone(projection, adjacency, nodes, milestone_nodes).astype(np.int32),
    ]


def _project_block(block, nodes: np.ndarray, adjacency: sparse.csr_matrix) -> GraphProjection:
    return project_onto_graph(np.asarray(block, dtype=float), nodes, adjacency)
