"""Calibration of ``tl.branch_test`` (or ``tl.fork_test``) on a LEARNED pseudotime.

Data: :func:`scskeleton._testing.realistic_with_shared_genes` — ``simulate_trajectory`` counts
(2,000 cells, 2 fates) → normalize_total → log1p → 1,000 highly variable genes → 30 PCs →
learner with defaults → root at the earliest cells → pseudotime, plus 200 genes that follow one
sigmoid of the TRUE time on both branches (exact shared-trend genes). The test runs at the
learned fork (at each with ``--every-fork``) with registration ``both`` (the default), ``fit``
and ``none``; with ``--true-time`` also on the true time with the learner's own split of the
cells into trunk and branches, which tells the pseudotime's errors from the split's; with ``--oracle``
(two-fate ``simulate_trajectory`` only) also on the true time with the TRUE split, unregistered: the
power a test of these cells can reach whatever the learner does; with ``--isotonic`` also on the
learned time mapped, per trunk and branch of the learned fork, onto the true time by isotonic
regression, unregistered: the learner's order of the cells on the true pace, the best any warp of
each branch's pseudotime can do.

Per run: the share of shared-trend genes flagged at FDR 0.05 (acceptance: at most 5 %), the
share with p < 0.05, and the Kolmogorov–Smirnov p of their p-values against the uniform
(acceptance: above 0.01); the power over the generator's genes of the two fate branches (those
with a true base mean of at least 1 count, and all) and the AUROC of the expressed ones' p-values
against the shared genes' (acceptance: power ≥ 0.9, AUROC ≥ 0.95). Without ``--every-fork``, runs
whose tree does not have exactly one branch point are reported and skipped. The figures are in
``docs/methods/trends.md``.

With ``--shared-in-pca`` the shared genes are appended to the log-normalised values before the PCA
and marked highly variable, so that the tree is learned from them too (a harder protocol: the
shared genes of a real process are among the genes a tree is learned from).

With ``--generator random_walk`` the counts come from :func:`scskeleton._testing.random_walk_tree`
(PROSSTT-like: every gene mixes programs that part gradually after the fork), whose genes carry no
truth of their own: only the shared genes' columns are reported. With ``--generator curves`` the
tree is learned on the geometry of :func:`scskeleton._testing.curved_tree` (two fates, each branch a
smooth random curve in 50 dimensions, ``--noise`` its sd; 1,500 cells), whose 100 shared-trend and
40 branch genes are its own (no genes appended; all branch genes count as expressed). With
``--generator dla`` the tree is learned on the 20 principal components of PHATE's tree of random
walks (:func:`scskeleton._testing.dla_with_genes`, ``--fates`` walks and tips, 2,000 cells), whose learned
pace changes from step to step along a branch; its 100 shared, 100 constant and 60 branch genes are its own.

``--fates`` sets the fates of the first two generators (and the walks of ``dla``); ``--every-fork`` tests at every branch
point of every tree (default: only trees with exactly one, the others skipped); ``--test fork``
runs ``tl.fork_test`` instead of ``tl.branch_test``.

Run: python benchmarks/branch_calibration.py --seeds 10 --methods ddrtree rpg --true-time
Where the fate genes' power goes: python benchmarks/branch_calibration.py --seeds 10 --true-time --isotonic --oracle
The battery of docs/methods/trends.md (every fork of 3-fate trees):
python benchmarks/branch_calibration.py --seeds 6 --fates 3 --every-fork [--generator random_walk] [--test fork]
"""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import scanpy as sc
from scipy.stats import kstest, spearmanr
from sklearn.metrics import roc_auc_score

import scskeleton as sks
from scskeleton._testing import curved_tree, dla_with_genes, realistic_with_shared_genes

TESTS = {"branch": sks.tl.branch_test, "fork": sks.tl.fork_test}


def calibration(adata, names, method: str, registration: str, *, fork: int, test: str = "branch") -> dict:
    """At ``fork``: flagged share, share with p < 0.05 and KS p of the shared-trend genes;
    power (share called at FDR 0.05) over the generator's genes of the fate branches, expressed
    (true base mean ≥ 1 count, where the generator has one) and all; AUROC of the expressed ones'
    p-values against the shared genes'."""
    TESTS[test](adata, method, branch_point=fork, registration=registration, key_added="calibration")
    return _figures(adata, names, warp_at_bound=bool(adata.uns["calibration"]["warp_at_bound"]))


