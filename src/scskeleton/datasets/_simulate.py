"""Raw UMI counts from gene programs along a latent tree, with ground truth.

The model follows the spirit of splatter's "paths" simulation and of dyngen
(Zappia et al., Genome Biol. 2017; Cannoodt et al., Nat. Commun. 2021); the
code is written from the description in :func:`simulate_trajectory`'s
docstring, not taken from either project.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from anndata import AnnData
from scipy import sparse

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._cells import Design, allocate, check_design, fates, positions, sample_cells
from ._counts import default_threads, draw_counts
from ._latent_tree import LENGTH_RANGE, grow_tree

#: Share of the cells every branch holds at least (``density="uneven"``),
#: lowered to ``MAX_FLOOR_TOTAL / n_branches`` when there are many branches.
WEIGHT_FLOOR = 0.04
MAX_FLOOR_TOTAL = 0.6
#: Concentration of the symmetric Dirichlet draw of branch weights.
WEIGHT_CONCENTRATION = 2.0
#: The fewest cells any branch may receive.
MIN_CELLS_PER_BRANCH = 5
#: Base gene means: Gamma(shape, rate) as in splatter, plus a few high outliers.
MEAN_SHAPE, MEAN_RATE = 0.6, 0.3
OUTLIER_PROB, OUTLIER_LOC, OUTLIER_SCALE = 0.02, 3.0, 0.5
#: Smallest |log-fold change| of a changing gene (natural log).
MIN_LFC = 0.25
#: Extra share of genes that mark the separate lineage, and their |offset| scale.
LINEAGE_FRACTION, LINEAGE_LFC = 0.15, 1.5
DENSITIES = ("uneven", "uniform")
PROGRAMS = ("branch", "transient", "lineage", "constant")


def simulate_trajectory(
    n_cells: int = 2000,
    *,
    n_fates: int = 3,
    n_genes: int = 2000,
    cycle: bool = False,
    disconnected: bool = False,
    density: str = "uneven",
    library_size: float = 6000.0,
    library_sd: float = 0.4,
    dispersion: float = 0.1,
    dropout: float = 0.0,
    de_fraction: float = 0.1,
    de_lfc_sd: float = 1.2,
    transient_fraction: float = 0.02,
    conditions: int | Sequence[str] | None = None,
    samples_per_condition: int = 3,
    fate_shift: float = 0.0,
    delay: float = 0.0,
    missing_fate: str | None = None,
    sample_sd: float = 0.0,
    condition_genes: float = 0.0,
    sample_expression_sd: float = 0.0,
    random_state: int | np.random.Generator | None = 0,
    n_jobs: int | None = None,
) -> AnnData:
    """Raw UMI counts of cells differentiating along a random latent tree.

    **Topology.** A rooted tree with ``n_fates`` leaves (fates) grown by
    bifurcations only (a Yule process: a random current leaf splits in two,
    ``n_fates - 1`` times), so it has ``n_fates - 1`` branch points, ``2 ·
    n_fates - 1`` branches and ranges from caterpillars to balanced trees
    with the seed. The root is the free end of the trunk (``branch_0``).
    Branch lengths are uniform in [0.6, 1.4] units of pseudotime. Branches are
    named ``branch_0``, ``branch_1``, … (every parent before its children),
    nodes ``root``, ``fork_1``, …, ``fate_1``, … (``uns`` maps branches to
    nodes).

    **Cells.** With ``density="uneven"`` the share of cells on each branch is
    ``f + (1 - n_branches · f) · w`` with ``w`` from a symmetric Dirichlet
    (concentration 2) and a floor ``f = min(0.04, 0.6 / n_branches)``, so every
    branch (every fate) holds at least 4 % of the cells up to 15 branches
    (40 cells at 1,000 cells). Along a branch, 40 % of its cells are spread
    uniformly (cells in transit) and 60 % sit at the branch's state: near the
    root on the trunk (Beta(1.5, 4)), near the tip on a fate's branch
    (Beta(4, 1.5)), in the middle of an intermediate branch (Beta(3, 3)), so
    cells are dense at progenitor, intermediate and terminal states and sparse
    at the forks. ``density="uniform"`` spreads cells uniformly along the tree
    (shares proportional to branch length). Cells are ordered by branch.

    **Genes.** Gene ``g`` has a base mean ``m_g`` ~ Gamma(0.6, rate 0.3) as in
    splatter, and 2 % of genes are highly expressed outliers (``m_g`` times
    LogNormal(3, 0.5)): most genes are low, a few are high. Each branch
    changes every gene with probability ``de_fraction``: its log mean moves
    by a log-fold change ``±(0.25 + |N(0, de_lfc_sd²)|) · ℓ_b`` (natural
    log, sign random; ``ℓ_b`` the branch's length, 1 on average, so that
    pseudotime measures transcriptional change at the same expected rate on
    every branch and is recoverable from expression across branches) along a
    smooth monotone step 3x² − 2x³ over a random stretch of
    the branch (start uniform in [0, 0.6], at least 0.2 long). The value
    reached at the end of a branch is inherited by its child branches
    (splatter "paths"), so a fate's profile is the sum of the changes along
    its path. In addition, every branch gives a transient bump
    ``a · sin²(π x)`` (``|a|`` as a log-fold change, sign random) over a
    random stretch of 0.3–0.5 of the branch to each gene with probability
    ``transient_fraction``; it is back to zero at the end of the stretch and
    is not inherited. Genes that change nowhere are constant in their
    unnormalised mean; their share of a cell's counts (see Counts) falls
    where other genes rise, so after ``normalize_total`` they are not null
    genes for a trend test.

    **Counts.** Cell ``c`` has library size ``L_c = library_size ·
    exp(N(0, library_sd²))`` (so ``library_size`` is the median total UMIs).
    Its expected count of gene ``g`` is ``μ_cg = L_c · p_cg``, with ``p_c``
    the cell's gene means ``exp(log mean)`` normalised to sum to one, and the
    count is negative binomial with mean ``μ_cg`` and variance ``μ_cg +
    dispersion · μ_cg²`` (a gamma–Poisson with biological coefficient of
    variation ``√dispersion``; ``dispersion=0`` gives Poisson counts). With
    ``dropout > 0`` each non-zero count is then set to zero with probability
    ``dropout / (1 + μ_cg^1.5)``, a logistic function of ``log μ_cg``
    (half of ``dropout`` at an expected count of 1, vanishing for
    well-expressed genes).

    **Cycle.** With ``cycle=True`` one more branch (``kind`` ``"cycle"``)
    leaves the last fate's tip and returns smoothly to an earlier node of its
    own path (a random fork on it, or the root): every gene moves from the
    tip's value to that node's value along a monotone step over the branch,
    and the branch adds transient bumps of its own (twice
    ``transient_fraction``), so the path back is curved. Its cells continue
    the pseudotime of the tip (``true_pseudotime`` keeps increasing around the
    loop) and have the last fate as ``true_fate``; ``uns`` names the tip
    (``cycle_from``) and the node it rejoins (``cycle_to``).

    **Disconnected.** With ``disconnected=True`` a second, separate linear
    lineage (one branch, ``kind`` ``"lineage"``, from node ``lineage_2_root``
    to ``lineage_2_end``) is added: 15 % of the genes are shifted by
    ``±(1.5 + |N(0, 1)|)`` in it (a different cell type, far from the tree in
    expression) and it changes its own genes along the way like a tree
    branch. Its pseudotime starts at 0 at its own root; ``true_lineage`` is
    ``"lineage_2"`` (``"lineage_1"`` for the tree).

    **Signal strength.** The defaults aim at a good differentiation data set,
    neither trivial nor hopeless: after ``normalize_total``, ``log1p``, 1,000
    highly variable genes and 30 PCs, a nearest-neighbour classifier recovers
    ``true_branch`` for most cells away from the forks, while near a fork the
    branches overlap and many cells cannot be told apart.
    The counts are drawn block by block, so memory beyond the output stays
    small, and in threads (``n_jobs``).

    **Conditions and samples.** With ``conditions`` the cells come from
    ``samples_per_condition`` samples of each condition, equally many cells
    per sample, on one tree with one set of gene programs. The last condition
    carries the effects, the first is the reference: ``fate_shift`` is added
    to the first fate's share of the cells on the terminal branches (the
    other fates' shares shrink in proportion);
    ``missing_fate`` gets no cells, so its fork is absent from that condition;
    ``delay`` moves every cell back along its path from the root to pseudotime
    ``(1 - delay) · t``, so progression lags by that share of each lineage.
    With ``condition_genes``, that share of the genes gets, in the last
    condition only, a transient bump ``a · sin²(π x)`` on one random
    non-cycle branch (``|a|`` drawn as the other log-fold changes), so its
    trend along that branch differs between the conditions.
    A sample's share of each branch is its condition's share times
    ``exp(N(0, sample_sd²))``, renormalised, and with
    ``sample_expression_sd`` each gene's mean in a sample is multiplied by
    ``exp(N(0, sample_expression_sd²))`` of its own (as donors or batches
    differ), so samples of one condition differ as replicates do. Without effects the conditions are
    exchangeable: the null of a comparison.

    Parameters
    ----------
    n_cells
        Number of cells (at least enough for 5 cells per branch: 125 with the
        default 4 % floor).
    n_fates
        Number of leaves (terminal fates), 1 to 8; 1 gives a linear path.
    n_genes
        Number of genes (≥ 20).
    cycle
        Add a branch that loops back from the last fate (see above).
    disconnected
        Add a second lineage, disconnected from the tree (see above).
    density
        ``"uneven"`` (default; Dirichlet branch shares, cells dense at states
        and sparse at forks) or ``"uniform"`` (uniform along the tree).
    library_size
        Median total UMIs per cell. The default 6,000 is typical of droplet
        (10x v3) data over the expressed genes.
    library_sd
        Standard deviation of the natural log of the library size (0.4).
    dispersion
        Negative-binomial dispersion φ (variance μ + φμ²), common to all
        genes; 0.1 is a biological coefficient of variation of 0.32, in the
        0.2–0.4 range of UMI data. 0 gives Poisson counts.
    dropout
        Extra zero inflation, in [0, 1): the largest probability that a count
        is zeroed (see above). 0 (default) disables it: UMI counts are well
        described by the negative binomial alone.
    de_fraction
        Probability that a branch changes a gene (0.1: about 10 % of genes
        per branch), in (0, 1].
    de_lfc_sd
        Scale of the log-fold changes (natural log; 1.2).
    transient_fraction
        Probability that a branch gives a gene a transient bump (0.02), in
        [0, 1].
    conditions
        ``None`` (one condition, no samples), a number of conditions (≥ 2,
        named ``"condition_1"``, …) or their names, e.g. ``("control",
        "treated")``.
    samples_per_condition
        Samples of each condition (3).
    fate_shift
        Added to the first fate's share among the fates in the last condition,
        in (-1, 1); 0.1 is ten percentage points.
    delay
        Share of its pseudotime by which every cell of the last condition lags,
        in [0, 1).
    missing_fate
        A fate (``"fate_2"``, …) with no cells in the last condition.
    sample_sd
        Sample-to-sample standard deviation of the log share of each branch
        (0: samples differ only by sampling).
    condition_genes
        Share of the genes, in [0, 1], whose course along one branch differs
        in the last condition (see above).
    sample_expression_sd
        Sample-to-sample standard deviation of each gene's log mean
        expression (0: no offsets).
    random_state
        Seed: ``None`` (a fresh seed), an int, or a ``numpy.random.Generator``
        (one seed drawn from it). The integer seed used is stored with the
        generating parameters in ``uns``, so passing it back reproduces the data
        bit for bit; another seed gives another tree and other genes.
    n_jobs
        Threads that draw the counts (``None`` or -1: every available core,
        at most 8). Each block of cells has a generator of its own, so the data are
        the same for any ``n_jobs``.

    Returns
    -------
    AnnData with ``X`` the counts (cells × genes, ``scipy.sparse`` CSR,
    float32 integers) and ``layers["counts"]`` a copy of them;
    ``obs["true_pseudotime"]`` (distance from the root along the tree, in
    branch-length units), ``obs["true_branch"]`` (categorical),
    ``obs["true_fate"]`` (categorical: the fate a cell is heading to; a cell
    on a branch shared by several fates gets one of the fates below it,
    drawn with probability proportional to the cells on those fates'
    terminal branches, i.e. the leaf path it was sampled on),
    ``obs["true_lineage"]`` (categorical), ``obs["library_size"]`` (the drawn
    ``L_c``, the expected total count); ``var["true_program"]``
    (``"branch"`` if the gene changes monotonically on some branch, else
    ``"transient"`` if it has a transient bump, else ``"lineage"`` if it only
    marks the separate lineage, else ``"constant"``), ``var["true_branch"]``
    (the first branch, in pseudotime, where the gene changes; the second
    lineage's branch for a ``"lineage"`` gene; ``""`` if constant),
    ``var["true_base_mean"]`` (``m_g``), ``var["true_lineage_shift"]`` (the
    separate lineage's log-fold change, with ``disconnected=True``);
    ``varm["true_lfc"]`` and
    ``varm["true_transient"]`` (genes × branches: the log-fold change and the
    bump amplitude of each gene on each branch, columns in the order of
    ``uns["simulate_trajectory"]["branches"]``); and
    ``uns["simulate_trajectory"]`` with the tree (``branches``,
    ``branch_parent`` (−1 for none), ``branch_length``,
    ``branch_start_time``, ``branch_start_node``, ``branch_end_node``,
    ``branch_kind``, ``branch_lineage``, ``branch_n_cells``, ``nodes``,
    ``fates``, ``root``, ``n_fates``, ``n_branch_points``, ``cycle_from``,
    ``cycle_to`` (``""`` without a cycle)) and the generating parameters.
    With ``conditions`` also ``obs["condition"]`` and ``obs["sample"]``
    (categorical), and in ``uns["simulate_trajectory"]`` the ``design``,
    ``samples``, ``sample_condition`` and ``sample_fate_share`` (samples ×
    fates: the share of each sample's cells heading to each fate).
    """
    settings = _checked(
        n_cells, n_fates=n_fates, n_genes=n_genes, cycle=cycle, disconnected=disconnected, density=density,
        library_size=library_size, library_sd=library_sd, dispersion=dispersion, dropout=dropout,
        de_fraction=de_fraction, de_lfc_sd=de_lfc_sd, transient_fraction=transient_fraction,
        random_state=random_state, n_jobs=n_jobs,
    )
    design = check_design(conditions, samples_per_condition=samples_per_condition, fate_shift=fate_shift,
                          delay=delay, missing_fate=missing_fate, sample_sd=sample_sd,
                          condition_genes=condition_genes, sample_expression_sd=sample_expression_sd,
                          n_fates=settings.n_fates)
    # one generator for every step, in this order: the tree, the cells, the genes, the counts
    rng = np.random.default_rng(settings.random_state)
    tree = grow_tree(rng, settings.n_fates, settings.cycle, settings.disconnected)
    cells = _draw_cells(rng, tree, settings, design)
    base_mean, programs = _draw_genes(rng, tree, settings)
    offsets = _sample_offsets(rng, cells, settings, design)
    if design is None or not design.condition_genes:
        counts = draw_counts(rng, programs, cells["branch"], cells["position"], cells["library"],
                             settings.dispersion, settings.dropout, settings.n_genes, settings.n_jobs, offsets)
        changed = None
    else:
        counts, changed = _condition_counts(rng, tree, programs, cells, settings, design, offsets)
    var = _gene_table(tree, programs, base_mean, settings)
    if changed is not None:
        var["true_condition_branch"], var["true_condition_effect"] = changed
    adata = AnnData(X=counts, obs=_cell_truth(tree, cells, settings, design), var=var,
                    uns={"simulate_trajectory": _record(tree, cells, settings, design)})
    adata.layers["counts"] = counts.copy()
    adata.varm["true_lfc"] = programs["lfc_table"].astype(np.float32)
    adata.varm["true_transient"] = programs["bump_table"].astype(np.float32)
    return adata


@dataclass(frozen=True)
class _Settings:
    """The checked parameters of :func:`simulate_trajectory`, and the smallest share of the cells a branch gets."""

    n_cells: int
    n_fates: int
    n_genes: int
    cycle: bool
    disconnected: bool
    density: str
    library_size: float
    library_sd: float
    dispersion: float
    dropout: float
    de_fraction: float
    de_lfc_sd: float
    transient_fraction: float
    random_state: int
    n_jobs: int
    floor: float

    def params(self) -> dict:
        """The generating parameters as ``uns["simulate_trajectory"]["params"]`` stores them."""
        return {name: getattr(self, name) for name in (
            "n_cells", "n_genes", "cycle", "disconnected", "density", "library_size", "library_sd", "dispersion",
            "dropout", "de_fraction", "de_lfc_sd", "transient_fraction", "random_state")}


def _checked(n_cells, *, n_fates, n_genes, cycle, disconnected, density, library_size, library_sd, dispersion,
             dropout, de_fraction, de_lfc_sd, transient_fraction, random_state, n_jobs) -> _Settings:
    """Every parameter checked, in the order of the signature but ``n_cells`` last: how many cells are
    enough depends on the number of branches."""
    n_fates = check_integer("n_fates", n_fates, low=1, high=8, role="number of leaves of the tree")
    n_genes = check_integer("n_genes", n_genes, low=20)
    if not isinstance(cycle, (bool, np.bool_)):
        raise ValueError(f"cycle must be True or False; got {cycle!r}.")
    if not isinstance(disconnected, (bool, np.bool_)):
        raise ValueError(f"disconnected must be True or False; got {disconnected!r}.")
    if density not in DENSITIES:
        raise ValueError(f"density must be one of {DENSITIES}; got {density!r}.")
    library_size = check_positive("library_size", library_size, role="median total UMIs per cell")
    library_sd = check_positive("library_sd", library_sd, allow_zero=True)
    dispersion = check_positive("dispersion", dispersion, allow_zero=True, role="negative-binomial φ")
    dropout = check_positive("dropout", dropout, allow_zero=True)
    if dropout >= 1.0:
        raise ValueError(f"dropout must be in [0, 1) (largest probability of zeroing a count); got {dropout!r}.")
    de_fraction = check_positive("de_fraction", de_fraction, role="share of genes a branch changes")
    if de_fraction > 1.0:
        raise ValueError(f"de_fraction must be in (0, 1]; got {de_fraction!r}.")
    de_lfc_sd = check_positive("de_lfc_sd", de_lfc_sd)
    transient_fraction = check_positive("transient_fraction", transient_fraction, allow_zero=True)
    if transient_fraction > 1.0:
        raise ValueError(f"transient_fraction must be in [0, 1]; got {transient_fraction!r}.")
    random_state = check_random_state(random_state)
    n_jobs = default_threads() if n_jobs is None or n_jobs == -1 else check_integer("n_jobs", n_jobs, low=1)

    n_branches = 2 * n_fates - 1 + int(cycle) + int(disconnected)
    if density == "uneven":
        floor = min(WEIGHT_FLOOR, MAX_FLOOR_TOTAL / n_branches)
    else:  # the smallest share a branch can get when shares follow length
        floor = LENGTH_RANGE[0] / (LENGTH_RANGE[0] + (n_branches - 1) * LENGTH_RANGE[1])
    fewest = int(np.ceil(MIN_CELLS_PER_BRANCH / floor - 1e-9))
    n_cells = check_integer(
        "n_cells", n_cells, low=fewest,
        role=f"at least {MIN_CELLS_PER_BRANCH} cells on each of the {n_branches} branches",
    )
    return _Settings(n_cells=n_cells, n_fates=n_fates, n_genes=n_genes, cycle=bool(cycle),
                     disconnected=bool(disconnected), density=density, library_size=library_size,
                     library_sd=library_sd, dispersion=dispersion, dropout=dropout, de_fraction=de_fraction,
                     de_lfc_sd=de_lfc_sd, transient_fraction=transient_fraction, random_state=random_state,
                     n_jobs=n_jobs, floor=floor)


def _draw_cells(rng, tree: dict, settings: _Settings, design: Design | None) -> dict:
    """The cells: how many on each branch (``per_branch``), each cell's ``branch``, its ``position`` along
    it (0 to 1), the ``fate`` it heads to, its ``library`` size and, with a design, its ``sample``."""
    n_branches = len(tree["names"])
    if settings.density == "uneven":
        weight = rng.dirichlet(np.full(n_branches, WEIGHT_CONCENTRATION))
        share = settings.floor + (1.0 - n_branches * settings.floor) * weight
    else:
        share = tree["length"] / tree["length"].sum()
    if design is None:
        per_branch = allocate(settings.n_cells, share)
        cells = {"per_branch": per_branch, "branch": np.repeat(np.arange(n_branches), per_branch),
                 "position": positions(rng, tree, per_branch, settings.density),
                 "fate": fates(rng, tree, per_branch)}
    else:
        cells = sample_cells(rng, tree, share, settings.n_cells, settings.density, design)
    cells["library"] = settings.library_size * np.exp(settings.library_sd * rng.standard_normal(settings.n_cells))
    return cells


def _draw_genes(rng, tree: dict, settings: _Settings) -> tuple[np.ndarray, dict]:
    """The genes' base means (a few high outliers among them) and the programs of every branch."""
    base_mean = rng.gamma(MEAN_SHAPE, 1.0 / MEAN_RATE, size=settings.n_genes)
    outlier = rng.random(settings.n_genes) < OUTLIER_PROB
    base_mean[outlier] *= np.exp(OUTLIER_LOC + OUTLIER_SCALE * rng.standard_normal(outlier.sum()))
    programs = _programs(rng, tree, np.log(base_mean), settings.de_fraction, settings.de_lfc_sd,
                         settings.transient_fraction)
    return base_mean, programs


def _lineage_names(settings: _Settings) -> list[str]:
    return ["lineage_1", "lineage_2"] if settings.disconnected else ["lineage_1"]


def _cell_truth(tree: dict, cells: dict, settings: _Settings, design: Design | None) -> pd.DataFrame:
    """``obs``: each cell's true pseudotime, branch, fate and lineage, its library size and, with a
    design, its condition and sample."""
    branch = cells["branch"]
    obs = pd.DataFrame(
        {
            "true_pseudotime": tree["start_time"][branch] + cells["position"] * tree["length"][branch],
            "true_branch": pd.Categorical.from_codes(branch, categories=tree["names"]),
            "true_fate": pd.Categorical.from_codes(cells["fate"], categories=tree["fates"]),
            "true_lineage": pd.Categorical.from_codes(tree["lineage"][branch], categories=_lineage_names(settings)),
            "library_size": cells["library"],
        },
        index=[f"cell_{i}" for i in range(settings.n_cells)],
    )
    if design is not None:
        samples, conditions = zip(*design.samples)
        obs["condition"] = pd.Categorical(np.asarray(conditions)[cells["sample"]], categories=design.conditions)
        obs["sample"] = pd.Categorical.from_codes(cells["sample"], categories=list(samples))
    return obs


def _sample_offsets(rng, cells: dict, settings: _Settings, design: Design | None):
    """Each sample's own log-fold offset of every gene (samples × genes) and each cell's sample, or
    ``None`` without them (no draw: the data stay those of the same seed without offsets)."""
    if design is None or not design.sample_expression_sd:
        return None
    table = design.sample_expression_sd * rng.standard_normal((len(design.samples), settings.n_genes))
    return table.astype(np.float32), np.asarray(cells["sample"])


def _condition_counts(rng, tree: dict, programs: dict, cells: dict, settings: _Settings, design: Design,
                      offsets):
    """Counts with the last condition's own bumps on ``design.condition_genes`` of the genes, and what
    changed: each gene's branch (``""`` for none) and the bump's amplitude (0 for none)."""
    n_genes = settings.n_genes
    eligible = [b for b in range(len(tree["names"])) if tree["kind"][b] != "cycle"]
    genes = np.flatnonzero(rng.random(n_genes) < design.condition_genes)
    on = np.asarray(eligible)[rng.integers(len(eligible), size=genes.size)]
    amplitude = rng.choice([-1.0, 1.0], genes.size) * (MIN_LFC + np.abs(settings.de_lfc_sd * rng.standard_normal(genes.size)))
    begin, inverse = _bumps(rng, genes.size)
    treated_programs = {**programs, "branches": [dict(p) for p in programs["branches"]]}
    for b in np.unique(on):
        mine = on == b
        program = treated_programs["branches"][b]
        fresh = ~np.isin(genes[mine], program["bumped"])  # a gene bumped there already keeps one bump
        for name, extra in (("bumped", genes[mine][fresh]), ("amplitude", amplitude[mine][fresh]),
                            ("bump_begin", begin[mine][fresh]), ("bump_inverse", inverse[mine][fresh])):
            kind = np.int64 if name == "bumped" else np.float32
            program[name] = np.concatenate([program[name], extra.astype(kind)])
    treated = np.asarray([c == design.conditions[-1] for _, c in design.samples])[cells["sample"]]
    parts = []
    for rows, own in ((np.flatnonzero(~treated), programs), (np.flatnonzero(treated), treated_programs)):
        parts.append(draw_counts(rng, own, cells["branch"][rows], cells["position"][rows], cells["library"][rows],
                                 settings.dispersion, settings.dropout, n_genes, settings.n_jobs,
                                 None if offsets is None else (offsets[0], offsets[1][rows])))
    order = np.argsort(np.concatenate([np.flatnonzero(~treated), np.flatnonzero(treated)]), kind="stable")
    counts = sparse.vstack(parts, format="csr")[order]
    branch = np.full(n_genes, "", dtype=object)
    effect = np.zeros(n_genes)
    branch[genes] = np.asarray(tree["names"], dtype=object)[on]
    effect[genes] = amplitude
    return counts, (branch, effect)


def _gene_table(tree: dict, programs: dict, base_mean: np.ndarray, settings: _Settings) -> pd.DataFrame:
    """``var``: each gene's true program, the first branch where it changes, its base mean and (with a
    separate lineage) that lineage's shift."""
    program, first_branch = _gene_truth(tree, programs)
    categories = list(PROGRAMS) if settings.disconnected else [p for p in PROGRAMS if p != "lineage"]
    var = pd.DataFrame(
        {
            "true_program": pd.Categorical(program, categories=categories),
            "true_branch": first_branch,
            "true_base_mean": base_mean,
        },
        index=[f"gene_{j}" for j in range(settings.n_genes)],
    )
    if settings.disconnected:
        var["true_lineage_shift"] = programs["lineage_shift"]
    return var


def _record(tree: dict, cells: dict, settings: _Settings, design: Design | None) -> dict:
    """``uns["simulate_trajectory"]``: the tree, its cells per branch, and the generating parameters."""
    node_kind = tree["node_kind"]
    record = {
        "branches": np.array(tree["names"]),
        "branch_parent": tree["parent"],
        "branch_length": tree["length"],
        "branch_start_time": tree["start_time"],
        "branch_start_node": np.array(tree["nodes"])[tree["start"]],
        "branch_end_node": np.array(tree["nodes"])[tree["end"]],
        "branch_kind": np.array(tree["kind"]),
        "branch_lineage": np.array(_lineage_names(settings))[tree["lineage"]],
        "branch_n_cells": cells["per_branch"],
        "nodes": np.array(tree["nodes"]),
        "node_kind": np.array(node_kind),
        "fates": np.array(tree["fates"]),
        "root": "root",
        "n_fates": settings.n_fates,
        "n_branch_points": int(sum(kind == "fork" for kind in node_kind)),
        "cycle_from": tree["cycle_from"],
        "cycle_to": tree["cycle_to"],
        "params": settings.params(),
    }
    if design is not None:
        samples, conditions = zip(*design.samples)
        heading = np.zeros((len(samples), len(tree["fates"])))
        np.add.at(heading, (cells["sample"], cells["fate"]), 1.0)
        record.update(design=design.record(), samples=np.array(samples), sample_condition=np.array(conditions),
                      sample_fate_share=heading / heading.sum(axis=1, keepdims=True))
    return record


def _changes(rng, n_genes: int, probability: float, scale: float, *, low: float = MIN_LFC):
    """Genes a branch changes (each with ``probability``) and their signed log-fold changes."""
    genes = np.flatnonzero(rng.random(n_genes) < probability)
    sign = np.where(rng.random(genes.size) < 0.5, -1.0, 1.0)
    return genes, sign * (low + np.abs(scale * rng.standard_normal(genes.size)))


def _steps(rng, n: int):
    """Start and inverse width of the monotone step of ``n`` genes over a branch."""
    begin = rng.uniform(0.0, 0.6, n)
    width = rng.uniform(0.2, 1.0 - begin)
    return begin, 1.0 / width


def _bumps(rng, n: int):
    """Start and inverse width of the transient bump of ``n`` genes over a branch."""
    begin = rng.uniform(0.0, 0.5, n)
    width = rng.uniform(0.3, 0.5, n)
    return begin, 1.0 / width


def _programs(rng, tree, log_base, de_fraction, de_lfc_sd, transient_fraction) -> dict:
    """Start state, monotone changes and transient bumps of every branch."""
    n_genes = log_base.size
    n_branches = len(tree["names"])
    parent = tree["parent"]
    lfc_table = np.zeros((n_genes, n_branches))
    bump_table = np.zeros((n_genes, n_branches))
    lineage_shift = np.zeros(n_genes)
    start_state = np.zeros((n_branches, n_genes))
    branches = []
    for b in range(n_branches):
        kind = tree["kind"][b]
        if kind == "lineage":
            shifted, shift = _changes(rng, n_genes, LINEAGE_FRACTION, 1.0, low=LINEAGE_LFC)
            lineage_shift[shifted] = shift
            start_state[b] = log_base + lineage_shift
        elif parent[b] < 0:
            start_state[b] = log_base
        else:
            start_state[b] = start_state[parent[b]] + lfc_table[:, parent[b]]
        if kind == "cycle":  # back to the state at the node it rejoins
            target = start_state[tree["cycle_target_branch"]]
            lfc = target - start_state[b]
            genes = np.flatnonzero(np.abs(lfc) > 1e-12)
            lfc = lfc[genes]
            bump_probability = min(1.0, 2.0 * transient_fraction)
        else:
            genes, lfc = _changes(rng, n_genes, de_fraction, de_lfc_sd)
            # pseudotime measures transcriptional change: a branch twice as long changes its genes
            # twice as much, so equal stretches of pseudotime carry equal expected change everywhere
            lfc = lfc * (tree["length"][b] / np.mean(LENGTH_RANGE))
            bump_probability = transient_fraction
        begin, inverse = _steps(rng, genes.size)
        lfc_table[genes, b] = lfc
        bumped, amplitude = _changes(rng, n_genes, bump_probability, de_lfc_sd)
        bump_begin, bump_inverse = _bumps(rng, bumped.size)
        bump_table[bumped, b] = amplitude
        branches.append({  # float32: the per-block arithmetic runs in single precision
            "genes": genes, "bumped": bumped,
            **{key: value.astype(np.float32) for key, value in (
                ("lfc", lfc), ("begin", begin), ("inverse", inverse), ("amplitude", amplitude),
                ("bump_begin", bump_begin), ("bump_inverse", bump_inverse))},
        })
    return {"start_state": start_state, "branches": branches, "lfc_table": lfc_table,
            "bump_table": bump_table, "lineage_shift": lineage_shift}


def _gene_truth(tree: dict, programs: dict):
    """``var["true_program"]`` and ``var["true_branch"]`` of every gene."""
    lfc, bump = programs["lfc_table"], programs["bump_table"]
    order = np.lexsort((np.arange(len(tree["names"])), tree["start_time"]))  # by pseudotime of the start
    is_tree = np.array([kind != "cycle" for kind in tree["kind"]])  # the cycle only undoes changes
    names = np.array(tree["names"] + [""])
    changes = (lfc != 0) & is_tree[None, :]
    bumps = bump != 0

    def first(mask):
        ordered = mask[:, order]
        hit = ordered.any(axis=1)
        return np.where(hit, order[ordered.argmax(axis=1)], len(names) - 1), hit

    first_change, changed = first(changes)
    first_bump, bumped = first(bumps)
    shifted = programs["lineage_shift"] != 0
    lineage_branch = next((b for b, kind in enumerate(tree["kind"]) if kind == "lineage"), len(names) - 1)
    program = np.select([changed, bumped, shifted], ["branch", "transient", "lineage"], "constant")
    branch = np.select([changed, bumped, shifted], [first_change, first_bump, lineage_branch], len(names) - 1)
    return program, names[branch]

