"""Convex embedding core: maps (1)–(4), losses, regularizers, bounds of §5, the solver."""

import numpy as np
import pytest
from scipy import optimize

from scskeleton._core.convex import regularized as core
from scskeleton._core.convex.losses import LOSSES, build_loss
from scskeleton._core.convex.regularizers import (
    REGULARIZERS,
    BiconjugateRegularizer,
    CompletedSquareRegularizer,
    PartitionedRegularizer,
    biconjugate_dual,
    biconjugate_dual_objective,
    build_regularizer,
    capped_simplex_projection,
)
from scskeleton._testing import directional_difference

ALPHA, BETA = 1.0, 0.1
CONVEX_REGULARIZERS = sorted(name for name, cls in REGULARIZERS.items() if cls.convex)


def _points(n=12, dims=3, seed=0):
    return np.random.default_rng(seed).normal(size=(n, dims))


def _psd(n, seed, scale=1.0, rank=None):
    rng = np.random.default_rng(seed)
    factor = rng.normal(size=(n, rank or n))
    return scale * factor @ factor.T / n


def _symmetric(n, seed):
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(n, n))
    return (matrix + matrix.T) / 2


def _loss(name, points):
    target = core.distances_from_data(points)
    return build_loss(name, target, points=points, n_neighbors=4, sigma=2.0)


# --- maps (1)–(4) ---------------------------------------------------------------------------


def test_maps_between_data_kernels_and_distances():
    points = _points()
    n = points.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    distances = core.distances_from_data(points)
    np.testing.assert_allclose(distances, core.distances_from_kernel(core.kernel_from_data(points)), atol=1e-12)
    # Proposition 1: D(K(D)) = D and K(D(K)) = HKH
    np.testing.assert_allclose(core.distances_from_kernel(core.kernel_from_distances(distances)), distances, atol=1e-10)
    kernel = _psd(n, 1)
    np.testing.assert_allclose(core.kernel_from_distances(core.distances_from_kernel(kernel)), H @ kernel @ H, atol=1e-12)
    centred = H @ kernel @ H
    assert np.isclose(np.trace(centred), core.distances_from_kernel(centred).sum() / (2 * n))


def test_adjoint_of_the_distance_map():
    kernel, gradient = _symmetric(9, 2), np.random.default_rng(3).normal(size=(9, 9))  # G need not be symmetric
    lhs = np.vdot(gradient, core.distances_from_kernel(kernel))
    assert np.isclose(lhs, np.vdot(core.distances_adjoint(gradient), kernel))
    np.testing.assert_allclose(core.distances_adjoint(gradient + gradient.T).sum(axis=1), 0.0, atol=1e-12)


# --- losses ---------------------------------------------------------------------------------


