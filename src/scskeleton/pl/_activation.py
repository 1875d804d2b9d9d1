"""``pl.activation``: when genes switch on along each lineage (``tl.activation``)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .._anndata.inputs import check_gene_symbols, gene_columns
from ._colors import lineage_colors
from ._figures import finish, new_axes
from ._labels import lineage_title
from ._legends import add_extra_legend, place_legend
from ._results import branch_names, check_groupby, resolve_result, time_label

#: The largest rise of a gene on any lineage is drawn at this marker area; smaller rises scale down ...
LARGEST_MARKER = 80.0
#: ... to no less than this.
SMALLEST_MARKER = 12.0
#: Height of one gene's row in inches, when the figure is made here.
ROW_HEIGHT = 0.22
#: The shares of a gene's largest rise shown in the legend of marker sizes.
SIZE_LEGEND_SHARES = (1.0, 0.5, 0.25)


def activation(
    adata: AnnData,
    key: str,
    *,
    genes: str | Sequence[str] | None = None,
    n_genes: int = 30,
    gene_symbols: str | None = None,
    groupby: str | None = None,
    legend_loc: str | None = "right margin",
    figsize: tuple[float, float] | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
) -> Figure | Axes | None:
    """When genes switch on along each lineage: the activation times of ``tl.activation``.

    One row per gene, earliest activation first; on it one marker per
    lineage the gene activates on, at its activation pseudotime
    (``varm[f"{key}_time"]``), coloured by lineage, its area in proportion to
    the gene's rise on that lineage (``varm[f"{key}_rise"]``) relative to its
    largest (a second legend gives the scale). A grey line joins a gene's
    markers: how far apart the lineages switch it on. Lineages are named by
    their milestones (``"root → tip 2"``) or, with ``groupby``, by their
    cells' most common label and drawn in that label's colour
    (``adata.uns[f"{groupby}_colors"]``, as in scanpy's plots). With
    ``direction="down"`` in ``tl.activation`` the times are those of the
    first significant fall.

    Parameters
    ----------
    adata
        Annotated data matrix on which ``tl.activation`` has run.
    key
        Its ``key_added``, e.g. ``"rpg_activation"``, or the key of the graph
        it ran on (``"rpg"``): then the one ``tl.activation`` result computed
        on that graph (a KeyError lists them when there are several; pass one).
    genes
        Genes to draw (``var_names`` or, with ``gene_symbols``, that column's
        values). ``None`` (default): the ``n_genes`` that activate earliest.
        Genes that activate on no lineage are left out.
    n_genes
        How many genes to draw when ``genes`` is ``None``.
    gene_symbols
        An ``adata.var`` column that names the genes, in ``genes`` and on the axis.
    groupby
        An ``.obs`` column, e.g. ``"cell_type"``: name and colour the lineages
        by it (each in the colour of its cells' most common category). Default:
        milestone names, ``tab10`` colours.
    legend_loc
        Where the legends of lineages and of marker sizes go: ``"right
        margin"`` (default, one above the other), a matplotlib location or
        ``None`` for neither.
    figsize
        Size of the figure made when ``ax`` is ``None`` (default: 6 inches
        wide, a row per gene high).
    ax, show, save, return_fig
        As in :func:`scskeleton.pl.trends`.

    Examples
    --------
    >>> sks.tl.activation(adata, "rpg", genes=called)
    >>> sks.pl.activation(adata, "rpg", groupby="cell_type")  # or "rpg_activation"
    """
    key = resolve_result(adata, key, ("activation",), caller="sks.pl.activation")
    result = _activation_result(adata, key)
    check_groupby(adata, groupby)
    check_gene_symbols(adata, gene_symbols)
    times = np.asarray(adata.varm[f"{key}_time"], dtype=float)
    rises = np.abs(np.asarray(adata.varm[f"{key}_rise"], dtype=float))
    earliest = np.where(np.isfinite(times).any(axis=1), np.nanmin(np.where(np.isfinite(times), times, np.inf),
                                                                   axis=1), np.nan)
    rows = _rows(adata, earliest, genes, n_genes, gene_symbols, key)
    lineages = [str(leaf) for leaf in result["lineages"]]
    names = branch_names(adata, key, groupby)
    colors = lineage_colors(adata, key, lineages, groupby)

    if figsize is None:
        figsize = (6.0, max(2.0, 1.0 + ROW_HEIGHT * rows.size))
    fig, ax, created = new_axes(ax, figsize)
    largest = np.nanmax(np.where(np.isfinite(times[rows]), rises[rows], np.nan), axis=1)
    for position, row in enumerate(rows):
        active = np.isfinite(times[row])
        if active.sum() > 1:
            ax.plot([times[row, active].min(), times[row, active].max()], [position, position], color="0.75",
                    linewidth=1.0, zorder=1)
    for lineage, leaf in enumerate(lineages):
        active = np.isfinite(times[rows, lineage])
        share = np.divide(rises[rows[active], lineage], largest[active], out=np.ones(int(active.sum())),
                          where=largest[active] > 0)
        ax.scatter(times[rows[active], lineage], np.flatnonzero(active),
                   s=np.maximum(LARGEST_MARKER * share, SMALLEST_MARKER), color=colors[lineage],
                   label=names.get(leaf, f"lineage to segment {leaf}"), zorder=2, edgecolors="white", linewidths=0.5)
    labels = adata.var[gene_symbols] if gene_symbols is not None else adata.var_names
    ax.set_yticks(np.arange(rows.size))
    ax.set_yticklabels([str(label) for label in np.asarray(labels)[rows]], fontsize="small")
    ax.set_ylim(rows.size - 0.5, -0.5)  # the earliest gene on top
    ax.set_xlabel(time_label(adata, result))
    falls = result.get("params", {}).get("direction") == "down"
    ax.set_title("first significant fall along each lineage" if falls else "activation along each lineage",
                 fontsize="medium")
    legend = place_legend(ax, legend_loc, fontsize="small", title=lineage_title(groupby))
    if legend is not None:
        legend.set_alignment("left")
    # markersize is a diameter in points, the scatter's s an area in points²
    sizes = [Line2D([], [], linestyle="none", marker="o", markerfacecolor="0.6", markeredgecolor="white",
                    markersize=np.sqrt(max(LARGEST_MARKER * share, SMALLEST_MARKER)), label=f"{share:.0%}")
             for share in SIZE_LEGEND_SHARES]
    sized = add_extra_legend(ax, sizes, legend_loc, title="rise, share of\nthe gene's largest", last=True)
    if sized is not None:
        sized.set_alignment("left")
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def _activation_result(adata: AnnData, key: str) -> Mapping:
    """The ``tl.activation`` result under ``key``, checked for every field the plot reads."""
    entry = adata.uns.get(key)
    if not isinstance(entry, Mapping) or entry.get("method") != "activation":
        found = [k for k, v in adata.uns.items() if isinstance(v, Mapping) and v.get("method") == "activation"]
        raise KeyError(f"sks.pl.activation found no tl.activation result under adata.uns[{key!r}]. Run "
                       f"sks.tl.activation(adata, <graph key>) first, or pass the key_added you used. Results "
                       f"present: {found}.")
    missing = [f"varm[{key + suffix!r}]" for suffix in ("_time", "_rise") if key + suffix not in adata.varm]
    if missing or "lineages" not in entry:
        raise KeyError(f"The result {key!r} is incomplete: {missing or ['its lineages']} missing (subset or "
                       "edited since?). Rerun sks.tl.activation.")
    return entry


def _rows(adata: AnnData, earliest: np.ndarray, genes, n_genes: int, gene_symbols: str | None, key: str) -> np.ndarray:
    """The genes to draw (column indices), earliest activation first; only genes that activate somewhere."""
    if genes is None:
        if isinstance(n_genes, bool) or not isinstance(n_genes, int | np.integer) or n_genes < 1:
            raise ValueError(f"n_genes must be a positive integer; got {n_genes!r}.")
        candidates = np.flatnonzero(np.isfinite(earliest))
    else:
        candidates = gene_columns(adata, [genes] if isinstance(genes, str) else genes, gene_symbols=gene_symbols)
        candidates = candidates[np.isfinite(earliest[candidates])]
        n_genes = candidates.size
    if candidates.size == 0:
        which = "None of the genes given" if genes is not None else "No gene"
        raise ValueError(f"{which} activates on any lineage in {key!r} (var[{key + '_time'!r}] is NaN): nothing "
                         "to draw. Time the genes the association test calls, or lower min_rise in tl.activation.")
    order = np.argsort(earliest[candidates], kind="stable")
    return candidates[order][:n_genes]
