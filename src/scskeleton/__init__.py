"""scskeleton: learn the smooth skeleton of single-cell data.

``import scskeleton as sks``; ``sks.tl`` fits graphs and extracts trajectories,
``sks.pl`` plots them, ``sks.datasets`` provides data with ground truth.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scskeleton")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"

from . import datasets, pl, tl

__all__ = ["datasets", "pl", "tl", "__version__"]
