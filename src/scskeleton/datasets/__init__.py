"""Data with ground truth, generated or shipped inside installed packages."""

from ._branching import branching
from ._bundled import krumsiek11, toggleswitch
from ._expression import branching_expression
from ._shapes import circle, distorted_s, moons, spiral, three_clusters

__all__ = [
    "branching",
    "branching_expression",
    "circle", "distorted_s", "krumsiek11", "moons", "spiral", "three_clusters",
    "toggleswitch",
]
