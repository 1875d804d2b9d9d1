"""Fate probabilities with several roots in one component, and the ternary view of ``pl.fates``."""

import anndata
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scanpy as sc  # noqa: E402
from scipy import sparse  # noqa: E402
from scipy.special import entr  # noqa: E402

import scskeleton as sks  # noqa: E402
from scskeleton._core.trees import fates as core  # noqa: E402
from scskeleton._core.trees import trajectory  # noqa: E402
from scskeleton._anndata.schema import cell_assignment, column_sums, read_graph  # noqa: E402
from scskeleton.pl._fates import TERNARY_CORNERS  # noqa: E402

HAND = "hand"
# scanpy 1.11 calls the deprecated Colormap.set_bad itself; nothing this module can change.
pytestmark = pytest.mark.filterwarnings("ignore:The set_bad function:PendingDeprecationWarning")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --- a hand-made tree: two arms converging at a junction, a trunk, a fork into two tips ------------------


def _converging(*, short_arm: bool = False, seed: int = 0) -> anndata.AnnData:
    """Two arms (A, B) join at a junction J, a trunk runs from J to a fork F, and F forks into an upper and a
    lower branch; every branch has 4 edges of length 1, except arm B with ``short_arm`` (2 edges of 1.25).

    Written in the schema a learner writes (``uns[key]`` nodes/adjacency/space, ``obsm`` assignment), so
    the trajectory tools run on it as on a fit. The upper branch holds three times as many cells per node
    as the lower one, so that the fork splits 3 : 1. ``obs["part"]`` names the branch of each cell's node,
    ``obs["node"]`` the node.
    """
    angle = np.pi / 6
    up, down = np.array([np.cos(angle), np.sin(angle)]), np.array([np.cos(angle), -np.sin(angle)])
    nodes, edges, part = [np.zeros(2)], [], ["junction"]

    def chain(start: int, direction: np.ndarray, steps: int, length: float, name: str) -> list[int]:
        made, previous = [], start
        for k in range(1, steps + 1):
            nodes.append(nodes[start] + k * length * direction)
            part.append(name)
            edges.append((previous, len(nodes) - 1))
            previous = len(nodes) - 1
            made.append(previous)
        return made

    arm_a = chain(0, -down, 4, 1.0, "arm A")  # up and to the left
    arm_b = chain(0, -up, 2, 1.25, "arm B") if short_arm else chain(0, -up, 4, 1.0, "arm B")
    trunk = chain(0, np.array([1.0, 0.0]), 4, 1.0, "trunk")
    part[trunk[-1]] = "fork"
    upper = chain(trunk[-1], up, 4, 1.0, "upper")
    lower = chain(trunk[-1], down, 4, 1.0, "lower")
    nodes = np.asarray(nodes)
    rows, cols = np.asarray(edges).T
    adjacency = sparse.csr_matrix((np.ones(2 * rows.size), (np.r_[rows, cols], np.r_[cols, rows])),
                                  shape=(len(nodes), len(nodes)))

    rng = np.random.default_rng(seed)
    per_node = np.where(np.isin(np.arange(len(nodes)), upper), 30, 10)
    node_of_cell = np.repeat(np.arange(len(nodes)), per_node)
    cells = nodes[node_of_cell] + rng.normal(scale=0.1, size=(node_of_cell.size, 2))
    # a soft Gaussian assignment (width 0.25, a quarter of an edge): a cell's mass two edges away is ~1e-14
    squared = ((cells[:, None, :] - nodes[None, :, :]) ** 2).sum(axis=2)
    assignment = np.exp(-(squared - squared.min(axis=1, keepdims=True)) / (2 * 0.25 ** 2))
    assignment /= assignment.sum(axis=1, keepdims=True)

    adata = anndata.AnnData(cells.copy())
    adata.obsm[f"X_{HAND}"] = cells
    adata.obsm[f"{HAND}_assignment"] = assignment
    adata.obs["part"] = np.asarray(part)[node_of_cell]
    adata.obs["node"] = node_of_cell
    adata.uns[HAND] = {"method": "rpg", "params": {}, "nodes": nodes, "space": f"X_{HAND}",
                       "adjacency": adjacency, "objective": np.zeros(1), "n_iter": 1, "converged": True}
    sks.tl.root(adata, HAND, node=[arm_a[-1], arm_b[-1]], several=True)
    sks.tl.pseudotime(adata, HAND, min_branch_nodes=0)
    sks.tl.fate_probabilities(adata, HAND)
    adata.uns["test_nodes"] = {"arm_a": np.asarray(arm_a), "arm_b": np.asarray(arm_b), "trunk": np.asarray(trunk),
                               "upper": np.asarray(upper), "lower": np.asarray(lower)}
    return adata


