"""Shared fixtures: one embedded store per test, and the same tests on a real cluster when one is configured.

Tests written against the `db` / `fdbqueue_db` fixtures run once per engine. The `foundationdb`
runs use the cluster the app's pytest plugin provides (``django_fdbqueue.testing.plugin``: the
one FDBQUEUE_TEST_CLUSTER_FILE names, or a local cluster started when FoundationDB's binaries are
found); without one they are skipped with the reason, or fail under FDBQUEUE_TEST_CLUSTER=require.
"""

from __future__ import annotations

import os
import uuid

import pytest

from django_fdbqueue.testing import plugin

ENGINES = ["embedded", pytest.param("foundationdb", marks=pytest.mark.cluster)]
#: Fixtures that inject faults, which only the embedded engine can do: their tests run there only.
EMBEDDED_ONLY_FIXTURES = {"faults", "failing_commits", "sql_statements"}


def cluster_settings(**extra):
    """QueueSettings for the run's cluster (skips, or fails under require, without one)."""
    from django_fdbqueue.conf import QueueSettings

    return QueueSettings(
        engine="foundationdb", cluster_file=plugin.need_cluster(), client_library=plugin.client_library(), **extra
    )


@pytest.fixture(autouse=True)
def _access_cache_dropped():
    """Grants cached for a user of one test are not another's: rolled-back rows send no signals."""
    from django_fdbqueue.access import rules

    rules.forget()
    yield
    rules.forget()


@pytest.fixture(autouse=True)
def _codec_registry_restored():
    """Codecs a test registers are gone after it: the same test on the next engine starts clean."""
    from django_fdbqueue import codecs

    before = codecs.registered()
    yield
    for name in set(codecs.registered()) - set(before):
        codecs.unregister(name)
    for name, codec in before.items():
        if codecs.registered().get(name) is not codec:
            codecs.register(codec)


@pytest.fixture(scope="session")
def _cluster_handle():
    """One handle to the real cluster for the whole run (the binding allows one network per process)."""
    from django_fdbqueue.engines import open_database

    return open_database(cluster_settings(timeout=None))


@pytest.fixture
def cluster_database(_cluster_handle):
    """The run's cluster handle, set back to no timeout and no retry limit for raw-API tests.

    A test may configure it with the app's TIMEOUT (5 s by default): a raw-API test must not
    inherit that.
    """
    from django_fdbqueue.engines.foundationdb import configure

    configure(_cluster_handle, cluster_settings(timeout=None))
    return _cluster_handle


def pytest_generate_tests(metafunc):
    """Engine-parametrized tests run on both engines; those that inject faults on the embedded
    engine only (a cluster has no fault injector), so they are not reported as skipped there."""
    if "engine_name" in metafunc.fixturenames:
        embedded_only = EMBEDDED_ONLY_FIXTURES.intersection(metafunc.fixturenames)
        engines = ["embedded"] if embedded_only else ENGINES
        metafunc.parametrize("engine_name", engines, indirect=True)


@pytest.fixture
def engine_name(request) -> str:
    if request.param == "foundationdb":
        plugin.need_cluster()
    return request.param


@pytest.fixture
def clock(monkeypatch):
    """The service's wall clock, run ahead with ``clock.advance(seconds)`` (see ``tests/clock.py``)."""
    from tests.clock import Clock

    return Clock(monkeypatch)


@pytest.fixture
def still_clock(monkeypatch):
    """The service's wall clock standing still but for ``advance``: for tests whose answer depends
    on how much time passed (token buckets), which a loaded machine's slow steps must not change."""
    from tests.clock import StillClock

    return StillClock(monkeypatch)


@pytest.fixture
def embedded_db(tmp_path):
    """A fresh embedded database in its own file."""
    from django_fdbqueue.engines.embedded import EmbeddedDatabase

    database = EmbeddedDatabase(str(tmp_path / "store.sqlite3"))
    yield database
    database.close()


@pytest.fixture
def db(engine_name, request):
    """A raw database handle of the engine under test; keys go under the `keyspace` fixture."""
    if engine_name == "foundationdb":
        return request.getfixturevalue("cluster_database")
    return request.getfixturevalue("embedded_db")


@pytest.fixture
def keyspace(db):
    """A subspace no other test uses; cleared afterwards so a shared cluster stays clean."""
    from django_fdbqueue.fdbapi import fdb

    space = fdb.Subspace(("fdbqueue-test", uuid.uuid4().hex))
    yield space
    del db[space.range().start : space.range().stop]


@pytest.fixture
def fdbqueue_db(engine_name, tmp_path, settings, request):
    """Point FDBQUEUE at a fresh store (or a fresh ROOT on the cluster) and return the app's handle."""
    with plugin.fresh_store(engine_name, settings, str(tmp_path / "app.sqlite3")) as database:
        yield database


@pytest.fixture
def faults(fdbqueue_db, engine_name):
    """The embedded store's fault injector (switched off again afterwards)."""
    assert engine_name == "embedded", "fault injection is a feature of the embedded engine"
    yield fdbqueue_db.faults
    fdbqueue_db.faults.disable()


def pytest_report_header(config):
    if os.environ.get(plugin.ENV_CLUSTER_FILE):
        return f"fdbqueue: real-cluster tests run against {plugin.ENV_CLUSTER_FILE}"
    return "fdbqueue: real-cluster tests use a local cluster when FoundationDB's binaries are found"


def pytest_terminal_summary(terminalreporter):
    """One line per distinct skip reason, with its count, instead of a line per skipped test."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        if isinstance(report.longrepr, tuple):
            reason = report.longrepr[2].removeprefix("Skipped: ")
        else:
            reason = str(report.longrepr)
        reasons[reason] = reasons.get(reason, 0) + 1
    if reasons:
        terminalreporter.section("skipped, by reason")
        for reason, count in sorted(reasons.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{count:5d}  {reason}")
