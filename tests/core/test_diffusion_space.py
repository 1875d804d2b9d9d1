"""The cells' multiscale diffusion space (``_core/cellgraphs/diffusion.py``)."""

import numpy as np
import pytest
from scipy import sparse

from scskeleton._core.cellgraphs.diffusion import (
    MIN_COMPONENTS, NEAR_ONE, diffusion_components, multiscale_space, neighbour_distances,
)


def _clusters(n_clusters, per=30, seed=0, link=0.5, n_links=5):
    """Affinities of ``n_clusters`` dense blocks, each joined to the next by ``n_links`` edges of weight ``link``."""
    rng = np.random.default_rng(seed)
    blocks = [rng.uniform(0.5, 1.0, (per, per)) for _ in range(n_clusters)]
    affinity = sparse.block_diag([(b + b.T) / 2 for b in blocks]).tolil()
    for c in range(n_clusters - 1):
        for k in range(n_links):
            affinity[c * per + k, (c + 1) * per + k] = affinity[(c + 1) * per + k, c * per + k] = link
    affinity.setdiag(0)
    return affinity.tocsr()


def test_components_are_eigenpairs_of_the_random_walk():
    affinity = _clusters(4)
    values, vectors = diffusion_components(affinity, n_components=8)
    walk = sparse.diags(1 / np.asarray(affinity.sum(axis=1)).ravel()) @ affinity
    np.testing.assert_allclose(walk @ vectors, vectors * values, atol=1e-8)
    assert values[0] == pytest.approx(1.0) and (np.diff(values) <= 1e-12).all()


def test_the_eigengap_keeps_one_component_per_extra_cluster():
    """Five loosely joined clusters: four eigenvalues near 1, then a gap; the space keeps those four."""
    values, vectors = diffusion_components(_clusters(5), n_components=10)
    space = multiscale_space(values, vectors)
    assert space.shape == (150, 4)
    np.testing.assert_allclose(space, vectors[:, 1:5] * values[1:5] / (1 - values[1:5]))
    # fewer than the minimum clusters still give MIN_COMPONENTS components
    values, vectors = diffusion_components(_clusters(2), n_components=10)
    assert multiscale_space(values, vectors).shape[1] == MIN_COMPONENTS


def test_distances_in_the_space_are_diffusion_pseudotime_distances():
    """‖y_i − y_j‖² = Σ_k (λ_k/(1−λ_k))² (ψ_k(i) − ψ_k(j))² over the full spectrum equals the distance
    between rows of M = Σ_{t≥1} Tᵗ (stationary part removed) in the metric D⁻¹, computed densely on a small graph."""
    affinity = _clusters(3, per=10, link=0.01, n_links=1)
    n = affinity.shape[0]
    values, vectors = diffusion_components(affinity, n_components=n - 2)
    full = vectors[:, 1:] * values[1:] / (1 - values[1:])
    degree = np.asarray(affinity.sum(axis=1)).ravel()
    walk = (sparse.diags(1 / degree) @ affinity).toarray()
    stationary = np.outer(np.ones(n), degree / degree.sum())
    accumulated = np.linalg.inv(np.eye(n) - walk + stationary) - np.eye(n)
    dense = lambda i, j: np.sqrt(((accumulated[i] - accumulated[j]) ** 2 / degree).sum())
    for i, j in [(0, 5), (0, 25), (12, 28)]:
        # the two smallest eigenpairs are left out of the sparse solve; they weigh (λ/(1−λ))², nearly 0
        assert np.linalg.norm(full[i] - full[j]) == pytest.approx(dense(i, j), rel=1e-3)


def test_pieces_joined_by_a_few_weak_edges_are_left_out_like_separate_ones():
    """One weak edge between clusters: 1 − λ below NEAR_ONE, a weight λ/(1−λ) in the thousands that would
    swamp every distance within the clusters; those components are dropped, the well-joined ones kept."""
    values, vectors = diffusion_components(_clusters(4, link=0.01, n_links=1), n_components=8)
    assert ((1 - values[1:4]) < NEAR_ONE).all()
    space = multiscale_space(values, vectors)
    assert (np.abs(space).max(axis=0) < 1 / NEAR_ONE).all()
    values, vectors = diffusion_components(_clusters(4), n_components=8)
    assert ((1 - values[1:4]) > NEAR_ONE).all() and multiscale_space(values, vectors).shape[1] == 3


def test_a_disconnected_graph_drops_the_stationary_vector_of_each_piece():
    affinity = sparse.block_diag([_clusters(2), _clusters(3)]).tocsr()
    values, vectors = diffusion_components(affinity, n_components=8)
    assert (values > 1 - 1e-6).sum() == 2
    assert np.isfinite(multiscale_space(values, vectors)).all()


def test_the_same_graph_gives_the_same_space():
    affinity = _clusters(4)
    np.testing.assert_array_equal(multiscale_space(*diffusion_components(affinity)),
                                  multiscale_space(*diffusion_components(affinity)))


def test_neighbour_distances_and_bad_inputs():
    points = np.arange(10.0)[:, None]
    distances = neighbour_distances(points, 2)
    assert distances.shape == (10, 10) and (distances.getnnz(axis=1) == 2).all()
    assert distances[0, 1] == 1.0 and distances[0, 2] == 2.0
    with pytest.raises(ValueError, match="square"):
        diffusion_components(sparse.csr_matrix((3, 4)))
    with pytest.raises(ValueError, match="at least"):
        diffusion_components(sparse.identity(3, format="csr"))
