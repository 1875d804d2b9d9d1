"""Docstring paragraphs that several plots share, written once (see :func:`plot_doc`).

Each plot's docstring names them by placeholders alone on their lines, ``{show_save_return}``;
``help()`` shows the full text.
"""

from __future__ import annotations

from collections.abc import Callable

from .._anndata.docs import fill_doc

#: The paragraphs by placeholder name, without indentation (``_anndata.docs`` indents them); those
#: that tools share with plots are in ``_anndata.docs.PARAGRAPHS``.
PARAGRAPHS = {
    "adata_graph": """\
adata
    Annotated data matrix with a graph fitted, e.g. by ``sks.tl.ddrtree``.""",
    "legend_loc_categories": """\
legend_loc
    Where the legend of a categorical colour goes, as in
    :func:`scanpy.pl.embedding`: ``"right margin"`` (default), ``"on data"``
    or ``None`` for none.""",
    "legend_loc_conditions": """\
legend_loc
    Where the legend of the conditions goes: ``"right margin"`` (default),
    ``"best"`` or another matplotlib location, or ``None`` for none.""",
    "frameon": """\
frameon
    Draw the axes frame; ``None`` follows scanpy's setting.""",
    "ax_new": """\
ax
    Draw into this Axes instead of a new figure.""",
    "show_save_return": """\
show
    Show the figure; ``None`` shows it only when matplotlib is interactive.
save
    File path to write the figure to (format from the extension).
return_fig
    Return the Figure.""",
    "returns_axes": """\
The Figure when ``return_fig=True``, else the Axes when ``show=False``,
else ``None``.""",
}


def plot_doc(function: Callable) -> Callable:
    """Fill the placeholders of ``function.__doc__`` with :data:`PARAGRAPHS`; a decorator."""
    return fill_doc(function, **PARAGRAPHS)
