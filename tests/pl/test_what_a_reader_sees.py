"""What a reader sees in every ``sks.pl`` figure: titles, labels, colour bars, legends, z-order, p-values.

Each plot function has a test here that checks a visible property, not only
that a file was written: the words come from one place (``pl._labels``), so a
title reads "DDRTree pseudotime", never ``ddrtree_pseudotime``.
"""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from anndata import AnnData  # noqa: E402
from matplotlib.collections import LineCollection, PathCollection  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from scipy import sparse  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton.pl._labels import basis_label, format_pvalue, method_name, obs_label  # noqa: E402
from scskeleton.pl._results import branch_key  # noqa: E402

KEY = "ddrtree"
BRANCHES, TRENDS, LINEAGES = f"{KEY}_branch_test", f"{KEY}_trends", f"{KEY}_association"
# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


@pytest.fixture(scope="module")
def fitted():
    """Branching data with a rooted DDRTree and RPG, a cell-type-like label, and every gene-level result."""
    adata = sks.datasets.branching_expression(500, n_genes=40, n_branch_genes=8, n_trend_genes=8, random_state=1)
    sc.pp.pca(adata, n_comps=8)
    for method in (KEY, "rpg"):
        getattr(sks.tl, method)(adata)
        sks.tl.root(adata, method, obs_min="true_pseudotime")
        sks.tl.pseudotime(adata, method)
    adata.obs["cell_type"] = adata.obs["true_branch"].astype(str).map(
        lambda b: "progenitor" if b == "trunk" else f"type_{b.split('_')[-1]}").astype("category")
    fork = int(adata.uns[KEY]["branch_points"][0])
    sks.tl.branch_test(adata, KEY, branch_point=fork)
    sks.tl.trends(adata, KEY, segment="0", genes=list(adata.var_names[:6]))
    sks.tl.association_test(adata, KEY, genes=list(adata.var_names[:12]))
    sks.tl.trend_modules(adata, LINEAGES, n_modules=2)
    sks.tl.fate_probabilities(adata, KEY)
    sks.tl.mpme(adata, lam=1)
    return adata


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _cells(ax):
    """The scatter of cells scanpy drew: the PathCollection with the most points."""
    return max((c for c in ax.collections if isinstance(c, PathCollection)), key=lambda c: len(c.get_offsets()))


def _gid(ax, gid):
    found = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_gid() == gid]
    assert len(found) == 1, f"expected one {gid!r} collection, found {len(found)}"
    return found[0]


def _legend_texts(legend):
    return [t.get_text() for t in legend.get_texts()]


def _colorbar_labels(fig):
    return [ax.get_ylabel() for ax in fig.axes if ax.get_label() == "<colorbar>"]


def _segment_labels(adata, key=KEY):
    return list(adata.uns[key]["milestones"]["segment_labels"])


# --- the helpers: one place for every word ------------------------------------------------------------


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "q < 1e-300"), (3.24e-5, "q = 3.2e-5"), (0.0099, "q = 9.9e-3"), (0.012, "q = 0.012"), (0.5, "q = 0.5"),
    (np.nan, "q = n/a"), (1.0, "q = 1.0"), (0.999, "q = 1.0"),  # a q of 1 read "q = 1", like a count
])
def test_format_pvalue_never_prints_zero(value, text):
    assert format_pvalue(value) == text
    assert format_pvalue(value, "p").startswith("p ")


