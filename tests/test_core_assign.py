import numpy as np
import pytest
from scipy import sparse

from scskeleton._core.trees.assign import kmeans, soft_assignment, squared_distances


def _direct(points, centers, sigma):
    d2 = ((points[:, None, :] - centers[None]) ** 2).sum(-1)
    w = np.exp(-d2 / sigma)
    return w / w.sum(1, keepdims=True)


def test_rows_sum_to_one_and_match_eq32():
    rng = np.random.default_rng(0)
    points, centers = rng.normal(size=(300, 3)), rng.normal(size=(12, 3))
    result = soft_assignment(points, centers, sigma=2.0, chunk_rows=64)
    matrix = result.matrix.toarray() if sparse.issparse(result.matrix) else result.matrix
    np.testing.assert_allclose(matrix.sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(matrix, _direct(points, centers, 2.0), atol=1e-11)
    expected = np.sum(matrix[matrix > 0] * np.log(matrix[matrix > 0]))
    assert result.neg_entropy == pytest.approx(expected, rel=1e-9)


def test_tiny_sigma_gives_hard_assignment_without_nan():
    rng = np.random.default_rng(1)
    points, centers = rng.normal(size=(200, 2)) * 100, rng.normal(size=(5, 2)) * 100
    result = soft_assignment(points, centers, sigma=1e-9)
    matrix = result.matrix.toarray() if sparse.issparse(result.matrix) else result.matrix
    assert np.isfinite(matrix).all()
    np.testing.assert_array_equal(matrix.argmax(1), squared_distances(points, centers).argmin(1))
    np.testing.assert_allclose(matrix.max(1), 1.0)
    assert sparse.issparse(result.matrix)  # almost all entries are exactly zero


def test_column_mass_is_gamma_diagonal():
    rng = np.random.default_rng(2)
    result = soft_assignment(rng.normal(size=(50, 2)), rng.normal(size=(4, 2)), sigma=1.0)
    assert result.column_mass.shape == (4,)
    assert result.column_mass.sum() == pytest.approx(50.0)


def test_kmeans_is_deterministic_and_sensible():
    rng = np.random.default_rng(3)
    blobs = np.concatenate([rng.normal(loc=c, scale=0.1, size=(100, 2)) for c in ([0, 0], [5, 5], [0, 5])])
    first = kmeans(blobs, 3, random_state=7)
    second = kmeans(blobs, 3, random_state=7)
    np.testing.assert_array_equal(first, second)
    found = sorted(map(tuple, np.round(first)))
    assert found == [(0.0, 0.0), (0.0, 5.0), (5.0, 5.0)]
