"""Sphinx configuration for raytrace_kit's documentation."""

from __future__ import annotations

from importlib.metadata import version as _version

project = "raytrace_kit"
author = "raytrace_kit developers"
copyright = "2026, raytrace_kit developers"
release = _version("raytrace_kit")

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# Ray's own types are not documented here; keep their names as plain text.
nitpicky = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# Attributes as fields: several classes have a `pid`, and duplicate targets are warnings.
napoleon_use_ivar = True

html_theme = "furo"
html_title = "raytrace_kit"
