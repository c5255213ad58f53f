# Sphinx configuration of kolo's documentation site (scripts/docs.sh builds
# it into build/site/). Pages are MyST Markdown; the C++ reference comes from
# Doxygen's XML of include/kolo/ through Breathe, the Python reference from
# kolo.torch's docstrings through autodoc.
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_root = os.path.dirname(_here)

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
# Doxyfile is Doxygen's input, not a page.
exclude_patterns = ["_build", "Doxyfile"]
# `[text](page.md#a-heading)` links resolve for headings down to ###.
myst_heading_anchors = 3
html_theme = "furo"
html_title = "kolo"

# ---- C++ reference (docs/api/cpp.md) ----------------------------------------
# scripts/docs.sh runs Doxygen first and says where its XML is.
breathe_projects = {
    "kolo": os.environ.get(
        "DOXYGEN_XML_DIR", os.path.join(_root, "build", "doxygen", "xml")),
}
breathe_default_project = "kolo"
breathe_domain_by_extension = {"h": "cpp"}
breathe_default_members = ("members",)
breathe_show_include = True

# ---- Python reference (docs/api/python.md) ----------------------------------
# The package's sources, not an installed copy; the compiled extension and
# the version file CMake writes are stand-ins, so the site builds without a
# kolo build. torch is the real one (Debian's python3-torch).
sys.path.insert(0, os.path.join(_root, "python"))
autodoc_mock_imports = ["kolo._kolo", "kolo._version"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"
# Signatures show defaults as written (`process_set=global_process_set`).
autodoc_preserve_defaults = True
add_module_names = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# ---- Strict build (sphinx-build -n) ------------------------------------------
# Types from other libraries appear in signatures; they have no pages here.
# The namespaces kolo, kolo::raw and kolo::elastic have no entry of their
# own: the page's sections are theirs.
nitpick_ignore_regex = [
    ("cpp:identifier", r"kolo(::raw|::elastic)?"),
    ("cpp:identifier", r"(absl|std|grpc)(::.*)?"),
    ("cpp:identifier", r"u?int(8|16|32|64)_t|size_t"),
    ("py:class", r"(torch|numpy|np)\..*"),
]
