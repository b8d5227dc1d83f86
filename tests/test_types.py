"""Users' typed code type-checks against the public Python API (issue 32: types users can lean on).

mypy --strict runs on two small files of a user's code under tests/typecheck/: the correct uses
must give no error, and every line of the misuses marked ``# error:`` must give one. Imports of the
app are followed silently (its own errors are scripts/check-release's business), so the files are
checked against the app's annotations as a user's type checker sees them, from the source tree or
the installed wheel (py.typed).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FILES = HERE / "typecheck"
ROOT = HERE.parent
MYPY_SECONDS = 240

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("mypy") is None, reason="mypy is not installed (it is in the test extra)"
)

# Not the project's [tool.mypy]: no Django plugin (the lowest-versions run has no django-stubs),
# and the strict flags on the user's files only.
CONFIG = """\
[mypy]
python_version = 3.11
strict = True
follow_imports = silent
ignore_missing_imports = True
"""


def run_mypy(tmp_path: Path, target: Path) -> tuple[int, list[str]]:
    """mypy's exit status and its error lines for ``target``, with a fresh cache of its own."""
    config = tmp_path / "mypy.ini"
    config.write_text(CONFIG)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--no-error-summary",
            "--show-error-codes",
            str(target),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=MYPY_SECONDS,
    )
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    return done.returncode, errors


def test_typed_uses_of_the_api_pass_mypy_strict(tmp_path: Path) -> None:
    status, errors = run_mypy(tmp_path, FILES / "uses_api.py")
    assert errors == [] and status == 0, "\n".join(errors)


def test_misuses_of_the_api_are_reported_on_their_lines(tmp_path: Path) -> None:
    target = FILES / "misuses_api.py"
    marked = {n for n, line in enumerate(target.read_text().splitlines(), 1) if "  # error:" in line}
    status, errors = run_mypy(tmp_path, target)
    reported = {int(m.group(1)) for m in (re.search(r":(\d+): error:", e) for e in errors) if m}
    assert status == 1
    assert reported == marked, "\n".join(errors)
