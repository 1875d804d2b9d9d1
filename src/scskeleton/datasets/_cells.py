"""Where the simulated cells sit on the latent tree: how many on each branch, their positions along
it and the fates they head to, and, with conditions and samples, each sample's own shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._core.validation import check_integer, check_positive
from ._latent_tree import branch_path

#: Share of a branch's cells spread uniformly along it (the rest sit at its state).
TRANSIT_SHARE = 0.4


def allocate(n_cells: int, share: np.ndarray) -> np.ndarray:
    """Integer counts proportional to ``share`` summing to ``n_cells`` (largest remainder)."""
    exact = n_cells * share / share.sum()
    counts = np.floor(exact).astype(np.int64)
    remainder = n_cells - counts.sum()
    counts[np.argsort(-(exact - counts), kind="stable")[:remainder]] += 1
    return counts


def positions(rng, tree: dict, per_branch: np.ndarray, density: str) -> np.ndarray:
    """Relative position (0 at a branch's start, 1 at its end) of every cell."""
    pieces = []
    node_kind = tree["node_kind"]
    for b, n in enumerate(per_branch):
        if density == "uniform" or tree["kind"][b] == "cycle":
            pieces.append(rng.uniform(0.0, 1.0, n))
            continue
        at_root = node_kind[tree["start"][b]] == "root"
        at_tip = node_kind[tree["end"][b]] == "fate"
        if at_root and at_tip:  # a linear path: progenitor and terminal states
            modes = [(1.5, 4.0), (4.0, 1.5)]
        elif at_root:
            modes = [(1.5, 4.0)]
        elif at_tip:
            modes = [(4.0, 1.5)]
        else:
            modes = [(3.0, 3.0)]
        transit = rng.random(n) < TRANSIT_SHARE
        mode = rng.integers(len(modes), size=n)
        a = np.array([m[0] for m in modes])[mode]
        c = np.array([m[1] for m in modes])[mode]
        pieces.append(np.where(transit, rng.uniform(0.0, 1.0, n), rng.beta(a, c)))
    return np.concatenate(pieces)


def fates(rng, tree: dict, per_branch: np.ndarray) -> np.ndarray:
    """Index (into ``tree["fates"]``) of the fate every cell heads to."""
    fate_index = {name: i for i, name in enumerate(tree["fates"])}
    nodes, parent = tree["nodes"], tree["parent"]
    n_branches = len(parent)
    terminal = [b for b in range(n_branches)
                if tree["kind"][b] != "cycle" and nodes[tree["end"][b]] in fate_index]
    below = {b: [] for b in range(n_branches)}  # terminal branches at or below each branch
    for t in terminal:
        for b in branch_path(parent, t):
            below[b].append(t)
    pieces = []
    for b, n in enumerate(per_branch):
        if tree["kind"][b] == "cycle":  # past the last fate, on the way back
            options = [fate_index[tree["cycle_from"]]]
            weight = np.ones(1)
        else:
            options = [fate_index[nodes[tree["end"][t]]] for t in below[b]]
            weight = per_branch[below[b]].astype(float)
        if len(options) == 1:
            pieces.append(np.full(n, options[0], dtype=np.int64))
        else:
            pieces.append(np.asarray(options)[rng.choice(len(options), size=n, p=weight / weight.sum())])
    return np.concatenate(pieces)


@dataclass(frozen=True)
class Design:
    """Conditions and samples of a simulated experiment. The effects act on the last condition; the
    first is the reference, and every condition has ``samples_per_condition`` samples."""

    conditions: tuple[str, ...]
    samples_per_condition: int
    #: Added to the share that the first fate's terminal branch holds among the terminal branches.
    fate_shift: float
    #: Share of its pseudotime by which every cell lags behind: t' = (1 - delay) · t.
    delay: float
    #: A fate that gets no cells: its fork is absent from the last condition.
    missing_fate: str | None
    #: Standard deviation of a sample's log share of each branch around the common shares.
    sample_sd: float
    #: Share of the genes whose course along one branch differs in the last condition.
    condition_genes: float = 0.0
    #: Standard deviation of a sample's own log-fold offset of each gene's expression.
    sample_expression_sd: float = 0.0

    @property
    def samples(self) -> list[tuple[str, str]]:
        """(sample, condition) of every sample, condition by condition."""
        return [(f"{c}_{k + 1}", c) for c in self.conditions for k in range(self.samples_per_condition)]

    def record(self) -> dict:
        """The design as ``uns["simulate_trajectory"]["design"]`` stores it."""
        return {"conditions": np.array(self.conditions), "samples_per_condition": self.samples_per_condition,
                "fate_shift": self.fate_shift, "delay": self.delay, "missing_fate": self.missing_fate or "",
                "sample_sd": self.sample_sd, "condition_genes": self.condition_genes,
                "sample_expression_sd": self.sample_expression_sd}


def check_design(conditions, *, samples_per_condition, fate_shift, delay, missing_fate, sample_sd,
                 condition_genes, sample_expression_sd, n_fates: int) -> Design | None:
    """The checked design, or ``None`` without ``conditions`` (then no effect may be asked for)."""
    if conditions is None:
        asked = [name for name, value, default in (("fate_shift", fate_shift, 0.0), ("delay", delay, 0.0),
                                                   ("missing_fate", missing_fate, None), ("sample_sd", sample_sd, 0.0),
                                                   ("condition_genes", condition_genes, 0.0),
                                                   ("sample_expression_sd", sample_expression_sd, 0.0))
                 if value != default]
        if asked:
            raise ValueError(f"{', '.join(asked)} describe a difference between conditions; pass conditions= "
                             "(e.g. conditions=2 or conditions=('control', 'treated')) as well.")
        return None
    if isinstance(conditions, (int, np.integer)) and not isinstance(conditions, bool):
        names = tuple(f"condition_{k + 1}" for k in range(check_integer("conditions", conditions, low=2)))
    elif isinstance(conditions, (list, tuple)) and all(isinstance(c, str) and c for c in conditions):
        names = tuple(conditions)
    else:
        raise ValueError(f"conditions must be a number (≥ 2) or a list of names; got {conditions!r}.")
    if len(names) < 2 or len(set(names)) != len(names):
        raise ValueError(f"conditions must name at least two different conditions; got {conditions!r}.")
    samples_per_condition = check_integer("samples_per_condition", samples_per_condition, low=1)
    fate_shift = float(fate_shift)
    if not -1.0 < fate_shift < 1.0:
        raise ValueError(f"fate_shift must lie in (-1, 1) (a change of a share); got {fate_shift!r}.")
    delay = check_positive("delay", delay, allow_zero=True)
    if delay >= 1.0:
        raise ValueError(f"delay must be in [0, 1) (a share of the pseudotime); got {delay!r}.")
    fate_names = [f"fate_{k + 1}" for k in range(n_fates)]
    if missing_fate is not None and (n_fates < 2 or missing_fate not in fate_names):
        raise ValueError(f"missing_fate must be one of {fate_names} on a tree with at least two fates; "
                         f"got {missing_fate!r}.")
    sample_sd = check_positive("sample_sd", sample_sd, allow_zero=True)
    condition_genes = check_positive("condition_genes", condition_genes, allow_zero=True)
    if condition_genes > 1.0:
        raise ValueError(f"condition_genes must be a share of the genes, in [0, 1]; got {condition_genes!r}.")
    sample_expression_sd = check_positive("sample_expression_sd", sample_expression_sd, allow_zero=True)
    return Design(names, samples_per_condition, fate_shift, delay, missing_fate, sample_sd, condition_genes,
                  sample_expression_sd)


def sample_cells(rng, tree: dict, share: np.ndarray, n_cells: int, density: str, design: Design) -> dict:
    """The cells of every sample of ``design``: each sample's branch shares vary around ``share``, the
    last condition's carry its effects; cells are ordered by branch, then by sample."""
    samples = design.samples
    per_sample = allocate(n_cells, np.ones(len(samples)))
    terminal = _terminal_branches(tree)
    parts = []
    # the effects move the common shares, around which the samples then vary
    shares = {False: share, True: _with_effects(share, terminal, tree, design)}
    for s, ((_, condition), n) in enumerate(zip(samples, per_sample)):
        treated = condition == design.conditions[-1]
        own = shares[treated] * np.exp(design.sample_sd * rng.standard_normal(share.size))
        per_branch = allocate(n, own / own.sum())
        branch = np.repeat(np.arange(share.size), per_branch)
        position = positions(rng, tree, per_branch, density)
        fate = fates(rng, tree, per_branch)
        if treated and design.delay > 0:
            branch, position = _delayed(tree, branch, position, design.delay)
        parts.append((branch, position, fate, np.full(branch.size, s)))
    branch, position, fate, sample = (np.concatenate(column) for column in zip(*parts))
    order = np.argsort(branch, kind="stable")  # the counts are drawn branch by branch
    return {"per_branch": np.bincount(branch, minlength=share.size), "branch": branch[order],
            "position": position[order], "fate": fate[order], "sample": sample[order]}


def _terminal_branches(tree: dict) -> dict[str, int]:
    """The branch that ends at each fate."""
    nodes = tree["nodes"]
    return {nodes[tree["end"][b]]: b for b in range(len(tree["names"]))
            if tree["kind"][b] != "cycle" and nodes[tree["end"][b]] in tree["fates"]}


def _with_effects(share: np.ndarray, terminal: dict[str, int], tree: dict, design: Design) -> np.ndarray:
    """``share`` with the last condition's fate shift and missing fate."""
    share = share.copy()
    if design.missing_fate is not None:
        share[terminal[design.missing_fate]] = 0.0
    if design.fate_shift:
        ends = np.array([terminal[f] for f in tree["fates"] if f in terminal])
        total = share[ends].sum()
        within = share[ends] / total
        first = within[0] + design.fate_shift
        if not 0.0 < first < 1.0:
            raise ValueError(f"fate_shift={design.fate_shift} takes the first fate's share among the fates "
                             f"({within[0]:.2f} in this tree) out of (0, 1); choose a smaller shift or another "
                             "random_state.")
        rest = within[1:] * (1.0 - first) / within[1:].sum()
        share[ends] = total * np.concatenate([[first], rest])
    return share


def _delayed(tree: dict, branch: np.ndarray, position: np.ndarray, delay: float):
    """Every cell moved back along its own path from the root to pseudotime (1 - delay) · t."""
    start, length, parent = tree["start_time"], tree["length"], tree["parent"]
    target = (1.0 - delay) * (start[branch] + position * length[branch])
    new_branch = branch.copy()
    for b in np.unique(branch):
        cells = np.flatnonzero(branch == b)
        path = np.array(branch_path(parent, int(b)))
        # the last branch of the path that starts at or before the target time holds the cell
        within = np.searchsorted(start[path], target[cells], side="right") - 1
        new_branch[cells] = path[np.clip(within, 0, path.size - 1)]
    new_position = np.clip((target - start[new_branch]) / length[new_branch], 0.0, 1.0)
    return new_branch, new_position
