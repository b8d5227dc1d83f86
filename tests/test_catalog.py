"""The catalog's cached entries: stale never, and no conflict with unrelated catalog changes."""

from __future__ import annotations

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueNotFound
from django_fdbqueue.fdbapi import FDBError


def test_an_operation_does_not_conflict_with_another_queue_being_created(fdbqueue_db):
    """Reading the metadata version must not make every operation conflict with every create."""
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "warm")  # the entry is now cached
    tr = fdbqueue_db.create_transaction()
    service.push(tr, "jobs", "in flight")
    service.create_queue(fdbqueue_db, "other")  # bumps the metadata version meanwhile
    tr.commit().wait()  # 1020 if the version was read with an ordinary read
    assert [service.pop(fdbqueue_db, "jobs").value for _ in range(2)] == ["warm", "in flight"]


def test_an_operation_still_conflicts_with_its_own_queue_being_deleted(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "warm")
    tr = fdbqueue_db.create_transaction()
    service.push(tr, "jobs", "in flight")
    service.delete_queue(fdbqueue_db, "jobs")
    with pytest.raises(FDBError) as caught:
        tr.commit().wait()
    assert caught.value.code == 1020
    with pytest.raises(QueueNotFound):
        service.push(fdbqueue_db, "jobs", "after")


def test_a_cached_entry_is_not_used_after_the_queue_was_recreated(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="priority")
    service.push(fdbqueue_db, "jobs", "old", priority=1)
    service.delete_queue(fdbqueue_db, "jobs")
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    service.push(fdbqueue_db, "jobs", "new")
    assert service.get_queue(fdbqueue_db, "jobs").kind == "fifo"
    assert service.pop(fdbqueue_db, "jobs").value == "new"
    assert service.pop(fdbqueue_db, "jobs") is None
