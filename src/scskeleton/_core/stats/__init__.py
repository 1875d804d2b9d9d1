"""Gene statistics along a trajectory, for all genes at once.

``splines``      penalised regression splines of pseudotime: the bases and the fit
``passes``       the one pass over the cells: per-group sufficient statistics, in memory or chunked
``inference``    the F test of two linear smoothers, degenerate genes, Benjamini–Hochberg
``lineages``     root-to-leaf lineages, their segment weights, the cells around a fork
``trends``       one trend per path against a constant
``registration`` the warp of the branches' times past a fork onto one axis
``comparison``   branch-specific against shared curves, fitted and F-tested (both branch tests)
``branches``     the branch test and the fork test
``association``  one curve per lineage against a constant (the whole tree), activation timing
``modules``      genes clustered by the shape of their fitted trends
``conditions``   per-unit summaries compared between conditions; relabelling nulls
``condition_trends`` one curve per condition along a lineage, samples as units
"""
