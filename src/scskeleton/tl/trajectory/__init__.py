"""Trajectory tools: root, pseudotime, milestones, fates, phase, subsets, projection and support of a fitted tree."""
