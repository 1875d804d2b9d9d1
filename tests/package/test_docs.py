"""The documentation keeps its shape: Background pages a reader finishes, docstrings that point
only to what ships with the package, and every page reachable from the index."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SOURCES = sorted((ROOT / "src" / "scskeleton").rglob("*.py"))
BACKGROUND = sorted((DOCS / "methods").glob("*.md"))
#: The issue's bound on a Background page; pages aim at about 250 lines.
MAX_BACKGROUND_LINES = 300


@pytest.mark.parametrize("path", BACKGROUND, ids=[p.stem for p in BACKGROUND])
def test_a_background_page_is_short(path):
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_BACKGROUND_LINES


def _docstrings(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return [(getattr(n, "lineno", 1), doc) for n in nodes if (doc := ast.get_docstring(n))]


def test_no_docstring_refers_to_files_outside_the_package():
    outside = re.compile(r"shared/|docs/methods|DESIGN\.md|benchmarks/\w+\.py|tests/(\w+/)?test_\w+\.py")
    found = [f"{path.relative_to(ROOT)}:{line}" for path in SOURCES for line, doc in _docstrings(path)
             if outside.search(doc)]
    assert found == []


def test_every_page_is_in_the_index():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    toctrees = "\n".join(re.findall(r"```\{toctree\}(.*?)```", index, flags=re.S))
    pages = [p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*")
             if p.suffix in (".md", ".ipynb") and "_build" not in p.parts and p.name != "index.md"
             and ".ipynb_checkpoints" not in p.parts and p.parent.name != "generated"]
    assert pages and [p for p in pages if p not in toctrees] == []


def test_the_index_links_lead_somewhere():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    targets = [t for t in re.findall(r"\]\(([^)#\s]+)\)", index) if not t.startswith("http")]
    assert targets and [t for t in targets if not (DOCS / t).exists()] == []
