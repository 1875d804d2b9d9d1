"""Tests of the fork test, activation timing and gene modules in ``_core.stats``."""

import numpy as np
import pytest
from scipy import stats

from scskeleton._core.stats import association, branches, modules


def _fork_data(seed: int, *, n: int = 1500, n_null: int = 200, n_diff: int = 20, stretch: float = 1.2):
    """A fork at true time 0.4; branch 2's pseudotime stretched by ``stretch`` (as a learner would).

    The first ``n_null`` genes follow one curve of the true time on both branches; the last
    ``n_diff`` rise only on branch 1 after the fork.
    """
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 1, n)
    groups = np.where(t < 0.4, 0, rng.integers(1, 3, n))
    learned = np.where(groups == 2, 0.4 + (t - 0.4) * stretch, t)
    shared = np.sin(3 * t[:, None] * np.linspace(0.5, 2, n_null)[None])
    specific = (groups[:, None] == 1) * np.clip(t[:, None] - 0.4, 0, None) * np.linspace(3, 9, n_diff)[None]
    x = np.hstack([shared, specific]) + rng.normal(0, 0.5, (n, n_null + n_diff))
    return x, learned, groups


@pytest.mark.parametrize("seed", range(5))
def test_fork_test_calibrated_on_stretched_branches_and_powerful(seed):
    x, times, groups = _fork_data(seed)
    result = branches.fork_test(x, np.arange(times.size), times, groups)
    null, specific = slice(0, 200), slice(200, None)
    assert (result.qvals[null] < 0.05).mean() <= 0.05
    assert stats.kstest(result.pvals[null], "uniform").pvalue > 0.01
    assert (result.qvals[specific] < 0.05).mean() >= 0.9
    # direction: every called branch-1 gene is up in branch 1 (index 0), by about the simulated difference
    called = result.qvals[specific] < 0.05
    assert np.all(result.up[specific][called] == 0) and np.all(result.down[specific][called] == 1)
    assert np.all(result.effect[specific] > result.effect[null].max() * 0.5)
    assert result.stretch[1] < result.stretch[0]  # branch 2 was stretched, so it is shrunk back


def test_fork_test_without_registration_is_fooled_by_stretch():
    """Why registration is the default: without it shared genes on unevenly stretched branches look different."""
    x, times, groups = _fork_data(0, stretch=1.4)
    plain = branches.fork_test(x, np.arange(times.size), times, groups, registration="none")
    fitted = branches.fork_test(x, np.arange(times.size), times, groups)
    assert (plain.qvals[:200] < 0.05).mean() > 0.2
    assert (fitted.qvals[:200] < 0.05).mean() <= 0.05


def test_fork_test_window_and_degenerate_genes():
    x, times, groups = _fork_data(1)
    x = np.hstack([x, np.ones((times.size, 1))])
    result = branches.fork_test(x, np.arange(times.size), times, groups, window=0.2)
    assert result.window == 0.2
    inside = np.isfinite(result.times)
    assert np.all(groups[inside] >= 1) and np.nanmax(result.times) <= result.fork + 0.2 + 1e-12
    assert result.n_cells.sum() == inside.sum()
    assert result.pvals[-1] == 1.0 and result.effect[-1] == 0.0 and result.degenerate[-1]
    assert np.allclose(result.grid[[0, -1]], [result.fork, result.fork + 0.2])
    with pytest.raises(ValueError, match="window"):
        branches.fork_test(x, np.arange(times.size), times, groups, window=-1.0)
    # a window asked for that holds no more cells of a branch than df says so (it said "prune short branches")
    with pytest.raises(ValueError, match="within the window of 0.001 past the fork.*widen the window"):
        branches.fork_test(x, np.arange(times.size), times, groups, window=1e-3, registration="none")


