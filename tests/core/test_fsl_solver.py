"""FSL core: exact projections (simplex rows, Proposition 5), objective (34), gradients, monotone solver."""

import itertools

import numpy as np
import pytest
from scipy import optimize

from scskeleton._core.cellgraphs import fsl as core
from scskeleton._core.projections import project_rows_to_simplex, project_to_capped_simplex
from scskeleton._testing import central_differences


def _brute_capped_simplex(values, total):
    """Closest point of {Σθ = total, 0 ≤ θ ≤ 1} among every split of the coordinates into
    (at 0, free, at 1) — the projection is one of them (KKT of problem 35)."""
    best, best_distance = None, np.inf
    for split in itertools.product(range(3), repeat=values.size):
        split = np.asarray(split)
        ones, free = split == 2, split == 1
        if free.any():
            tau = (values[free].sum() + ones.sum() - total) / free.sum()
            candidate = np.where(ones, 1.0, np.where(free, values - tau, 0.0))
        else:
            candidate = ones.astype(float)
        if abs(candidate.sum() - total) > 1e-9 or candidate.min() < -1e-12 or candidate.max() > 1 + 1e-12:
            continue
        gap = np.sum((candidate - values) ** 2)
        if gap < best_distance:
            best, best_distance = candidate, gap
    return best


def _brute_simplex(values, total):
    """Closest point of {Σw = total, w ≥ 0} among every support set."""
    best, best_distance = None, np.inf
    for size in range(1, values.size + 1):
        for support in itertools.combinations(range(values.size), size):
            support = list(support)
            candidate = np.zeros_like(values)
            candidate[support] = values[support] - (values[support].sum() - total) / size
            if candidate.min() < -1e-12:
                continue
            gap = np.sum((candidate - values) ** 2)
            if gap < best_distance:
                best, best_distance = candidate, gap
    return best


def test_capped_simplex_projection_is_exact():
    rng = np.random.default_rng(0)
    for _ in range(150):
        size = int(rng.integers(1, 7))
        values = rng.normal(size=size) * rng.choice([0.05, 1.0, 10.0])
        total = rng.uniform(0.0, size)
        projected = project_to_capped_simplex(values, total)
        np.testing.assert_allclose(projected, _brute_capped_simplex(values, total), atol=1e-12)
        assert projected.sum() == pytest.approx(total, abs=1e-12)
    # an independent QP solver on a larger instance
    values = rng.normal(size=25)
    qp = optimize.minimize(lambda t: 0.5 * np.sum((t - values) ** 2), np.full(25, 3 / 25), jac=lambda t: t - values,
                           bounds=[(0, 1)] * 25, constraints=[{"type": "eq", "fun": lambda t: t.sum() - 3}],
                           method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
    np.testing.assert_allclose(project_to_capped_simplex(values, 3.0), qp.x, atol=1e-7)


def test_capped_simplex_edge_cases():
    np.testing.assert_allclose(project_to_capped_simplex(np.array([5.0, -3.0, 0.2]), 3.0), [1, 1, 1])
    np.testing.assert_allclose(project_to_capped_simplex(np.array([0.3, 0.1]), 0.0), [0, 0])
    np.testing.assert_allclose(project_to_capped_simplex(np.array([2.0, 2.0, 0.0]), 1.0), [0.5, 0.5, 0])
    inside = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(project_to_capped_simplex(inside, 1.0), inside, atol=1e-15)


def test_row_simplex_projection_is_exact():
    rng = np.random.default_rng(1)
    for _ in range(60):
        values = rng.normal(size=(5, int(rng.integers(1, 7)))) * rng.choice([0.1, 1.0, 20.0])
        total = rng.uniform(0.1, 4.0)
        projected = project_rows_to_simplex(values, total)
        for row, expected in zip(projected, values):
            np.testing.assert_allclose(row, _brute_simplex(expected, total), atol=1e-12)
        np.testing.assert_allclose(projected.sum(axis=1), total, atol=1e-12)


def _problem(seed=0, n=7, m=5):
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(n, m))
    weights = rng.uniform(0.0, 1.0, (n, n))
    theta = rng.uniform(0.05, 0.9, m)
    return features, weights, theta


