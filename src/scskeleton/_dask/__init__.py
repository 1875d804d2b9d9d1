"""The chunked path: the same ``_core`` block functions mapped over dask chunks of cells.

Importing this package does not import dask; only the submodules that run a chunked
computation do, so the in-memory path never needs it (``pip install "scskeleton[dask]"``
adds it). Every N-sized quantity is written once as a map over row blocks followed by a
reduction of small K × K, K × D or D × D sums: the in-memory path loops over numpy blocks,
this path maps the same block function over dask chunks and reduces on the driver, and no
N × K matrix that can be recomputed block by block is kept.
"""

from __future__ import annotations


def is_dask(value) -> bool:
    """Whether ``value`` is a dask collection (checked by type, without importing dask)."""
    return type(value).__module__.split(".", 1)[0] == "dask"


def require_dask(what: str):
    """Import ``dask.array``, or raise an ImportError saying how to install the extra."""
    try:
        import dask.array as da
    except ImportError as err:  # pragma: no cover - exercised only without the extra
        raise ImportError(
            f"{what} got a dask array, which needs dask: pip install 'scskeleton[dask]'."
        ) from err
    return da
