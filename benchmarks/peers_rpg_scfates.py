"""Side-by-side speed of ``sks.tl.rpg`` and scFates' SimplePPT tree (the peer tool).

What is timed, per tool, is the whole "fit a tree → choose the root → compute
pseudotime" step on the same cells:

* scskeleton: ``sks.tl.rpg(a)`` + ``sks.tl.root(a, "rpg", obs_min=TIME)`` +
  ``sks.tl.pseudotime(a, "rpg")``, all at their defaults.
* scFates: ``scf.tl.tree(a, method="ppt", use_rep="X_pca", ...)`` +
  ``scf.tl.root(a, TIME, tips_only=True, min_val=True)`` (scFates' own
  automatic root: the tip whose soft-assigned cells have the lowest mean
  ``TIME``) + ``scf.tl.pseudotime(a, n_jobs=1, n_map=1)``.

scFates is never imported here and never installed in the main environment: it
lives in its own virtual environment outside the repository, e.g.::

    python3 -m venv /work/peers/scfates-venv
    /work/peers/scfates-venv/bin/pip install scFates

and this script runs it with ``--scfates-python`` (the venv's interpreter).

Protocol
--------
1. For each size the data are built once, in the main environment
   (``build_data``, easy to swap): ``--data branching`` is
   ``sks.datasets.branching(n, n_leaves=3, n_dims=50, random_state=0)`` then
   ``sc.pp.pca(n_comps=30)``; ``--data simulate`` is
   ``sks.datasets.simulate_trajectory(n, n_fates=3, random_state=0)`` then
   normalize_total / log1p / 1,000 HVGs / PCA(30). Only ``obs`` and
   ``obsm["X_pca"]`` go to a temporary h5ad (both tools read the same file).
2. Runs are interleaved A B A B … (scskeleton, scFates) ``--repeats`` times.
   Every run is a fresh subprocess; it reads the h5ad, does an untimed warm-up
   on a 300-cell subsample (so numba JIT compilation in scFates and any
   first-call cost in scskeleton are not counted; ``--no-warmup`` to count
   them), then times fit + root + pseudotime with ``time.perf_counter`` (no
   imports, no reading). Peak RSS is the subprocess's ``ru_maxrss`` (it
   includes the interpreter, the imports and the data). Each run also reports
   the number of branch points of its tree and the Spearman correlation of its
   pseudotime with the true one, and prints one JSON line.
3. Threads: by default both tools run with the machine's default threading
   (the same environment for both). ``--threads N`` sets OMP, OpenBLAS, MKL,
   BLIS, vecLib, numexpr and numba thread counts to N for both.

scFates parameters (``--scfates-*``) default to: ``ppt_sigma="auto"``, i.e.
chosen by scFates' own ``scf.tl.explore_sigma`` in the worker before the timed
part (untimed; it picks 0.1, scFates' default, on the branching data at 1,000
and 10,000 cells; sigma is in units of the data, so a fixed value does not
carry over to other data), ``Nodes=None`` (scFates' default, min(2000, N/2)),
``ppt_lambda=100`` and ``ppt_nsteps=200`` (the values of scFates' tree
tutorials; with the default ``ppt_lambda=1`` the tree grows spurious
zero-length segments and ``scf.tl.pseudotime`` fails), ``seed=0``.
``--scfates-nodes match`` gives scFates the number of nodes K that ``tl.rpg``
chose (its default) in its first run on the same cells.

Usage::

    python benchmarks/peers_rpg_scfates.py --sizes 1000 10000 --repeats 3 \\
        --scfates-python /work/peers/scfates-venv/bin/python --out peers.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEFAULT_SCFATES_PYTHON = "/work/peers/scfates-venv/bin/python"
THREAD_VARIABLES = (
    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS",
)
WARMUP_CELLS = 300


# --------------------------------------------------------------------------- data (main environment)

def build_data(kind: str, n_cells: int):
    """The benchmark's cells, with ``obsm["X_pca"]`` and ``obs["true_pseudotime"]``. Swap freely."""
    import scanpy as sc

    import scskeleton as sks

    if kind == "branching":
        adata = sks.datasets.branching(n_cells, n_leaves=3, n_dims=50, random_state=0)
        sc.pp.pca(adata, n_comps=30)
    elif kind == "simulate":
        if not hasattr(sks.datasets, "simulate_trajectory"):
            raise SystemExit("--data simulate needs sks.datasets.simulate_trajectory, which this scskeleton lacks.")
        adata = sks.datasets.simulate_trajectory(n_cells, n_fates=3, random_state=0)
        sc.pp.normalize_total(adata)
        sc.pp.log1p(adata)
        sc.pp.highly_variable_genes(adata, n_top_genes=1000, subset=True)
        sc.pp.pca(adata, n_comps=30)
    else:
        raise ValueError(f"unknown data kind {kind!r}")
    return adata


