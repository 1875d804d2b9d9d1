"""Milestones (named roots, forks and tips) and fate probabilities."""

import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse

import scskeleton as sks
from scskeleton._anndata.schema import read_graph
from scskeleton._core.trees.trajectory import geodesic_from
from scskeleton.datasets._branching import branch_skeleton

KEY = "ddrtree"


def _rooted(adata, method):
    """``adata`` with 10 PCs and a tree by ``method``, rooted at the true start, with pseudotime."""
    sc.pp.pca(adata, n_comps=10)
    getattr(sks.tl, method)(adata)
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    return adata


@pytest.fixture(scope="module")
def expression():
    """Expression with a known fork, DDRTree rooted at the start, with fates; copy before mutating."""
    adata = _rooted(sks.datasets.branching_expression(600, random_state=0), KEY)
    sks.tl.fate_probabilities(adata, KEY)
    assert adata.uns[KEY]["branch_points"].size == 1
    return adata


def _snapshot(adata):
    """Everything the milestone and fate tools could change, as comparable plain values."""
    entry = adata.uns[KEY]
    milestones = {name: np.asarray(value).tolist() for name, value in entry.get("milestones", {}).items()}
    return (
        sorted(adata.uns), sorted(entry), milestones, np.asarray(entry.get("fates", [])).tolist(),
        list(adata.obs.columns), sorted(adata.obsm),
        adata.obs[f"{KEY}_milestone"].astype(str).tolist() if f"{KEY}_milestone" in adata.obs else None,
        list(adata.obs[f"{KEY}_milestone"].cat.categories) if f"{KEY}_milestone" in adata.obs else None,
    )


# 1. milestones


def test_default_names_order_and_segment_labels(branching_fitted):
    adata = branching_fitted.copy()
    entry = adata.uns[KEY]
    nodes = np.asarray(entry["milestones"]["nodes"])
    names = list(entry["milestones"]["names"])
    assert names == ["root", "fork 1", "fork 2", "tip 1", "tip 2", "tip 3"]
    assert nodes[0] == entry["root"]
    assert set(nodes[1:3]) == set(entry["branch_points"].tolist())
    assert set(nodes[3:]) == set(entry["leaves"].tolist()) - {int(entry["root"])}
    # forks and tips are numbered in order of pseudotime: the first tip is the one of the first fork
    graph = read_graph(adata, KEY)
    distance = dict(zip(names, geodesic_from(graph.adjacency, graph.nodes, graph.roots)[0, nodes]))
    assert distance["fork 1"] < distance["fork 2"] and distance["tip 1"] < distance["tip 2"] < distance["tip 3"]
    # every segment is labelled by its two ends; segment "0" leaves the root
    labels = list(entry["milestones"]["segment_labels"])
    assert len(labels) == len(entry["segments"]) and labels[0] == "root → fork 1"
    name_of = dict(zip(nodes.tolist(), names))
    for segment_id, path in entry["segments"].items():
        assert labels[int(segment_id)] == f"{name_of[int(path[0])]} → {name_of[int(path[-1])]}"


def test_each_cell_gets_the_milestone_nearest_along_the_tree(branching_fitted):
    adata = branching_fitted
    milestone = adata.obs[f"{KEY}_milestone"]
    assert isinstance(milestone.dtype, pd.CategoricalDtype) and milestone.notna().all()
    assert list(milestone.cat.categories) == list(adata.uns[KEY]["milestones"]["names"])
    times = adata.obs[f"{KEY}_pseudotime"]
    # the root's cells come first in pseudotime, the tips' last, and the tips hold the true tips
    assert times[milestone == "root"].max() < times[milestone.str.startswith("tip")].min()
    table = pd.crosstab(milestone, adata.obs["true_branch"])
    assert table.loc["root"].idxmax() == "trunk"
    assert {table.loc[tip].idxmax() for tip in ("tip 1", "tip 2", "tip 3")} == {"branch_1", "branch_3", "branch_4"}
    # a cell goes with the nearer end of its segment: along a path from the root, the root's cells lie
    # before the fork's, and no root cell lies beyond half the root segment (whose last cells stop short
    # of the fork, so its length is read from the nodes)
    frame = sks.tl.path(adata, KEY, "root", "fork 1")
    at_root = milestone.loc[frame.index].to_numpy() == "root"
    graph = read_graph(adata, KEY)
    fork = int(adata.uns[KEY]["milestones"]["nodes"][1])
    length = geodesic_from(graph.adjacency, graph.nodes, graph.roots)[0, fork]
    assert frame["position"][at_root].max() <= 0.5 * length + 1e-9 < frame["position"][~at_root].min()


