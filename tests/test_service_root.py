"""The ROOT travels with the database handle: the service reads it from what it is given.

The engines attach FDBQUEUE['ROOT'] to every handle they open (``fdbapi.attach_root``), so two
stores under different ROOTs never see each other's queues, whatever the settings say when the
handle is used. A handle opened elsewhere (a project's own ``fdb.open()``) means the configured
ROOT, as before.
"""

from __future__ import annotations

import uuid

import pytest

from django_fdbqueue import engines, service
from django_fdbqueue.conf import QueueSettings
from django_fdbqueue.engines.embedded import EmbeddedDatabase
from django_fdbqueue.fdbapi import fdb, root_of, transactional


def _keys_under(db, root: tuple) -> list[bytes]:
    space = fdb.Subspace(root).range()
    return [bytes(kv.key) for kv in db.get_range(space.start, space.stop)]


@pytest.fixture
def two_roots(tmp_path):
    """Two handles on one embedded file, opened under different ROOTs."""
    path = str(tmp_path / "shared.sqlite3")
    first = engines.open_database(QueueSettings(engine="embedded", path=path, root=("first",)))
    second = engines.open_database(QueueSettings(engine="embedded", path=path, root=("second",)))
    yield first, second
    first.close()
    second.close()


def test_each_handle_keeps_the_root_it_was_opened_with(two_roots, settings):
    first, second = two_roots
    settings.FDBQUEUE = {"ROOT": ("neither",)}  # the settings of the moment do not matter
    service.create_queue(first, "jobs")
    service.push(first, "jobs", {"n": 1})
    assert service.queue_exists(first, "jobs")
    assert not service.queue_exists(second, "jobs")
    assert _keys_under(first, ("first",)) and not _keys_under(first, ("second",))
    assert not _keys_under(first, ("neither",))


def test_a_transaction_uses_the_root_of_its_handle(two_roots):
    first, second = two_roots
    service.create_queue(second, "jobs")

    @transactional
    def push_two(tr):
        assert root_of(tr).key() == fdb.tuple.pack(("second",))
        service.push(tr, "jobs", "a")
        service.push(tr, "jobs", "b")

    push_two(second)
    assert service.size(second, "jobs") == 2
    assert [item.value for item in service.pop_many(second, "jobs", 2)] == ["a", "b"]


def test_a_handle_opened_elsewhere_uses_the_configured_root(tmp_path, settings):
    settings.FDBQUEUE = {"ROOT": ("configured", 1)}
    db = EmbeddedDatabase(str(tmp_path / "own.sqlite3"))  # not through the engines: no root attached
    try:
        assert root_of(db) is None
        service.create_queue(db, "jobs")
        service.push_many(db, "jobs", ["a", "b"])
        assert _keys_under(db, ("configured", 1))
        assert service.size(db, "jobs") == 2
    finally:
        db.close()


@pytest.mark.cluster
def test_handles_on_one_cluster_keep_their_own_roots():
    """The binding shares one handle per cluster file; the engine opens one of its own each time."""
    from tests.conftest import cluster_settings

    roots = [("fdbqueue-test", uuid.uuid4().hex), ("fdbqueue-test", uuid.uuid4().hex)]
    first, second = (engines.open_database(cluster_settings(root=root)) for root in roots)
    assert first is not second
    try:
        service.create_queue(first, "jobs")
        assert not service.queue_exists(second, "jobs")
        assert _keys_under(first, roots[0]) and not _keys_under(first, roots[1])
    finally:
        for root in roots:
            space = fdb.Subspace(root).range()
            del first[space.start : space.stop]
