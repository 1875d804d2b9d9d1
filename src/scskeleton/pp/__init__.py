"""Preprocessing: prepare counts for the tools (``adata`` in, ``adata`` out)."""

from ._split_counts import split_counts

__all__ = ["split_counts"]
