"""Independent reads are sent together: on a cluster each read waited for in turn is a round trip.

A transaction wrapper records when each range read is sent (``get_range`` called) and when it is
first waited for (its first row asked for). A pop, a claim and a peek must send the read of what
is due among the hidden items and the first read of the ready items before waiting for either.
"""

from __future__ import annotations

from typing import Any

import pytest

from django_fdbqueue import service


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


class _Reads:
    def __init__(self, reads: Any, log: list[str], tag: str, hidden: bytes) -> None:
        self._reads, self._log, self._tag, self._hidden = reads, log, tag, hidden

    def get_range(self, begin: bytes, end: bytes, *args: Any, **kwargs: Any) -> _Recorded:
        what = "due" if bytes(begin).startswith(self._hidden) else "items"
        return _Recorded(self._reads.get_range(begin, end, *args, **kwargs), self._log, f"{self._tag}{what}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reads, name)

    def __getitem__(self, key: Any) -> Any:
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
