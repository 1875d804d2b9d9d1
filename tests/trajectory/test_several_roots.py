"""Several roots in one connected component (``tl.root(..., several=True)``): pseudotime from the nearest root."""

import anndata
import numpy as np
import pytest
from scipy import sparse

import scskeleton as sks
from scskeleton._core.trees import trajectory as core
from scskeleton._anndata.schema import cell_coordinates, read_graph


@pytest.fixture(scope="module")
def two_roots(branching_fitted):
    """The branching tree rooted at its first root and at the farthest tip: two populations converging."""
    adata = branching_fitted.copy()
    first = int(adata.uns["ddrtree"]["root"])
    graph = read_graph(adata, "ddrtree")
    distance = core.geodesic_from(graph.adjacency, graph.nodes, first)[0]
    leaves = np.asarray(adata.uns["ddrtree"]["leaves"])
    second = int(leaves[np.argmax(distance[leaves])])
    sks.tl.root(adata, "ddrtree", node=[first, second], several=True)
    sks.tl.pseudotime(adata, "ddrtree")
    return adata


def _per_root_pseudotime(adata, key):
    graph = read_graph(adata, key)
    projection = core.project_onto_graph(cell_coordinates(adata, graph), graph.nodes, graph.adjacency)
    return np.stack([core.pseudotime(projection, graph.adjacency, graph.nodes, [r]) for r in graph.roots])


def test_pseudotime_is_the_distance_to_the_nearer_root(two_roots):
    roots = np.asarray(two_roots.uns["ddrtree"]["root"])
    assert roots.size == 2
    time = two_roots.obs["ddrtree_pseudotime"].to_numpy()
    per_root = _per_root_pseudotime(two_roots, "ddrtree")
    np.testing.assert_allclose(time, per_root.min(axis=0))
    assert np.isfinite(time).all() and (time >= 0).all()
    # 0 at each root: the cells nearest each root node are the youngest of their root's side
    graph = read_graph(two_roots, "ddrtree")
    node_time = core.geodesic_from(graph.adjacency, graph.nodes, roots).min(axis=0)
    np.testing.assert_array_equal(node_time[roots], 0.0)
    nearer = per_root.argmin(axis=0)
    assert set(nearer.tolist()) == {0, 1}  # both roots have cells of their own


def test_pseudotime_increases_away_from_both_roots_along_every_segment(two_roots):
    entry = two_roots.uns["ddrtree"]
    graph = read_graph(two_roots, "ddrtree")
    node_time = core.geodesic_from(graph.adjacency, graph.nodes, graph.roots).min(axis=0)
    for path in entry["segments"].values():
        assert (np.diff(node_time[np.asarray(path)]) > 0).all()
    # each root starts its own segment(s)
    starts = {int(np.asarray(path)[0]) for path in entry["segments"].values()}
    assert set(graph.roots.tolist()) <= starts


def test_segments_and_milestones_are_consistent(two_roots):
    entry = two_roots.uns["ddrtree"]
    names = [str(n) for n in entry["milestones"]["names"]]
    nodes = np.asarray(entry["milestones"]["nodes"]).tolist()
    assert names[:2] == ["root 1", "root 2"]
    # the two roots' stretches meet between the forks: a milestone ends the segments there
    assert "meeting 1" in names
    meeting = nodes[names.index("meeting 1")]
    ending = [p for p in entry["segments"].values() if int(np.asarray(p)[-1]) == meeting]
    assert len(ending) == 2 and not any(int(np.asarray(p)[0]) == meeting for p in entry["segments"].values())
    # every segment runs between two milestones, and its label names them
    for segment_id, label in zip(sorted(entry["segments"], key=int), entry["milestones"]["segment_labels"]):
        path = np.asarray(entry["segments"][segment_id])
        assert int(path[0]) in nodes and int(path[-1]) in nodes
        assert label == f"{names[nodes.index(int(path[0]))]} → {names[nodes.index(int(path[-1]))]}"
    # cells: the segment and nearest milestone columns cover every cell
    assert not two_roots.obs["ddrtree_segment"].isna().any()
    assert not two_roots.obs["ddrtree_milestone"].isna().any()
    # renaming back to defaults gives the same names (meeting points included)
    adata = two_roots.copy()
    sks.tl.milestones(adata, "ddrtree")
    assert [str(n) for n in adata.uns["ddrtree"]["milestones"]["names"]] == names


def test_a_meeting_point_ends_the_segment_between_two_roots():
    # a path 0 - 1 - 2 - 3 - 4 - 5 rooted at both ends: pseudotime rises to the middle from each side
    nodes = np.c_[np.arange(6.0), np.zeros(6)]
    adjacency = sparse.diags([np.ones(5), np.ones(5)], [-1, 1], format="csr")
    shape = core.topology(adjacency, nodes, roots=[0, 5])
    assert shape.meeting_points.tolist() in ([2], [3])
    meet = int(shape.meeting_points[0])
    assert sorted((int(p[0]), int(p[-1])) for p in shape.segments) == sorted([(0, meet), (5, meet)])
    # one root: the path stays one segment and has no meeting point
    single = core.topology(adjacency, nodes, roots=[0])
    assert len(single.segments) == 1 and not single.meeting_points.size


def test_h5ad_round_trip(tmp_path, two_roots):
    path = tmp_path / "two_roots.h5ad"
    two_roots.write_h5ad(path)
    back = anndata.read_h5ad(path)
    np.testing.assert_array_equal(back.uns["ddrtree"]["root"], two_roots.uns["ddrtree"]["root"])
    np.testing.assert_allclose(back.obs["ddrtree_pseudotime"], two_roots.obs["ddrtree_pseudotime"])
    assert list(back.uns["ddrtree"]["milestones"]["segment_labels"]) == list(
        two_roots.uns["ddrtree"]["milestones"]["segment_labels"]
    )
    sks.tl.pseudotime(back, "ddrtree")  # the stored roots give the same trajectory again
    np.testing.assert_allclose(back.obs["ddrtree_pseudotime"], two_roots.obs["ddrtree_pseudotime"])


