"""Thread policy of the learners: one thread for small problems, the free cores for large
ones, and SCSKELETON_NUM_THREADS overriding both."""

import subprocess
import sys

import pytest
from threadpoolctl import threadpool_info

from scskeleton._anndata import threads as _threads


def _blas_threads() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"}


def test_small_problems_run_one_thread():
    with _threads.dense_solver_threads(100):
        assert _blas_threads() == {1}
    with _threads.node_solver_threads(1000):
        assert _blas_threads() == {1}


def test_free_cores_is_between_one_and_the_usable_cores():
    assert 1 <= _threads.free_cores() <= _threads.usable_cores()


def test_busy_processes_take_cores_away():
    """Two busy loops on a machine of at most 2 usable cores leave one thread for the fit."""
    if _threads.usable_cores() > 2:
        pytest.skip("needs a machine of at most 2 usable cores")
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        import time

        time.sleep(0.5)
        assert _threads.free_cores() == 1
        with _threads.node_solver_threads(10**9):
            assert _blas_threads() == {1}
    finally:
        for loop in loops:
            loop.kill()


def test_environment_overrides_the_policy(monkeypatch):
    monkeypatch.setenv(_threads.THREADS_VARIABLE, "2")
    with _threads.dense_solver_threads(100):
        assert _blas_threads() == {2}
    monkeypatch.setenv(_threads.THREADS_VARIABLE, "zero")
    with pytest.raises(ValueError, match="SCSKELETON_NUM_THREADS"):
        _threads.node_solver_threads(10)
    monkeypatch.setenv(_threads.THREADS_VARIABLE, "0")
    with pytest.raises(ValueError, match="positive integer"):
        _threads.node_solver_threads(10)
