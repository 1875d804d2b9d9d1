"""``tl.trend_modules``: genes grouped by the shape of their fitted trends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from ..._anndata.docs import fill_doc
from ..._anndata.inputs import check_key, check_random_state, gene_columns
from ..._anndata.results import plain_params
from ..._core.stats import modules as modules_core
from ..._core.validation import check_positive
from .results import categorical

#: Results whose fitted curves can be clustered.
CURVE_RESULTS = ("trends", "branch_test", "fork_test", "association_test")


def trend_modules(
    adata: AnnData,
    result: str,
    *,
    n_modules: int | None = None,
    fdr: float = 0.05,
    genes: Sequence[str] | None = None,
    gene_symbols: str | None = None,
    random_state: int | np.random.Generator | None = 0,
    key_added: str | None = None,
    copy: bool = False,
) -> AnnData | None:
    """Gene modules: cluster the fitted trends of significant genes by their shape.

    Reads the curves a test stored (``varm[f"{result}_curves"]``: one curve
    per gene for :func:`trends`, one per branch for :func:`branch_test` and
    :func:`fork_test`, one per lineage for :func:`association_test`, all on
    one pseudotime grid), lays a gene's curves end to end, centres and scales
    them per gene, and clusters genes by k-means (k-means++ seeding from
    ``random_state``, the best of 10 restarts). On standardised curves the
    distance is 2P(1 − r), r the correlation: genes go together when their
    curves have the same shape, whatever their level or amplitude. Modules
    are numbered by where their mean curve peaks along that axis (module
    ``"0"`` peaks first; with lineages end to end, the first lineage's
    early peaks come first).

    Parameters
    ----------
    adata
        Annotated data matrix holding a test result.
    result
        The ``key_added`` of that test, e.g. ``"rpg_association"``.
    n_modules
        Number of modules. ``None`` (default): chosen among 2 … 10 by the
        mean silhouette of the clustering (correlation distance between the
        standardised curves); the number used is in ``params``.
    fdr
        Cluster the genes with q-value below this (default 0.05); ignored
        when ``genes`` is given.
    genes
        Cluster exactly these genes instead.
    gene_symbols
        An ``adata.var`` column that ``genes`` are named by, as in scanpy,
        instead of ``var_names``.
    random_state
        Seed of the k-means restarts.
        ``None`` (a fresh seed), an int, or a ``numpy.random.Generator``
        (one seed drawn from it); the seed used is stored in ``params``.
    key_added
        Name of the result; default ``f"{result}_modules"``.
    {copy}

    Returns
    -------
    {returns_named}

    ``adata.var[name]``
        Categorical module ``"0"``…: NaN for genes not clustered (not
        significant, not fitted, or a flat curve).
    ``adata.uns[name]``
        ``method`` (``"trend_modules"``), ``params``, ``result``, ``curves``
        (modules × [curves per gene ×] grid: each module's mean standardised
        curve, NaN where the result's curves are), ``n_genes`` per module.

    Examples
    --------
    >>> sks.tl.association_test(adata, "rpg")
    >>> sks.tl.trend_modules(adata, "rpg_association", n_modules=4)
    >>> sks.pl.module_heatmap(adata, "rpg_association_modules")
    """
    entry = adata.uns.get(result)
    if not isinstance(entry, Mapping) or entry.get("method") not in CURVE_RESULTS:
        found = [k for k, v in adata.uns.items() if isinstance(v, Mapping) and v.get("method") in CURVE_RESULTS]
        raise KeyError(f"No tl.trends, tl.branch_test, tl.fork_test or tl.association_test result under "
                       f"adata.uns[{result!r}]; results present: {found}.")
    if f"{result}_curves" not in adata.varm:
        raise KeyError(f"The result {result!r} has no varm[{result + '_curves'!r}] (subset or edited since?); rerun it.")
    name = check_key(key_added, f"{result}_modules")
    random_state = check_random_state(random_state)
    curves = np.asarray(adata.varm[f"{result}_curves"], dtype=float)
    fdr = check_positive("fdr", fdr, role="false discovery rate")
    if genes is not None:
        chosen = gene_columns(adata, genes, gene_symbols=gene_symbols)
    else:
        qvals = adata.var[f"{result}_qval"].to_numpy(dtype=float)
        chosen = np.flatnonzero(qvals < fdr)
    fitted = chosen[~np.isnan(curves[chosen].reshape(chosen.size, -1)).all(axis=1)]
    if fitted.size < chosen.size and genes is not None:
        missing = adata.var_names[np.setdiff1d(chosen, fitted)].tolist()
        raise KeyError(f"Gene(s) {missing[:5]} have no curve in {result!r}; rerun it with them in genes=.")
    if fitted.size == 0:
        raise ValueError(f"No gene of {result!r} has q < {fdr:g}: nothing to cluster. Raise fdr or pass genes=.")
    start = logg.info(f"clustering the trends of {fitted.size} genes of {result!r} into "
                      f"{'a data-driven number of' if n_modules is None else n_modules} modules")
    clustered = modules_core.trend_modules(curves[fitted], n_modules, random_state=random_state)
    n_modules = clustered.centers.shape[0]

    adata = adata.copy() if copy else adata
    adata.var[name] = categorical(adata.n_vars, fitted, clustered.labels, [str(m) for m in range(n_modules)])
    centers = np.full((n_modules, int(np.prod(curves.shape[1:]))), np.nan)
    centers[:, clustered.columns] = clustered.centers
    adata.uns[name] = {
        "method": "trend_modules",
        "params": plain_params(dict(result=result, n_modules=n_modules, fdr=fdr, genes_given=genes is not None,
                                    n_genes=int(fitted.size), random_state=random_state)),
        "result": result,
        "curves": centers.reshape(n_modules, *curves.shape[1:]),
        "n_genes": np.bincount(clustered.labels[clustered.labels >= 0], minlength=n_modules).astype(np.int64),
    }
    logg.info(
        f"    finished ({int((clustered.labels < 0).sum())} flat curve(s) left out)",
        time=start,
        deep=f"added\n    var[{name!r}], uns[{name!r}]",
    )
    return adata if copy else None


fill_doc(trend_modules)
