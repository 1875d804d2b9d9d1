"""The installed release of scskeleton (recorded in every result's ``uns[key]["version"]``)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("scskeleton")
except PackageNotFoundError:  # running from a source tree without installation
    __version__ = "0.0.0+unknown"
