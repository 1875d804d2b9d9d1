"""``tl.branch_support``: bootstrap support of the branch points and leaves of a stored tree."""

from __future__ import annotations

import inspect
import numbers
from collections.abc import Callable
from importlib import import_module

import numpy as np
import pandas as pd
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata import progress
from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_random_state, get_representation
from ..._anndata.learners import LEARNERS
from ..._anndata.results import update_entry
from ..._anndata.schema import StoredGraph, cell_projection, is_cell_graph, read_graph, resolve_key
from ..._core.trees import support as core
from ..._core.validation import check_integer
from ..learners.recipe import stored_depth

#: The learners a stored tree can be refitted with: those that fit a node graph.
REFITTED = tuple(method for method, learner in LEARNERS.items() if learner.nodes in ("latent", "space"))

#: Stored parameters that are not passed back to the learner as they are.
_NOT_REPLAYED = frozenset({"version", "use_rep", "n_pcs", "key_added", "copy"})

#: Node-count parameters; a refit on fewer cells caps them at its number of cells.
_NODE_COUNTS = ("n_centers", "n_nodes")

#: Key of the refits inside their own, throw-away AnnData objects.
_REFIT_KEY = "refit"


def branch_support(
    adata: AnnData,
    key: str | None = None,
    *,
    n_boot: int = 20,
    fraction: float = 0.8,
    random_state: int | np.random.Generator | None = 0,
    min_jaccard: float = 0.5,
) -> None:
    """Bootstrap support of each branch point and leaf: which branches are real?

    The tree stored under ``key`` is refitted ``n_boot`` times, each time on a
    subsample of round(``fraction`` · N) cells drawn without replacement,
    with the same learner and the parameters it stored in
    ``adata.uns[key]["params"]`` (node counts are capped at the subsample
    size). Each refit is compared with the stored tree through sets of cells,
    so no root is needed and the refit may live in another latent space:

    - a branch point of degree m splits the tree into m *arms* (the cells
      projecting onto each connected component of the tree without it); it
      is supported by a refit whose branch points offer arms matching all m
      of them one to one with Jaccard index ≥ ``min_jaccard`` over the
      subsampled cells (arms of several close refitted points, or unions of
      arms of a refitted multifurcation, count too);
    - a leaf is supported by a refit with a terminal segment (the path from a
      leaf to its branch point) whose cells have Jaccard index ≥
      ``min_jaccard`` with those of the leaf's terminal segment.

    The support is the fraction of refits that support the branch point or
    leaf. Real branches get a support near 1; stubs grown on noise, whose
    few cells land elsewhere in other fits, near 0. Branch points are the
    nodes of degree ≥ 3 and leaves those of degree 1 of the stored adjacency,
    as it is (``tl.pseudotime``'s ``min_branch_nodes`` pruning is not
    applied). See the documentation's background page on branch support.

    Parameters
    ----------
    adata
        Annotated data matrix with a tree fitted by ``tl.ddrtree``, ``tl.rpg``
        or ``tl.rpg_l1``, and the representation it was fitted on.
    {key_fitted}
    n_boot
        Number of refits, ≥ 1. Default 20. The cost is ``n_boot`` fits on
        ``fraction`` of the cells.
    fraction
        Share of the cells in each subsample, in (0, 1]. Default 0.8. With 1
        every refit sees all cells and differs only where the learner is not
        deterministic, so every support is 1.
    random_state
        Seed of the subsamples; the same seed gives identical supports. The
        refits keep the learner's own stored ``random_state``. ``None`` (a
        fresh seed), an int, or a ``numpy.random.Generator`` (one seed drawn
        from it); the seed used is stored in ``["branch_support"]["random_state"]``.
    min_jaccard
        Smallest Jaccard index, in (0, 1], at which two sets of cells count as
        the same arm or segment. Default 0.5; values above 0.5 make every match
        unique.

    Returns
    -------
    ``None``. Sets the following fields:

    ``adata.uns[key]["branch_support"]["branch_points"]``, ``["leaves"]``
        Node indices (int64) of degree ≥ 3 and of degree 1.
    ``adata.uns[key]["branch_support"]["branch_point_support"]``, ``["leaf_support"]``
        Support of each, the fraction of refits in [0, 1].
    ``adata.uns[key]["branch_support"]["n_boot"]``, ``["fraction"]``, ``["min_jaccard"]``, ``["random_state"]``
        The settings used.

    A new fit under ``key`` removes the field. ``pl.tree`` writes each support
    next to its node.

    Examples
    --------
    >>> import scanpy as sc, scskeleton as sks
    >>> adata = sks.datasets.branching(2000, n_leaves=3)
    >>> sc.pp.pca(adata, n_comps=10)
    >>> sks.tl.ddrtree(adata)
    >>> sks.tl.branch_support(adata, "ddrtree", n_boot=10)
    >>> adata.uns["ddrtree"]["branch_support"]["branch_point_support"]
    """
    key = resolve_key(adata, key)
    graph = read_graph(adata, key)
    learner = _learner(adata, key, graph)
    params = adata.uns[key].get("params")
    if not isinstance(params, dict) or "use_rep" not in params:
        raise KeyError(
            f"adata.uns[{key!r}]['params'] with the learner's parameters is missing; "
            f"refit the tree with sks.tl.{graph.method}(adata, key_added={key!r})."
        )
    n_boot = check_integer("n_boot", n_boot, low=1, role="number of refits")
    fraction = _check_share("fraction", fraction, role="share of the cells in each subsample")
    min_jaccard = _check_share("min_jaccard", min_jaccard, role="Jaccard index at which two sets match")
    random_state = check_random_state(random_state)
    n_cells = adata.n_obs
    n_sub = int(round(fraction * n_cells))
    if n_sub < 3:
        raise ValueError(
            f"fraction={fraction} of {n_cells} cells leaves {n_sub} cells per refit; at least 3 are needed. "
            "Raise fraction."
        )
    use_rep = str(params["use_rep"])
    n_pcs = params.get("n_pcs")
    data = get_representation(adata, use_rep=use_rep, n_pcs=None if n_pcs is None else int(n_pcs))
    # the components the fit ignored as sequencing depth are ignored by the refits too (they see
    # no expression to find them in)
    depth = stored_depth(params)
    if depth.size:
        data = data.copy()
        data[:, depth] = data[:, depth].mean(axis=0)
    kwargs = _refit_kwargs(learner, params, n_sub)

    start = logg.info(
        f"computing branch support of {key!r} ({n_boot} refits of {graph.method} on {n_sub} of {n_cells} cells)"
    )
    projection = cell_projection(adata, graph)
    reference = core.tree_sets(graph.adjacency, projection.edge_start, projection.edge_end, projection.fraction)
    points = np.zeros((n_boot, reference.branch_points.size), dtype=bool)
    leaves = np.zeros((n_boot, reference.leaves.size), dtype=bool)
    not_converged = 0
    seeds = np.random.SeedSequence(random_state).spawn(n_boot)
    hide_bar = progress.bars_off()  # decided outside quiet(), which hides the refits' own bars
    with progress.quiet():
        for round_, seed in enumerate(progress.tqdm(seeds, desc=f"branch support ({graph.method})", leave=True,
                                                          disable=hide_bar)):
            cells = np.sort(np.random.default_rng(seed).choice(n_cells, size=n_sub, replace=False))
            refit, converged = _refit(learner, data[cells], use_rep, kwargs)
            not_converged += not converged
            points[round_], leaves[round_] = core.supported(reference.subset(cells), refit, min_jaccard)

    update_entry(adata, key, branch_support={
        "branch_points": reference.branch_points.astype(np.int64),
        "branch_point_support": points.mean(axis=0).astype(float),
        "leaves": reference.leaves.astype(np.int64),
        "leaf_support": leaves.mean(axis=0).astype(float),
        "n_boot": n_boot,
        "fraction": fraction,
        "min_jaccard": min_jaccard,
        "random_state": random_state,
    })
    note = f", {not_converged} refits stopped at maxiter" if not_converged else ""
    logg.info(
        f"    finished ({reference.branch_points.size} branch points, {reference.leaves.size} leaves{note})",
        time=start,
        deep=f"added\n    uns[{key!r}]['branch_support']",
    )