def _direct_objective(features, weights, theta, gamma):
    """g(W, θ) of (34) term by term: M log-determinants and the double sum of w_ij ψ_ij."""
    n = weights.shape[0]
    symmetric = (weights + weights.T) / 2
    laplacian = np.diag(symmetric.sum(1)) - symmetric
    logdets = sum(np.linalg.slogdet(gamma * np.eye(n) + 4 * t * laplacian)[1] for t in theta)
    psi = sum(t * (features[:, r][:, None] - features[:, r][None, :]) ** 2 for r, t in enumerate(theta))
    return -0.5 * logdets + np.sum(weights * psi)


def test_objective_matches_eq_34_with_one_eigendecomposition():
    features, weights, theta = _problem()
    theta[1] = 0.0  # an unselected feature contributes N log γ
    assert core.objective(features, weights, theta, 2.5) == pytest.approx(
        _direct_objective(features, weights, theta, 2.5), rel=1e-12)


def test_gradients_match_finite_differences():
    features, weights, theta = _problem(1)
    gamma = 3.0
    grad_weights, grad_theta = core.gradients(features, weights, theta, gamma)
    numeric = central_differences(lambda w: _direct_objective(features, w, theta, gamma), weights)
    np.testing.assert_allclose(grad_weights, numeric, rtol=1e-6, atol=1e-7)
    assert np.all(np.diagonal(grad_weights) == 0)  # self-loops move neither L_W nor ψ
    numeric_theta = central_differences(lambda t: _direct_objective(features, weights, t, gamma), theta)
    np.testing.assert_allclose(grad_theta, numeric_theta, rtol=1e-6, atol=1e-7)


def _moons_and_noise(n_noise=60, seed=0):
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, np.pi, 120)
    half = np.arange(120) % 2
    moons = np.where(half[:, None] == 0, np.column_stack([np.cos(angle), np.sin(angle)]),
                     np.column_stack([1 - np.cos(angle), 0.5 - np.sin(angle)]))
    moons = 0.2 * (moons + 0.03 * rng.normal(size=moons.shape))
    return np.hstack([moons, rng.uniform(0, 1, (120, n_noise))])


def test_solver_decreases_the_objective_and_stays_feasible():
    features = _moons_and_noise()
    result = core.fsl(features, b=1.0, lam=10.0, gamma=100.0)
    assert np.all(np.diff(result.objective) <= 0)  # Armijo: g never increases
    assert result.objective[-1] < result.objective[0]
    assert result.converged
    assert result.theta.sum() == pytest.approx(1.0) and result.theta.min() >= 0 and result.theta.max() <= 1
    np.testing.assert_allclose(result.weights.sum(axis=1), 10.0)
    assert result.weights.min() >= 0
    # the trace ends at g of the returned (W, θ)
    assert result.objective[-1] == pytest.approx(core.objective(features, result.weights, result.theta, 100.0),
                                                 rel=1e-10)
    # θ is stationary on Θ: the weighted features share one gradient, the others are not below it
    _, grad_theta = core.gradients(features, result.weights, result.theta, 100.0)
    free = (result.theta > 1e-9) & (result.theta < 1 - 1e-9)
    level = grad_theta[free].mean()
    np.testing.assert_allclose(grad_theta[free], level, rtol=1e-2)
    assert np.all(grad_theta[result.theta == 0] > level)
    np.testing.assert_array_equal(np.argsort(-result.theta)[:2], [0, 1])
    assert result.coordinates.shape == (120, 2) and result.adjacency.shape == (120, 120)
    assert (result.adjacency != result.adjacency.T).nnz == 0 and result.adjacency.diagonal().sum() == 0


def test_collapsed_graph_and_bad_parameters_are_reported():
    features = _moons_and_noise(300)
    features[:, :2] *= 5.0  # moons spread wider than the noise: W empties before θ concentrates
    with pytest.raises(ValueError, match="kept no edge.*Raise b, lower gamma"):
        core.fsl(features, b=1.0, gamma=100.0)
    features = _moons_and_noise(20)
    with pytest.raises(ValueError, match="cannot exceed the number of features"):
        core.fsl(features, b=23.0)
    for name, value in (("lam", 0.0), ("gamma", -1.0), ("b", 0.0)):
        with pytest.raises(ValueError, match=f"{name} must be > 0"):
            core.fsl(features, **{"b": 1.0, name: value})
    features[0, 0] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        core.fsl(features, b=1.0)