def test_default_refuses_two_roots_in_one_component_and_names_the_keyword(branching_fitted):
    adata = branching_fitted.copy()
    before = adata.uns["ddrtree"]["root"]
    leaves = np.asarray(adata.uns["ddrtree"]["leaves"])[:2].tolist()
    with pytest.raises(ValueError, match="several=True"):
        sks.tl.root(adata, "ddrtree", node=leaves)
    assert adata.uns["ddrtree"]["root"] == before
    with pytest.raises(ValueError, match="more than once"):
        sks.tl.root(adata, "ddrtree", node=[leaves[0], leaves[0]], several=True)
    assert adata.uns["ddrtree"]["root"] == before


def test_one_root_per_label_of_a_group(branching_fitted):
    adata = branching_fitted.copy()
    labels = adata.obs["true_branch"].astype(str)
    adata.obs["label"] = labels.to_numpy()
    tips = sorted(set(labels) - {labels[adata.obs["true_pseudotime"].idxmin()]})[:2]
    with pytest.raises(ValueError, match="several=True"):
        sks.tl.root(adata, "ddrtree", group=("label", tips))
    sks.tl.root(adata, "ddrtree", group=("label", tips), several=True)
    roots = np.asarray(adata.uns["ddrtree"]["root"])
    assert roots.size == 2 and roots[0] != roots[1]
    with pytest.raises(ValueError, match="per_component"):
        sks.tl.root(adata, "ddrtree", group=("label", tips), several=True, per_component=True)


def test_fates_sum_to_one_with_two_roots(two_roots):
    adata = two_roots.copy()
    sks.tl.fate_probabilities(adata, "ddrtree")
    np.testing.assert_allclose(adata.obsm["ddrtree_fate_probabilities"].sum(axis=1), 1.0, atol=1e-9)


def test_dendrogram_draws_a_tree_from_each_root_joined_where_they_meet(two_roots):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection

    from scskeleton.pl._dendrogram import MEETINGS_GID, SEGMENTS_GID

    entry = two_roots.uns["ddrtree"]
    ax = sks.pl.dendrogram(two_roots, "ddrtree", show=False)
    lines = {c.get_gid(): c.get_segments() for c in ax.collections if isinstance(c, LineCollection)}
    segments = lines[SEGMENTS_GID]
    assert len(segments) == len(entry["segments"])
    assert sum(line[0, 0] == 0.0 for line in segments) == 2  # each root starts at pseudotime 0
    # where the two roots' stretches meet, the segments ending there are joined end to end by dashed lines
    ends = {}
    for name, path in entry["segments"].items():
        ends.setdefault(int(np.asarray(path)[-1]), []).append(name)
    meeting = [names for names in ends.values() if len(names) > 1]
    assert meeting
    drawn = {name: line for name, line in zip(sorted(entry["segments"], key=int), segments)}
    joined = {tuple(map(tuple, np.round(pair, 9))) for pair in lines[MEETINGS_GID]}
    expected = set()
    for names in meeting:
        ends_drawn = sorted((drawn[name][1] for name in names), key=lambda point: point[1])
        expected |= {tuple(map(tuple, np.round([a, b], 9))) for a, b in zip(ends_drawn[:-1], ends_drawn[1:])}
    assert joined == expected
    # each milestone named once (the meeting node ends two drawn segments), in a readable size, on a
    # panel tall enough for its lines and labels
    from scskeleton.pl._dendrogram import MILESTONES_GID

    labels = [t for t in ax.texts if t.get_gid() == MILESTONES_GID]
    names = [t.get_text() for t in labels]
    assert len(names) == len(set(names)) and any(name.startswith("meeting") for name in names)
    assert min(t.get_fontsize() for t in labels) >= 8
    assert ax.figure.get_size_inches()[1] >= 3.0
    plt.close("all")


def test_downstream_tools_work_or_raise_clear_errors(two_roots):
    adata = two_roots.copy()
    # a sub-trajectory between the two roots keeps both
    sks.tl.subset_tree(adata, "ddrtree", start="root 1", end="root 2", key_added="between")
    assert np.asarray(adata.uns["between"]["root"]).size == 2
    inside = adata.obs["between_pseudotime"].dropna()
    assert inside.size and (inside >= 0).all()
    # trends along a segment of the two-root topology
    sks.tl.trends(adata, "ddrtree", segment="0", genes=list(adata.var_names[:3]))
    # tests around a fork: they run, or say that the way from the root is not unique
    fork = "fork 1"
    for test in (sks.tl.branch_test, sks.tl.fork_test):
        try:
            test(adata, "ddrtree", branch_point=fork, genes=list(adata.var_names[:3]))
        except ValueError as error:
            assert "root" in str(error)
    sks.tl.association_test(adata, "ddrtree", genes=list(adata.var_names[:3]))
    # new cells mapped onto the two-root reference are measured from their nearer root too
    new = anndata.AnnData(two_roots.X.copy(), obs=two_roots.obs[[]].copy(), var=two_roots.var[[]].copy())
    new.obsm["X_pca"] = two_roots.obsm["X_pca"].copy()
    sks.tl.project(new, two_roots, "ddrtree")
    np.testing.assert_allclose(new.obs["ddrtree_pseudotime"], _per_root_pseudotime(new, "ddrtree").min(axis=0))
    assert np.asarray(new.uns["ddrtree"]["root"]).size == 2
