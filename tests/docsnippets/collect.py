"""pytest collection of the docs' pages: one test per page and engine.

Why not Sybil's own pytest integration: it makes one test per block and gives each block its
own fixtures, so a store fixture would be a new, empty store for every block of a page, and
it cannot parametrise. A page is one story told in order, so here a page is one test, run once
per engine (``embedded``, and ``foundationdb`` marked ``cluster``, as the app's plugin does:
``--fdbqueue-engines`` chooses, and a run without a cluster skips it or, under
``--fdbqueue-cluster=require``, fails it). The store is the plugin's ``fresh_store``; the
``settings`` and ``tmp_path`` fixtures and the ``django_db`` marker come from pytest and
pytest-django as for any test. Sybil still reads the page and evaluates its blocks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _pytest import fixtures
from _pytest.fixtures import FuncFixtureInfo

from django_fdbqueue.testing import plugin

from .blocks import opted_out
from .errors import SnippetFailure
from .page import run_page

FIXTURES = ("settings", "tmp_path")


def engines(config: pytest.Config) -> list[str]:
    chosen = config.getoption("--fdbqueue-engines", None)
    return [name.strip() for name in chosen.split(",")] if chosen else list(plugin.ENGINES)


class DocPage(pytest.File):
    """A Markdown page of the docs: its tests, one per engine (none if it opts out)."""

    def collect(self) -> Any:
        if opted_out(self.path.read_text(encoding="utf-8")):
            return
        for engine in engines(self.config):
            yield PageSnippets.from_parent(self, name=f"snippets[{engine}]", engine=engine)


class PageSnippets(pytest.Item):
    """Every block of one page, in order, on one engine's fresh store."""

    def __init__(self, *, engine: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.engine = engine
        self.add_marker(pytest.mark.django_db)
        if engine == "foundationdb":
            self.add_marker(pytest.mark.cluster)
        self._request_fixtures(list(FIXTURES))

    def _request_fixtures(self, names: list[str]) -> None:
        """What pytest does for a test function's arguments (as Sybil's items do, plus autouse)."""
        manager = self.session._fixturemanager
        # Autouse fixtures too (pytest-django's, which apply the django_db marker).
        initial = tuple(dict.fromkeys([*manager._getautousenames(self), *names]))
        closure, definitions = manager.getfixtureclosure(initialnames=initial, parentnode=self, ignore_args=set())
        self._fixtureinfo = FuncFixtureInfo(
            argnames=tuple(names), initialnames=initial, names_closure=closure, name2fixturedefs=definitions
        )
        self.fixturenames = closure
        self.funcargs: dict[str, Any] = {}
        self._request = fixtures.TopRequest(pyfuncitem=self, _ispytest=True)  # type: ignore[arg-type]

    def setup(self) -> None:
        self._request._fillfixtures()

    def runtest(self) -> None:
        settings, tmp_path = self.funcargs["settings"], self.funcargs["tmp_path"]
        with plugin.fresh_store(self.engine, settings, str(tmp_path / "fdbqueue.sqlite3")):
            run_page(self.path, tmp_path / "project")

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, SnippetFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, f"{os.path.relpath(self.path)} on {self.engine}"


def should_collect(path: Path, docs: Path, excluded: set[str]) -> bool:
    """A page of the docs, except the build output and the pages run elsewhere."""
    relative = path.relative_to(docs)
    return (
        path.suffix == ".md"
        and not any(part.startswith("_") for part in relative.parts[:-1])
        and relative.as_posix() not in excluded
    )