@pytest.fixture(scope="module")
def converging():
    return _converging()


@pytest.fixture(scope="module")
def meeting():
    return _converging(short_arm=True)


def _fate_of(adata, node: int) -> str:
    """The fate column name of a terminal node: its milestone's name."""
    milestones = adata.uns[HAND]["milestones"]
    return str(np.asarray(milestones["names"])[np.asarray(milestones["nodes"]).tolist().index(int(node))])


def _fork_split(adata) -> float:
    """The share of the upper branch at the fork: its cell mass over that of both branches below the fork."""
    nodes = adata.uns["test_nodes"]
    mass = column_sums(cell_assignment(adata, HAND))
    return mass[nodes["upper"]].sum() / (mass[nodes["upper"]].sum() + mass[nodes["lower"]].sum())


def test_two_roots_converging_into_a_trunk_share_the_forks_split(converging):
    adata = converging
    nodes = adata.uns["test_nodes"]
    fates = [str(f) for f in adata.uns[HAND]["fates"]]
    upper, lower = _fate_of(adata, nodes["upper"][-1]), _fate_of(adata, nodes["lower"][-1])
    # the arms meet at the junction, a fork of the tree: no meeting point, and the fates are the two tips
    assert len(np.asarray(adata.uns[HAND]["root"])) == 2
    assert not any(str(n).startswith("meeting") for n in adata.uns[HAND]["milestones"]["names"])
    assert sorted(fates) == sorted([upper, lower])
    probabilities = adata.obsm[f"{HAND}_fate_probabilities"]
    assert probabilities.shape == (adata.n_obs, 2) and (probabilities >= 0).all()
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    # ≈ 1 for the right tip near each tip
    node = adata.obs["node"].to_numpy()
    for tip_nodes, fate in ((nodes["upper"], upper), (nodes["lower"], lower)):
        near = np.isin(node, tip_nodes[-2:])
        assert near.any() and (probabilities[near, fates.index(fate)] > 1 - 1e-9).all()
    # every cell upstream of the fork, on either arm or on the trunk, gets the fork's 3 : 1 split
    split = _fork_split(adata)
    assert 0.7 < split < 0.8
    upstream = np.isin(node, np.r_[nodes["arm_a"], nodes["arm_b"], 0, nodes["trunk"][:-2]])
    for arm in ("arm A", "arm B", "trunk"):
        assert (upstream & (adata.obs["part"] == arm).to_numpy()).any()
    np.testing.assert_allclose(probabilities[upstream, fates.index(upper)], split, atol=1e-9)
    np.testing.assert_allclose(adata.obs[f"{HAND}_fate_entropy"].to_numpy()[upstream],
                               entr(split) + entr(1 - split), atol=1e-8)


