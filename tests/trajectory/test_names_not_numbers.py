"""Names, not numbers: every tool that takes a node or a segment takes its milestone name
or segment label too, gene-level results name their branches and lineages, and the logs name milestones."""

import anndata
import numpy as np
import pandas as pd
import pytest
import scanpy as sc
from scipy import sparse

import scskeleton as sks
from scskeleton.tl.trajectory.milestones import milestone_entry

KEY = "rpg"


@pytest.fixture(scope="module")
def krumsiek():
    """krumsiek11 with a principal tree rooted at the progenitors and pseudotime (default milestone names)."""
    adata = sks.datasets.krumsiek11()
    sc.pp.pca(adata, n_comps=10)
    sks.tl.rpg(adata, random_state=0)
    sks.tl.root(adata, KEY, group=("cell_type", "progenitor"))
    sks.tl.pseudotime(adata, KEY)
    return adata


def _by_name(adata, name):
    return name


def _by_index(adata, name):
    """The node index of a milestone, or the segment id of a segment label."""
    entry = adata.uns[KEY]["milestones"]
    labels = [str(label) for label in entry["segment_labels"]]
    if name in labels:
        return str(labels.index(name))
    return int(np.asarray(entry["nodes"])[[str(n) for n in entry["names"]].index(name)])


def _by_integer(adata, name):
    """As :func:`_by_index`, a segment id given as an integer."""
    value = _by_index(adata, name)
    return int(value) if isinstance(value, str) else value


#: Every public tool with a node or segment argument, called with the values ``node`` turns the names into.
CASES = {
    "root(node=)": lambda a, node: sks.tl.root(a, KEY, node=node(a, "tip 2")),
    "root(node=[...], several=True)": lambda a, node: sks.tl.root(
        a, KEY, node=[node(a, "tip 1"), node(a, "tip 3")], several=True),
    "path(start, end)": lambda a, node: sks.tl.path(a, KEY, node(a, "root"), node(a, "tip 3")),
    "trends(path=)": lambda a, node: sks.tl.trends(a, KEY, path=(node(a, "root"), node(a, "tip 3"))),
    "trends(segment=)": lambda a, node: sks.tl.trends(a, KEY, segment=node(a, "fork 1 → tip 1")),
    "branch_test(branch_point=)": lambda a, node: sks.tl.branch_test(a, KEY, branch_point=node(a, "fork 1")),
    "fork_test(branch_point=)": lambda a, node: sks.tl.fork_test(a, KEY, branch_point=node(a, "fork 3")),
    "subset_tree(start=, end=)": lambda a, node: sks.tl.subset_tree(
        a, KEY, start=node(a, "root"), end=node(a, "tip 2")),
    "subset_tree(milestones=)": lambda a, node: sks.tl.subset_tree(
        a, KEY, milestones=[node(a, "tip 1"), node(a, "tip 3"), node(a, "tip 4")]),
}


def _assert_same(first, second, where="uns"):
    """Equal values, recursively (``params`` record the arguments as given, names or indices, and are skipped)."""
    if isinstance(first, dict):
        assert isinstance(second, dict) and sorted(first) == sorted(second), where
        for name in first:
            if name != "params":
                _assert_same(first[name], second[name], f"{where}[{name!r}]")
    elif sparse.issparse(first):
        assert sparse.issparse(second) and (first != second).nnz == 0, where
    elif isinstance(first, pd.DataFrame):
        pd.testing.assert_frame_equal(first, second)
    else:
        np.testing.assert_array_equal(np.asarray(first), np.asarray(second), err_msg=where)


def _assert_same_result(first, second, returned=(None, None)):
    _assert_same(*returned, where="returned")
    for field in ("obs", "var"):
        pd.testing.assert_frame_equal(getattr(first, field), getattr(second, field))
    for field in ("obsm", "varm"):
        _assert_same(dict(getattr(first, field)), dict(getattr(second, field)), field)
    _assert_same(dict(first.uns), dict(second.uns))


