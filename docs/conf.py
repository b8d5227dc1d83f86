"""Sphinx configuration of the django-fdbqueue documentation (MyST Markdown, furo theme).

Build: ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.

The reference pages are generated from the code at build time (``_ext/fdbqueue_docs``), which
imports the app: Django is configured first, with the docs' own settings (``_ext/docs_settings``),
whatever DJANGO_SETTINGS_MODULE the calling environment has (a test run sets its own).
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version as package_version
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE / "_ext"), str(HERE.parent)]
os.environ["DJANGO_SETTINGS_MODULE"] = "docs_settings"

import django  # noqa: E402

django.setup()

project = "django-fdbqueue"
author = "django-fdbqueue contributors"
# The footer's line ("Copyright © ..."): without it, furo prints the sign and nothing after it.
copyright = f"the {author}; Apache License 2.0"
release = package_version("django-fdbqueue")
version = ".".join(release.split(".")[:2])

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    # A copy button on every code block; it leaves out the prompts ("$ ", ">>> ") and outputs.
    "sphinx_copybutton",
    "fdbqueue_docs",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# Only Markdown pages are sources; these hold code, tooling or build output, not pages.
exclude_patterns = ["_build", "_ext", "_static", "conftest.py", "**/__pycache__", ".pytest_cache"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
# Option names and quoted values must read as typed: no "--json" turned into an en dash.
smartquotes = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}

# Copy the commands of a console block, not its "$ " prompts or the output lines between them
# (Pygments marks those spans .gp and .go).
copybutton_exclude = ".linenos, .gp, .go"

html_theme = "furo"
html_title = f"django-fdbqueue {release}"
html_static_path = ["_static"]
