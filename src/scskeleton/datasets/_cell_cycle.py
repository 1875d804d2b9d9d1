"""Counts of cycling cells: a loop with ground truth."""

from __future__ import annotations

import numpy as np
import pandas as pd
from anndata import AnnData

from .._anndata.inputs import check_random_state
from .._core.validation import check_integer, check_positive
from ._docs import dataset_doc


@dataset_doc
def cell_cycle(
    n_cells: int = 1500,
    *,
    n_genes: int = 1000,
    n_cycling: int = 200,
    amplitude: float = 1.0,
    phase_skew: float = 1.0,
    dispersion: float = 5.0,
    random_state: int | np.random.Generator | None = 0,
) -> AnnData:
    """Raw counts of cells going round a cycle, with each cell's true phase.

    Every gene has a base log-mean drawn from N(0, 1). The first ``n_cycling``
    genes add ``amplitude`` · cos(φ − φ_g) to it, with φ the cell's phase and
    φ_g the gene's peak phase (uniform on the circle), so that the cycling
    genes rise and fall in turn as cells go round, as cell-cycle genes do
    through G1, S, G2 and M. A cell's library size multiplies its means
    (log-normal, sd 0.3), and counts are negative-binomial with the given
    ``dispersion`` (the size parameter r: variance μ + μ²/r). On the principal
    components of the log-normalised counts the cells form a ring around an
    empty centre, a loop for ``tl.rpg_l1`` (loops need a hole; see the
    documentation's background page on RPG).

    Parameters
    ----------
    n_cells
        Number of cells (≥ 10).
    n_genes
        Number of genes (≥ 2), of which ``n_cycling`` cycle.
    n_cycling
        Cycling genes (1 to ``n_genes``); the others only add noise.
    amplitude
        Amplitude of the cycling genes' log-mean (natural log); 1 lets each
        change about 7-fold over the cycle.
    phase_skew
        Phases are 2π · Beta(``phase_skew``, 1): 1 spreads the cells evenly
        round the cycle; above 1 they crowd towards its end (a long G1 seen
        from the other side), so the ring is denser on one side.
    dispersion
        Negative-binomial size r (> 0); smaller is noisier.
    {random_state_stored}

    Returns
    -------
    AnnData with ``X`` (cells × genes, integer counts as float32);
    ``obs["true_phase"]`` (radians in [0, 2π)), ``obs["true_library_size"]``;
    ``var["true_cycling"]`` (bool) and ``var["true_peak_phase"]`` (radians; NaN
    for genes that do not cycle); ``uns["cell_cycle"]`` with the generating
    parameters.
    """
    n_cells = check_integer("n_cells", n_cells, low=10)
    n_genes = check_integer("n_genes", n_genes, low=2)
    n_cycling = check_integer("n_cycling", n_cycling, low=1, high=n_genes, role="cycling genes, at most n_genes")
    amplitude = check_positive("amplitude", amplitude, role="of the cycling genes' log-mean")
    phase_skew = check_positive("phase_skew", phase_skew, role="Beta(phase_skew, 1) shape of the phases")
    dispersion = check_positive("dispersion", dispersion, role="negative-binomial size")
    random_state = check_random_state(random_state)
    rng = np.random.default_rng(random_state)

    phase = 2 * np.pi * rng.beta(phase_skew, 1.0, n_cells)
    phase = np.mod(phase, 2 * np.pi)
    peak = rng.uniform(0.0, 2 * np.pi, n_cycling)
    log_mean = np.broadcast_to(rng.normal(0.0, 1.0, n_genes), (n_cells, n_genes)).copy()
    log_mean[:, :n_cycling] += amplitude * np.cos(phase[:, None] - peak[None, :])
    library = rng.lognormal(0.0, 0.3, n_cells)
    mean = np.exp(log_mean) * library[:, None]
    counts = rng.negative_binomial(dispersion, dispersion / (dispersion + mean))

    cycling = np.zeros(n_genes, dtype=bool)
    cycling[:n_cycling] = True
    peak_phase = np.full(n_genes, np.nan)
    peak_phase[:n_cycling] = peak
    return AnnData(
        X=counts.astype(np.float32),
        obs=pd.DataFrame(
            {"true_phase": phase, "true_library_size": library}, index=[f"cell_{i}" for i in range(n_cells)]
        ),
        var=pd.DataFrame(
            {"true_cycling": cycling, "true_peak_phase": peak_phase}, index=[f"gene_{j}" for j in range(n_genes)]
        ),
        uns={"cell_cycle": {
            "n_cycling": n_cycling, "amplitude": amplitude, "phase_skew": phase_skew, "dispersion": dispersion,
            "random_state": random_state,
        }},
    )