@pytest.mark.parametrize(("case", "index"), [
    *[(case, _by_index) for case in CASES], ("trends(segment=)", _by_integer),
], ids=[*CASES, "trends(segment=) by an integer id"])
def test_names_are_accepted_wherever_nodes_and_segments_are_with_identical_results(krumsiek, case, index):
    named, numbered = krumsiek.copy(), krumsiek.copy()
    returned = CASES[case](named, _by_name), CASES[case](numbered, index)
    _assert_same_result(named, numbered, returned)


def test_phase_takes_toward_as_a_milestone_name():
    adata = sks.datasets.circle(300, random_state=0)
    sks.tl.rpg_l1(adata)
    quarter = np.floor(np.mod(adata.obs["true_angle"].to_numpy(), 2 * np.pi) / (np.pi / 2)).astype(int)
    adata.obs["stage"] = np.array(["G1", "S", "G2", "M"])[quarter]
    sks.tl.root(adata, "rpg_l1", group=("stage", "G1"))
    sks.tl.pseudotime(adata, "rpg_l1")
    entry = adata.uns["rpg_l1"]
    # a ring's only milestone is its root: name the node the S cells hold most of as one, to be named
    assignment = adata.obsm["rpg_l1_assignment"]
    mass = np.asarray(assignment[(adata.obs["stage"] == "S").to_numpy()].sum(axis=0)).ravel()
    target = int(np.argmax(mass))
    entry["milestones"] = milestone_entry(np.array([int(entry["root"]), target]), ["root", "S"], entry["segments"])
    named, numbered = adata.copy(), adata.copy()
    sks.tl.phase(named, "rpg_l1", toward="S")
    sks.tl.phase(numbered, "rpg_l1", toward=target)
    _assert_same_result(named, numbered)
    assert np.isfinite(named.obs["rpg_l1_phase"]).any()


def test_fork_and_branch_tests_name_their_branches_and_survive_h5ad(krumsiek, tmp_path):
    adata = krumsiek.copy()
    sks.tl.milestones(adata, KEY, groupby="cell_type")
    entry = adata.uns[KEY]
    labels = [str(label) for label in entry["milestones"]["segment_labels"]]
    fork = [str(n) for n in entry["milestones"]["names"]].index("fork 3")
    node = int(entry["milestones"]["nodes"][fork])
    sks.tl.fork_test(adata, KEY, branch_point="fork 3")
    sks.tl.branch_test(adata, KEY, branch_point=node)
    sks.tl.association_test(adata, KEY)
    sks.tl.activation(adata, KEY)
    for test in ("fork_test", "branch_test"):
        result = adata.uns[f"{KEY}_{test}"]
        branches = [str(b) for b in result["branches"]]
        # each branch by the label of its first segment, which the stored ids still key
        assert branches == [labels[int(first)] for first in result["branch_ids"]]
        assert all(label.startswith("fork 3 → ") for label in branches)
        trunk = ["trunk"] if test == "branch_test" else []  # the fork test compares the branches alone
        assert sorted(result["segments"]) == sorted(result["edges"]) == sorted([*trunk, *result["branch_ids"]])
        assert result["branch_point"] == node and result["branch_point_name"] == "fork 3"
        assert list(adata.obs[f"{KEY}_{test}_branch"].cat.categories) == ["trunk", *branches]
    up = adata.var[f"{KEY}_fork_test_up"]
    assert list(up.cat.categories) == list(adata.uns[f"{KEY}_fork_test"]["branches"])
    assert list(adata.var[f"{KEY}_fork_test_down"].cat.categories) == list(up.cat.categories)
    # the erythroid and megakaryocyte factors go up towards their own tips
    assert up["EKLF"] == "fork 3 → Ery" and up["Fli1"] == "fork 3 → Mk"
    lineages = [str(label) for label in adata.uns[f"{KEY}_activation"]["lineage_labels"]]
    assert sorted(lineages) == ["progenitor → Ery", "progenitor → Mk", "progenitor → Mo", "progenitor → Neu"]
    assert list(adata.uns[f"{KEY}_association"]["lineage_labels"]) == lineages
    assert list(adata.var[f"{KEY}_activation_lineage"].cat.categories) == lineages

    adata.write_h5ad(tmp_path / "named.h5ad")
    back = anndata.read_h5ad(tmp_path / "named.h5ad")
    for column in ("fork_test_up", "fork_test_down", "activation_lineage"):
        pd.testing.assert_series_equal(back.var[f"{KEY}_{column}"], adata.var[f"{KEY}_{column}"])
    for test in ("fork_test", "branch_test"):
        pd.testing.assert_series_equal(back.obs[f"{KEY}_{test}_branch"], adata.obs[f"{KEY}_{test}_branch"])
        for field in ("branches", "branch_ids", "branch_point_name"):
            np.testing.assert_array_equal(back.uns[f"{KEY}_{test}"][field], adata.uns[f"{KEY}_{test}"][field])
    np.testing.assert_array_equal(back.uns[f"{KEY}_activation"]["lineage_labels"], lineages)