def test_method_obs_and_basis_names():
    adata = AnnData(X=np.zeros((3, 2)), obs=pd.DataFrame({"cell_type": list("abc"), "true_angle": [0.0, 1, 2]},
                                                         index=list("xyz")))
    adata.var_names = ["Gata1", "gene_0"]
    for key, method in [("ddrtree", "ddrtree"), ("rpg", "rpg"), ("rpg_l1", "rpg_l1"), ("fresh", "ddrtree"),
                        ("rpg_mpme", "rpg"), ("ce_neg_trace", "convex_embedding"), ("mpme", "mpme")]:
        adata.uns[key] = {"method": method}
    assert method_name(adata, "ddrtree") == "DDRTree"
    assert method_name(adata, "rpg") == "principal tree (RPG)"
    assert method_name(adata, "rpg_l1") == "ℓ1 principal graph"
    assert method_name(adata, "fresh") == "DDRTree (fresh)"  # two fits of one method tell apart
    assert method_name(adata, "rpg_mpme") == "principal tree (RPG, rpg_mpme)"
    assert obs_label(adata, "cell_type") == "cell type"
    assert obs_label(adata, "true_angle") == "true angle"
    assert obs_label(adata, "gene_0") == "gene_0"  # a gene keeps its name
    assert obs_label(adata, "ddrtree_pseudotime") == "DDRTree pseudotime"
    assert obs_label(adata, "rpg_l1_pseudotime") == "ℓ1 principal graph pseudotime"  # the longest key wins
    assert obs_label(adata, "ddrtree_pseudotime", short=True) == "pseudotime"
    assert basis_label(adata, "X_ce_neg_trace") == "convex embedding"
    assert basis_label(adata, "X_pca") == "PC"
    assert basis_label(adata, "X_umap") == "UMAP"
    assert basis_label(adata, "X_ddrtree") == "DDRTree"


# --- pl.tree ------------------------------------------------------------------------------------------


def test_tree_words_and_colorbar(fitted):
    fig = sks.pl.tree(fitted, KEY, color="ddrtree_pseudotime", return_fig=True)
    ax = fig.axes[0]
    assert ax.get_title() == "DDRTree pseudotime"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("DDRTree 1", "DDRTree 2")
    assert _colorbar_labels(fig) == ["pseudotime"]
    graph_legend = next(a for a in ax.artists if isinstance(a, Legend))
    assert _legend_texts(graph_legend)[0] == "DDRTree"
    # the same colour on another method's tree gets another title
    rpg = sks.pl.tree(fitted, "rpg", color="cell_type", show=False)
    assert rpg.get_title() == "cell type — principal tree (RPG)"
    assert (rpg.get_xlabel(), rpg.get_ylabel()) == ("PC1", "PC2")
    assert sks.pl.tree(fitted, "rpg", show=False).get_title() == "principal tree (RPG)"


def test_tree_cells_above_edges_and_nodes(fitted):
    ax = sks.pl.tree(fitted, KEY, color="cell_type", show=False)
    cells = _cells(ax).get_zorder()
    edges = _gid(ax, "scskeleton_edges")
    nodes = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_label() not in ("root",
             "branch point") and len(c.get_offsets()) == fitted.uns[KEY]["nodes"].shape[0]]
    assert nodes and all(n.get_zorder() < cells for n in nodes)
    assert edges.get_zorder() < cells
    # a thin translucent trace over the cells keeps the skeleton visible where they are dense
    trace = _gid(ax, "scskeleton_edges_trace")
    assert trace.get_zorder() > cells and trace.get_alpha() < 1
    assert np.max(trace.get_linewidths()) < np.max(edges.get_linewidths())
    assert len(trace.get_segments()) == len(edges.get_segments())


def test_tree_title_legend_loc_frameon(fitted):
    ax = sks.pl.tree(fitted, KEY, color="cell_type", title="my tree", legend_loc=None, frameon=False, show=False)
    assert ax.get_title() == "my tree"
    assert ax.get_legend() is None  # no legend of the cell types
    assert not ax.axison
    ax = sks.pl.tree(fitted, KEY, color="cell_type", show=False)
    assert _legend_texts(ax.get_legend()) == list(fitted.obs["cell_type"].cat.categories)
    panels = sks.pl.tree(fitted, KEY, color=["cell_type", "true_pseudotime"], title=["a", "b"], show=False)
    assert [p.get_title() for p in panels] == ["a", "b"]
    with pytest.raises(ValueError, match="title"):
        sks.pl.tree(fitted, KEY, color=["cell_type", "true_pseudotime"], title=["a"])


