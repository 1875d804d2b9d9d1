"""A fixed battery of every learner, trajectory tool and gene test on three data sets, summarised as
fingerprints: the guard of a restructure that must not change any output.

``python tests/battery.py --write`` records the fingerprints of the current code, with the versions
of the libraries it ran on, in ``tests/data/battery.json``; ``tests/package/test_battery.py`` runs the
battery again and compares. A fingerprint of an array is its shape, its count of missing values and
three sums (plain, absolute, and against fixed pseudo-random weights), so that any change of any
entry shows while the file stays small; strings and categories are compared exactly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

REFERENCE = Path(__file__).parent / "data" / "battery.json"
#: The libraries whose releases set the last digits; the comparison holds where they are the recorded ones.
LIBRARIES = ("numpy", "scipy", "scikit-learn", "scanpy", "anndata", "pandas", "clarabel")
#: Kernels that every x86-64 machine has: OpenBLAS and numpy otherwise pick their kernels by the CPU
#: they find (AVX2, AVX-512), and each choice rounds differently, so the last digits of a fit would
#: depend on the machine. One thread each, for the same reason.
PORTABLE_KERNELS = {
    "OPENBLAS_CORETYPE": "Nehalem",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


def library_versions() -> dict[str, str]:
    return {name: version(name) for name in LIBRARIES} | {"machine": platform.machine()}


def _weights(n: int) -> np.ndarray:
    return np.random.default_rng(12345).uniform(0.5, 1.5, n)


def fingerprint(value):
    """A small, exact-enough summary of one stored value (array, frame column, scalar or string)."""
    if sparse.issparse(value):
        value = value.tocsr()
        return {"sparse": list(value.shape), "nnz": int(value.nnz), "data": fingerprint(value.data),
                "indices": fingerprint(value.indices.astype(np.int64))}
    if isinstance(value, pd.Series) and isinstance(value.dtype, pd.CategoricalDtype):
        return {"categories": [str(c) for c in value.cat.categories], "codes": fingerprint(value.cat.codes.to_numpy())}
    if isinstance(value, (pd.Series, pd.Index)):
        value = value.to_numpy()
    if isinstance(value, (str, bytes)):
        return {"text": str(value)}
    if isinstance(value, (bool, np.bool_, int, np.integer, float, np.floating)) or value is None:
        return {"scalar": None if value is None else float(value)}
    array = np.asarray(value)
    if array.dtype.kind in "OUS":
        text = "\x1f".join(map(str, array.ravel().tolist()))
        return {"shape": list(array.shape), "text_sha1": hashlib.sha1(text.encode()).hexdigest()}
    array = array.astype(np.float64).ravel()
    finite = np.where(np.isfinite(array), array, 0.0)
    return {"shape": list(np.shape(value)), "nan": int(np.isnan(array).sum()), "inf": int(np.isinf(array).sum()),
            "sum": float(finite.sum()), "abs": float(np.abs(finite).sum()),
            "weighted": float(finite @ _weights(finite.size))}


def _walk(prefix: str, value, out: dict) -> None:
    if isinstance(value, Mapping):
        for name in sorted(value, key=str):
            _walk(f"{prefix}/{name}", value[name], out)
    elif isinstance(value, pd.DataFrame):
        for column in value.columns:
            out[f"{prefix}/{column}"] = fingerprint(value[column])
    else:
        out[prefix] = fingerprint(value)


def fingerprints(adata, name: str) -> dict:
    """Every field of ``adata`` but its input data, as fingerprints under ``name/...``."""
    out: dict = {}
    _walk(f"{name}/obs", adata.obs, out)
    _walk(f"{name}/var", adata.var, out)
    for field in ("obsm", "varm", "obsp", "uns"):
        _walk(f"{name}/{field}", {k: v for k, v in getattr(adata, field).items()}, out)
    return out


def _krumsiek11():
    import scanpy as sc

    import scskeleton as sks

    adata = sks.datasets.krumsiek11()
    sc.pp.pca(adata, n_comps=10)
    return adata, ("cell_type", "progenitor")


def _branching_expression():
    import scanpy as sc

    import scskeleton as sks

    adata = sks.datasets.branching_expression(600, 120, random_state=3)
    sc.pp.pca(adata, n_comps=10)
    return adata, None


def _trees_and_genes(adata, start) -> None:
    """Both tree learners, every trajectory tool and every gene test on ``adata``."""
    import scskeleton as sks

    for learner in (sks.tl.ddrtree, sks.tl.rpg):
        learner(adata, random_state=0)
    for key in ("ddrtree", "rpg"):
        if start is None:
            sks.tl.root(adata, key, obs_min="true_pseudotime")
        else:
            sks.tl.root(adata, key, group=start)
        sks.tl.pseudotime(adata, key)
        sks.tl.milestones(adata, key, groupby=start[0] if start else None)
        sks.tl.fate_probabilities(adata, key)
        sks.tl.branch_support(adata, key, n_boot=3, random_state=0)
    names, tips = _root_and_tips(adata, "rpg")
    sks.tl.trends(adata, "rpg", path=(names[0], tips[0]))
    sks.tl.branch_test(adata, "rpg", branch_point="fork 1")
    sks.tl.fork_test(adata, "rpg", branch_point="fork 1")
    sks.tl.association_test(adata, "rpg")
    sks.tl.activation(adata, "rpg")
    sks.tl.trend_modules(adata, "rpg_association", random_state=0)
    sub_names, sub_tips = _root_and_tips(adata, "ddrtree")
    sks.tl.subset_tree(adata, "ddrtree", start=sub_names[0], end=sub_tips[-1], key_added="ddrtree_sub")
    sks.tl.cleanup(adata, "rpg", min_cells=20)


def _root_and_tips(adata, key: str) -> tuple[list[str], list[str]]:
    """The milestone names of ``key`` (the root first) and those of its tips other than the root."""
    stored = adata.uns[key]["milestones"]
    names = [str(n) for n in stored["names"]]
    leaves = set(np.asarray(adata.uns[key]["leaves"]).tolist()) - set(np.atleast_1d(adata.uns[key]["root"]).tolist())
    return names, [n for n, node in zip(names, np.asarray(stored["nodes"]).tolist()) if node in leaves]


def run() -> dict:
    """Run the battery; return the fingerprints of every output."""
    import scanpy as sc
    from threadpoolctl import threadpool_limits

    import scskeleton as sks

    sc.settings.verbosity = 0
    out: dict = {}
    with threadpool_limits(1):
        adata, start = _krumsiek11()
        _trees_and_genes(adata, start)
        for learner in (sks.tl.mpme, sks.tl.spl, sks.tl.esl, sks.tl.rpg_l1):
            learner(adata, random_state=0)
        sks.tl.fsl(adata, random_state=0)
        sks.tl.convex_embedding(adata, random_state=0, maxiter=200)
        new = adata[::7].copy()
        sks.tl.project(new, adata, "rpg")
        out.update(fingerprints(adata, "krumsiek11"))
        out.update(fingerprints(new, "krumsiek11_projected"))

        adata, start = _branching_expression()
        _trees_and_genes(adata, start)
        out.update(fingerprints(adata, "branching_expression"))

        cycling = sks.datasets.cell_cycle(400, n_genes=150, n_cycling=40, random_state=0)
        sc.pp.normalize_total(cycling)
        sc.pp.log1p(cycling)
        sc.pp.pca(cycling, n_comps=10)
        sks.tl.rpg_l1(cycling, random_state=0)
        sks.tl.root(cycling, "rpg_l1", obs_min="true_phase")
        sks.tl.phase(cycling, "rpg_l1")
        sks.tl.trends(cycling, "rpg_l1", loop=True)
        out.update(fingerprints(cycling, "cell_cycle"))
    return out


def differences(expected: dict, found: dict, *, rtol: float = 1e-10) -> list[str]:
    """The fields whose fingerprints differ (missing, new, or not equal to ``rtol``)."""
    report = [f"missing: {k}" for k in expected if k not in found] + [f"new: {k}" for k in found if k not in expected]
    for name in expected.keys() & found.keys():
        if not _same(expected[name], found[name], rtol):
            report.append(f"changed: {name}: {expected[name]} -> {found[name]}")
    return sorted(report)


def _same(a, b, rtol: float) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k], rtol) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return bool(np.isclose(a, b, rtol=rtol, atol=1e-12))
    return a == b


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"record the current outputs in {REFERENCE}")
    args = parser.parse_args(argv)
    if any(os.environ.get(k) != v for k, v in PORTABLE_KERNELS.items()):
        # the kernels are chosen when numpy loads: run again in a process that has the settings
        command = [sys.executable, __file__, *(["--write"] if args.write else [])]
        return subprocess.run(command, env=os.environ | PORTABLE_KERNELS, check=False).returncode
    found = run()
    if args.write:
        REFERENCE.parent.mkdir(exist_ok=True)
        REFERENCE.write_text(json.dumps({"versions": library_versions(), "fingerprints": found}, indent=0,
                                        sort_keys=True))
        print(f"wrote {len(found)} fingerprints to {REFERENCE}")
        return 0
    stored = json.loads(REFERENCE.read_text())
    report = differences(stored["fingerprints"], found)
    print("\n".join(report) or f"all {len(found)} fingerprints as recorded")
    return 1 if report else 0


if __name__ == "__main__":
    sys.exit(main())
