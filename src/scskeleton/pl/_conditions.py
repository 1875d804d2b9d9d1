"""``pl.condition_fates``, ``pl.condition_progression`` and ``pl.condition_curves``: what the condition
tools compared, drawn from their stored results: each sample's fate shares, the pseudotime of each
condition's cells along each lineage, and each condition's curve of a gene along a lineage."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._anndata.schema import fate_probabilities_key, pseudotime_key, segment_key
from .._core.stats.conditions import kernel_width, weighted_density
from ._colors import tab10_colors
from ._docs import plot_doc
from ._figures import finish, finish_panels, new_axes, panel_grid, set_frame
from ._labels import format_pvalue
from ._legends import place_legend
from ._results import fitted_expression, fitted_genes


def condition_fates(
    adata: AnnData,
    result: str,
    *,
    title: str | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | None:
    """Stacked bars of every unit's fate shares, grouped by condition.

    One bar per sample (per unit of ``tl.condition_fates``), its segments the
    sample's shares of the fates, samples of one condition side by side and
    the conditions in the order compared (the reference first), each under
    its name. The legend gives every fate its p-value (q-value in brackets).
    Reads ``adata.uns[result]`` only.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``sks.tl.condition_fates`` has run.
    result
        Key of its result in ``adata.uns``, e.g. ``"rpg_condition_fates"``.
    title
        Title; default "fate shares by sample".
    legend_loc
        Where the legend of the fates goes: ``"right margin"`` (default),
        ``"best"`` or another matplotlib location, or ``None`` for none.
    {frameon}
    {ax_new}
    {show_save_return}

    Returns
    -------
    {returns_axes}

    Examples
    --------
    >>> sks.tl.condition_fates(adata, "rpg", condition="condition", sample="sample")
    >>> sks.pl.condition_fates(adata, "rpg_condition_fates")
    """
    entry = _stored(adata, result, "condition_fates")
    fates = [str(f) for f in entry["fates"]]
    conditions = [str(c) for c in entry["conditions"]]
    unit_condition = np.asarray(entry["unit_condition"]).astype(str)
    shares = np.asarray(entry["unit_shares"], dtype=float)
    order = np.concatenate([np.flatnonzero(unit_condition == c) for c in conditions])
    # a gap of one bar between conditions
    position = np.concatenate([np.arange(np.sum(unit_condition == c)) + sum(np.sum(unit_condition == d) + 1
                                                                          for d in conditions[:k])
                               for k, c in enumerate(conditions)])

    fig, ax, created = new_axes(ax, figsize=(max(4.0, 0.45 * position.size + 2.0), 3.6))
    colours = tab10_colors(fates)
    bottom = np.zeros(order.size)
    for k, fate in enumerate(fates):
        label = f"{fate} ({format_pvalue(entry['pval'][k], 'p')}; {format_pvalue(entry['qval'][k], 'q')})"
        ax.bar(position, shares[order, k], bottom=bottom, color=colours[k], width=0.8, label=label)
        bottom += shares[order, k]
    ax.set_xticks(position, [str(u) for u in np.asarray(entry["units"])[order]], rotation=90)
    centres = [position[unit_condition[order] == c].mean() for c in conditions]
    for centre, name in zip(centres, conditions):
        ax.annotate(name, (centre, 1.02), xycoords=("data", "axes fraction"), ha="center", va="bottom")
    ax.set_ylim(0, 1)
    ax.set_ylabel("fate share")
    ax.set_title(title if title is not None else "fate shares by sample", pad=18)
    set_frame(ax, frameon)
    if legend_loc is not None:
        place_legend(ax, legend_loc, title="fate")
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def condition_progression(
    adata: AnnData,
    result: str,
    *,
    ncols: int = 3,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | list[Axes] | None:
    """The pseudotime of each condition's cells along each lineage, one panel per lineage.

    In each panel, one density per condition of the pseudotime of its cells,
    each cell weighted by its probability of the lineage's fate (as
    ``tl.condition_progression`` weights them); with samples also each
    sample's density as a thin line of its condition's colour, so that the
    spread between replicates shows beside the difference between the
    conditions. The panel's title gives the lineage and its p-value. Reads
    ``adata.uns[result]`` and the pseudotime, fate probabilities, conditions
    and samples it names.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``sks.tl.condition_progression`` has run.
    result
        Key of its result in ``adata.uns``, e.g. ``"rpg_condition_progression"``.
    ncols
        Panels per row.
    {legend_loc_conditions}
    {frameon}
    ax
        Draw into this Axes (for a result with one lineage) instead of a new figure.
    {show_save_return}

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of them for
    several lineages) when ``show=False``, else ``None``.

    Examples
    --------
    >>> sks.tl.condition_progression(adata, "rpg", condition="condition", sample="sample")
    >>> sks.pl.condition_progression(adata, "rpg_condition_progression")
    """
    entry = _stored(adata, result, "condition_progression")
    key, params = str(entry["graph"]), entry["params"]
    lineages, conditions = [str(f) for f in entry["lineages"]], [str(c) for c in entry["conditions"]]
    times = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
    probabilities = np.asarray(adata.obsm[fate_probabilities_key(key)], dtype=float)
    labels = adata.obs[str(params["condition"])].astype(str).to_numpy()
    samples = adata.obs[str(params["sample"])].astype(str).to_numpy() if params["sample"] else None
    usable = np.isfinite(times) & np.isfinite(probabilities).all(axis=1)
    grid = np.linspace(np.nanmin(times[usable]), np.nanmax(times[usable]), 200)
    colours = dict(zip(conditions, tab10_colors(conditions)))

    fig, panels, created = panel_grid(len(lineages), ncols=ncols, ax=ax, panel_size=(4.2, 3.2), what="lineage")
    for k, (panel, lineage) in enumerate(zip(panels, lineages)):
        width = kernel_width(times[usable], probabilities[usable, k])
        for condition in conditions:
            cells = usable & (labels == condition)
            panel.plot(grid, weighted_density(times[cells], probabilities[cells, k], grid, width), color=colours[condition],
                       lw=2, label=condition)
            for sample in ([] if samples is None else np.unique(samples[cells])):
                own = cells & (samples == sample)
                panel.plot(grid, weighted_density(times[own], probabilities[own, k], grid, width),
                           color=colours[condition], lw=0.7, alpha=0.5)
        panel.set_title(f"{lineage} ({format_pvalue(entry['pval'][k], 'p')})")
        panel.set_xlabel("pseudotime")
        panel.set_ylabel("density")
        set_frame(panel, frameon)
    if legend_loc is not None:
        place_legend(panels[-1], legend_loc, title="condition")
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def condition_curves(
    adata: AnnData,
    result: str,
    genes: str | Sequence[str],
    *,
    gene_symbols: str | None = None,
    show_cells: bool = True,
    size: float | None = None,
    ncols: int = 3,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | list[Axes] | None:
    """Each condition's curve of a gene along the lineage ``tl.condition_test`` compared, one panel per gene.

    In each panel, one curve per condition (the conditions' fits, thick, in
    the order compared) over the lineage's cells, each cell a dot of its
    condition's colour; with samples, dotted lines bound the stretch of
    pseudotime every sample covers, where the samples' curves were compared.
    The panel's title gives the gene, its p- and q-value. Reads
    ``adata.uns[result]``, its curves and the expression it fitted.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``sks.tl.condition_test`` has run.
    result
        Key of its result in ``adata.uns``, e.g. ``"rpg_condition_test"``.
    genes
        A gene or genes (``var_names``, or ``adata.var[gene_symbols]``) that the test fitted.
    gene_symbols
        Column of ``adata.var`` that ``genes`` name.
    show_cells
        Draw the lineage's cells.
    size
        Dot size of the cells; default from their number.
    ncols
        Panels per row.
    {legend_loc_conditions}
    {frameon}
    ax
        Draw into this Axes (for one gene) instead of a new figure.
    {show_save_return}

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes (a list of them for
    several genes) when ``show=False``, else ``None``.

    Examples
    --------
    >>> sks.tl.condition_test(adata, "rpg", condition="condition", sample="sample", lineage="tip 1")
    >>> top = adata.var.sort_values("rpg_condition_test_pval").index[:3]
    >>> sks.pl.condition_curves(adata, "rpg_condition_test", top)
    """
    entry = _stored(adata, result, "condition_test")
    genes = [genes] if isinstance(genes, str) else list(genes)
    key, params = str(entry["graph"]), entry["params"]
    conditions = [str(c) for c in entry["conditions"]]
    columns = fitted_genes(adata, result, entry, genes, gene_symbols)
    times = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
    labels = adata.obs[str(params["condition"])].astype(str).to_numpy()
    on_lineage = adata.obs[segment_key(key)].astype(str).isin([str(s) for s in entry["segments"]]).to_numpy()
    cells = np.flatnonzero(on_lineage & np.isfinite(times) & np.isin(labels, conditions))
    values, shown = fitted_expression(adata, entry, columns, cells, use_raw=None, layer=None)
    curves = np.asarray(adata.varm[f"{result}_curves"], dtype=float)
    grid = np.asarray(entry["grid"], dtype=float)
    pvals, qvals = adata.var[f"{result}_pval"].to_numpy(), adata.var[f"{result}_qval"].to_numpy()
    size = min(20.0, 12000.0 / max(cells.size, 1)) if size is None else size
    colours = dict(zip(conditions, tab10_colors(conditions)))

    fig, panels, created = panel_grid(len(genes), ncols=ncols, ax=ax, panel_size=(4.2, 3.2), what="gene")
    for g, (panel, gene, column) in enumerate(zip(panels, genes, columns)):
        for k, condition in enumerate(conditions):
            mine = labels[cells] == condition
            if show_cells:
                panel.scatter(times[cells][mine], values[mine, g], s=size, color=colours[condition], alpha=0.35,
                              linewidths=0, rasterized=True)
            panel.plot(grid, curves[column, k], color=colours[condition], lw=2.2, label=condition)
        if params["sample"]:
            for bound in np.asarray(entry["covered"], dtype=float):
                panel.axvline(bound, color="0.4", lw=0.8, ls=":")
        panel.set_title(f"{gene} ({format_pvalue(pvals[column], 'p')}; {format_pvalue(qvals[column], 'q')})")
        panel.set_xlabel(f"pseudotime, lineage to {entry['lineage']}")
        panel.set_ylabel(f"expression ({shown})")
        set_frame(panel, frameon)
    if legend_loc is not None:
        place_legend(panels[-1], legend_loc, title="condition")
    return finish_panels(fig, panels, created=created, show=show, save=save, return_fig=return_fig)


def _stored(adata: AnnData, result: str, method: str) -> Mapping:
    """``adata.uns[result]``, a result of ``sks.tl.{method}``; a KeyError naming those present otherwise."""
    entry = adata.uns.get(result) if isinstance(result, str) else None
    if not isinstance(entry, Mapping) or entry.get("method") != method:
        found = [k for k, v in adata.uns.items() if isinstance(v, Mapping) and v.get("method") == method]
        raise KeyError(f"No result of sks.tl.{method} under adata.uns[{result!r}]; results present: {found}.")
    return entry


plot_doc(condition_fates)
plot_doc(condition_progression)
plot_doc(condition_curves)
