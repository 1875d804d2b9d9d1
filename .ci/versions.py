"""Print the releases the suite runs on: the first lines of a CI log say what was tested."""

from importlib.metadata import PackageNotFoundError, version

PACKAGES = ["numpy", "scipy", "pandas", "anndata", "scanpy", "clarabel", "networkx", "matplotlib",
            "scikit-learn", "tqdm", "threadpoolctl", "dask", "zarr", "numba", "h5py"]


def main() -> None:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            found.append(f"{name} (not installed)")
    print("Testing on: " + ", ".join(found))


if __name__ == "__main__":
    main()
