"""Gene-level statistics along a trajectory: penalised splines and the trend, branch and association tests."""
