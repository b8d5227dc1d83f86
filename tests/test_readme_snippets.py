"""The README's ```python and ```console blocks, run like the docs' pages (``tests/docsnippets``):
in order, against a fresh store, on both engines. (The README is not under ``docs/``, whose
conftest collects the pages, so it gets this test.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docsnippets import run_page

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.django_db
def test_readme_snippets(fdbqueue_store, tmp_path):
    run_page(README, tmp_path / "project")
