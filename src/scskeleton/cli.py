"""Command line: ``scskeleton demo`` and ``scskeleton fit``.

Only the standard library is imported up front: scanpy and the package's tools
take seconds to load, so they are imported inside the commands and ``--help``
and ``--version`` answer at once. Every argument is checked before the data
are read or anything is fitted, and files are written to a temporary name
beside the target and renamed over it only once complete.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ._anndata.learners import LEARNERS
from ._version import __version__

#: Graph learners the ``fit`` command can run, by ``--method`` name: node graphs, then cell graphs
#: (MPME, SPL, ESL; dense, every cell up to 5,000 cells, k-means landmarks above).
METHODS = {method: learner.command for method, learner in LEARNERS.items() if learner.command}

#: Learner parameters set by options of their own (None: fixed by the command), not by --param.
OWN_OPTIONS = {"use_rep": "--use-rep", "random_state": "--random-state", "maxiter": "--maxiter",
               "key_added": None, "copy": None}

#: Learners that fit a dask array chunk by chunk (``--chunks``, or a .zarr input).
CHUNKED_METHODS = tuple(method for method, learner in LEARNERS.items() if learner.chunked)
#: Cells per chunk when a .zarr input is opened lazily without --chunks.
LAZY_CHUNK = 100_000
#: Resolution (dots per inch) of the images the commands write: print quality, whatever matplotlibrc says.
PLOT_DPI = 150


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:  # --help, --version and malformed options: argparse has printed why
        return int(stop.code or 0)
    try:
        if args.command == "demo":
            return _demo(args)
        return _fit(args)
    except (ValueError, KeyError, OSError) as err:
        message = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(f"scskeleton {args.command}: error: {message}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scskeleton",
        description="Learn the skeleton (principal tree or graph) of single-cell data and extract pseudotime.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="run the whole workflow on simulated UMI counts of a branching trajectory")
    demo.add_argument("--out", type=Path, default=Path("demo_out"), help="output folder (default: demo_out)")
    demo.add_argument("--n-cells", type=_integer(low=1), default=2000, help="number of cells (default: 2000)")
    demo.add_argument("--n-leaves", type=_integer(low=1), default=3,
                      help="number of fates, tips besides the root (default: 3)")
    demo.add_argument("--random-state", type=_integer(low=0), default=0, help="seed (default: 0)")

    fit = commands.add_parser(
        "fit",
        help="fit a graph to an .h5ad file and write the result",
        description="Fit a graph to an .h5ad file and write it, with the result, to --out. Every option is "
                    "checked before the data are fitted.",
    )
    fit.add_argument("input", type=Path, help="input .h5ad file or .zarr store")
    fit.add_argument(
        "--method", choices=METHODS, default="ddrtree", metavar="METHOD",
        help="graph learner: " + "; ".join(f"{name}: {role}" for name, role in METHODS.items()),
    )
    fit.add_argument("--out", type=Path, required=True,
                     help="output .h5ad file (or .zarr store), replaced only once the new one is completely written")
    fit.add_argument(
        "--use-rep", default="X_pca",
        help="obsm key or X (default X_pca; computed with sc.pp.pca if absent, with a hint when X looks like raw "
             "counts)",
    )
    fit.add_argument("--root-group", metavar="KEY=VALUE",
                     help="root the graph at the cells whose obs column KEY equals VALUE, then compute pseudotime")
    fit.add_argument("--plot", type=Path, metavar="IMAGE", help="also draw the graph to this image (.png, .pdf, .svg, …)")
    fit.add_argument("--maxiter", type=_integer(low=1), help="maximum number of iterations (default: the method's)")
    fit.add_argument(
        "--param", action="append", default=[], metavar="NAME=VALUE",
        help="any other parameter of the method, e.g. --param n_centers=60 --param prune=false (repeatable; "
             "numbers, true/false and none are converted; see help(sks.tl.METHOD))",
    )
    fit.add_argument("--random-state", type=_integer(low=0), default=0, help="seed (default: 0)")
    fit.add_argument(
        "--chunks", type=_integer(low=1), metavar="N",
        help="open the input lazily, N cells per chunk, and fit chunk by chunk (ddrtree, rpg, rpg_l1; needs "
             "scskeleton[dask]): X, layers and obsm are never loaded whole and are streamed to --out. The default "
             "for a .zarr input is 100000; give --use-rep a stored obsm key (e.g. X_pca) in this mode",
    )
    return parser


def _integer(*, low: int) -> Callable[[str], int]:
    """An argparse type: an integer ≥ ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer; got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}; got {value}")
        return value

    return parse


