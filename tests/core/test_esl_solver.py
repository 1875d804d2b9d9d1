"""ESL core: perplexity calibration (eq. 1), objective (22)/gradient (23), λ^u (26), decoding (§III-D)."""

import numpy as np
import pytest
from scipy.spatial import distance

from scskeleton._core.cellgraphs import esl as core
from scskeleton._testing import central_differences
from scskeleton._core.cellgraphs.affinities import calibrate_bandwidths, symmetric_edge_affinities
from scskeleton._core.graphs import from_edges, knn_edges, neighbour_table
from scskeleton._core.cellgraphs.logdet import MAX_DENSE_POINTS, all_pairs, regularized_laplacian
from scskeleton.datasets import line_and_circle


def _entropy(rows):
    safe = np.where(rows > 0, rows, 1.0)
    return -(rows * np.log(safe)).sum(axis=1)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e4])
def test_bandwidths_reach_the_perplexity_and_follow_eq_1(scale):
    points = scale * np.random.default_rng(0).normal(size=(120, 5))
    sqdist = distance.cdist(points, points, "sqeuclidean")
    np.fill_diagonal(sqdist, np.inf)
    result = calibrate_bandwidths(sqdist, 12.0)
    np.testing.assert_allclose(np.exp(_entropy(result.probabilities)), 12.0, rtol=1e-4)
    # eq. (1) written out with the returned σ_i
    kernel = np.exp(-sqdist / (2.0 * result.bandwidths[:, None] ** 2))
    np.testing.assert_allclose(result.probabilities, kernel / kernel.sum(axis=1, keepdims=True), atol=1e-12)
    assert np.all(np.diagonal(result.probabilities) == 0)
    # bandwidths carry the data's units
    assert np.median(result.bandwidths) == pytest.approx(scale * np.median(
        calibrate_bandwidths(sqdist / scale**2, 12.0).bandwidths), rel=1e-6)


def test_candidate_affinities_are_normalised_over_each_cells_neighbours():
    points = np.random.default_rng(1).normal(size=(80, 3))
    edges = knn_edges(points, 15)
    table = neighbour_table(from_edges(edges, np.ones(len(edges)), 80))
    for i in (0, 17, 79):
        expected = np.sort(np.concatenate([edges[edges[:, 0] == i, 1], edges[edges[:, 1] == i, 0]]))
        np.testing.assert_array_equal(table[i][table[i] >= 0], expected)
    sparse_result = symmetric_edge_affinities(points, edges, 5.0, all_pairs=False)
    # the same calibration by hand: eq. (1) over the candidates of each point only
    sqdist = np.full((80, 80), np.inf)
    sqdist[edges[:, 0], edges[:, 1]] = sqdist[edges[:, 1], edges[:, 0]] = (
        (points[edges[:, 0]] - points[edges[:, 1]]) ** 2).sum(1)
    dense = calibrate_bandwidths(sqdist, 5.0).probabilities
    expected = (dense[edges[:, 0], edges[:, 1]] + dense[edges[:, 1], edges[:, 0]]) / 2
    np.testing.assert_allclose(sparse_result.symmetric, expected, atol=1e-12)

    pairs = all_pairs(80)
    full = symmetric_edge_affinities(points, pairs, 5.0, all_pairs=True).symmetric
    assert full.sum() == pytest.approx(40.0)  # Σ_{i<j} (p_j|i + p_i|j) / 2 = ½ Σ_i Σ_j p_j|i = N / 2


def test_objective_and_gradient_match_eq_22_and_finite_differences():
    rng = np.random.default_rng(2)
    n, m, lam = 9, 3, 1.7
    edges = all_pairs(n)
    cost = rng.uniform(0.4, 1.0, edges.shape[0])
    weights = rng.uniform(0.0, 0.5, edges.shape[0])
    value, gradient = core.objective(weights, edges, n, cost=cost, lam=lam, n_components=m)

    W = np.zeros((n, n))
    W[edges[:, 0], edges[:, 1]] = weights
    W += W.T
    P = np.zeros((n, n))
    P[edges[:, 0], edges[:, 1]] = cost
    P += P.T
    Q = np.eye(n) + 4 * (np.diag(W.sum(1)) - W)
    # eq. (22) with the sum over ordered pairs i ≠ j
    assert value == pytest.approx(-m / 2 * np.linalg.slogdet(Q)[1] + lam * (W * P).sum(), rel=1e-12)

    numeric = central_differences(lambda w: core.objective(w, edges, n, cost=cost, lam=lam, n_components=m)[0], weights)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-6, atol=1e-8)
    # eq. (23) in undirected form: 2λ(1 - p̄) - 2m(Q⁻¹_ii + Q⁻¹_jj - 2Q⁻¹_ij)
    inverse = np.linalg.inv(Q)
    i, j = edges.T
    resistance = inverse[i, i] + inverse[j, j] - 2 * inverse[i, j]
    np.testing.assert_allclose(gradient, 2 * lam * cost - 2 * m * resistance, rtol=1e-10)


