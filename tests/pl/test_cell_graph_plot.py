"""pl.cell_graph reads obsm/obsp only and draws one line per learned edge."""

import numpy as np
import pandas as pd
import pytest
from anndata import AnnData
from scipy import sparse

import scskeleton as sks
from scskeleton.pl._cell_graph import CELL_EDGES_GID


def _fitted_like():
    rng = np.random.default_rng(0)
    n = 30
    adata = AnnData(obs=pd.DataFrame({"group": pd.Categorical(["a"] * 20 + ["b"] * 10)}, index=[f"c{i}" for i in range(n)]))
    adata.obsm["X_learner"] = rng.normal(size=(n, 2))
    rows = np.arange(n - 1)
    upper = sparse.csr_matrix((rng.uniform(0.1, 1.0, n - 1), (rows, rows + 1)), shape=(n, n))
    upper[19, 20] = 0.0  # two components: cells 0–19 and 20–29
    upper.eliminate_zeros()
    adata.obsp["learner_connectivities"] = (upper + upper.T).tocsr()
    adata.obs["learner_component"] = pd.Categorical(["0"] * 20 + ["1"] * 10)
    return adata


def _edges(ax):
    return next(c for c in ax.collections if c.get_gid() == CELL_EDGES_GID)


def test_one_line_per_edge_and_adata_untouched(tmp_path):
    adata = _fitted_like()
    before = (sorted(adata.uns), list(adata.obs.columns))
    ax = sks.pl.cell_graph(adata, "learner", color="group", show=False, save=tmp_path / "g.png")
    assert len(_edges(ax).get_segments()) == 28
    assert (tmp_path / "g.png").stat().st_size > 0
    assert (sorted(adata.uns), list(adata.obs.columns)) == before


def test_edge_widths_follow_the_weights_rank_so_uneven_weights_stay_visible():
    """Weights spanning three orders of magnitude (as MPME's at C = ∞): in proportion to the weight, the median
    edge was a fifth of the width, a tenth of a point; by rank it is about two thirds, and order is kept."""
    adata = _fitted_like()
    graph = adata.obsp["learner_connectivities"].tocoo()
    weights = np.geomspace(1e-3, 1.0, graph.nnz // 2)
    upper = sparse.triu(graph, k=1).tocoo()
    upper = sparse.coo_matrix((weights, (upper.row, upper.col)), shape=graph.shape)
    adata.obsp["learner_connectivities"] = (upper + upper.T).tocsr()
    widths = np.asarray(_edges(sks.pl.cell_graph(adata, "learner", edge_width=1.0, show=False)).get_linewidths())
    assert np.isclose(widths.max(), 1.0) and widths.min() >= 0.3 - 1e-9
    assert np.median(widths) >= 0.6
    drawn = sparse.triu(adata.obsp["learner_connectivities"], k=1).tocoo()
    assert np.all(np.diff(widths[np.argsort(drawn.data)]) >= 0)  # heavier edges never thinner


def test_side_by_side_separates_components():
    adata = _fitted_like()
    ax = sks.pl.cell_graph(adata, "learner", side_by_side=True, show=False)
    offsets = ax.collections[0].get_offsets()
    assert offsets[:20, 0].max() < offsets[20:, 0].min()


def test_missing_fields_raise_clear_errors():
    adata = _fitted_like()
    with pytest.raises(KeyError, match="X_other"):
        sks.pl.cell_graph(adata, "other", show=False)
    del adata.obsp["learner_connectivities"]
    with pytest.raises(KeyError, match="edges=False"):
        sks.pl.cell_graph(adata, "learner", show=False)
    sks.pl.cell_graph(adata, "learner", edges=False, show=False)