def test_groupby_names_come_from_the_majority_label_and_are_unique(branching_fitted):
    adata = branching_fitted.copy()
    sks.tl.milestones(adata, KEY, groupby="true_branch")
    names = list(adata.uns[KEY]["milestones"]["names"])
    assert len(set(names)) == len(names)
    # roots and tips take the bare label; a fork takes its label only when no root, tip or earlier fork has
    # it: the first fork's cells are mostly of the inner branch_2, the second fork's too, so it keeps "fork 2"
    assert names[0] == "trunk" and sorted(names[3:]) == ["branch_1", "branch_3", "branch_4"]
    assert names[1:3] == ["branch_2", "fork 2"]
    assert list(adata.obs[f"{KEY}_milestone"].cat.categories) == names
    assert adata.uns[KEY]["milestones"]["segment_labels"][0].startswith("trunk → ")
    # without groupby the default names come back
    sks.tl.milestones(adata, KEY)
    assert list(adata.uns[KEY]["milestones"]["names"])[:2] == ["root", "fork 1"]


def test_rename_updates_every_place_and_is_validated(expression):
    adata = expression.copy()
    before = _snapshot(adata)
    with pytest.raises(KeyError, match="no such"):
        sks.tl.rename_milestones(adata, KEY, {"no such": "x"})
    with pytest.raises(ValueError, match="unique"):
        sks.tl.rename_milestones(adata, KEY, {"tip 1": "HSC", "tip 2": "HSC"})
    with pytest.raises(ValueError, match="unique"):
        sks.tl.rename_milestones(adata, KEY, {"tip 1": "root"})
    with pytest.raises(ValueError, match="non-empty strings"):
        sks.tl.rename_milestones(adata, KEY, {"tip 1": ""})
    with pytest.raises(ValueError, match="non-empty strings"):
        sks.tl.rename_milestones(adata, KEY, {"tip 1": 3})
    with pytest.raises(KeyError, match="groupby"):
        sks.tl.milestones(adata, KEY, groupby="no_column")
    assert _snapshot(adata) == before

    fates = list(adata.uns[KEY]["fates"])
    sks.tl.rename_milestones(adata, KEY, {"root": "HSC", "tip 1": "Ery", "fork 1": "MEP"})
    entry = adata.uns[KEY]
    assert list(entry["milestones"]["names"]) == ["HSC", "MEP", "Ery", "tip 2"]
    assert list(adata.obs[f"{KEY}_milestone"].cat.categories) == ["HSC", "MEP", "Ery", "tip 2"]
    assert list(entry["fates"]) == [{"tip 1": "Ery"}.get(f, f) for f in fates]
    assert set(entry["milestones"]["segment_labels"]) == {"HSC → MEP", "MEP → Ery", "MEP → tip 2"}
    # the cells keep their milestones; only the names change
    codes = adata.obs[f"{KEY}_milestone"].cat.codes
    np.testing.assert_array_equal(codes, expression.obs[f"{KEY}_milestone"].cat.codes)
    # copy=True leaves the original alone
    renamed = sks.tl.rename_milestones(adata, KEY, {"Ery": "E"}, copy=True)
    assert "E" in list(renamed.uns[KEY]["milestones"]["names"]) and "Ery" in list(entry["milestones"]["names"])


