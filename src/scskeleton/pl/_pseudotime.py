"""``pl.pseudotime``: cells along pseudotime, one row per segment."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
from anndata import AnnData
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .._schema import pseudotime_key, segment_key
from ._utils import finish, new_axes, scatter_cells

#: Half the height of a segment's row that the vertical jitter may use.
JITTER = 0.35
#: Fixed seed of the jitter: the same data give the same picture, pixel for pixel.
JITTER_SEED = 0


def pseudotime(
    adata: AnnData,
    key: str = "ddrtree",
    *,
    color: str | None = None,
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
    adata
        Annotated data matrix on which ``sks.tl.pseudotime(adata, key)`` has run.
    key
        Key of the graph, e.g. ``"ddrtree"``.
    color
        An ``.obs`` column or a gene name to colour the cells by. Default: the
        segment.
    ax
        Draw into this Axes instead of a new figure.
    show
        Show the figure; ``None`` shows it only when matplotlib is interactive.
    save
        File path to write the figure to (format from the extension).
    return_fig
        Return the Figure.
    **scatter_kwargs
        Passed to :func:`scanpy.pl.embedding` (``size``, ``palette``, ``cmap``, …).

    Returns
    -------
    The Figure when ``return_fig=True``, else the Axes when ``show=False``,
    else ``None``.
    """
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
    scatter_cells(
        adata,
        coordinates,
        basis="X_pseudotime_strip",
        components=(0, 1),
        color=segment_key(key) if color is None else color,
        ax=ax,
        scatter_kwargs=scatter_kwargs,
    )
    # scanpy removes the ticks of embeddings; here both axes carry meaning.
    ax.xaxis.set_major_locator(ticker.AutoLocator())
    ax.set_yticks(np.arange(len(segments.categories)), _row_labels(adata.uns.get(key, {}), segments.categories))
    ax.set_ylim(len(segments.categories) - 0.5, -0.5)
    ax.set_xlabel(f"{key} pseudotime")
    ax.set_ylabel("segment")
    return finish(fig, ax, created=created, show=show, save=save, return_fig=return_fig)


def _row_labels(entry, categories) -> list[str]:
    """Each segment's label (``"root → fork 1"``, from ``uns[key]["milestones"]``), or its id when there is none."""
    labels = [str(label) for label in entry.get("milestones", {}).get("segment_labels", [])]
    return [labels[int(c)] if str(c).isdigit() and int(c) < len(labels) else str(c) for c in categories]
