import subprocess
import sys

import anndata
import pytest

import scskeleton as sks
from scskeleton.cli import main


def test_demo_writes_outputs_and_summary(tmp_path, capsys):
    assert main(["demo", "--out", str(tmp_path), "--n-cells", "600"]) == 0
    printed = capsys.readouterr().out
    assert "branch points" in printed and "Spearman" in printed and "branch support" in printed
    adata = anndata.read_h5ad(tmp_path / "demo.h5ad")
    assert "rpg_pseudotime" in adata.obs and "branch_support" in adata.uns["rpg"]
    assert (tmp_path / "tree.png").stat().st_size > 0


def test_fit_computes_pca_roots_and_plots(tmp_path, capsys):
    source = sks.datasets.branching(400, n_leaves=2, random_state=0)
    source.write_h5ad(tmp_path / "in.h5ad")
    out, png = tmp_path / "out.h5ad", tmp_path / "tree.png"
    code = main(["fit", str(tmp_path / "in.h5ad"), "--out", str(out), "--root-group", "true_branch=trunk", "--plot", str(png)])
    assert code == 0
    fitted = anndata.read_h5ad(out)
    assert "X_pca" in fitted.obsm and "ddrtree_pseudotime" in fitted.obs
    assert png.stat().st_size > 0


@pytest.mark.parametrize("method", ["rpg_l1", "mpme"])
def test_fit_other_learners(tmp_path, capsys, method):
    source = sks.datasets.branching(150, n_leaves=2, random_state=0)
    source.write_h5ad(tmp_path / "in.h5ad")
    out, png = tmp_path / "out.h5ad", tmp_path / "graph.png"
    code = main(["fit", str(tmp_path / "in.h5ad"), "--method", method, "--out", str(out),
                 "--root-group", "true_branch=trunk", "--plot", str(png)])
    assert code == 0 and f"{method} on X_pca" in capsys.readouterr().out
    fitted = anndata.read_h5ad(out)
    assert fitted.obs[f"{method}_pseudotime"].notna().any()
    assert png.stat().st_size > 0


@pytest.mark.parametrize(
    "make_input, extra, fragment",
    [
        (None, [], "does not exist"),
        (lambda p: p.write_text("not an h5ad file"), [], "cannot read"),
        ("valid", ["--root-group", "no_equals_sign"], "KEY=VALUE"),
        ("valid", ["--use-rep", "X_umap"], "X_umap"),
    ],
)
def test_fit_reports_clear_errors(tmp_path, capsys, make_input, extra, fragment):
    path = tmp_path / "in.h5ad"
    if make_input == "valid":
        sks.datasets.branching(100, random_state=0).write_h5ad(path)
    elif make_input is not None:
        make_input(path)
    code = main(["fit", str(path), "--out", str(tmp_path / "out.h5ad"), *extra])
    assert code == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "out.h5ad").exists()


def test_console_script_is_installed():
    result = subprocess.run([sys.executable, "-m", "scskeleton.cli", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "demo" in result.stdout
