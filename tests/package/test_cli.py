import re
import shutil
import subprocess

import anndata
import numpy as np
import PIL.Image
import pytest
from scipy.stats import spearmanr

import scskeleton as sks
from scskeleton._testing import distinct_colours
from scskeleton.cli import main


def _earliest_group(adata, key, column="true_branch"):
    """The value of ``column`` whose cells have the smallest median pseudotime."""
    return adata.obs.groupby(column, observed=True)[f"{key}_pseudotime"].median().idxmin()


def test_demo_writes_outputs_and_summary(tmp_path, capsys):
    import matplotlib

    with matplotlib.rc_context({"savefig.dpi": 72}):  # a low resolution in matplotlibrc
        assert main(["demo", "--out", str(tmp_path), "--n-cells", "600"]) == 0
    printed = capsys.readouterr().out
    adata = anndata.read_h5ad(tmp_path / "demo.h5ad")
    entry = adata.uns["rpg"]
    # the file holds a usable result, not only the keys: every cell timed, in the true order
    times = adata.obs["rpg_pseudotime"].to_numpy()
    assert np.isfinite(times).all()
    rho = spearmanr(times, adata.obs["true_pseudotime"])[0]
    assert rho >= 0.9
    # the summary reports what was written, not numbers of its own
    assert re.search(rf"pseudotime Spearman\s+{rho:.3f} ", printed)
    assert re.search(rf"branch points\s+{len(entry['branch_points'])} \(true: 2\)", printed)
    support = np.asarray(entry["branch_support"]["branch_point_support"])
    assert support.shape == (len(entry["branch_points"]),) and np.all((support >= 0) & (support <= 1))
    assert re.search(r"branch support\s+" + ", ".join(f"{v:.2f}" for v in support), printed)
    assert distinct_colours(tmp_path / "tree.png") > 50  # a drawn tree, not a blank canvas
    # ready for print: 150 dpi (it was matplotlib's 100), whatever matplotlibrc says
    assert min(PIL.Image.open(tmp_path / "tree.png").info["dpi"]) >= 149.9


def test_fit_computes_pca_roots_and_plots(tmp_path, capsys):
    source = sks.datasets.branching(400, n_leaves=2, random_state=0)
    source.write_h5ad(tmp_path / "in.h5ad")
    out, png = tmp_path / "out.h5ad", tmp_path / "tree.png"
    code = main(["fit", str(tmp_path / "in.h5ad"), "--out", str(out), "--root-group", "true_branch=trunk", "--plot", str(png)])
    assert code == 0
    fitted = anndata.read_h5ad(out)
    assert fitted.obsm["X_pca"].shape[0] == fitted.n_obs
    times = fitted.obs["ddrtree_pseudotime"].to_numpy()
    assert np.isfinite(times).all()
    # --root-group took effect: the trunk starts the trajectory and the order is the true one
    assert _earliest_group(fitted, "ddrtree") == "trunk"
    assert spearmanr(times, fitted.obs["true_pseudotime"])[0] >= 0.95
    assert distinct_colours(png) > 50
    assert min(PIL.Image.open(png).info["dpi"]) >= 149.9

    # and its VALUE is used, not only its presence: rooted in a branch, that branch comes first
    other = tmp_path / "other.h5ad"
    assert main(["fit", str(tmp_path / "in.h5ad"), "--out", str(other), "--root-group", "true_branch=branch_1"]) == 0
    assert _earliest_group(anndata.read_h5ad(other), "ddrtree") == "branch_1"


def test_fit_says_when_it_computes_components_from_raw_counts(tmp_path, capsys):
    counts = sks.datasets.simulate_trajectory(300, n_fates=2, n_genes=200, random_state=0)
    counts.write_h5ad(tmp_path / "counts.h5ad")
    assert main(["fit", str(tmp_path / "counts.h5ad"), "--out", str(tmp_path / "out.h5ad")]) == 0
    assert "looks like raw counts" in capsys.readouterr().err
    logged = sks.datasets.branching(300, n_leaves=2, random_state=0)
    logged.write_h5ad(tmp_path / "logged.h5ad")
    assert main(["fit", str(tmp_path / "logged.h5ad"), "--out", str(tmp_path / "out2.h5ad")]) == 0
    assert "raw counts" not in capsys.readouterr().err


#: Spearman against the true pseudotime on 150 cells: the cell graph of MPME follows the tree
#: closely (0.91 here); the ℓ1 graph holds small loops and side branches on so few cells (0.59).
OTHER_LEARNERS = {"rpg_l1": 0.5, "mpme": 0.85}


@pytest.mark.parametrize("method", sorted(OTHER_LEARNERS))
def test_fit_other_learners(tmp_path, capsys, method):
    source = sks.datasets.branching(150, n_leaves=2, random_state=0)
    source.write_h5ad(tmp_path / "in.h5ad")
    out, png = tmp_path / "out.h5ad", tmp_path / "graph.png"
    code = main(["fit", str(tmp_path / "in.h5ad"), "--method", method, "--out", str(out),
                 "--root-group", "true_branch=trunk", "--plot", str(png)])
    assert code == 0 and f"{method} on X_pca" in capsys.readouterr().out
    fitted = anndata.read_h5ad(out)
    assert fitted.uns[method]["method"] == method
    times = fitted.obs[f"{method}_pseudotime"].to_numpy()
    assert np.isfinite(times).all()  # one connected graph: every cell is reached from the root
    assert _earliest_group(fitted, method) == "trunk"
    assert spearmanr(times, fitted.obs["true_pseudotime"])[0] >= OTHER_LEARNERS[method]
    assert distinct_colours(png) > 50


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
    # the entry point of pyproject.toml, as a user types it; `python -m scskeleton.cli` would
    # pass even with the [project.scripts] entry missing or pointing at the wrong function
    script = shutil.which("scskeleton")
    if script is None:
        pytest.skip("the scskeleton console script is not installed (pip install -e .)")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "demo" in result.stdout and "fit" in result.stdout
    version = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.strip() == f"scskeleton {sks.__version__}"
