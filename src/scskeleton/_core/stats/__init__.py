"""Gene statistics along a trajectory, for all genes at once.

``splines``      penalised regression splines of pseudotime from per-group sufficient statistics
``inference``    the F test of two linear smoothers, degenerate genes, Benjamini–Hochberg
``lineages``     root-to-leaf lineages, their segment weights, the cells around a fork
``trends``       one trend per path against a constant
``branches``     branch registration, the branch test and the fork test
``association``  one curve per lineage against a constant (the whole tree), activation timing
``modules``      genes clustered by the shape of their fitted trends
"""
