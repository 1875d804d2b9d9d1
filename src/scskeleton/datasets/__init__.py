"""Data with ground truth, generated or shipped inside installed packages."""

from ._branching import branching
from ._bundled import krumsiek11, toggleswitch

__all__ = ["branching", "krumsiek11", "toggleswitch"]
