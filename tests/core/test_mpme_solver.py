"""MPME core: objective (13), gradient (14), L-BFGS-B solution (KKT), sparsity in C, decoders."""

import numpy as np
import pytest
from scipy import linalg

import scskeleton as sks
from scskeleton._testing import central_differences
from scskeleton._core.embed import kernel_pca
from scskeleton._core.graphs import knn_edges
from scskeleton._core.cellgraphs.logdet import all_pairs, regularized_laplacian
from scskeleton._core.cellgraphs.mpme import duplicate_weight_bound, default_phi_scale, mpme, mpme_objective, pair_distances


def _distorted_s(n=100):
    return sks.datasets.distorted_s(n, random_state=0).obsm["X_pca"]


@pytest.mark.parametrize("lam, d", [(0.5, 2), (3.0, 3)])
def test_gradient_matches_central_differences(lam, d):
    rng = np.random.default_rng(1)
    points = rng.normal(size=(14, 3))
    edges = knn_edges(points, 4)
    phi = pair_distances(points, edges, None)
    weights = rng.uniform(0.0, 2.0, size=edges.shape[0])
    value, gradient, _ = mpme_objective(edges, weights, phi, 14, lam=lam, n_components=d)
    dense_q = regularized_laplacian(edges, weights, 14, shift=lam)
    assert value == pytest.approx(np.linalg.slogdet(dense_q)[1] - phi @ weights / d, rel=1e-12)
    numeric = central_differences(lambda w: mpme_objective(edges, w, phi, 14, lam=lam, n_components=d)[0], weights)
    assert np.max(np.abs(gradient - numeric) / np.maximum(np.abs(numeric), 1e-3)) < 1e-5


def _kkt_residual(edges, weights, phi, n, *, lam, d, upper):
    """Largest violation of the KKT conditions of (13) (maximisation) relative to φ/d."""
    _, gradient, _ = mpme_objective(edges, weights, phi, n, lam=lam, n_components=d)
    scale = np.maximum(phi / d, 1e-12)
    at_zero = weights <= 0
    at_upper = weights >= upper
    free = ~at_zero & ~at_upper
    return max(
        np.max(np.maximum(gradient[at_zero], 0.0) / scale[at_zero], initial=0.0),   # ascent out of 0 forbidden
        np.max(np.maximum(-gradient[at_upper], 0.0) / scale[at_upper], initial=0.0),  # descent below 4C forbidden
        np.max(np.abs(gradient[free]) / scale[free], initial=0.0),
    )


@pytest.mark.parametrize("C", [1.0, np.inf])
def test_objective_rises_monotonically_and_kkt_hold_over_all_pairs(C):
    points = _distorted_s(80)
    lam, d = 2.0, 2
    result = mpme(points, lam=lam, C=C, n_components=d)
    assert result.converged
    assert np.all(np.diff(result.objective) >= -1e-9 * np.abs(result.objective[:-1]))
    assert result.objective[-1] > result.objective[0]
    # KKT of (13) over every pair of cells, including those screened out (exact global optimum)
    pairs = all_pairs(80)
    phi = pair_distances(points, pairs, None) / result.phi_scale
    full = np.zeros(pairs.shape[0])
    index = {tuple(edge): k for k, edge in enumerate(pairs)}
    full[[index[tuple(edge)] for edge in result.edges]] = result.weights
    assert _kkt_residual(pairs, full, phi, 80, lam=lam, d=d, upper=4 * C) < 1e-4
    value, _, _ = mpme_objective(pairs, full, phi, 80, lam=lam, n_components=d)
    assert value == pytest.approx(result.objective[-1], rel=1e-10)


def test_larger_C_gives_sparser_W_on_the_distorted_s():
    """Fig. 2 of the paper: λ = 10, C ∈ {0.1, 1, 10, 100, ∞}."""
    points = _distorted_s(100)
    nonzeros = [mpme(points, lam=10.0, C=C).n_nonzero for C in (0.1, 1.0, 10.0, 100.0, np.inf)]
    assert all(a > b for a, b in zip(nonzeros, nonzeros[1:])), nonzeros
    assert nonzeros[-1] < 0.05 * 100 * 99  # a sparse skeleton: a few neighbours per cell


def test_weights_respect_the_box_and_W_is_symmetric_without_zeros():
    result = mpme(_distorted_s(60), lam=1.0, C=0.5)
    assert result.weights.min() >= 0 and result.weights.max() <= 2.0 + 1e-12
    W = result.similarity
    assert (W != W.T).nnz == 0 and np.all(W.data > 0)
    assert result.n_nonzero == 2 * np.count_nonzero(result.weights)


def test_knn_candidates_reach_the_all_pairs_optimum():
    points = _distorted_s(100)
    exact = mpme(points)
    sparse = mpme(points, n_neighbors=20)
    assert exact.n_neighbors == 99 and sparse.n_neighbors == 20
    assert sparse.objective[-1] == pytest.approx(exact.objective[-1], rel=1e-6)


