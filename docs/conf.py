"""Sphinx configuration of sandbox-kernel's documentation (``make docs`` → ``build/docs/html``).

Pages are MyST Markdown; the options, the command line, the Python API, the MCP tools and the
``%sandbox`` commands are generated from the code (``_ext/``). ``make docs`` builds with
warnings as errors: a broken link or cross-reference, an option that does not exist, or one
without help text fails it. The example notebooks are shown with their stored outputs (the
ones nbval checks in ``make test``): nothing is executed here.
"""

import shutil
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE / "_ext"))

# The example notebooks live in notebooks/ (where nbval runs them); the site shows copies made
# here at every build (get-started/notebooks/ is ignored by git), with their stored outputs.
EXAMPLES = HERE / "get-started" / "notebooks"
shutil.rmtree(EXAMPLES, ignore_errors=True)
shutil.copytree(HERE.parent / "notebooks", EXAMPLES, ignore=shutil.ignore_patterns("conftest.py", "__pycache__"))

project = "sandbox-kernel"
author = "the sandbox-kernel developers"
copyright = "the sandbox-kernel developers, BSD-3-Clause"
from sandbox_kernel import __version__ as release  # noqa: E402

version = release

extensions = [
    "myst_nb",  # MyST Markdown pages and .ipynb notebooks (myst_parser comes with it)
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # Google-style Args:/Returns:/Raises: in docstrings
    "sphinxarg.ext",  # the command line, from its argparse parser
    "sandbox_options",  # options from the traits, {trait} links, help and coverage checks
    "sandbox_generated",  # the %sandbox commands and the MCP tools
]

exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]
templates_path = []
html_static_path = ["_static"]

# MyST: headings get anchors for [links](page.md#anchor), checked at build time
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]
nb_execution_mode = "off"  # the notebooks' stored outputs, as nbval checks them
nb_merge_streams = True
# myst-nb reads every MIME type of a bundle before it picks one per output format: a JSON output
# is shown as its text/plain (the notebooks' JSON outputs all have one), as nbconvert does
suppress_warnings = ["mystnb.unknown_mime_type"]

# autodoc-traits says so (a Python warning) for the wrapper kernel's inherited ipykernel traits without
# help, which the reference leaves out; sandbox-kernel's own options without help fail the build instead
warnings.filterwarnings("ignore", category=FutureWarning, module="autodoc_traits")

# autodoc: the order of the source, type hints in descriptions, no module prefixes shown
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
add_module_names = False
toc_object_entries = False  # the page's table of contents lists its sections, not every option
autodoc_default_options = {"show-inheritance": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False

# A reference to an object of the public API (the doors, the events and errors, the results, the
# backend contract) that does not resolve is an error; the build is offline (no intersphinx), so
# references to other projects' objects, and docstrings' references to internal modules, are text.
PUBLIC = r"sandbox_kernel(\.(frontdoors\.api|core\.events|core\.errors|session\.results|backends\.base)(\.[A-Za-z]\w*)*)?"
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", rf"(?!{PUBLIC}$).*")]

html_theme = "pydata_sphinx_theme"
html_title = "sandbox-kernel"
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": [],
    "secondary_sidebar_items": ["page-toc"],
}
html_context = {"default_mode": "light"}
html_show_sourcelink = False