def _lineage_data(seed: int, n: int = 3000):
    """A trunk (segment 0) and two leaves (1, 2); genes switch on along lineage 1 at known times."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, 1, n)
    segments = np.where(t < 0.3, 0, rng.integers(1, 3, n))
    membership = np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]])
    onsets = np.linspace(0.35, 0.85, 10)
    rising = 2.0 / (1 + np.exp(-(t[:, None] - onsets[None]) / 0.03)) * (segments[:, None] == 1)
    falling = -rising[:, :3]
    x = np.hstack([rising, falling, np.zeros((n, 200))]) + rng.normal(0, 0.5, (n, 213))
    return x, t, segments, membership, onsets


@pytest.mark.parametrize("seed", range(3))
def test_activation_orders_onsets_and_rarely_calls_null_genes(seed):
    x, t, segments, membership, onsets = _lineage_data(seed)
    result = association.activation(x, np.arange(t.size), t, segments, membership)
    first = result.times[:10, 0]
    assert np.all(np.isfinite(first))
    assert np.all(np.diff(first) > 0)  # later onsets, later activation
    assert np.all(np.abs(first - onsets) < 0.12)
    assert np.all(np.isnan(result.times[:10, 1]))  # these genes never rise on lineage 2
    assert np.all(np.isnan(result.times[10:13]))  # falling genes never "activate"
    assert np.isfinite(result.times[13:]).mean() <= 0.05  # α = 0.05 over whole curves
    assert np.all(result.rise[:10, 0] > 1.5)


def test_activation_min_rise_delays_and_alpha_checked():
    x, t, segments, membership, _ = _lineage_data(0)
    early = association.activation(x, np.arange(t.size), t, segments, membership, min_rise=0.0)
    late = association.activation(x, np.arange(t.size), t, segments, membership, min_rise=0.8)
    assert np.all(late.times[:10, 0] >= early.times[:10, 0])
    with pytest.raises(ValueError, match="alpha"):
        association.activation(x, np.arange(t.size), t, segments, membership, alpha=1.5)
    with pytest.raises(ValueError, match="min_rise"):
        association.activation(x, np.arange(t.size), t, segments, membership, min_rise=2.0)


def test_trend_modules_recover_shapes_whatever_level_and_amplitude():
    rng = np.random.default_rng(0)
    grid = np.linspace(0, 1, 100)
    shapes = [grid, 1 - grid, np.exp(-((grid - 0.5) ** 2) / 0.01), np.sin(6 * grid)]
    curves = np.vstack([s * rng.uniform(0.5, 3) + rng.uniform(-2, 2) + rng.normal(0, 0.05, 100)
                        for s in shapes for _ in range(30)])
    curves = np.vstack([curves, np.full((1, 100), 3.0)])  # a flat curve is left out
    result = modules.trend_modules(curves, 4, random_state=0)
    labels = result.labels[:-1].reshape(4, 30)
    assert all(np.unique(row).size == 1 for row in labels)
    assert np.unique(labels[:, 0]).size == 4
    assert result.labels[-1] == -1
    # numbered by where the mean curve peaks: "falling" (peaks at 0) first, "rising" (peaks at 1) last
    assert labels[1, 0] == 0 and labels[0, 0] == 3
    again = modules.trend_modules(curves, 4, random_state=0)
    np.testing.assert_array_equal(again.labels, result.labels)


def test_trend_modules_on_lineage_curves_with_nan_and_too_many_modules():
    rng = np.random.default_rng(1)
    curves = rng.normal(size=(20, 2, 50))
    curves[:, 1, 40:] = np.nan  # the second lineage ends early for every gene
    result = modules.trend_modules(curves, 3)
    assert result.columns.size == 90 and result.centers.shape == (3, 90)
    with pytest.raises(ValueError, match="n_modules"):
        modules.trend_modules(curves, 25)


@pytest.mark.parametrize("n_true", [2, 3, 5, 7])
def test_number_of_modules_from_the_silhouette(n_true):
    """Genes peaking at n_true different places, with random level, amplitude and noise:
    n_modules=None finds n_true modules (over 3 seeds), and matches the explicit call."""
    grid = np.linspace(0, 1, 50)
    peaks = [0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6][:n_true]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        curves = np.vstack([
            np.exp(-((grid - peaks[g % n_true]) / 0.08) ** 2) * rng.uniform(0.5, 3) + rng.uniform(-1, 1)
            + rng.normal(0, 0.15, grid.size)
            for g in range(30 * n_true)
        ])
        values, _, _ = modules.standardize_curves(curves)
        assert modules.choose_n_modules(values, random_state=seed) == n_true
        chosen = modules.trend_modules(curves, None, random_state=seed)
        assert chosen.centers.shape[0] == n_true
        np.testing.assert_array_equal(chosen.labels, modules.trend_modules(curves, n_true, random_state=seed).labels)


def test_activation_down_times_the_falls_and_mirrors_up():
    """direction="down" is direction="up" on the negated data (the band is symmetric), times the
    falling genes, and leaves the rising ones out."""
    x, t, segments, membership, _ = _lineage_data(0)
    rows = np.arange(t.size)
    down = association.activation(x, rows, t, segments, membership, direction="down")
    mirrored = association.activation(-np.asarray(x), rows, t, segments, membership)
    np.testing.assert_array_equal(down.times, mirrored.times)
    np.testing.assert_allclose(down.rise, mirrored.rise)
    assert np.all(np.isfinite(down.times[10:13, 0]))  # the falling genes
    # a rising gene's spurious dip is a false call of the band (α = 0.05 per curve and lineage)
    assert np.isnan(down.times[:10, 0]).mean() >= 0.8
    with pytest.raises(ValueError, match="direction"):
        association.activation(x, rows, t, segments, membership, direction="sideways")
