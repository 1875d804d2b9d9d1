"""Running a solver from an adapter: start and end log lines, progress bars, BLAS threads.

The solvers themselves never print; every adapter runs its solver inside
:func:`solver_run`, which logs the start, shows a tqdm bar on long runs, sets
the BLAS threads of dense solvers, and logs the end with what was written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from scanpy import logging as logg

from .threads import chunked_solver_threads, dense_solver_threads, node_solver_threads

try:  # notebook progress bars need ipywidgets; without it tqdm.auto warns on import
    import ipywidgets  # noqa: F401
    from tqdm.auto import tqdm
except ImportError:
    from tqdm import tqdm

#: Problems with at least this much work (cells × nodes, or the solver's own measure) show a progress bar.
LONG_RUN = 5_000_000


@dataclass(frozen=True)
class SolverRun:
    """The solver's progress ``callback(iteration, objective)`` and the start time of the run."""

    callback: Callable[[int, float], None]
    start: datetime

    def finished(self, summary: str, written: list[str]) -> None:
        """Log the end of the run: ``summary`` and the fields written (scanpy's deep log)."""
        logg.info(f"    finished ({summary})", time=self.start, deep="added\n    " + ", ".join(written))


#: Set inside :func:`quiet`: solvers show no progress bar and log nothing.
_QUIET = False


def bars_off() -> bool:
    """No progress bars inside :func:`quiet`, below scanpy's default verbosity
    (``sc.settings.verbosity = 0``: errors only), or with tqdm's own switch
    ``TQDM_DISABLE`` set (which an explicit ``disable=`` would otherwise override)."""
    import os

    import scanpy as sc

    return _QUIET or int(sc.settings.verbosity) < 1 or os.environ.get("TQDM_DISABLE", "") not in ("", "0", "False", "false")


def end_bar(bar) -> None:
    """Close ``bar`` and leave its last state on a line of its own, ended by a newline, so that the next
    log line starts at the beginning of a line. (A bar cleared on close, ``leave=False``, ends in a
    carriage return, and output captured as text, in Jupyter or pytest, glues the next line to it.)
    A run that stopped before its total (a solver that converged early) ends full, at the step it reached."""
    if not bar.disable and 0 < bar.n < (bar.total or 0):
        bar.total = bar.n
        container = getattr(bar, "container", None)
        if container is not None:  # a notebook widget keeps the total it was drawn with
            container.children[1].max = bar.n
    bar.close()


@contextmanager
def quiet() -> Iterator[None]:
    """Run learners without their log lines and progress bars (e.g. the refits of
    ``tl.branch_support``, which shows one bar over the rounds instead)."""
    global _QUIET
    import scanpy as sc

    previous, verbosity = _QUIET, sc.settings.verbosity
    _QUIET, sc.settings.verbosity = True, 0
    try:
        yield
    finally:
        _QUIET, sc.settings.verbosity = previous, verbosity


@contextmanager
def solver_run(
    name: str,
    *,
    use_rep: str,
    shape: tuple[int, int],
    maxiter: int,
    size: int,
    dense: bool = False,
    chunked: bool = False,
    detail: str = "",
    features: str = "features",
) -> Iterator[SolverRun]:
    """Log "computing {name}{detail} on {use_rep} (N cells × D features)", show a
    progress bar named ``name`` when ``size`` is at least :data:`LONG_RUN`, and limit
    the BLAS threads of small problems (:func:`dense_solver_threads` for ``dense``
    N × N solvers, :func:`chunked_solver_threads` for ``chunked`` fits on dask
    arrays, :func:`node_solver_threads` for the others)."""
    n_cells, n_features = shape
    start = logg.info(f"computing {name}{detail} on {use_rep} ({n_cells} cells × {n_features} {features})")
    bar = tqdm(total=maxiter, desc=name, disable=bars_off() or size < LONG_RUN, leave=True)

    def callback(iteration: int, objective: float) -> None:
        bar.update(1)
        bar.set_postfix(objective=f"{objective:.6g}", refresh=False)

    try:
        if chunked:
            threads = chunked_solver_threads()
        else:
            threads = dense_solver_threads(n_cells) if dense else node_solver_threads(size)
        with threads:
            yield SolverRun(callback=callback, start=start)
    finally:
        end_bar(bar)
