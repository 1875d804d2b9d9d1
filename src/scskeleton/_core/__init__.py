"""Solver core: pure numpy/scipy math on arrays. No AnnData, no plotting, no printing.

One sub-package per family, so the folders show the architecture:

``trees``       principal trees and graphs over node sets (DDRTree, RPG), soft assignment,
                projection of cells onto edges, pseudotime, pruning, gaps, bootstrap support
``cellgraphs``  graphs learned over the cells themselves (MPME, SPL, ESL, FSL) and their
                log-det Laplacian machinery
``convex``      convex embedding: losses, regularizers, the regularized kernel solver
``stats``       gene statistics along a trajectory: penalised splines and their tests

Pieces every family uses sit at this level: ``validation`` (argument checks), ``graphs``
(MST, kNN edges, Laplacians), ``embed`` (KPCA and eigen decoders) and ``projections``
(projections onto simplices).
"""
