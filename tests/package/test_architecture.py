"""The layout holds: rooms of a readable size, no private name used across modules, one learner
registry, and ``pl``, ``pp`` and ``datasets`` beside ``tl``, not above it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "scskeleton"
SOURCES = sorted(PACKAGE.rglob("*.py"))
MAX_FILE_LINES = 700
MAX_FUNCTION_CODE_LINES = 120


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path):
    """Every ``from X import name`` of ``path`` as (absolute module, name, line)."""
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                yield module, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno


def code_lines(source: list[str], node: ast.FunctionDef) -> int:
    """Lines of a function that hold code: not blank, not a comment, not its docstring."""
    lines = source[node.lineno - 1: node.end_lineno]
    docstring = 0
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        docstring = first.end_lineno - first.lineno + 1
    return sum(1 for line in lines if line.strip() and not line.strip().startswith("#")) - docstring


def test_no_source_file_is_over_700_lines():
    long = {str(p.relative_to(PACKAGE)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert not long, f"split these into modules named for what they do: {long}"


def test_no_function_has_over_120_lines_of_code():
    long = {}
    for path in SOURCES:
        text = path.read_text()
        source = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if (n := code_lines(source, node)) > MAX_FUNCTION_CODE_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.name}"] = n
    assert not long, f"break these into named steps: {long}"


def test_no_private_name_is_imported_from_another_module():
    private = [f"{path.relative_to(PACKAGE)}:{line} imports {name} from {module}"
               for path in SOURCES for module, name, line in imports(path)
               if name and name.startswith("_") and not name.startswith("__")]
    assert not private, "give shared helpers a public name where they are defined:\n" + "\n".join(private)


@pytest.mark.parametrize("wing", ["pl", "pp", "datasets", "_anndata", "_core", "_dask"])
def test_a_wing_beside_tl_does_not_import_from_it(wing):
    found = [f"{path.relative_to(PACKAGE)}:{line} imports {module}"
             for path in sorted((PACKAGE / wing).rglob("*.py")) for module, _, line in imports(path)
             if module == "scskeleton.tl" or module.startswith("scskeleton.tl.")]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("wing", ["_core", "_dask", "_anndata"])
def test_the_foundations_do_not_import_the_rooms_above_them(wing):
    above = ("scskeleton.pl", "scskeleton.pp", "scskeleton.datasets", "scskeleton.cli", "scskeleton._testing")
    found = [f"{path.relative_to(PACKAGE)}:{line} imports {module}"
             for path in sorted((PACKAGE / wing).rglob("*.py")) for module, _, line in imports(path)
             if module.startswith(above) or (wing == "_core" and module.startswith("scskeleton._anndata"))]
    assert not found, "\n".join(found)


def test_the_learners_are_listed_in_one_place():
    from scskeleton._anndata.learners import LEARNERS

    names = set(LEARNERS)
    registry = PACKAGE / "_anndata" / "learners.py"
    lists = []
    for path in SOURCES:
        if path == registry:
            continue
        tree = ast.parse(path.read_text())
        exported = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)}
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)) and id(node) not in exported:
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                spelled = {item.value for item in items if isinstance(item, ast.Constant)} & names
                if len(spelled) >= 3:
                    lists.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {sorted(spelled)}")
    assert not lists, "read the learners from scskeleton._anndata.learners.LEARNERS:\n" + "\n".join(lists)


def test_plotting_generating_data_or_preparing_counts_loads_no_tool():
    script = ("import json, sys, scskeleton.pl, scskeleton.pp, scskeleton.datasets; "
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scskeleton.tl'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                                       check=True).stdout)
    assert loaded == []
