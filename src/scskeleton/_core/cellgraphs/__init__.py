"""Graphs over the cells themselves: log-det Laplacian learners (MPME, SPL, ESL, FSL) and their affinities."""
