"""The how-to guides pasted after the tutorial, as its readers do.

The snippet runner gives each page a fresh ``startproject`` project and an empty store; a reader
who did the tutorial first pastes the guides into the tutorial's project, one after another.
Here:

- every guide's ``# settings.py`` blocks run, in page order, after the tutorial's (a block that
  adds an app the tutorial already added lists it twice, and Django refuses to start);
- every guide's blocks run, in the order of the guides' index, in one project and on one store,
  after the tutorial's steps: a guide that assumes an empty store, its own URLconf, queue names
  no other guide uses, or a reader who pastes a section within seconds of the one before (the
  service's clock runs half a minute on at each section) fails here. A block marked
  ``<!-- howto-chain: skip: WHY -->`` shows a choice, not a step, and is left out of the chain;
- what the guides tell that reader to type (installs from ``mysite/``, a local cluster's
  ``FDB_HOME``) fits where the tutorial leaves them.
"""

from __future__ import annotations

import re
import sys
import tomllib
import types
from pathlib import Path

import pytest

from tests.doc_blocks import REPO, marked_blocks
from tests.docsnippets import blocks, project, python, shell
from tests.docsnippets import page as page_module

TUTORIAL = REPO / "docs" / "tutorial.md"
SETTINGS_BLOCK = re.compile(r"^```python\n(# settings\.py\n.*?)^```", re.S | re.M)
GUIDES = sorted(
    page for page in (REPO / "docs" / "howto").glob("*.md") if SETTINGS_BLOCK.search(page.read_text("utf-8"))
)


def tutorial_settings() -> list[str]:
    blocks = marked_blocks(TUTORIAL, "tutorial-test").values()
    return [block.body for block in blocks if block.language == "python" and block.body.startswith("# settings.py")]


def test_the_tutorial_and_the_guides_have_settings_blocks():
    assert len(tutorial_settings()) >= 2
    assert REPO / "docs" / "howto" / "tasks.md" in GUIDES


@pytest.mark.parametrize("guide", GUIDES, ids=lambda page: page.name)
def test_a_guide_s_settings_paste_after_the_tutorial_s(guide: Path, tmp_path):
    namespace = project.settings_namespace(tmp_path)
    for body in tutorial_settings():
        exec(compile(body, str(TUTORIAL), "exec"), namespace)
    for body in SETTINGS_BLOCK.findall(guide.read_text("utf-8")):
        exec(compile(body, str(guide), "exec"), namespace)
    apps = list(namespace["INSTALLED_APPS"])
    assert sorted({app for app in apps if apps.count(app) > 1}) == [], f"{guide.name} lists an app twice"


# -- every guide's snippets, in the docs' order, in the tutorial's project -----------------------

TOCTREE = re.compile(r"^```\{toctree\}\n(.*?)^```", re.S | re.M)
#: The tutorial's steps the snippet runner can take in this process, in page order. The others
#: (startproject, migrate, runserver, the curl lines piped into python) are stood in for below by
#: what they leave behind: the superuser, its token, and the REST push, claim and ack of step 9.
#: A comment just above a block that shows a choice or an alternative, not a step to paste after
#: the others (the snippet runner still runs it on its page).
CHAIN_SKIP = re.compile(r"<!-- howto-chain: skip: [^>]+ -->")
#: How long the service's clock runs ahead at each section of a guide: a reader who reads the
#: section takes at least this long, so a short lease or delay of a section before it is over.
#: (Within a guide only: the clock of Django's own code, a task's run_after, does not follow.)
READING_SECONDS = 31
TUTORIAL_STEPS = (
    "settings",
    "urls",
    "first-queue",
    "claim-in-python",
    "tokens-settings",
    "tasks-settings",
    "tasks-module",
    "enqueue",
    "result",
)


def guides_in_order() -> list[Path]:
    """The how-to guides as the guides' index lists them (the sidebar's order)."""
    (entries,) = TOCTREE.findall((REPO / "docs" / "howto" / "index.md").read_text("utf-8"))
    names = [line.strip() for line in entries.splitlines() if line.strip() and not line.strip().startswith(":")]
    return [REPO / "docs" / "howto" / f"{name}.md" for name in names]


