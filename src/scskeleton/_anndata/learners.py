"""The one registry of learners: what the schema, the plots, the CLI and ``tl.project`` know of each.

Kept free of heavy imports, so that the command line reads it before it loads scanpy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Learner:
    """One learner, as the rest of the package needs to know it."""

    #: How plots name it in titles, legends and axis labels.
    title: str
    #: What its nodes are: ``"latent"`` (nodes in a learned embedding, ``tl.ddrtree``), ``"space"``
    #: (nodes in the space of ``use_rep``, ``tl.rpg``) or ``"cells"`` (a cell graph or embedding; on
    #: landmarks a node graph in ``use_rep``). ``tl.project`` places new cells by it.
    nodes: str
    #: Fits a dask array chunk by chunk.
    chunked: bool = False
    #: The ``scskeleton fit --method`` help line; ``None``: the command does not offer it.
    command: str | None = None


#: Every learner by ``uns[key]["method"]`` (also its default key and its function's name in ``sks.tl``): an entry carrying one of them is a
#: fitted skeleton, the ``key`` that trajectory tools and plots take. Gene-level results (``"trends"``,
#: ``"branch_test"``, …) are not. The one list of learners: the CLI, the plots and ``tl.project`` read it.
LEARNERS = {
    "ddrtree": Learner("DDRTree", "latent", chunked=True,
                       command="principal tree with a learned low-dimensional embedding (DDRTree; the default)"),
    "rpg": Learner("principal tree (RPG)", "space", chunked=True,
                   command="principal tree in the space of --use-rep (regularized principal graph)"),
    "rpg_l1": Learner("ℓ1 principal graph", "space", chunked=True,
                      command="principal graph that may hold loops and several components (weighted l1 graph)"),
    "mpme": Learner("MPME", "cells", command="cell graph and embedding by a log-det program (MPME; dense: "
                    "landmarks above 5,000 cells)"),
    "spl": Learner("SPL", "cells", command="cell graph, projection and embedding (SPL; dense: landmarks above "
                   "5,000 cells)"),
    "esl": Learner("ESL", "cells", command="cell graph and embedding of each component (ESL; dense: landmarks "
                   "above 5,000 cells)"),
    "fsl": Learner("FSL", "cells"),
    "convex_embedding": Learner("convex embedding", "cells"),
}
LEARNER_METHODS = tuple(LEARNERS)
