import numpy as np
import pytest
from scipy import optimize, sparse
from threadpoolctl import threadpool_limits

import scskeleton as sks
from scskeleton._core.graphs import laplacian, minimum_spanning_tree
from scskeleton._core.trees.assign import soft_assignment
from scskeleton._core.trees.defaults import default_n_centers
from scskeleton._core.trees.l1_program import L1Program
from scskeleton._core.trees.rpg import default_n_nodes, descend, rpg, update_centers


def _points(name, **kwargs):
    return getattr(sks.datasets, name)(**kwargs).obsm["X_pca"]


def _non_increasing(objective, rtol):
    previous, current = objective[:-1], objective[1:]
    return bool(np.all(current <= previous + rtol * np.abs(previous)))


@pytest.mark.parametrize("graph", ["tree", "l1"])
@pytest.mark.parametrize("n_nodes", [None, 40])
def test_objective_never_increases(graph, n_nodes):
    data = _points("distorted_s", n_cells=100, random_state=1)
    result = rpg(data, graph=graph, n_nodes=n_nodes, sigma=0.01, gamma=0.5, maxiter=25, tol=0.0)
    # the tree's blocks are closed-form; the ℓ1 block is an LP solved to the interior-point method's tolerance
    assert _non_increasing(result.objective, 1e-12 if graph == "tree" else 1e-8)
    assert result.objective[-1] < result.objective[0]


@pytest.mark.parametrize("clusters", [1, 3])
def test_l1_program_solution_is_feasible_and_optimal(clusters):
    # with 3 far-apart clusters the candidate graph falls into 3 components, solved separately
    rng = np.random.default_rng(0)
    landmarks = rng.normal(size=(24, 3))
    if clusters > 1:
        landmarks += 10.0 * np.repeat(np.eye(3), 8, axis=0)
    centers = landmarks + 0.1 * rng.normal(size=landmarks.shape)
    program = L1Program(landmarks, n_neighbors=4, lam=0.7)
    assert len(program._blocks) == clusters
    adjacency, reconstruction = program.solve(centers)
    dense = adjacency.toarray()
    assert (dense >= 0).all() and np.allclose(dense, dense.T) and np.all(np.diag(dense) == 0)
    candidates = np.zeros_like(dense, dtype=bool)
    candidates[program.edges[:, 0], program.edges[:, 1]] = True
    assert not dense[~(candidates | candidates.T)].any()  # only candidate edges
    value = np.sum(dense * ((centers[:, None] - centers[None]) ** 2).sum(-1)) + 0.7 * reconstruction

    # the primal of (19)/(23) as one program, solved directly by HiGHS' simplex method: same optimum
    size, dim = landmarks.size, landmarks.shape[1]
    heads, tails = program.edges[:, 0], program.edges[:, 1]
    # weight w_e of edge (a, b) adds w_e z_b to node a's reconstruction and w_e z_a to node b's
    rows = np.concatenate([(heads[:, None] * dim + np.arange(dim)).ravel(), (tails[:, None] * dim + np.arange(dim)).ravel()])
    cols = np.concatenate([np.repeat(np.arange(heads.size), dim)] * 2)
    vals = np.concatenate([landmarks[tails].ravel(), landmarks[heads].ravel()])
    reconstruct = sparse.csr_matrix((vals, (rows, cols)), shape=(size, heads.size))
    equality = sparse.hstack([reconstruct, sparse.identity(size), -sparse.identity(size)])
    phi = np.sum((centers[heads] - centers[tails]) ** 2, axis=1)
    primal = optimize.linprog(
        np.concatenate([2 * phi, np.full(2 * size, 0.7)]), A_eq=equality, b_eq=landmarks.ravel(), bounds=(0, None), method="highs"
    )
    assert value == pytest.approx(primal.fun, rel=1e-7)
    # the same edges carry weight (an optimal vertex here is unique)
    vertex = np.zeros_like(dense)
    vertex[heads, tails] = vertex[tails, heads] = primal.x[: heads.size]
    np.testing.assert_array_equal(dense > 0, vertex > 1e-9)
    # components are solved on as many threads as BLAS may use; one thread gives the same W
    with threadpool_limits(limits=1):
        serial, _ = L1Program(landmarks, n_neighbors=4, lam=0.7).solve(centers)
    with threadpool_limits(limits=2):
        threaded, _ = L1Program(landmarks, n_neighbors=4, lam=0.7).solve(centers)
    np.testing.assert_array_equal(serial.toarray(), threaded.toarray())


