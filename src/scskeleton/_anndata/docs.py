"""Docstring paragraphs that many public functions share, written once.

A docstring names a shared paragraph by a placeholder alone on its line, ``{copy}``, and
:func:`fill_doc` puts the text there at import, indented as the placeholder is, so that ``help()``
shows every function's full documentation while its source keeps one copy of each paragraph.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

#: The paragraphs by placeholder name. Each is written without indentation: entry names at the
#: left margin, their descriptions four spaces in, as in a numpy docstring's sections.
PARAGRAPHS = {
    "adata_pseudotime": """\
adata
    Annotated data matrix on which ``sks.tl.pseudotime(adata, key)`` has run.""",
    "key_fitted": """\
key
    Key of the fitted skeleton in ``adata.uns``; ``None`` uses the only one fitted.""",
    "seed_kinds": """\
``None`` (a fresh seed), an int, or a ``numpy.random.Generator``
(one seed drawn from it); the seed used is stored in ``params``.""",
    "ignore_depth": """\
ignore_depth
    Ignore the components of ``use_rep`` that carry the cells' sequencing
    depth and no cell state: those that follow the number of genes detected
    per cell (absolute Spearman correlation ≥ 0.9; read from ``adata.X`` or
    ``obs["n_genes_by_counts"]``) and that the other components do not
    predict (kNN R² < 0.5). On shallow counts whose libraries differ
    many-fold, log-normalised values keep each cell's zeros, and that
    depth can be the first principal component; a tree fitted along it
    runs along the depth. Each such component is set to its mean (the
    tree's nodes keep every dimension), a warning names it, and
    ``params["depth_components"]`` records it. Default ``True``.""",
    "copy": """\
copy
    Return a copy instead of writing to ``adata``.""",
    "returns_fields": """\
``None``, or the modified copy when ``copy=True``. Sets the following fields
(``key`` = ``key_added``):""",
    "returns_named": """\
``None``, or the modified copy when ``copy=True``. Sets the following fields (``name`` = ``key_added``):""",
}

_PLACEHOLDER = re.compile(r"^( *)\{(\w+)\}$", re.M)


def fill_doc(function: Callable, **paragraphs: str) -> Callable:
    """Fill the placeholders of ``function.__doc__`` with :data:`PARAGRAPHS` and ``paragraphs``.

    A placeholder is ``{name}`` alone on its line; other braces (``f"X_{key}"`` in the text) are
    left as written, and so is a placeholder whose name is given nowhere. Returns ``function``, so
    that it serves as a decorator too.
    """
    known = PARAGRAPHS | paragraphs

    def fill(match: re.Match) -> str:
        indent, name = match.groups()
        if name not in known:
            return match.group(0)
        return textwrap.indent(textwrap.dedent(known[name]).strip("\n"), indent, lambda line: line.strip() != "")

    function.__doc__ = _PLACEHOLDER.sub(fill, function.__doc__)
    return function