def test_decoders_follow_eq_17_and_eq_16():
    points = _distorted_s(60)
    lam = 1.5
    kpca = mpme(points, lam=lam, n_components=2)
    dense_q = regularized_laplacian(kpca.edges, kpca.weights, 60, shift=lam)
    expected = kernel_pca(np.linalg.inv(dense_q), 2)
    np.testing.assert_allclose(np.abs(kpca.embedding), np.abs(expected.coordinates), atol=1e-8)

    eigen = mpme(points, lam=lam, n_components=2, decoder="eigenmap")
    metric = np.diag(np.diagonal(dense_q))  # D_λ = diag((W + λI)1)
    F, mu = eigen.embedding, eigen.eigenvalues
    np.testing.assert_allclose(dense_q @ F, metric @ F * mu, atol=1e-8)
    np.testing.assert_allclose(F.T @ metric @ F, np.eye(2), atol=1e-8)
    assert np.allclose(mu, linalg.eigh(dense_q, metric, eigvals_only=True)[:2])


def test_gaussian_kernel_distance_and_default_scale():
    rng = np.random.default_rng(0)
    points = rng.normal(size=(30, 4))
    pairs = all_pairs(30)
    squared = ((points[pairs[:, 0]] - points[pairs[:, 1]]) ** 2).sum(1)
    np.testing.assert_allclose(pair_distances(points, pairs, 2.0), 2 - 2 * np.exp(-squared / 2.0))
    assert default_phi_scale(points) == pytest.approx(squared.mean())
    assert mpme(points, sigma=2.0).phi_scale == 1.0


def test_screened_pairs_cannot_carry_weight():
    """Pairs dropped before the solve (φ ≥ 2d/λ) have zero weight at the optimum over all pairs.

    Checked by the KKT conditions of (13) over every pair, the dropped ones included: none of
    them may have an ascent direction out of w = 0. A screen that drops pairs the optimum
    needs leaves such a direction and fails here.
    """
    points = _distorted_s(60)
    lam, d, C = 50.0, 2, 10.0
    result = mpme(points, lam=lam, C=C, n_components=d)
    assert result.converged
    pairs = all_pairs(60)
    assert 0 < result.edges.shape[0] < 0.5 * pairs.shape[0]  # the screen removed most pairs
    phi = pair_distances(points, pairs, None) / result.phi_scale
    full = np.zeros(pairs.shape[0])
    index = {tuple(edge): k for k, edge in enumerate(pairs)}
    kept = np.array([index[tuple(edge)] for edge in result.edges])
    full[kept] = result.weights
    assert _kkt_residual(pairs, full, phi, 60, lam=lam, d=d, upper=4 * C) < 1e-4
    value, _, _ = mpme_objective(pairs, full, phi, 60, lam=lam, n_components=d)
    assert value == pytest.approx(result.objective[-1], rel=1e-10)


def test_bad_input_is_reported():
    points = _distorted_s(20)
    with pytest.raises(ValueError, match="lam"):
        mpme(points, lam=0.0)
    with pytest.raises(ValueError, match="C"):
        mpme(points, C=0.0)
    with pytest.raises(ValueError, match="C"):
        mpme(points, C=-np.inf)
    with pytest.raises(ValueError, match="at least 3"):
        mpme(points[:2])
    with pytest.raises(ValueError, match="n_neighbors"):
        mpme(points, n_neighbors=20)
    with pytest.raises(ValueError, match="decoder"):
        mpme(points, decoder="tsne")
    bad = points.copy()
    bad[3, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        mpme(bad)
    duplicated = np.vstack([points, points[:1]])
    assert mpme(duplicated, C=5.0).weights.max() <= 20.0 + 1e-12
    with pytest.raises(ValueError, match="coincide"):
        mpme(np.zeros((5, 2)), C=np.inf, phi_scale=1.0)
    with pytest.raises(ValueError, match="5,000"):
        mpme(np.zeros((5001, 2)))


def test_coinciding_cells_are_capped_at_c_infinity():
    """With C = ∞ a pair at φ = 0 would take an infinite weight; it is capped at 10·d/φ_min,
    every other pair stays unbounded, and the solution is that of the distinct cells with the
    twin tied to its original (both embedded at the same place)."""
    points = _distorted_s(40)
    twins = np.vstack([points, points[:1]])
    result = mpme(twins, C=np.inf, phi_scale=1.0)
    assert result.converged
    twin = np.flatnonzero((result.edges == [0, 40]).all(1))
    cap = duplicate_weight_bound(result.phi, 2)
    assert cap == pytest.approx(20.0 / result.phi[result.phi > 0].min())
    assert result.weights[twin] == pytest.approx(cap)
    others = np.delete(result.weights, twin)
    assert others.max() < cap
    np.testing.assert_allclose(result.embedding[0], result.embedding[40], atol=0.05 * np.abs(result.embedding).max())


def test_no_learned_edge_still_gives_an_embedding():
    """λ so large that every pair is screened out: W = 0 and the kernel is I/λ, whose
    spectrum is fully degenerate (LAPACK's partial eigensolvers return nothing there)."""
    result = mpme(_distorted_s(30), lam=1e6)
    assert result.n_nonzero == 0 and result.edges.shape[0] == 0
    assert result.embedding.shape == (30, 2) and np.all(np.isfinite(result.embedding))
