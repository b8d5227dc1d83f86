"""The process-wide database handle: lazy, one per process under contention, and resettable."""

from __future__ import annotations

import threading
import uuid

import pytest
from django.core.exceptions import ImproperlyConfigured

from django_fdbqueue import connection, engines
from django_fdbqueue.conf import QueueSettings, get_settings
from django_fdbqueue.engines.foundationdb import client_library_error
from django_fdbqueue.fdbapi import fdb

NO_CLIENT_LIBRARY = client_library_error() is not None
THREADS = 16
WAIT = 60  # seconds: a bound on every wait, generous for a loaded two-core machine


@pytest.fixture
def store(settings, tmp_path):
    """FDBQUEUE pointed at a fresh embedded file, with no handle open yet."""
    path = tmp_path / "conn.sqlite3"
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(path)}
    connection.reset_database()
    yield path
    connection.reset_database()


@pytest.fixture
def opened(monkeypatch):
    """Record every real engine open the connection layer makes."""
    calls: list[QueueSettings] = []
    real_open = connection.open_database

    def counting_open(conf: QueueSettings):
        calls.append(conf)
        return real_open(conf)

    monkeypatch.setattr(connection, "open_database", counting_open)
    return calls


def test_opened_lazily_once(store, opened):
    assert opened == []  # resetting or configuring opens nothing
    database = connection.get_database()
    assert connection.get_database() is database
    assert opened == [get_settings()]


def test_threads_racing_for_the_first_use_share_one_handle(store, opened):
    barrier = threading.Barrier(THREADS)
    results: list[object] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def use() -> None:
        try:
            barrier.wait(timeout=WAIT)  # everyone asks at once
            database = connection.get_database()
            with lock:
                results.append(database)
        except BaseException as exc:  # reported below, not lost in the thread
            with lock:
                errors.append(exc)

    threads = [threading.Thread(target=use) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    assert len(results) == THREADS
    assert all(database is results[0] for database in results)
    assert len(opened) == 1


def test_reset_opens_a_new_handle_on_next_use(store, opened):
    first = connection.get_database()
    first[b"kept"] = b"across handles"
    connection.reset_database()
    connection.reset_database()  # harmless when nothing is open
    second = connection.get_database()
    assert second is not first
    assert len(opened) == 2
    # Same file, so committed data is still there.
    assert second[b"kept"] == b"across handles"


def test_reset_closes_the_old_handle(store):
    database = connection.get_database()
    closed = threading.Event()
    real_close = database.close

    def close() -> None:
        closed.set()
        real_close()

    database.close = close
    connection.reset_database()
    assert closed.is_set()


def test_changing_fdbqueue_switches_to_the_new_store(store, settings, tmp_path, opened):
    first = connection.get_database()
    first[b"only-in-first"] = b"1"
    settings.FDBQUEUE = {"ENGINE": "embedded", "PATH": str(tmp_path / "other.sqlite3")}
    second = connection.get_database()
    assert second is not first
    assert opened[-1].path == str(tmp_path / "other.sqlite3")
    assert second[b"only-in-first"] is None  # a database read returns bytes or None, as in the binding


def test_unusable_settings_raise_on_first_use(settings):
    settings.FDBQUEUE = {"ENGINE": "redis"}
    with pytest.raises(ImproperlyConfigured, match="fdbqueue.E002"):
        connection.get_database()


def test_unknown_engine_in_direct_settings():
    with pytest.raises(ImproperlyConfigured, match="Unknown FDBQUEUE\\['ENGINE'\\] 'redis'"):
        engines.open_database(QueueSettings(engine="redis"))


def test_root_subspace_follows_the_setting(settings):
    settings.FDBQUEUE = {}
    assert connection.root_subspace().key() == fdb.tuple.pack(("fdbqueue",))
    settings.FDBQUEUE = {"ROOT": ("tenant", 7)}
    space = connection.root_subspace()
    assert space.key() == fdb.tuple.pack(("tenant", 7))
    assert space.pack(("q",)) == fdb.tuple.pack(("tenant", 7, "q"))


@pytest.mark.skipif(not NO_CLIENT_LIBRARY, reason="the FoundationDB client library is installed here")
class TestFoundationDBWithoutClientLibrary:
    """On a machine without libfdb_c, the real engine says what to install, every time."""

    def test_get_database_raises_improperly_configured(self, settings):
        settings.FDBQUEUE = {"ENGINE": "foundationdb"}
        for _ in range(2):  # no half-open handle is left behind
            with pytest.raises(ImproperlyConfigured) as caught:
                connection.get_database()
            message = str(caught.value)
            assert "install the foundationdb client packages" in message.lower()
            assert "'embedded'" in message
        assert connection._database is None

    def test_engine_raises_even_though_fdbapi_defused_the_versionstamp_trap(self):
        # fdbapi gives the fdb package a stand-in `impl` attribute; it must not pass for the library.
        assert hasattr(fdb, "impl")
        with pytest.raises(ImproperlyConfigured, match="client packages"):
            engines.open_database(QueueSettings(engine="foundationdb"))
        assert not fdb.is_api_version_selected()


@pytest.mark.cluster
class TestFoundationDBCluster:
    """Against a real cluster (FDBQUEUE_TEST_CLUSTER_FILE): options applied, one API version."""

    def test_open_applies_settings_and_round_trips(self, cluster_database):
        from tests.conftest import cluster_settings

        # A handle of the engine's own (never the binding's shared one): the options stay on it.
        database = engines.open_database(cluster_settings(timeout=2.0, retry_limit=5))
        key = fdb.tuple.pack(("fdbqueue-test", uuid.uuid4().hex))
        try:
            database[key] = b"v"
            assert database[key] == b"v"
        finally:
            del database[key]

    def test_a_second_api_version_is_refused_clearly(self, cluster_database):
        from tests.conftest import cluster_settings

        with pytest.raises(ImproperlyConfigured, match="already selected"):
            engines.open_database(cluster_settings(api_version=720))