def test_a_meeting_point_on_a_path_is_a_terminal_state_of_its_own(meeting):
    adata = meeting
    nodes = adata.uns["test_nodes"]
    milestones = dict(zip([str(n) for n in adata.uns[HAND]["milestones"]["names"]],
                          np.asarray(adata.uns[HAND]["milestones"]["nodes"]).tolist()))
    # arm B is shorter: the roots' stretches meet on arm A, next to the junction
    assert milestones["meeting 1"] == nodes["arm_a"][0]
    fates = [str(f) for f in adata.uns[HAND]["fates"]]
    upper, lower = _fate_of(adata, nodes["upper"][-1]), _fate_of(adata, nodes["lower"][-1])
    assert fates == [*sorted([upper, lower], key=fates.index), "meeting 1"]  # tips first, then meeting points
    probabilities = adata.obsm[f"{HAND}_fate_probabilities"]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    node = adata.obs["node"].to_numpy()
    # arm A up to the meeting point flows into it, and no further
    arm_a = np.isin(node, nodes["arm_a"][1:])
    assert (probabilities[arm_a, fates.index("meeting 1")] > 1 - 1e-9).all()
    # arm B joins the trunk at the junction: mostly the fork's split, kept 3 : 1 after the junction; the
    # junction's own edge up to the meeting point takes the small share of mass that lies there
    other = np.isin(node, np.r_[nodes["arm_b"], 0, nodes["trunk"][:-2]])
    assert (probabilities[other, fates.index("meeting 1")] < 0.2).all()
    tips = probabilities[other][:, [fates.index(upper), fates.index(lower)]]
    np.testing.assert_allclose(tips[:, 0] / tips.sum(axis=1), _fork_split(adata), atol=1e-9)
    # the meeting point is a sink of the walk: a terminal node that is no leaf of the tree
    graph = read_graph(adata, HAND)
    segments = [np.asarray(adata.uns[HAND]["segments"][s]) for s in sorted(adata.uns[HAND]["segments"], key=int)]
    walk = core.node_fates(graph.adjacency, graph.nodes, segments, graph.roots,
                           column_sums(cell_assignment(adata, HAND)))
    assert walk.sinks.tolist() == [milestones["meeting 1"]]


def test_two_roots_on_a_fitted_tree(branching_fitted):
    """Rooted at its start and at its farthest tip (as in test_several_roots): tips and a meeting point."""
    adata = branching_fitted.copy()
    graph = read_graph(adata, "ddrtree")
    first = int(graph.roots[0])
    leaves = np.asarray(adata.uns["ddrtree"]["leaves"])
    second = int(leaves[np.argmax(trajectory.geodesic_from(graph.adjacency, graph.nodes, first)[0, leaves])])
    sks.tl.root(adata, "ddrtree", node=[first, second], several=True)
    sks.tl.pseudotime(adata, "ddrtree")
    sks.tl.fate_probabilities(adata, "ddrtree")
    fates = [str(f) for f in adata.uns["ddrtree"]["fates"]]
    names = [str(n) for n in adata.uns["ddrtree"]["milestones"]["names"]]
    # every tip that is no root, and every meeting point, is a fate; nothing else
    assert sorted(fates) == sorted(n for n in names if n.startswith(("tip", "meeting")))
    assert "meeting 1" in fates
    probabilities = adata.obsm["ddrtree_fate_probabilities"]
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)
    milestone = adata.obs["ddrtree_milestone"].astype(str).to_numpy()
    for fate in fates:
        assert (probabilities[milestone == fate, fates.index(fate)] >= 0.9).all()
    # new cells placed on the two-root reference get its fates (the same cells: mostly the same values;
    # a few land on other nodes when placed through W, as with one root)
    new = anndata.AnnData(adata.X.copy(), obs=adata.obs[[]].copy(), var=adata.var[[]].copy())
    new.obsm["X_pca"] = adata.obsm["X_pca"].copy()
    sks.tl.project(new, adata, "ddrtree")
    placed = new.obsm["ddrtree_fate_probabilities"]
    assert list(new.uns["ddrtree"]["fates"]) == fates
    np.testing.assert_allclose(placed.sum(axis=1), 1.0, atol=1e-12)
    assert np.mean(np.abs(placed - probabilities).max(axis=1) < 0.05) >= 0.9


def test_several_roots_survive_h5ad_and_project(tmp_path, meeting):
    path = tmp_path / "converging.h5ad"
    meeting.write_h5ad(path)
    back = anndata.read_h5ad(path)
    np.testing.assert_array_equal(back.obsm[f"{HAND}_fate_probabilities"], meeting.obsm[f"{HAND}_fate_probabilities"])
    np.testing.assert_array_equal(back.obs[f"{HAND}_fate_entropy"], meeting.obs[f"{HAND}_fate_entropy"])
    assert list(back.uns[HAND]["fates"]) == list(meeting.uns[HAND]["fates"])
    sks.tl.fate_probabilities(back, HAND)  # the stored roots and segments give the same fates again
    np.testing.assert_array_equal(back.obsm[f"{HAND}_fate_probabilities"], meeting.obsm[f"{HAND}_fate_probabilities"])
    # renaming the meeting point renames its fate
    sks.tl.rename_milestones(back, HAND, {"meeting 1": "converged"})
    assert "converged" in list(back.uns[HAND]["fates"])


