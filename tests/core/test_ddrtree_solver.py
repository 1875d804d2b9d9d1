import numpy as np
import pytest
from scipy import linalg, sparse

from scskeleton._core.embed import principal_directions
from scskeleton._core.graphs import laplacian, minimum_spanning_tree
from scskeleton._core.trees.assign import soft_assignment
from scskeleton._core.trees.ddrtree import (
    ddrtree,
    objective_value,
    proposition5,
)
from scskeleton._core.trees.defaults import default_n_centers
from scskeleton.datasets import branching


def _dense(matrix):
    return matrix.toarray() if sparse.issparse(matrix) else np.asarray(matrix)


def _objective31(data, W, Z, C, tree, R, *, sigma, gamma, lam):
    """Objective (31) written out literally, with N × K loops in numpy."""
    R = _dense(R)
    reconstruction = np.sum((data - Z @ W.T) ** 2)
    rows, cols = sparse.triu(tree, 1).nonzero()
    tree_length = lam * np.sum((C[rows] - C[cols]) ** 2)  # (lam/2) Σ_{k,k'} over both orders
    dist = ((Z[:, None, :] - C[None]) ** 2).sum(-1)
    positive = R > 0
    entropy = np.sum(R[positive] * np.log(R[positive]))
    return reconstruction + tree_length + gamma * (np.sum(R * dist) + sigma * entropy)


@pytest.fixture(scope="module")
def small_problem():
    rng = np.random.default_rng(0)
    data = rng.normal(size=(40, 5)) * [3, 2, 1, 0.5, 0.2]
    data -= data.mean(0)
    centers = rng.normal(size=(8, 2))
    latent = data @ principal_directions(data.T @ data, 2)
    assignment = soft_assignment(latent, centers, sigma=1.0)
    tree = minimum_spanning_tree(centers)
    return data, _dense(assignment.matrix), assignment, tree


@pytest.mark.parametrize(
    "params",
    [
        dict(),  # package defaults (sparse, nearly hard R)
        dict(sigma=0.5, lam=50.0, n_centers=30),  # dense, soft R
        dict(n_centers=300, sigma=1e-2, gamma=1.0),  # K = N, Algorithm 2 as printed
    ],
)
def test_objective_never_increases(params):
    data = np.asarray(branching(300, n_leaves=3, random_state=4).X, dtype=float)
    result = ddrtree(data, maxiter=30, tol=0.0, **params)
    previous, current = result.objective[:-1], result.objective[1:]
    assert result.n_iter >= 5  # tol=0 stops only at an exact fixed point
    assert np.all(current <= previous + 1e-10 * np.abs(previous))


