"""Side-by-side benchmark of scskeleton and its peers on prepared data sets, scored against the truth.

Run in the main environment, on files from ``datasets.py``::

    .venv/bin/python benchmarks/peers/run.py --data /work/peers/bench/prepared/*.h5ad \\
        --out /work/peers/bench/results --repeats 3 --threads 1

Protocol
--------
* Tools (``--tools``, default all): ``scskeleton-rpg`` and
  ``scskeleton-ddrtree`` (two variants each: pseudotime order ``tree`` and
  ``diffusion``), ``scfates-ppt``, ``scfates-epg``,
  ``palantir``, ``slingshot``, ``paga-dpt``, ``elpigraph``. Each is an adapter
  script in ``tools/`` (its docstring says exactly what it calls), run with
  its own virtual environment's interpreter (``/work/peers/<venv>/bin/python``,
  ``--python NAME=PATH`` to change one; ``main`` is this interpreter).
* For each data set and each repeat every tool runs once, each run a fresh
  process; the order of the tools rotates by one place from one repeat to the
  next (interleaved), so no tool always runs first or after the same one.
* Every run has a wall-clock cap (``--timeout``, default 600 s; the process
  group is killed) and an address-space cap (``--max-memory-gb``, default 16:
  ``RLIMIT_AS`` set in the child before it starts). The same thread count
  (``--threads``, default 1) goes to every tool: OMP, OpenBLAS, MKL, BLIS,
  vecLib, numexpr and numba variables, and ``--threads`` to the adapters for
  tools with an ``n_jobs``.
* Seconds are the adapter's own: fit + root + pseudotime after imports,
  reading and an untimed warm-up on ≤ 300 cells (``tools/_common.py``).
  Peak memory is the child's ``ru_maxrss`` from ``os.wait4`` (its whole life:
  interpreter, imports, data, warm-up; the largest of it and the children it
  waited for, not their sum).

Metrics (per variant and repeat; tables show medians over the repeats that ran)
--------------------------------------------------------------------------------
* ``branch points``: of the tool's graph (each adapter says how it counts),
  against ``uns["truth"]["n_branch_points"]``.
* ``Spearman``: rank correlation of the pseudotime with ``obs["time"]`` over
  the cells where both are finite; ``NaN %`` is the share of cells without a
  pseudotime.
* ``tip ARI``: adjusted Rand index between the predicted segment and the true
  ``fate`` on the cells with ``obs["tip"]`` (the last 30 % of each terminal
  segment): 1 when every fate's tip cells fall in one segment of their own.
  ``fate ARI`` (JSON only) is the same with the tool's own fate assignment,
  where it gives one (scskeleton, Palantir, Slingshot).
* ``segment ARI``: adjusted Rand index between the predicted segments and the
  true ``edge`` over all cells.
* ``seconds``, ``peak RSS`` and the warnings the tool raised (Python warnings
  and scanpy's logged warnings; their count in the table, the text in JSON).

Written under ``--out``: ``runs.jsonl`` (one line per run and variant, written
as it finishes), ``tables/<data set>.md`` (and all of them in
``summary.md``), ``figures/<data set>.png``, and each run's result and log in
``runs/<data set>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
TOOLS_DIR = HERE / "tools"
PEERS_ROOT = Path("/work/peers")
#: tool → (venv name, adapter script, --method)
TOOLS = {
    "scskeleton-rpg": ("main", "scskeleton_tool.py", "rpg"),
    "scskeleton-ddrtree": ("main", "scskeleton_tool.py", "ddrtree"),
    "scfates-ppt": ("scfates", "scfates_tool.py", "ppt"),
    "scfates-epg": ("scfates", "scfates_tool.py", "epg"),
    "palantir": ("palantir", "palantir_tool.py", None),
    "slingshot": ("slingshot", "slingshot_tool.py", None),
    "paga-dpt": ("scanpy", "paga_dpt_tool.py", None),
    "elpigraph": ("elpigraph", "elpigraph_tool.py", None),
}
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")
METRICS = ("branch_points", "spearman", "nan_fraction", "tip_ari", "segment_ari", "seconds", "peak_rss_gb")


# --------------------------------------------------------------------------- running

def run_process(command: list[str], log_path: Path, env: dict, timeout: float, max_memory_gb: float) -> dict:
    """Run ``command`` in its own process group under the caps; its exit, wall time and peak RSS."""
    limit = int(max_memory_gb * 1024**3)

    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with open(log_path, "w") as log:
        start = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=cap_memory,
                                   start_new_session=True)
        timed_out = False
        try:
            while True:
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - start > timeout:
                    os.killpg(process.pid, signal.SIGKILL)
                    timed_out = True
                    _, status, usage = os.wait4(process.pid, 0)
                    break
                time.sleep(0.1)
        except BaseException:  # the runner is stopped: its run goes with it
            os.killpg(process.pid, signal.SIGKILL)
            raise
        wall = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    try:  # workers the tool left behind (e.g. joblib's) go with it
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return {"returncode": process.returncode, "timed_out": timed_out, "process_s": wall,
            "peak_rss_gb": usage.ru_maxrss / 1024**2}


def read_result(path: Path) -> tuple[dict, dict]:
    """The variants of an adapter's result file and its info."""
    with np.load(path) as z:
        info = json.loads(str(z["info"]))
        variants = {}
        for name in z["variants"]:
            variants[str(name)] = {
                "pseudotime": z[f"{name}.pseudotime"], "segment": z[f"{name}.segment"], "fate": z[f"{name}.fate"],
                "n_branch_points": int(z[f"{name}.n_branch_points"]), "seconds": float(z[f"{name}.seconds"]),
                "warnings": json.loads(str(z[f"{name}.warnings"])),
            }
    return variants, info