def test_the_guides_index_lists_every_guide():
    listed = guides_in_order()
    assert sorted(listed) == sorted(p for p in (REPO / "docs" / "howto").glob("*.md") if p.name != "index.md")


def _marker_of(example, text_lines: list[str]) -> str | None:
    above = text_lines[example.parsed.fence_line - 2] if example.parsed.fence_line >= 2 else ""
    found = re.fullmatch(r"<!-- tutorial-test: ([\w-]+) -->", above.strip())
    return found.group(1) if found else None


def _tutorial_done(page, document) -> None:
    """The tutorial's steps, as far as this process can take them, leaving its project's state."""
    from django.contrib.auth import get_user_model

    from django_fdbqueue import service
    from django_fdbqueue.connection import get_database

    text_lines = TUTORIAL.read_text("utf-8").splitlines()
    steps = {_marker_of(example, text_lines): example for example in document.examples()}
    location = f"{TUTORIAL.relative_to(REPO)} (what the steps run elsewhere leave)"
    (page.modules_dir / "myapp").mkdir()  # step 2's startapp
    (page.modules_dir / "myapp" / "__init__.py").touch()
    for name in TUTORIAL_STEPS:
        if name == "tokens-settings":  # step 8's commands: a superuser, and step 9's token and calls
            get_user_model().objects.create_superuser("admin", "admin@example.com", "tutorial-password")
        if name == "enqueue":  # step 9's REST calls, made by the API's own code
            db = get_database()
            service.push(db, "jobs", {"job": "thumbnail", "photo": 18}, priority=7)
            service.ack(db, service.claim(db, "jobs", end="max").receipt)
            shell.run(page, "TOKEN=$(python manage.py fdbqueue token create admin)", location)
        example = steps[name]
        example.namespace = page.namespace
        example.evaluate()
        if name == "enqueue":  # step 11's worker, taking the task at once
            code, output = shell.run(page, "python manage.py fdbqueue worker --tasks --burst", location)
            assert code == 0, output


class ReadersClock:
    """The service's wall clocks (``now_micros``, wherever the app's modules imported it),
    ``ahead_us`` ahead of the real one."""

    def __init__(self, monkeypatch) -> None:
        import importlib
        import pkgutil

        from django_fdbqueue.service import activity, records

        self.ahead_us = 0
        clocks = (records.now_micros, activity.now_micros)  # the activity counters' buckets have their own
        names = []
        for package in ("service", "schedules", "tasks", "worker"):
            top = importlib.import_module(f"django_fdbqueue.{package}")
            names += [info.name for info in pkgutil.walk_packages(top.__path__, f"{top.__name__}.")]
        for name in names:
            module = importlib.import_module(name)
            real = getattr(module, "now_micros", None)
            if real in clocks:
                monkeypatch.setattr(module, "now_micros", lambda real=real: real() + self.ahead_us)

    def advance(self, seconds: float) -> None:
        self.ahead_us += int(seconds * 1e6)


def _route_names(page) -> set[str]:
    """The URL names the project's URLconf resolves (those without arguments, as the runner checks)."""
    from django.urls import URLResolver
    from django.urls.resolvers import RegexPattern

    return set(python._plain_names(URLResolver(RegexPattern(r"^/"), page.urls_module).url_patterns))


def _new_session(page, guide: Path) -> None:
    """A new shell and Python session for the next guide (the project and its store stay)."""
    page.module = types.ModuleType(f"docs_snippets_chain_{guide.stem}_{id(page)}")
    page.module.__file__ = str(guide)
    page.namespace = page.module.__dict__
    sys.modules[page.module.__name__] = page.module
    page.module_names.add(page.module.__name__)
    page.variables.clear()
    page.environment.clear()


