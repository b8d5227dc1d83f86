"""The README's ```python and ```console blocks, run like the docs' pages (``tests/docsnippets``):
in order, against a fresh store, on both engines. (The README is not under ``docs/``, whose
conftest collects the pages, so it gets this test.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docsnippets import run_page

README = Path(__file__).resolve().parents[1] / "README.md"
#: The README's blocks that run (its ```bash blocks do not). A block added or removed changes it.
EXPECTED_BLOCKS = 1


@pytest.mark.django_db
def test_readme_snippets(fdbqueue_store, tmp_path):
    """Every runnable block ran: none skipped by an opt-out or a language the runner misreads."""
    fenced = re.findall(r"^```(?:python|console)[ \t]*$", README.read_text(encoding="utf-8"), re.MULTILINE)
    assert run_page(README, tmp_path / "project") == EXPECTED_BLOCKS == len(fenced)
