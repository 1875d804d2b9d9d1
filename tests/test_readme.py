"""The README's examples run as written (every Python block that needs no cluster or files)."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

README = Path(__file__).resolve().parents[1] / "README.md"
#: Blocks that talk to a cluster or read the user's files show how, and are not run here.
NEEDS_OUTSIDE = ("Client(", "read_zarr(", "read_h5ad(")


def _blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def test_readme_has_runnable_examples():
    runnable = [b for b in _blocks() if not any(marker in b for marker in NEEDS_OUTSIDE)]
    assert len(runnable) >= 2


@pytest.mark.filterwarnings("ignore")
def test_readme_examples_run_as_written():
    namespace: dict = {}
    ran = 0
    for block in _blocks():
        if any(marker in block for marker in NEEDS_OUTSIDE):
            continue
        exec(compile(block, str(README), "exec"), namespace)  # one namespace: later blocks reuse imports
        plt.close("all")
        ran += 1
    assert ran >= 2
    # the raw-counts example: three fates, two branch points, each supported
    entry = namespace["adata"].uns["ddrtree"]
    assert entry["branch_points"].size == 2
    assert (entry["branch_support"]["branch_point_support"] >= 0.9).all()
