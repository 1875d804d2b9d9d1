"""Shared log-det core: value and gradient of log det(shift·I + scale·L(w)), box solver."""

import numpy as np
import pytest

from scskeleton._testing import central_differences
from scskeleton._core.graphs import knn_edges
from scskeleton._core.cellgraphs.logdet import (
    all_pairs,
    candidate_edges,
    check_dense_size,
    edge_squared_distances,
    laplacian_logdet,
    minimize_box,
    regularized_laplacian,
)


def _problem(seed=0, n=12):
    rng = np.random.default_rng(seed)
    points = rng.normal(size=(n, 3))
    edges = knn_edges(points, 4)
    weights = rng.uniform(0.0, 2.0, size=edges.shape[0])
    return points, edges, weights


@pytest.mark.parametrize("shift, scale", [(0.5, 1.0), (1.0, 4.0), (2.75, 0.3)])
def test_value_and_gradient_match_dense_algebra_and_finite_differences(shift, scale):
    _, edges, weights = _problem()
    n = 12
    result = laplacian_logdet(edges, weights, n, shift=shift, scale=scale)
    dense = regularized_laplacian(edges, weights, n, shift=shift, scale=scale)
    W = np.zeros((n, n))
    W[edges[:, 0], edges[:, 1]] = weights
    W += W.T
    np.testing.assert_allclose(dense, shift * np.eye(n) + scale * (np.diag(W.sum(1)) - W), atol=1e-14)
    assert result.value == pytest.approx(np.linalg.slogdet(dense)[1], rel=1e-12)
    np.testing.assert_allclose(result.inverse, np.linalg.inv(dense), atol=1e-12)

    numeric = central_differences(lambda w: laplacian_logdet(edges, w, n, shift=shift, scale=scale).value, weights)
    np.testing.assert_allclose(result.edge_gradient, numeric, rtol=1e-5, atol=1e-9)


def test_factor_solves_the_system():
    from scipy import linalg

    _, edges, weights = _problem(1)
    result = laplacian_logdet(edges, weights, 12, shift=0.3)
    rhs = np.arange(24.0).reshape(12, 2)
    dense = regularized_laplacian(edges, weights, 12, shift=0.3)
    np.testing.assert_allclose(dense @ linalg.cho_solve(result.factor, rhs), rhs, atol=1e-10)


def test_negative_weights_are_reported():
    _, edges, weights = _problem(2)
    with pytest.raises(ValueError, match="positive definite"):
        laplacian_logdet(edges, -10 * weights, 12, shift=0.1)


def test_candidate_edges():
    points = np.random.default_rng(0).normal(size=(30, 2))
    pairs = all_pairs(30)
    assert pairs.shape == (435, 2) and (pairs[:, 0] < pairs[:, 1]).all()
    np.testing.assert_array_equal(candidate_edges(points, None), pairs)
    np.testing.assert_array_equal(candidate_edges(points, 5), knn_edges(points, 5))
    d2 = edge_squared_distances(points, pairs)
    np.testing.assert_allclose(d2, ((points[pairs[:, 0]] - points[pairs[:, 1]]) ** 2).sum(1))


def test_minimize_box_reaches_the_constrained_minimum_monotonically():
    target = np.array([-1.0, 0.5, 3.0, 10.0])

    def value_and_gradient(w):
        return float(np.sum((w - target) ** 2)), 2 * (w - target)

    result = minimize_box(value_and_gradient, np.zeros(4), upper=2.0, maxiter=100, tol=1e-14)
    np.testing.assert_allclose(result.weights, [0.0, 0.5, 2.0, 2.0], atol=1e-8)
    assert result.converged and np.all(np.diff(result.objective) <= 1e-12)
    unbounded = minimize_box(value_and_gradient, np.zeros(4), upper=np.inf, maxiter=100, tol=1e-14)
    np.testing.assert_allclose(unbounded.weights, [0.0, 0.5, 3.0, 10.0], atol=1e-8)


def test_dense_size_limit_names_alternatives():
    check_dense_size(100, "MPME", limit=100)
    with pytest.raises(ValueError, match="subsample"):
        check_dense_size(101, "MPME", limit=100)
