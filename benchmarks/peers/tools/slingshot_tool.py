"""pyslingshot: leiden clusters on the kNN graph, Slingshot on X_pca from the root cell's cluster.

Run with ``/work/peers/slingshot/bin/python`` (pyslingshot, scanpy, leidenalg).
Protocol (shared part in ``_common.py``), timed from the clustering on:

* clusters: ``sc.tl.leiden(adata, random_state=0)`` on the prepared kNN graph
  (scanpy's defaults: resolution 1, the leidenalg flavour);
* ``Slingshot(X_pca, cluster_labels_onehot, start_node=<root cell's
  cluster>)`` then ``.fit()`` (10 epochs, the default);
* pseudotime: ``.unified_pseudotime``.

Per cell: the segment is the segment of the cell's cluster in Slingshot's
cluster minimum spanning tree (its maximal unbranched paths; a cluster at a
fork is a segment of its own), the fate the lineage of largest weight
(``cell_weights``). Branch points: clusters of degree ≥ 3 in that tree.
"""

from __future__ import annotations

import time

import numpy as np
from _common import graph_segments, main_default, recording

import scanpy as sc
from pyslingshot import Slingshot


def run(adata, root: int) -> dict:
    with recording() as caught:
        start = time.perf_counter()
        sc.tl.leiden(adata, random_state=0)
        cluster = adata.obs["leiden"].cat.codes.to_numpy()
        onehot = np.eye(cluster.max() + 1)[cluster]
        slingshot = Slingshot(np.asarray(adata.obsm["X_pca"], dtype=float), cluster_labels_onehot=onehot,
                              start_node=int(cluster[root]))
        slingshot.fit()
        pseudotime = np.asarray(slingshot.unified_pseudotime, dtype=float)
        seconds = time.perf_counter() - start
    edges = [(parent, child) for parent, children in slingshot.tree.items() for child in children]
    node_segment, _, n_branch_points = graph_segments(onehot.shape[1], edges)
    return {
        "pseudotime": pseudotime,
        "segment": node_segment[cluster],
        "fate": np.asarray(slingshot.cell_weights).argmax(axis=1),
        "n_branch_points": n_branch_points,
        "seconds": seconds,
        "warnings": caught,
        "n_clusters": int(onehot.shape[1]),
        "n_lineages": len(slingshot.lineages),
    }


def main() -> None:
    sc.settings.verbosity = 0
    main_default(run, __doc__.splitlines()[0], packages=('pyslingshot', 'scanpy', 'leidenalg', 'numpy'), moved=('n_clusters', 'n_lineages'))


if __name__ == "__main__":
    main()