def test_numeric_results_do_not_change_with_the_names(krumsiek):
    """Named branches are labels only: the numbers of a test are those it gave before the renaming."""
    default, named = krumsiek.copy(), krumsiek.copy()
    sks.tl.milestones(named, KEY, groupby="cell_type")
    for adata in (default, named):
        sks.tl.fork_test(adata, KEY, branch_point=int(adata.uns[KEY]["branch_points"][0]))
    for column in ("F", "pval", "qval", "effect"):
        np.testing.assert_array_equal(default.var[f"{KEY}_fork_test_{column}"], named.var[f"{KEY}_fork_test_{column}"])
    np.testing.assert_array_equal(default.var[f"{KEY}_fork_test_up"].cat.codes, named.var[f"{KEY}_fork_test_up"].cat.codes)
    np.testing.assert_array_equal(default.varm[f"{KEY}_fork_test_curves"], named.varm[f"{KEY}_fork_test_curves"])


def test_forks_are_not_named_after_the_root(krumsiek):
    adata = krumsiek.copy()
    sks.tl.milestones(adata, KEY, groupby="cell_type")
    entry = adata.uns[KEY]
    names = [str(name) for name in entry["milestones"]["names"]]
    roots = set(np.atleast_1d(entry["root"]).tolist())
    nodes = np.asarray(entry["milestones"]["nodes"]).tolist()
    assert [name for node, name in zip(nodes, names) if node in roots] == ["progenitor"]
    assert [name for name in names if name.startswith("progenitor")] == ["progenitor"]
    # the forks, whose nearest cells are mostly progenitors too, keep their default names
    forks = [name for node, name in zip(nodes, names) if node in set(entry["branch_points"].tolist())]
    assert forks == ["fork 1", "fork 2", "fork 3"]
    assert sorted(set(names) - {"progenitor", *forks}) == ["Ery", "Mk", "Mo", "Neu"]


def test_logs_name_the_milestones(krumsiek, scanpy_log):
    adata = krumsiek.copy()
    sc.settings.verbosity = 3
    sks.tl.pseudotime(adata, KEY)
    sks.tl.fork_test(adata, KEY, branch_point="fork 2")
    sks.tl.trends(adata, KEY, segment="fork 1 → tip 1")
    sks.tl.root(adata, KEY, node="fork 1")  # a root inside the tree warns, naming the nearest tip to root at
    log = scanpy_log.getvalue()
    assert "forks: fork 1, fork 2, fork 3;" in log
    assert "the fork at fork 2 (" in log
    assert "along the segment fork 1 → tip 1" in log
    assert "root of 'rpg' set to fork 1" in log
    assert "The root of 'rpg' is fork 1 (node='fork 1' was given)" in log
    assert "the nearest tip, root, root there: sks.tl.root(adata, 'rpg', node='root')" in log
    assert "branch points [" not in log


def test_errors_name_the_milestones(krumsiek):
    adata = krumsiek.copy()
    with pytest.raises(ValueError, match=r"Milestone 'tip 1' is not a branch point"):
        sks.tl.branch_test(adata, KEY, branch_point="tip 1")
    with pytest.raises(ValueError, match=r"Branch points of 'rpg': \['fork 1', 'fork 2', 'fork 3'\]"):
        sks.tl.fork_test(adata, KEY, branch_point=10_000)
    with pytest.raises(ValueError, match="The path starts and ends at tip 2;"):
        sks.tl.trends(adata, KEY, path=("tip 2", _by_index(adata, "tip 2")))
