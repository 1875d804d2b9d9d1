"""SPL core: f(S) of (17), its subgradient against finite differences and the printed (20),
the MAP embedding (22), the solver (monotone, optimal by the KKT conditions, sparse) and
the scale of φ."""

import numpy as np
import pytest

import scskeleton as sks
from scskeleton._testing import central_differences
from scskeleton._core.embed import kernel_pca
from scskeleton._core.graphs import knn_edges
from scskeleton._core.cellgraphs.logdet import edge_squared_distances, regularized_laplacian
from scskeleton._core.cellgraphs.spl import default_phi_scale, spl, spl_objective


def _problem(seed=0, n=14, d_features=5):
    """Centred data with well separated principal variances (a clear eigengap for W*)."""
    rng = np.random.default_rng(seed)
    data = rng.normal(size=(n, d_features)) * np.array([3.0, 1.5, 0.5, 0.2, 0.1])[:d_features]
    data -= data.mean(0)
    edges = knn_edges(data, 4)
    phi = edge_squared_distances(data, edges) / 5.0
    weights = rng.uniform(0.0, 1.5, size=edges.shape[0])
    return data, edges, phi, weights


@pytest.mark.parametrize("gamma, C", [(0.5, 10.0), (2.0, np.inf), (1e-3, 1e3), (0.0, 1.0)])
def test_subgradient_matches_central_differences(gamma, C):
    data, edges, phi, weights = _problem()
    evaluation = spl_objective(data, edges, weights, phi, gamma=gamma, C=C, n_components=2)
    gram = data.T @ evaluation.logdet.inverse @ data
    top = np.linalg.eigvalsh(gram)[::-1]
    assert top[1] - top[2] > 0.1 * top[1]  # W* unique: f is differentiable here
    numeric = central_differences(
        lambda w: spl_objective(data, edges, w, phi, gamma=gamma, C=C, n_components=2).value, weights)
    assert np.max(np.abs(evaluation.gradient - numeric) / np.maximum(np.abs(numeric), 1e-3)) < 1e-5


def test_objective_is_17_and_gradient_is_the_printed_20():
    data, edges, phi, weights = _problem(1)
    gamma, C, d, n = 0.7, 5.0, 2, data.shape[0]
    evaluation = spl_objective(data, edges, weights, phi, gamma=gamma, C=C, n_components=d)
    S = np.zeros((n, n))
    S[edges[:, 0], edges[:, 1]] = weights
    S += S.T
    Phi = np.zeros((n, n))
    Phi[edges[:, 0], edges[:, 1]] = phi
    Phi += Phi.T
    L = np.diag(S.sum(1)) - S
    M = (gamma + 1) * np.eye(n) + 4 * L
    W = evaluation.projection
    eq17 = (d / 2 * np.linalg.slogdet(M)[1] - np.sum(S * Phi) - np.sum(S**2) / (4 * C)
            - gamma**2 / 2 * np.trace(W.T @ data.T @ np.linalg.inv(M) @ data @ W))
    assert evaluation.value + d / 2 * n * np.log(4.0) == pytest.approx(eq17, rel=1e-10)
    # W* minimises (17) over WᵀW = I: it spans the top-d eigenvectors of YᵀQ⁻¹Y
    Q = M / 4
    values, vectors = np.linalg.eigh(data.T @ np.linalg.inv(Q) @ data)
    np.testing.assert_allclose(np.abs(W.T @ vectors[:, -d:]).sum(), d, rtol=1e-8)
    # the printed (20), with the dense P = YWWᵀYᵀQ⁻¹
    Qinv = np.linalg.inv(Q)
    P = data @ W @ W.T @ data.T @ Qinv
    inner = Qinv.T @ (d * np.eye(n) + gamma**2 / 4 * P)
    i, j = edges[:, 0], edges[:, 1]
    trace_a = inner[i, i] + inner[j, j] - inner[i, j] - inner[j, i]
    eq20 = 0.5 * trace_a - weights / C - 2 * phi
    np.testing.assert_allclose(evaluation.gradient, eq20, rtol=1e-9, atol=1e-10)


def test_embedding_is_the_map_estimate_22():
    adata = sks.datasets.distorted_s(60, random_state=1)
    data = adata.obsm["X_pca"]
    gamma = 0.3
    result = spl(data, gamma=gamma, maxiter=20)
    centred = data - result.mean
    n = data.shape[0]
    M = 4 * regularized_laplacian(result.edges, result.weights, n, shift=(gamma + 1) / 4)  # 4L + (γ+1)I
    X = result.embedding
    np.testing.assert_allclose(X, gamma * np.linalg.solve(M, centred @ result.projection), atol=1e-12)
    # stationary point of the posterior exponent ½Tr(XᵀMX) - γTr(XᵀYW) of (16); (21) as printed
    # (+γTr(XᵀYW)) is stationary at -X instead
    np.testing.assert_allclose(M @ X - gamma * centred @ result.projection, 0.0, atol=1e-12)
    np.testing.assert_allclose(result.projection.T @ result.projection, np.eye(2), atol=1e-12)