def test_fates_plot_draws_several_roots(meeting):
    adata = meeting.copy()
    axes = sks.pl.fates(adata, HAND, show=False)
    fates = [str(f) for f in adata.uns[HAND]["fates"]]
    assert [ax.get_title() for ax in axes] == [f"fate: {f}" for f in fates]
    values = axes[-1].collections[0].get_array()
    np.testing.assert_allclose(np.sort(values), np.sort(adata.obsm[f"{HAND}_fate_probabilities"][:, -1]))
    ax = sks.pl.fates(adata, HAND, fates="meeting 1", show=False)
    assert ax.get_title() == "fate: meeting 1"
    # both roots are marked on the tree
    roots = [c for c in ax.collections if c.get_label() == "roots"]
    assert len(roots) == 1 and len(roots[0].get_offsets()) == 2


# --- one root per component: the general walk is the walk down a rooted tree, bit for bit --------------


def _one_root_walk(adjacency, nodes, segments, roots, mass):
    """The walk of ``node_fates`` before several roots were allowed (one parent per node), kept as a reference."""
    n_nodes = nodes.shape[0]
    roots = np.atleast_1d(np.asarray(roots, dtype=np.intp))
    parent = np.full(n_nodes, -1, dtype=np.intp)
    children = [[] for _ in range(n_nodes)]
    on_segment = np.zeros(n_nodes, dtype=bool)
    for path in segments:
        path = np.asarray(path, dtype=np.intp)
        on_segment[path] = True
        for u, v in zip(path[:-1].tolist(), path[1:].tolist()):
            assert parent[v] < 0 and v not in roots
            parent[v] = u
            children[u].append(v)
    order = [int(r) for r in roots]
    for v in order:
        order.extend(children[v])
    leaves = np.sort(np.asarray([v for v in order if not children[v] and v not in roots], dtype=np.intp))
    hub = core._nearest_on_segment(adjacency, nodes, on_segment)
    reachable = hub >= 0
    downstream = np.bincount(hub[reachable], weights=np.asarray(mass, dtype=float)[reachable], minlength=n_nodes)
    for v in reversed(order):
        if parent[v] >= 0:
            downstream[parent[v]] += downstream[v]
    distributions = np.zeros((n_nodes, leaves.size))
    distributions[leaves, np.arange(leaves.size)] = 1.0
    for v in reversed(order):
        if children[v]:
            weight = downstream[children[v]]
            weight = weight / weight.sum() if weight.sum() > 0 else np.full(weight.size, 1.0 / weight.size)
            distributions[v] = weight @ distributions[children[v]]
    off = ~on_segment & reachable
    distributions[off] = distributions[hub[off]]
    return leaves, distributions


@pytest.mark.parametrize("method", ["ddrtree", "rpg"])
def test_one_root_per_component_is_bit_identical_to_the_rooted_tree_walk(method, branching_fitted):
    if method == "ddrtree":
        adata = branching_fitted.copy()
    else:  # an unpruned principal tree with a short branch pruned from the topology (nodes on no segment)
        adata = sks.datasets.branching(500, n_leaves=4, random_state=1)
        sc.pp.pca(adata, n_comps=10)
        sks.tl.rpg(adata, prune=False)
        sks.tl.root(adata, method, obs_min="true_pseudotime")
        sks.tl.pseudotime(adata, method, min_branch_nodes=8)
    sks.tl.fate_probabilities(adata, method)
    graph = read_graph(adata, method)
    entry = adata.uns[method]
    segments = [np.asarray(entry["segments"][s]) for s in sorted(entry["segments"], key=int)]
    if method == "rpg":
        assert np.setdiff1d(np.arange(graph.n_nodes), np.concatenate(segments)).size  # the stub's nodes
    mass = column_sums(cell_assignment(adata, method))
    walk = core.node_fates(graph.adjacency, graph.nodes, segments, graph.roots, mass)
    leaves, distributions = _one_root_walk(graph.adjacency, graph.nodes, segments, graph.roots, mass)
    np.testing.assert_array_equal(walk.leaves, leaves)
    np.testing.assert_array_equal(walk.distributions, distributions)
    assert not walk.sinks.size
    # and what the tool wrote is that walk's P = R D, columns in milestone order
    nodes = np.asarray(entry["milestones"]["nodes"]).tolist()
    order = np.argsort([nodes.index(int(leaf)) for leaf in leaves], kind="stable")
    expected, _ = core.cell_fates(cell_assignment(adata, method), distributions[:, order])
    np.testing.assert_array_equal(adata.obsm[f"{method}_fate_probabilities"], expected)


