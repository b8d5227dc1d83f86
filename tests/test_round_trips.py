"""Independent reads are sent together: on a cluster each read waited for in turn is a round trip.

A transaction wrapper records when each range read is sent (``get_range`` called) and when it is
first waited for (its first row asked for). A pop, a claim and a peek must send the read of what
is due among the hidden items and the first read of the ready items before waiting for either.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_fdbqueue import service
from django_fdbqueue.service._internals.catalog import METADATA_VERSION_KEY


class _Recorded:
    """One range read: "send" logged when made, "wait" when its first row is asked for."""

    def __init__(self, rows: Any, log: list[str], tag: str) -> None:
        self._rows, self._log, self._tag, self._waited = rows, log, tag, False
        log.append(f"send {tag}")

    def __iter__(self):
        for row in self._rows:
            self._mark()
            yield row
        self._mark()

    def _mark(self) -> None:
        if not self._waited:
            self._waited = True
            self._log.append(f"wait {self._tag}")


class _RecordedValue:
    """The catalog check's read of the metadata version: "send catalog", then "wait catalog"."""

    def __init__(self, future: Any, log: list[str]) -> None:
        self._future, self._log = future, log
        log.append("send catalog")

    def present(self) -> bool:
        self._log.append("wait catalog")
        return self._future.present()

    def __bytes__(self) -> bytes:
        return bytes(self._future)


