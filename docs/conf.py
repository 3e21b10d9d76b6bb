"""Sphinx configuration for numred's documentation.

Build: ``pip install ".[docs]" && sphinx-build -W -b html docs docs/_build/html``.
The docstring and page examples run with ``sphinx-build -W -b doctest docs docs/_build/doctest``.
"""
from __future__ import annotations

import os
import sys

# document the checkout, not whichever numred happens to be installed
sys.path.insert(0, os.path.abspath(".."))

import numred  # noqa: E402

project = "numred"
author = "numred developers"
copyright = "numred developers"
version = release = numred.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "numpydoc",
    "myst_parser",  # SEMANTICS.md, the contract, rendered as it is
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3

# API pages: one per function, generated from the docstrings (numpydoc format)
autosummary_generate = True
autodoc_typehints = "signature"
autodoc_type_aliases = {"AxesLike": "numred.AxesLike", "npt.ArrayLike": "numpy.typing.ArrayLike"}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
# every public docstring must document each parameter and its return value; -W turns these into errors
numpydoc_validation_checks = {"PR01", "PR02", "PR03", "PR07", "RT01", "RT03"}
numpydoc_validation_exclude = {r"\.BackendRep\.run$", r"\.Backend\.", r"onnx\.Reduce", r"OpRun"}

# The doctest builder runs the ">>>" examples of the pages and of the docstrings autodoc pulls in.
doctest_global_setup = """
import numpy as np
import numred
"""

html_theme = "pydata_sphinx_theme"
html_static_path = ["_static"]
html_title = f"numred {release}"
html_theme_options = {
    "navbar_end": ["navbar-icon-links"],
    "secondary_sidebar_items": ["page-toc"],
    "show_toc_level": 2,
}
html_sidebars = {"**": []}
