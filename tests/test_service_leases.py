"""Reliable consumption in the service: leases, delays, dead letters, dedup keys, blocking waits.

Every test runs per engine through `fdbqueue_db`. Time-dependent behaviour is tested with a
clock moved ahead on demand (`Clock`), so nothing sleeps to let a lease run out; the blocking
tests synchronise on events and bound every wait.
"""

from __future__ import annotations

import datetime as dt
import multiprocessing
import os
import random
import threading
import time
from collections import Counter

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.exceptions import (
    DeadLetterNotFound,
    InvalidArgument,
    InvalidCursor,
    InvalidQueueName,
    InvalidReceipt,
    LeaseExpired,
    LeaseNotFound,
    QueueNotFound,
    WrongQueueKind,
)
from django_fdbqueue.fdbapi import make_error, transactional
from django_fdbqueue.service._internals import catalog as service_catalog
from django_fdbqueue.service._internals import dedup
from django_fdbqueue.service import extension
from django_fdbqueue.service.extension import runtime

from .processes import child_database, join_all, kill_leftovers

JOIN_SECONDS = 60


@pytest.fixture
def pq(fdbqueue_db):
    service.create_queue(fdbqueue_db, "pq", kind="priority")
    return "pq"


def lease_end(lease) -> dt.datetime:
    """The lease's end, under its current name or the one it had before (issue 17 renames it)."""
    end = getattr(lease, "lease_expires_at", None)
    return end if end is not None else lease.expires_at


def counts(db, name) -> tuple[int, int, int, int]:
    info = service.get_queue(db, name)
    return info.size, info.leased, info.delayed, info.dead


# --- claim and ack ---------------------------------------------------------------------------------


def test_a_claimed_item_is_hidden_until_acked(fdbqueue_db, pq):
    db = fdbqueue_db
    first = service.push(db, pq, "a", 1)
    second = service.push(db, pq, "b", 2)
    lease = service.claim(db, pq, lease=30)
    assert lease.item.id == first.id and lease.item.value == "a" and lease.item.attempts == 1
    assert lease_end(lease) > dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=25)
    assert counts(db, pq) == (1, 1, 0, 0)
    assert service.peek(db, pq).id == second.id  # the claimed item is not visible
    assert service.claim(db, pq).item.id == second.id
    assert service.claim(db, pq) is None
    service.ack(db, lease.receipt)
    assert counts(db, pq) == (0, 1, 0, 0)
    assert service.get_queue(db, pq).popped == 1
    assert service.get_item(db, pq, first.id) is None


def test_claim_takes_from_either_end_and_checks_the_queue_kind(fdbqueue_db, pq):
    db = fdbqueue_db
    for priority in (1, 5, 3):
        service.push(db, pq, priority, priority)
    assert service.claim(db, pq, end="max").item.value == 5
    assert service.claim(db, pq, end="min").item.value == 1
    service.create_queue(db, "f", kind="fifo")
    with pytest.raises(WrongQueueKind):
        service.claim(db, "f", end="max")
    with pytest.raises(QueueNotFound):
        service.claim(db, "missing")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lease": 0},
        {"lease": -1},
        {"lease": 43_201},
        {"lease": float("nan")},
        {"lease": "5"},
        {"lease": True},
        {"wait": -1},
        {"wait": 3601},
        {"end": "middle"},
    ],
)
def test_claim_arguments_are_checked(fdbqueue_db, pq, kwargs):
    service.push(fdbqueue_db, pq, "x")
    with pytest.raises(InvalidArgument):
        service.claim(fdbqueue_db, pq, **kwargs)
    assert counts(fdbqueue_db, pq) == (1, 0, 0, 0)