class _Reads:
    def __init__(self, reads: Any, log: list[str], tag: str, hidden: bytes) -> None:
        self._reads, self._log, self._tag, self._hidden = reads, log, tag, hidden

    def get_range(self, begin: bytes, end: bytes, *args: Any, **kwargs: Any) -> _Recorded:
        what = "due" if bytes(begin).startswith(self._hidden) else "items"
        return _Recorded(self._reads.get_range(begin, end, *args, **kwargs), self._log, f"{self._tag}{what}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reads, name)

    def __getitem__(self, key: Any) -> Any:
        if key == METADATA_VERSION_KEY:
            return _RecordedValue(self._reads[key], self._log)
        return self._reads[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._reads[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._reads[key]


class RecordingTransaction(_Reads):
    """A transaction whose range reads are logged (the rest passes straight through)."""

    def __init__(self, tr: Any, hidden: bytes) -> None:
        self.log: list[str] = []
        super().__init__(tr, self.log, "", hidden)
        self.snapshot = _Reads(tr.snapshot, self.log, "snapshot ", hidden)


@pytest.fixture
def queue(fdbqueue_db, request):
    from django_fdbqueue.service._internals import catalog

    kind = getattr(request, "param", "priority")
    service.create_queue(fdbqueue_db, "jobs", kind=kind)
    service.push(fdbqueue_db, "jobs", "a")
    _entry, qk = catalog.require(fdbqueue_db.create_transaction(), "jobs")
    return qk


def _recording(fdbqueue_db, qk) -> RecordingTransaction:
    return RecordingTransaction(fdbqueue_db.create_transaction(), qk.hidden.range().start)


def _sent_before_waited(log: list[str]) -> bool:
    """Both first reads are sent before the first wait."""
    first_wait = next(i for i, entry in enumerate(log) if entry.startswith("wait"))
    sent = {entry.removeprefix("send ") for entry in log[:first_wait] if entry.startswith("send")}
    return "snapshot due" in sent and bool(sent & {"items", "snapshot items"})


@pytest.mark.parametrize("end", ["min", "max"])
def test_a_pop_sends_its_due_and_first_item_reads_together(fdbqueue_db, queue, end):
    tr = _recording(fdbqueue_db, queue)
    assert service.pop(tr, "jobs", end).value == "a"
    tr.commit().wait()
    assert _sent_before_waited(tr.log), tr.log
    assert service.size(fdbqueue_db, "jobs") == 0


def test_a_claim_sends_its_reads_together(fdbqueue_db, queue):
    tr = _recording(fdbqueue_db, queue)
    lease = service.claim(tr, "jobs", end="max")
    tr.commit().wait()
    assert lease.item.value == "a"
    assert _sent_before_waited(tr.log), tr.log


def test_a_peek_sends_its_reads_together(fdbqueue_db, queue):
    tr = _recording(fdbqueue_db, queue)
    assert service.peek(tr, "jobs").value == "a"
    assert _sent_before_waited(tr.log), tr.log


@pytest.mark.parametrize("operation", ["pop", "claim", "peek"])
def test_with_the_entry_cached_the_catalog_check_travels_with_the_first_reads(fdbqueue_db, queue, operation):
    """One round trip before the commit, as FoundationDB's recipe has: the metadata version read
    that confirms the cached catalog entry is sent with the due and first item reads."""
    service.peek(fdbqueue_db, "jobs")  # the entry is in this process's cache now
    tr = _recording(fdbqueue_db, queue)
    getattr(service, operation)(tr, "jobs")
    first_wait = next(i for i, entry in enumerate(tr.log) if entry.startswith("wait"))
    assert {"send catalog", "send snapshot due", "send items"} <= set(tr.log[:first_wait]), tr.log


def test_a_stale_cached_entry_is_caught_and_the_reads_made_again_for_the_new_queue(fdbqueue_db, clock):
    """The cached entry names a queue deleted (and created again) since: its speculative reads are
    dropped, and the operation reads the new queue."""
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "old")
    from django_fdbqueue.service._internals import catalog

    assert service.peek(fdbqueue_db, "jobs").value == "old"  # cached
    slot = (catalog.root().key(), "jobs")
    stale = catalog._cache[slot]
    service.delete_queue(fdbqueue_db, "jobs")
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "new", delay=1)
    clock.advance(2)
    for operation in ("peek", "claim", "pop"):
        catalog._cache[slot] = stale  # as in a process that cached it before another changed the catalog
        got = getattr(service, operation)(fdbqueue_db, "jobs")
        assert catalog._cache[slot].entry.queue_id != stale.entry.queue_id  # read again, and cached
        if operation == "peek":
            assert got.value == "new"
        elif operation == "claim":
            assert got.item.value == "new"
        else:
            assert got is None
    assert service.get_queue(fdbqueue_db, "jobs").leased == 1


def test_an_item_that_became_due_is_still_taken_in_its_turn(fdbqueue_db, clock):
    """When the due read did move items in, the walk reads again and sees them."""
    service.create_queue(fdbqueue_db, "jobs", kind="priority")
    service.push(fdbqueue_db, "jobs", "later, urgent", priority=9, delay=5)
    service.push(fdbqueue_db, "jobs", "now, calm", priority=1)
    assert service.peek(fdbqueue_db, "jobs", "max").value == "now, calm"
    clock.advance(6)
    assert service.peek(fdbqueue_db, "jobs", "max").value == "later, urgent"
    assert service.pop(fdbqueue_db, "jobs", "max").value == "later, urgent"
    assert service.claim(fdbqueue_db, "jobs", end="max").item.value == "now, calm"


def recreated_behind_the_cache(db: Any, name: str) -> Any:
    """Make ``name`` with one item, then delete and create it again as another process would: this
    process's cache still holds the old entry. Returns that stale cache entry (its tag and entry)."""
    from django_fdbqueue.service._internals import catalog

    service.create_queue(db, name)
    service.push(db, name, "old")
    slot = (catalog.root().key(), name)
    stale = catalog._cache[slot]
    service.delete_queue(db, name)
    service.create_queue(db, name)
    catalog._cache[slot] = stale
    return stale


# -- pushes written while the catalog check is in flight ----------------------------------------------


def test_a_push_prepared_with_a_stale_cached_entry_lands_in_the_queue_as_it_is(fdbqueue_db):
    """The cached entry names a queue deleted and created again since (as by another process): the
    push starts over, lands in the new queue once, and leaves nothing under the old queue's id."""
    from django_fdbqueue import connection
    from django_fdbqueue.fdbapi import retry_counts
    from django_fdbqueue.service._internals import keys

    stale = recreated_behind_the_cache(fdbqueue_db, "jobs")
    conflicts = retry_counts().get(1020, 0)
    item = service.push(fdbqueue_db, "jobs", "second")
    assert retry_counts().get(1020, 0) == conflicts + 1  # the one attempt that wrote ahead
    assert [i.value for i in service.browse(fdbqueue_db, "jobs").items] == ["second"]
    assert service.get_item(fdbqueue_db, "jobs", item.id).value == "second"
    old = keys.queue_keys(connection.root_subspace(), stale.entry.queue_id).space.range()
    assert list(fdbqueue_db.create_transaction().get_range(old.start, old.stop)) == []


def test_another_queue_created_meanwhile_does_not_make_a_push_start_over(fdbqueue_db):
    """A new metadata version is most often another queue's creation: the entry is read, found the
    same, and the push goes on (and the cache takes the new version)."""
    from django_fdbqueue.fdbapi import retry_counts
    from django_fdbqueue.service._internals import catalog

    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "a")
    slot = (catalog.root().key(), "jobs")
    tag = catalog._cache[slot].tag
    service.create_queue(fdbqueue_db, "other")
    conflicts = retry_counts().get(1020, 0)
    service.push(fdbqueue_db, "jobs", "b")
    assert retry_counts().get(1020, 0) == conflicts
    assert catalog._cache[slot].tag != tag
    assert [i.value for i in service.browse(fdbqueue_db, "jobs").items] == ["a", "b"]


