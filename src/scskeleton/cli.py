"""Command line: ``scskeleton demo`` and ``scskeleton fit``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: Graph learners the ``fit`` command can run, by ``--method`` name: node graphs, then cell graphs
#: (MPME, SPL, ESL; dense, up to a few thousand cells).
METHODS = ("ddrtree", "rpg", "rpg_l1", "mpme", "spl", "esl")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scskeleton",
        description="Learn the skeleton (principal tree or graph) of single-cell data and extract pseudotime.",
    )
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the whole workflow on simulated UMI counts of a branching trajectory")
    demo.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder (default: demo_out)")
    demo.add_argument("--n-cells", type=int, default=2000, help="number of cells (default: 2000)")
    demo.add_argument("--n-leaves", type=int, default=3, help="number of fates, tips besides the root (default: 3)")
    demo.add_argument("--random-state", type=int, default=0)

    fit = commands.add_parser("fit", help="fit a graph to an .h5ad file and write the result")
    fit.add_argument("input", type=Path, help="input .h5ad file")
    fit.add_argument("--method", choices=METHODS, default="ddrtree")
    fit.add_argument("--out", type=Path, required=True, help="output .h5ad file")
    fit.add_argument(
        "--use-rep", default="X_pca", help="obsm key or X (default X_pca; computed with sc.pp.pca if absent)"
    )
    fit.add_argument("--root-group", metavar="KEY=VALUE", help="root the tree at this obs group, then compute pseudotime")
    fit.add_argument("--plot", type=Path, metavar="PNG", help="also draw the tree to this image")
    fit.add_argument("--random-state", type=int, default=0)

    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return _demo(args)
        return _fit(args)
    except (ValueError, KeyError, OSError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"scskeleton {args.command}: error: {message}", file=sys.stderr)
        return 2


def _demo(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import scanpy as sc
    from scipy.stats import spearmanr
    from sklearn.metrics import adjusted_rand_score

    from . import datasets, pl, tl

    args.out.mkdir(parents=True, exist_ok=True)
    # UMI counts from gene programs along a random tree, through the standard scanpy preprocessing
    adata = datasets.simulate_trajectory(args.n_cells, n_fates=args.n_leaves, random_state=args.random_state)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable", random_state=args.random_state)
    tl.rpg(adata, random_state=args.random_state)
    tl.root(adata, "rpg", obs_min="true_pseudotime")
    tl.pseudotime(adata, "rpg")
    tl.branch_support(adata, "rpg", n_boot=10, random_state=args.random_state)

    entry = adata.uns["rpg"]
    rho = spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_pseudotime"])[0]
    ari = adjusted_rand_score(adata.obs["true_branch"], adata.obs["rpg_segment"])
    support = entry["branch_support"]["branch_point_support"]
    h5ad, png = args.out / "demo.h5ad", args.out / "tree.png"
    adata.write_h5ad(h5ad)
    pl.tree(adata, "rpg", basis="X_pca", color="rpg_pseudotime", save=png, show=False)

    print("scskeleton demo: principal tree (tl.rpg, defaults) on simulated UMI counts")
    print(f"  cells                  {adata.n_obs} ({adata.n_vars} genes, {args.n_leaves} true fates)")
    print(f"  tree nodes             {entry['nodes'].shape[0]}")
    print(f"  iterations             {entry['n_iter']} (converged: {entry['converged']})")
    print(f"  branch points          {len(entry['branch_points'])} (true: {args.n_leaves - 1})")
    print(f"  branch support         {', '.join(f'{v:.2f}' for v in support) or '-'} (share of 10 refits on 80 % of the cells)")
    print(f"  gap edges              {len(entry['gap_edges'])} (edges that bridge separate clusters)")
    print(f"  pseudotime Spearman    {rho:.3f} against the true pseudotime")
    print(f"  segment ARI            {ari:.3f} against the true branches")
    print(f"  wrote                  {h5ad} and {png}")
    return 0


def _fit(args) -> int:
    import anndata
    import scanpy as sc

    from . import pl, tl

    if not args.input.is_file():
        raise OSError(f"input file {str(args.input)!r} does not exist")
    try:
        adata = anndata.read_h5ad(args.input)
    except Exception as err:  # h5py and anndata raise many types for a bad file
        raise OSError(f"cannot read {str(args.input)!r} as .h5ad: {err}") from err
    root_group = None
    if args.root_group is not None:
        column, sep, value = args.root_group.partition("=")
        if not sep or not column:
            raise ValueError(f"--root-group must look like KEY=VALUE; got {args.root_group!r}")
        root_group = (column, value)

    if args.use_rep == "X_pca" and "X_pca" not in adata.obsm:
        print("scskeleton fit: adata.obsm['X_pca'] is missing; computing it with sc.pp.pca", file=sys.stderr)
        sc.pp.pca(adata, n_comps=min(50, adata.n_obs - 1, adata.n_vars - 1), random_state=args.random_state)
    getattr(tl, args.method)(adata, use_rep=args.use_rep, random_state=args.random_state)
    key = args.method
    if root_group is not None:
        tl.root(adata, key, group=root_group)
        tl.pseudotime(adata, key)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    adata.write_h5ad(args.out)
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        pseudotime = f"{key}_pseudotime"
        pl.tree(adata, key, color=pseudotime if pseudotime in adata.obs else None, save=args.plot, show=False,
                show_branch_points=args.method in ("ddrtree", "rpg"))
    entry = adata.uns[key]
    n_nodes = entry["nodes"].shape[0] if "nodes" in entry else adata.n_obs
    summary = f"{adata.n_obs} cells, {n_nodes} nodes, {entry['n_iter']} iterations"
    if "branch_points" in entry:
        summary += f", {len(entry['branch_points'])} branch points"
    print(f"scskeleton fit: {args.method} on {args.use_rep}: {summary}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
