"""The command line fails early and never leaves a broken output file: every argument is checked
before the fit, and the output is replaced only once it is written whole."""

import functools
import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import scanpy as sc
import scskeleton as sks
from scipy import sparse
from scskeleton.cli import _value, main

import anndata


def _data(n_cells=120, random_state=0):
    adata = sks.datasets.branching(n_cells, n_leaves=2, n_dims=5, random_state=random_state)
    sc.pp.pca(adata, n_comps=4)
    return adata


# the command line writes atomically


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


# the command line checks everything before fitting


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
