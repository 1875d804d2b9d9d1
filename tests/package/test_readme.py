"""The README and the how-to guides say what the code does: their examples run as written, print no
warning, and every public function is in the API reference."""

from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

import matplotlib
import pytest
import scanpy as sc

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
HOWTO = sorted((ROOT / "docs" / "howto").glob("*.md"))
#: Blocks that talk to a cluster or read the user's files show how, and are not run here.
NEEDS_OUTSIDE = ("Client(", "read_zarr(", "read_h5ad(")
#: The README's promise: a short page.
MAX_README_LINES = 120


def _blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M)


def _run_quietly(path: Path) -> tuple[dict, str, list[str]]:
    """Run every runnable block of ``path`` in one namespace; return it, scanpy's log and the warnings raised."""
    namespace: dict = {}
    log, previous, verbosity = io.StringIO(), sc.settings.logfile, sc.settings.verbosity
    sc.settings.logfile, sc.settings.verbosity = log, 1  # warnings and up, as a notebook shows them
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for block in _blocks(path):
                if any(marker in block for marker in NEEDS_OUTSIDE):
                    continue
                exec(compile(block, str(path), "exec"), namespace)  # later blocks reuse imports
                plt.close("all")
    finally:
        sc.settings.logfile, sc.settings.verbosity = previous, verbosity
    ours = [f"{w.category.__name__}: {w.message}" for w in caught if "scskeleton" in str(w.filename)]
    return namespace, log.getvalue(), ours


def test_the_readme_is_short_and_has_a_runnable_quick_start():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES
    quick_start = [b for b in _blocks(README) if "sks.tl" in b]
    assert len(quick_start) == 1
    assert sum(1 for line in quick_start[0].splitlines() if line.strip()) <= 12


def test_the_readme_quick_start_runs_and_prints_no_warning():
    namespace, log, ours = _run_quietly(README)
    assert "WARNING" not in log, log
    assert ours == []
    entry = namespace["adata"].uns["rpg"]
    assert entry["branch_points"].size >= 1
    assert "rpg_fork_test_qval" in namespace["adata"].var


@pytest.mark.parametrize("path", HOWTO, ids=[p.stem for p in HOWTO])
def test_every_how_to_guide_runs_as_written(path):
    if not any(not any(m in b for m in NEEDS_OUTSIDE) for b in _blocks(path)):
        pytest.skip(f"{path.name} has no block to run here")
    namespace, log, ours = _run_quietly(path)
    assert "WARNING" not in log, log
    assert ours == []
    if path.stem == "preprocess":  # three fates of the generator: two forks
        assert namespace["adata"].uns["ddrtree"]["branch_points"].size == 2


def test_the_readmes_links_lead_somewhere():
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text) + re.findall(r'src="([^"]+)"', text)
    local = [t for t in targets if not t.startswith("http")]
    assert local and [t for t in local if not (ROOT / t).exists()] == []


def test_every_public_function_is_in_the_api_reference():
    import scskeleton as sks

    api = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    public = [(module, name) for module in ("tl", "pp", "pl", "datasets")
              for name in dir(getattr(sks, module)) if not name.startswith("_")
              and callable(getattr(getattr(sks, module), name))]
    assert len(public) > 40
    assert [f"{m}.{n}" for m, n in public if f"   {m}.{n}\n" not in api] == []
