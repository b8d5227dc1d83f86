"""One install story: the package is not on PyPI, so every page installs it from a clone.

The story is written once, in the front page's Install section (``docs/index.md``): a wheel built
from a clone, or the clone itself. The README, the tutorial and the guides link there and install
the same way. A page that promises an index instead fails here: an installer command that names
the package (``pip install "django-fdbqueue[tasks]"``, ``uv add django-fdbqueue``), a requirement
line pinning it (``django-fdbqueue>=0.1``), or prose sending the reader to PyPI.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PIP_INSTALL = re.compile(r"\b(?:pip3? install|uv add|poetry add|pipenv install|pdm add|pipx install)\b([^\n`]*)")
APP_BY_NAME = re.compile(r"django[-_]fdbqueue\b", re.I)
# A requirement line (requirements.txt, pyproject's dependencies) that asks an index for a version.
PINNED = re.compile(r"""^[\s"'-]*(django[-_]fdbqueue(?:\[[\w,\s]*\])?\s*(?:==|>=|~=|<=|!=|<|>)[^\n]*)""", re.I | re.M)
# Prose sending the reader to PyPI for the app (the Install section says it is *not* there).
TO_PYPI = re.compile(r"(?<!not )\b(?:from|on|via) PyPI\b|pypi\.org/project/django[-_]fdbqueue", re.I)
INSTALL_LINK = re.compile(r"\]\((?:\.\./)*(?:docs/)?index\.md#install\)")


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
    found += [match.group(1).strip() for match in PINNED.finditer(text)]
    found += [match.group(0) for match in TO_PYPI.finditer(text)]
    return found


def installs_the_app(text: str) -> bool:
    """Whether ``text`` has a pip install of the app (from a clone or a wheel built from it)."""
    return any(APP_BY_NAME.search(match.group(1)) for match in PIP_INSTALL.finditer(text))


def test_the_checker_tells_a_clone_from_an_index():
    assert contradicting_lines('pip install "django-fdbqueue[tasks]"') != []
    assert contradicting_lines("pip install --upgrade django_fdbqueue") != []
    assert contradicting_lines('(`pip install "django-fdbqueue[tokens]"`), then') != []
    assert contradicting_lines('pip install -e "./django-fdbqueue[tasks]"   # from a clone') == []
    assert contradicting_lines('pip install -e ".[docs]"\npip install drf-spectacular') == []
    assert contradicting_lines('pip install "./django-fdbqueue/dist/django_fdbqueue-1.0-py3-none-any.whl[tasks]"') == []
    assert contradicting_lines("uv add 'django-fdbqueue[tasks]'") != []
    assert contradicting_lines("poetry add django-fdbqueue") != []
    assert contradicting_lines("```text\ndjango-fdbqueue[tasks]>=0.1\nDjango>=4.2\n```") != []
    assert contradicting_lines('dependencies = [\n    "django-fdbqueue>=0.1",\n]') != []
    assert contradicting_lines("Install it from PyPI with the extras you need.") != []
    assert contradicting_lines("See https://pypi.org/project/django-fdbqueue/ for releases.") != []
    assert contradicting_lines("django-fdbqueue is **not on PyPI yet**; croniter is on PyPI.") != []
    assert contradicting_lines("django-fdbqueue is **not on PyPI yet**.") == []
    assert contradicting_lines("[croniter](https://pypi.org/project/croniter/)") == []


def test_no_page_installs_the_package_from_an_index():
    offending = {
        str(page.relative_to(ROOT)): lines
        for page in pages()
        if (lines := contradicting_lines(page.read_text(encoding="utf-8")))
    }
    assert offending == {}, "install from a clone, as docs/index.md#install says"


def test_the_story_is_written_once_and_the_readme_and_tutorial_follow_it():
    front = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "(install)=\n## Install" in front and "not on PyPI" in front
    assert 'pip install -e "./django-fdbqueue[' in front
    assert "docs/index.md#install" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert 'pip install -e "./django-fdbqueue[' in (DOCS / "tutorial.md").read_text(encoding="utf-8")


def test_every_page_that_installs_the_app_links_to_the_story():
    unlinked = [
        str(page.relative_to(ROOT))
        for page in pages()
        if page != DOCS / "index.md"
        and installs_the_app(text := page.read_text(encoding="utf-8"))
        and not INSTALL_LINK.search(text)
    ]
    assert unlinked == [], "link to Install (index.md#install) where the page installs the app"


def test_only_the_front_pages_say_where_the_app_comes_from():
    """The install story itself ("not on PyPI", how to build the wheel) is in docs/index.md, and
    in a line of the README that points there; no other page repeats it."""
    repeating = [
        str(page.relative_to(ROOT))
        for page in pages()
        if page not in (DOCS / "index.md", ROOT / "README.md")
        and re.search(r"not on PyPI|python -m build", page.read_text(encoding="utf-8"), re.I)
    ]
    assert repeating == []


def test_the_wheel_the_story_installs_is_this_version():
    """The Install section builds the wheel and names the file that build writes."""
    from django_fdbqueue import __version__

    front = (DOCS / "index.md").read_text(encoding="utf-8")
    assert "python -m build django-fdbqueue" in front
    wheels = re.findall(r"django_fdbqueue-[\w.]+-py3-none-any\.whl", front)
    assert wheels == [f"django_fdbqueue-{__version__}-py3-none-any.whl"]


def test_the_changes_page_follows_its_release_format():
    """Every release section is "VERSION (YYYY-MM-DD)" opening with its upgrade notes; what is
    not released yet is "This release". The format is written at the top of the page."""
    text = (DOCS / "reference" / "changes.md").read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)  # the format's own example
    sections = re.split(r"^## ", text, flags=re.M)[1:]
    assert sections[0].startswith("How a release is written here")
    for section in sections[1:]:
        heading, _, body = section.partition("\n")
        if heading != "This release":
            assert re.fullmatch(r"\d+\.\d+\.\d+ \(\d{4}-\d{2}-\d{2}\)", heading), heading
            assert body.lstrip().startswith("### Upgrade notes"), heading
