"""Independent reads are sent together: on a cluster each read waited for in turn is a round trip.

A transaction wrapper records when each range read is sent (``get_range`` called) and when it is
first waited for (its first row asked for). A pop, a claim and a peek must send the read of what
is due among the hidden items and the first read of the ready items before waiting for either.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_fdbqueue import service
from django_fdbqueue.service.catalog import METADATA_VERSION_KEY


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
    from django_fdbqueue.service import catalog

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
    from django_fdbqueue.service import catalog

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
        assert catalog._cache[slot][1].queue_id != stale[1].queue_id  # read again, and cached
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
