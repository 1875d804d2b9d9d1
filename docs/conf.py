"""Sphinx configuration of the scskeleton documentation.

Build (after ``pip install ".[docs]"``)::

    sphinx-build -W -b html docs docs/_build/html

The tutorial notebooks and the plot gallery live in ``docs/tutorials/``, stored
with their outputs so that they read on GitHub too; the test suite executes them,
and myst-nb executes them again at build time, so the rendered pages always
show what the current code does. Progress bars are switched off in the kernels
(``TQDM_DISABLE``): a page shows results, not bars.
"""

from __future__ import annotations

import os
from importlib.metadata import version as package_version

os.environ["TQDM_DISABLE"] = "1"  # inherited by the kernels myst-nb starts

project = "scskeleton"
author = "the scskeleton developers"
copyright = "2026, the scskeleton developers"
release = package_version("scskeleton")
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
]

# numpy-style docstrings everywhere
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
napoleon_custom_sections = [("Sets the following fields", "returns_style")]
autosummary_generate = True
autodoc_default_options = {"members": False}
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented_params"

myst_enable_extensions = ["dollarmath", "colon_fence"]
nb_execution_mode = "force"
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_merge_streams = True

templates_path = ["_templates"]
exclude_patterns = ["_build", "**.ipynb_checkpoints", "Thumbs.db", ".DS_Store"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}

html_theme = "furo"
html_title = f"scskeleton {release}"
html_static_path: list[str] = []

