"""The README is a front page: short, and every link in it leads somewhere.

Its ```python blocks are run by tests/test_readme_snippets.py; its install instructions point to
the tutorial, which tests/test_tutorial.py runs end to end. Here: the length, the relative links
and images (to a file of the repository, and to a heading of a Markdown page when they name one),
and what the page says about the scripts and the docs' extra.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path
from urllib.parse import unquote, urlsplit

from tests.doc_blocks import REPO

README = REPO / "README.md"
MAX_LINES = 200
# [text](target) and ![alt](target), and <img src="target">; a target has no blanks.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)|<img [^>]*src=\"([^\"]+)\"")


def readme() -> str:
    return README.read_text(encoding="utf-8")


def relative_links(text: str) -> list[str]:
    """The targets that are not URLs with a scheme (https:, mailto:) and not inside code."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    targets = [first or second for first, second in LINK.findall(text)]
    return [target for target in targets if not urlsplit(target).scheme]


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, blanks to '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {github_anchor(heading) for heading in re.findall(r"^#{1,6} +(.+?) *#*$", text, re.M)}


def test_the_readme_is_at_most_200_lines():
    assert len(readme().splitlines()) <= MAX_LINES


def test_every_relative_link_and_image_resolves():
    links = relative_links(readme())
    assert "docs/tutorial.md" in links and "docs/_static/admin-queue.png" in links, links
    for link in links:
        parts = urlsplit(link)
        target = (README.parent / unquote(parts.path)).resolve() if parts.path else README
        assert target.is_relative_to(REPO) and target.exists(), f"{link}: no such file"
        if parts.fragment:
            assert target.suffix == ".md", f"{link}: an anchor into a page that is not Markdown"
            assert parts.fragment in anchors(target), f"{link}: {target.name} has no heading with that anchor"


def test_the_link_checker_sees_links_and_skips_code():
    text = "[a](docs/x.md) ![b](img.png) [c](https://example.com) `[d](no.md)`\n```\n[e](no2.md)\n```\n"
    assert relative_links(text) == ["docs/x.md", "img.png"]
    assert github_anchor("Run the app's test suite against a cluster") == "run-the-apps-test-suite-against-a-cluster"


def test_the_two_commands_and_the_docs_build_exist():
    text = readme()
    for script in ("scripts/demo", "scripts/test", "scripts/test-lowest", ".ci/run"):
        assert script in text and os.access(REPO / script, os.X_OK), script
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert 'pip install -e ".[docs]"' in text and "docs" in extras
    assert "python -m sphinx -W docs docs/_build/html" in text
    assert (REPO / "docs" / "conf.py").is_file()
