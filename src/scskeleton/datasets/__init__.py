"""Data with ground truth, generated or shipped inside installed packages.

Every generator takes ``random_state`` as the tools do: ``None`` (a fresh
seed), a non-negative int, or a ``numpy.random.Generator`` (one seed drawn
from it); the same int gives the same data. Generators that store their
parameters in ``uns`` store the integer seed used, which survives
``write_h5ad``.
"""

from ._branching import branching
from ._bundled import krumsiek11, toggleswitch
from ._cell_cycle import cell_cycle
from ._dla import dla_tree
from ._expression import branching_expression
from ._manifolds import sine_surface, swiss_roll
from ._shapes import circle, distorted_s, moons, spiral, three_clusters, toy_tree
from ._simulate import simulate_trajectory
from ._structures import blobs, line_and_circle, noisy_moons

__all__ = [
    "blobs",
    "branching",
    "branching_expression",
    "cell_cycle",
    "circle",
    "distorted_s",
    "dla_tree",
    "krumsiek11",
    "line_and_circle",
    "moons",
    "noisy_moons",
    "simulate_trajectory",
    "sine_surface",
    "spiral",
    "swiss_roll",
    "three_clusters",
    "toggleswitch",
    "toy_tree",
]
