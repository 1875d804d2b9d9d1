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


def test_every_public_function_is_in_the_api_reference_and_the_readme():
    import scskeleton as sks

    api = (README.parent / "docs" / "api.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    public = [(module, name) for module in ("tl", "pp", "pl", "datasets")
              for name in dir(getattr(sks, module)) if not name.startswith("_")
              and callable(getattr(getattr(sks, module), name))]
    assert len(public) > 40
    assert [f"{m}.{n}" for m, n in public if f"   {m}.{n}\n" not in api] == []
    # the README names each as `tl.trends`, `sks.datasets.krumsiek11` or, in lists of one module, `spiral`
    assert [f"{m}.{n}" for m, n in public if f"{m}.{n}" not in readme and f"`{n}`" not in readme] == []
