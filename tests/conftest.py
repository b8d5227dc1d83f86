"""Shared fixtures: one embedded store per test, and the same tests on a real cluster when one is configured.

Tests written against the `db` / `fdbqueue_db` fixtures run once per engine. The `foundationdb`
parameter runs only when FDBQUEUE_TEST_CLUSTER_FILE names a cluster file; otherwise it is skipped
with the reason, so a plain run says plainly what it did not cover.
"""

from __future__ import annotations

import os
import uuid

import pytest

CLUSTER_FILE = os.environ.get("FDBQUEUE_TEST_CLUSTER_FILE") or None
NO_CLUSTER = (
    "FDBQUEUE_TEST_CLUSTER_FILE is not set: tests against a real FoundationDB cluster "
    "need its client library and a cluster file"
)
ENGINES = ["embedded", pytest.param("foundationdb", marks=pytest.mark.cluster)]


def cluster_settings(**extra):
    from django_fdbqueue.conf import QueueSettings

    return QueueSettings(engine="foundationdb", cluster_file=CLUSTER_FILE, **extra)


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
    if not CLUSTER_FILE:
        pytest.skip(NO_CLUSTER)
    from django_fdbqueue.engines import open_database

    return open_database(cluster_settings(timeout=None))


@pytest.fixture
def cluster_database(_cluster_handle):
    """The shared cluster handle, set back to no timeout and no retry limit for raw-API tests.

    The binding hands out one handle per cluster file, and app tests configure it with the app's
    TIMEOUT (5 s by default): a raw-API test must not inherit that.
    """
    from django_fdbqueue.engines.foundationdb import configure

    configure(_cluster_handle, cluster_settings(timeout=None))
    return _cluster_handle


@pytest.fixture(params=ENGINES)
def engine_name(request) -> str:
    if request.param == "foundationdb" and not CLUSTER_FILE:
        pytest.skip(NO_CLUSTER)
    return request.param


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
    from django_fdbqueue import connection

    root = ("fdbqueue-test", uuid.uuid4().hex)
    if engine_name == "foundationdb":
        settings.FDBQUEUE = {"ENGINE": "foundationdb", "CLUSTER_FILE": CLUSTER_FILE, "ROOT": root}
    else:
        settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "app.sqlite3"), "ROOT": root}
    connection.reset_database()
    database = connection.get_database()
    yield database
    if engine_name == "foundationdb":
        from django_fdbqueue.fdbapi import fdb

        space = fdb.Subspace(root)
        del database[space.range().start : space.range().stop]
    connection.reset_database()


@pytest.fixture
def faults(fdbqueue_db, engine_name):
    """The embedded store's fault injector (switched off again afterwards); skipped on a real cluster."""
    if engine_name != "embedded":
        pytest.skip("fault injection is a feature of the embedded engine")
    yield fdbqueue_db.faults
    fdbqueue_db.faults.disable()


def pytest_report_header(config):
    if CLUSTER_FILE:
        return "fdbqueue: real-cluster tests run against FDBQUEUE_TEST_CLUSTER_FILE"
    return "fdbqueue: real-cluster tests are skipped (FDBQUEUE_TEST_CLUSTER_FILE is not set)"


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