def test_a_cycle_is_still_refused_with_several_roots():
    # a square 0-1-2-3-0 with a tail 3-4: rooted at 0 and 4, the cycle is found however the edges point
    nodes = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 1.0]])
    rows, cols = np.array([[0, 1], [1, 2], [2, 3], [3, 0], [3, 4]]).T
    adjacency = sparse.csr_matrix((np.ones(10), (np.r_[rows, cols], np.r_[cols, rows])), shape=(5, 5))
    shape = trajectory.topology(adjacency, nodes, roots=[0, 4])
    with pytest.raises(ValueError, match="cycle"):
        core.node_fates(adjacency, nodes, shape.segments, [0, 4], np.ones(5))


# --- the ternary view ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three(branching_fitted):
    """The fitted branching tree (three tips) with fate probabilities."""
    adata = branching_fitted.copy()
    sks.tl.fate_probabilities(adata, "ddrtree")
    assert len(adata.uns["ddrtree"]["fates"]) == 3
    return adata


def _snapshot(adata):
    return (sorted(adata.uns), sorted(adata.uns["ddrtree"]), list(adata.obs.columns), sorted(adata.obsm),
            adata.obsm["ddrtree_fate_probabilities"].copy())


def test_ternary_places_each_cell_at_its_barycentric_point(three):
    adata = three.copy()
    probabilities = adata.obsm["ddrtree_fate_probabilities"]
    chosen = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0]])
    probabilities[: len(chosen)] = chosen  # the plot reads the schema only: any stored probabilities do
    before = _snapshot(adata)
    ax = sks.pl.fates(adata, "ddrtree", kind="ternary", show=False)
    offsets = np.asarray(ax.collections[0].get_offsets())
    assert offsets.shape == (adata.n_obs, 2)
    height = np.sqrt(3) / 2
    np.testing.assert_allclose(offsets[:5], [[0, 0], [1, 0], [0.5, height], [0.5, height / 3], [0.5, 0]],
                               atol=1e-12)
    np.testing.assert_allclose(offsets, probabilities @ TERNARY_CORNERS, atol=1e-12)
    fates = [str(f) for f in adata.uns["ddrtree"]["fates"]]
    corners = [t for t in ax.texts if t.get_gid() == "scskeleton_fate_corner"]
    assert [t.get_text() for t in corners] == fates
    np.testing.assert_allclose([t.get_position() for t in corners], TERNARY_CORNERS, atol=0.05)
    assert ax.get_title() == "fate probabilities"
    # the fates in another order move the corners with them
    ax = sks.pl.fates(adata, "ddrtree", kind="ternary", fates=fates[::-1], show=False)
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_offsets())[0], TERNARY_CORNERS[2], atol=1e-12)
    assert _snapshot(adata)[:4] == before[:4]
    np.testing.assert_array_equal(adata.obsm["ddrtree_fate_probabilities"], before[4])


def test_ternary_colours_like_the_other_plots(three):
    adata = three.copy()
    before = _snapshot(adata)
    axes = sks.pl.fates(adata, "ddrtree", kind="ternary", color=["true_branch", "true_pseudotime"], show=False)
    assert len(axes) == 2
    assert [ax.get_title() for ax in axes] == ["true branch", "true pseudotime"]
    # a continuous colour: the values of the cells (scanpy draws the highest on top), with a colour bar
    np.testing.assert_allclose(np.sort(axes[1].collections[0].get_array()),
                               np.sort(adata.obs["true_pseudotime"].to_numpy()))
    assert axes[1].collections[0].colorbar is not None
    # a category: a legend of its values
    assert {t.get_text() for t in axes[0].get_legend().get_texts()} >= set(adata.obs["true_branch"].astype(str))
    gene = str(adata.var_names[0])
    ax = sks.pl.fates(adata, "ddrtree", kind="ternary", color=gene, title="my gene", show=False)
    assert ax.get_title() == "my gene"
    fig, own = plt.subplots()
    assert sks.pl.fates(adata, "ddrtree", kind="ternary", ax=own, show=False) is own
    assert sks.pl.fates(adata, "ddrtree", kind="ternary", return_fig=True).axes[0].get_title() == "fate probabilities"
    assert _snapshot(adata)[:4] == before[:4]


