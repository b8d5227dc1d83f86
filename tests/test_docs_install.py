"""One install story: the package is not on PyPI, so every page installs it from a clone.

The story is written once, in the front page's Install section (``docs/index.md``); the README,
the tutorial and the guides install the same way. A ``pip install`` that names the package as if
an index had it (``pip install "django-fdbqueue[tasks]"``) contradicts it and fails here.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PIP_INSTALL = re.compile(r"\bpip3? install\b([^\n`]*)")
APP_BY_NAME = re.compile(r"django[-_]fdbqueue\b", re.I)


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)]


def contradicting_lines(text: str) -> list[str]:
    """The pip install lines of ``text`` that ask an index for the package by its name."""
    found = []
    for match in PIP_INSTALL.finditer(text):
        try:
            arguments = shlex.split(match.group(1), comments=True)
        except ValueError:  # an unbalanced quote: the prose around an inline command
            arguments = match.group(1).replace('"', " ").replace("'", " ").split()
        if any(APP_BY_NAME.match(argument) for argument in arguments if not argument.startswith("-")):
            found.append(match.group(0).strip())
    return found


def test_the_checker_tells_a_clone_from_an_index():
    assert contradicting_lines('pip install "django-fdbqueue[tasks]"') != []
    assert contradicting_lines("pip install --upgrade django_fdbqueue") != []
    assert contradicting_lines('(`pip install "django-fdbqueue[tokens]"`), then') != []
    assert contradicting_lines('pip install -e "./django-fdbqueue[tasks]"   # from a clone') == []
    assert contradicting_lines('pip install -e ".[docs]"\npip install drf-spectacular') == []


def test_no_page_installs_the_package_from_an_index():
    offending = {str(page.relative_to(ROOT)): lines for page in pages()
                 if (lines := contradicting_lines(page.read_text(encoding="utf-8")))}
    assert offending == {}, "install from a clone, as docs/index.md#install says"


def test_the_story_is_written_once_and_the_readme_and_tutorial_follow_it():
    front = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "(install)=\n## Install" in front and "not on PyPI" in front
    assert 'pip install -e "./django-fdbqueue[' in front
    assert "docs/index.md#install" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install -e "./django-fdbqueue[' in (DOCS / "tutorial.md").read_text(encoding="utf-8")
