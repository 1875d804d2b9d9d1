import pytest

from condition_checks import N_NULL, null_data_set


@pytest.fixture(scope="session")
def null_fits():
    """Data sets whose two conditions are exchangeable, with sample-to-sample variation (3 samples each)."""
    return [null_data_set(seed) for seed in range(N_NULL)]
