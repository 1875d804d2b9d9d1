"""Slowdown of every learner on a busy machine: wall time with two busy-loop processes
running beside the fit, against the same fit on an idle machine.

Users share their laptops and cluster nodes; a fit should then take about its fair
share of the cores, not collapse. Each fit runs in a fresh subprocess (data
generation is not timed), first idle, then with ``--busy`` processes that spin on
the CPU (``while True: pass``) for the whole run. The target on 2 cores with two
busy processes is a slowdown of at most 3×.

Usage::

    python benchmarks/under_load.py                        # every learner, default sizes
    python benchmarks/under_load.py --cases ddrtree:100000 mpme:1000
    python benchmarks/under_load.py --src /path/to/other/checkout/src   # compare a version
    python benchmarks/under_load.py --repeats 3            # median of 3 runs per mode
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

DEFAULT_CASES = (
    "ddrtree:10000", "ddrtree:100000", "rpg:10000", "rpg:100000", "rpg_l1:10000",
    "mpme:1000", "spl:1000", "esl:1000", "fsl:400", "convex_embedding:300",
)


def run_one(method: str, n_cells: int) -> float:
    import numpy as np
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    if method == "fsl":
        adata = sks.datasets.noisy_moons(n_cells, random_state=0)
        call = lambda: sks.tl.fsl(adata, n_features=2)  # noqa: E731
    elif method == "convex_embedding":
        adata = sks.datasets.swiss_roll(n_cells, random_state=0)
        call = lambda: sks.tl.convex_embedding(adata)  # noqa: E731
    else:
        adata = sks.datasets.branching(n_cells, n_leaves=3, n_dims=50, random_state=0)
        adata.obsm["X_pca"] = np.asarray(adata.X, dtype=np.float64)
        adata.X = None
        call = lambda: getattr(sks.tl, method)(adata)  # noqa: E731
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def timed(case: str, src: str | None) -> float:
    env = dict(os.environ)
    if src:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    method, n_cells = case.split(":")
    out = subprocess.run([sys.executable, __file__, "--one", method, n_cells], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


def busy(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), help="METHOD:N_CELLS")
    parser.add_argument("--busy", type=int, default=2, help="busy-loop processes beside the fit (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per mode; the median is reported")
    parser.add_argument("--src", help="import scskeleton from this source folder instead of the installed one")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # internal: one timed fit
    args = parser.parse_args()
    if args.one:
        print(json.dumps({"seconds": run_one(args.one[0], int(args.one[1]))}))
        return

    print(f"{os.cpu_count()} CPUs, {args.busy} busy processes, median of {args.repeats}"
          + (f", scskeleton from {args.src}" if args.src else ""))
    print("\n| learner | cells | idle (s) | busy (s) | slowdown |\n|---|---:|---:|---:|---:|")
    for case in args.cases:
        idle = statistics.median(timed(case, args.src) for _ in range(args.repeats))
        loops = busy(args.busy)
        try:
            time.sleep(1.0)  # let the scheduler see them
            loaded = statistics.median(timed(case, args.src) for _ in range(args.repeats))
        finally:
            for loop in loops:
                loop.kill()
        method, n_cells = case.split(":")
        print(f"| `tl.{method}` | {int(n_cells):,} | {idle:.2f} | {loaded:.2f} | {loaded / idle:.1f}× |", flush=True)


if __name__ == "__main__":
    main()
