"""The guides can be followed one after another in one project: no two create the same queue, and
every command names the tutorial's project (``mysite``)."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: Pages whose queues live in a test's fresh store, not in the reader's project.
OWN_STORE = {"howto/testing.md"}
CREATES = (
    re.compile(r"create_queue\(\s*[^,()]+(?:\([^()]*\))?,\s*\"([\w.-]+)\""),  # service.create_queue(db, "name"
    re.compile(r"fdbqueue create ([\w.-]+)"),  # manage.py fdbqueue create name
    re.compile(r"-d '\{\"name\": \"([\w.-]+)\"[^']*' \S*/api/queues/\s*$"),  # POST /api/queues/
)


def _pages() -> list[Path]:
    return [DOCS / "tutorial.md", *sorted((DOCS / "howto").glob("*.md"))]


def created_queues() -> dict[str, list[str]]:
    """Queue name -> the pages (tutorial and guides) that create it."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in _pages():
        page = path.relative_to(DOCS).as_posix()
        if page in OWN_STORE:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            for pattern in CREATES:
                for name in pattern.findall(line):
                    if page not in found[name]:
                        found[name].append(page)
    return found


def test_the_finder_sees_each_way_a_guide_creates_a_queue():
    found = created_queues()
    assert "howto/schedules.md" in found["scheduled-reports"]  # create_queue
    assert "howto/workers.md" in found["outbox"]  # fdbqueue create
    assert "howto/rest-api.md" in found["images"]  # POST /api/queues/
    assert "tutorial.md" in found["jobs"]


def test_no_two_guides_create_the_same_queue():
    clashes = {name: pages for name, pages in created_queues().items() if len(pages) > 1}
    assert clashes == {}, (
        f"queues created by several pages (the second fails in a project that followed the first): {clashes}"
    )


def test_the_docs_name_the_tutorial_project():
    """The tutorial's project is ``mysite``; a guide's commands (gunicorn mysite.wsgi, ...) use it too."""
    named = [
        f"{path.relative_to(DOCS)}:{number}"
        for path in DOCS.rglob("*.md")
        if "_build" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "myproject" in line
    ]
    assert named == []
