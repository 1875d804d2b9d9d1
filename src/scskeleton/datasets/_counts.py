"""The count model of :func:`~scskeleton.datasets.simulate_trajectory`: negative-binomial UMI counts of
every cell from its branch's gene programs, drawn block by block of cells, in threads."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy import sparse

#: Counts whose variance exceeds this are drawn with numpy's gamma–Poisson sampler,
#: the others (the vast majority) by inverting the CDF.
_INVERSION_MAX_VARIANCE = 50.0
_INVERSION_MAX_COUNT = 5_000
#: Cells × genes per generation block (memory stays O(block), never N × G).
_BLOCK_ELEMENTS = 1_000_000


def default_threads() -> int:
    """Cores this process may use, at most 8: the threads that draw the counts when ``n_jobs`` is not given."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, min(8, available))


def draw_counts(rng, programs, branch_of_cell, position, library, dispersion, dropout, n_genes,
                n_jobs, offsets=None) -> sparse.csr_matrix:
    """Negative-binomial counts (cells × genes, CSR) of cells sorted by branch, block by block of cells.

    A cell's log means are its branch's ``programs`` (start state, monotone
    steps and transient bumps) at its ``position`` along the branch; they are
    scaled to its ``library`` size, drawn with ``dispersion`` and thinned by
    ``dropout``. Every block draws from a generator of its own, seeded from
    ``rng``, so the counts do not depend on how many threads (``n_jobs``)
    generate them. ``offsets`` (a samples × genes table of log offsets and
    each cell's sample) add a sample's own deviation to its cells' log means.
    """
    rows_per_block = max(1, _BLOCK_ELEMENTS // n_genes)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(branch_of_cell, minlength=len(programs["branches"])))])
    blocks = [(b, lo, min(lo + rows_per_block, bounds[b + 1]))
              for b in range(len(bounds) - 1) for lo in range(bounds[b], bounds[b + 1], rows_per_block)]
    seeds = rng.integers(np.iinfo(np.int64).max, size=len(blocks))
    # Shift every branch's log means so that their largest possible value is 0 (no overflow in exp).
    start_state = programs["start_state"].copy()
    for b, program in enumerate(programs["branches"]):
        upper = start_state[b].copy()
        upper[program["genes"]] += np.maximum(program["lfc"], 0.0)
        upper[program["bumped"]] += np.maximum(program["amplitude"], 0.0)
        start_state[b] -= upper.max()
    start_state = start_state.astype(np.float32)
    column = np.tile(np.arange(n_genes, dtype=np.int32), rows_per_block)  # column of every entry of a block
    local = threading.local()  # per-thread work buffers, reused from block to block

    def block(job):
        (b, lo, hi), seed = job
        work = getattr(local, "work", None)
        if work is None:
            work = local.work = _Workspace(rows_per_block, n_genes)
        block_rng = np.random.default_rng(seed)
        program = programs["branches"][b]
        u = position[lo:hi, None].astype(np.float32)
        log_mean = work.log_mean[: hi - lo]
        log_mean[...] = start_state[b]
        if program["genes"].size:
            x = np.clip((u - program["begin"]) * program["inverse"], 0.0, 1.0)
            log_mean[:, program["genes"]] += program["lfc"] * (x * x * (3.0 - 2.0 * x))
        if program["bumped"].size:
            x = np.clip((u - program["bump_begin"]) * program["bump_inverse"], 0.0, 1.0)
            log_mean[:, program["bumped"]] += program["amplitude"] * np.sin(np.pi * x) ** 2
        if offsets is not None:
            log_mean += offsets[0][offsets[1][lo:hi]]
        mean = np.exp(log_mean, out=log_mean)
        mean *= (library[lo:hi] / mean.sum(axis=1, dtype=np.float64)).astype(np.float32)[:, None]
        count = _negative_binomial(block_rng, mean, dispersion, work)
        if dropout > 0:
            nonzero = np.flatnonzero(count)
            mu = mean.ravel()[nonzero]
            drop = block_rng.random(nonzero.size, dtype=np.float32) < dropout / (1.0 + mu**1.5)
            count.ravel()[nonzero[drop]] = 0
        flat = np.flatnonzero(count)
        return column.take(flat), count.ravel().take(flat).astype(np.float32), np.count_nonzero(count, axis=1)

    jobs = list(zip(blocks, seeds))
    # Append the blocks to arrays sized from the first block's density (pages that
    # are never written cost no memory) and grown or shrunk in place if needed,
    # so the peak is the matrix plus a few blocks.
    indices = np.empty(0, dtype=np.int32)
    data = np.empty(0, dtype=np.float32)
    row_nnz = []
    offset = 0
    pool = ThreadPoolExecutor(max_workers=n_jobs) if n_jobs > 1 and len(jobs) > 1 else None
    try:  # numpy releases the GIL in its loops, so threads draw blocks in parallel
        for part_indices, part_data, part_rows in (pool.map(block, jobs) if pool else map(block, jobs)):
            end = offset + part_data.size
            if end > data.size:
                if offset == 0:  # the first block's non-zeros per cell, with room to spare
                    capacity = int(1.15 * part_data.size / part_rows.size * len(position)) + 2 * n_genes
                else:
                    capacity = int(1.25 * data.size)
                capacity = max(capacity, end)
                indices.resize(capacity, refcheck=False)
                data.resize(capacity, refcheck=False)
            indices[offset:end] = part_indices
            data[offset:end] = part_data
            row_nnz.append(part_rows)
            offset = end
    finally:
        if pool is not None:
            pool.shutdown()
    indices.resize(offset, refcheck=False)
    data.resize(offset, refcheck=False)
    indptr = np.zeros(len(position) + 1, dtype=np.int64)
    np.cumsum(np.concatenate(row_nnz), out=indptr[1:])
    if offset < np.iinfo(np.int32).max:
        indptr = indptr.astype(np.int32)
    else:
        indices = indices.astype(np.int64)
    return sparse.csr_matrix((data, indices, indptr), shape=(len(position), n_genes))


class _Workspace:
    """Buffers for one block of cells, kept between blocks (fresh pages are slow to fault in)."""

    def __init__(self, rows: int, n_genes: int):
        size = rows * n_genes
        self.log_mean = np.empty((rows, n_genes), dtype=np.float32)
        self.uniform = np.empty(size, dtype=np.float32)
        self.p = np.empty(size, dtype=np.float32)
        self.ratio = np.empty(size, dtype=np.float32)
        self.active = np.empty(size, dtype=bool)
        self.count = np.empty(size, dtype=np.int32)


def _negative_binomial(rng, mean: np.ndarray, dispersion: float, work: _Workspace | None = None) -> np.ndarray:
    """Counts with mean ``mean`` and variance ``mean + dispersion · mean²`` (int32, same shape).

    Entries of small variance (the vast majority) are drawn by inverting the
    CDF with the recursion p(k+1) = p(k) · q (r + k) / (k + 1), one float32
    uniform per entry; the others use numpy's gamma–Poisson sampler. The
    result may live in ``work``'s buffers.
    """
    flat = mean.ravel()
    n = flat.size
    if work is None:
        work = _Workspace(1, n)
    out = work.count[:n]
    out[:] = 0
    uniform = rng.random(n, dtype=np.float32, out=work.uniform[:n])
    p, ratio, active = work.p[:n], work.ratio[:n], work.active[:n]
    np.multiply(flat, np.float32(dispersion), out=ratio)  # φμ
    np.multiply(ratio, flat, out=p)
    p += flat  # the variance μ + φμ²
    large = np.flatnonzero(np.greater(p, _INVERSION_MAX_VARIANCE, out=active))
    if dispersion > 0:
        r = 1.0 / dispersion
        np.log1p(ratio, out=p)
        p *= np.float32(-r)
        np.exp(p, out=p)  # P(0) = (1 + φμ)^(-r)
        ratio += 1.0
        np.reciprocal(ratio, out=ratio)
        np.subtract(1.0, ratio, out=ratio)  # q = φμ / (1 + φμ)
    else:
        r = 0.0
        np.negative(flat, out=p)
        np.exp(p, out=p)
        ratio[:] = flat  # the Poisson recursion p(k+1) = p(k) · μ / (k + 1)
    np.greater(uniform, p, out=active)
    active[large] = False
    index = np.flatnonzero(active)  # entries with a count of at least 1
    u, p, q = uniform.take(index), p.take(index), ratio.take(index)
    cumulative = p.copy()
    count = np.ones(index.size, dtype=np.int32)
    alive = np.empty(index.size, dtype=bool)
    k = 0
    while index.size and k < _INVERSION_MAX_COUNT:  # the cap only guards against rounding
        k += 1
        p *= q
        p *= np.float32((r + k - 1.0) / k if dispersion > 0 else 1.0 / k)
        cumulative += p
        np.greater(u, cumulative, out=alive)  # the count exceeds k
        count += alive
        if np.count_nonzero(alive) < 0.5 * index.size:  # compact now and then: gathers cost more than sums
            out[index] = count
            keep = np.flatnonzero(alive)
            index, u, p, q, cumulative, count = (a.take(keep) for a in (index, u, p, q, cumulative, count))
            alive = np.empty(index.size, dtype=bool)
    out[index] = count
    if large.size:
        big = flat[large].astype(np.float64)
        if dispersion > 0:
            out[large] = rng.poisson(rng.standard_gamma(r, large.size) * (big / r))
        else:
            out[large] = rng.poisson(big)
    return out.reshape(mean.shape)
