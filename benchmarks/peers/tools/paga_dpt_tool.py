"""scanpy's PAGA (topology, segments) and diffusion pseudotime (DPT) from the root cell.

Run with ``/work/peers/scanpy/bin/python`` (scanpy 1.11.5, the main
environment's version, plus leidenalg and igraph, which the main environment
lacks). Protocol (shared part in ``_common.py``), at scanpy's defaults, on the
prepared kNN graph:

* ``sc.tl.leiden(adata, random_state=0)``, ``sc.tl.paga(adata, groups="leiden")``;
* ``sc.tl.diffmap(adata)`` (15 components), ``adata.uns["iroot"] = root``,
  ``sc.tl.dpt(adata)`` (10 diffusion components, ``n_branchings=0``: DPT's own
  branching detection is superseded by PAGA, whose graph gives the topology).

Per cell: ``obs["dpt_pseudotime"]`` (infinite values, cells the root cannot
reach, become NaN); the segment is the segment of the cell's cluster in the
PAGA graph thresholded as ``sc.pl.paga`` draws it (connectivities ≥ 0.01, its
default), i.e. that graph's maximal unbranched paths (a cluster at a fork is
a segment of its own). No fate. Branch points: clusters of degree ≥ 3 in the
thresholded PAGA graph.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from _common import graph_segments, main_default, recording

import scanpy as sc

PAGA_THRESHOLD = 0.01  # sc.pl.paga's default threshold on connectivities


def run(adata, root: int) -> dict:
    with recording() as caught:
        start = time.perf_counter()
        sc.tl.leiden(adata, random_state=0)
        sc.tl.paga(adata, groups="leiden")
        sc.tl.diffmap(adata)
        adata.uns["iroot"] = root
        sc.tl.dpt(adata)
        seconds = time.perf_counter() - start
    connectivities = sp.triu(sp.csr_matrix(adata.uns["paga"]["connectivities"]), k=1).tocoo()
    keep = connectivities.data >= PAGA_THRESHOLD
    n_clusters = connectivities.shape[0]
    node_segment, _, n_branch_points = graph_segments(
        n_clusters, np.column_stack([connectivities.row[keep], connectivities.col[keep]]))
    return {
        "pseudotime": adata.obs["dpt_pseudotime"].to_numpy(float),
        "segment": node_segment[adata.obs["leiden"].cat.codes.to_numpy()],
        "n_branch_points": n_branch_points,
        "seconds": seconds,
        "warnings": caught,
        "n_clusters": n_clusters,
    }


def main() -> None:
    sc.settings.verbosity = 0
    main_default(run, __doc__.splitlines()[0], packages=('scanpy', 'leidenalg', 'igraph', 'numpy'), moved=('n_clusters',), paga_threshold=PAGA_THRESHOLD)


if __name__ == "__main__":
    main()