def _demo(args) -> int:
    _check_writable(args.out / "demo.h5ad", "--out")
    import matplotlib

    matplotlib.use("Agg")
    import scanpy as sc
    from scipy.stats import spearmanr
    from sklearn.metrics import adjusted_rand_score

    from . import datasets, pl, tl

    # UMI counts from gene programs along a random tree, through the standard scanpy preprocessing
    adata = datasets.simulate_trajectory(args.n_cells, n_fates=args.n_leaves, random_state=args.random_state)
    sc.pp.normalize_total(adata)
    sc.pp.log1p(adata)
    sc.pp.highly_variable_genes(adata, n_top_genes=1000)
    sc.pp.pca(adata, n_comps=30, mask_var="highly_variable", random_state=args.random_state)
    tl.rpg(adata, random_state=args.random_state)
    tl.root(adata, "rpg", obs_min="true_pseudotime")
    tl.pseudotime(adata, "rpg")
    tl.branch_support(adata, "rpg", n_boot=10, random_state=args.random_state)

    entry = adata.uns["rpg"]
    rho = spearmanr(adata.obs["rpg_pseudotime"], adata.obs["true_pseudotime"])[0]
    ari = adjusted_rand_score(adata.obs["true_branch"], adata.obs["rpg_segment"])
    support = entry["branch_support"]["branch_point_support"]
    h5ad, png = args.out / "demo.h5ad", args.out / "tree.png"
    _write_atomically(h5ad, adata.write_h5ad)
    with matplotlib.rc_context({"savefig.dpi": PLOT_DPI}):
        _write_atomically(png, lambda path: pl.tree(adata, "rpg", basis="X_pca", color="rpg_pseudotime", save=path,
                                                     show=False))

    print("scskeleton demo: principal tree (tl.rpg, defaults) on simulated UMI counts")
    print(f"  cells                  {adata.n_obs} ({adata.n_vars} genes, {args.n_leaves} true fates)")
    print(f"  tree nodes             {entry['nodes'].shape[0]}")
    print(f"  iterations             {entry['n_iter']} (converged: {entry['converged']})")
    print(f"  branch points          {len(entry['branch_points'])} (true: {args.n_leaves - 1})")
    print(f"  branch support         {', '.join(f'{v:.2f}' for v in support) or '-'} (share of 10 refits on 80 % of the cells)")
    print(f"  gap edges              {len(entry['gap_edges'])} (edges that bridge separate clusters)")
    print(f"  pseudotime Spearman    {rho:.3f} against the true pseudotime")
    print(f"  segment ARI            {ari:.3f} against the true branches")
    print(f"  wrote                  {h5ad} and {png}")
    return 0


