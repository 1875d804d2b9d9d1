"""Solver core: pure numpy/scipy math on arrays. No AnnData, no plotting, no printing."""