def test_upper_lambda_separates_trivial_from_nontrivial_starts():
    rng = np.random.default_rng(3)
    n, m = 12, 2
    edges = all_pairs(n)
    cost = rng.uniform(0.3, 1.0, edges.shape[0])
    lam_u = core.upper_lambda(cost, m)
    zero = np.zeros(edges.shape[0])
    # below λ^u every weight starts downhill (eq. 26) ...
    assert np.all(core.objective(zero, edges, n, cost=cost, lam=0.99 * lam_u, n_components=m)[1] < 0)
    # ... while for λ ≥ 2m / min(1 - p̄) no weight does: W = 0 is optimal (KKT of the convex problem)
    big = 2 * m / cost.min()
    assert np.all(core.objective(zero, edges, n, cost=cost, lam=big, n_components=m)[1] >= 0)


def _two_groups(seed=0):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(size=(40, 2)) * 0.2, rng.normal(size=(25, 2)) * 0.2 + [6.0, 0.0]])


def test_esl_splits_separated_groups_and_decodes_each_on_its_own():
    points = _two_groups()
    result = core.esl(points, lam=0.7)
    assert result.n_structures == 2
    np.testing.assert_array_equal(result.labels, np.repeat([0, 1], [40, 25]))  # largest first
    assert result.n_neighbors == points.shape[0] - 1  # all pairs at this size
    assert np.all(np.diff(result.objective) <= 1e-12 * np.abs(result.objective[1:]))
    assert result.objective[-1] < 0  # below f(0) = 0: not the trivial solution (25)
    # no learned edge joins the groups; weights within [0, C]
    rows, cols = result.adjacency.nonzero()
    assert np.all(result.labels[rows] == result.labels[cols])
    assert result.weights.min() >= 0 and result.weights.max() <= 1.0
    # each component is centred and is the KPCA of its own block of m·Q⁻¹ (eq. 28)
    for component in (0, 1):
        members = result.labels == component
        coords = result.coordinates[members]
        np.testing.assert_allclose(coords.mean(0), 0.0, atol=1e-10)
        block = result.adjacency[members][:, members]
        edges = np.column_stack(block.nonzero())
        edges = edges[edges[:, 0] < edges[:, 1]]
        Q = regularized_laplacian(edges, np.asarray(block[edges[:, 0], edges[:, 1]]).ravel(), members.sum(),
                                  shift=1.0, scale=4.0)
        kernel = 2 * np.linalg.inv(Q)
        n = members.sum()
        centred = kernel - kernel.mean(0) - kernel.mean(1)[:, None] + kernel.mean()
        np.testing.assert_allclose(coords @ coords.T, _rank2(centred), atol=1e-8)
        assert result.eigenvalues[component] == pytest.approx(np.linalg.eigvalsh(centred)[::-1][:2], rel=1e-8)
        assert n == coords.shape[0]


def _rank2(matrix):
    values, vectors = np.linalg.eigh(matrix)
    return (vectors[:, -2:] * values[-2:]) @ vectors[:, -2:].T


def test_learned_graph_does_not_depend_on_m():
    points = _two_groups(1)
    two = core.esl(points, n_components=2)
    three = core.esl(points, n_components=3)
    np.testing.assert_allclose(two.weights, three.weights, atol=1e-6)
    np.testing.assert_array_equal(two.labels, three.labels)


def test_candidate_neighbours_give_the_same_components():
    points = line_and_circle(150, 150, random_state=2).obsm["X_pca"]
    knn = core.esl(points, n_neighbors=90)  # the default candidates above MAX_ALL_PAIRS points
    full = core.esl(points)
    assert knn.n_neighbors == 90 and knn.edges.shape[0] < full.edges.shape[0] / 2
    assert full.n_structures == knn.n_structures == 2
    np.testing.assert_array_equal(knn.labels, full.labels)


def test_default_candidates_switch_to_neighbours_above_the_all_pairs_limit():
    assert core.resolve_neighbors(core.MAX_ALL_PAIRS, 30, None) == core.MAX_ALL_PAIRS - 1
    assert core.resolve_neighbors(core.MAX_ALL_PAIRS + 1, 30, None) == 90
    assert core.resolve_neighbors(core.MAX_ALL_PAIRS + 1, 30, 12) == 12


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"lam": 1.0}, "trivial graph W = 0"),
        ({"lam": 0.0}, "lam must be > 0"),
        ({"lam": -0.5}, "lam must be > 0"),
        ({"perplexity": 64}, "perplexity must be below"),
        ({"perplexity": 10, "n_neighbors": 10}, "below n_neighbors"),
        ({"C": 0.0}, "C must be > 0"),
        ({"n_components": 0}, "n_components"),
    ],
)
def test_bad_parameters_fail_before_any_work(kwargs, match):
    with pytest.raises(ValueError, match=match):
        core.esl(_two_groups(), **kwargs)


def test_nan_and_size_limits():
    points = _two_groups()
    points[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        core.esl(points)
    with pytest.raises(ValueError, match="supports at most"):
        core.check_esl_parameters(MAX_DENSE_POINTS + 1, n_components=2, perplexity=30, lam=0.7, C=1.0,
                                  n_neighbors=None)


def test_trivial_solution_is_reported_with_the_parameter_to_change(monkeypatch):
    from scskeleton._core.cellgraphs.logdet import BoxProgramResult

    def stuck_at_zero(value_and_gradient, start, **kwargs):
        return BoxProgramResult(weights=np.zeros_like(start), objective=np.zeros(1), n_iter=1, converged=True,
                                message="")

    monkeypatch.setattr(core, "minimize_box", stuck_at_zero)
    with pytest.raises(ValueError, match="trivial solution W = 0.*Decrease lam"):
        core.esl(_two_groups())
