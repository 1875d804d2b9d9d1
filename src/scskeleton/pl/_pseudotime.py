"""``pl.pseudotime``: cells along pseudotime, one row per segment."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._anndata.schema import pseudotime_key, resolve_key, segment_key
from ._docs import plot_doc
from ._figures import finish, new_axes, set_frame
from ._labels import method_name, obs_label, segment_names
from ._scatter import scatter_cells

#: Half the height of a segment's row that the vertical jitter may use.
JITTER = 0.35
#: Fixed seed of the jitter: the same data give the same picture, pixel for pixel.
JITTER_SEED = 0


@plot_doc
def pseudotime(
    adata: AnnData,
    key: str | None = None,
    *,
    color: str | None = None,
    title: str | None = None,
    legend_loc: str | None = "right margin",
    frameon: bool | None = None,
    ax: Axes | None = None,
    show: bool | None = None,
    save: str | os.PathLike | None = None,
    return_fig: bool = False,
    **scatter_kwargs,
) -> Figure | Axes | None:
    """Strip plot of the cells' pseudotime, one row per segment of the graph.

    x is ``obs[f"{key}_pseudotime"]``, the row is ``obs[f"{key}_segment"]``
    (segment ``"0"``, which starts at the root, on top; each row labelled by
    its two milestones, ``"root → fork 1"``), with a small vertical
    jitter drawn from a fixed seed so that the plot is deterministic. Cells
    with NaN pseudotime (outside the root's connected component) are not drawn.

    Parameters
    ----------
    {adata_pseudotime}
    {key_fitted}
    color
        An ``.obs`` column or a gene name to colour the cells by. Default: the
        segment (legend entries named by milestones, ``"root → fork 1"``).
    title
        Title of the plot. Default: what is plotted and what the colour
        shows, e.g. ``"DDRTree pseudotime per segment, coloured by cell type"``;
        ``"DDRTree pseudotime per segment"`` when the colour is the segment.
    {legend_loc_categories}
    frameon
        Draw the box around the plot; ``None`` follows scanpy's setting. The
        pseudotime axis keeps its ticks and label either way.
    {ax_new}
    {show_save_return}
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``size``, ``palette``, ``cmap``, …).

    Returns
    -------
    {returns_axes}
    """
    key = resolve_key(adata, key)
    missing = [name for name in (pseudotime_key(key), segment_key(key)) if name not in adata.obs]
    if missing:
        raise KeyError(
            f"adata.obs lacks {missing}; run sks.tl.pseudotime(adata, {key!r}) first "
            f"(after choosing a root with sks.tl.root)."
        )
    times = adata.obs[pseudotime_key(key)].to_numpy(dtype=float)
    segments = pd.Categorical(adata.obs[segment_key(key)])
    rows = segments.codes.astype(float)
    rows[segments.codes < 0] = np.nan  # cells without a segment are not drawn
    jitter = np.random.default_rng(JITTER_SEED).uniform(-JITTER, JITTER, size=adata.n_obs)
    coordinates = np.column_stack([times, rows + jitter])

    fig, ax, created = new_axes(ax, figsize=(6.4, 0.5 + 0.6 * max(len(segments.categories), 2)))
    shown = segment_key(key) if color is None else color
    scatter_cells(
        adata,
        coordinates,
        basis="X_pseudotime_strip",
        dimensions=(0, 1),
        color=shown,
        ax=ax,
        # scanpy's frameon=False would switch the axes off, and with them the pseudotime axis
        scatter_kwargs={"legend_loc": legend_loc, **scatter_kwargs, "frameon": True},
        title=title if title is not None else _default_title(adata, key, shown),
    )
    # scanpy removes the ticks of embeddings; here both axes carry meaning.
    ax.xaxis.set_major_locator(ticker.AutoLocator())
    ax.set_yticks(np.arange(len(segments.categories)), _row_labels(adata.uns.get(key, {}), segments.categories))
    ax.set_ylim(len(segments.categories) - 0.5, -0.5)
    ax.set_xlabel(f"{method_name(adata, key)} pseudotime")
    ax.set_ylabel("segment")
    set_frame(ax, frameon)
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def _default_title(adata: AnnData, key: str, color: str) -> str:
    """``"DDRTree pseudotime per segment, coloured by cell type"``: the colour's name alone said nothing of
    what the rows and the x axis are. A column of the same fit is named without its method, once is enough."""
    plotted = f"{method_name(adata, key)} pseudotime per segment"
    if color == segment_key(key):
        return plotted  # the rows are the segments already
    own = color.startswith(f"{key}_") and color in adata.obs.columns
    return f"{plotted}, coloured by {obs_label(adata, color, short=own)}"


def _row_labels(entry, categories) -> list[str]:
    """Each segment's label (``"root → fork 1"``, from ``uns[key]["milestones"]``), or its id when there is none."""
    labels = segment_names(entry, [str(c) for c in categories])
    return [label if not label.startswith("segment ") else str(c) for label, c in zip(labels, categories)]