# --------------------------------------------------------------------------- scoring

def read_truth(path: Path) -> dict:
    import anndata as ad

    adata = ad.read_h5ad(path, backed="r")
    obs = adata.obs
    truth = {"n_cells": adata.n_obs, "n_branch_points": adata.uns.get("truth", {}).get("n_branch_points")}
    for column in ("time", "edge", "fate", "tip"):
        truth[column] = obs[column].to_numpy() if column in obs else None
    adata.file.close()
    return truth


def score(variant: dict, truth: dict) -> dict:
    from scipy.stats import spearmanr
    from sklearn.metrics import adjusted_rand_score

    pseudotime = variant["pseudotime"]
    finite = np.isfinite(pseudotime)
    out = {"branch_points": variant["n_branch_points"], "nan_fraction": float(1 - finite.mean()),
           "spearman": None, "tip_ari": None, "fate_ari": None, "segment_ari": None}
    if truth["time"] is not None:
        both = finite & np.isfinite(truth["time"].astype(float))
        if both.sum() > 2:
            out["spearman"] = float(spearmanr(pseudotime[both], truth["time"][both]).statistic)
    if truth["edge"] is not None:
        out["segment_ari"] = float(adjusted_rand_score(truth["edge"].astype(str), variant["segment"]))
    if truth["tip"] is not None and truth["tip"].astype(bool).any():
        tip = truth["tip"].astype(bool)
        fate = truth["fate"].astype(str)[tip]
        out["tip_ari"] = float(adjusted_rand_score(fate, variant["segment"][tip]))
        if (variant["fate"] >= 0).any():
            out["fate_ari"] = float(adjusted_rand_score(fate, variant["fate"][tip]))
    return out


# --------------------------------------------------------------------------- reporting

def median(values):
    values = [v for v in values if v is not None and np.isfinite(v)]
    return statistics.median(values) if values else None


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:120] if lines else "?"


