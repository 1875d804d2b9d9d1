"""``pl.condition_fates``: each sample's fate shares, grouped by condition, with the tests' p-values."""

from __future__ import annotations

import os
from collections.abc import Mapping

import matplotlib.pyplot as plt
import numpy as np
from anndata import AnnData
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ._docs import plot_doc
from ._figures import finish, new_axes, set_frame
from ._labels import format_pvalue
from ._legends import place_legend


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
    frameon
        Draw the axes frame; ``None`` follows scanpy's setting.
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
    entry = adata.uns.get(result) if isinstance(result, str) else None
    if not isinstance(entry, Mapping) or entry.get("method") != "condition_fates":
        found = [k for k, v in adata.uns.items() if isinstance(v, Mapping) and v.get("method") == "condition_fates"]
        raise KeyError(f"No result of sks.tl.condition_fates under adata.uns[{result!r}]; results present: {found}.")
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
    tab10 = plt.get_cmap("tab10").colors
    colours = [tab10[k % len(tab10)] for k in range(len(fates))]
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


plot_doc(condition_fates)