def _fit(args) -> int:
    # everything that can be checked without the data, before the seconds of importing scanpy
    zarr_input = args.input.suffix == ".zarr" or (args.input / ".zgroup").is_file() or (args.input / "zarr.json").is_file()
    if not (args.input.is_file() or (zarr_input and args.input.is_dir())):
        raise OSError(f"input {str(args.input)!r} does not exist (give an .h5ad file or a .zarr store)")
    chunks = args.chunks if args.chunks is not None else (LAZY_CHUNK if zarr_input else None)
    if chunks is not None and args.method not in CHUNKED_METHODS:
        raise ValueError(f"--chunks: {args.method} needs its data in memory; chunked fits are "
                         f"{', '.join(CHUNKED_METHODS)} (drop --chunks to load the input)")
    _check_writable(args.out, "--out")
    if args.plot is not None:
        _check_image(args.plot)
    root_group = _key_value(args.root_group, "--root-group") if args.root_group is not None else None
    params = [_key_value(item, "--param") for item in args.param]

    import anndata
    import scanpy as sc

    from . import pl, tl

    learner = getattr(tl, args.method)
    kwargs = _learner_kwargs(learner, args.method, params, maxiter=args.maxiter)
    try:
        if chunks is not None:
            adata = _read_lazily(args.input, zarr_input=zarr_input, chunks=chunks)
        elif zarr_input:
            adata = anndata.read_zarr(args.input)
        else:
            adata = anndata.read_h5ad(args.input)
    except ImportError:
        raise
    except Exception as err:  # h5py, zarr and anndata raise many types for a bad file
        raise OSError(f"cannot read {str(args.input)!r} as {'a .zarr store' if zarr_input else '.h5ad'}: {err}") from err
    compute_pca = _check_use_rep(adata, args.use_rep)
    if compute_pca and chunks is not None:
        raise ValueError(f"--use-rep {args.use_rep}: with --chunks (or a .zarr input) the representation must be "
                         f"stored in the input; its obsm keys: {', '.join(adata.obsm) or 'none'}. Compute it first "
                         "(sc.pp.pca accepts dask arrays) or drop --chunks")
    if root_group is not None:
        root_group = _root_group(adata, *root_group)

    if compute_pca:
        n_comps = min(50, adata.n_obs - 1, adata.n_vars - 1)
        from ._core.validation import COUNT_CHECK_CELLS, looks_like_counts

        note = ""
        if looks_like_counts(adata.X[:COUNT_CHECK_CELLS]):
            note = (" from X as it is, without normalisation. X holds non-negative integers and looks like raw "
                    "counts, whose principal components follow library size more than cell state: normalise it "
                    "first (sc.pp.normalize_total, then sc.pp.log1p) and save, or give a representation of "
                    "your own with --use-rep")
        print(f"scskeleton fit: the input has no obsm['X_pca']; computing {n_comps} principal components with "
              f"sc.pp.pca{note}", file=sys.stderr)
        sc.pp.pca(adata, n_comps=n_comps, random_state=args.random_state)
    learner(adata, use_rep=args.use_rep, random_state=args.random_state, **kwargs)
    key = args.method
    if root_group is not None:
        tl.root(adata, key, group=root_group)
        tl.pseudotime(adata, key)
    writer = adata.write_zarr if args.out.suffix == ".zarr" else adata.write_h5ad
    _write_atomically(args.out, writer)
    if args.plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        pseudotime = f"{key}_pseudotime"
        with matplotlib.rc_context({"savefig.dpi": PLOT_DPI}):
            _write_atomically(args.plot, lambda path: pl.tree(
                adata, key, color=pseudotime if pseudotime in adata.obs else None, save=path, show=False,
                show_branch_points=args.method in ("ddrtree", "rpg"),
            ))
    entry = adata.uns[key]
    n_nodes = entry["nodes"].shape[0] if "nodes" in entry else adata.n_obs
    summary = f"{adata.n_obs} cells, {n_nodes} nodes, {entry['n_iter']} iterations"
    if "branch_points" in entry:
        summary += f", {len(entry['branch_points'])} branch points"
    print(f"scskeleton fit: {args.method} on {args.use_rep}: {summary}; wrote {args.out}")
    return 0


def _read_lazily(path: Path, *, zarr_input: bool, chunks: int):
    """The AnnData at ``path`` with obs, var, uns, varm and varp in memory and X, layers, obsm and
    obsp as dask arrays of ``chunks`` cells per chunk (``anndata.experimental.read_elem_lazy``)."""
    try:
        import dask.array  # noqa: F401
    except ImportError as err:
        raise ImportError("--chunks (and a .zarr input) needs dask: pip install 'scskeleton[dask]'") from err
    import anndata
    import anndata.experimental
    from anndata.io import read_elem

    # anndata 0.12 renamed 0.11's read_elem_as_dask; both take the same element and chunks
    read_elem_lazy = getattr(anndata.experimental, "read_elem_lazy", None) or anndata.experimental.read_elem_as_dask

    if zarr_input:
        import zarr

        store = zarr.open(str(path), mode="r")
    else:
        import h5py

        store = h5py.File(path, "r")  # kept open: the lazy arrays read from it until the result is written
    parts = {name: read_elem(store[name]) for name in ("obs", "var", "uns", "varm", "varp") if name in store}
    lazy = {
        name: {key: read_elem_lazy(store[name][key], chunks=_row_chunks(store[name][key], chunks))
               for key in store[name]}
        for name in ("layers", "obsm", "obsp") if name in store
    }
    matrix = read_elem_lazy(store["X"], chunks=_row_chunks(store["X"], chunks)) if "X" in store else None
    return anndata.AnnData(X=matrix, **parts, **lazy)


def _row_chunks(element, chunks: int) -> tuple[int, int]:
    """``chunks`` cells per chunk, every column in each (the chunked fits need whole rows)."""
    shape = element.attrs.get("shape", None)
    columns = int(shape[1]) if shape is not None else int(element.shape[1])
    return (chunks, columns)