@pytest.mark.parametrize("sigma", [1.0, 1e-3])  # a soft, dense R and a nearly hard, sparse one
def test_woodbury_matrix_is_positive_definite(monkeypatch, sigma):
    """Lemma 2: the K × K matrix that proposition5 factors is M = ((1+γ)/γ)(λ/γ L + Γ) − RᵀR, and it is PD.

    The matrices are taken from the solver itself (its Cholesky calls), so a wrong RᵀR (the
    row-block product over a sparse R) or a wrong Γ shows here, not only in later results.
    """
    from scskeleton._core.trees import ddrtree as module

    rng = np.random.default_rng(0)
    # more cells than one row block of RᵀR (CHUNK_ROWS = 1,024), the last block short
    data = rng.normal(size=(2600, 5)) * [3, 2, 1, 0.5, 0.2]
    data -= data.mean(0)
    latent = data @ principal_directions(data.T @ data, 2)
    centers = latent[rng.choice(len(data), 8, replace=False)]
    tree = minimum_spanning_tree(centers)
    assignment = soft_assignment(latent, centers, sigma=sigma)
    R = _dense(assignment.matrix)
    assert sparse.issparse(assignment.matrix) == (sigma < 0.1)
    factored = []
    real_cholesky = module._cholesky
    monkeypatch.setattr(module, "_cholesky", lambda matrix, name: factored.append(matrix.copy()) or real_cholesky(matrix, name))
    gamma, lam = 10.0, 20.0
    L = laplacian(tree)
    proposition5(data, data.T @ data, assignment.matrix, assignment.neg_entropy, L, gamma=gamma, lam=lam, n_components=2)
    smoothing = lam / gamma * L + np.diag(R.sum(0))
    expected = (1 + gamma) / gamma * smoothing - R.T @ R
    woodbury = factored[0]
    np.testing.assert_allclose(woodbury, expected, rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(woodbury, woodbury.T, atol=1e-9)
    assert linalg.eigvalsh(woodbury).min() > 0
    np.testing.assert_allclose(factored[1], smoothing, rtol=1e-10, atol=1e-9)  # the C step's λ/γ L + Γ


def test_proposition5_matches_dense_formula(small_problem):
    data, R, assignment, tree = small_problem
    gamma, lam, d = 10.0, 20.0, 2
    L = laplacian(tree)
    B = lam / gamma * L + np.diag(R.sum(0))
    Q = np.linalg.inv((1 + gamma) * np.eye(len(data)) - gamma * R @ np.linalg.solve(B, R.T))  # N × N, test only
    W = principal_directions(data.T @ Q @ data, d)
    Z = Q @ data @ W
    C = np.linalg.solve(B, R.T @ Z)

    step = proposition5(data, data.T @ data, assignment.matrix, assignment.neg_entropy, L, gamma=gamma, lam=lam, n_components=d)
    np.testing.assert_allclose(step.projection, W, atol=1e-9)
    np.testing.assert_allclose(step.latent, Z, atol=1e-9)
    np.testing.assert_allclose(step.centers, C, atol=1e-9)


def test_proposition5_is_a_block_minimum_and_objective_is_exact(small_problem):
    data, R, assignment, tree = small_problem
    sigma, gamma, lam = 1.0, 10.0, 20.0
    L = laplacian(tree)
    step = proposition5(data, data.T @ data, assignment.matrix, assignment.neg_entropy, L, gamma=gamma, lam=lam, n_components=2)
    best = _objective31(data, step.projection, step.latent, step.centers, tree, R, sigma=sigma, gamma=gamma, lam=lam)
    recorded = objective_value(
        step.projection,
        step.centers,
        step.sums,
        step.latent_part,
        data_norm2=float(np.sum(data**2)),
        gram=data.T @ data,
        graph_laplacian=L,
        sigma=sigma,
        gamma=gamma,
        lam=lam,
    )
    assert recorded == pytest.approx(best, rel=1e-10)
    rng = np.random.default_rng(5)
    for _ in range(20):
        rotation, _ = np.linalg.qr(np.eye(5) + 0.05 * rng.normal(size=(5, 5)))
        W = rotation @ step.projection
        Z = step.latent + 0.01 * rng.normal(size=step.latent.shape)
        C = step.centers + 0.01 * rng.normal(size=step.centers.shape)
        assert _objective31(data, W, Z, C, tree, R, sigma=sigma, gamma=gamma, lam=lam) >= best


def test_pca_subspace_when_tree_weight_vanishes():
    rng = np.random.default_rng(1)
    data = rng.normal(size=(60, 6)) * [5, 3, 1, 0.5, 0.3, 0.1]
    result = ddrtree(data, n_components=2, n_centers=60, lam=1e-8, sigma=1e-6, maxiter=5)
    centred = data - data.mean(0)
    pca = principal_directions(centred.T @ centred, 2)
    np.testing.assert_allclose(result.projection @ result.projection.T, pca @ pca.T, atol=1e-6)


def test_outputs_have_the_documented_shapes():
    data = np.asarray(branching(500, n_leaves=2, random_state=2).X, dtype=float)
    result = ddrtree(data, n_components=3)
    K = default_n_centers(500)
    assert result.projection.shape == (50, 3)
    np.testing.assert_allclose(result.projection.T @ result.projection, np.eye(3), atol=1e-10)
    assert result.latent.shape == (500, 3) and result.centers.shape == (K, 3)
    assert result.tree.shape == (K, K) and result.tree.nnz == 2 * (K - 1)
    np.testing.assert_allclose(np.asarray(result.assignment.sum(1)).ravel(), 1.0)
    assert result.objective.shape == (result.n_iter,)


def test_same_random_state_is_bit_identical():
    data = np.asarray(branching(400, n_leaves=3, random_state=3).X, dtype=float)
    first, second = ddrtree(data, random_state=11), ddrtree(data, random_state=11)
    for field in ("projection", "latent", "centers", "objective"):
        np.testing.assert_array_equal(getattr(first, field), getattr(second, field))
    assert (first.tree != second.tree).nnz == 0
    np.testing.assert_array_equal(_dense(first.assignment), _dense(second.assignment))


def test_default_number_of_centers():
    assert default_n_centers(15) == 15  # never more nodes than cells
    assert default_n_centers(80) == 50  # at least 50 nodes
    assert default_n_centers(600) == 60  # a node per ten cells
    assert default_n_centers(1000) == 80 == default_n_centers(10**6)  # DDRTree's cap
    # without the cap (the principal tree learners): at most R's DDRTree / Monocle 2 rule, whose
    # values are written out here (R: round(2·100·log(N)/(log(N) + log(100)))), not recomputed
    assert default_n_centers(1000, most=None) == 100
    assert default_n_centers(2000, most=None) == 125
    assert default_n_centers(10**4, most=None) == 133
    assert default_n_centers(10**6, most=None) == 150
    # the documented bounds hold at every size, and more cells never give fewer nodes
    sizes = np.unique(np.r_[np.arange(3, 3000), np.geomspace(3000, 10**7, 400).astype(int)])
    for most in (80, None):
        counts = np.array([default_n_centers(int(n), most=most) for n in sizes])
        assert np.all(counts <= sizes) and np.all(counts >= np.minimum(sizes, 50))
        assert np.all(np.diff(counts) >= 0)
        assert np.all(counts[sizes >= 500] <= sizes[sizes >= 500] // 10)  # ≥ 10 cells per node
        assert counts[sizes <= 10**6].max() == (80 if most else 150)  # R's rule: at most 150 up to 10⁶ cells


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(sigma=0.0), "sigma"),
        (dict(gamma=-1.0), "gamma"),
        (dict(lam=-1.0), "lam"),
        (dict(n_centers=1), "n_centers"),
        (dict(n_centers=10_000), "n_centers"),
        (dict(n_components=51), "n_components"),
        (dict(maxiter=0), "maxiter"),
    ],
)
def test_bad_parameters_raise(kwargs, fragment):
    data = np.asarray(branching(100, random_state=0).X, dtype=float)
    with pytest.raises(ValueError, match=fragment):
        ddrtree(data, **kwargs)