def test_center_update_is_eq22_and_a_block_minimum():
    rng = np.random.default_rng(1)
    data, centers = rng.normal(size=(60, 4)), rng.normal(size=(12, 4))
    gamma, sigma = 2.0, 0.5
    assignment = soft_assignment(data, centers, sigma)
    P = assignment.matrix.toarray() if sparse.issparse(assignment.matrix) else assignment.matrix
    tree = minimum_spanning_tree(centers)
    L = laplacian(tree)
    updated = update_centers(centers, L, tree, assignment.column_mass, P.T @ data, gamma)
    expected = np.linalg.solve(2 / gamma * L + np.diag(P.sum(0)), P.T @ data)
    np.testing.assert_allclose(updated, expected, atol=1e-10)

    def objective(C):
        dist = ((data[:, None] - C[None]) ** 2).sum(-1)
        return 2 * np.sum(C * (L @ C)) + gamma * np.sum(P * dist)

    best = objective(updated)
    for _ in range(10):
        assert objective(updated + 1e-3 * rng.normal(size=updated.shape)) > best


def test_centers_of_massless_components_stay_put():
    centers = np.array([[0.0, 0.0], [1.0, 0.0], [50.0, 50.0]])
    adjacency = sparse.csr_matrix(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=float))
    mass = np.array([2.0, 3.0, 0.0])
    updated = update_centers(centers, laplacian(adjacency), adjacency, mass, np.ones((3, 2)), 1.0)
    assert np.isfinite(updated).all()
    np.testing.assert_array_equal(updated[2], centers[2])


def test_same_random_state_same_graph():
    data = _points("three_clusters", n_cells=150, random_state=2)
    first = rpg(data, graph="l1", n_nodes=50, random_state=3, maxiter=5)
    second = rpg(data, graph="l1", n_nodes=50, random_state=3, maxiter=5)
    np.testing.assert_array_equal(first.centers, second.centers)
    assert (first.adjacency != second.adjacency).nnz == 0
    np.testing.assert_array_equal(first.objective, second.objective)


def test_default_number_of_nodes():
    # a node per ten points, 50 at least (or N), DDRTree's rule at most: the same K for both learners
    assert default_n_nodes(800) == 80 and default_n_nodes(12) == 12 and default_n_nodes(200) == 50
    assert default_n_nodes(70_000) == default_n_centers(70_000, most=None) < 150


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(graph="star"), "graph"),
        (dict(sigma=0.0), "sigma"),
        (dict(gamma=-1.0), "gamma"),
        (dict(graph="l1", lam=0.0), "lam"),
        (dict(graph="l1", n_neighbors=40), "n_neighbors"),
        (dict(n_nodes=1), "n_nodes"),
        (dict(n_nodes=41), "n_nodes"),
    ],
)
def test_bad_parameters(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment):
        rpg(_points("circle", n_cells=40), **kwargs)


def test_failed_program_is_reported(monkeypatch):
    # one interior-point iteration cannot reach the optimum: the solver stops short, and says so
    monkeypatch.setattr("scskeleton._core.trees.l1_program.LP_MAX_ITER", 1)
    with pytest.raises(ValueError, match="linear program .* failed"):
        rpg(_points("circle", n_cells=40), graph="l1", maxiter=2)


@pytest.mark.parametrize("scale", [1e-6, 1e6])
def test_l1_graph_is_the_same_in_any_units(scale):
    # z, φ and lam scaled by s, s², s leave the optimal W unchanged; the program is solved in the
    # landmarks' own units, so the solver's absolute tolerances cannot tell the scales apart
    # (coordinates of 1e6 made it fail, of 1e-6 stopped it at a denser W)
    data = _points("toy_tree", random_state=0)
    unit = rpg(data, graph="l1", lam=1.0, random_state=0)
    scaled = rpg(data * scale, graph="l1", lam=scale, random_state=0)
    assert scaled.n_iter == unit.n_iter
    np.testing.assert_allclose(scaled.objective / scale**2, unit.objective, rtol=1e-5)
    for first, second in ((scaled.adjacency, unit.adjacency), (scaled.lp_adjacency, unit.lp_adjacency)):
        np.testing.assert_array_equal(sparse.triu(first, 1).nonzero(), sparse.triu(second, 1).nonzero())
    np.testing.assert_allclose(scaled.centers / scale, unit.centers, atol=1e-4 * np.abs(unit.centers).max())