def write_slim(adata, path: Path) -> None:
    """Only what both tools need: obs (true pseudotime) and X_pca, so that neither reads a matrix it ignores."""
    import anndata as ad
    import numpy as np

    slim = ad.AnnData(obs=adata.obs.copy(), obsm={"X_pca": np.ascontiguousarray(adata.obsm["X_pca"], dtype=np.float64)})
    slim.write_h5ad(path)


# --------------------------------------------------------------------------- workers (fresh subprocesses)

def _peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux


def _versions(names) -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def _spearman(pseudotime, truth) -> tuple[float, float]:
    import numpy as np
    from scipy.stats import spearmanr

    pseudotime = np.asarray(pseudotime, dtype=float)
    truth = np.asarray(truth, dtype=float)
    finite = np.isfinite(pseudotime) & np.isfinite(truth)
    rho = spearmanr(pseudotime[finite], truth[finite])[0] if finite.sum() > 2 else float("nan")
    return float(rho), float(1.0 - finite.mean())


def _phases(marks: list[float]) -> dict:
    return {name: b - a for name, a, b in zip(("fit_s", "root_s", "pseudotime_s"), marks, marks[1:])}


def _subsample(adata, n: int):
    import numpy as np

    if adata.n_obs <= n:
        return adata.copy()
    cells = np.sort(np.random.default_rng(0).choice(adata.n_obs, size=n, replace=False))
    return adata[cells].copy()


def worker_scskeleton(path: str, params: dict) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    import anndata as ad
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    time_key = params["time_key"]
    adata = ad.read_h5ad(path)
    rss_data = _peak_rss_gb()

    def run(a, **rpg_kwargs):
        marks = [time.perf_counter()]
        sks.tl.rpg(a, **rpg_kwargs)
        marks.append(time.perf_counter())
        sks.tl.root(a, "rpg", obs_min=time_key)
        marks.append(time.perf_counter())
        sks.tl.pseudotime(a, "rpg")
        marks.append(time.perf_counter())
        return _phases(marks)

    warmup = None
    if params["warmup"]:
        start = time.perf_counter()
        try:
            run(_subsample(adata, WARMUP_CELLS), maxiter=2)
        except Exception:  # only there to load and compile; its result is not used
            pass
        warmup = time.perf_counter() - start

    start = time.perf_counter()
    phases = run(adata)
    seconds = time.perf_counter() - start

    entry = adata.uns["rpg"]
    rho, nan_fraction = _spearman(adata.obs["rpg_pseudotime"], adata.obs[time_key])
    return {
        "seconds": seconds,
        **phases,
        "warmup_seconds": warmup,
        "peak_rss_gb": _peak_rss_gb(),
        "rss_after_read_gb": rss_data,
        "n_nodes": int(entry["nodes"].shape[0]),
        "n_iter": int(entry["n_iter"]),
        "converged": bool(entry["converged"]),
        "branch_points": int(len(entry["branch_points"])),
        "leaves": int(len(entry["leaves"])),
        "spearman": rho,
        "pseudotime_nan_fraction": nan_fraction,
        "versions": _versions(["scskeleton", "scanpy", "anndata", "numpy", "scipy", "scikit-learn"]),
    }


