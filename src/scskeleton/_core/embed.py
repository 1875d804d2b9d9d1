"""Decoding an embedding from a kernel or a Laplacian: KPCA and eigenmaps.

Every learner that ends with a spectral step uses these: DDRTree and SPL take
the top principal directions of a D × D matrix; MPME, SPL (γ = 0), ESL and the
convex embedding take kernel PCA of a learned N × N kernel, for ESL once per
connected component of the learned graph; MPME optionally solves the
generalised eigenproblem of its regularised Laplacian (eq. 16 of the MPME
paper). Signs of eigenvectors are fixed (largest-magnitude entry positive) so
that results do not depend on the LAPACK build.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import linalg


def _fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Flip each column so that its largest-magnitude entry is positive."""
    if vectors.size == 0:
        return vectors
    pivot = np.abs(vectors).argmax(axis=0)
    signs = np.sign(vectors[pivot, np.arange(vectors.shape[1])])
    signs[signs == 0] = 1.0
    return vectors * signs


def top_eigenpairs(matrix: np.ndarray, n_components: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n_components`` largest eigenvalues of a symmetric matrix and their
    eigenvectors (columns), largest first, signs fixed.

    Only the requested eigenpairs are computed (``eigh(subset_by_index=…)``).
    """
    size = matrix.shape[0]
    subset = [size - n_components, size - 1]
    values, vectors = linalg.eigh(matrix, subset_by_index=subset, check_finite=False)
    if values.size < n_components:
        # LAPACK's syevr/syevx can return fewer eigenpairs than requested when
        # the wanted ones are (nearly) degenerate (scipy issue #13913), e.g.
        # the kernel of a graph with isolated points; the full solver cannot.
        values, vectors = linalg.eigh(matrix, check_finite=False, driver="evd")
        values, vectors = values[subset[0]:], vectors[:, subset[0]:]
    return values[::-1].copy(), np.ascontiguousarray(_fix_signs(vectors[:, ::-1]))


def principal_directions(gram: np.ndarray, n_components: int) -> np.ndarray:
    """Top ``n_components`` eigenvectors of a symmetric D × D matrix, largest first.

    The W step of DDRTree (eq. 33) and SPL (Algorithm 1, line 5–6).
    """
    return top_eigenpairs(gram, n_components)[1]


def center_kernel(kernel: np.ndarray) -> np.ndarray:
    """H K H with H = I - 11ᵀ/N: the kernel of the centred feature vectors.

    Formed in O(N²) from row means, without the N × N matrix H.
    """
    row_mean = kernel.mean(axis=1)
    centred = kernel - row_mean[:, None]
    centred -= row_mean[None, :]
    centred += row_mean.mean()
    return centred


@dataclass(frozen=True)
class KernelEmbedding:
    """Result of :func:`kernel_pca`.

    Attributes
    ----------
    coordinates
        N × d embedding, column k = sqrt(λ_k) · v_k.
    eigenvalues
        The d largest eigenvalues λ_k of the centred kernel, descending
        (negative round-off clipped to zero).
    """

    coordinates: np.ndarray
    eigenvalues: np.ndarray


def kernel_pca(kernel: np.ndarray, n_components: int, *, center: bool = True) -> KernelEmbedding:
    """Kernel PCA: the d-dimensional points whose inner products best match the
    (centred) kernel, X = V_d Λ_d^½.

    This is the decoder of the MPME paper (KPCA of (L + λI)⁻¹, eq. 17), of SPL
    for γ = 0, of ESL (eq. 28) and the truncation step of the convex embedding
    framework (X̂ = Q_{1:d} Λ_{1:d}^½). ``n_components`` may exceed N - 1 only
    up to N; the surplus columns are zero.
    """
    n_points = kernel.shape[0]
    if not 1 <= n_components <= n_points:
        raise ValueError(f"n_components must be between 1 and {n_points} (the number of points); got {n_components}.")
    matrix = center_kernel(kernel) if center else kernel
    matrix = (matrix + matrix.T) / 2.0  # remove round-off asymmetry before eigh
    values, vectors = top_eigenpairs(matrix, n_components)
    values = np.maximum(values, 0.0)
    return KernelEmbedding(coordinates=vectors * np.sqrt(values), eigenvalues=values)


def kernel_pca_per_component(
    kernel: np.ndarray, labels: np.ndarray, n_components: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Kernel PCA run separately on each connected component (ESL, §III-D).

    ``labels[i]`` is the component of point i (0 … n-1); each component is
    decoded from its own block of the kernel, centred on its own mean, so
    every component's coordinates are centred at the origin. A component with
    fewer points than ``n_components`` gets ``size - 1`` non-zero columns
    (a single point sits at the origin). Returns the N × d coordinates and the
    eigenvalues per component.
    """
    coordinates = np.zeros((kernel.shape[0], n_components))
    spectra = []
    for component in range(int(labels.max()) + 1):
        members = np.flatnonzero(labels == component)
        usable = min(n_components, members.size)
        block = kernel[np.ix_(members, members)]
        decoded = kernel_pca(block, usable)
        coordinates[np.ix_(members, np.arange(usable))] = decoded.coordinates
        spectra.append(np.concatenate([decoded.eigenvalues, np.zeros(n_components - usable)]))
    return coordinates, spectra


def smallest_generalized_eigenvectors(
    matrix: np.ndarray, metric: np.ndarray, n_components: int, *, skip: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvectors of ``matrix · f = μ · metric · f`` for the smallest μ.

    ``matrix`` is symmetric, ``metric`` symmetric positive definite (a diagonal
    degree matrix in Laplacian eigenmaps and eq. 16 of the MPME paper). The
    first ``skip`` eigenpairs (e.g. the constant vector of a plain Laplacian)
    are dropped. Returns (eigenvalues ascending, N × d vectors normalised to
    Fᵀ·metric·F = I).
    """
    values, vectors = linalg.eigh(
        matrix, metric, subset_by_index=[skip, skip + n_components - 1], check_finite=False
    )
    return values, np.ascontiguousarray(_fix_signs(vectors))
