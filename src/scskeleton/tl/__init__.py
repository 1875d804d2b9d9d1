"""Tools: fit skeletons and extract trajectories (``adata`` in, ``adata`` out)."""

from ._activation import activation
from ._convex_embedding import convex_embedding
from ._ddrtree import ddrtree
from ._esl import esl
from ._fates import fate_probabilities
from ._fork_test import fork_test
from ._fsl import fsl
from ._milestones import milestones, rename_milestones
from ._modules import trend_modules
from ._mpme import mpme
from ._phase import phase
from ._project import project
from ._rpg import rpg, rpg_l1
from ._spl import spl
from ._subset import cleanup, subset_tree
from ._support import branch_support
from ._trajectory import path, pseudotime, root
from ._trends import association_test, branch_test, trends

__all__ = [
    "activation",
    "association_test",
    "branch_support",
    "branch_test",
    "cleanup",
    "convex_embedding",
    "ddrtree",
    "esl",
    "fate_probabilities",
    "fork_test",
    "fsl",
    "milestones",
    "mpme",
    "path",
    "phase",
    "project",
    "pseudotime",
    "rename_milestones",
    "root",
    "rpg",
    "rpg_l1",
    "spl",
    "subset_tree",
    "trend_modules",
    "trends",
]