def test_bad_data_raise():
    with pytest.raises(ValueError, match="NaN"):
        ddrtree(np.array([[0.0, 1.0], [np.nan, 2.0], [3.0, 4.0]]))
    with pytest.raises(ValueError, match="at least 3 cells"):
        ddrtree(np.ones((2, 4)))


def test_latent_sums_follow_from_the_assignment_sums(small_problem):
    """The chunked fit finishes an iteration from RᵀR, RᵀY and YᵀY alone: the closed forms must equal
    the sums taken over the updated latent points."""
    from scskeleton._core.trees.ddrtree import latent_sums_from_assignment, solve_projection

    data, R, assignment, tree = small_problem
    for gamma in (0.5, 10.0):
        step = proposition5(
            data, data.T @ data, assignment.matrix, assignment.neg_entropy, laplacian(tree), gamma=gamma, lam=20.0,
            n_components=2,
        )
        solve = solve_projection(data.T @ data, step.sums, laplacian(tree), gamma=gamma, lam=20.0, n_components=2)
        closed = latent_sums_from_assignment(step.sums, data.T @ data, solve, gamma=gamma)
        np.testing.assert_allclose(closed.resp_latent, step.latent_part.resp_latent, rtol=1e-10, atol=1e-12)
        assert closed.latent_norm2 == pytest.approx(step.latent_part.latent_norm2, rel=1e-10)
        assert closed.residual_inside == pytest.approx(step.latent_part.residual_inside, rel=1e-8)