def test_a_used_or_forged_receipt_is_refused_and_changes_nothing(fdbqueue_db, pq):
    db = fdbqueue_db
    service.push(db, pq, "a")
    lease = service.claim(db, pq, lease=30)
    service.ack(db, lease.receipt)
    service.ack(db, lease.receipt)  # a repeated ack answers as the first did (its settled marker)
    for action in (lambda r: service.release(db, r), lambda r: service.extend(db, r, 5)):
        with pytest.raises(LeaseNotFound):
            action(lease.receipt)
    for bad in ("", "nonsense", lease.receipt + "A", lease.receipt[:-2], 12, None, "x" * 5000):
        with pytest.raises(InvalidReceipt):
            service.ack(db, bad)
    # A receipt with the right shape but a token nobody was given.
    service.push(db, pq, "b")
    live = service.claim(db, pq, lease=30)
    parsed = extension.parse_receipt(live.receipt)
    forged = extension.Receipt(parsed.name, parsed.queue_id, parsed.priority, parsed.stamp, b"\x00" * 16)
    with pytest.raises(LeaseNotFound):
        service.ack(db, forged.encode())
    assert counts(db, pq) == (0, 1, 0, 0)
    service.ack(db, live.receipt)


def test_a_receipt_names_its_queue(fdbqueue_db, pq):
    db = fdbqueue_db
    service.create_queue(db, "other", kind="fifo")
    service.push(db, pq, "a")
    lease = service.claim(db, pq)
    assert service.receipt_queue(lease.receipt) == pq
    with pytest.raises(InvalidReceipt, match="belongs to queue 'pq'"):
        service.ack(db, lease.receipt, name="other")
    with pytest.raises(InvalidQueueName):
        service.release(db, lease.receipt, name="bad name")
    service.ack(db, lease.receipt, name=pq)


def test_a_receipt_dies_with_its_queue(fdbqueue_db, pq):
    db = fdbqueue_db
    service.push(db, pq, "a")
    lease = service.claim(db, pq)
    service.delete_queue(db, pq)
    with pytest.raises(QueueNotFound):
        service.ack(db, lease.receipt)
    service.create_queue(db, pq, kind="priority")
    with pytest.raises(LeaseNotFound, match="created again"):
        service.ack(db, lease.receipt)


# --- expiry ------------------------------------------------------------------------------------------


