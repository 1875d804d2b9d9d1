"""Every tutorial notebook runs from top to bottom, printing no warning its narrative does not expect."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = sorted((Path(__file__).parents[2] / "docs" / "tutorials").glob("*.ipynb"))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_runs(path, tmp_path, monkeypatch):
    # the kernel is a new process: limit its BLAS threads as conftest does for this one
    for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        monkeypatch.setenv(variable, "1")
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    unexpected = _unexpected_messages(notebook)
    assert not unexpected, f"{path.name}: warnings or errors the narrative does not expect: {unexpected}"


#: A cell whose warning the narrative explains carries this tag (cell metadata "tags").
EXPECTED_TAG = "expect-warning"


def _unexpected_messages(notebook) -> list[tuple[int, str]]:
    """(cell index, text) of every warning or error a cell printed, unless the cell is tagged
    :data:`EXPECTED_TAG`. Progress bars (carriage-return updates) are not messages. scanpy's logging
    (``logg.warning``, which the package's warnings go through) writes to stdout in a kernel, so a
    stdout line that starts with "WARNING:" is one too."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "code" or EXPECTED_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                found.append((index, f"{output.get('ename')}: {output.get('evalue')}"))
            elif output.get("output_type") == "stream" and output.get("name") == "stderr":
                # a message glued after a bar's carriage return is a message still
                pieces = [BAR.sub("", p).strip() for p in re.split(r"[\r\n]+", output.get("text", ""))]
                found.extend((index, piece[:300]) for piece in pieces if piece)
            elif output.get("output_type") == "stream":
                found.extend((index, line.strip()[:300]) for line in output.get("text", "").splitlines()
                             if line.startswith("WARNING:"))
    return found


#: A tqdm progress-bar update, "fit:  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]", with its description.
BAR = re.compile(r"[^\r\n|]*\d+%\|[^|]*\|\s*\d+/\d+\s*\[[^\]]*\]")


def _is_progress(text: str) -> bool:
    return bool(BAR.search(text))


@pytest.mark.parametrize("path", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_no_progress_bar_is_stored_in_a_tutorial(path):
    """The committed notebook shows results, not progress bars (run with TQDM_DISABLE=1)."""
    notebook = nbformat.read(path, as_version=4)
    stored = [(i, piece[:80]) for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "stream"
              for piece in re.split(r"[\r\n]+", output.get("text", "")) if _is_progress(piece)]
    assert stored == []


def test_there_is_a_tutorial():
    assert TUTORIALS, "docs/tutorials/ holds no notebook"


def test_a_printed_warning_is_caught_unless_the_narrative_expects_it():
    notebook = nbformat.v4.new_notebook()
    warned = nbformat.v4.new_code_cell("x")
    warned.outputs = [nbformat.v4.new_output("stream", name="stderr", text="UserWarning: something odd\n")]
    expected = nbformat.v4.new_code_cell("y", metadata={"tags": [EXPECTED_TAG]})
    expected.outputs = list(warned.outputs)
    progress = nbformat.v4.new_code_cell("z")
    progress.outputs = [nbformat.v4.new_output("stream", name="stderr", text="\rfit:  50%|#####     | 1/2 [00:01<00:01, 1.0it/s]")]
    failed = nbformat.v4.new_code_cell("w")
    failed.outputs = [nbformat.v4.new_output("error", ename="ValueError", evalue="bad", traceback=[])]
    logged = nbformat.v4.new_code_cell("v")  # scanpy's logging writes to stdout in a kernel
    logged.outputs = [nbformat.v4.new_output("stream", name="stdout", text="flagged: 3\nWARNING: 5 edge(s) cross a gap\n")]
    printed = nbformat.v4.new_code_cell("u")
    printed.outputs = [nbformat.v4.new_output("stream", name="stdout", text="no WARNING: here, mid-line\n")]
    glued = nbformat.v4.new_code_cell("t")  # a bar that did not end its line, then a warning
    glued.outputs = [nbformat.v4.new_output(
        "stream", name="stderr", text="\rrefits: 100%|##########| 20/20 [00:03<00:00, 6.1it/s]WARNING: low support\n")]
    notebook.cells = [warned, expected, progress, failed, logged, printed, glued]
    assert _unexpected_messages(notebook) == [(0, "UserWarning: something odd"), (3, "ValueError: bad"),
                                              (4, "WARNING: 5 edge(s) cross a gap"), (6, "WARNING: low support")]
