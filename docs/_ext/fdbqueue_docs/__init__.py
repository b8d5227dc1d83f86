"""Sphinx extension: the reference pages generated from the code at build time.

A reference page holds a marker where its generated part goes::

    ```{fdbqueue-reference} cli
    ```

At ``source-read`` the marker is replaced by the Markdown the named generator writes from the
code (the CLI from the command's argparse parser, the REST API from the OpenAPI schema, ...), so
the page cannot drift from the code. A marker naming no generator fails the build, and so does a
generator that fails; a marker left unexpanded would be an unknown directive, a warning. Pages
with a marker are rebuilt on every build, since their source is the code, not the page.

``python_api`` adds the ``fdbqueue-autodoc`` directive for the Python API page.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

from . import checks_ref, cli_ref, errors_ref, metrics_ref, python_api, rest_ref, settings_ref

GENERATORS: dict[str, Callable[[], str]] = {
    "settings": settings_ref.render,
    "checks": checks_ref.render,
    "cli": cli_ref.render,
    "rest-api": rest_ref.render,
    "metrics": metrics_ref.render,
    "errors": errors_ref.render,
}
MARKER = re.compile(r"^```\{fdbqueue-reference\}[ \t]+(\S+)[ \t]*\n```[ \t]*$", re.MULTILINE)


def expand(app: Sphinx, docname: str, source: list[str]) -> None:
    def generate(match: re.Match) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ExtensionError(f"{docname}: no reference generator {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    source[0] = MARKER.sub(generate, source[0])


def always_outdated(app: Sphinx, env: Any, added: set, changed: set, removed: set) -> list[str]:
    """Generated pages depend on the code, which Sphinx does not track: rebuild them each time."""
    outdated = []
    for docname in env.found_docs:
        path = env.doc2path(docname)
        try:
            text = open(path, encoding="utf-8").read()
            if "{fdbqueue-reference}" in text or "fdbqueue-autodoc::" in text:
                outdated.append(docname)
        except OSError:
            continue
    return outdated


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("source-read", expand)
    app.connect("env-get-outdated", always_outdated)
    python_api.setup(app)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
