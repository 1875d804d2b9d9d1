"""Threads for the learners' BLAS, LAPACK and OpenMP calls.

Two rules, applied by :func:`~scskeleton._anndata.progress.solver_run` around
every fit:

* Small problems run with one thread (:func:`dense_solver_threads`,
  :func:`node_solver_threads`): a second thread only adds its start-up to
  every call.
* Fits on dask arrays run one BLAS thread per task (:func:`chunked_solver_threads`).
* Larger problems use the cores that other processes leave free
  (:func:`free_cores`). OpenBLAS and OpenMP threads wait for each other by
  spinning; when other processes hold the cores, a thread that is not
  scheduled keeps its partners spinning, and a fit on a shared 2-core machine
  ran 12× slower than idle where its fair share would be 2–3×.

``SCSKELETON_NUM_THREADS`` (an integer ≥ 1) overrides both rules.
"""

from __future__ import annotations

import os
import statistics
import time
from contextlib import AbstractContextManager, nullcontext

from threadpoolctl import threadpool_limits

#: Environment variable that fixes the number of threads of every fit.
THREADS_VARIABLE = "SCSKELETON_NUM_THREADS"

#: Dense solvers on at most this many cells run BLAS and LAPACK with one thread.
SINGLE_THREAD_CELLS = 1_000


def dense_solver_threads(n_cells: int) -> AbstractContextManager:
    """One BLAS thread for dense N × N solvers on up to ``SINGLE_THREAD_CELLS`` cells.

    These solvers make thousands of factorisations of moderate size. On the
    project's 2-core machine a second thread made them 1.2–7× slower even
    when the machine was idle (N = 300–1,000; equal at N = 2,000), and 10–50×
    slower when other processes held the cores, because every call waits for
    its threads to be scheduled. Larger problems keep the caller's threading.
    """
    return _limit(1 if n_cells <= SINGLE_THREAD_CELLS else None)


#: Node-graph fits (cells × nodes) below this size run with one BLAS thread.
SINGLE_THREAD_SIZE = 5_000_000


def node_solver_threads(size: int) -> AbstractContextManager:
    """One BLAS thread for node-graph learners (DDRTree, RPG) on small problems.

    Their iterations solve K × K systems (K ≈ 50–150) and multiply N × K blocks;
    below ``SINGLE_THREAD_SIZE`` cells × nodes a second thread only adds its
    start-up to every call: ``tl.rpg`` on 1,000 cells × 100 nodes took 1.58 s
    with two threads and 0.42 s with one on the project's 2-core machine.
    """
    return _limit(1 if size < SINGLE_THREAD_SIZE else None)


def chunked_solver_threads() -> AbstractContextManager:
    """One BLAS thread per task for fits on dask arrays: dask runs the chunks in
    parallel (a thread or a worker per core), and BLAS threads of their own on
    top would compete for the same cores. A 60,000-cell DDRTree on dask's
    threaded scheduler took 7.1 s with the libraries' default threads and
    1.0 s with one (2-core machine). ``dask.distributed`` workers already
    start with one thread per BLAS library."""
    return _limit(1)


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def free_cores(*, samples: int = 5, interval: float = 0.002) -> int:
    """Usable cores minus the processes running elsewhere right now (at least 1).

    Linux's ``/proc/loadavg`` counts the runnable tasks at this instant, this
    process included; the median of a few readings ignores a task that is
    runnable for a moment only. Elsewhere the one-minute load average stands in.
    """
    cores = usable_cores()
    try:
        counts = []
        for index in range(samples):
            with open("/proc/loadavg") as handle:
                counts.append(int(handle.read().split()[3].split("/")[0]))
            if index + 1 < samples:
                time.sleep(interval)
        others = statistics.median(counts) - 1
    except (OSError, ValueError, IndexError):
        try:
            others = os.getloadavg()[0]
        except OSError:
            return cores
    return int(max(1, min(cores, round(cores - others))))


def _limit(threads: int | None) -> AbstractContextManager:
    """Run with ``threads`` threads, or with the free cores when ``None``; the
    environment override wins."""
    override = os.environ.get(THREADS_VARIABLE)
    if override:
        try:
            threads = int(override)
        except ValueError:
            raise ValueError(f"{THREADS_VARIABLE} must be a positive integer; got {override!r}.") from None
        if threads < 1:
            raise ValueError(f"{THREADS_VARIABLE} must be a positive integer; got {override!r}.")
    elif threads is None:
        threads = free_cores()
        if threads >= usable_cores():
            return nullcontext()  # an idle machine: the libraries' own defaults
    return threadpool_limits(limits=threads)
