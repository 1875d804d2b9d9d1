"""Shared decoders: top eigenpairs, kernel PCA (whole and per component), eigenmaps."""

import numpy as np
import pytest
from scipy import linalg

from scskeleton._core.embed import (
    center_kernel,
    kernel_pca,
    kernel_pca_per_component,
    smallest_generalized_eigenvectors,
    top_eigenpairs,
)


def test_top_eigenpairs_are_the_largest_with_fixed_signs(monkeypatch):
    from scskeleton._core import embed

    rng = np.random.default_rng(0)
    A = rng.normal(size=(8, 8))
    A = A + A.T
    values, vectors = top_eigenpairs(A, 3)
    full = np.linalg.eigvalsh(A)[::-1][:3]
    np.testing.assert_allclose(values, full)
    np.testing.assert_allclose(A @ vectors, vectors * values, atol=1e-10)
    assert (vectors[np.abs(vectors).argmax(0), range(3)] > 0).all()
    # the signs do not depend on the ones the eigensolver happens to return (LAPACK's choice
    # differs between builds and thread counts): a solver returning every vector negated, or
    # only some, gives the same result
    real_eigh = linalg.eigh
    for flip in ([-1.0, -1.0, -1.0], [1.0, -1.0, 1.0]):
        def flipped_eigh(*args, flip=np.array(flip), **kwargs):
            found, basis = real_eigh(*args, **kwargs)
            return found, basis * np.resize(flip, basis.shape[1])

        monkeypatch.setattr(embed.linalg, "eigh", flipped_eigh)
        np.testing.assert_allclose(top_eigenpairs(A, 3)[1], vectors, atol=1e-12)
        monkeypatch.setattr(embed.linalg, "eigh", real_eigh)


def test_center_kernel_equals_hkh():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(10, 3))
    K = X @ X.T + 1.0
    H = np.eye(10) - np.ones((10, 10)) / 10
    np.testing.assert_allclose(center_kernel(K), H @ K @ H, atol=1e-12)


def test_kernel_pca_of_a_linear_kernel_recovers_the_points_up_to_rotation():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2)) * [3.0, 1.0] + 5.0
    embedding = kernel_pca(X @ X.T, 2)
    centred = X - X.mean(0)
    # same Gram matrix of the centred points means same points up to an orthogonal map
    np.testing.assert_allclose(embedding.coordinates @ embedding.coordinates.T, centred @ centred.T, atol=1e-9)
    np.testing.assert_allclose(embedding.eigenvalues, np.linalg.eigvalsh(centred.T @ centred)[::-1], rtol=1e-10)


def test_kernel_pca_per_component_centres_each_component():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(15, 2)), rng.normal(size=(6, 2)) + 100.0
    labels = np.array([0] * 15 + [1] * 6)
    kernel = linalg.block_diag(A @ A.T, B @ B.T)
    coordinates, spectra = kernel_pca_per_component(kernel, labels, 2)
    for members, points in ((labels == 0, A), (labels == 1, B)):
        centred = points - points.mean(0)
        np.testing.assert_allclose(coordinates[members].mean(0), 0.0, atol=1e-10)
        np.testing.assert_allclose(coordinates[members] @ coordinates[members].T, centred @ centred.T, atol=1e-9)
    assert len(spectra) == 2 and all(s.shape == (2,) for s in spectra)


def test_singleton_component_sits_at_the_origin():
    kernel = np.diag([1.0, 1.0, 2.0])
    kernel[0, 1] = kernel[1, 0] = 0.5
    coordinates, _ = kernel_pca_per_component(kernel, np.array([0, 0, 1]), 2)
    np.testing.assert_array_equal(coordinates[2], 0.0)


def test_kernel_pca_rejects_too_many_components():
    with pytest.raises(ValueError, match="n_components"):
        kernel_pca(np.eye(3), 4)


def test_generalized_eigenvectors_solve_the_pencil():
    rng = np.random.default_rng(4)
    W = rng.uniform(size=(9, 9))
    W = np.triu(W, 1) + np.triu(W, 1).T
    degree = np.diag(W.sum(1) + 0.5)
    matrix = degree - W
    values, vectors = smallest_generalized_eigenvectors(matrix, degree, 2)
    np.testing.assert_allclose(matrix @ vectors, degree @ vectors * values, atol=1e-10)
    np.testing.assert_allclose(vectors.T @ degree @ vectors, np.eye(2), atol=1e-10)
    assert values[0] <= values[1]
    skipped, _ = smallest_generalized_eigenvectors(matrix, degree, 1, skip=1)
    assert skipped[0] == pytest.approx(values[1])
