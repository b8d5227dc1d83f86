"""Runs the docs' code blocks as tests: ``python -m pytest docs`` (or one page: ``docs/howto/x.md``).

Every ```python and ```console block of each page (``docs/**/*.md``) runs in page order, once
per engine, against a fresh empty queue store; see ``tests/docsnippets`` for the rules and the
runner. Left out: ``_build`` and other ``_`` directories, ``tutorial.md`` (run end to end as a
new project by its own test), and pages that opt out with ``snippets: skip`` in
their front matter or a ``<!-- snippets: skip: why -->`` comment. The README is run the same way
by ``tests/test_readme_snippets.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
if str(DOCS.parent) not in sys.path:  # the repository root, where the ``tests`` package is
    sys.path.insert(0, str(DOCS.parent))

from tests.docsnippets.collect import DocPage, should_collect  # noqa: E402

#: Pages the snippet runner leaves to another test (paths relative to docs/).
EXCLUDED = {"tutorial.md"}


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    if collection_path.is_dir() and collection_path.name.startswith("_"):
        return True
    return None


def pytest_collect_file(file_path: Path, parent):
    if should_collect(file_path, DOCS, EXCLUDED):
        return DocPage.from_parent(parent, path=file_path)
    return None