def _key_value(text: str, option: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ValueError(f"{option} must look like {'KEY' if option == '--root-group' else 'NAME'}=VALUE; got {text!r}")
    return name, value


def _learner_kwargs(learner: Callable, method: str, params: list[tuple[str, str]], *, maxiter: int | None) -> dict:
    """``--param`` values, converted, and ``--maxiter`` as keyword arguments, checked against the learner."""
    accepted = [
        name for name, parameter in inspect.signature(learner).parameters.items()
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and name not in OWN_OPTIONS
    ]
    kwargs = {}
    for name, text in params:
        if name in kwargs:
            raise ValueError(f"--param {name} is given more than once")
        if name in OWN_OPTIONS:
            instead = f"use {OWN_OPTIONS[name]} instead" if OWN_OPTIONS[name] else "the command sets it"
            raise ValueError(f"--param {name}: {instead}")
        if name not in accepted:
            raise ValueError(f"--param {name}: {method} has no parameter {name!r}; its parameters are "
                             f"{', '.join(accepted)}")
        kwargs[name] = _value(text)
    if maxiter is not None:
        kwargs["maxiter"] = maxiter
    return kwargs


def _value(text: str):
    """A ``--param`` value: a bool, None, an int or a float where it reads as one, else the text."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered == "none":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _check_writable(path: Path, option: str) -> None:
    """``path`` can be written: not a folder, and its nearest existing folder is writable."""
    if path.is_dir() and path.suffix != ".zarr":
        raise OSError(f"{option} {str(path)!r} is a folder; give a file name")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise OSError(f"{option} {str(path)!r}: {str(folder)!r} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OSError(f"{option} {str(path)!r}: no permission to write in {str(folder)!r}")


def _check_image(path: Path) -> None:
    """``--plot`` names a writable file whose extension matplotlib can write."""
    _check_writable(path, "--plot")
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise ValueError(f"--plot {str(path)!r}: give an image file name ending in one of "
                         f"{', '.join('.' + name for name in sorted(formats))}")


def _check_use_rep(adata, use_rep: str) -> bool:
    """Whether ``--use-rep`` can be used; True when ``X_pca`` is to be computed first."""
    if use_rep == "X" or (use_rep == "X_pca" and use_rep not in adata.obsm):
        if adata.X is None:
            raise ValueError(f"--use-rep {use_rep}: the input has no X; use --use-rep with one of its obsm keys: "
                             f"{', '.join(adata.obsm) or 'none'}")
        if use_rep == "X_pca" and min(adata.n_obs, adata.n_vars) < 3:
            raise ValueError(f"--use-rep X_pca: PCA needs at least 3 cells and 3 genes; the input has "
                             f"{adata.n_obs} cells and {adata.n_vars} genes")
        return use_rep == "X_pca"
    if use_rep not in adata.obsm:
        raise ValueError(f"--use-rep {use_rep}: the input has no obsm[{use_rep!r}]; use --use-rep X or one of its "
                         f"obsm keys: {', '.join(adata.obsm) or 'none'}")
    return False


def _root_group(adata, column: str, value: str) -> tuple[str, object]:
    """``--root-group COLUMN=VALUE`` as ``tl.root``'s ``group``, with VALUE in the column's own type."""
    if column not in adata.obs:
        raise ValueError(f"--root-group {column}={value}: the input has no obs column {column!r}; columns: "
                         f"{', '.join(map(str, adata.obs.columns)) or 'none'}")
    values = adata.obs[column]
    matches = (values.astype(str) == value).to_numpy()
    if not matches.any():
        present = sorted(map(str, values.dropna().unique()))
        listed = ", ".join(present[:20]) + (" …" if len(present) > 20 else "")
        raise ValueError(f"--root-group {column}={value}: no cell has {column} = {value!r}; values: {listed}")
    return column, values[matches].iloc[0]


def _write_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """Have ``write`` write a temporary file beside ``path``, then rename it to ``path``.

    The rename replaces the file at once, so a write that fails or is
    interrupted (a full disk, Ctrl-C) leaves an earlier file at ``path`` as
    it was and no partial file. The temporary name keeps ``path``'s suffix,
    from which matplotlib takes the image format.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".zarr":
        _write_store_atomically(path, write)
        return
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    temporary = Path(name)
    try:
        write(temporary)
        # mkstemp makes the file private to its owner; give it the mode any new file would get
        umask = os.umask(0)
        os.umask(umask)
        temporary.chmod(0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_store_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """:func:`_write_atomically` for a .zarr store (a folder): written beside ``path``, then swapped in
    by two renames; an earlier store is removed only once the new one is in place."""
    import shutil

    temporary = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".zarr", dir=path.parent))
    temporary.rmdir()  # the writer creates the store itself
    try:
        write(temporary)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    previous = None
    if path.exists():
        previous = path.with_name(f".{path.name}.previous-{os.getpid()}")
        os.replace(path, previous)
    os.replace(temporary, path)
    if previous is not None:
        shutil.rmtree(previous, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
