"""Condition tools: does a treatment change the fates, the pace or the tree? Samples are the replicates."""
