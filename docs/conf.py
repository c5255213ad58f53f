# Sphinx configuration of kolo's documentation site (scripts/docs.sh builds
# it into build/site/). Pages are MyST Markdown; the C++ reference comes from
# Doxygen's XML of include/kolo/ through Breathe, the Python reference from
# kolo.torch's docstrings through autodoc.
project = "kolo"
author = "the kolo authors"
copyright = "2026, the kolo authors"

extensions = [
    "myst_parser",
    "breathe",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# `[text](page.md#a-heading)` links resolve for headings down to ###.
myst_heading_anchors = 3
html_theme = "furo"
html_title = "kolo"
