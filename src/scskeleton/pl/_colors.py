"""Colours of categories and lineages, read from ``uns[f"{key}_colors"]`` or chosen as scanpy would,
never written into the user's AnnData."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import scanpy as sc
from anndata import AnnData
from matplotlib import rcParams
from matplotlib.colors import to_hex

from ._results import branch_cells, check_groupby, group_labels, majority_label

#: Grey for nodes without a group (no assignment mass) and for > 102 categories,
#: the same fallback scanpy uses.
NA_COLOR = "lightgray"


def category_colors(adata: AnnData, key: str, categories: Sequence) -> list:
    """Colours for the categories of ``adata.obs[key]``, without writing them.

    Uses ``adata.uns[f"{key}_colors"]`` when it holds enough colours, otherwise
    the default scanpy would pick (matplotlib's colour cycle, then its 20/28/102
    colour palettes, then grey).
    """
    n = len(categories)
    stored = adata.uns.get(f"{key}_colors")
    if stored is not None and len(stored) >= n:
        return list(stored)[:n]
    cycle = rcParams["axes.prop_cycle"].by_key().get("color", [])
    if len(cycle) >= n:
        return list(cycle)[:n]
    for palette in (sc.pl.palettes.default_20, sc.pl.palettes.default_28, sc.pl.palettes.default_102):
        if len(palette) >= n:
            return list(palette)[:n]
    return [NA_COLOR] * n


def tab10_colors(labels: Sequence) -> list:
    """One colour per label, in order: matplotlib's ``tab10``, repeating past ten."""
    tab10 = plt.get_cmap("tab10").colors
    return [tab10[i % len(tab10)] for i in range(len(labels))]


def lineage_colors(adata: AnnData, key: str, labels: Sequence[str], groupby: str | None = None) -> list:
    """Colours of the lineages (or branches) ``labels`` of the gene-level result ``uns[key]``.

    With ``groupby``, each takes the colour of its cells' most common
    category in the palette of ``obs[groupby]`` (``uns[f"{groupby}_colors"]``
    or scanpy's default, :func:`category_colors`), the category it is named
    by in :func:`branch_names`: a lineage named "Ery" is drawn in Ery's colour
    in every plot. A lineage whose cells tie between categories, or that
    shares its category with another, gets a colour of scanpy's 102-colour
    palette that no other lineage has. Without ``groupby``: matplotlib's ``tab10``.
    """
    labels = [str(label) for label in labels]
    if groupby is None:
        return tab10_colors(labels)
    check_groupby(adata, groupby)
    _, cells = branch_cells(adata, key)
    categories = [str(c) for c in group_labels(adata, groupby).categories]
    palette = dict(zip(categories, category_colors(adata, groupby, categories)))
    majority = [majority_label(adata, groupby, cells[label]) if label in cells else None for label in labels]
    colors = [palette.get(m) if m is not None and majority.count(m) == 1 else None for m in majority]
    used = {to_hex(c) for c in colors if c is not None}
    spare = iter(c for c in sc.pl.palettes.default_102 if to_hex(c) not in used)
    return [colour if colour is not None else next(spare, NA_COLOR) for colour in colors]