def worker_scfates(path: str, params: dict) -> dict:
    import warnings

    warnings.filterwarnings("ignore")
    import anndata as ad
    import scFates as scf

    scf.settings.verbosity = 0
    time_key = params["time_key"]
    adata = ad.read_h5ad(path)
    rss_data = _peak_rss_gb()

    def run(a, nodes, nsteps):
        marks = [time.perf_counter()]
        scf.tl.tree(
            a, method="ppt", Nodes=nodes, use_rep="X_pca", ndims_rep=None,
            ppt_sigma=params["ppt_sigma"], ppt_lambda=params["ppt_lambda"], ppt_nsteps=nsteps,
            device="cpu", seed=params["seed"],
        )
        marks.append(time.perf_counter())
        scf.tl.root(a, time_key, tips_only=True, min_val=True)
        marks.append(time.perf_counter())
        scf.tl.pseudotime(a, n_jobs=1, n_map=1)
        marks.append(time.perf_counter())
        return _phases(marks)

    explore_seconds = None
    if params["ppt_sigma"] == "auto":  # scFates' own sigma selection, untimed (a tuning step, done once)
        start = time.perf_counter()
        sigma_nodes = params["nodes"] or (2000 if adata.n_obs * 2 > 2000 else adata.n_obs // 2)
        params["ppt_sigma"] = float(scf.tl.explore_sigma(adata, Nodes=sigma_nodes, use_rep="X_pca", seed=params["seed"]))
        explore_seconds = time.perf_counter() - start

    warmup = None
    if params["warmup"]:
        start = time.perf_counter()
        try:
            run(_subsample(adata, WARMUP_CELLS), nodes=50, nsteps=2)
        except Exception:  # only there to compile the numba kernels; its result is not used
            pass
        warmup = time.perf_counter() - start

    import contextlib
    import io
    import re

    log = io.StringIO()  # simpleppt says "converged" or "not converged (error: …)" at verbosity ≥ 2
    scf.settings.verbosity = 2
    with contextlib.redirect_stdout(log):
        start = time.perf_counter()
        phases = run(adata, nodes=params["nodes"], nsteps=params["ppt_nsteps"])
        seconds = time.perf_counter() - start
    scf.settings.verbosity = 0
    log = log.getvalue()
    not_converged = re.search(r"not converged \(error: ([0-9.eE+-]+)\)", log)

    graph = adata.uns["graph"]
    rho, nan_fraction = _spearman(adata.obs["t"], adata.obs[time_key])
    return {
        "seconds": seconds,
        **phases,
        "warmup_seconds": warmup,
        "peak_rss_gb": _peak_rss_gb(),
        "rss_after_read_gb": rss_data,
        "n_nodes": int(graph["F"].shape[1]),
        "ppt_sigma": params["ppt_sigma"],
        "explore_sigma_seconds": explore_seconds,
        "converged": not_converged is None and "converged" in log,
        "final_error": float(not_converged.group(1)) if not_converged else None,
        "branch_points": int(len(graph["forks"])),
        "leaves": int(len(graph["tips"])),
        "spearman": rho,
        "pseudotime_nan_fraction": nan_fraction,
        "scfates_params": {
            "method": "ppt", "Nodes": params["nodes"], "use_rep": "X_pca", "ppt_sigma": params["ppt_sigma"],
            "ppt_lambda": params["ppt_lambda"], "ppt_nsteps": params["ppt_nsteps"], "seed": params["seed"],
            "root": f"tl.root({time_key!r}, tips_only=True, min_val=True)", "pseudotime": "n_jobs=1, n_map=1",
        },
        "versions": _versions(["scFates", "simpleppt", "scanpy", "anndata", "numpy", "scipy", "numba", "scikit-learn"]),
    }


def worker_main(tool: str, path: str, params_json: str) -> None:
    params = json.loads(params_json)
    result = {"tool": tool}
    try:
        result.update(worker_scskeleton(path, params) if tool == "scskeleton" else worker_scfates(path, params))
        result["status"] = "ok"
    except Exception as error:  # a failed run is a result too
        result.update(status="failed", error=f"{type(error).__name__}: {error}", peak_rss_gb=_peak_rss_gb())
    result["threads_env"] = {name: os.environ.get(name) for name in THREAD_VARIABLES}
    result["cpu_count"] = os.cpu_count()
    print("RESULT " + json.dumps(result), flush=True)


# --------------------------------------------------------------------------- driver (main environment)

def git_state() -> dict:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True).stdout.strip())
    except OSError:
        return {}
    return {"commit": head, "dirty_tracked_files": dirty}