def test_gamma_zero_embeds_by_kpca_of_the_posterior_covariance():
    data = sks.datasets.circle(50, random_state=0).obsm["X_pca"]
    result = spl(data, gamma=0.0, maxiter=15)
    M = 4 * regularized_laplacian(result.edges, result.weights, 50, shift=0.25)  # 4L + I
    expected = kernel_pca(np.linalg.inv(M), 2).coordinates
    np.testing.assert_allclose(np.abs(result.embedding), np.abs(expected), atol=1e-9)


def _refit_gradient(data, result, gamma=1e-3, C=1e3):
    scaled = (data - result.mean) / np.sqrt(result.phi_scale)  # (17) is fitted to Y/√phi_scale
    phi = edge_squared_distances(scaled, result.edges)
    return spl_objective(scaled, result.edges, result.weights, phi, gamma=gamma, C=C, n_components=2)


@pytest.mark.parametrize("name", ["moons", "distorted_s", "circle"])
def test_solver_reaches_the_concave_optimum(name):
    """f rises at every iteration and ends at the maximum over S ≥ 0: zero gradient on the
    learned edges, a non-positive one on the edges left at zero (KKT), and most edges zero."""
    data = getattr(sks.datasets, name)(100, random_state=0).obsm["X_pca"]
    result = spl(data)
    assert result.converged and result.n_iter < 200
    assert np.all(np.diff(result.objective) >= -1e-12 * np.abs(result.objective[:-1]))
    again = _refit_gradient(data, result)
    assert again.value == pytest.approx(result.objective[-1], rel=1e-10)
    active = result.weights > 0
    assert 0 < active.sum() < 0.5 * active.size
    scale = np.abs(again.gradient).max()
    assert np.abs(again.gradient[active]).max() <= 1e-3 * scale + 1e-6
    assert again.gradient[~active].max() <= 1e-3 * scale + 1e-6


def test_default_scale_is_unit_free():
    data = sks.datasets.distorted_s(80, random_state=0).obsm["X_pca"]
    result = spl(data)
    assert result.phi_scale == pytest.approx(np.sum(data.var(0)) / 4.0)  # tv / (2d), d = 2
    assert default_phi_scale(data, 3) == pytest.approx(np.sum(data.var(0)) / 6.0)
    scaled = spl(1e3 * data + 5.0)
    np.testing.assert_allclose(scaled.weights, result.weights, rtol=1e-5, atol=1e-8 * result.weights.max())
    np.testing.assert_allclose(scaled.embedding, 1e3 * result.embedding, rtol=1e-5,
                               atol=1e-6 * np.abs(1e3 * result.embedding).max())


def test_s_is_zero_when_every_neighbour_is_too_far_for_the_prior():
    """At S = 0 the gradient is 4d/(γ + 1) - 2φ_e (+ a γ² term): with every φ above 2d/(γ + 1)
    the optimum is S = 0 and the embedding is the PCA projection."""
    data = sks.datasets.circle(40, random_state=0).obsm["X_pca"]
    result = spl(data, phi_scale=1e-6)
    assert result.n_nonzero == 0 and result.converged


def test_stopping_rule():
    data = sks.datasets.circle(40, random_state=0).obsm["X_pca"]
    loose = spl(data, tol=1e-2)
    tight = spl(data)
    assert loose.converged and loose.n_iter < tight.n_iter
    assert spl(data, maxiter=3).n_iter == 3 and not spl(data, maxiter=3).converged


def test_bad_input_is_reported():
    data = sks.datasets.circle(20, random_state=0).obsm["X_pca"]
    with pytest.raises(ValueError, match="n_neighbors"):
        spl(data, n_neighbors=20)
    with pytest.raises(ValueError, match="gamma"):
        spl(data, gamma=-1.0)
    with pytest.raises(ValueError, match="C"):
        spl(data, C=0.0)
    with pytest.raises(ValueError, match="at least 3"):
        spl(data[:2])
    with pytest.raises(ValueError, match="n_components"):
        spl(data, n_components=3)
    bad = data.copy()
    bad[0, 1] = np.inf
    with pytest.raises(ValueError, match="NaN or infinite"):
        spl(bad)
    assert spl(data, C=np.inf).converged
    twins = np.vstack([data, data[:1]])
    with pytest.raises(ValueError, match="coincide"):
        spl(twins, C=np.inf)
    assert spl(twins).converged  # finite C bounds the weight of the duplicate pair
