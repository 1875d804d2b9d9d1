"""Misuse a new user runs into: views and subsets, unstorable keys, keys reused by another
learner, duplicated cell names, and a command line that must fail early and never leave a
broken output file (issue 14, items 1–6)."""

import functools
import os
import stat
import subprocess
import sys
import warnings

import anndata
import numpy as np
import pytest
import scanpy as sc
from scipy import sparse

import scskeleton as sks
from scskeleton._anndata.schema import is_cell_graph
from scskeleton.cli import _value, main

LEARNERS = ["ddrtree", "rpg", "rpg_l1", "mpme", "spl", "esl", "fsl", "convex_embedding"]
#: The smallest fits that run each learner in well under a second.
SMALL_FIT = {
    "ddrtree": {"n_centers": 10, "maxiter": 5},
    "rpg": {"n_nodes": 10, "maxiter": 5},
    "rpg_l1": {"n_nodes": 10, "maxiter": 3},
    "mpme": {"maxiter": 20},
    "spl": {"maxiter": 3},
    "esl": {"maxiter": 20},
    "fsl": {"maxiter": 3},
    "convex_embedding": {"maxiter": 3},
}


def _data(n_cells=120, random_state=0):
    adata = sks.datasets.branching(n_cells, n_leaves=2, n_dims=5, random_state=random_state)
    sc.pp.pca(adata, n_comps=4)
    return adata


def _fit(adata, method, key):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small fits stop at maxiter on purpose
        getattr(sks.tl, method)(adata, key_added=key, **SMALL_FIT[method])


def _not_trunk(adata):
    """Half of the trunk and every other cell: a subset that still reaches the root."""
    return (adata.obs["true_branch"] != "trunk").to_numpy() | (np.arange(adata.n_obs) % 2 == 0)


# 1. views and subsets