def test_rename_on_a_view_leaves_the_parent_untouched(expression):
    adata = expression.copy()
    before = _snapshot(adata)
    view = adata[: adata.n_obs // 2]
    with pytest.warns(anndata.ImplicitModificationWarning):
        sks.tl.rename_milestones(view, KEY, {"tip 1": "A"})
    assert "A" in list(view.uns[KEY]["milestones"]["names"])
    assert _snapshot(adata) == before


def test_milestone_names_survive_h5ad_and_drive_path_trends_and_the_tests(tmp_path, expression):
    adata = expression.copy()
    sks.tl.rename_milestones(adata, KEY, {"tip 1": "left", "tip 2": "right"})
    adata.write_h5ad(tmp_path / "named.h5ad")
    back = anndata.read_h5ad(tmp_path / "named.h5ad")
    for field in ("nodes", "names", "segment_labels"):
        assert np.asarray(back.uns[KEY]["milestones"][field]).tolist() == np.asarray(
            adata.uns[KEY]["milestones"][field]).tolist()
    assert list(back.uns[KEY]["fates"]) == list(adata.uns[KEY]["fates"])
    pd.testing.assert_series_equal(back.obs[f"{KEY}_milestone"], adata.obs[f"{KEY}_milestone"])
    np.testing.assert_array_equal(back.obsm[f"{KEY}_fate_probabilities"], adata.obsm[f"{KEY}_fate_probabilities"])

    node = dict(zip(back.uns[KEY]["milestones"]["names"], back.uns[KEY]["milestones"]["nodes"].tolist()))
    pd.testing.assert_frame_equal(sks.tl.path(back, KEY, "root", "left"), sks.tl.path(back, KEY, node["root"], node["left"]))
    genes = list(back.var_names[:20])
    by_name = sks.tl.trends(back, KEY, path=("root", "right"), genes=genes, copy=True)
    by_node = sks.tl.trends(back, KEY, path=(node["root"], node["right"]), genes=genes, copy=True)
    np.testing.assert_array_equal(by_name.varm[f"{KEY}_trends_curves"], by_node.varm[f"{KEY}_trends_curves"])
    # a segment by its label is the segment by its id
    label = back.uns[KEY]["milestones"]["segment_labels"][1]
    by_label = sks.tl.trends(back, KEY, segment=label, genes=genes, copy=True)
    by_id = sks.tl.trends(back, KEY, segment="1", genes=genes, copy=True)
    np.testing.assert_array_equal(by_label.varm[f"{KEY}_trends_curves"], by_id.varm[f"{KEY}_trends_curves"])
    for test in (sks.tl.branch_test, sks.tl.fork_test):  # the name picks the fork; the warp plays no part
        by_name = test(back, KEY, branch_point="fork 1", genes=genes, copy=True, registration="none")
        by_node = test(back, KEY, branch_point=node["fork 1"], genes=genes, copy=True, registration="none")
        name = f"{KEY}_{test.__name__}"
        assert by_name.uns[name]["branch_point"] == node["fork 1"]
        np.testing.assert_array_equal(by_name.var[f"{name}_pval"], by_node.var[f"{name}_pval"])
    # a tip as the new root: the old root becomes a tip
    sks.tl.root(back, KEY, node="left")
    assert int(back.uns[KEY]["root"]) == node["left"]
    sks.tl.pseudotime(back, KEY)
    assert node["root"] in back.uns[KEY]["milestones"]["nodes"][1:].tolist()


def test_unknown_milestones_and_bad_nodes_are_reported(expression):
    adata = expression.copy()
    before = _snapshot(adata)
    with pytest.raises(KeyError, match="No milestone 'nowhere'"):
        sks.tl.path(adata, KEY, "root", "nowhere")
    with pytest.raises(KeyError, match="No milestone"):
        sks.tl.root(adata, KEY, node=["nowhere"])
    with pytest.raises(ValueError, match="not a branch point"):
        sks.tl.branch_test(adata, KEY, branch_point="tip 1")
    with pytest.raises(KeyError, match="No milestone"):
        sks.tl.fork_test(adata, KEY, branch_point="fork 9")
    with pytest.raises(KeyError, match="No segment"):
        sks.tl.trends(adata, KEY, segment="root → nowhere")
    with pytest.raises(ValueError, match="node"):
        sks.tl.root(adata, KEY, node=[])
    assert _snapshot(adata) == before
    # before tl.pseudotime there are no milestones to name
    bare = sks.datasets.branching(200, random_state=0)
    sc.pp.pca(bare, n_comps=5)
    sks.tl.ddrtree(bare)
    with pytest.raises(KeyError, match="tl.pseudotime"):
        sks.tl.root(bare, KEY, node="root")
    with pytest.raises(KeyError, match="tl.pseudotime"):
        sks.tl.milestones(bare, KEY)
    with pytest.raises(KeyError, match="tl.pseudotime"):
        sks.tl.fate_probabilities(bare, KEY)


# 4. fate probabilities


def _terminal_branches(n_leaves):
    names = branch_skeleton(n_leaves)[3]
    return sorted(set(names[1::2]) | {names[-1]})  # each fork's tip branch, and the last continuing one


def _last_tenth(adata, branch):
    times = adata.obs["true_pseudotime"].to_numpy()
    on = (adata.obs["true_branch"] == branch).to_numpy()
    low, high = times[on].min(), times[on].max()
    return on & (times >= high - 0.1 * (high - low))


@pytest.mark.parametrize("method", ["ddrtree", "rpg"])
@pytest.mark.parametrize("n_leaves", [2, 3])
@pytest.mark.parametrize("seed", range(5))
def test_fates_are_certain_at_the_tips_and_even_before_the_fork(method, n_leaves, seed):
    adata = _rooted(sks.datasets.branching(1000, n_leaves=n_leaves, random_state=seed), method)
    sks.tl.milestones(adata, method, groupby="true_branch")
    sks.tl.fate_probabilities(adata, method)
    probabilities = adata.obsm[f"{method}_fate_probabilities"]
    fates = list(adata.uns[method]["fates"])
    assert probabilities.shape == (adata.n_obs, len(fates)) and (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    # the tips, named after the majority branch of their cells, are the true ones
    terminal = _terminal_branches(n_leaves)
    assert sorted(fates) == terminal
    for branch in terminal:
        assert (probabilities[_last_tenth(adata, branch), fates.index(branch)] >= 0.9).all()
    # on the trunk just before the first fork (true pseudotime 0.7-0.85 of 1) every fate is open:
    # balanced branches give a mass-weighted split close to uniform
    times = adata.obs["true_pseudotime"].to_numpy()
    before = (adata.obs["true_branch"] == "trunk").to_numpy() & (times > 0.7) & (times < 0.85)
    entropy = adata.obs[f"{method}_fate_entropy"].to_numpy()[before]
    assert np.quantile(entropy, 0.1) >= 0.8 * np.log(len(fates))


@pytest.mark.parametrize("method", ["ddrtree", "rpg"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fates_at_the_tips_of_simulated_counts(method, seed):
    adata = sks.datasets.simulate_trajectory(1500, n_fates=3, n_genes=300, random_state=seed, n_jobs=1)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    _rooted(adata, method)
    sks.tl.fate_probabilities(adata, method)
    probabilities = adata.obsm[f"{method}_fate_probabilities"]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    truth = adata.uns["simulate_trajectory"]
    terminal = [b for b, end in zip(truth["branches"], truth["branch_end_node"]) if str(end).startswith("fate")]
    # the learned tree may grow extra tips on the trunk; each true tip still has a fate of its own
    chosen = []
    for branch in terminal:
        cells = _last_tenth(adata, branch)
        column = int(probabilities[cells].mean(axis=0).argmax())
        chosen.append(column)
        assert np.mean(probabilities[cells, column] >= 0.9) >= 0.95
    assert len(set(chosen)) == len(terminal)


def test_sparse_and_dense_assignments_agree_and_are_not_converted(expression):
    adata = expression.copy()
    stored = adata.obsm[f"{KEY}_assignment"]
    other = adata.copy()
    other.obsm[f"{KEY}_assignment"] = stored.toarray() if sparse.issparse(stored) else sparse.csr_matrix(stored)
    sks.tl.fate_probabilities(other, KEY)
    sks.tl.fate_probabilities(adata, KEY)
    assert sparse.issparse(adata.obsm[f"{KEY}_assignment"]) == sparse.issparse(stored)
    assert sparse.issparse(other.obsm[f"{KEY}_assignment"]) != sparse.issparse(stored)
    np.testing.assert_allclose(other.obsm[f"{KEY}_fate_probabilities"], adata.obsm[f"{KEY}_fate_probabilities"],
                               rtol=0, atol=1e-12)
    # same input, same bits
    again = adata.copy()
    sks.tl.fate_probabilities(again, KEY)
    np.testing.assert_array_equal(again.obsm[f"{KEY}_fate_probabilities"], adata.obsm[f"{KEY}_fate_probabilities"])
    np.testing.assert_array_equal(again.obs[f"{KEY}_fate_entropy"], adata.obs[f"{KEY}_fate_entropy"])


def test_new_topology_or_new_fit_removes_stale_fates(expression):
    adata = expression.copy()
    sks.tl.root(adata, KEY, node="tip 1")
    sks.tl.pseudotime(adata, KEY)
    assert f"{KEY}_fate_probabilities" not in adata.obsm and f"{KEY}_fate_entropy" not in adata.obs
    assert "fates" not in adata.uns[KEY]
    sks.tl.fate_probabilities(adata, KEY)
    sks.tl.ddrtree(adata)
    for attribute, name in (("obsm", f"{KEY}_fate_probabilities"), ("obs", f"{KEY}_fate_entropy"),
                            ("obs", f"{KEY}_milestone")):
        assert name not in getattr(adata, attribute)


def test_graphs_with_cycles_are_refused_with_a_hint():
    adata = sks.datasets.distorted_s(150, random_state=0)
    sks.tl.mpme(adata, lam=10)
    sks.tl.root(adata, "mpme", obs_min="true_position")
    sks.tl.pseudotime(adata, "mpme")
    before = (sorted(adata.obsm), list(adata.obs.columns), sorted(adata.uns["mpme"]))
    with pytest.raises(ValueError, match="tl.rpg"):
        sks.tl.fate_probabilities(adata, "mpme")
    assert (sorted(adata.obsm), list(adata.obs.columns), sorted(adata.uns["mpme"])) == before
    with pytest.raises(KeyError, match="nope"):
        sks.tl.fate_probabilities(adata, "nope")


def test_fates_plot_one_panel_per_fate(expression):
    adata = expression.copy()
    before = _snapshot(adata)
    axes = sks.pl.fates(adata, KEY, show=False)
    fates = list(adata.uns[KEY]["fates"])
    assert [ax.get_title() for ax in axes] == [f"fate: {f}" for f in fates]
    values = axes[0].collections[0].get_array()
    np.testing.assert_allclose(np.sort(values), np.sort(adata.obsm[f"{KEY}_fate_probabilities"][:, 0]))
    assert axes[0].collections[0].get_clim() == (0.0, 1.0)
    # the root and branch-point marks are explained once, in the first row's right margin, over no panel
    from matplotlib.legend import Legend

    holders = [i for i, ax in enumerate(axes) if any(isinstance(a, Legend) for a in ax.artists)]
    assert holders == [min(4, len(axes)) - 1]
    legend = next(a for a in axes[holders[0]].artists if isinstance(a, Legend))
    assert {"root", "branch point"} <= {t.get_text() for t in legend.get_texts()}
    assert KEY not in {t.get_text() for t in legend.get_texts()}  # the graph named as in pl.tree, not by its key
    axes[0].figure.canvas.draw()
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in axes)
    ax = sks.pl.fates(adata, KEY, fates=fates[1], basis="pca", show_tree=False, show=False)
    assert ax.get_title() == f"fate: {fates[1]}"
    assert _snapshot(adata) == before
    with pytest.raises(KeyError, match="No fate"):
        sks.pl.fates(adata, KEY, fates=["nowhere"])
    with pytest.raises(ValueError, match="ax="):
        sks.pl.fates(adata, KEY, ax=axes[0])
    bare = adata.copy()
    del bare.obsm[f"{KEY}_fate_probabilities"]
    with pytest.raises(KeyError, match="tl.fate_probabilities"):
        sks.pl.fates(bare, KEY)
