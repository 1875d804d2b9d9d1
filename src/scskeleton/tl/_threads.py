"""BLAS threads for the dense cell-level solvers (MPME, SPL, ESL, FSL, convex embedding)."""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext

from threadpoolctl import threadpool_limits

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
    if n_cells <= SINGLE_THREAD_CELLS:
        return threadpool_limits(limits=1, user_api="blas")
    return nullcontext()


#: Node-graph fits (cells × nodes) below this size run with one BLAS thread.
SINGLE_THREAD_SIZE = 5_000_000


def node_solver_threads(size: int) -> AbstractContextManager:
    """One BLAS thread for node-graph learners (DDRTree, RPG) on small problems.

    Their iterations solve K × K systems (K ≈ 50–150) and multiply N × K blocks;
    below ``SINGLE_THREAD_SIZE`` cells × nodes a second thread only adds its
    start-up to every call: ``tl.rpg`` on 1,000 cells × 100 nodes took 1.58 s
    with two threads and 0.42 s with one on the project's 2-core machine.
    """
    if size < SINGLE_THREAD_SIZE:
        return threadpool_limits(limits=1, user_api="blas")
    return nullcontext()
