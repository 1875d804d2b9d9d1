import io

import matplotlib
import pytest
import scanpy as sc
from threadpoolctl import threadpool_limits

import scskeleton as sks

matplotlib.use("Agg")
sc.settings.verbosity = 0

#: Calibration and scale studies that run with ``pytest -m slow`` only. Each is a further seed, size,
#: layout or learner of a property whose first case stays in the default run (named after the
#: arrow), so that a regression in any public function still fails ``pytest``.
SLOW = {
    "test_spline_tests_calibration.py": [
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[200-200-200-200@0.05]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[200-200-200-200@0.01]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[300-300-300@0.05]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[300-300-300@0.01]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[200-300-150@0.01]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[0-200-200@0.01]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[0-200-200@0.05]",
        "test_branch_p_values_hold_their_level_when_branches_share_the_trend[200-300-150@0.05]",
        # -> test_trends_and_branch_test.py::test_p_values_hold_their_level_on_learned_pseudotime
        "test_branch_p_values_hold_their_level_in_the_far_tail[200-200-200-200]",
        "test_branch_p_values_hold_their_level_in_the_far_tail[300-300-300]",
        "test_branch_p_values_hold_their_level_in_the_far_tail[0-200-200]",  # -> [200-300-150]
        # -> test_trends_and_branch_test.py::test_p_values_hold_their_level_on_learned_pseudotime (the default's level on null genes)
        "test_both_registrations_are_conservative_where_both_axes_are_right[0]",
        "test_both_registrations_are_conservative_where_both_axes_are_right[3]",
        "test_sharp_shared_courses_do_not_pull_the_warp[1]",
        "test_sharp_shared_courses_do_not_pull_the_warp[2]",
        "test_sharp_shared_courses_do_not_pull_the_warp[3]",  # -> [0]
        # -> test_trends_and_branch_test.py::test_both_axes_follow_a_pace_that_changes_along_a_random_walk
        "test_both_registrations_hold_the_level_where_the_warp_mistakes_delays_for_pace[0]",
        "test_both_registrations_hold_the_level_where_the_warp_mistakes_delays_for_pace[2]",
        "test_a_warp_set_by_its_bounds_says_so[2]",  # -> [1]
        # -> test_trends_and_branch_test.py::test_a_branch_too_small_for_its_own_curve_is_left_out_or_lowers_df
        "test_a_short_branch_beside_a_long_crowded_one_keeps_its_df_and_the_level",
    ],
    "test_fork_activation_module_statistics.py": [
        f"test_fork_test_calibrated_on_stretched_branches_and_powerful[{seed}]" for seed in range(1, 5)
    ],  # -> [0]
    "test_trends_and_branch_test.py": [
        # -> test_branch_test_on_learned_pseudotime_calls_few_shared_trend_genes[ddrtree]
        "test_gene_tests_hold_on_curved_branches_in_50_dimensions[ddrtree]",
        "test_gene_tests_hold_on_curved_branches_in_50_dimensions[rpg]",
        "test_branch_test_on_learned_pseudotime_calls_few_shared_trend_genes[rpg]",  # -> [ddrtree]
        "test_registration_on_the_realistic_generator_holds_the_level_on_more_seeds[3]",
        "test_registration_on_the_realistic_generator_holds_the_level_on_more_seeds[8]",
        "test_registration_on_the_realistic_generator_holds_the_level_on_more_seeds[2]",
        # -> test_registration_aligns_branches_on_the_realistic_generator[0]
        # -> test_both_axes_follow_a_pace_that_changes_along_a_random_walk
        "test_registration_follows_a_pace_that_changes_faster_than_five_pieces[5-ddrtree]",
        "test_registration_follows_a_pace_that_changes_faster_than_five_pieces[7-rpg]",
        "test_registration_at_a_fork_whose_branch_branches_again",  # -> test_registration_aligns_branches_...[0]
        # -> test_spline_tests_calibration.py::test_both_registrations_give_each_gene_the_larger_p_value
        "test_branch_test_by_default_calls_a_gene_only_where_both_axes_do",
        # no faster case of its own (one fork, 50 s)
        "test_a_genes_p_value_does_not_depend_on_the_other_genes_tested",
        "test_registration_reads_the_warp_from_genes_that_follow_time[1]",
        # -> test_registration_aligns_branches_on_the_realistic_generator[0] and, on the same random-walk
        # generator, test_both_axes_follow_a_pace_that_changes_along_a_random_walk
        "test_registration_reads_the_warp_from_genes_that_follow_time[2]",
        "test_registration_reads_the_warp_from_genes_that_follow_time[5]",
        "test_registration_aligns_branches_on_the_realistic_generator[1]",  # -> [0]
        # -> test_readme.py::test_readme_examples_run_as_written and, at krumsiek11's forks,
        # test_fork_activation_modules.py::test_fork_test_on_krumsiek11_calls_the_lineage_factors_in_the_right_branch[ddrtree]
        "test_readme_branch_test_runs_at_every_fork_of_krumsiek11[rpg]",
        "test_readme_branch_test_runs_at_every_fork_of_krumsiek11[ddrtree]",
    ],
    "test_fork_activation_modules.py": [
        "test_fork_test_on_learned_pseudotime_calls_few_shared_trend_genes_and_finds_branch_genes[rpg]",
        "test_fork_test_on_krumsiek11_calls_the_lineage_factors_in_the_right_branch[rpg]",  # -> [ddrtree]
    ],
    "test_gene_tests_on_chunks.py": [
        "test_the_count_test_reads_the_same_carriers_from_chunks[fork_test]",  # -> [branch_test]
        "test_a_gene_subset_of_chunks_split_across_genes[dense]",
        "test_a_gene_subset_of_chunks_split_across_genes[sparse]",  # -> test_a_dask_layer_and_a_gene_subset
        "test_dask_expression_equals_in_memory[fork_test]",  # -> [branch_test] (the same comparison of branches)
    ],
    "test_landmarks.py": [  # -> test_landmarks_recover_a_simulated_tree
        "test_defaults_recover_a_50k_cell_tree_through_landmarks[esl]",
        "test_defaults_recover_a_50k_cell_tree_through_landmarks[mpme]",
    ],
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.name in SLOW.get(item.path.name, ()):
            item.add_marker(pytest.mark.slow)
    if any("::" in str(arg) for arg in config.args):
        return  # chosen tests: the files were not collected whole
    # a renamed test or case must leave SLOW too, or it would silently join the default run
    collected = {(item.path.name, item.name) for item in items}
    for file, names in SLOW.items():
        missing = [name for name in names if (file, name) not in collected]
        if any(path == file for path, _ in collected) and missing:
            raise pytest.UsageError(f"tests/conftest.py SLOW names tests that {file} no longer has: {missing}")


@pytest.fixture(scope="session", autouse=True)
def single_blas_thread():
    """One BLAS thread for the whole suite.

    The solvers make many small BLAS calls. On a shared machine (CI, a laptop
    running other work) a multi-threaded BLAS then waits for its threads to be
    scheduled at every call, which made parts of the suite 10–50× slower here.
    Results are the same; only the thread count differs.
    """
    with threadpool_limits(1, user_api="blas"):
        yield


@pytest.fixture(scope="session")
def branching_fitted():
    """A small fitted DDRTree with root and pseudotime; copy before mutating."""
    adata = sks.datasets.branching(600, n_leaves=3, random_state=0)
    sc.pp.pca(adata, n_comps=10)
    sks.tl.ddrtree(adata)
    sks.tl.root(adata, "ddrtree", obs_min="true_pseudotime")
    sks.tl.pseudotime(adata, "ddrtree")
    return adata


@pytest.fixture(scope="session")
def krumsiek11_fitted():
    """krumsiek11 with 10 PCs, a tree by ``method`` rooted at the progenitors, and pseudotime; cached per method."""
    cache = {}

    def fitted(method: str):
        if method not in cache:
            adata = sks.datasets.krumsiek11()
            sc.pp.pca(adata, n_comps=10)
            getattr(sks.tl, method)(adata)
            sks.tl.root(adata, method, group=("cell_type", "progenitor"))
            sks.tl.pseudotime(adata, method)
            cache[method] = adata
        return cache[method].copy()

    return fitted


@pytest.fixture
def scanpy_log():
    """What scanpy's logging writes (warnings and up), as a string buffer."""
    stream, previous, verbosity = io.StringIO(), sc.settings.logfile, sc.settings.verbosity
    sc.settings.logfile, sc.settings.verbosity = stream, 1
    yield stream
    sc.settings.logfile, sc.settings.verbosity = previous, verbosity