def test_an_expired_lease_comes_back_at_its_place(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    a = service.push(db, pq, "a", 1)
    service.push(db, pq, "b", 1)
    lease = service.claim(db, pq, lease=10)
    assert lease.item.id == a.id
    clock.advance(5)
    assert service.peek(db, pq).value == "b"
    with pytest.raises(LeaseExpired):
        clock.advance(6)
        service.ack(db, lease.receipt)
    # Nobody swept anything: the peek sees it due, the next claim takes it, first in order.
    assert service.peek(db, pq).id == a.id
    again = service.claim(db, pq, lease=10)
    assert again.item.id == a.id and again.item.attempts == 2
    assert again.receipt != lease.receipt
    with pytest.raises(LeaseNotFound):
        service.ack(db, lease.receipt)  # the first holder can never ack it now
    service.ack(db, again.receipt)
    assert [i.value for i in service.pop_many(db, pq, 10)] == ["b"]


def test_expired_leases_are_counted_until_moved(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    service.push(db, pq, "a")
    service.claim(db, pq, lease=1)
    clock.advance(2)
    assert counts(db, pq) == (0, 1, 0, 0)
    assert not service.empty(db, pq)
    assert service.pop(db, pq).value == "a"
    assert counts(db, pq) == (0, 0, 0, 0)


def test_extend_moves_the_end_of_the_lease(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    service.push(db, pq, "a")
    lease = service.claim(db, pq, lease=10)
    clock.advance(8)
    longer = service.extend(db, lease.receipt, 10)
    assert longer.receipt == lease.receipt and lease_end(longer) > lease_end(lease)
    clock.advance(8)  # 16 s after the claim: past the first end, before the new one
    assert service.claim(db, pq) is None
    assert [s.state for s in service.scheduled(db, pq).items] == ["leased"]
    service.ack(db, lease.receipt)
    clock.advance(30)
    assert service.claim(db, pq) is None
    with pytest.raises(InvalidArgument):
        service.extend(db, lease.receipt, 0)


# --- release and delays ------------------------------------------------------------------------------


def test_release_at_once_and_after_a_delay(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    a = service.push(db, pq, "a", 1)
    service.push(db, pq, "b", 2)
    lease = service.claim(db, pq)
    assert service.release(db, lease.receipt) == "ready"
    assert service.peek(db, pq).id == a.id  # back before "b": its place in queue order
    lease = service.claim(db, pq)
    assert lease.item.attempts == 2
    assert service.release(db, lease.receipt, delay=60) == "delayed"
    assert counts(db, pq) == (1, 0, 1, 0)
    assert service.claim(db, pq, lease=600).item.value == "b"
    assert service.claim(db, pq) is None
    clock.advance(61)
    again = service.claim(db, pq)
    assert again.item.id == a.id and again.item.attempts == 3
    with pytest.raises(InvalidArgument):
        service.release(db, again.receipt, delay=-1)
    assert counts(db, pq) == (0, 2, 0, 0)


def test_delayed_push_is_invisible_until_its_time_then_in_priority_order(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    late = service.push(db, pq, "late", 1, delay=30)
    at = service.push(db, pq, "at", 0, not_before=dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=20))
    now = service.push(db, pq, "now", 5)
    assert counts(db, pq) == (1, 0, 2, 0)
    assert service.peek(db, pq).value == "now"
    assert [s.item.value for s in service.scheduled(db, pq).items] == ["at", "late"]
    assert all(s.state == "delayed" for s in service.scheduled(db, pq).items)
    assert service.get_item(db, pq, late.id).value == "late"
    clock.advance(31)
    assert [i.value for i in (service.peek(db, pq), service.peek(db, pq, "max"))] == ["at", "now"]
    assert [i.id for i in service.pop_many(db, pq, 3)] == [at.id, late.id, now.id]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delay": -1},
        {"delay": "1"},
        {"delay": float("inf")},
        {"delay": 367 * 86400},
        {"not_before": dt.datetime(2030, 1, 1)},
        {"not_before": "2030-01-01T00:00:00Z"},
        {"delay": 1, "not_before": dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)},
        {"not_before": dt.datetime(2099, 1, 1, tzinfo=dt.timezone.utc)},
        {"dedup_key": ""},
        {"dedup_key": 5},
        {"dedup_key": "k" * 201},
        {"dedup_key": "\ud800"},
    ],
)
def test_push_options_are_checked_and_write_nothing(fdbqueue_db, pq, kwargs):
    with pytest.raises(InvalidArgument):
        service.push(fdbqueue_db, pq, "x", **kwargs)
    assert counts(fdbqueue_db, pq) == (0, 0, 0, 0)
    assert service.get_queue(fdbqueue_db, pq).pushed == 0


def test_a_past_not_before_is_visible_at_once(fdbqueue_db, pq):
    service.push(fdbqueue_db, pq, "x", not_before=dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    assert service.pop(fdbqueue_db, pq).value == "x"


def test_push_many_with_a_delay(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    service.push_many(db, pq, [("a", 1), ("b", 0)], delay=10)
    assert counts(db, pq) == (0, 0, 2, 0)
    clock.advance(11)
    assert [i.value for i in service.pop_many(db, pq, 5)] == ["b", "a"]


# --- dead letters ------------------------------------------------------------------------------------


def test_max_attempts_sends_an_item_to_the_dead_letters(fdbqueue_db, clock):
    db = fdbqueue_db
    info = service.create_queue(db, "jobs", kind="fifo", max_attempts=2)
    assert info.max_attempts == 2
    a = service.push(db, "jobs", "a")
    service.push(db, "jobs", "b")
    service.claim(db, "jobs", lease=5)
    clock.advance(6)  # first lease runs out: back in the queue
    second = service.claim(db, "jobs", lease=5)
    assert second.item.id == a.id and second.item.attempts == 2
    clock.advance(6)  # second lease runs out: two claims, no ack -> dead
    nxt = service.claim(db, "jobs", lease=5)
    assert nxt.item.value == "b"
    assert counts(db, "jobs") == (0, 1, 0, 1)
    (letter,) = service.dead_letters(db, "jobs").items
    assert letter.item.id == a.id and letter.item.attempts == 2 and letter.item.value == "a"
    # Released after its last allowed claim: dead too.
    assert service.release(db, nxt.receipt) == "ready"
    last = service.claim(db, "jobs")
    assert service.release(db, last.receipt) == "dead"
    assert [d.item.value for d in service.dead_letters(db, "jobs").items] == ["a", "b"]
    assert service.get_dead_letter(db, "jobs", a.id).item.value == "a"
    requeued = service.requeue_dead_letter(db, "jobs", a.id)
    assert service.get_dead_letter(db, "jobs", a.id) is None
    assert requeued.id == a.id and requeued.attempts == 0
    assert service.claim(db, "jobs").item.attempts == 1
    service.delete_dead_letter(db, "jobs", last.item.id)
    assert counts(db, "jobs") == (0, 1, 0, 0)
    # Repeated, each answers as the first did (settled markers); the other one finds nothing.
    assert service.requeue_dead_letter(db, "jobs", a.id) == requeued
    assert service.delete_dead_letter(db, "jobs", last.item.id) is None
    for action, item_id in ((service.requeue_dead_letter, last.item.id), (service.delete_dead_letter, a.id)):
        with pytest.raises(DeadLetterNotFound):
            action(db, "jobs", item_id)
        with pytest.raises(InvalidArgument):
            action(db, "jobs", "not-an-id")


def test_max_attempts_can_be_changed(fdbqueue_db, pq):
    db = fdbqueue_db
    assert service.get_queue(db, pq).max_attempts is None
    assert service.set_max_attempts(db, pq, 1).max_attempts == 1
    service.push(db, pq, "a")
    lease = service.claim(db, pq)
    assert service.release(db, lease.receipt) == "dead"
    assert service.set_max_attempts(db, pq, None).max_attempts is None
    for bad in (0, 1001, "3", 2.5, True):
        with pytest.raises(InvalidArgument):
            service.set_max_attempts(db, pq, bad)
        with pytest.raises(InvalidArgument):
            service.create_queue(db, "new", max_attempts=bad)
    assert service.get_queue(db, pq).max_attempts is None
    assert not service.queue_exists(db, "new")


def test_dead_letters_and_scheduled_items_page_through(fdbqueue_db, pq):
    db = fdbqueue_db
    service.set_max_attempts(db, pq, 1)
    for n in range(5):
        service.push(db, pq, n, n)
    for _ in range(5):
        service.release(db, service.claim(db, pq).receipt)
    seen, cursor = [], None
    while True:
        page = service.dead_letters(db, pq, cursor=cursor, limit=2)
        seen += [d.item.value for d in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [0, 1, 2, 3, 4]
    for n in range(3):
        service.push(db, pq, n, delay=100 + n)
    page = service.scheduled(db, pq, limit=2)
    rest = service.scheduled(db, pq, cursor=page.next_cursor, limit=2)
    assert [s.item.value for s in page.items + rest.items] == [0, 1, 2] and rest.next_cursor is None
    for bad in ("junk", page.next_cursor + "A"):
        with pytest.raises(InvalidCursor):
            service.scheduled(db, pq, cursor=bad)
    with pytest.raises(InvalidCursor):
        service.dead_letters(db, pq, cursor=page.next_cursor)  # a cursor of the other listing


# --- deduplicated pushes -------------------------------------------------------------------------------


def test_a_dedup_key_adds_one_item(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    first = service.push(db, pq, "v1", 3, dedup_key="order-1")
    again = service.push(db, pq, "v2", 3, dedup_key="order-1")
    assert not first.duplicate and again.duplicate
    assert (again.id, again.priority, again.enqueued_at) == (first.id, first.priority, first.enqueued_at)
    assert service.size(db, pq) == 1
    lease = service.claim(db, pq)
    assert service.push(db, pq, "v3", dedup_key="order-1").duplicate  # leased: still there
    service.ack(db, lease.receipt)
    assert service.push(db, pq, "v4", dedup_key="order-1").duplicate  # consumed, within the window
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    fresh = service.push(db, pq, "v5", dedup_key="order-1")
    assert not fresh.duplicate and fresh.id != first.id
    assert [i.value for i in service.pop_many(db, pq, 5)] == ["v5"]


def test_dedup_keys_in_one_transaction_and_per_queue(fdbqueue_db, pq):
    db = fdbqueue_db
    service.create_queue(db, "other", kind="fifo")

    @transactional
    def both(tr):
        return [
            service.push(tr, pq, "a", dedup_key="k"),
            service.push(tr, pq, "b", dedup_key="k"),
            service.push(tr, "other", "c", dedup_key="k"),
        ]

    first, second, other = both(db)
    assert first.id == second.id and other.id != first.id
    assert service.size(db, pq) == 1 and service.size(db, "other") == 1


def test_forgotten_dedup_keys_are_pruned(fdbqueue_db, pq, clock):
    db = fdbqueue_db
    for n in range(6):
        service.push(db, pq, n, dedup_key=f"k{n}")
    service.pop_many(db, pq, 6)
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    for n in range(2):  # each push with a key forgets up to PRUNE_BATCH expired ones
        service.push(db, pq, "x", dedup_key=f"new{n}")

    @transactional
    def records(tr):
        qk = service_catalog.require(tr, pq)[1]
        r = qk.dedup_records.range()
        return [qk.dedup_records.unpack(bytes(kv.key))[0] for kv in tr.get_range(r.start, r.stop)]

    assert sorted(records(db)) == ["new0", "new1"]


def test_clear_removes_hidden_items_and_dedup_keys_but_not_dead_letters(fdbqueue_db, pq):
    db = fdbqueue_db
    service.set_max_attempts(db, pq, 1)
    service.push(db, pq, "dead")
    service.release(db, service.claim(db, pq).receipt)
    service.push(db, pq, "ready", dedup_key="k")
    service.push(db, pq, "delayed", delay=60)
    service.push(db, pq, "leased")
    lease = service.claim(db, pq, end="max")
    service.clear(db, pq)
    assert counts(db, pq) == (0, 0, 0, 1)
    with pytest.raises(LeaseNotFound):
        service.ack(db, lease.receipt)
    assert not service.push(db, pq, "again", dedup_key="k").duplicate


# --- blocking waits ------------------------------------------------------------------------------------


def _in_thread(target):
    box: dict = {}

    def run():
        try:
            box["result"] = target()
        except BaseException as exc:  # the test re-raises it
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def _blocked_on_watch(monkeypatch) -> threading.Event:
    """Set once a waiting caller has its watch in place (so a push now must wake it)."""
    armed = threading.Event()
    real = runtime.wait_on

    def spy(watch, seconds):
        armed.set()
        return real(watch, seconds)

    monkeypatch.setattr(runtime, "wait_on", spy)
    return armed


@pytest.mark.parametrize("operation", ["pop", "claim"])
def test_a_waiting_caller_is_woken_by_a_push(fdbqueue_db, pq, monkeypatch, operation):
    db = fdbqueue_db
    armed = _blocked_on_watch(monkeypatch)
    call = getattr(service, operation)
    thread, box = _in_thread(lambda: call(db, pq, wait=20))
    assert armed.wait(JOIN_SECONDS)
    started = time.monotonic()
    service.push(db, pq, "hello")
    thread.join(JOIN_SECONDS)
    assert not thread.is_alive() and "error" not in box, box
    got = box["result"]
    assert (got.value if operation == "pop" else got.item.value) == "hello"
    assert time.monotonic() - started < 15  # woken by the watch, long before its 20 s


def test_a_waiting_claim_is_woken_when_a_lease_ends(fdbqueue_db, pq):
    db = fdbqueue_db
    service.push(db, pq, "x")
    service.claim(db, pq, lease=0.3)
    again = service.claim(db, pq, wait=20)
    assert again is not None and again.item.attempts == 2


def test_a_wait_that_runs_out_returns_none(fdbqueue_db, pq):
    started = time.monotonic()
    assert service.pop(fdbqueue_db, pq, wait=0.2) is None
    assert service.claim(fdbqueue_db, pq, wait=0) is None
    assert time.monotonic() - started >= 0.2


def test_wait_needs_the_database(fdbqueue_db, pq):
    @transactional
    def inside(tr):
        return service.pop(tr, pq, wait=1)

    with pytest.raises(InvalidArgument, match="needs the database"):
        inside(fdbqueue_db)


# --- commit failures -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied", "not_committed"])
def test_ack_and_release_under_a_commit_failure_report_their_outcome(fdbqueue_db, pq, faults, fault):
    db = fdbqueue_db
    service.push(db, pq, "a")
    lease = service.claim(db, pq)
    faults.fail_next(fault)
    service.ack(db, lease.receipt)  # no LeaseNotFound from its own first attempt
    assert faults.injected[fault] == 1
    assert counts(db, pq) == (0, 0, 0, 0)
    service.push(db, pq, "b")
    lease = service.claim(db, pq)
    faults.fail_next(fault)
    assert service.release(db, lease.receipt, delay=5) == "delayed"
    assert counts(db, pq) == (0, 0, 1, 0)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_a_dedup_push_under_1021_stores_one_item(fdbqueue_db, pq, faults, fault):
    faults.fail_next(fault)
    item = service.push(fdbqueue_db, pq, "a", dedup_key="once")
    assert faults.injected[fault] == 1
    assert service.size(fdbqueue_db, pq) == 1
    assert service.pop(fdbqueue_db, pq).id == item.id


def test_random_faults_dedup_pushes_and_claims_consume_each_item_once(fdbqueue_db, pq, faults, clock):
    """1020 and both 1021s on a third of commits: one item per dedup key, each acked once overall."""
    db = fdbqueue_db
    faults.configure(not_committed=0.1, unknown_applied=0.1, unknown_not_applied=0.1, seed=20261122)
    pushed = {service.push(db, pq, n, dedup_key=f"key-{n}").id for n in range(40) for _ in range(2)}
    assert len(pushed) == 40
    acked: Counter = Counter()
    for _round in range(200):
        lease = service.claim(db, pq, lease=5)
        if lease is None:
            if counts(db, pq)[1] == 0:
                break
            clock.advance(6)  # claims whose result was unknown left leases behind: let them end
            continue
        try:
            service.ack(db, lease.receipt)
        except LeaseExpired:  # its retries outlived the lease: it will be delivered again
            continue
        acked[lease.item.id] += 1
    injected = dict(faults.injected)
    faults.disable()
    assert injected["unknown_applied"] and injected["unknown_not_applied"]
    assert set(acked) == pushed and set(acked.values()) == {1}
    assert counts(db, pq) == (0, 0, 0, 0)


# --- commit failures on both engines ---------------------------------------------------------------------
#
# The embedded engine injects faults itself; a cluster cannot be asked to. FaultyDatabase makes the
# same three failures happen at chosen commits on either engine: 1020 without committing, 1021 after
# really committing ("unknown_applied"), and 1021 without committing. The service sees the error
# exactly as it would from FoundationDB and retries through on_error.


class _Failed:
    """A commit future that fails with `code` (the commit itself may or may not have happened)."""

    def __init__(self, code: int) -> None:
        self.code = code

    def wait(self) -> None:
        raise make_error(self.code)


class _FaultyTransaction:
    """A transaction whose commits fail as its database's plan says, one planned fault per commit."""

    def __init__(self, tr, plan: list) -> None:
        self._tr = tr
        self._plan = plan

    def __getattr__(self, name):
        return getattr(self._tr, name)

    def __getitem__(self, key):
        return self._tr[key]

    def __setitem__(self, key, value) -> None:
        self._tr[key] = value

    def __delitem__(self, key) -> None:
        del self._tr[key]

    def commit(self):
        fault = self._plan.pop(0) if self._plan else None
        if fault == "not_committed":
            return _Failed(1020)
        if fault == "unknown_not_applied":
            return _Failed(1021)
        future = self._tr.commit()
        if fault == "unknown_applied":
            future.wait()
            return _Failed(1021)
        return future


class FaultyDatabase:
    """The test's database, with ``plan``: the faults the next commits meet (None: no fault)."""

    def __init__(self, db) -> None:
        self._db = db
        self.plan: list = []

    def create_transaction(self) -> _FaultyTransaction:
        return _FaultyTransaction(self._db.create_transaction(), self.plan)


class Holders:
    """Every lease handed out, to assert that no item is handed out while a lease on it holds."""

    def __init__(self) -> None:
        self.ends: dict[str, dt.datetime] = {}

    def took(self, lease, now: dt.datetime) -> None:
        if lease is None:
            return
        end = self.ends.get(lease.item.id)
        assert end is None or end <= now, f"{lease.item.value!r} handed out while a lease held it until {end}"
        self.ends[lease.item.id] = lease_end(lease)

    def gave_back(self, lease) -> None:
        self.ends.pop(lease.item.id, None)


def _now(clock) -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc) + dt.timedelta(microseconds=clock.ahead_us)


FAULTS = ["not_committed", "unknown_applied", "unknown_not_applied"]


@pytest.mark.parametrize("fault", FAULTS)
def test_a_claim_whose_commit_fails_never_hands_out_a_held_item(fdbqueue_db, pq, clock, fault):
    """Issue 17, defect 0, first suspect: a claim retried after 1020 or 1021. The retry takes
    another item (the first attempt's lease, if it committed, stays with nobody until it ends),
    and no other consumer gets either item while its lease holds."""
    db, faulty, holders = fdbqueue_db, FaultyDatabase(fdbqueue_db), Holders()
    for value in ("a", "b", "c"):
        service.push(db, pq, value, dedup_key=value)
    faulty.plan.append(fault)
    first = service.claim(faulty, pq, lease=10)
    assert faulty.plan == []  # the fault was met
    holders.took(first, _now(clock))
    lost = fault == "unknown_applied"  # "a" is hidden by an attempt whose answer never came
    assert first.item.value == ("b" if lost else "a")
    second = service.claim(db, pq, lease=10)
    holders.took(second, _now(clock))
    assert second.item.value == ("c" if lost else "b")
    third = service.claim(db, pq, lease=10)
    holders.took(third, _now(clock))
    assert third is None if lost else third.item.value == "c"
    clock.advance(10.5)  # every lease has ended: each item comes back, once
    again = [service.claim(db, pq, lease=60) for _ in range(4)]
    for lease in again:
        holders.took(lease, _now(clock))
    assert sorted(lease.item.value for lease in again if lease) == ["a", "b", "c"] and again[3] is None
    if lost:
        assert next(lease for lease in again if lease.item.value == "a").item.attempts == 2


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("settle", ["ack", "release", "release-later"])
def test_an_ack_or_release_whose_commit_fails_gives_the_item_up_once(fdbqueue_db, pq, clock, fault, settle):
    """Issue 17, defect 0: ack and release retried after 1020 or 1021 report their own outcome,
    and the item goes to the next consumer only once they have given it up (or never, acked)."""
    db, faulty, holders = fdbqueue_db, FaultyDatabase(fdbqueue_db), Holders()
    service.push(db, pq, "a", dedup_key="a")
    lease = service.claim(db, pq, lease=10)
    holders.took(lease, _now(clock))
    assert service.claim(db, pq, lease=10) is None  # held
    faulty.plan.append(fault)
    if settle == "ack":
        service.ack(faulty, lease.receipt)
    else:
        expected = "ready" if settle == "release" else "delayed"
        assert service.release(faulty, lease.receipt, delay=0 if settle == "release" else 5) == expected
    assert faulty.plan == []
    holders.gave_back(lease)
    if settle == "release-later":
        assert service.claim(db, pq, lease=10) is None
        clock.advance(5.5)
    again = service.claim(db, pq, lease=10)
    holders.took(again, _now(clock))
    assert again is None if settle == "ack" else (again.item.value, again.item.attempts) == ("a", 2)
    clock.advance(10.5)  # the next holder's lease ends too
    last = service.claim(db, pq, lease=10)
    holders.took(last, _now(clock))
    assert last is None if settle == "ack" else (last.item.value, last.item.attempts) == ("a", 3)


def test_random_commit_failures_on_both_engines_never_hand_out_a_held_item(fdbqueue_db, pq, clock):
    """Seeded: pushes with dedup keys, claims from both ends, acks, releases (at once or later)
    and leases running out, with 1020 and both 1021s on a fifth of the commits. No item is ever
    handed out while a lease holds it, and in the end each was acked exactly once."""
    db, faulty, holders = fdbqueue_db, FaultyDatabase(fdbqueue_db), Holders()
    rng = random.Random(20261124)
    held, acked, pushed = [], Counter(), set()

    def plan() -> None:
        faulty.plan[:] = [rng.choice(FAULTS) if rng.random() < 0.2 else None for _ in range(4)]

    for step in range(160):
        plan()
        roll = rng.random()
        if roll < 0.3:
            pushed.add(service.push(faulty, pq, step, rng.randint(0, 2), dedup_key=f"k{step}").id)
        elif roll < 0.65:
            lease = service.claim(faulty, pq, lease=rng.choice((1, 4)), end=rng.choice(("min", "max")))
            holders.took(lease, _now(clock))
            if lease is not None:
                held.append(lease)
        elif roll < 0.9 and held:
            lease = held.pop(rng.randrange(len(held)))
            try:
                if rng.random() < 0.7:
                    service.ack(faulty, lease.receipt)
                    acked[lease.item.id] += 1
                else:
                    service.release(faulty, lease.receipt, delay=rng.choice((0, 2)))
                holders.gave_back(lease)
            except (LeaseExpired, LeaseNotFound):
                pass  # its lease ran out first: the item is someone else's, or will be
        else:
            clock.advance(rng.choice((0.5, 1.5, 5)))
    faulty.plan.clear()
    clock.advance(10)
    while (lease := service.claim(db, pq, lease=60)) is not None:
        holders.took(lease, _now(clock))
        service.ack(db, lease.receipt)
        acked[lease.item.id] += 1
    assert set(acked) == pushed and set(acked.values()) == {1}
    assert counts(db, pq) == (0, 0, 0, 0)


# --- many claimers ------------------------------------------------------------------------------------------


def _claim_all(db, name, holders, lock, got, errors):
    try:
        while (lease := service.claim(db, name, lease=60)) is not None:
            with lock:
                if lease.item.id in holders:
                    errors.append(f"{lease.item.id} held twice")
                holders.add(lease.item.id)
            got.append(lease.item.id)
            service.ack(db, lease.receipt)
            with lock:
                holders.discard(lease.item.id)
    except BaseException as exc:
        errors.append(repr(exc))


def test_threads_never_hold_one_item_at_once(fdbqueue_db, pq):
    db = fdbqueue_db
    pushed = [i.id for i in service.push_many(db, pq, [(n, n % 3) for n in range(120)])]
    holders: set = set()
    lock = threading.Lock()
    got: list = []
    errors: list = []
    threads = [threading.Thread(target=_claim_all, args=(db, pq, holders, lock, got, errors)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert sorted(got) == sorted(pushed)


def _claiming_child(setting, name, start, results):
    try:
        db = child_database(setting)
        start.wait(JOIN_SECONDS)
        got = []
        while (lease := service.claim(db, name, lease=60)) is not None:
            got.append((lease.item.id, lease.receipt))
        results.put(("ok", os.getpid(), got))
    except BaseException as exc:
        results.put(("error", os.getpid(), repr(exc)))


def test_processes_claim_each_item_once(fdbqueue_db, pq):
    """Eight processes claim without acking: no item may be handed to two of them."""
    db = fdbqueue_db
    pushed = [i.id for i in service.push_many(db, pq, [(n, n % 4) for n in range(160)])]
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(8)
    results = ctx.Queue()
    setting = dict(django_settings.FDBQUEUE)
    procs = [ctx.Process(target=_claiming_child, args=(setting, pq, start, results), daemon=True) for _ in range(8)]
    for p in procs:
        p.start()
    try:
        collected = []
        deadline = time.monotonic() + JOIN_SECONDS * 2
        while len(collected) < len(procs):
            status, _pid, payload = results.get(timeout=max(0.1, deadline - time.monotonic()))
            assert status == "ok", payload
            collected.append(payload)
        join_all(procs, JOIN_SECONDS)
    finally:
        kill_leftovers(procs)
    ids = [item_id for got in collected for item_id, _receipt in got]
    assert sorted(ids) == sorted(pushed)
    assert counts(db, pq) == (0, 160, 0, 0)
    for got in collected:
        for _item_id, receipt in got:
            service.ack(db, receipt)
    assert counts(db, pq) == (0, 0, 0, 0)


def test_a_receipt_or_cursor_cut_short_is_not_a_second_spelling(fdbqueue_db, pq):
    """The tuple layer would read an unterminated last element to the end: the service must not."""
    db = fdbqueue_db
    service.push(db, pq, "a")
    lease = service.claim(db, pq)
    for cut in (1, 2):
        with pytest.raises(InvalidReceipt):
            service.ack(db, lease.receipt[:-cut])
    service.push(db, pq, "b", delay=60)
    service.push(db, pq, "c", delay=61)
    cursor = service.scheduled(db, pq, limit=1).next_cursor
    with pytest.raises(InvalidCursor):
        service.scheduled(db, pq, cursor=cursor[:-1])
    service.ack(db, lease.receipt)
