"""The figure and panels of every plot: axes made or given, a grid of panels, their titles and
frames, and the one rule by which a finished plot is laid out, saved, shown and returned."""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence

import matplotlib
import matplotlib.pyplot as plt
import scanpy as sc
from matplotlib import rcParams
from matplotlib.axes import Axes
from matplotlib.figure import Figure

#: Saved figures get at least this resolution (dots per inch) unless ``rcParams["savefig.dpi"]`` sets one.
SAVE_DPI = 150
#: Inches of white kept around what a figure made here holds when it is enlarged to show its legends.
FIGURE_PAD = 0.05


def new_axes(ax: Axes | None, figsize: tuple[float, float] | None = None) -> tuple[Figure, Axes, bool]:
    """The figure and axes to draw into, and whether this call created them.

    Creating the axes here (rather than letting scanpy do it) means every plot
    owns a single, known figure that ``save``/``return_fig`` can refer to.
    """
    if ax is not None:
        if not isinstance(ax, Axes):
            raise TypeError(f"ax must be a matplotlib Axes; got {type(ax).__name__}.")
        return ax.figure, ax, False
    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax, True


def panel_grid(
    n_panels: int, *, ncols, ax: Axes | None, panel_size: tuple[float, float], what: str, sharex: bool = False
) -> tuple[Figure, list[Axes], bool]:
    """One Axes per panel: ``ax`` itself for a single panel, else a new grid of ``ncols`` columns.

    Returns the figure, the ``n_panels`` Axes (unused cells of the grid are
    switched off) and whether this call created them. ``what`` names a panel
    in the error messages.
    """
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer; got {ncols!r}.")
    if ax is not None:
        if n_panels > 1:
            raise ValueError(f"ax= draws one {what}; got {n_panels}. Leave ax=None for one panel per {what}.")
        fig, ax, created = new_axes(ax)
        return fig, [ax], created
    ncols = min(ncols, n_panels)
    nrows = -(-n_panels // ncols)
    fig, grid = plt.subplots(
        nrows, ncols, figsize=(panel_size[0] * ncols, panel_size[1] * nrows), squeeze=False, sharex=sharex
    )
    panels = list(grid.ravel())
    for extra in panels[n_panels:]:
        extra.set_axis_off()
    return fig, panels[:n_panels], True


def broadcast_panels(first: list, second: list, names: tuple[str, str]) -> tuple[list, list]:
    """One entry of each per panel, paired as :func:`scanpy.pl.embedding` pairs colours and dimensions:
    lists of one length go together, and a single entry is repeated for every entry of the other."""
    if len(first) == len(second):
        return first, second
    if len(first) == 1:
        return first * len(second), second
    if len(second) == 1:
        return first, second * len(first)
    raise ValueError(f"{len(first)} {names[0]} and {len(second)} {names[1]} cannot be paired into panels; "
                     f"pass as many of each, or one of either.")


def panel_titles(title: str | Sequence[str] | None, n_panels: int) -> list[str | None]:
    """One title per panel from a ``title=`` argument: None (defaults), one string, or one per panel."""
    if title is None or isinstance(title, str):
        return [title] * n_panels
    titles = list(title)
    if len(titles) != n_panels:
        raise ValueError(f"title has {len(titles)} entries for {n_panels} panels; pass one per panel or a string.")
    return titles


def panel_colors(color, *, default: str | None = None, none_means: str = "grey cells") -> list:
    """One colour key per panel from a ``color=`` argument: one key, a list of them, or None (``default``,
    which ``none_means`` names in the error about an empty list)."""
    colors = [default] if color is None else [color] if isinstance(color, str) else list(color)
    if not colors:
        raise ValueError(f"color is empty; name an .obs column or gene, or pass None for {none_means}.")
    return colors


def tidy_panels(fig: Figure, panels: Sequence[Axes], *, created: bool) -> None:
    """Space a grid of panels this call created so that no legend or colour bar runs into a neighbour.

    A one-off ``tight_layout`` (no layout engine is left behind, so a later
    ``plt.tight_layout()`` by the user neither warns nor fights it).
    """
    if created and len(panels) > 1:
        wrap_long_labels(panels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "not compatible with tight_layout": best effort
            fig.tight_layout()


def wrap_long_labels(panels: Sequence[Axes]) -> None:
    """Break an x-axis label wider than its panel onto two lines, at the space nearest its middle.

    Side by side, panels of a grid are a few inches wide, and a label such as
    "registered principal tree (RPG) pseudotime" ran into the next panel's.
    """
    for ax in panels:
        label = ax.xaxis.label
        text = label.get_text()
        if " " not in text or "\n" in text:
            continue
        if label.get_window_extent().width <= ax.get_window_extent().width:
            continue
        spaces = [i for i, char in enumerate(text) if char == " "]
        cut = min(spaces, key=lambda i: abs(i - len(text) / 2))
        label.set_text(f"{text[:cut]}\n{text[cut + 1:]}")


def set_frame(ax: Axes, frameon: bool | None) -> None:
    """Hide the box around a plot whose axes measure something (pseudotime, expression), keeping its ticks.

    ``frameon=None`` follows scanpy's setting (``sc.set_figure_params(frameon=...)``).
    """
    if not (sc.settings._frameon if frameon is None else frameon):
        for spine in ax.spines.values():
            spine.set_visible(False)


def finish(
    fig: Figure,
    ax: Axes,
    *,
    created: bool,
    show: bool | None,
    save: str | os.PathLike | None,
    return_fig: bool,
) -> Figure | Axes | None:
    """Save, show and return a finished plot following one rule for all plots.

    Returns the Figure when ``return_fig`` is true, otherwise the Axes when
    ``show is False`` (as ``scanpy.pl`` does), otherwise ``None``.

    A figure this call created is first enlarged to hold its legends and
    colour bars (:func:`fit_figure`), and is saved at :func:`save_dpi`.

    ``show=None`` shows only when matplotlib is interactive (IPython/Jupyter
    with a GUI or inline backend), so scripts and tests never block. A figure
    this call created, saved and hands back to nobody is closed, so that plotting
    in a loop does not pile up open figures; an unsaved one stays open for a
    later ``plt.show()``/``plt.savefig()``.
    """
    if created:
        fit_figure(fig)
    if save is not None:
        if not isinstance(save, str | os.PathLike):
            raise TypeError(f"save must be a file path (str or pathlib.Path); got {type(save).__name__}.")
        fig.savefig(save, bbox_inches="tight", dpi=save_dpi(fig))
    if return_fig:
        return fig
    if show is False:
        return ax
    if show is None:
        show = matplotlib.is_interactive()
    if show:
        plt.show()
    elif created and save is not None:
        plt.close(fig)
    return None


def finish_panels(
    fig: Figure,
    panels: Sequence[Axes],
    *,
    created: bool,
    show: bool | None,
    save: str | os.PathLike | None,
    return_fig: bool,
) -> Figure | Axes | list[Axes] | None:
    """:func:`tidy_panels`, then :func:`finish` with the Axes of a single panel, or the list of several."""
    tidy_panels(fig, panels, created=created)
    return finish(fig, panels[0] if len(panels) == 1 else panels, created=created, show=show, save=save,
                  return_fig=return_fig)


def save_dpi(fig: Figure) -> float:
    """The resolution a figure is saved at: ``rcParams["savefig.dpi"]`` when it sets one (as
    ``sc.set_figure_params(dpi_save=...)`` does), else the figure's own dpi but at least :data:`SAVE_DPI`."""
    stored = rcParams["savefig.dpi"]
    if stored != "figure":
        return float(stored)
    return max(float(fig.dpi), float(SAVE_DPI))


def fit_figure(fig: Figure, *, pad: float = FIGURE_PAD) -> None:
    """Enlarge ``fig`` so that everything it draws (legends in the margins, colour bars, labels) lies on it.

    A legend in the right margin of a small figure ran off its edge and was
    cut away wherever the figure was shown or saved without
    ``bbox_inches="tight"``. The figure grows by what sticks out (plus
    ``pad`` inches) and every Axes keeps its size and place in inches, so the
    plot itself looks the same; a figure that holds everything already is left as it is.
    """
    width, height = fig.get_size_inches()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        extent = fig.get_tightbbox(fig.canvas.get_renderer())  # inches
    if extent is None:
        return
    left, bottom = max(0.0, pad - extent.x0), max(0.0, pad - extent.y0)
    right, top = max(0.0, extent.x1 - width + pad), max(0.0, extent.y1 - height + pad)
    if max(left, bottom, right, top) <= 1e-3:
        return
    grown = (width + left + right, height + bottom + top)
    places = [(ax, ax.get_position(original=False)) for ax in fig.axes]
    fig.set_size_inches(*grown, forward=True)
    for ax, box in places:
        ax.set_position([(box.x0 * width + left) / grown[0], (box.y0 * height + bottom) / grown[1],
                         box.width * width / grown[0], box.height * height / grown[1]])
