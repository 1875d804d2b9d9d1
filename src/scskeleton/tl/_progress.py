"""Progress bars for iterative solvers (the solvers themselves never print)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

try:  # notebook progress bars need ipywidgets; without it tqdm.auto warns on import
    import ipywidgets  # noqa: F401
    from tqdm.auto import tqdm
except ImportError:
    from tqdm import tqdm

#: Problems with at least this many cells × nodes show a progress bar.
LONG_RUN = 5_000_000


@contextmanager
def iteration_progress(description: str, *, maxiter: int, size: int) -> Iterator[Callable[[int, float], None]]:
    """Yield a solver callback that advances a tqdm bar on long runs only."""
    bar = tqdm(total=maxiter, desc=description, disable=size < LONG_RUN, leave=False)

    def callback(iteration: int, objective: float) -> None:
        bar.update(1)
        bar.set_postfix(objective=f"{objective:.6g}", refresh=False)

    try:
        yield callback
    finally:
        bar.close()