def test_a_push_into_a_callers_transaction_reads_the_entry_first_and_never_asks_to_start_over(fdbqueue_db):
    recreated_behind_the_cache(fdbqueue_db, "jobs")
    tr = fdbqueue_db.create_transaction()
    service.push(tr, "jobs", "b")  # no FDBError: the caller's other writes are never at stake
    tr.commit().wait()
    assert [i.value for i in service.browse(fdbqueue_db, "jobs").items] == ["b"]


# -- read versions reused from the thread's last commit ---------------------------------------------


def in_other_thread(call):
    """Run ``call`` as another client (its own thread: its own remembered version)."""
    import threading

    out = {}
    thread = threading.Thread(target=lambda: out.setdefault("value", call()))
    thread.start()
    thread.join(30)
    assert not thread.is_alive()
    return out.get("value")


@pytest.mark.parametrize("operation", ["pop", "claim"])
def test_empty_at_a_reused_read_version_is_checked_again_at_a_fresh_one(fdbqueue_db, operation):
    """This thread's last commit is older than another client's push: found empty at the reused
    version, the pop or claim looks again at a fresh one, and takes the pushed item."""
    service.create_queue(fdbqueue_db, "jobs")
    service.push(fdbqueue_db, "jobs", "mine")
    assert service.pop(fdbqueue_db, "jobs").value == "mine"  # remembered: this commit's version
    in_other_thread(lambda: service.push(fdbqueue_db, "jobs", "theirs"))
    got = getattr(service, operation)(fdbqueue_db, "jobs")
    assert (got.value if operation == "pop" else got.item.value) == "theirs"


def test_an_item_taken_by_another_client_since_the_reused_version_is_not_taken_twice(fdbqueue_db):
    """The reused version still shows an item another client took since: the pop conflicts on
    it and takes the next one, at a fresh version."""
    service.create_queue(fdbqueue_db, "jobs")
    service.push_many(fdbqueue_db, "jobs", ["a", "b"])
    service.push(fdbqueue_db, "jobs", "c")  # remembered: this commit's version, with a, b and c
    assert in_other_thread(lambda: service.pop(fdbqueue_db, "jobs").value) == "a"
    assert service.pop(fdbqueue_db, "jobs").value == "b"
    assert service.pop(fdbqueue_db, "jobs").value == "c"
    assert service.pop(fdbqueue_db, "jobs") is None


def test_on_a_cluster_a_pop_after_a_push_starts_from_the_pushs_commit_version(fdbqueue_db, engine_name, monkeypatch):
    if engine_name != "foundationdb":
        assert not getattr(fdbqueue_db, "reuse_read_versions", False)  # the embedded engine: no round trip to save
        return
    import fdb.impl

    started_from = []
    real = fdb.impl.Transaction.set_read_version
    monkeypatch.setattr(
        fdb.impl.Transaction,
        "set_read_version",
        lambda tr, version: (started_from.append(version), real(tr, version))[1],
    )
    service.create_queue(fdbqueue_db, "jobs")
    tr = fdbqueue_db.create_transaction()
    service.push(tr, "jobs", "a")
    tr.commit().wait()
    pushed_at = tr.get_committed_version()
    service.push(fdbqueue_db, "jobs", "b")
    assert service.pop(fdbqueue_db, "jobs").value == "a"
    assert len(started_from) == 1 and started_from[0] > pushed_at
    service.peek(fdbqueue_db, "jobs")  # read-only: a fresh version, and nothing to remember
    assert service.pop(fdbqueue_db, "jobs").value == "b" and len(started_from) == 1


def test_a_queue_created_after_the_reused_version_is_found(fdbqueue_db):
    """This thread's last commit is older than the queue: "no such queue" at the reused version
    is checked again at a fresh one."""
    service.create_queue(fdbqueue_db, "before")
    service.push(fdbqueue_db, "before", "x")  # remembered: this commit's version
    in_other_thread(lambda: (service.create_queue(fdbqueue_db, "after"), service.push(fdbqueue_db, "after", "y")))
    assert service.pop(fdbqueue_db, "after").value == "y"
    in_other_thread(lambda: service.push(fdbqueue_db, "after", "z"))
    service.push(fdbqueue_db, "before", "x2")
    in_other_thread(lambda: service.push(fdbqueue_db, "after", "w"))
    assert service.claim(fdbqueue_db, "after").item.value == "z"
