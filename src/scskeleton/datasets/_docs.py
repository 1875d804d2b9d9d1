"""Docstring paragraphs that several generators share, written once (see :func:`dataset_doc`)."""

from __future__ import annotations

from collections.abc import Callable

from .._anndata.docs import fill_doc

#: The paragraphs by placeholder name, without indentation (``_anndata.docs`` indents them).
PARAGRAPHS = {
    # generators that store their parameters, the seed among them, in uns
    "random_state_stored": """\
random_state
    Seed: ``None`` (a fresh seed), an int, or a ``numpy.random.Generator``
    (one seed drawn from it). The integer seed used is stored with the
    generating parameters in ``uns``, so passing it back reproduces the data.""",
    # the point clouds (shapes, manifolds, structures)
    "random_state_points": """\
random_state
    Seed: ``None`` (a fresh seed), an int, or a ``numpy.random.Generator``.
    Default 0, so that the same call gives the same points.""",
    # the start of the Returns section of every 2-D shape
    "returns_shape": """\
AnnData of ``n_cells`` × 2 (features ``"x"``, ``"y"``), the points in ``X``
(float32) and in ``obsm["X_pca"]`` (float64, so the learners run on them with their
default ``use_rep``),""",
    # the noise of both manifolds, and the start of their Returns section
    "noise_manifold": """\
noise
    Standard deviation of isotropic Gaussian noise. Default 0: the exact
    manifold.""",
    "returns_manifold": """\
AnnData of ``n_cells`` × 3 (features ``"x"``, ``"y"``, ``"z"``), the points
in ``X`` (float32) and ``obsm["X_pca"]`` (float64), the unrolled
coordinates (``true_u``, ``true_v``) in ``obsm["X_true"]``,""",
}


def dataset_doc(function: Callable) -> Callable:
    """Fill the placeholders of ``function.__doc__`` with :data:`PARAGRAPHS`; a decorator."""
    return fill_doc(function, **PARAGRAPHS)