def run_worker(python: str, tool: str, path: Path, params: dict, env: dict, timeout: float | None) -> dict:
    command = [python, str(Path(__file__).resolve()), "--worker", tool, "--h5ad", str(path), "--params", json.dumps(params)]
    wall = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"tool": tool, "status": "timeout", "error": f"timed out after {timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        return {"tool": tool, "status": "crashed", "error": (done.stderr or done.stdout)[-2000:], "returncode": done.returncode}
    result = json.loads(lines[-1][len("RESULT "):])
    result["process_seconds"] = time.perf_counter() - wall
    return result


def summarize(rows: list[dict]) -> list[dict]:
    import math

    summary = []
    sizes = sorted({row["n_cells"] for row in rows})
    for n in sizes:
        medians = {}
        for tool in ("scskeleton", "scFates"):
            runs = [r for r in rows if r["n_cells"] == n and r["tool"] == tool]
            ok = [r for r in runs if r.get("status") == "ok"]
            entry = {"n_cells": n, "tool": tool, "runs": len(runs), "ok": len(ok)}
            if ok:
                seconds = [r["seconds"] for r in ok]
                entry.update(
                    median_s=statistics.median(seconds), min_s=min(seconds), max_s=max(seconds),
                    median_phases_s={phase: statistics.median(r[phase] for r in ok)
                                     for phase in ("fit_s", "root_s", "pseudotime_s")},
                    ppt_sigma=sorted({r["ppt_sigma"] for r in ok}) if tool == "scFates" else None,
                    peak_rss_gb=max(r["peak_rss_gb"] for r in ok),
                    n_nodes=ok[0]["n_nodes"],
                    converged=sum(bool(r.get("converged")) for r in ok),
                    branch_points=sorted({r["branch_points"] for r in ok}),
                    spearman=statistics.median(r["spearman"] for r in ok),
                )
                medians[tool] = entry["median_s"]
            else:
                entry["errors"] = sorted({r.get("error", "?")[:200] for r in runs})
            summary.append(entry)
        if "scskeleton" in medians and "scFates" in medians:
            summary[-1]["ratio_scfates_over_scskeleton"] = medians["scFates"] / medians["scskeleton"]
        else:
            summary[-1]["ratio_scfates_over_scskeleton"] = math.nan
    return summary