def _learner(adata: AnnData, key: str, graph: StoredGraph) -> Callable:
    """The ``tl`` function that fitted ``key``; ValueError for anything else."""
    if graph.method in REFITTED:
        return getattr(import_module("scskeleton.tl"), graph.method)
    if is_cell_graph(adata, key):
        raise ValueError(
            f"{key!r} is a cell-level graph (method {graph.method!r}): every cell is a node, so there are no "
            f"branches to refit. branch_support needs a tree from {', '.join(f'sks.tl.{m}' for m in REFITTED)}."
        )
    raise ValueError(
        f"adata.uns[{key!r}] was fitted by {graph.method!r}; branch_support refits only "
        f"{', '.join(f'sks.tl.{m}' for m in REFITTED)}."
    )


def _check_share(name: str, value, *, role: str) -> float:
    """A real number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise ValueError(f"{name} ({role}) must be a number in (0, 1]; got {value!r}.")
    return float(value)


def _refit_kwargs(learner: Callable, params: dict, n_sub: int) -> dict:
    """The stored parameters the learner accepts, as keyword arguments.

    Parameters are matched by name against the learner's signature, so that
    new parameters a learner stores are replayed without changes here. The
    representation is handed over already cut to ``n_pcs`` columns, and node
    counts (K = N for small data sets) are capped at the subsample size.
    """
    accepted = inspect.signature(learner).parameters
    kwargs = {
        name: value
        for name, value in params.items()
        if name in accepted and name not in _NOT_REPLAYED and accepted[name].kind is inspect.Parameter.KEYWORD_ONLY
    }
    for name in _NODE_COUNTS:
        if name in kwargs:
            kwargs[name] = min(int(kwargs[name]), n_sub)
    return kwargs


def _refit(learner: Callable, data: np.ndarray, use_rep: str, kwargs: dict) -> tuple[core.TreeSets, bool]:
    """Fit ``learner`` on ``data`` in a new AnnData; its tree's cell sets, and whether it converged."""
    obs = pd.DataFrame(index=pd.RangeIndex(data.shape[0]).astype(str))
    sub = AnnData(X=data, obs=obs) if use_rep == "X" else AnnData(obs=obs, obsm={use_rep: data})
    learner(sub, use_rep=use_rep, key_added=_REFIT_KEY, **kwargs)
    graph = read_graph(sub, _REFIT_KEY)
    projection = cell_projection(sub, graph)
    sets = core.tree_sets(graph.adjacency, projection.edge_start, projection.edge_end, projection.fraction)
    return sets, bool(sub.uns[_REFIT_KEY]["converged"])


fill_doc(branch_support)