def _figures(adata, names, *, warp_at_bound: bool) -> dict:
    """:func:`calibration`'s figures from ``var["calibration_pval"]`` and ``["calibration_qval"]``."""
    qvals = adata.var.loc[names, "calibration_qval"].to_numpy()
    pvals = adata.var.loc[names, "calibration_pval"].to_numpy()
    shared = {"flagged": float(np.mean(qvals < 0.05)), "p_below_0.05": float(np.mean(pvals < 0.05)),
              "ks_p": float(kstest(pvals, "uniform").pvalue),
              "warp_at_bound": warp_at_bound}
    if "true_program" not in adata.var:  # the random-walk generator's genes carry no truth of their own
        return {**shared, "power_expressed": np.nan, "power_all": np.nan, "auroc": np.nan}
    fates = adata.var["true_program"].eq("branch") & ~adata.var["true_branch"].isin(["", "branch_0"])
    expressed = fates & (adata.var["true_base_mean"] >= 1) if "true_base_mean" in adata.var else fates
    branch_q = adata.var.loc[fates, "calibration_qval"].to_numpy()
    branch_p = adata.var.loc[expressed, "calibration_pval"].fillna(1.0).to_numpy()
    return {**shared,
            "power_expressed": float(np.mean(adata.var.loc[expressed, "calibration_qval"].to_numpy() < 0.05)),
            "power_all": float(np.mean(branch_q < 0.05)),
            "auroc": float(roc_auc_score(np.r_[np.ones(branch_p.size), np.zeros(pvals.size)], -np.r_[branch_p, pvals]))}


def oracle(adata, names) -> dict:
    """The core test handed the truth (true time, the generator's trunk/branch split, no registration):
    the same figures as :func:`calibration`, once per tree."""
    from scskeleton._core.stats.branches import branch_test

    labels = adata.obs["true_branch"].astype(str).to_numpy()
    levels = sorted(set(labels))  # branch_0 (the trunk), branch_1, branch_2
    result = branch_test(adata.X, np.arange(adata.n_obs), adata.obs["true_pseudotime"].to_numpy(),
                         np.searchsorted(levels, labels), registration="none")
    adata.var["calibration_pval"], adata.var["calibration_qval"] = result.pvals, result.qvals
    return _figures(adata, names, warp_at_bound=False)


def isotonic_pace(adata, method: str, fork: int):
    """A copy of ``adata`` whose pseudotime, on each of the fork's trunk and branches, is mapped onto
    the true time by isotonic regression (the learned order of the cells, the true pace)."""
    from sklearn.isotonic import IsotonicRegression

    from scskeleton.tl.genes.selection import fork_cells

    cells = fork_cells(adata, method, fork)
    learned = adata.obs[f"{method}_pseudotime"].to_numpy(dtype=float)
    true = adata.obs["true_pseudotime"].to_numpy(dtype=float)
    mapped = learned.copy()
    for group in np.unique(cells.group[cells.rows]):
        members = cells.rows[cells.group[cells.rows] == group]
        mapped[members] = IsotonicRegression().fit(learned[members], true[members]).predict(learned[members])
    copy = adata.copy()
    copy.obs[f"{method}_pseudotime"] = mapped
    return copy