def test_reused_program_matches_a_solve_from_scratch():
    # the solver kept between iterations (new right-hand side only) solves the new program, not the old one
    rng = np.random.default_rng(4)
    landmarks = rng.normal(size=(40, 3))
    program = L1Program(landmarks, n_neighbors=5, lam=0.5)
    program.solve(landmarks)
    moved = landmarks + 0.3 * rng.normal(size=landmarks.shape)
    warm, warm_rec = program.solve(moved)
    cold, cold_rec = L1Program(landmarks, n_neighbors=5, lam=0.5).solve(moved)

    def value(adjacency, rec):
        dense = adjacency.toarray()
        return np.sum(dense * ((moved[:, None] - moved[None]) ** 2).sum(-1)) + 0.5 * rec

    assert value(warm, warm_rec) == pytest.approx(value(cold, cold_rec), rel=1e-8)


def test_stopping_rule_survives_an_objective_through_zero():
    # two moons at Table 1's parameters: the objective crosses zero (negative entropy term), which
    # stalled the rule |Δ| / |objective| for 100+ iterations
    data = _points("moons", n_cells=200, random_state=1)
    result = rpg(data, graph="tree", sigma=0.01, gamma=3.0, maxiter=200, tol=1e-4)
    assert result.converged and result.n_iter <= 60


def _slow_contraction(target, rate=0.05):
    """A step that moves 5 % of the way to ``target``: the slow slide of plain alternation."""

    def step(start):
        updated = start + rate * (target - start)
        return updated, None, float(np.sum((updated - target) ** 2)), float(np.sum(target**2))

    return step


def test_over_relaxation_keeps_the_objective_monotone_and_needs_fewer_passes():
    target = np.arange(12.0).reshape(4, 3)
    relaxed = descend(np.zeros_like(target), _slow_contraction(target), maxiter=500, tol=1e-9)
    plain = descend(np.zeros_like(target), _slow_contraction(target), maxiter=500, tol=1e-9, over_relax=False)
    assert relaxed.converged and plain.converged
    assert _non_increasing(relaxed.objective, 0.0)
    assert relaxed.n_passes < plain.n_passes / 2
    np.testing.assert_allclose(relaxed.centers, target, atol=1e-3)


def test_rejected_over_relaxed_steps_are_replaced_by_the_plain_step():
    # a step that overshoots: over-relaxing it increases the objective, so most trials are rejected
    target = np.ones((3, 2))

    def step(start):
        updated = target + 0.9 * (target - start)  # oscillates around the target, contracting
        return updated, None, float(np.sum((updated - target) ** 2)), 1.0

    result = descend(np.zeros((3, 2)), step, maxiter=200, tol=1e-12)
    assert _non_increasing(result.objective, 0.0)
    assert result.n_passes > result.objective.size  # some passes were rejected trials, not recorded


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("graph", ["tree", "l1"])
def test_over_relaxed_rpg_reaches_the_plain_objective_in_fewer_passes(seed, graph):
    data = _points("toy_tree", n_cells=300, random_state=seed)
    relaxed = rpg(data, graph=graph, sigma=0.01, gamma=10.0, maxiter=200, tol=1e-4, over_relax=True)
    plain = rpg(data, graph=graph, sigma=0.01, gamma=10.0, maxiter=200, tol=1e-4)
    assert relaxed.converged and plain.converged
    assert relaxed.n_iter < plain.n_iter
    assert relaxed.objective[-1] <= plain.objective[-1] + 1e-3 * abs(plain.objective[-1])


def test_l1_graph_prints_nothing_to_standard_output():
    # a compiled solver may print from C, Rust or C++, past Python's sys.stdout: run in a fresh process
    import subprocess
    import sys

    code = (
        "import numpy as np; from scskeleton._core.trees.rpg import rpg; "
        "rpg(np.random.default_rng(0).normal(size=(60, 2)), graph='l1', maxiter=3)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == ""
