"""scskeleton: learn the smooth skeleton of single-cell data.

``import scskeleton as sks``; ``sks.tl`` fits graphs and extracts trajectories,
``sks.pl`` plots them, ``sks.pp`` prepares counts for them, ``sks.datasets`` provides data
with ground truth.
"""

from importlib import import_module
from typing import TYPE_CHECKING

from ._version import __version__

__all__ = ["datasets", "pl", "pp", "tl", "__version__"]

if TYPE_CHECKING:
    from . import datasets, pl, pp, tl
else:
    # The subpackages import scanpy, which takes seconds; loading them on first use keeps
    # `scskeleton --help` (the console script imports this package first) instant.
    def __getattr__(name: str):
        if name in ("datasets", "pl", "pp", "tl"):
            return import_module(f".{name}", __name__)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(__all__))
