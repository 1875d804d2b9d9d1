"""Counts from SERGIO (``sergio-scsim``) along a differentiation graph.

Run with the interpreter of a virtual environment that has ``sergio-scsim`` and
``anndata`` (never the main one)::

    python3 -m venv /work/peers/sergio && /work/peers/sergio/bin/pip install sergio-scsim anndata
    /work/peers/sergio/bin/python benchmarks/peers/sergio_data.py --graph fork --seed 0 --out fork-0.h5ad

The PyPI release of SERGIO (v2) simulates steady states only, so a
differentiation is built from them: every *state* of the differentiation graph
gets a random master-regulator profile (SERGIO's ``mrProfile.build_rnd``), and
each edge a → b is cut into bins whose master-regulator production rates move
linearly from a's profile to b's. Each bin is one SERGIO cell type: its cells are
draws from the stochastic steady state of the network at those rates (SERGIO's
chemical Langevin equation with intrinsic noise ``--noise``). The gene
regulatory network is our own random DAG (``--genes`` genes, ``--regulators``
master regulators, 1–3 regulators per target, 3:1 activation:repression, Hill
coefficient 2), so the counts are not those of any generator in this
repository. SERGIO's technical noise follows (outlier genes, library size,
dropouts, UMI sampling): its demo's outlier and dropout-shape parameters, a
mean library of 10 counts per gene (``--library``) and the dropout midpoint at
the 60th percentile (``--dropout``; the demo's 82 with intrinsic noise 0.3
leaves no method above a pseudotime Spearman of 0.35 on most graphs).

Written: ``X`` raw counts (float32), ``obs["time"]`` (the true time: graph
distance from the root state, one unit per edge), ``obs["edge"]`` ("a-b"),
``obs["fate"]`` (the terminal state a cell's edge leads to, or "trunk") and
``obs["tip"]`` (True in the last 30 % of a terminal edge), ``obs["root_cell"]``
(True for the cells of the first bin of the root state's edges) and
``uns["truth"]``: the graph's edges and its number of branch points (states of
degree ≥ 3 in the undirected graph).
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import anndata as ad
import numpy as np
from SERGIO import sergio
from SERGIO.GRN import GRN, Gene, SingleInteraction
from SERGIO.MR import mrProfile
from SERGIO.Noise import scNoise

# steps of dt = 0.01 between the sampled cells of one bin (SERGIO samples one long run): 50 is about
# 0.4 relaxation times (decay 0.8), so the cells of a bin are not copies of one excursion
SAMPLE_SPACING = 50

GRAPHS = {
    # the two graphs: the root state is the fork itself
    "split": [(0, 1), (0, 2)],
    "split_chain": [(0, 1), (1, 2), (1, 3), (0, 4)],
    # a progenitor trunk before each fork (root state is a tip)
    "fork": [(0, 1), (1, 2), (1, 3)],
    "fork3": [(0, 1), (1, 2), (1, 3), (3, 4), (3, 5)],
    "fates4": [(0, 1), (1, 2), (1, 3), (2, 4), (2, 5), (3, 6), (3, 7)],
    "fates5": [(0, 1), (1, 2), (1, 3), (1, 4), (3, 5), (3, 6), (4, 7), (4, 8)],
    "line": [(0, 1), (1, 2)],
}


def random_grn(n_genes: int, n_regulators: int, rng: np.random.Generator) -> GRN:
    grn = GRN()
    genes = {str(i): Gene(name=str(i), decay=0.8) for i in range(n_genes)}
    for target in range(n_regulators, n_genes):
        n_regs = int(rng.integers(1, 4))
        # regulators come from earlier genes, so the network is acyclic
        regs = rng.choice(target, size=min(n_regs, target), replace=False)
        for reg in regs:
            k = rng.uniform(1, 5) if rng.uniform() < 0.75 else rng.uniform(-5, -1)
            grn.add_interaction(SingleInteraction(reg=[genes[str(reg)]], tar=genes[str(target)], k=k, h=None, n=2))
    grn.setMRs()
    return grn


def simulate(
    edges, *, n_cells: int, n_genes: int, n_regulators: int, noise: float, library: float, dropout: float, seed: int
) -> ad.AnnData:
    rng = np.random.default_rng(seed)
    np.random.seed(seed)  # SERGIO draws from numpy's global stream
    grn = random_grn(n_genes, n_regulators, rng)
    mrs = sorted(grn.get_mrs(), key=int)
    states = sorted({s for e in edges for s in e})
    state_profile = mrProfile(MR_names=mrs, n_types=len(states))
    state_profile.build_rnd()
    per_edge_bins = 25
    cells_per_bin = max(2, n_cells // (len(edges) * per_edge_bins))
    bins = []  # (edge index, fraction along the edge)
    for e in range(len(edges)):
        for s in np.linspace(0.0, 1.0, per_edge_bins):
            bins.append((e, s))
    profile = mrProfile(MR_names=mrs, n_types=len(bins))
    for mr in mrs:
        rates = state_profile.profile[mr]
        profile.profile[mr] = np.array(
            [(1 - s) * rates[states.index(edges[e][0])] + s * rates[states.index(edges[e][1])] for e, s in bins]
        )
    profile.init_ = True
    grn.init(profile, update_half_resp=True)
    sim = sergio(grn)
    sim.simulate(nCells=cells_per_bin, noise_s=noise, safety_iter=150, scale_iter=SAMPLE_SPACING)
    expr = sim.getSimExpr()  # genes × cells, cells grouped by bin
    clean = expr.loc[[str(i) for i in range(n_genes)]].to_numpy()
    noisy = scNoise()._add_noise(
        clean, prob_o=0.01, mean_o=0.8, scale_o=1.0, mean_l=library, scale_l=0.4, shape_d=6.5, perc_d=dropout, to_count=True
    )

    depth = _depths(edges)
    children = defaultdict(list)
    for a, b in edges:
        children[a].append(b)
    cell_bin = np.repeat(np.arange(len(bins)), cells_per_bin)
    edge_of = np.array([bins[b][0] for b in cell_bin])
    frac = np.array([bins[b][1] for b in cell_bin])
    time = np.array([depth[edges[e][0]] for e in edge_of]) + frac
    terminal = np.array([not children[edges[e][1]] for e in edge_of])
    fate = np.where(terminal, [f"state {edges[e][1]}" for e in edge_of], "trunk")
    root_state = states[0]
    adata = ad.AnnData(noisy.T.astype(np.float32))
    adata.obs_names = [f"cell{i}" for i in range(adata.n_obs)]
    adata.var_names = [f"gene{i}" for i in range(n_genes)]
    adata.obs["time"] = time
    adata.obs["edge"] = [f"{edges[e][0]}-{edges[e][1]}" for e in edge_of]
    adata.obs["fate"] = fate
    adata.obs["tip"] = terminal & (frac >= 0.7)
    adata.obs["root_cell"] = np.array([edges[e][0] == root_state for e in edge_of]) & (frac == 0.0)
    degree = defaultdict(int)
    for a, b in edges:
        degree[a] += 1
        degree[b] += 1
    adata.uns["truth"] = {
        "edges": np.array(edges),
        "n_branch_points": int(sum(d >= 3 for d in degree.values())),
        "n_fates": int(sum(not children[s] for s in states)),
        "simulator": "sergio-scsim steady states along a differentiation graph",
    }
    return adata


def _depths(edges) -> dict:
    depth = {edges[0][0]: 0.0}
    for a, b in edges:  # edges are listed parents first
        depth[b] = depth[a] + 1.0
    return depth


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--graph", choices=sorted(GRAPHS), default="fork")
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--genes", type=int, default=300)
    parser.add_argument("--regulators", type=int, default=15)
    parser.add_argument("--noise", type=float, default=0.3)
    parser.add_argument("--library", type=float, default=None, help="mean log library size (default: log of 10 per gene)")
    parser.add_argument("--dropout", type=float, default=60.0, help="SERGIO's dropout percentile")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    adata = simulate(
        GRAPHS[args.graph], n_cells=args.cells, n_genes=args.genes, n_regulators=args.regulators,
        noise=args.noise, seed=args.seed, dropout=args.dropout,
        library=np.log(10 * args.genes) if args.library is None else args.library,
    )
    adata.uns["truth"]["graph"] = args.graph
    adata.write_h5ad(args.out)
    print(f"{args.out}: {adata.n_obs} cells × {adata.n_vars} genes, {adata.uns['truth']['n_branch_points']} branch points")


if __name__ == "__main__":
    main()
