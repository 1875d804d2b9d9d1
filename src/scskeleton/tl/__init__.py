"""Tools: fit skeletons and extract trajectories (``adata`` in, ``adata`` out)."""

from .conditions.fates import condition_fates
from .conditions.progression import condition_progression
from .conditions.topology import condition_topology
from .conditions.trends import condition_test
from .genes.activation import activation
from .genes.association_test import association_test
from .genes.branch_test import branch_test
from .genes.fork_test import fork_test
from .genes.modules import trend_modules
from .genes.trends import trends
from .learners.convex_embedding import convex_embedding
from .learners.ddrtree import ddrtree
from .learners.esl import esl
from .learners.fsl import fsl
from .learners.mpme import mpme
from .learners.rpg import rpg, rpg_l1
from .learners.spl import spl
from .trajectory.fates import fate_probabilities
from .trajectory.milestones import milestones, rename_milestones
from .trajectory.paths import path
from .trajectory.phase import phase
from .trajectory.project import project
from .trajectory.pseudotime import pseudotime
from .trajectory.root import root
from .trajectory.subsets import cleanup, subset_tree
from .trajectory.support import branch_support

__all__ = [
    "activation",
    "association_test",
    "branch_support",
    "branch_test",
    "cleanup",
    "condition_fates",
    "condition_progression",
    "condition_test",
    "condition_topology",
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
