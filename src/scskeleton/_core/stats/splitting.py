"""Count splitting: two independent count matrices from one, so that a tree learned on one half
can be tested on the other without the tests reusing the noise the tree was fitted to.

A Poisson count ``X ~ Poisson(μ)`` thinned binomially, ``X₁ | X ~ Binomial(X, ε)``, ``X₂ = X − X₁``,
gives independent ``X₁ ~ Poisson(εμ)`` and ``X₂ ~ Poisson((1 − ε)μ)`` (data thinning; Neufeld,
Gao, Popp, Battle & Witten 2024, *Inference after latent variable estimation for single-cell RNA
sequencing data*, Biostatistics 25:270). A negative-binomial count with dispersion φ (variance
μ + φμ², size b = 1/φ) needs the beta-binomial instead, ``X₁ | X ~ BetaBinomial(X, εb, (1 − ε)b)``,
which gives independent ``X₁ ~ NB(εμ, εb)`` and ``X₂ ~ NB((1 − ε)μ, (1 − ε)b)`` (Neufeld, Dharamshi,
Gao & Witten 2024, *Data thinning for convolution-closed distributions*, JMLR 25:57). Binomial
thinning of a negative-binomial count leaves the halves correlated by φμ / (2 + φμ) at ε = ½, most
for the highly expressed genes.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

#: Non-zero counts drawn at once: bounds the temporaries of a matrix with 10⁸–10⁹ non-zeros.
SPLIT_CHUNK = 2**24


def split_counts(counts, fraction: float, dispersion: np.ndarray | None, rng: np.random.Generator):
    """Two matrices of the counts' type and dtype, ``first + second == counts`` entry by entry, with
    ``first`` holding each count's thinned share ``fraction``.

    ``counts`` is a cells × genes array or scipy sparse matrix of non-negative integers (checked by
    the caller); ``dispersion`` is ``None`` (binomial thinning, exact for Poisson counts) or one
    negative-binomial φ ≥ 0 per gene (beta-binomial thinning; φ = 0 is binomial). A sparse matrix
    stays sparse (CSR): zeros split into zeros, and neither half keeps explicit zeros.
    """
    if sparse.issparse(counts):
        matrix = sparse.csr_matrix(counts)
        if not matrix.has_canonical_format:  # never reorder the caller's matrix in place
            matrix = matrix.copy()
            matrix.sum_duplicates()
        first = matrix.copy()
        first.data = _thinned(matrix.data, lambda chunk: matrix.indices[chunk], fraction, dispersion, rng)
        second = matrix.copy()
        second.data = matrix.data - first.data
        for half in (first, second):
            half.eliminate_zeros()
        return first, second
    values = np.asarray(counts)
    n_genes = values.shape[1]
    first = _thinned(values.ravel(), lambda chunk: np.arange(chunk.start, chunk.stop) % n_genes,
                     fraction, dispersion, rng).reshape(values.shape)
    return first, values - first


def _thinned(values: np.ndarray, genes_of, fraction: float, dispersion, rng) -> np.ndarray:
    """The thinned share of each count in ``values``, in their dtype; ``genes_of(chunk)`` gives the
    genes of the counts in a slice of ``values``."""
    out = np.zeros_like(values)
    for start in range(0, values.size, SPLIT_CHUNK):
        chunk = slice(start, min(start + SPLIT_CHUNK, values.size))
        n = np.rint(values[chunk]).astype(np.int64)
        p = fraction if dispersion is None else _beta_shares(dispersion[genes_of(chunk)], fraction, rng)
        out[chunk] = rng.binomial(n, p)
    return out


def _beta_shares(phi: np.ndarray, fraction: float, rng: np.random.Generator) -> np.ndarray | float:
    """Each count's share ~ Beta(ε/φ, (1 − ε)/φ); φ = 0 (Poisson) gives ε itself."""
    shares = np.full(phi.shape, fraction)
    over = phi > 0
    if over.any():
        size = 1.0 / phi[over]
        shares[over] = rng.beta(fraction * size, (1.0 - fraction) * size)
    return shares
