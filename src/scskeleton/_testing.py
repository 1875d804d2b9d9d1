"""Measures and checks shared by the tests and the tutorials, each written once.

The tests check a learner against the same numbers the tutorials print (how
well an embedding recovers a circle's angle, a flat sheet, class labels); with
one definition the two cannot drift apart. Not part of the public API.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = [
    "angle_agreement",
    "branch_majorities",
    "conditions_with_fates",
    "central_differences",
    "curved_tree",
    "directional_difference",
    "distinct_colours",
    "fit_on_counts",
    "following_fate",
    "one_nn_accuracy",
    "procrustes_r2",
    "random_walk_tree",
    "realistic_with_shared_genes",
    "share_balanced_counts",
    "winding_numbers",
]

#: Step of the central differences: the error is O(step²) from the third derivative and
#: O(eps / step) from round-off, both about 1e-10 relative for smooth objectives of size ~1.
STEP = 1e-6


def central_differences(function: Callable[[np.ndarray], float], point: np.ndarray, step: float = STEP) -> np.ndarray:
    """Gradient of the scalar ``function`` at ``point`` by central differences, one coordinate at a time.

    Returns an array of ``point``'s shape: entry i is (f(x + h e_i) - f(x - h e_i)) / 2h.
    """
    point = np.asarray(point, dtype=float)
    gradient = np.empty_like(point)
    for index in np.ndindex(point.shape):
        up, down = point.copy(), point.copy()
        up[index] += step
        down[index] -= step
        gradient[index] = (function(up) - function(down)) / (2 * step)
    return gradient


def directional_difference(
    function: Callable[[np.ndarray], float], point: np.ndarray, direction: np.ndarray, step: float = STEP
) -> float:
    """Derivative of ``function`` at ``point`` along ``direction`` by one central difference."""
    point, direction = np.asarray(point, dtype=float), np.asarray(direction, dtype=float)
    return float((function(point + step * direction) - function(point - step * direction)) / (2 * step))


def angle_agreement(coordinates: np.ndarray, true_angle: np.ndarray) -> float:
    """How well the angle of the centred first two coordinates follows ``true_angle`` (radians).

    |mean exp(i(φ - θ))|, the larger for the two orientations: 1 when the
    embedding is the true circle up to a rotation and a reflection, about 0
    when its angle is unrelated to the truth.
    """
    centred = coordinates[:, :2] - coordinates[:, :2].mean(axis=0)
    phi = np.arctan2(centred[:, 1], centred[:, 0])
    true_angle = np.asarray(true_angle, dtype=float)
    return float(max(abs(np.mean(np.exp(1j * (phi - true_angle)))), abs(np.mean(np.exp(1j * (phi + true_angle))))))


def procrustes_r2(embedding: np.ndarray, truth: np.ndarray) -> float:
    """Share of the variance of ``truth`` explained by ``embedding`` after the best rotation and scaling.

    1 when the embedding is the true coordinates up to a similarity transform
    (the flat sheet is recovered).
    """
    from scipy.linalg import orthogonal_procrustes

    a, b = embedding - embedding.mean(axis=0), truth - truth.mean(axis=0)
    rotated = a @ orthogonal_procrustes(a, b)[0]
    scale = np.vdot(rotated, b) / np.vdot(rotated, rotated)
    return float(1.0 - np.sum((scale * rotated - b) ** 2) / np.sum(b**2))


def one_nn_accuracy(coordinates: np.ndarray, labels: np.ndarray, components: np.ndarray | None = None) -> float:
    """Leave-one-out accuracy of the 1-nearest-neighbour classifier (the ESL paper's Table I protocol).

    With ``components``, cells of different learned components are infinitely
    far apart: each component is a separate structure with its own coordinates.
    """
    from scipy.spatial import distance

    labels = np.asarray(labels)
    gaps = distance.cdist(coordinates, coordinates, "sqeuclidean")
    np.fill_diagonal(gaps, np.inf)
    if components is not None:
        components = np.asarray(components)
        gaps[components[:, None] != components[None, :]] = np.inf
    return float(np.mean(labels[gaps.argmin(axis=1)] == labels))


def winding_numbers(adjacency, positions: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """Winding number around ``centre`` of every cycle in a cycle basis of the graph.

    ``positions`` places node i at ``positions[i, :2]``; ``centre`` defaults to
    their mean. Each edge turns by its angle seen from the centre, taken the
    short way (below π), so the sum over a cycle is a whole number of turns.
    Whether some cycle of the graph goes around the centre does not depend on
    the basis: the parity of the winding number is linear on the cycle space,
    so a graph holds a cycle with an odd winding number exactly when some
    basis cycle has one.
    """
    import networkx as nx

    points = np.asarray(positions, dtype=float)[:, :2]
    centre = points.mean(axis=0) if centre is None else np.asarray(centre, dtype=float)
    angle = np.arctan2(points[:, 1] - centre[1], points[:, 0] - centre[0])
    graph = nx.from_scipy_sparse_array(adjacency)
    turns = []
    for cycle in nx.cycle_basis(graph):
        steps = np.diff(angle[cycle + cycle[:1]])
        turns.append(np.sum((steps + np.pi) % (2 * np.pi) - np.pi) / (2 * np.pi))
    return np.rint(np.asarray(turns, dtype=float)).astype(int)


def distinct_colours(path) -> int:
    """Number of distinct pixel colours of an image file: 1 for a blank canvas, hundreds for a plot."""
    from matplotlib import image

    pixels = np.asarray(image.imread(path))
    if pixels.dtype != np.uint8:  # PNGs are read as floats in [0, 1]
        pixels = np.rint(pixels * 255).astype(np.uint8)
    if pixels.ndim == 2:
        return int(np.unique(pixels).size)
    # one integer per pixel (its channels' bytes): a 1-D unique is far faster than unique rows
    packed = np.zeros(pixels.shape[:2], dtype=np.uint32)
    for channel in range(pixels.shape[2]):
        packed |= pixels[:, :, channel].astype(np.uint32) << (8 * channel)
    return int(np.unique(packed).size)


def branch_majorities(adata, key: str, labels) -> dict[str, tuple[object, float]]:
    """Majority label of the cells on each branch of a rooted graph, and its share of them.

    The branches are the segments of ``uns[key]["segments"]`` that do not start
    at the root; a cell's segment is ``obs[f"{key}_segment"]`` (``tl.pseudotime``).
    ``labels`` holds one label per cell (a known fate, a cell type).
    """
    labels = np.asarray(labels)
    root = set(np.atleast_1d(adata.uns[key]["root"]).tolist())
    segment = adata.obs[f"{key}_segment"].astype(str).to_numpy()
    found = {}
    for name, path in adata.uns[key]["segments"].items():
        if int(path[0]) in root:
            continue
        values, counts = np.unique(labels[segment == str(name)], return_counts=True)
        found[str(name)] = (values[counts.argmax()], float(counts.max() / counts.sum())) if counts.size else (None, 0.0)
    return found


def random_walk_tree(n_fates: int, n_cells: int, seed: int, *, n_genes: int = 2000, n_programs: int = 12,
                     depth: float = 5000.0):
    """Counts along a random binary tree whose gene programs are random walks (PROSSTT-like).

    A second generator, written apart from ``sks.datasets.simulate_trajectory`` (on which the
    pruning thresholds were chosen): a random binary tree of ``n_fates`` leaves, each branch
    40–100 steps long; ``n_programs`` gene programs that move along every branch as random
    walks with momentum, continuing from where the parent branch ended (branches curve and part
    at their own pace); genes as sparse signed mixtures of the programs (log-means); branch
    sizes log-normal and cells crowded towards either end of their branch; library sizes
    log-normal; negative-binomial counts with mean-dependent dispersion, and dropout that is
    more frequent at low means. ``obs["true_pseudotime"]`` (steps from the root),
    ``obs["true_branch"]`` and ``uns["true_parent"]`` (each branch's parent, "-1" for the
    root's) hold the truth. Used by the topology benchmarks and the tests.
    """
    import pandas as pd
    from anndata import AnnData

    rng = np.random.default_rng(seed)
    parent, leaves = {0: -1}, [0]
    while len(leaves) < n_fates:
        split = leaves.pop(int(rng.integers(len(leaves))))
        for _ in range(2):
            parent[len(parent)] = split
            leaves.append(len(parent) - 1)
    n_branches = len(parent)
    length = {b: int(rng.integers(40, 100)) for b in range(n_branches)}
    programs, start = {}, {}
    for b in range(n_branches):  # parents are numbered before their children
        level = np.zeros(n_programs) if parent[b] < 0 else programs[parent[b]][-1]
        start[b] = 0 if parent[b] < 0 else start[parent[b]] + length[parent[b]]
        velocity, steps = rng.normal(0, 0.08, n_programs), []
        for _ in range(length[b]):
            velocity = 0.9 * velocity + rng.normal(0, 0.04, n_programs)
            level = level + velocity
            steps.append(level)
        programs[b] = np.array(steps)
    loadings = rng.gamma(0.3, 1.0, (n_programs, n_genes)) * (rng.random((n_programs, n_genes)) < 0.3)
    loadings *= rng.choice([-1, 1], size=loadings.shape)
    base = rng.normal(-1.0, 1.5, n_genes)
    weight = rng.lognormal(0, 0.7, n_branches) * np.array([length[b] for b in range(n_branches)])
    counts = rng.multinomial(n_cells, weight / weight.sum())
    levels, time, branch = [], [], []
    for b in range(n_branches):
        position = np.minimum((rng.random(counts[b]) ** rng.uniform(0.5, 2.0) * length[b]).astype(int), length[b] - 1)
        levels.append(programs[b][position])
        time.append(start[b] + position)
        branch += [b] * counts[b]
    mean = np.exp(base + np.clip(np.vstack(levels) @ loadings, -10, 6))
    library = rng.lognormal(np.log(depth), 0.4, mean.shape[0])
    mean = mean / mean.sum(axis=1, keepdims=True) * library[:, None]
    shape = 1.0 / (0.1 + 1.0 / np.sqrt(mean.mean(axis=0) + 0.1))
    x = rng.poisson(rng.gamma(shape, mean / shape)).astype(np.float32)
    x *= rng.random(x.shape) < 1.0 / (1.0 + np.exp(-1.5 * np.log1p(mean)))  # dropout, more at low means
    adata = AnnData(x)
    adata.obs["true_pseudotime"] = np.concatenate(time).astype(float)
    adata.obs["true_branch"] = pd.Categorical([str(b) for b in branch])
    adata.uns["true_parent"] = {str(b): str(p) for b, p in parent.items()}
    return adata


def curved_tree(seed: int, *, n_cells: int = 1500, n_dims: int = 50, noise: float = 0.3):
    """A two-fate tree of smooth random curves in ``n_dims`` dimensions, with genes on its TRUE time.

    A third generator, written apart from the other two and from the tests' thresholds: the trunk
    and each branch run along a random direction plus a sum of low-frequency sines per dimension
    (every branch curves at its own pace), the fork at a random true time in [0.25, 0.5], the cells'
    times Beta-distributed (density uneven along the tree), the second fate taking a random 25–50 %
    of the cells past the fork, isotropic noise of sd ``noise`` on the geometry
    (``obsm["X_geometry"]``). 240 genes, each with noise sd 0.5: 100 follow one random curve of the
    true time (a tanh step plus a Gaussian bump) on every branch (``var["true_program"]`` "shared"),
    100 are constant ("constant"), 40 follow such a curve plus a ramp of ±1–2 over the first 0.3 of
    time past the fork on one fate ("branch", ``var["true_branch"]`` names it). ``obs`` holds
    ``true_pseudotime`` and ``true_branch`` ("branch_0" the trunk, "branch_1" and "branch_2" the fates).
    Used by the branch-test calibration benchmark (generator "curves") and the tests.
    """
    import pandas as pd
    from anndata import AnnData

    rng = np.random.default_rng([31, seed])
    fork = rng.uniform(0.25, 0.5)
    time = rng.beta(rng.uniform(0.8, 1.5), rng.uniform(0.8, 1.5), n_cells)
    second = rng.random(n_cells) < rng.uniform(0.25, 0.5)
    branch = np.where(time < fork, 0, np.where(second, 2, 1))

    def direction():
        vector = rng.normal(size=n_dims)
        return vector / np.linalg.norm(vector)

    def wiggle(share):  # zero at share 0: each curve starts where its parent ended
        frequency = np.arange(1, 4)
        amplitude = rng.normal(size=(n_dims, 3)) * 0.6 / frequency
        phase = rng.uniform(0, 2 * np.pi, (n_dims, 3))
        waves = np.sin(np.pi * frequency * share[:, None, None] + phase) - np.sin(phase)
        return (amplitude * waves).sum(axis=-1)

    geometry = 6 * time[:, None] * direction() + wiggle(np.minimum(time, fork) / fork)
    for b in (1, 2):
        mine = branch == b
        geometry[mine] += 6 * (time[mine] - fork)[:, None] * direction() + wiggle((time[mine] - fork) / (1 - fork))
    geometry += noise * rng.standard_normal(geometry.shape)

    def trend(n_genes):
        step, centre = rng.uniform(0.5, 2, n_genes), rng.uniform(0.1, 0.9, n_genes)
        width, bump = rng.uniform(0.1, 0.4, n_genes), rng.uniform(-1.5, 1.5, n_genes)
        peak, spread = rng.uniform(0, 1, n_genes), rng.uniform(0.1, 0.3, n_genes)
        t = time[:, None]
        return step * np.tanh((t - centre) / width) + bump * np.exp(-(((t - peak) / spread) ** 2))

    n_shared, n_constant, n_branch = 100, 100, 40
    fate = rng.integers(1, 3, n_branch)
    ramp = np.clip((time[:, None] - fork) / 0.3, 0, 1) * (branch[:, None] == fate)
    values = np.hstack([trend(n_shared), np.zeros((n_cells, n_constant)),
                        trend(n_branch) + rng.uniform(1, 2, n_branch) * rng.choice([-1, 1], n_branch) * ramp])
    values = 3 + values + 0.5 * rng.standard_normal(values.shape)
    var = pd.DataFrame({
        "true_program": ["shared"] * n_shared + ["constant"] * n_constant + ["branch"] * n_branch,
        "true_branch": [""] * (n_shared + n_constant) + [f"branch_{b}" for b in fate],
    }, index=[f"shared_{i}" for i in range(n_shared)] + [f"constant_{i}" for i in range(n_constant)]
       + [f"branch_{i}" for i in range(n_branch)])
    adata = AnnData(values, var=var)
    adata.obs["true_pseudotime"] = time
    adata.obs["true_branch"] = pd.Categorical([f"branch_{b}" for b in branch])
    adata.obsm["X_geometry"] = geometry
    return adata


def dla_with_genes(seed: int, *, n_branches: int = 3, n_cells: int = 2000, n_dims: int = 50, noise: float = 4.0):
    """PHATE's tree of random walks (``sks.datasets.dla_tree``), with genes on its TRUE time.

    A fourth generator for the tests along a learned pseudotime: every branch is a Gaussian random
    walk, so a learned tree, which smooths the walk's wiggles, runs at a pace that changes from step
    to step along each branch (unlike the smooth curves of :func:`curved_tree`). The geometry's 20
    principal components are in ``obsm["X_geometry"]``. 260 genes, each with noise sd 0.5: 100
    follow one curve of the true time (every other one a sigmoid, the others a Gaussian bump, of
    width 5–20 % of the tree's span) on every branch (``var["true_program"]`` "shared"), 100 are
    constant ("constant"), 60 ramp by ±1–2 along one side branch ("branch", ``var["true_branch"]``
    names it). ``obs`` holds ``true_pseudotime`` (in steps) and ``true_branch`` ("branch_0" the backbone).
    ``n_branches`` (walks, ≥ 2) as in ``dla_tree``. Used by the branch-test calibration benchmark
    (generator "dla") and the tests.
    """
    import pandas as pd
    from anndata import AnnData

    import scskeleton as sks

    if n_branches < 2:
        raise ValueError(f"n_branches must be at least 2 (a side branch for the branch genes); got {n_branches}.")
    geometry = sks.datasets.dla_tree(n_cells, n_dims=n_dims, n_branches=n_branches, noise=noise, random_state=seed)
    rng = np.random.default_rng([37, seed])
    steps = geometry.obs["true_pseudotime"].to_numpy()
    time = steps / steps.max()
    n_shared, n_constant, n_branch = 100, 100, 60
    centre, width = rng.uniform(0.1, 0.9, n_shared), rng.uniform(0.05, 0.2, n_shared)
    amplitude = rng.uniform(1, 2, n_shared)
    scaled = (time[:, None] - centre) / width
    sigmoid = np.arange(n_shared) % 2 == 1
    shared = amplitude * np.where(sigmoid, 1 / (1 + np.exp(-scaled)), np.exp(-0.5 * scaled**2))
    side = [f"branch_{1 + g % (n_branches - 1)}" for g in range(n_branch)]
    own = geometry.obs["true_branch"].astype(str).to_numpy()
    start = dict(zip([f"branch_{b}" for b in range(n_branches)], geometry.uns["dla_tree"]["branch_start_time"]))
    ramps = np.column_stack([np.where(own == b, steps - start[b], 0.0) for b in side])
    ramps = ramps / np.maximum(ramps.max(axis=0), np.finfo(float).tiny)
    ramps = ramps * rng.uniform(1, 2, n_branch) * rng.choice([-1, 1], n_branch)
    values = 3 + np.hstack([shared, np.zeros((n_cells, n_constant)), ramps])
    values += 0.5 * rng.standard_normal(values.shape)
    var = pd.DataFrame({
        "true_program": ["shared"] * n_shared + ["constant"] * n_constant + ["branch"] * n_branch,
        "true_branch": [""] * (n_shared + n_constant) + side,
    }, index=[f"shared_{i}" for i in range(n_shared)] + [f"constant_{i}" for i in range(n_constant)]
       + [f"branch_{i}" for i in range(n_branch)])
    adata = AnnData(values, obs=geometry.obs.copy(), var=var)
    coordinates = np.asarray(geometry.X, dtype=float)
    left, singular, _ = np.linalg.svd(coordinates - coordinates.mean(axis=0), full_matrices=False)
    adata.obsm["X_geometry"] = left[:, :20] * singular[:20]
    return adata


def share_balanced_counts(seed: int, *, n_cells: int = 2000, n_pairs: int = 150, n_null: int = 700,
                          depth: float = 3000.0, dispersion: float = 0.0):
    """Counts of a two-fate tree whose null genes keep their share of every cell's counts.

    Null genes of real or generated counts are rarely null on normalised values: where some genes
    rise, every other gene's share of a cell's counts falls. Here the changing genes come in pairs
    whose shares move in opposite directions by the same amount, so every cell's expected total is
    its library size alone and the ``n_null`` genes of constant share are exact null genes of
    ``normalize_total`` values, whichever genes shaped the tree. The trunk runs over true time
    [0, 1], each fate over [1, 2] (cells uniform in time, the fates drawn evenly); each pair follows
    a tanh step of the true time on every branch, or a rise on one fate past the fork, of 50–95 % of
    the pair's smaller base share. Base shares are log-normal (sd 1.2), library sizes ``depth`` times
    a log-normal of sd 0.3; counts Poisson (``dispersion=0``) or negative binomial (variance
    μ + φμ²). ``var["null"]`` marks the null genes, ``obs["true_pseudotime"]`` the time.
    """
    import pandas as pd
    from anndata import AnnData
    from scipy import sparse

    rng = np.random.default_rng([47, seed])
    time = rng.uniform(0, 2, n_cells)
    branch = np.where(time < 1, 0, rng.integers(1, 3, n_cells))
    n_genes = 2 * n_pairs + n_null
    base = rng.lognormal(0, 1.2, n_genes)
    base /= base.sum()
    share = np.tile(base, (n_cells, 1))
    for pair in range(n_pairs):
        up, down = 2 * pair, 2 * pair + 1
        if rng.random() < 0.5:
            course = np.tanh((time - rng.uniform(0.3, 1.7)) * rng.uniform(3, 8))
        else:
            course = np.where(branch == rng.integers(1, 3), np.tanh((time - 1) * 4), 0.0)
        change = rng.uniform(0.5, 0.95) * min(base[up], base[down]) * course
        share[:, up] += change
        share[:, down] -= change
    mean = share * (depth * rng.lognormal(0, 0.3, n_cells))[:, None]
    if dispersion > 0:
        counts = rng.negative_binomial(1 / dispersion, 1 / (1 + dispersion * mean))
    else:
        counts = rng.poisson(mean)
    adata = AnnData(sparse.csr_matrix(counts.astype(np.float32)),
                    var=pd.DataFrame({"null": np.arange(n_genes) >= 2 * n_pairs},
                                     index=[f"gene_{g}" for g in range(n_genes)]))
    adata.obs["true_pseudotime"] = time
    adata.obs["true_branch"] = pd.Categorical([f"branch_{b}" for b in branch])
    return adata


def fit_on_counts(adata, method: str, *, n_top_genes: int = 1000) -> None:
    """The protocol of the topology tests and benchmarks, in place: counts → normalize_total →
    log1p → ``n_top_genes`` highly variable genes → 30 principal components → ``method`` with its
    defaults → root at the cells of lowest ``obs["true_pseudotime"]`` → pseudotime."""
    _log_normalised_with_hvg(adata, n_top_genes)
    _learned_on_hvg_pca(adata, method)


def _log_normalised_with_hvg(adata, n_top_genes: int) -> None:
    """The first half of :func:`fit_on_counts`: normalize_total, log1p, ``var["highly_variable"]``."""
    import scanpy as sc

    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=n_top_genes)


def _learned_on_hvg_pca(adata, method: str) -> None:
    """The second half of :func:`fit_on_counts`: 30 components of the highly variable genes, the
    learner, the root at the earliest true time, the pseudotime."""
    import scanpy as sc

    import scskeleton as sks

    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable")
    getattr(sks.tl, method)(adata)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)


def realistic_with_shared_genes(seed: int, *, method: str = "ddrtree", n_shared: int = 200,
                                generator: str = "simulate_trajectory", n_fates: int = 2,
                                shared_in_pca: bool = False):
    """Counts of a tree of ``n_fates`` fates (2,000 cells) through the standard preprocessing to a learned pseudotime
    (``method`` with defaults, rooted at the earliest cells, :func:`fit_on_counts`), with ``n_shared``
    genes appended that follow one sigmoid of the TRUE time on every branch (noise sd 0.5): exact
    shared-trend genes for a branch test along the learned pseudotime. Returns the AnnData and their names.

    ``generator``: ``"simulate_trajectory"`` (``sks.datasets.simulate_trajectory``, whose genes keep
    their truth in ``var``: ``true_program``, ``true_branch``, ``true_base_mean``) or ``"random_walk"``
    (:func:`random_walk_tree`, whose genes all mix programs that part gradually after the fork, so
    that nearly every variable gene differs between the branches). The calibration of
    ``tl.branch_test`` on a learned pseudotime is measured on both, by the tests and by the
    branch-test calibration benchmark.

    With ``shared_in_pca`` the shared genes are appended to the log-normalised values before the
    PCA and marked highly variable, so that the PCA and the tree read them too, as they read the
    genes of a real process that follow one course on every branch (the same genes, the same cells;
    another tree).
    """
    import copy

    import pandas as pd
    from anndata import AnnData

    import scskeleton as sks

    if generator == "simulate_trajectory":
        adata = sks.datasets.simulate_trajectory(2000, n_fates=n_fates, random_state=seed)
        truth = adata.var[["true_program", "true_branch", "true_base_mean"]]
    elif generator == "random_walk":
        import scanpy as sc

        adata = random_walk_tree(n_fates, 2000, seed)
        sc.pp.filter_genes(adata, min_cells=3)
        truth = pd.DataFrame(index=adata.var_names)
    else:
        raise ValueError(f"generator must be 'simulate_trajectory' or 'random_walk'; got {generator!r}.")
    if shared_in_pca:
        _log_normalised_with_hvg(adata, 1000)
    else:
        fit_on_counts(adata, method)
    rng = np.random.default_rng([23, seed])
    time = adata.obs["true_pseudotime"].to_numpy()
    span = time.max()
    centres, widths = rng.uniform(0.1, 0.9, n_shared) * span, rng.uniform(0.05, 0.2, n_shared) * span
    amplitudes = rng.uniform(0.5, 2.0, n_shared) * rng.choice([-1, 1], n_shared)
    shared = (2 + amplitudes / (1 + np.exp(-(time[:, None] - centres) / widths))
              + 0.5 * rng.standard_normal((adata.n_obs, n_shared)))
    names = [f"shared_{i}" for i in range(n_shared)]
    counts = adata.X.toarray() if hasattr(adata.X, "toarray") else np.asarray(adata.X)
    full = AnnData(X=np.hstack([counts, shared]), obs=adata.obs.copy(), obsm=dict(adata.obsm),
                   uns=copy.deepcopy(dict(adata.uns)), var=pd.concat([truth, pd.DataFrame(index=names)]))
    if shared_in_pca:
        full.var["highly_variable"] = np.r_[adata.var["highly_variable"].to_numpy(dtype=bool), np.ones(n_shared, bool)]
        _learned_on_hvg_pca(full, method)
    return full, names


def conditions_with_fates(seed: int, *, n_cells: int = 1200, n_genes: int = 200, n_fates: int = 3, **design):
    """``simulate_trajectory`` with two conditions (``"control"``, ``"treated"``) and ``design``,
    log-normalised, 10 PCs, a principal tree rooted at the true root, pseudotime and fate
    probabilities under ``"rpg"``: the input of the condition tools."""
    import warnings

    import scanpy as sc

    import scskeleton as sks

    design = {"conditions": ("control", "treated"), **design}
    adata = sks.datasets.simulate_trajectory(n_cells, n_genes=n_genes, n_fates=n_fates, random_state=seed, n_jobs=1,
                                             **design)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.pca(adata, n_comps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small noisy fits: the weak-structure notes are expected
        sks.tl.rpg(adata)
    sks.tl.root(adata, "rpg", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "rpg")
    sks.tl.fate_probabilities(adata, "rpg")
    return adata


def following_fate(adata, fate: str, key: str = "rpg") -> int:
    """The learned fate (column of ``obsm[f"{key}_fate_probabilities"]``) whose probability follows
    the true ``fate`` most closely (Pearson, over the cells a root reaches)."""
    truth = (adata.obs["true_fate"] == fate).to_numpy(float)
    probabilities = np.asarray(adata.obsm[f"{key}_fate_probabilities"])
    rows = np.isfinite(probabilities).all(axis=1)
    spread = probabilities[rows].std(axis=0) > 0
    fit = [np.corrcoef(truth[rows], probabilities[rows, k])[0, 1] if spread[k] else -np.inf
           for k in range(probabilities.shape[1])]
    return int(np.argmax(fit))


def longest_lineage(adata, key: str = "rpg") -> str:
    """The tip (milestone name) whose leaf segment holds the most cells: a lineage every sample
    reaches (a root inside the tree leaves a short one towards its nearest tip)."""
    entry = adata.uns[key]
    names = dict(zip(np.asarray(entry["milestones"]["nodes"]).tolist(), entry["milestones"]["names"]))
    held = adata.obs[f"{key}_segment"].astype(str).value_counts()
    leaves = {names[int(np.asarray(nodes)[-1])]: held.get(segment, 0) for segment, nodes in entry["segments"].items()
              if str(names.get(int(np.asarray(nodes)[-1]), "")).startswith("tip")}
    return max(leaves, key=leaves.get)