def test_ternary_needs_three_fates_and_says_how_to_choose_them(three):
    adata = three.copy()
    fates = [str(f) for f in adata.uns["ddrtree"]["fates"]]
    with pytest.raises(ValueError, match=r"exactly three fates.*names 2 .*kind='panels'"):
        sks.pl.fates(adata, "ddrtree", kind="ternary", fates=fates[:2])
    with pytest.raises(ValueError, match="exactly three fates"):
        sks.pl.fates(adata, "ddrtree", kind="ternary", fates=[fates[0], fates[0], fates[1]])
    # four fates: the message counts them and suggests three by name
    four = adata.copy()
    probabilities = four.obsm["ddrtree_fate_probabilities"]
    extra = np.linspace(0.0, 0.5, four.n_obs)
    four.obsm["ddrtree_fate_probabilities"] = np.c_[probabilities * (1 - extra)[:, None], extra]
    four.uns["ddrtree"]["fates"] = np.asarray([*fates, "other"], dtype=object)
    with pytest.raises(ValueError, match=r"has 4 fate\(s\).*kind='panels'.*fates=\["):
        sks.pl.fates(four, "ddrtree", kind="ternary")
    # three of them, renormalised over the three
    ax = sks.pl.fates(four, "ddrtree", kind="ternary", fates=[fates[0], fates[1], "other"], show=False)
    chosen = four.obsm["ddrtree_fate_probabilities"][:, [0, 1, 3]]
    np.testing.assert_allclose(np.asarray(ax.collections[0].get_offsets()),
                               (chosen / chosen.sum(axis=1, keepdims=True)) @ TERNARY_CORNERS, atol=1e-12)
    # cells without a probability on the three are left out
    gone = adata.copy()
    gone.obsm["ddrtree_fate_probabilities"][:3] = np.nan
    ax = sks.pl.fates(gone, "ddrtree", kind="ternary", show=False)
    assert len(ax.collections[0].get_offsets()) == gone.n_obs - 3
    # the two views' own parameters are refused in the other
    with pytest.raises(ValueError, match="kind='panels'"):
        sks.pl.fates(adata, "ddrtree", kind="ternary", basis="pca")
    with pytest.raises(ValueError, match="kind='ternary'"):
        sks.pl.fates(adata, "ddrtree", color="true_branch")
    with pytest.raises(ValueError, match="kind must be one of"):
        sks.pl.fates(adata, "ddrtree", kind="triangle")
    with pytest.raises(KeyError, match="No fate"):
        sks.pl.fates(adata, "ddrtree", kind="ternary", fates=["a", "b", "c"])


def test_ternary_of_two_tips_and_a_meeting_point(meeting):
    adata = meeting.copy()
    ax = sks.pl.fates(adata, HAND, kind="ternary", color="part", show=False)
    fates = [str(f) for f in adata.uns[HAND]["fates"]]
    assert [t.get_text() for t in ax.texts if t.get_gid() == "scskeleton_fate_corner"] == fates
    # cells of arm A past the meeting point sit on its corner (drawn in scanpy's shuffled order for a category)
    ax = sks.pl.fates(adata, HAND, kind="ternary", show=False)
    offsets = np.asarray(ax.collections[0].get_offsets())
    arm_a = np.isin(adata.obs["node"].to_numpy(), adata.uns["test_nodes"]["arm_a"][1:])
    np.testing.assert_allclose(offsets[arm_a], np.broadcast_to(TERNARY_CORNERS[fates.index("meeting 1")],
                                                               (arm_a.sum(), 2)), atol=1e-9)
