"""``tl.convex_embedding``: regularized loss minimisation plus truncation."""

from __future__ import annotations

import numpy as np
from anndata import AnnData
from scanpy import logging as logg

from .._core.convex import regularized as core
from ._inputs import check_key, check_random_state, get_representation
from ._progress import solver_run
from ._results import write_result


def convex_embedding(
    adata: AnnData,
    *,
    use_rep: str = "X_pca",
    n_pcs: int | None = None,
    n_components: int = 2,
    loss: str = "mvu",
    regularizer: str = "biconjugate",
    n_neighbors: int = 10,
    alpha: float = 1.0,
    beta: float = 0.1,
    gamma: float = 1e-3,
    sigma: float = 1.0,
    standardize: bool = True,
    maxiter: int = 300,
    tol: float = 1e-5,
    key_added: str | None = None,
    random_state: int = 0,
    copy: bool = False,
) -> AnnData | None:
    """Embed the cells by regularized loss minimisation over kernels, then truncation.

    Yu, Neufeld, Kiros, Zhang & Schuurmans, "Regularizers versus losses for
    nonlinear dimensionality reduction" (``shared/papers/regularizers-vs-losses_…``).
    With D the squared distances of the cells in ``use_rep`` (eq. 2), solve
    problem (14),

        min_{K̃ ⪰ 0, K̃1 = 0}  L(D(K̃); D) + R(K̃),   D(K) = δ(K)1ᵀ + 1δ(K)ᵀ - 2K  (3),

    by accelerated projected gradient descent (footnote 5), then keep the top
    d eigenvalues: X̂ = Q_{1:d} Λ_{1:d}^½. The loss relates the reconstruction
    to the data, the regularizer encodes the target topology. Kernel PCA is
    ``loss="kpca"`` (22) with ``"trace"`` (16); regularized maximum variance
    unfolding is ``loss="mvu"`` (29) with ``"neg_trace"`` (17). The default
    pairs the MVU loss with the paper's new convex regularizer (44), the
    tightest convex relaxation of "spread the top d directions, shrink the
    rest" (41).

    Size: the work is dense N × N with eigendecompositions at every
    iteration, O(N³) time and O(N²) memory; at most 2,000 cells (a ValueError
    above that suggests subsampling or landmarks). Measured per iteration,
    single-threaded: 0.08 s (trace regularizers) to 0.23 s (spectral ones) at
    N = 1,000, 0.6–1.7 s at N = 2,000; a run takes 100–300 iterations.

    Scale: the loss is in units of squared distance, the regularizers in
    units of K̃, so α, β, γ act relative to the scale of the data. The
    spectral regularizers (41)–(44) pull the top d eigenvalues of K̃ towards
    α/γ and the rest to zero; the defaults (the paper's Table 1: α = 1,
    β = 0.1, γ = 10⁻³) suit data whose kernel eigenvalues are at most about
    (α+β)/γ ≈ 1,100. With ``standardize=True`` (default) the representation
    is divided by the standard deviation of its centred entries first, so
    that α, β, γ and ``sigma`` refer to unit-variance coordinates whatever
    the units of ``use_rep`` (the setting of the Table 1 reproduction, at a
    few hundred cells); the embedding and the eigenvalues are in those
    standardised units. For many more cells lower γ (about α over the top
    eigenvalue you expect); ``uns[key]["eigenvalues"]`` shows the result.

    Parameters
    ----------
    adata
        Annotated data matrix.
    use_rep
        ``obsm`` key (default ``"X_pca"``) or ``"X"``: the points whose
        squared distances D are the target.
    n_pcs
        Use only the first ``n_pcs`` columns of ``use_rep``.
    n_components
        d, the embedding dimension and the d of the partitioned regularizers
        (19)–(20), (41)–(44); 1 ≤ d < N. Default 2.
    loss
        ``"kpca"`` (22) ||H(D - D̂)H||², ``"squared"`` (23) ||D - D̂||²,
        ``"sammon"`` (26) Σ (D - D̂)²/D, ``"mvu"`` (29) the regularized-MVU
        loss on the ``n_neighbors`` neighbourhood (default),
        ``"exp_bregman"`` (31) the exponential Bregman divergence with scale
        ``sigma``, ``"sne"`` (34)–(35) the matrix-wise SNE divergence of the
        paper's experiments, ``"sne_rows"`` (32)–(33) its row-wise form.
    regularizer
        ``"trace"`` (16) β tr K̃, ``"neg_trace"`` (17) -α tr K̃ (MVU),
        ``"partitioned"`` (41) (γ = 0: eq. 19; not convex, alternating
        minimisation), ``"completed_square"`` (42) and ``"biconjugate"``
        (43)–(44) (default), the two convex relaxations of (41).
    n_neighbors
        k of the neighbourhood N(D) of the ``"mvu"`` loss (symmetrised
        k-nearest neighbours); the graph must be connected. Default 10.
    alpha
        α ≥ 0, weight spreading the top d directions (17), (19), (41)–(44).
    beta
        β ≥ 0, weight shrinking the other directions (16), (19), (41)–(44).
    gamma
        γ, quadratic smoother of (41)–(44); > 0 for ``"completed_square"`` and
        ``"biconjugate"``, ≥ 0 for ``"partitioned"``. Default 10⁻³.
    sigma
        σ > 0, scale of the exponential in ``"exp_bregman"`` (31) and of the
        transfers p ∝ exp(-D/σ) of ``"sne"``/``"sne_rows"`` (the paper has
        σ = 1), in squared units of the (standardised) representation.
    standardize
        Divide the representation by the standard deviation of its centred
        entries before fitting (see Scale above). ``False`` fits ``use_rep``
        as it is.
    maxiter, tol
        At most ``maxiter`` projected gradient steps; stop when the relative
        change of the objective falls below ``tol``.
    key_added
        Key of the results; default ``"convex_embedding"``.
    random_state
        Recorded only: the solver is deterministic (it starts from the
        data's own centred kernel).
    copy
        Return a copy instead of writing to ``adata``.

    Returns
    -------
    ``None``, or the modified copy when ``copy=True``. Sets the following fields
    (``key`` = ``key_added``):

    ``adata.obsm[f"X_{key}"]``
        X̂, the N × d truncated embedding.
    ``adata.uns[key]``
        ``method`` (``"convex_embedding"``), ``params``, ``objective`` (value
        of (14) per iteration, non-increasing; per alternating round for
        ``"partitioned"``), ``n_iter`` (gradient steps), ``converged``,
        ``reconstruction_loss`` (L(D(X̂X̂ᵀ); D), the paper's quality figure),
        ``loss_value`` and ``regularizer_value`` (at K̃, before truncation),
        ``eigenvalues`` (all N eigenvalues of K̃, descending: how much of it
        the top d hold).

    Examples
    --------
    >>> import scanpy as sc
    >>> import scskeleton as sks
    >>> adata = sks.datasets.sine_surface(150, width=8.0)
    >>> sks.tl.convex_embedding(adata)
    >>> sc.pl.embedding(adata, basis="convex_embedding", color="true_u")
    """
    key = check_key(key_added, "convex_embedding")
    random_state = check_random_state(random_state)
    data = get_representation(adata, use_rep=use_rep, n_pcs=n_pcs)
    n_cells = data.shape[0]
    if not isinstance(standardize, bool):
        raise ValueError(f"standardize must be True or False; got {standardize!r}.")
    scale = float(np.std(data - data.mean(axis=0))) if standardize else 1.0
    if scale <= 0:
        raise ValueError(f"All cells coincide in {use_rep!r} (zero spread); there is nothing to embed.")
    data = data / scale

    # an iteration costs O(N³): show the bar from about 800 cells (runs of tens of seconds)
    with solver_run(
        "convex embedding", use_rep=repr(use_rep), shape=data.shape, maxiter=maxiter, size=n_cells**3 // 100,
        dense=True, detail=f" ({loss} loss, {regularizer} regularizer)",
    ) as run:
        result = core.convex_embedding(
            data,
            n_components=n_components,
            loss=loss,
            regularizer=regularizer,
            n_neighbors=n_neighbors,
            alpha=alpha,
            beta=beta,
            gamma=gamma,
            sigma=sigma,
            maxiter=maxiter,
            tol=tol,
            callback=run.callback,
        )
    if not result.converged:
        logg.warning(
            f"convex embedding did not converge in {maxiter} iterations (tol={tol}); consider a larger maxiter."
        )

    params = {
        "use_rep": use_rep,
        "n_pcs": data.shape[1],
        "n_components": n_components,
        "loss": loss,
        "regularizer": regularizer,
        "n_neighbors": n_neighbors,
        "alpha": alpha,
        "beta": beta,
        "gamma": gamma,
        "sigma": sigma,
        "standardize": standardize,
        "scale": scale,
        "maxiter": maxiter,
        "tol": tol,
        "random_state": random_state,
    }
    adata = adata.copy() if copy else adata
    written = write_result(
        adata,
        key,
        method="convex_embedding",
        params=params,
        objective=result.objective,
        n_iter=result.n_iter,
        converged=result.converged,
        latent=result.embedding,
        uns={
            "reconstruction_loss": float(result.reconstruction_loss),
            "loss_value": float(result.loss_value),
            "regularizer_value": float(result.regularizer_value),
            "eigenvalues": result.eigenvalues,
        },
    )
    top = result.eigenvalues[:n_components].sum() / max(result.eigenvalues.sum(), 1e-300)
    run.finished(
        f"{result.n_iter} iterations, reconstruction loss {result.reconstruction_loss:.4g}, "
        f"top {n_components} eigenvalues hold {100 * top:.1f} % of tr K̃",
        written,
    )
    return adata if copy else None
