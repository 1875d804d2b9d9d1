import numpy as np
import pytest
from scipy import sparse

from scskeleton._core.trees.assign import kmeans, soft_assignment, squared_distances


def _direct(points, centers, sigma):
    d2 = ((points[:, None, :] - centers[None]) ** 2).sum(-1)
    # the row minimum cancels in the ratio; without it exp underflows to 0/0 for small sigma
    w = np.exp(-(d2 - d2.min(1, keepdims=True)) / sigma)
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


@pytest.mark.parametrize("sigma", [1.0, 1e-3])  # the dense and the sparse (CSR) R
def test_column_mass_is_gamma_diagonal(sigma):
    rng = np.random.default_rng(2)
    points, centers = rng.normal(size=(50, 2)), rng.normal(size=(12, 2))
    result = soft_assignment(points, centers, sigma=sigma, chunk_rows=16)
    assert sparse.issparse(result.matrix) == (sigma < 0.1)
    # Γ_kk = Σ_i r_ik, center by center, against eq. (32) written out: the total (N, as rows sum
    # to one) would not notice masses given to the wrong centers
    expected = _direct(points, centers, sigma).sum(axis=0)
    assert result.column_mass.shape == (12,)
    np.testing.assert_allclose(result.column_mass, expected, rtol=1e-9, atol=1e-8)  # R drops weights < 1e-12
    assert np.ptp(expected) > 1.0  # the centers hold clearly different masses here


def test_kmeans_is_deterministic_and_sensible():
    rng = np.random.default_rng(3)
    blobs = np.concatenate([rng.normal(loc=c, scale=0.1, size=(100, 2)) for c in ([0, 0], [5, 5], [0, 5])])
    first = kmeans(blobs, 3, random_state=7)
    second = kmeans(blobs, 3, random_state=7)
    np.testing.assert_array_equal(first, second)
    found = sorted(map(tuple, np.round(first)))
    assert found == [(0.0, 0.0), (0.0, 5.0), (5.0, 5.0)]
