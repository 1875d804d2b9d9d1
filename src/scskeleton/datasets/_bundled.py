"""Loaders for data shipped inside installed packages (no download)."""

from __future__ import annotations

import warnings

import pandas as pd
from anndata import AnnData


def krumsiek11() -> AnnData:
    """Simulated myeloid differentiation (Krumsiek et al. 2011), 640 cells × 11 genes.

    Shipped with scanpy. A progenitor state forks into erythrocyte/megakaryocyte
    and monocyte/neutrophil lineages; ``obs["cell_type"]`` holds the labels.
    Cell names are made unique, the integer keys of ``uns["highlights"]``
    become strings and the labels plain strings, so the object can be written
    to .h5ad (anndata refuses pandas' nullable strings unless pandas is 3 or
    newer).

    Returns
    -------
    AnnData of 640 cells × 11 genes: the simulated expression in ``X``,
    ``obs["cell_type"]`` (categorical: ``"Ery"``, ``"Mk"``, ``"Mo"``, ``"Neu"``,
    ``"progenitor"``), and scanpy's ``uns["iroot"]`` and ``uns["highlights"]``.
    """
    import scanpy as sc

    with warnings.catch_warnings():  # the file repeats cell names; made unique below
        warnings.filterwarnings("ignore", message="Observation names are not unique")
        adata = sc.datasets.krumsiek11()
    adata.obs_names_make_unique()
    if "highlights" in adata.uns:
        adata.uns["highlights"] = {str(k): v for k, v in adata.uns["highlights"].items()}
    labels = adata.obs["cell_type"]
    adata.obs["cell_type"] = pd.Categorical(labels.astype(object), categories=list(labels.cat.categories))
    return adata


def toggleswitch() -> AnnData:
    """Simulated toggle switch, 200 cells × 2 genes, shipped with scanpy.

    Two mutually repressing genes: a single progenitor state splits into two
    branches. Cell names are made unique.

    Returns
    -------
    AnnData of 200 cells × 2 genes (``"0"``, ``"1"``): the simulated expression
    in ``X``, and scanpy's ``uns["iroot"]``.
    """
    import scanpy as sc

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Observation names are not unique")
        adata = sc.datasets.toggleswitch()
    adata.obs_names_make_unique()
    return adata
