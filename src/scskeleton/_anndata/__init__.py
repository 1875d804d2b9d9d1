"""The AnnData layer: the schema (key names, the learner registry), reading inputs, writing results,
progress and threads. Everything above it (tl, pl, pp, datasets, the CLI) reads and writes AnnData
through it; it imports only _core and _dask."""
