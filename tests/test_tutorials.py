"""Every tutorial notebook runs from top to bottom."""

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).parents[1] / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_runs(path, tmp_path, monkeypatch):
    # the kernel is a new process: limit its BLAS threads as conftest does for this one
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()


def test_there_is_a_tutorial():
    assert TUTORIALS, "tutorials/ holds no notebook"