def summarize(records: list[dict]) -> dict:
    """data set → label → medians over the repeats (``None`` where no run succeeded) and counts."""
    summary: dict = {}
    for record in records:
        summary.setdefault(record["dataset"], {}).setdefault(record["label"], []).append(record)
    out = {}
    for dataset, by_label in summary.items():
        out[dataset] = {}
        for label, rows in by_label.items():
            ok = [r for r in rows if r["status"] == "ok"]
            entry = {"runs": len(rows), "ok": len(ok), "truth_branch_points": rows[0]["truth_branch_points"],
                     "n_cells": rows[0]["n_cells"],
                     "warnings": len({w for r in ok for w in r.get("warnings", [])}),
                     "errors": sorted({last_line(r["error"]) for r in rows if r["status"] != "ok"})}
            entry.update({m: median([r.get(m) for r in ok]) for m in METRICS})
            out[dataset][label] = entry
    return out


def fmt(value, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def markdown(dataset: str, entries: dict, repeats: int) -> str:
    first = next(iter(entries.values()))
    truth = first["truth_branch_points"]
    lines = [f"### {dataset} ({first['n_cells']:,} cells, true branch points: {fmt(truth, 'd')}; "
             f"median of {repeats} repeat(s))", "",
             "| tool | ok | branch points | Spearman | NaN % | tip ARI | segment ARI | seconds | peak RSS (GB) "
             "| warnings |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, e in entries.items():
        if e["ok"] == 0:
            lines.append(f"| {label} | 0/{e['runs']} | failed: {'; '.join(e['errors'])} | | | | | | | |")
            continue
        lines.append(
            f"| {label} | {e['ok']}/{e['runs']} | {fmt(e['branch_points'], 'g')} | {fmt(e['spearman'], '.3f')} | "
            f"{fmt(None if e['nan_fraction'] is None else 100 * e['nan_fraction'], '.1f')} | "
            f"{fmt(e['tip_ari'], '.3f')} | {fmt(e['segment_ari'], '.3f')} | {fmt(e['seconds'], '.2f')} | "
            f"{fmt(e['peak_rss_gb'], '.2f')} | {e['warnings']} |")
    return "\n".join(lines) + "\n"


def figure(dataset: str, entries: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(entries)
    panels = [("branch_points", "branch points"), ("spearman", "Spearman vs true time"), ("tip_ari", "tip ARI"),
              ("segment_ari", "segment ARI"), ("seconds", "seconds (log)"), ("peak_rss_gb", "peak RSS (GB)")]
    fig, axes = plt.subplots(2, 3, figsize=(14, 3 + 0.45 * len(labels)), sharey=True)
    y = np.arange(len(labels))
    for ax, (metric, title) in zip(axes.ravel(), panels):
        values = [entries[label][metric] for label in labels]
        ax.barh(y, [np.nan if v is None else v for v in values], color="tab:blue")
        for yi, v in zip(y, values):
            if v is None:  # failed, or no truth to score against
                ax.text(0.01, yi, "n/a", va="center", fontsize=8, color="grey", transform=ax.get_yaxis_transform())
        if metric == "branch_points" and entries[labels[0]]["truth_branch_points"] is not None:
            ax.axvline(entries[labels[0]]["truth_branch_points"], color="k", ls="--", lw=1, label="truth")
            ax.legend(loc="lower right", fontsize=8)
        if metric == "seconds" and any(v for v in values):
            ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
    for ax in axes[:, 0]:
        ax.set_yticks(y, labels, fontsize=8)
    axes[0, 0].invert_yaxis()  # shared: the first tool on top in every panel
    fig.suptitle(f"{dataset} ({entries[labels[0]]['n_cells']:,} cells)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- driver

def interpreters(overrides: list[str]) -> dict:
    pythons = {venv: str(PEERS_ROOT / venv / "bin" / "python") for venv, _, _ in TOOLS.values()}
    pythons["main"] = sys.executable
    for item in overrides:
        name, _, path = item.partition("=")
        if name not in pythons or not path:
            raise SystemExit(f"--python takes NAME=PATH with NAME one of {sorted(pythons)}; got {item!r}.")
        pythons[name] = path
    return pythons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", nargs="+", required=True, help="prepared h5ad files (datasets.py)")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--tools", nargs="+", choices=sorted(TOOLS), default=list(TOOLS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per run")
    parser.add_argument("--max-memory-gb", type=float, default=16.0, help="address-space cap per run")
    parser.add_argument("--python", action="append", default=[], metavar="NAME=PATH",
                        help="interpreter of a venv (main, scfates, palantir, slingshot, scanpy, elpigraph)")
    parser.add_argument("--no-warmup", action="store_true", help="adapters skip the warm-up")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped runner stops its running tool too

    pythons = interpreters(args.python)
    out = Path(args.out)
    for folder in ("tables", "figures", "runs"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **{name: str(args.threads) for name in THREAD_VARIABLES})
    records = []
    with open(out / "runs.jsonl", "a") as jsonl:
        for data in map(Path, args.data):
            dataset = data.stem
            truth = read_truth(data)
            run_dir = out / "runs" / dataset
            run_dir.mkdir(exist_ok=True)
            for repeat in range(args.repeats):
                shift = repeat % len(args.tools)
                for position, tool in enumerate(args.tools[shift:] + args.tools[:shift]):
                    venv, script, method = TOOLS[tool]
                    stem = run_dir / f"{tool}-r{repeat}"
                    result_path = stem.with_suffix(".npz")
                    result_path.unlink(missing_ok=True)
                    command = [pythons[venv], str(TOOLS_DIR / script), "--data", str(data), "--out", str(result_path),
                               "--threads", str(args.threads)]
                    command += ["--method", method] if method else []
                    command += ["--no-warmup"] if args.no_warmup else []
                    process = run_process(command, stem.with_suffix(".log"), env, args.timeout, args.max_memory_gb)
                    base = {"dataset": dataset, "n_cells": truth["n_cells"], "tool": tool, "repeat": repeat,
                            "position": position, "truth_branch_points": truth["n_branch_points"],
                            "threads": args.threads, **process}
                    rows = []
                    if process["returncode"] == 0 and result_path.exists():
                        variants, info = read_result(result_path)
                        for name, variant in variants.items():
                            label = tool if len(variants) == 1 else f"{tool} ({name})"
                            rows.append(dict(base, label=label, variant=name, status="ok",
                                             seconds=variant["seconds"], warnings=variant["warnings"],
                                             **score(variant, truth), info=info))
                    else:
                        tail = stem.with_suffix(".log").read_text(errors="replace")[-1500:]
                        status = "timeout" if process["timed_out"] else "failed"
                        rows.append(dict(base, label=tool, variant=None, status=status,
                                         error=f"timed out after {args.timeout:g} s" if process["timed_out"]
                                         else tail or f"exit {process['returncode']}"))
                    for row in rows:
                        jsonl.write(json.dumps(row, default=str) + "\n")
                        jsonl.flush()
                        shown = (f"{row['seconds']:.2f} s, {row['peak_rss_gb']:.2f} GB, bp {row['branch_points']}, "
                                 f"rho {fmt(row['spearman'], '.3f')}, tip ARI {fmt(row['tip_ari'], '.3f')}"
                                 if row["status"] == "ok" else row["status"])
                        print(f"[{dataset}] repeat {repeat + 1}/{args.repeats} {row['label']}: {shown}", flush=True)
                    records.extend(rows)

    summary = summarize(records)
    tables = []
    for dataset, entries in summary.items():
        table = markdown(dataset, entries, args.repeats)
        (out / "tables" / f"{dataset}.md").write_text(table)
        figure(dataset, entries, out / "figures" / f"{dataset}.png")
        tables.append(table)
    header = (f"Peers benchmark: {args.repeats} repeat(s), threads={args.threads}, timeout={args.timeout:g} s, "
              f"memory cap {args.max_memory_gb:g} GB, cpu_count={os.cpu_count()}\n\n")
    (out / "summary.md").write_text(header + "\n".join(tables))
    print("\n" + header + "\n".join(tables))


if __name__ == "__main__":
    main()