def markdown(summary: list[dict]) -> str:
    lines = [
        "| cells | tool | nodes K | converged | median wall (s) | min–max (s) | fit / root / pseudotime (s) "
        "| peak RSS (GB) | branch points | Spearman | scFates / scskeleton |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for e in summary:
        if e["ok"] == 0:
            lines.append(f"| {e['n_cells']:,} | {e['tool']} | – | – | – | failed ({e['runs']} runs): {'; '.join(e['errors'])[:120]} | | | | | | |")
            continue
        ratio = e.get("ratio_scfates_over_scskeleton")
        ratio_text = f"{ratio:.2f}×" if e["tool"] == "scFates" and ratio == ratio else ""
        failed = f" ({e['runs'] - e['ok']} failed)" if e["ok"] < e["runs"] else ""
        label = e["tool"] + (f" (σ = {'/'.join(f'{v:g}' for v in e['ppt_sigma'])})" if e.get("ppt_sigma") else "")
        phases = " / ".join(f"{e['median_phases_s'][p]:.2f}" for p in ("fit_s", "root_s", "pseudotime_s"))
        lines.append(
            f"| {e['n_cells']:,} | {label}{failed} | {e['n_nodes']} | {e['converged']}/{e['ok']} | {e['median_s']:.2f} | "
            f"{e['min_s']:.2f}–{e['max_s']:.2f} | {phases} | {e['peak_rss_gb']:.2f} | "
            f"{'/'.join(map(str, e['branch_points']))} | {e['spearman']:.4f} | {ratio_text} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--data", choices=("branching", "simulate"), default="branching")
    parser.add_argument("--scfates-python", default=DEFAULT_SCFATES_PYTHON, help="python of the venv that has scFates")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="pin BLAS/OpenMP/numba threads of both tools to N")
    parser.add_argument("--out", default=None, help="write all runs and the summary as JSON here")
    parser.add_argument("--workdir", default=None, help="where the temporary h5ad files go (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run before it is killed")
    parser.add_argument("--no-warmup", action="store_true", help="count first-call costs (numba JIT) in the time")
    parser.add_argument("--time-key", default="true_pseudotime")
    parser.add_argument("--scfates-nodes", default="default",
                        help="'default' (scFates: min(2000, N/2)), 'match' (tl.rpg's K) or an integer")
    parser.add_argument("--scfates-sigma", default="auto",
                        help="ppt_sigma: a number, or 'auto' for scf.tl.explore_sigma (untimed; 0.1 on --data branching)")
    parser.add_argument("--scfates-lambda", type=float, default=100.0)
    parser.add_argument("--scfates-nsteps", type=int, default=200)
    parser.add_argument("--scfates-seed", type=int, default=0)
    parser.add_argument("--worker", choices=("scskeleton", "scFates"), help=argparse.SUPPRESS)
    parser.add_argument("--h5ad", help=argparse.SUPPRESS)
    parser.add_argument("--params", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker is not None:
        worker_main(args.worker, args.h5ad, args.params)
        return

    if not Path(args.scfates_python).exists():
        raise SystemExit(f"--scfates-python {args.scfates_python} does not exist (see the module docstring).")
    env = dict(os.environ)
    if args.threads is not None:
        env.update({name: str(args.threads) for name in THREAD_VARIABLES})

    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="peers_rpg_scfates_"))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.sizes:
        path = workdir / f"{args.data}_{n}.h5ad"
        start = time.perf_counter()
        write_slim(build_data(args.data, n), path)
        print(f"[{n:,} cells] data built in {time.perf_counter() - start:.1f} s → {path}", file=sys.stderr, flush=True)

        # scFates' Nodes: its own default (None), an integer, or "match": the K that tl.rpg chose on these cells
        nodes = None if args.scfates_nodes in ("default", "match") else int(args.scfates_nodes)
        common = {"time_key": args.time_key, "warmup": not args.no_warmup}
        sigma = args.scfates_sigma if args.scfates_sigma == "auto" else float(args.scfates_sigma)
        scfates_params = dict(common, nodes=nodes, ppt_sigma=sigma, ppt_lambda=args.scfates_lambda,
                              ppt_nsteps=args.scfates_nsteps, seed=args.scfates_seed)
        for repeat in range(args.repeats):
            for tool, python, params in (("scskeleton", sys.executable, common),
                                         ("scFates", args.scfates_python, scfates_params)):
                if tool == "scFates" and args.scfates_nodes == "match" and scfates_params["nodes"] is None:
                    done = [r for r in rows if r["n_cells"] == n and r["tool"] == "scskeleton" and r.get("status") == "ok"]
                    if not done:
                        raise SystemExit("--scfates-nodes match needs a successful scskeleton run first.")
                    scfates_params["nodes"] = done[0]["n_nodes"]
                result = run_worker(python, tool, path, params, env, args.timeout)
                result.update(n_cells=n, repeat=repeat, data=args.data)
                rows.append(result)
                status = (f"{result['seconds']:.2f} s, {result['peak_rss_gb']:.2f} GB, "
                          f"{result['branch_points']} branch points, rho {result['spearman']:.4f}"
                          if result.get("status") == "ok" else f"{result.get('status')}: {result.get('error', '')[:300]}")
                print(f"[{n:,} cells] repeat {repeat + 1}/{args.repeats} {tool}: {status}", file=sys.stderr, flush=True)
        path.unlink(missing_ok=True)

    summary = summarize(rows)
    print(f"\nscskeleton `tl.rpg` vs scFates `tl.tree(method='ppt')`: data={args.data}, repeats={args.repeats}, "
          f"threads={'machine default' if args.threads is None else args.threads}, "
          f"warm-up={'no' if args.no_warmup else 'yes'}, cpu_count={os.cpu_count()}\n")
    print(markdown(summary))
    if args.out:
        record = {"args": vars(args), "scskeleton_git": git_state(), "cpu_count": os.cpu_count(),
                  "runs": rows, "summary": summary}
        Path(args.out).write_text(json.dumps(record, indent=1, default=str))
        print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