def test_root_pseudotime_and_support_on_a_view_leave_the_parent_untouched():
    adata = _data()
    sks.tl.rpg(adata, n_nodes=15)
    sks.tl.root(adata, "rpg", group=("true_branch", "trunk"))
    parent_root = adata.uns["rpg"]["root"]
    leaves = np.flatnonzero(np.asarray(adata.uns["rpg"]["adjacency"].sum(axis=1)).ravel() == 1)
    other = int(leaves[leaves != parent_root][0])

    view = adata[_not_trunk(adata)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.root(view, "rpg", node=other)
        assert not view.is_view and view.uns["rpg"]["root"] == other  # written to the object the user holds
        assert adata.uns["rpg"]["root"] == parent_root

        view = adata[_not_trunk(adata)]
        sks.tl.pseudotime(view, "rpg")
        sks.tl.branch_support(view, "rpg", n_boot=1)
    assert "rpg_pseudotime" in view.obs and "segments" in view.uns["rpg"] and "branch_support" in view.uns["rpg"]
    assert "rpg_pseudotime" not in adata.obs
    assert "segments" not in adata.uns["rpg"] and "branch_support" not in adata.uns["rpg"]


def test_a_learner_on_a_view_leaves_the_parent_untouched():
    adata = _data()
    before = sorted(adata.uns), sorted(adata.obsm)
    view = adata[_not_trunk(adata)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        _fit(view, "ddrtree", "ddrtree")
    assert "ddrtree" in view.uns and (sorted(adata.uns), sorted(adata.obsm)) == before


def test_a_node_graph_on_a_subset_gives_the_full_fits_pseudotime_of_those_cells():
    adata = _data()
    sks.tl.ddrtree(adata, n_centers=15)
    sks.tl.root(adata, "ddrtree", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "ddrtree")
    mask = _not_trunk(adata)
    subset = adata[mask].copy()
    del subset.obs["ddrtree_pseudotime"]
    sks.tl.pseudotime(subset, "ddrtree")
    np.testing.assert_allclose(subset.obs["ddrtree_pseudotime"], adata.obs["ddrtree_pseudotime"][mask])
    sks.tl.root(subset, "ddrtree", group=("true_branch", "trunk"))  # the subset's own cells choose the root


@pytest.mark.parametrize("as_view", [True, False])
def test_a_cell_graph_on_a_subset_asks_for_a_refit(as_view):
    adata = _data()
    _fit(adata, "mpme", "mpme")
    sks.tl.root(adata, "mpme", group=("true_branch", "trunk"))
    subset = adata[_not_trunk(adata)]
    subset = subset if as_view else subset.copy()
    for call in (
        lambda: sks.tl.root(subset, "mpme", group=("true_branch", "trunk")),
        lambda: sks.tl.pseudotime(subset, "mpme"),
    ):
        with pytest.raises(ValueError, match=r"fitted on 120 cells.*\.copy\(\); sks\.tl\.mpme"):
            call()
    assert "mpme_pseudotime" not in adata.obs and "segments" not in adata.uns["mpme"]
    # the cells kept in the same number (e.g. a gene subset) are still the graph's nodes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", anndata.ImplicitModificationWarning)
        sks.tl.pseudotime(adata[:, :3], "mpme")


# 2. keys h5ad cannot store


@pytest.mark.parametrize("key", ["a/b", "/", ".", "..", "a\x00b"])
@pytest.mark.parametrize("method", LEARNERS)
def test_keys_that_h5ad_cannot_store_are_refused_up_front(method, key):
    adata = _data(60)
    before = sorted(adata.uns), sorted(adata.obsm)
    with pytest.raises(ValueError, match="cannot be stored in an .h5ad"):
        getattr(sks.tl, method)(adata, key_added=key)
    assert (sorted(adata.uns), sorted(adata.obsm)) == before


def test_tools_that_name_their_results_refuse_them_too(branching_fitted):
    with pytest.raises(ValueError, match="cannot be stored in an .h5ad"):
        sks.tl.association_test(branching_fitted.copy(), "ddrtree", key_added="x/y")


# 3. a key reused by another learner


@pytest.mark.parametrize(
    ("first", "second", "attribute", "stale"),
    [
        ("ddrtree", "mpme", "obsm", "g_assignment"),
        ("esl", "ddrtree", "obsp", "g_connectivities"),
        ("esl", "ddrtree", "obs", "g_component"),
        ("fsl", "spl", "var", "g_weight"),
        ("fsl", "spl", "var", "g_selected"),
    ],
)
def test_a_second_learner_under_one_key_removes_the_first_ones_fields(first, second, attribute, stale):
    adata = _data()
    _fit(adata, first, "g")
    assert stale in getattr(adata, attribute)
    _fit(adata, second, "g")
    assert stale not in getattr(adata, attribute)
    assert adata.uns["g"]["method"] == second and is_cell_graph(adata, "g") == (second in ("mpme", "spl"))


def test_ddrtree_then_mpme_under_one_key_then_root():
    adata = _data()
    _fit(adata, "ddrtree", "g")
    _fit(adata, "mpme", "g")
    sks.tl.root(adata, "g", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "g")
    assert np.isfinite(adata.obs["g_pseudotime"]).any()


def test_a_new_fit_keeps_the_representation_it_reads_even_when_named_like_the_old_result():
    adata = _data()
    _fit(adata, "mpme", "g")
    sks.tl.rpg(adata, use_rep="X_g", n_nodes=10, key_added="g")  # the tree lives in the old embedding
    assert "X_g" in adata.obsm and "g_connectivities" not in adata.obsp
    sks.tl.root(adata, "g", group=("true_branch", "trunk"))
    sks.tl.pseudotime(adata, "g")


# 4. duplicated cell names


def test_cells_are_not_looked_up_by_a_duplicated_name(branching_fitted):
    adata = branching_fitted.copy()
    names = adata.obs_names.to_numpy().copy()
    names[1] = names[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # anndata warns about the duplicates
        adata.obs_names = names
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.root(adata, "ddrtree", cell=names[0])
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.path(adata, "ddrtree", 0, 1)
    with pytest.raises(ValueError, match="obs_names are not unique"):
        sks.tl.trends(adata, "ddrtree", path=(0, 1))
    sks.tl.root(adata, "ddrtree", cell=5)  # a position is unambiguous


# 5. the command line writes atomically


@pytest.fixture(scope="module")
def small_h5ad(tmp_path_factory):
    path = tmp_path_factory.mktemp("input") / "in.h5ad"
    _data(150).write_h5ad(path)
    return path


def test_a_failed_write_keeps_the_earlier_output(tmp_path, small_h5ad, monkeypatch, capsys):
    out = tmp_path / "out.h5ad"
    out.write_bytes(b"the earlier result")

    def disk_full(self, filename, **kwargs):
        with open(filename, "wb") as handle:
            handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(anndata.AnnData, "write_h5ad", disk_full)
    assert main(["fit", str(small_h5ad), "--method", "rpg", "--param", "n_nodes=10", "--out", str(out)]) == 2
    assert "No space left" in capsys.readouterr().err
    assert out.read_bytes() == b"the earlier result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5ad"]


def test_a_successful_write_replaces_the_output_with_the_usual_permissions(tmp_path, small_h5ad, capsys):
    out = tmp_path / "out.h5ad"
    out.write_bytes(b"the earlier result")
    assert main(["fit", str(small_h5ad), "--method", "rpg", "--param", "n_nodes=10", "--out", str(out)]) == 0
    assert anndata.read_h5ad(out).uns["rpg"]["method"] == "rpg"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.h5ad"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


# 6. the command line checks everything before fitting


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [
        (["--root-group", "no_such_column=trunk"], "no obs column 'no_such_column'"),
        (["--root-group", "true_branch=no_such_value"], "no cell has true_branch = 'no_such_value'"),
        (["--param", "no_such_parameter=1"], "ddrtree has no parameter 'no_such_parameter'"),
        (["--param", "use_rep=X"], "use --use-rep instead"),
        (["--param", "maxiter=5"], "use --maxiter instead"),
        (["--param", "sigma"], "NAME=VALUE"),
        (["--param", "gamma=1", "--param", "gamma=2"], "more than once"),
        (["--plot", "tree.notanimage"], "image file name"),
        (["--use-rep", "X_umap"], "--use-rep X_umap: the input has no obsm['X_umap']"),
    ],
)
def test_bad_arguments_fail_before_the_fit(tmp_path, small_h5ad, monkeypatch, capsys, extra, fragment):
    @functools.wraps(sks.tl.ddrtree)  # keeps the signature that --param names are checked against
    def never(*args, **kwargs):
        raise AssertionError("fitted despite a bad argument")

    monkeypatch.setattr(sks.tl, "ddrtree", never)
    monkeypatch.chdir(tmp_path)
    assert main(["fit", str(small_h5ad), "--out", str(tmp_path / "out.h5ad"), *extra]) == 2
    err = capsys.readouterr().err
    assert fragment in err and "use_rep=" not in err
    assert not (tmp_path / "out.h5ad").exists()


@pytest.mark.parametrize(
    ("extra", "fragment"),
    [(["--maxiter", "0"], "--maxiter: must be at least 1"), (["--method", "tsne"], "invalid choice: 'tsne'")],
)
def test_malformed_options_are_reported_by_argparse(tmp_path, small_h5ad, capsys, extra, fragment):
    assert main(["fit", str(small_h5ad), "--out", str(tmp_path / "out.h5ad"), *extra]) == 2
    assert fragment in capsys.readouterr().err


def test_an_output_under_a_file_fails_before_the_fit(tmp_path, small_h5ad, monkeypatch, capsys):
    monkeypatch.setattr(sks.tl, "ddrtree", lambda *args, **kwargs: pytest.fail("fitted despite a bad argument"))
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    assert main(["fit", str(small_h5ad), "--out", str(blocker / "out.h5ad")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["fit", str(small_h5ad), "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_maxiter_and_params_reach_the_learner(tmp_path, small_h5ad, capsys):
    out = tmp_path / "out.h5ad"
    code = main(["fit", str(small_h5ad), "--method", "rpg", "--out", str(out), "--maxiter", "3",
                 "--param", "n_nodes=12", "--param", "prune=false", "--root-group", "true_branch=trunk"])
    assert code == 0
    params = anndata.read_h5ad(out).uns["rpg"]["params"]
    assert (params["maxiter"], params["n_nodes"], params["prune"]) == (3, 12, False)


def test_param_values_are_converted():
    assert [_value(text) for text in ("3", "-1.5", "1e-3", "inf", "True", "false", "None", "kpca")] == [
        3, -1.5, 1e-3, float("inf"), True, False, None, "kpca",
    ]


def test_version_and_help(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"scskeleton {sks.__version__}"
    assert main(["fit", "--help"]) == 0
    printed = capsys.readouterr().out
    assert all(f"{method}:" in printed for method in ("ddrtree", "rpg", "rpg_l1", "mpme", "spl", "esl"))


def test_help_imports_neither_scanpy_nor_the_tools():
    # what makes --help slow is the import of scanpy (seconds), so check that it is not imported
    code = (
        "import sys; from scskeleton.cli import main; assert main(['fit', '--help']) == 0; "
        "heavy = [m for m in ('scanpy', 'anndata', 'scskeleton.tl', 'matplotlib') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    result = subprocess.run([sys.executable, "-m", "scskeleton", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.startswith("scskeleton ")


def test_raw_counts_get_a_normalisation_hint(tmp_path, capsys):
    rng = np.random.default_rng(0)
    counts = anndata.AnnData(sparse.csr_matrix(rng.poisson(2.0, size=(150, 30)).astype(np.float32)))
    counts.write_h5ad(tmp_path / "counts.h5ad")
    assert main(["fit", str(tmp_path / "counts.h5ad"), "--method", "rpg", "--param", "n_nodes=10",
                 "--out", str(tmp_path / "out.h5ad")]) == 0
    err = capsys.readouterr().err
    assert "raw counts" in err and "without normalisation" in err and "sc.pp.normalize_total" in err

    normalised = counts.copy()
    sc.pp.normalize_total(normalised)
    sc.pp.log1p(normalised)
    normalised.write_h5ad(tmp_path / "normalised.h5ad")
    assert main(["fit", str(tmp_path / "normalised.h5ad"), "--method", "rpg", "--param", "n_nodes=10",
                 "--out", str(tmp_path / "out.h5ad")]) == 0
    err = capsys.readouterr().err
    assert "computing" in err and "raw counts" not in err
