"""Legends beside scanpy's: placed like its ``legend_loc``, stacked in the right margin or moved apart
inside the axes so that none covers another, and colour bars labelled."""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.legend import Legend
from matplotlib.transforms import blended_transform_factory, offset_copy

#: Points between legends stacked in a margin or moved apart.
LEGEND_GAP = 6.0


def place_legend(ax: Axes, legend_loc: str | None, **kwargs):
    """A matplotlib legend of ``ax``'s labelled artists (or ``handles=``) placed like scanpy's ``legend_loc``.

    ``"right margin"`` puts it outside the axes on the right, ``None`` or
    ``"none"`` draws none, any other value is a matplotlib ``loc``
    (``"best"``, ``"upper left"``, …). Returns the legend or None.
    """
    if legend_loc is None or legend_loc == "none":
        return None
    if legend_loc == "right margin":
        return ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False, **kwargs)
    return ax.legend(loc=legend_loc, **kwargs)


def add_extra_legend(ax: Axes, handles: list, legend_loc: str | None, *, move_others: bool = True,
                     title: str | None = None, last: bool = False) -> Legend | None:
    """A legend of ``handles`` (titled ``title``) beside scanpy's legend of the cells' categories, placed by ``legend_loc``.

    ``"right margin"`` (or ``"on data"``, where scanpy writes the categories on
    the cells) stacks it with the other legends in the right margin, from the
    top down (this one on top, or with ``last`` at the bottom), right of a
    colour bar; ``None`` or ``"none"`` draws none; a matplotlib location puts
    it inside the axes there and, with ``move_others``, moves the legends it
    lands on next to it. Returns the legend or None.

    An extra artist, not ``ax.legend()``, which would replace scanpy's legend
    of the cells' categories. Never clipped: ``add_artist`` clips an artist to
    the axes, which would hide a legend in the margin.
    """
    if legend_loc is None or legend_loc == "none":
        return None
    texts = [handle.get_label() for handle in handles]
    if legend_loc in ("right margin", "on data"):  # "on data" writes categories on the cells, not this legend
        legend = Legend(ax, handles, texts, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small",
                        frameon=False, title=title, title_fontsize="small")
    else:
        legend = Legend(ax, handles, texts, loc=legend_loc, fontsize="small", framealpha=0.8, title=title,
                        title_fontsize="small")
    ax.add_artist(legend)
    legend.set_clip_on(False)
    if legend_loc in ("right margin", "on data"):
        _stack_margin_legends(ax, legend, last=last)
    elif move_others:
        _move_legends_off(ax, legend)
    return legend


def label_colorbar(ax: Axes, label: str) -> None:
    """Label the colour bar of every mappable drawn in ``ax`` (scanpy's colour bars come unlabelled)."""
    for artist in [*ax.collections, *ax.images]:
        colorbar = getattr(artist, "colorbar", None)
        if colorbar is not None:
            colorbar.set_label(label)


def visible_legends(ax: Axes, besides: Legend | None = None) -> list[Legend]:
    """The visible legends of ``ax`` (scanpy's of the categories, the graph's, …), ``besides`` left out."""
    return [artist for artist in [ax.get_legend(), *ax.artists]
            if isinstance(artist, Legend) and artist is not besides and artist.get_visible()]


def _stack_margin_legends(ax: Axes, first: Legend, *, last: bool = False) -> None:
    """Stack every legend in ``ax``'s right margin from its top down, ``first`` on top (``last``: at the
    bottom), so none covers another.

    scanpy centres its legend of categories on the margin, where the path's
    legend would land on it, and puts the colour bar of a continuous colour
    there: the stack starts right of the colour bar's ticks and label. The
    offsets are in points (a legend's own size) from the axes or colour bar,
    so the stack stays intact when the figure is resized or laid out later.
    """
    right = ax.get_window_extent().x1
    others = [legend for legend in visible_legends(ax, first) if legend.get_window_extent().x0 >= right - 1.0]
    bars = [artist.colorbar.ax for artist in [*ax.collections, *ax.images]
            if getattr(artist, "colorbar", None) is not None]
    base, beside = ax.transAxes, 0.0  # the anchor's transform, and points right of it
    if bars:  # x: the colour bar's right edge (then its ticks and label), y: the axes' top
        base = blended_transform_factory(bars[-1].transAxes, ax.transAxes)
        beside = (bars[-1].get_tightbbox().x1 - bars[-1].get_window_extent().x1) * 72.0 / ax.figure.dpi + LEGEND_GAP
    below = 0.0  # points from the axes' top
    for legend in [*others, first] if last else [first, *others]:
        legend.set_loc("upper left")
        legend.set_bbox_to_anchor((1.0, 1.0), transform=offset_copy(base, fig=ax.figure, x=beside, y=-below,
                                                                     units="points"))
        below += legend.get_window_extent().height * 72.0 / ax.figure.dpi + LEGEND_GAP


def _move_legends_off(ax: Axes, first: Legend) -> None:
    """Move the legends that ``first``, inside the axes, lands on next to it, towards the axes' centre.

    scanpy puts its legend of categories at the same ``legend_loc``, and
    ``"best"`` picks the same corner for both. ``first`` keeps its corner
    (``"best"`` resolved to it); the others move by its height, in points, so
    that they stay clear of it when the figure is resized.
    """
    box = first.get_window_extent()
    others = [legend for legend in visible_legends(ax, first) if legend.get_window_extent().overlaps(box)]
    if not others:
        return
    axes = ax.get_window_extent()
    vertical = "upper" if box.y0 + box.y1 > axes.y0 + axes.y1 else "lower"
    corner = f"{vertical} {'left' if box.x0 - axes.x0 < axes.x1 - box.x1 else 'right'}"
    first.set_loc(corner)
    away = -1.0 if vertical == "upper" else 1.0
    shift = box.height * 72.0 / ax.figure.dpi + LEGEND_GAP  # points
    for legend in others:
        legend.set_loc(corner)
        legend.set_bbox_to_anchor((0.0, 0.0, 1.0, 1.0), transform=offset_copy(ax.transAxes, fig=ax.figure,
                                                                               y=away * shift, units="points"))
        shift += legend.get_window_extent().height * 72.0 / ax.figure.dpi + LEGEND_GAP