def _near_target(loss, seed):
    """A positive symmetric D̂ with zero diagonal near (but not at) the target."""
    rng = np.random.default_rng(seed)
    noise = rng.uniform(0.5, 1.5, size=loss.target.shape)
    dhat = loss.target * (noise + noise.T) / 2 + 0.1
    np.fill_diagonal(dhat, 0.0)
    return dhat


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_gradient_matches_finite_differences(name):
    loss = _loss(name, _points())
    dhat = _near_target(loss, 1)
    direction = np.random.default_rng(2).normal(size=dhat.shape)
    numeric = directional_difference(loss.value, dhat, direction)
    assert np.isclose(np.vdot(loss.gradient(dhat), direction), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_gradient_chained_through_the_kernel(name):
    """∇_K L(D(K)) = D*(∇_D̂ L), checked by central differences on K."""
    points = _points()
    loss = _loss(name, points)
    kernel = core.kernel_from_distances(loss.target) + 0.05 * _psd(points.shape[0], 4)
    direction = _symmetric(points.shape[0], 5)
    gradient = core.distances_adjoint(loss.gradient(core.distances_from_kernel(kernel)))
    numeric = directional_difference(lambda k: loss.value(core.distances_from_kernel(k)), kernel, direction)
    assert np.isclose(np.vdot(gradient, direction), numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_are_convex_in_dhat(name):
    loss = _loss(name, _points())
    for seed in range(10):
        first, second = _near_target(loss, 10 + seed), _near_target(loss, 30 + seed)
        middle = loss.value((first + second) / 2)
        assert middle <= (loss.value(first) + loss.value(second)) / 2 + 1e-10


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses_vanish_at_the_target(name):
    loss = _loss(name, _points())
    assert abs(loss.value(loss.target)) < 1e-10
    assert loss.value(_near_target(loss, 7)) > 0


def test_mvu_loss_counts_only_neighbour_pairs():
    points = _points(20)
    loss = _loss("mvu", points)
    far = core.distances_from_data(points)
    mask = np.zeros_like(far, dtype=bool)
    mask[loss.edges[:, 0], loss.edges[:, 1]] = mask[loss.edges[:, 1], loss.edges[:, 0]] = True
    moved = far + 3.0 * ~mask  # change only non-neighbour pairs
    np.fill_diagonal(moved, 0.0)
    assert loss.value(moved) == 0.0
    assert loss.value(far + 1.0 * mask) == pytest.approx(mask.sum())


def test_mvu_loss_rejects_a_disconnected_neighbourhood():
    points = np.vstack([_points(10), _points(10) + 100.0])
    with pytest.raises(ValueError, match="2 connected components"):
        _loss("mvu", points)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_stretch_curvature_matches_finite_differences(name):
    """c_L = d²/dε² L((1+ε)D; D) at ε = 0, the unit of the loss weight."""
    loss = _loss(name, _points())
    step = 1e-4
    numeric = (loss.value((1 + step) * loss.target) + loss.value((1 - step) * loss.target)) / step**2
    assert loss.stretch_curvature() == pytest.approx(numeric, rel=1e-5)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_recession_weights_give_the_linear_growth_far_away(name):
    """L(D + sE) ≈ s⟨W, E⟩ + const for large s along a distance matrix E; None for quadratic losses."""
    points = _points()
    loss = _loss(name, points)
    weights = loss.recession_weights()
    direction = core.distances_from_data(_points(seed=5))
    if weights is None:  # quadratic growth: the slope keeps increasing
        slopes = [loss.value(loss.target + 2 * s * direction) - loss.value(loss.target + s * direction)
                  for s in (1e3, 1e4)]
        assert slopes[1] > 5 * slopes[0] > 0
        return
    slope = (loss.value(loss.target + 2e3 * direction) - loss.value(loss.target + 1e3 * direction)) / 1e3
    assert slope == pytest.approx(np.vdot(weights, direction), rel=1e-6)


def test_bounded_check_is_the_recession_condition():
    """(17) with a linearly growing loss is bounded below iff 2wλ₂(L_W) ≥ α: the check
    refuses just below the threshold, and just above it the solver ends at a finite point."""
    points = _points(15, 3, seed=2) * 2
    loss = _loss("exp_bregman", points)
    weights = (loss.recession_weights() + loss.recession_weights().T) / 2
    np.fill_diagonal(weights, 0.0)
    connectivity = np.linalg.eigvalsh(np.diag(weights.sum(1)) - weights)[1]
    threshold = ALPHA / (2 * connectivity)
    regularizer = _regularizer("neg_trace")
    with pytest.raises(ValueError, match="unbounded below.*loss_weight at least 1.0"):
        core.check_bounded(loss, 0.99 * threshold, regularizer)
    core.check_bounded(loss, 1.01 * threshold, regularizer)
    core.check_bounded(loss, 0.5 * threshold, _regularizer("biconjugate"))  # γ > 0: quadratic, always bounded
    with pytest.raises(ValueError, match="unbounded"):
        core.check_bounded(loss, 0.5 * threshold, build_regularizer("partitioned", 2, alpha=ALPHA, beta=BETA, gamma=0.0))
    scale = core.loss_scale(loss, 1.0)
    result = core.convex_embedding(points, loss="exp_bregman", regularizer="neg_trace", sigma=2.0,
                                   loss_weight=1.5 * threshold / scale)
    assert np.all(np.isfinite(result.objective)) and result.converged


@pytest.mark.parametrize("name", ["exp_bregman", "sne", "sne_rows"])
def test_loss_scale_keeps_neg_trace_bounded_with_a_margin(name):
    """w is the stretch-curvature weight, raised to BOUNDED_MARGIN times the edge 2wλ₂ = α
    where the data sit near it (here: a weak loss_weight)."""
    loss = _loss(name, _points(20, 3, seed=4) * 2)
    stretch = core.loss_scale(loss, 1e-3)
    assert stretch == pytest.approx(1e-3 * np.trace(core.kernel_from_distances(loss.target)) / loss.stretch_curvature())
    floored = core.loss_scale(loss, 1e-3, alpha=ALPHA)
    assert 2 * floored * core.recession_connectivity(loss) == pytest.approx(core.BOUNDED_MARGIN * ALPHA)
    core.check_bounded(loss, floored, _regularizer("neg_trace"))
    assert core.loss_scale(loss, 1e3, alpha=ALPHA) == core.loss_scale(loss, 1e3)  # far from the edge: no floor
    assert core.recession_connectivity(_loss("mvu", _points())) is None


def test_sne_at_the_raw_weight_of_table_1_is_unbounded_with_neg_trace():
    """(34) sums to one whatever t, so λ₂ of its weights is at most about 1/t: with the
    paper's raw factor 10 and α = 1, -tr K̃ (17) is unbounded below beyond ~20 points.
    In stretch-curvature units (the default) the same data are bounded."""
    points = _points(60, 3, seed=3)
    target = core.distances_from_data(points)
    loss = build_loss("sne", target, points=points, n_neighbors=5, sigma=1.0)
    with pytest.raises(ValueError, match="unbounded below"):
        core.check_bounded(loss, 10.0, _regularizer("neg_trace"))
    core.check_bounded(loss, core.loss_scale(loss, 10.0), _regularizer("neg_trace"))


def test_unknown_loss_lists_the_valid_names():
    with pytest.raises(ValueError, match="exp_bregman"):
        build_loss("tsne", np.zeros((3, 3)), points=np.zeros((3, 1)), n_neighbors=1, sigma=1.0)


# --- regularizers ---------------------------------------------------------------------------


def _regularizer(name, gamma=1e-2, d=2):
    return build_regularizer(name, d, alpha=ALPHA, beta=BETA, gamma=gamma)


@pytest.mark.parametrize("gamma", [1e-2, 1.0])
@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_regularizer_gradient_matches_finite_differences(name, gamma):
    """At PD matrices with distinct eigenvalues every regularizer is differentiable."""
    for seed, scale in [(0, 1.0), (1, 30.0), (2, 300.0)]:  # pooled and unpooled regimes of (52)
        regularizer = _regularizer(name, gamma)
        kernel = _psd(8, seed, scale) + 0.1 * np.eye(8)
        direction = _symmetric(8, 10 + seed)
        numeric = directional_difference(regularizer.value, kernel, direction, step=1e-6 * max(scale, 1.0))
        assert np.isclose(np.vdot(regularizer.gradient(kernel), direction), numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("name", ["partitioned", "completed_square", "biconjugate"])
def test_spectral_gradients_need_only_the_top_eigenvectors(name):
    """The gradient from the top ``vectors_needed`` eigenvectors equals Q diag(·) Qᵀ from all of them."""
    from scskeleton._core.convex.regularizers import descending_eigh

    for seed, scale, gamma in [(0, 1.0, 1e-2), (1, 30.0, 1e-2), (2, 3000.0, 1e-3), (3, 0.01, 1.0)]:
        regularizer = _regularizer(name, gamma)
        kernel = _psd(40, seed, scale, rank=5)
        values, vectors = descending_eigh(kernel)
        needed = regularizer.vectors_needed(values)
        assert needed <= 6
        full = regularizer.gradient_from_eigh(kernel, values, vectors)
        partial = regularizer.gradient_from_eigh(kernel, values, vectors[:, :needed])
        np.testing.assert_allclose(partial, full, atol=1e-10 * max(1.0, np.abs(full).max()))
        if name != "partitioned":  # Q diag(z) Qᵀ resp. βI + γK̃ - (α+β)P* written out
            if name == "biconjugate":
                expected = (vectors * regularizer.dual(values)) @ vectors.T
            else:
                weights = regularizer.projector_weights(values)
                expected = BETA * np.eye(40) + gamma * kernel - (ALPHA + BETA) * (vectors * weights) @ vectors.T
            np.testing.assert_allclose(full, expected, atol=1e-9 * max(1.0, np.abs(expected).max()))
        if needed:
            with pytest.raises(ValueError, match="eigenvectors"):
                regularizer.gradient_from_eigh(kernel, values, vectors[:, : needed - 1])


@pytest.mark.parametrize("name", CONVEX_REGULARIZERS)
def test_convex_regularizers_pass_the_midpoint_inequality(name):
    regularizer = _regularizer(name, gamma=0.05)
    for seed in range(15):
        first, second = _psd(7, seed, scale=20.0, rank=3), _psd(7, 100 + seed, scale=20.0, rank=2)
        middle = regularizer.value((first + second) / 2)
        assert middle <= (regularizer.value(first) + regularizer.value(second)) / 2 + 1e-9


def test_partitioned_regularizer_is_not_convex():
    assert CONVEX_REGULARIZERS == ["biconjugate", "completed_square", "neg_trace", "trace"]
    regularizer = _regularizer("partitioned", gamma=1e-3, d=1)
    first, second = np.diag([1.0, 0.0, 0.0]), np.diag([0.0, 1.0, 0.0])
    assert regularizer.value((first + second) / 2) > (regularizer.value(first) + regularizer.value(second)) / 2


def test_trace_regularizers():
    kernel = _psd(6, 3)
    assert np.isclose(_regularizer("trace").value(kernel), BETA * np.trace(kernel))
    assert np.isclose(_regularizer("neg_trace").value(kernel), -ALPHA * np.trace(kernel))


@pytest.mark.parametrize("gamma", [1e-3, 0.1, 2.0])
def test_bounds_of_section_5(gamma):
    """R6 - d(α+β)²/(2γ) ≤ R5 ≤ R6 (§5.1) and R7 = R5** ≤ R5 (§5.2) on random PSD matrices."""
    d = 2
    partitioned = PartitionedRegularizer(d, alpha=ALPHA, beta=BETA, gamma=gamma)
    square = CompletedSquareRegularizer(d, alpha=ALPHA, beta=BETA, gamma=gamma)
    biconjugate = BiconjugateRegularizer(d, alpha=ALPHA, beta=BETA, gamma=gamma)
    slack = d * (ALPHA + BETA) ** 2 / (2 * gamma)
    for seed in range(20):
        kernel = _psd(9, seed, scale=10.0 ** (seed % 5 - 1), rank=1 + seed % 9)
        r5, r6, r7 = partitioned.value(kernel), square.value(kernel), biconjugate.value(kernel)
        tolerance = 1e-9 * max(1.0, abs(r5))
        assert r6 - slack - tolerance <= r5 <= r6 + tolerance
        assert r7 <= r5 + tolerance


def test_biconjugate_equals_partitioned_beyond_the_eigengap():
    """Where u_d - u_{d+1} ≥ (α+β)/γ the order constraint of (50) is inactive and R7 = R5."""
    gamma = 0.01
    vectors = np.linalg.qr(np.random.default_rng(0).normal(size=(6, 6)))[0]
    kernel = (vectors * np.array([400.0, 300.0, 50.0, 2.0, 1.0, 0.0])) @ vectors.T
    partitioned = PartitionedRegularizer(2, alpha=ALPHA, beta=BETA, gamma=gamma)
    biconjugate = BiconjugateRegularizer(2, alpha=ALPHA, beta=BETA, gamma=gamma)
    assert biconjugate.value(kernel) == pytest.approx(partitioned.value(kernel), rel=1e-12)
    # inside the gap, the relaxation is strictly below
    kernel = (vectors * np.array([60.0, 50.0, 40.0, 2.0, 1.0, 0.0])) @ vectors.T
    assert biconjugate.value(kernel) < partitioned.value(kernel) - 1e-3


@pytest.mark.parametrize("d, limit", [(2, "neg_trace"), (0, "trace")])
def test_biconjugate_tends_to_a_trace_regularizer_as_gamma_vanishes(d, limit):
    """Statement after Theorem 1: for γ → 0, R7 → (17) -α tr K̃ if d > 0 and (16) β tr K̃ if d = 0."""
    kernel = _psd(7, 4, scale=3.0)
    reference = build_regularizer(limit, d, alpha=ALPHA, beta=BETA, gamma=0.0).value(kernel)
    gaps = [abs(BiconjugateRegularizer(d, alpha=ALPHA, beta=BETA, gamma=g).value(kernel) - reference)
            for g in (1e-2, 1e-4, 1e-6)]
    assert gaps[0] > 50 * gaps[1] > 2500 * gaps[2]  # the gap shrinks like γ
    assert gaps[2] < 1e-4 * abs(reference)


def test_biconjugate_dual_matches_a_generic_constrained_solver():
    """(50)–(52) against SLSQP on the ordered problem (50), several random small inputs."""
    rng = np.random.default_rng(5)
    for trial in range(25):
        size = int(rng.integers(3, 8))
        d = int(rng.integers(1, size))
        alpha, beta, gamma = rng.uniform(0.1, 2.0), rng.uniform(0.01, 1.0), 10 ** rng.uniform(-2, 0.5)
        values = np.sort(rng.exponential(size=size) * rng.choice([0.1, 1.0, 5.0]))[::-1]
        if trial % 3 == 0:
            values[-2:] = 0.0  # rank-deficient, as K̃ usually is
        z = biconjugate_dual(values, d, alpha, beta, gamma)
        assert np.all(np.diff(z) <= 1e-12)

        def objective(candidate):
            return biconjugate_dual_objective(candidate, values, d, alpha, beta, gamma)

        order = [{"type": "ineq", "fun": lambda c, i=i: c[i] - c[i + 1]} for i in range(size - 1)]
        best = min(
            (optimize.minimize(objective, np.sort(rng.normal(size=size) * 3)[::-1], method="SLSQP",
                               constraints=order, options={"ftol": 1e-14, "maxiter": 500})
             for _ in range(4)),
            key=lambda result: result.fun,
        )
        assert objective(z) <= best.fun + 1e-8


def test_completed_square_minimises_over_the_fantope():
    """R6 takes the minimum over P ∈ 𝒫 (20): no random feasible P does better."""
    rng = np.random.default_rng(6)
    d, gamma = 2, 0.05
    regularizer = CompletedSquareRegularizer(d, alpha=ALPHA, beta=BETA, gamma=gamma)
    kernel = _psd(6, 7, scale=20.0)
    scale = (ALPHA + BETA) / gamma

    def at(projector):
        return BETA * np.trace(kernel) + gamma / 2 * np.sum((kernel - scale * projector) ** 2)

    for _ in range(200):
        basis = np.linalg.qr(rng.normal(size=(6, 6)))[0]
        weights = capped_simplex_projection(rng.uniform(-1, 2, size=6), d)
        assert regularizer.value(kernel) <= at((basis * weights) @ basis.T) + 1e-9


def test_capped_simplex_projection_is_the_euclidean_projection():
    rng = np.random.default_rng(8)
    for _ in range(20):
        values = rng.normal(size=7) * 2
        total = float(rng.integers(1, 6))
        projected = capped_simplex_projection(values, total)
        assert np.isclose(projected.sum(), total) and projected.min() >= 0 and projected.max() <= 1
        brute = optimize.minimize(
            lambda p: np.sum((p - values) ** 2), np.full(7, total / 7), method="SLSQP",
            bounds=[(0, 1)] * 7, constraints=[{"type": "eq", "fun": lambda p: p.sum() - total}],
            options={"ftol": 1e-14},
        )
        np.testing.assert_allclose(projected, brute.x, atol=1e-6)


def test_unknown_regularizer_lists_the_valid_names():
    with pytest.raises(ValueError, match="biconjugate"):
        build_regularizer("nuclear", 2, alpha=1.0, beta=0.1, gamma=1e-3)
    with pytest.raises(ValueError, match="gamma > 0"):
        build_regularizer("biconjugate", 2, alpha=1.0, beta=0.1, gamma=0.0)


# --- solver ---------------------------------------------------------------------------------


def _project(matrix):
    """Euclidean projection onto {K ⪰ 0, K1 = 0}: centre, clip negative eigenvalues."""
    size = matrix.shape[0]
    H = np.eye(size) - 1.0 / size
    values, vectors = np.linalg.eigh(H @ ((matrix + matrix.T) / 2) @ H)
    return (vectors * np.maximum(values, 0.0)) @ vectors.T


@pytest.mark.parametrize("name", sorted(REGULARIZERS))
def test_factored_gradient_matches_finite_differences(name):
    """The solver's gradient: ∇F(YYᵀ) from the thin SVD of Y equals the gradient from K
    and, chained as 2∇F Y, the central difference of F(YYᵀ) in Y."""
    points = _points(12, 3, seed=1) * 2
    target = core.distances_from_data(points)
    loss = build_loss("mvu", target, points=points, n_neighbors=4, sigma=1.0)
    regularizer = _regularizer(name, gamma=1e-2)
    objective = core._Objective(loss, regularizer, scale=0.3)
    factor = np.random.default_rng(2).normal(size=(12, 5)) * 3
    factor -= factor.mean(axis=0)
    value, gradient = objective.factored(factor)
    kernel_value, kernel_gradient = objective.value_and_gradient(factor @ factor.T)
    assert value == pytest.approx(kernel_value, rel=1e-12)
    np.testing.assert_allclose(gradient, kernel_gradient, atol=1e-9 * np.abs(kernel_gradient).max())
    direction = np.random.default_rng(3).normal(size=factor.shape)
    numeric = directional_difference(lambda y: objective.factored(y)[0], factor, direction)
    assert np.vdot(2 * gradient @ factor, direction) == pytest.approx(numeric, rel=1e-6)


def test_solver_reaches_the_closed_form_of_kpca_with_the_trace_regularizer():
    """L₁ (22) with R₂ (16): w·4||K̃ - K||² + β tr K̃ is minimised by soft-thresholding the
    eigenvalues of the data kernel K = -½HDH at β/(8w), w the loss scale."""
    points = _points(15, 4, seed=3)
    data_kernel = core.kernel_from_distances(core.distances_from_data(points))
    scale = core.loss_scale(build_loss("kpca", core.distances_from_data(points), points=points, n_neighbors=3,
                                       sigma=1.0), 10.0)
    beta = 8.0 * scale * np.sort(np.linalg.eigvalsh(data_kernel))[-3]
    result = core.convex_embedding(points, loss="kpca", regularizer="trace", beta=beta, n_components=2,
                                   maxiter=500, tol=1e-12)
    assert result.loss_scale == pytest.approx(scale)
    values, vectors = np.linalg.eigh(data_kernel)
    expected = (vectors * np.maximum(values - beta / (8 * scale), 0.0)) @ vectors.T
    np.testing.assert_allclose(result.kernel, expected, atol=1e-6 * np.abs(expected).max())
    assert np.count_nonzero(result.eigenvalues > 1e-6 * result.eigenvalues[0]) == 2  # the factor only tends to rank 2


@pytest.mark.parametrize("regularizer", sorted(REGULARIZERS))
def test_objective_never_increases(regularizer):
    points = _points(30, 3, seed=4) * 3
    result = core.convex_embedding(points, loss="mvu", regularizer=regularizer, n_neighbors=6, maxiter=60, gamma=0.01)
    assert np.all(np.diff(result.objective) <= 1e-9 * np.abs(result.objective).max())
    assert result.embedding.shape == (30, 2) and result.eigenvalues.shape == (30,)
    np.testing.assert_allclose(result.kernel.sum(axis=1), 0.0, atol=1e-8 * np.abs(result.kernel).max())


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_solution_is_a_fixed_point_of_the_projected_gradient_step(loss):
    """At a minimiser of a convex problem, K̃ = Π(K̃ - ∇F(K̃)/ℓ) for any ℓ > 0 (Π the
    projection onto the feasible set), which the factored solver never uses."""
    points = _points(14, 3, seed=6) * 3
    result = core.convex_embedding(points, loss=loss, regularizer="biconjugate", n_neighbors=9, sigma=4.0,
                                   gamma=0.05, maxiter=3000, tol=1e-13)
    assert result.converged
    target = core.distances_from_data(points)
    objective = core._Objective(build_loss(loss, target, points=points, n_neighbors=9, sigma=4.0),
                                _regularizer("biconjugate", gamma=0.05), result.loss_scale)
    _, gradient = objective.value_and_gradient(result.kernel)
    moved = _project(result.kernel - gradient / np.linalg.norm(gradient))
    assert np.linalg.norm(moved - result.kernel) <= 1e-4 * max(np.linalg.norm(result.kernel), 1.0)


def test_the_certificate_raises_the_rank_to_the_global_minimum(monkeypatch):
    """Started at rank 1, the factor grows along the negative eigenvectors of H∇F H
    until they are gone, and reaches the minimum of a start with full rank."""
    points = _points(25, 3, seed=9) * 3
    kwargs = dict(loss="mvu", regularizer="trace", n_neighbors=5, maxiter=3000, tol=1e-10)
    full = core.convex_embedding(points, **kwargs)
    monkeypatch.setattr(core, "START_RANK", 1)
    monkeypatch.setattr(core, "SEGMENT", 30)
    grown = core.convex_embedding(points, n_components=1, **kwargs)
    assert full.converged and grown.converged
    assert np.count_nonzero(grown.eigenvalues > 1e-6 * grown.eigenvalues[0]) > 4  # the crumpled minimum needs rank
    assert grown.objective[-1] == pytest.approx(full.objective[-1], rel=1e-6)
    assert np.all(np.diff(grown.objective) <= 1e-9 * np.abs(grown.objective).max())


def test_stopping_test_is_relative_to_the_progress():
    trace = [10.0] + [1.0 - 1e-9 * i for i in range(20)]
    assert core._stalled(trace, 1e-6) and not core._stalled(trace, 1e-12)
    assert not core._stalled(trace[:core.WINDOW], 1.0)  # too few iterations to judge
    near_zero = [1.0] + [1e-12 * (20 - i) for i in range(20)]  # F → 0: judged against the decrease 1
    assert core._stalled(near_zero, 1e-6)


def test_truncated_reconstruction_loss_is_the_loss_of_the_embedding():
    points = _points(25, 3, seed=7)
    result = core.convex_embedding(points, loss="squared", regularizer="trace", maxiter=50)
    loss = build_loss("squared", core.distances_from_data(points), points=points, n_neighbors=5, sigma=1.0)
    assert result.reconstruction_loss == pytest.approx(loss.value(core.distances_from_data(result.embedding)))
    np.testing.assert_allclose(result.embedding.T @ result.embedding, np.diag(result.eigenvalues[:2]), atol=1e-8)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(loss="tsne"), "Unknown loss 'tsne'; choose one of"),
        (dict(regularizer="rank"), "Unknown regularizer 'rank'; choose one of"),
        (dict(n_components=20), "n_components"),
        (dict(alpha=-1.0), "alpha"),
        (dict(sigma=0.0, loss="sne"), "sigma"),
        (dict(loss_weight=0.0), "loss_weight"),
        (dict(regularizer="completed_square", gamma=0.0), "gamma"),
    ],
)
def test_bad_parameters(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        core.convex_embedding(_points(20), **kwargs)


def test_neighbourhood_size_only_matters_for_the_mvu_loss():
    result = core.convex_embedding(_points(6), loss="kpca", regularizer="trace", n_neighbors=10)
    assert result.embedding.shape == (6, 2)
    with pytest.raises(ValueError, match="n_neighbors"):
        core.convex_embedding(_points(6), loss="mvu", n_neighbors=10)


def test_size_limit_suggests_subsampling_or_landmarks(monkeypatch):
    monkeypatch.setattr(core, "MAX_POINTS", 10)
    with pytest.raises(ValueError, match="subsample.*rpg"):
        core.convex_embedding(_points(11))


def test_partitioned_without_smoother_is_shaw_and_jebaras_regularizer():
    """γ = 0 gives (19): β tr K̃ - (α+β) Σ_{i≤d} u_i, minimised locally."""
    points = _points(30, 3, seed=8) * 3
    result = core.convex_embedding(points, loss="mvu", regularizer="partitioned", gamma=0.0, n_neighbors=8,
                                   maxiter=200)
    spectrum = result.eigenvalues
    r4 = BETA * spectrum.sum() - (ALPHA + BETA) * spectrum[:2].sum()
    assert result.regularizer_value == pytest.approx(r4, rel=1e-9, abs=1e-9)
    assert result.objective[-1] == pytest.approx(result.loss_scale * result.loss_value + r4, rel=1e-9)
    assert np.all(np.diff(result.objective) <= 1e-9 * np.abs(result.objective).max())