def prepared(args, seed: int, method: str):
    """The data of one seed with a learned pseudotime, and the names of its shared-trend genes."""
    if args.generator in ("simulate_trajectory", "random_walk"):
        return realistic_with_shared_genes(seed, method=method, generator=args.generator, n_fates=args.fates,
                                           shared_in_pca=args.shared_in_pca)
    adata = curved_tree(seed, noise=args.noise) if args.generator == "curves" else dla_with_genes(seed, n_branches=args.fates)
    getattr(sks.tl, method)(adata, use_rep="X_geometry")
    sks.tl.root(adata, method, obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, method)
    return adata, list(adata.var_names[adata.var["true_program"].eq("shared")])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", nargs="+", default=["ddrtree", "rpg"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--generator", default="simulate_trajectory",
                        choices=["simulate_trajectory", "random_walk", "curves", "dla"],
                        help="the data's generator (random_walk: scskeleton._testing.random_walk_tree; "
                             "curves: scskeleton._testing.curved_tree; dla: scskeleton._testing.dla_with_genes)")
    parser.add_argument("--fates", type=int, default=2, help="fates of the simulate_trajectory and random_walk trees")
    parser.add_argument("--noise", type=float, default=0.3, help="sd of the curves generator's geometric noise")
    parser.add_argument("--every-fork", action="store_true", help="test at every branch point of every tree")
    parser.add_argument("--test", default="branch", choices=sorted(TESTS))
    parser.add_argument("--registrations", nargs="+", default=["both", "fit", "none"], choices=["both", "fit", "none"],
                        help="the registrations to run (default all three)")
    parser.add_argument("--shared-in-pca", action="store_true",
                        help="simulate_trajectory and random_walk: the shared genes enter the PCA and the tree "
                             "(appended before the PCA, marked highly variable)")
    parser.add_argument("--true-time", action="store_true",
                        help="also test on the true time with the learner's trunk/branch split")
    parser.add_argument("--isotonic", action="store_true",
                        help="also test on the learned order of the cells on the true pace (isotonic map)")
    parser.add_argument("--oracle", action="store_true",
                        help="two-fate simulate_trajectory: also test on the true time with the true split")
    args = parser.parse_args()
    if args.oracle and (args.generator != "simulate_trajectory" or args.fates != 2):
        parser.error("--oracle needs the two-fate simulate_trajectory generator (one true fork)")
    sc.settings.verbosity = 0
    warnings.filterwarnings("ignore")
    rows = []
    for method in args.methods:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            adata, names = prepared(args, seed, method)
            forks = [int(fork) for fork in adata.uns[method]["branch_points"]]
            if len(forks) != 1 and not args.every_fork:
                rows.append({"method": method, "seed": seed, "skipped": f"{len(forks)} branch points"})
                print(json.dumps(rows[-1]), flush=True)
                continue
            # the method note leaves out trees whose learned order is not the true one (Spearman < 0.9)
            order = float(spearmanr(adata.obs["true_pseudotime"], adata.obs[f"{method}_pseudotime"],
                                    nan_policy="omit")[0])
            runs = {label: (adata, registration) for label, registration in (
                ("learned, both axes", "both"), ("learned, registered", "fit"), ("learned, unregistered", "none"))
                if registration in args.registrations}
            if args.true_time:
                truth = adata.copy()
                truth.obs[f"{method}_pseudotime"] = truth.obs["true_pseudotime"].to_numpy()
                runs["true, learned split"] = (truth, "none")
            if args.oracle:
                rows.append({"method": method, "seed": seed, "spearman": round(order, 3), "time": "true, true split",
                             **oracle(adata.copy(), names)})
                print(json.dumps(rows[-1]), flush=True)
            for fork in forks:
                if args.isotonic:
                    runs["learned order, true pace"] = (isotonic_pace(adata, method, fork), "none")
                for label, (data, registration) in runs.items():
                    row = {"method": method, "seed": seed, "fork": fork, "spearman": round(order, 3), "time": label,
                           **calibration(data, names, method, registration, fork=fork, test=args.test)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
    print("\n| learner | time | flagged at FDR 0.05, per fork | p < 0.05 | KS p | forks with KS p > 0.01 "
          "| power, expressed fate genes | power, all fate genes | AUROC, expressed |")
    print("|---|---|---|---:|---|---:|---:|---:|---:|")
    for method in args.methods:
        for label in ("learned, both axes", "learned, registered", "learned, unregistered",
                      "learned order, true pace", "true, learned split", "true, true split"):
            group = [r for r in rows if r["method"] == method and r.get("time") == label]
            if not group:
                continue
            flagged = ", ".join(f"{100 * r['flagged']:g}" for r in group)
            shares = [r["p_below_0.05"] for r in group]
            ks = [r["ks_p"] for r in group]
            power = [r["power_expressed"] for r in group]
            power_all = [r["power_all"] for r in group]
            auroc = [r["auroc"] for r in group]
            print(f"| {method} | {label} | {flagged} % | {min(shares):.2f}–{max(shares):.2f} | "
                  f"{min(ks):.2g}–{max(ks):.2g} | {sum(k > 0.01 for k in ks)}/{len(ks)} | "
                  f"{min(power):.2f}–{max(power):.2f} | {min(power_all):.2f}–{max(power_all):.2f} | "
                  f"{min(auroc):.3f}–{max(auroc):.3f} |")


if __name__ == "__main__":
    main()
