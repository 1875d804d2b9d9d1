"""Table 1 of the regularizers-vs-losses paper, same protocol: paper vs ``tl.convex_embedding``.

Swiss roll and 3-D sine surface (``sks.datasets.swiss_roll`` / ``sine_surface``,
200 points), d = 2, α = 1, β = 0.1, γ = 10⁻³, losses scaled by 10
(``loss_weight=10``, in stretch-curvature units, the default), every other
parameter at its default. For each loss the six regularizers of Table 1 are
fitted and the reconstruction loss of the truncated solution L(D(X̂X̂ᵀ); D) is
reported relative to that of -tr K̃ (17), the paper's reference column, next to
the paper's own value. Each cell also gives the iterations (``!`` where the run
stopped at ``maxiter``) and the wall time.

Usage::

    python benchmarks/convex_table1.py                       # seed 0, markdown table
    python benchmarks/convex_table1.py --seeds 0 1 2 3 4     # ratios per seed (orderings)
    python benchmarks/convex_table1.py --swiss-neighbors 10  # the default k on the Swiss roll too
"""

from __future__ import annotations

import argparse
import math
import time

#: (column, regularizer, extra parameters) in the order of Table 1.
COLUMNS = [
    ("tr K (16)", "trace", {}),
    ("-tr K (17)", "neg_trace", {}),
    ("partition (19)", "partitioned", {"gamma": 0.0}),
    ("partition(γ) (41)", "partitioned", {}),
    ("bi-conjugate (44)", "biconjugate", {}),
    ("compl. sq. (42)", "completed_square", {}),
]
LOSSES = [("rMVU (29)", "mvu"), ("SNE (34)", "sne"), ("expBreg (31)", "exp_bregman")]
#: The paper's Table 1, rows Swiss and 3d-sin: relative reconstruction losses per column.
PAPER = {
    ("swiss_roll", "mvu"): [246e6, 1.00, 1.00, 1.00, 0.33, 0.95],
    ("swiss_roll", "sne"): [7.82, 1.00, 1.69, 1.69, 0.61, 0.64],
    ("swiss_roll", "exp_bregman"): [0.00, 1.00, 0.47, 0.47, 0.00, 0.00],
    ("sine_surface", "mvu"): [112e3, 1.00, 1.00, 1.00, 0.25, 0.80],
    ("sine_surface", "sne"): [1.22, 1.00, 2.00, 2.00, 0.76, 0.70],
    ("sine_surface", "exp_bregman"): [0.39, 1.00, 1.01, 1.01, 0.41, 0.42],
}


def run_row(dataset: str, loss: str, seed: int, n_neighbors: int) -> list[dict]:
    import scanpy as sc

    import scskeleton as sks

    sc.settings.verbosity = 0
    cells = []
    for _, regularizer, extra in COLUMNS:
        adata = getattr(sks.datasets, dataset)(200, random_state=seed)
        start = time.perf_counter()
        try:
            sks.tl.convex_embedding(adata, loss=loss, regularizer=regularizer, n_neighbors=n_neighbors, **extra)
        except ValueError as error:  # an unbounded spreading regularizer is refused up front
            cells.append({"loss": math.inf, "n_iter": 0, "converged": False, "seconds": 0.0, "error": str(error)})
            continue
        entry = adata.uns["convex_embedding"]
        cells.append({
            "loss": float(entry["reconstruction_loss"]),
            "n_iter": int(entry["n_iter"]),
            "converged": bool(entry["converged"]),
            "seconds": time.perf_counter() - start,
        })
    return cells


def _ratio(value: float) -> str:
    if not math.isfinite(value):
        return "unbounded"
    return f"{value:.3g}" if value < 1e4 else f"{value:.2e}"


def _paper(value: float) -> str:
    return f"{value:.0e}".replace("e+0", "e") if value >= 1e3 else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--swiss-neighbors", type=int, default=8,
                        help="n_neighbors on the Swiss roll (10 short-circuits its turns at 200 points)")
    parser.add_argument("--sine-neighbors", type=int, default=10)
    args = parser.parse_args()
    neighbors = {"swiss_roll": args.swiss_neighbors, "sine_surface": args.sine_neighbors}

    print("Relative reconstruction loss L(D(X̂X̂ᵀ); D) / L of -tr K (17): ours (paper); "
          "iterations, `!` = stopped at maxiter; seconds")
    print()
    print("| data | loss | seed | " + " | ".join(name for name, _, _ in COLUMNS) + " |")
    print("|---|---|---:|" + "---|" * len(COLUMNS))
    worst = {"iterations": 0, "not converged": 0, "runs": 0}
    for dataset in ("swiss_roll", "sine_surface"):
        for loss_name, loss in LOSSES:
            for seed in args.seeds:
                cells = run_row(dataset, loss, seed, neighbors[dataset])
                reference = cells[1]["loss"]
                row = []
                for cell, paper in zip(cells, PAPER[(dataset, loss)]):
                    ratio = cell["loss"] / reference if math.isfinite(reference) else math.nan
                    worst["runs"] += 1
                    worst["iterations"] = max(worst["iterations"], cell["n_iter"])
                    worst["not converged"] += not cell["converged"]
                    mark = "" if cell["converged"] else "!"
                    row.append(f"{_ratio(ratio)} ({_paper(paper)}); {cell['n_iter']}{mark}, {cell['seconds']:.1f} s")
                label = "Swiss roll" if dataset == "swiss_roll" else "sine surface"
                print(f"| {label} (k = {neighbors[dataset]}) | {loss_name} | {seed} | " + " | ".join(row) + " |",
                      flush=True)
    print()
    print(f"{worst['runs']} runs, {worst['not converged']} stopped at maxiter, at most {worst['iterations']} iterations")


if __name__ == "__main__":
    main()
