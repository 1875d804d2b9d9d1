"""ElPiGraph (elpigraph-python): an elastic principal tree on X_pca, pseudotime from the root cell's node.

Run with ``/work/peers/elpigraph/bin/python``. Protocol (shared part in
``_common.py``):

* ``np.random.seed(0)`` (ElPiGraph draws from numpy's global stream), then
  ``elpigraph.computeElasticPrincipalTree(X_pca, NumNodes=50)[0]`` (50 nodes,
  the value of the package's examples; ``NumNodes`` has no default; the
  elasticities and the rest at their defaults);
* root: the node nearest the root cell (``elpigraph.utils.getProjection``'s
  ``node_id``);
* ``elpigraph.utils.getPseudotime(X_pca, graph, source=root_node)``.

Per cell: ``graph["pseudotime"]``; the segment is the segment of the edge the
cell projects onto (``projection["edge_id"]``) among the tree's maximal
unbranched paths. No fate. Branch points: nodes of degree ≥ 3.
"""

from __future__ import annotations

import time

import numpy as np
from _common import graph_segments, main_default, recording

import elpigraph

NUM_NODES = 50


def run(adata, root: int) -> dict:
    X = np.asarray(adata.obsm["X_pca"], dtype=float)
    with recording() as caught:
        start = time.perf_counter()
        np.random.seed(0)
        graph = elpigraph.computeElasticPrincipalTree(X, NumNodes=min(NUM_NODES, adata.n_obs))[0]
        elpigraph.utils.getProjection(X, graph)
        root_node = int(graph["projection"]["node_id"][root])
        elpigraph.utils.getPseudotime(X, graph, source=root_node, project=False)
        seconds = time.perf_counter() - start
    edges = np.asarray(graph["Edges"][0], dtype=int)
    _, edge_segment, n_branch_points = graph_segments(len(graph["NodePositions"]), edges)
    return {
        "pseudotime": np.asarray(graph["pseudotime"], dtype=float),
        "segment": edge_segment[np.asarray(graph["projection"]["edge_id"], dtype=int)],
        "n_branch_points": n_branch_points,
        "seconds": seconds,
        "warnings": caught,
        "root_node": root_node,
    }


def main() -> None:
    main_default(run, __doc__.splitlines()[0], packages=('elpigraph-python', 'numpy', 'scipy', 'networkx'), moved=('root_node',), num_nodes=NUM_NODES)


if __name__ == "__main__":
    main()
