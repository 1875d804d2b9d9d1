"""Draws docs/images/quickstart.png, the figure of the README and the docs' home page, from the quick start.

Run from the repository root: ``python docs/images/quickstart.py``.
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import scanpy as sc  # noqa: E402

import scskeleton as sks  # noqa: E402

adata = sks.datasets.krumsiek11()
sc.pp.pca(adata, n_comps=10)
sks.tl.rpg(adata)
sks.tl.root(adata, "rpg", group=("cell_type", "progenitor"))
sks.tl.pseudotime(adata, "rpg")
sks.tl.milestones(adata, "rpg", groupby="cell_type")
sks.tl.branch_support(adata, "rpg")
sks.pl.tree(adata, "rpg", color="cell_type", save=Path(__file__).with_suffix(".png"), show=False)