def test_categories_drawn_in_mixed_order():
    """Cells sorted by type are not drawn type after type: the last type would bury the first where they overlap."""
    n = 200
    obs = pd.DataFrame({"cell_type": pd.Categorical(["Ery"] * (n // 2) + ["Mk"] * (n // 2))},
                       index=[f"c{i}" for i in range(n)])
    adata = AnnData(X=np.zeros((n, 2)), obs=obs)
    adata.obsm["X_tip"] = np.zeros((n, 2))  # every cell at the same spot
    adata.obsm["tip_assignment"] = sparse.csr_matrix(np.ones((n, 1)))
    adata.uns["tip"] = {"method": "hand", "nodes": np.zeros((1, 2)), "space": "X_tip",
                        "adjacency": sparse.csr_matrix((1, 1)), "objective": np.ones(1), "n_iter": 1,
                        "converged": True}
    ax = sks.pl.tree(adata, "tip", color="cell_type", show=False)
    colours = _cells(ax).get_facecolors()
    is_first = np.all(np.isclose(colours, colours[0]), axis=1)
    drawn_last = is_first[-n // 4:]  # the top quarter of the stack holds both types
    assert 0 < drawn_last.sum() < drawn_last.size
    assert list(adata.obs["cell_type"][:3]) == ["Ery"] * 3  # adata itself keeps its order


# --- pl.pseudotime -----------------------------------------------------------------------------------


def test_pseudotime_words(fitted):
    ax = sks.pl.pseudotime(fitted, KEY, show=False)
    assert ax.get_title() == "DDRTree pseudotime per segment"  # what is plotted, not only the colour
    assert ax.get_xlabel() == "DDRTree pseudotime"
    assert _legend_texts(ax.get_legend()) == _segment_labels(fitted)  # milestones, not segment ids
    fig = sks.pl.pseudotime(fitted, KEY, color="true_pseudotime", return_fig=True)
    assert fig.axes[0].get_title() == "DDRTree pseudotime per segment, coloured by true pseudotime"
    assert _colorbar_labels(fig) == ["true pseudotime"]
    ax = sks.pl.pseudotime(fitted, KEY, color="cell_type", title="cells", legend_loc=None, frameon=False,
                           show=False)
    assert ax.get_title() == "cells" and ax.get_legend() is None
    assert not any(spine.get_visible() for spine in ax.spines.values())
    assert ax.axison and ax.get_xlabel() == "DDRTree pseudotime"  # the pseudotime axis stays


# --- pl.dendrogram -----------------------------------------------------------------------------------


def test_dendrogram_words_and_zorder(fitted):
    ax = sks.pl.dendrogram(fitted, KEY, show=False)
    assert ax.get_title() == "DDRTree segment"
    assert ax.get_xlabel() == "DDRTree pseudotime"
    assert _legend_texts(ax.get_legend()) == _segment_labels(fitted)
    assert _gid(ax, "scskeleton_dendrogram_segments").get_zorder() < _cells(ax).get_zorder()
    fig = sks.pl.dendrogram(fitted, "rpg", color="rpg_pseudotime", return_fig=True)
    assert fig.axes[0].get_title() == "principal tree (RPG) pseudotime"
    assert _colorbar_labels(fig) == ["pseudotime"]
    ax = sks.pl.dendrogram(fitted, KEY, color="cell_type", title="t", legend_loc=None, frameon=False, show=False)
    assert ax.get_title() == "t" and ax.get_legend() is None
    assert not any(spine.get_visible() for spine in ax.spines.values())


# --- pl.fates ------------------------------------------------------------------------------------------


def test_fates_colorbar_and_axes(fitted):
    fig = sks.pl.fates(fitted, KEY, return_fig=True)
    fates = list(fitted.uns[KEY]["fates"])
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.axison]
    assert [ax.get_title() for ax in panels] == [f"fate: {f}" for f in fates]
    assert _colorbar_labels(fig) == ["fate probability"] * len(fates)
    assert {(ax.get_xlabel(), ax.get_ylabel()) for ax in panels} == {("DDRTree 1", "DDRTree 2")}
    ax = sks.pl.fates(fitted, KEY, fates=fates[0], basis="pca", title="to the first tip", show=False)
    assert ax.get_title() == "to the first tip" and ax.get_xlabel() == "PC1"
    assert not sks.pl.fates(fitted, KEY, fates=fates[0], frameon=False, show=False).axison


# --- pl.cell_graph -----------------------------------------------------------------------------------


def test_cell_graph_words_and_zorder(fitted):
    fig = sks.pl.cell_graph(fitted, "mpme", color="true_pseudotime", return_fig=True)
    ax = fig.axes[0]
    assert ax.get_title() == "true pseudotime — MPME"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("MPME 1", "MPME 2")
    assert _colorbar_labels(fig) == ["true pseudotime"]
    assert _gid(ax, "scskeleton_cell_edges").get_zorder() < _cells(ax).get_zorder()
    ax = sks.pl.cell_graph(fitted, "mpme", basis="X_pca", color="cell_type", legend_loc=None, show=False)
    assert ax.get_xlabel() == "PC1" and ax.get_legend() is None
    ax = sks.pl.cell_graph(fitted, "mpme", title="graph", frameon=False, show=False)
    assert ax.get_title() == "graph" and not ax.axison


def test_convex_embedding_axes_are_named_by_the_method():
    adata = AnnData(X=np.zeros((20, 2)), obs=pd.DataFrame(index=[f"c{i}" for i in range(20)]))
    adata.obsm["X_ce_neg_trace"] = np.random.default_rng(0).normal(size=(20, 2))
    adata.uns["ce_neg_trace"] = {"method": "convex_embedding"}
    ax = sks.pl.cell_graph(adata, "ce_neg_trace", edges=False, show=False)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("convex embedding 1", "convex embedding 2")
    assert ax.get_title() == "convex embedding (ce_neg_trace)"


# --- pl.adjacency and pl.convergence ---------------------------------------------------------------------


def test_adjacency_binary_gets_a_legend_not_a_colorbar(fitted):
    fig = sks.pl.adjacency(fitted, KEY, return_fig=True)
    ax = fig.axes[0]
    assert ax.get_title() == "DDRTree adjacency"
    assert "tree order from the root" in ax.get_xlabel()
    legend = next(a for a in ax.artists if isinstance(a, Legend) and a.get_gid() == "scskeleton_adjacency_legend")
    assert _legend_texts(legend) == ["edge", "no edge"]
    assert len(fig.axes) == 1  # no colour bar
    assert set(np.unique(ax.get_images()[0].get_array())) == {0.0, 1.0}
    # grouped: the strip's legend is titled in words
    ax = sks.pl.adjacency(fitted, KEY, order="group", groupby="cell_type", show=False)
    assert ax.get_legend().get_title().get_text() == "cell type"


def test_adjacency_weighted_gets_a_labelled_colorbar(fitted):
    adata = fitted.copy()
    adjacency = adata.uns[KEY]["adjacency"].copy().astype(float)
    adjacency.data = np.linspace(0.5, 2.0, adjacency.nnz)
    adata.uns[KEY]["adjacency"] = ((adjacency + adjacency.T) / 2).tocsr()
    fig = sks.pl.adjacency(adata, KEY, title="weights", return_fig=True)
    assert fig.axes[0].get_title() == "weights"
    assert [ax.get_ylabel() for ax in fig.axes[1:]] == ["edge weight"]
    assert not [a for a in fig.axes[0].artists if isinstance(a, Legend)]


def test_convergence_titles_name_the_method(fitted):
    ddrtree = sks.pl.convergence(fitted, KEY, show=False).get_title()
    rpg = sks.pl.convergence(fitted, "rpg", show=False).get_title()
    assert ddrtree.startswith("DDRTree: ") and rpg.startswith("principal tree (RPG): ")
    assert ddrtree != rpg  # two panels of two methods never share a title
    assert sks.pl.convergence(fitted, KEY, title="fit", show=False).get_title() == "fit"


# --- pl.trends, pl.branch_heatmap, pl.path -------------------------------------------------------------


def _branch_segment_labels(adata):
    labels = dict(zip(sorted(adata.uns[KEY]["segments"], key=int), _segment_labels(adata)))
    result = adata.uns[BRANCHES]
    return [labels[str(result["segments"][branch_key(result, b)][0])] for b in result["branches"]]


def test_trends_pvalue_branch_names_and_options(fitted):
    gene = fitted.var_names[0]
    ax = sks.pl.trends(fitted, BRANCHES, gene, show=False)
    q = fitted.var[f"{BRANCHES}_qval"].iloc[0]
    assert format_pvalue(q) in ax.get_title() and ax.get_title().startswith(gene)
    assert ax.get_xlabel() == "registered DDRTree pseudotime"  # the branch test registers branches by default
    assert _legend_texts(ax.get_legend())[2:] == _branch_segment_labels(fitted)  # after "trunk cells", "shared"
    # named by the majority cell type of each branch's cells
    ax = sks.pl.trends(fitted, BRANCHES, gene, groupby="cell_type", show=False)
    assert all(text.startswith("type") for text in _legend_texts(ax.get_legend())[2:])
    # a q-value that underflowed to 0 is never printed as 0
    zero = fitted.copy()
    zero.var.loc[gene, f"{BRANCHES}_qval"] = 0.0
    title = sks.pl.trends(zero, BRANCHES, gene, show=False).get_title()
    assert "q < 1e-300" in title and "q = 0" not in title
    ax = sks.pl.trends(fitted, BRANCHES, gene, title="Gata1", legend_loc=None, frameon=False, show=False)
    assert ax.get_title() == "Gata1" and ax.get_legend() is None
    assert not any(spine.get_visible() for spine in ax.spines.values())
    with pytest.raises(KeyError, match="groupby"):
        sks.pl.trends(fitted, BRANCHES, gene, groupby="nope")


def test_trends_lineages_named_by_milestones(fitted):
    ax = sks.pl.trends(fitted, LINEAGES, fitted.var_names[0], show=False)
    names = dict(zip(fitted.uns[KEY]["milestones"]["nodes"].tolist(), fitted.uns[KEY]["milestones"]["names"]))
    tips = [names[int(fitted.uns[KEY]["segments"][leaf][-1])] for leaf in fitted.uns[LINEAGES]["lineages"]]
    expected = [f"root → {tip}" for tip in tips]
    assert _legend_texts(ax.get_legend()) == expected
    assert "R² = " in sks.pl.trends(fitted, TRENDS, fitted.var_names[0], show=False).get_title()


def test_branch_heatmap_blocks_named_by_milestones(fitted):
    fig = sks.pl.branch_heatmap(fitted, BRANCHES, n_genes=5, return_fig=True)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == _branch_segment_labels(fitted)
    assert ax.get_title() == "branch test at fork 1 (DDRTree)"
    assert ax.get_xlabel() == "registered DDRTree pseudotime"
    assert [a.get_ylabel() for a in fig.axes[1:]] == ["scaled fitted expression"]
    ax = sks.pl.branch_heatmap(fitted, BRANCHES, n_genes=5, groupby="cell_type", title="heat", show=False)
    assert ax.get_title() == "heat" and all(t.get_text().startswith("type") for t in ax.texts)


def test_path_legend_title_and_zorder(fitted):
    ax = sks.pl.path(fitted, BRANCHES, color="cell_type", show=False)
    legend = next(a for a in ax.artists if isinstance(a, Legend) and _legend_texts(a)[0] == "trunk")
    assert _legend_texts(legend)[1:] == _branch_segment_labels(fitted)
    assert ax.get_title() == "branch test at fork 1 (DDRTree)"
    cells = _cells(ax).get_zorder()
    assert all(c.get_zorder() < cells for c in ax.collections if c.get_gid() == "scskeleton_path")
    assert all(c.get_zorder() > cells for c in ax.collections if c.get_gid() == "scskeleton_path_trace")
    title = sks.pl.path(fitted, TRENDS, show=False).get_title()
    assert title.startswith("path root → ") and title.endswith("(DDRTree)")
    ax = sks.pl.path(fitted, BRANCHES, color="cell_type", title="p", legend_loc=None, frameon=False, show=False)
    assert ax.get_title() == "p" and ax.get_legend() is None and not ax.axison


# --- pl.modules and pl.module_heatmap -----------------------------------------------------------------


def test_modules_blocks_named_by_lineages(fitted):
    modules = f"{LINEAGES}_modules"
    lineages = _legend_texts(sks.pl.trends(fitted, LINEAGES, fitted.var_names[0], show=False).get_legend())
    panels = sks.pl.modules(fitted, modules, ncols=2, show=False)
    # one legend, titled, at the figure's right edge: beside the last panel of the first row, over no panel
    holders = [ax for ax in panels if ax.get_legend() is not None]
    assert holders == [panels[min(2, len(panels)) - 1]]
    legend = holders[0].get_legend()
    assert _legend_texts(legend) == lineages and legend.get_title().get_text() == "lineage"
    panels[0].figure.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in panels if ax.get_visible())
    assert panels[0].get_xlabel() == "DDRTree pseudotime"
    assert all(ax.get_legend() is None for ax in sks.pl.modules(fitted, modules, legend_loc=None, show=False))
    heat = sks.pl.module_heatmap(fitted, modules, show=False)
    assert [ax.get_title() for ax in heat] == lineages
    fig = sks.pl.module_heatmap(fitted, modules, groupby="cell_type", return_fig=True)
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == len(lineages) and all(t.startswith("type") for t in titles)  # each tip's majority type
    # the module bar's label stays clear of every other text: the first panel's time ticks (written across,
    # below the bar, it read "module0") and the groupby bar's label above it
    fig.canvas.draw()
    side = fig.axes[0]
    assert side.xaxis.label.get_text() == "module"
    label = side.xaxis.label.get_window_extent().padded(2)
    others = [t.get_window_extent() for ax in fig.axes[1:] for t in [*ax.get_xticklabels(), *ax.get_yticklabels(),
                                                                      ax.xaxis.label, ax.yaxis.label] if t.get_text()]
    assert others and not any(label.overlaps(box) for box in others)


def test_a_support_label_leaves_a_dense_fork_for_the_first_clear_spot():
    """Cells packed 50 points around a fork, as at a dense fork of 3,000 cells: the label goes out far
    enough to cover none of them (up to 60 points out, every spot covered some), on a leader line."""
    from scskeleton.pl._tree import SUPPORT_CLEARANCE, _box_distance, _place_labels

    rng = np.random.default_rng(0)
    angle, radius = rng.uniform(0, 2 * np.pi, 4000), 50.0 * np.sqrt(rng.uniform(0, 1, 4000))
    anchor = np.array([[300.0, 300.0]])
    cells = anchor + np.column_stack([radius * np.cos(angle), radius * np.sin(angle)])
    half = np.array([[20.0, 6.0]])
    offset = _place_labels(anchor, half, anchor, np.vstack([cells, anchor]), np.array([0.0, 0.0, 600.0, 600.0]))
    assert _box_distance(anchor + offset, half[0], cells)[0] >= SUPPORT_CLEARANCE
