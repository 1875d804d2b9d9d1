"""Plots of stored graphs and trajectories (``sks.pl``).

Every plot reads only the AnnData schema written by ``sks.tl`` (listed in the
API reference), never refits anything, and follows ``scanpy.pl``:
``ax=`` draws into given axes, ``show=None`` shows only when matplotlib is
interactive, ``save=`` writes the figure to a path, and the return value is the
Figure when ``return_fig=True``, else the Axes when ``show=False``, else ``None``.
"""

from ._activation import activation
from ._cell_graph import cell_graph
from ._conditions import condition_curves, condition_fates, condition_progression
from ._dendrogram import dendrogram
from ._fates import fates
from ._graph import adjacency, convergence
from ._modules import module_heatmap, modules
from ._pseudotime import pseudotime
from ._tree import tree
from ._trends import branch_heatmap, path, trends

__all__ = [
    "activation",
    "adjacency",
    "branch_heatmap",
    "cell_graph",
    "condition_curves",
    "condition_fates",
    "condition_progression",
    "convergence",
    "dendrogram",
    "fates",
    "module_heatmap",
    "modules",
    "path",
    "pseudotime",
    "tree",
    "trends",
]
