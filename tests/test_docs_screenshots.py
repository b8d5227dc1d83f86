"""scripts/docs-screenshots: the script that retakes the docs' admin screenshots.

Taking them needs Chromium and a demo server, and a person to look at the result, so the suite
does not run it; it checks that the script answers --help and refuses what it does not know, and
that the admin screenshots the docs ship are exactly the ones it takes, at a reasonable size.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys

from tests.doc_blocks import REPO

SCRIPT = REPO / "scripts" / "docs-screenshots"
STATIC = REPO / "docs" / "_static"
MAX_BYTES = 300 * 1024


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def _script():
    loader = importlib.machinery.SourceFileLoader("docs_screenshots", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_help_says_what_it_writes_and_bad_options_are_refused():
    done = _run("--help")
    assert done.returncode == 0, done.stderr
    assert "--out" in done.stdout and "--chromium" in done.stdout and "admin" in done.stdout
    done = _run("--no-such-option")
    assert done.returncode == 2 and "unrecognized arguments: --no-such-option" in done.stderr


def test_the_docs_admin_screenshots_are_the_ones_it_takes():
    taken = {name for name, _ in _script().PAGES}
    assert taken == {path.name for path in STATIC.glob("admin-*.png")}
    for name in taken:
        data = (STATIC / name).read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) < MAX_BYTES, (name, len(data))