@pytest.mark.django_db
def test_every_guide_pastes_after_the_tutorial_and_the_guides_before_it(
    fdbqueue_engine, settings, tmp_path, monkeypatch
):
    """A newcomer who did the tutorial pastes the guides, in the docs' order, into its project:
    one project, one store, one user table, each guide in a new shell. A guide that assumes an
    empty store, its own URLconf, or a lease of a guide before it fails here (the snippet runner
    gives each page a project and a store of its own)."""
    from django_fdbqueue.testing import plugin

    clock = ReadersClock(monkeypatch)

    with plugin.fresh_store(fdbqueue_engine, settings, str(tmp_path / "fdbqueue.sqlite3")):
        tutorial = blocks.parse(TUTORIAL, page_module.evaluate)
        with page_module.Page(TUTORIAL, tmp_path / "project") as page:
            tutorial.page = page  # type: ignore[attr-defined]
            _tutorial_done(page, tutorial)
            mounted = _route_names(page)
            for guide in guides_in_order():
                if blocks.opted_out(guide.read_text("utf-8")):
                    continue
                _new_session(page, guide)
                document = blocks.parse(guide, page_module.evaluate)
                document.page = page  # type: ignore[attr-defined]
                document.namespace = page.namespace
                text_lines = guide.read_text("utf-8").splitlines()
                last_line = 0
                clock.ahead_us = 0  # what the wall clock says (the tasks' run_after reads it)
                for example in document.examples():
                    if CHAIN_SKIP.fullmatch(text_lines[example.parsed.fence_line - 2].strip()):
                        continue
                    if any(line.startswith("## ") for line in text_lines[last_line : example.parsed.fence_line]):
                        clock.advance(READING_SECONDS)  # a new section: the reader took a while
                    last_line = example.parsed.fence_line
                    example.namespace = page.namespace
                    example.evaluate()
                routes = _route_names(page)
                assert mounted <= routes, f"after {guide.name}, {sorted(mounted - routes)} no longer resolve"
                mounted |= routes


# -- what the guides tell a reader in the tutorial's project to type --------------------------------

PIP_INSTALL = re.compile(r"pip install -e \"(?P<path>[^\"\[]+)\[(?P<extras>[\w,]+)\]\"")


def test_the_guides_install_the_app_from_where_the_tutorial_leaves_the_reader():
    """Every command of the guides runs in ``mysite/`` (the tutorial says so), and the clone is the
    folder beside it: an install from ``./django-fdbqueue`` there fails. The extras must exist."""
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"])
    found = []
    for guide in guides_in_order():
        for match in PIP_INSTALL.finditer(guide.read_text("utf-8")):
            found.append(guide.name)
            assert match["path"] == "../django-fdbqueue", f"{guide.name}: {match[0]}"
            assert set(match["extras"].split(",")) <= extras, f"{guide.name}: {match[0]}"
    assert {"tasks.md", "metrics.md", "upgrading.md", "production.md"} <= set(found)


def test_the_production_guide_installs_gunicorn_and_collects_static_files_before_serving_asgi():
    text = (REPO / "docs" / "howto" / "production.md").read_text("utf-8")
    install = text.index('pip install -e "../django-fdbqueue[production]"')
    assert install < text.index("gunicorn mysite.wsgi"), "gunicorn is run before the page installs it"
    assert text.index("## Serve the static files") < text.index("## Serve many long polls: ASGI")
    static = text[text.index("## Serve the static files") :].split("\n## ", 1)[0]
    assert "gunicorn and uvicorn never serve static files" in static


def test_a_guide_that_starts_a_local_cluster_says_where_its_binaries_come_from():
    """``scripts/fdb-cluster start`` finds nothing without FDB_HOME unless FoundationDB is on PATH
    or installed by its packages: the page's first block that starts one exports it first."""
    fence = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)
    firsts = {}
    for guide in guides_in_order():
        for block in fence.findall(guide.read_text("utf-8")):
            if "scripts/fdb-cluster start" in block:
                firsts.setdefault(guide.name, block)
    assert "cluster.md" in firsts
    for name, block in firsts.items():
        before = block[: block.index("scripts/fdb-cluster start")]
        assert "export FDB_HOME=" in before, f"{name}: {block}"
