"""Calls whose commit ends in doubt (issue 28): acks, releases and dead letters answer their retry
as the first attempt did, and a consumed item's dedup key never takes over another item's.

Every test runs per engine through `fdbqueue_db`. The doubt comes from
:class:`tests.test_contention_recovery.Scripted`, which makes a commit that happened report an
error anyway, the same way on both engines: 1021, which the service retries by itself, and 1031
(a timeout, also what the wait bound raises), which reaches the caller, who retries. Time passes
with a clock run ahead, never for real.
"""

from __future__ import annotations

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import DeadLetterNotFound, LeaseNotFound
from django_fdbqueue.fdbapi import ErrorCode, FDBError, commit_in_doubt, make_error, transactional
from django_fdbqueue.service._internals import dedup, settled
from tests.test_contention_recovery import Scripted

IN_DOUBT = [ErrorCode.COMMIT_UNKNOWN_RESULT, ErrorCode.TRANSACTION_TIMED_OUT]


def as_a_caller_would(call):
    """Run ``call``; on an error that leaves its commit in doubt, run it once more, as documented."""
    try:
        return call()
    except FDBError as error:
        assert commit_in_doubt(error), error
        return call()


def counts(db, name) -> tuple[int, int, int, int]:
    info = service.get_queue(db, name)
    return info.size, info.leased, info.delayed, info.dead


def dead_letter(db, name: str, value: str, dedup_key: str | None = None):
    """A new item of ``name`` (max_attempts 1), claimed once and released: a dead letter."""
    item = service.push(db, name, value, dedup_key=dedup_key)
    lease = service.claim(db, name)
    assert lease.item.id == item.id
    assert service.release(db, lease.receipt) == "dead"
    return item


@pytest.fixture
def q(fdbqueue_db):
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    service.set_max_attempts(fdbqueue_db, "q", 1)
    return "q"


# --- the predicate ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code, doubt", [(1021, True), (1031, True), (1025, True), (1039, True), (1020, False), (1007, False), (2101, False)]
)
def test_which_errors_leave_a_commit_in_doubt(code, doubt):
    assert commit_in_doubt(make_error(code)) is doubt
    assert commit_in_doubt(ValueError("not FoundationDB's")) is False


# --- 1: dead letters ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", IN_DOUBT)
def test_a_requeue_whose_commit_applied_in_doubt_answers_the_item(fdbqueue_db, q, code):
    db = fdbqueue_db
    a = dead_letter(db, q, "a")
    scripted = Scripted(db)
    scripted.applied_then(code)
    item = as_a_caller_would(lambda: service.requeue_dead_letter(scripted, q, a.id))
    assert scripted.raised == [code]
    assert (item.id, item.value, item.attempts, item.enqueued_at) == (a.id, "a", 0, a.enqueued_at)
    assert counts(db, q) == (1, 0, 0, 0)
    assert service.pop(db, q).id == a.id


@pytest.mark.parametrize("code", IN_DOUBT)
def test_a_delete_whose_commit_applied_in_doubt_succeeds(fdbqueue_db, q, code):
    db = fdbqueue_db
    a = dead_letter(db, q, "a")
    scripted = Scripted(db)
    scripted.applied_then(code)
    assert as_a_caller_would(lambda: service.delete_dead_letter(scripted, q, a.id)) is None
    assert scripted.raised == [code]
    assert counts(db, q) == (0, 0, 0, 0)


def test_a_repeated_dead_letter_call_answers_as_the_first_and_only_as_the_same_call(fdbqueue_db, q, clock):
    """Within the markers' lifetime a repeated requeue or delete answers as the first did; a call
    of the other kind, a caller's transaction, or a call hours later is refused."""
    db = fdbqueue_db
    a, b = dead_letter(db, q, "a"), dead_letter(db, q, "b")
    first = service.requeue_dead_letter(db, q, a.id)
    assert service.requeue_dead_letter(db, q, a.id) == first
    service.delete_dead_letter(db, q, b.id)
    assert service.delete_dead_letter(db, q, b.id) is None
    with pytest.raises(DeadLetterNotFound):
        service.delete_dead_letter(db, q, a.id)  # it was requeued, not deleted
    with pytest.raises(DeadLetterNotFound):
        service.requeue_dead_letter(db, q, b.id)
    with pytest.raises(DeadLetterNotFound):
        transactional(lambda tr: service.requeue_dead_letter(tr, q, a.id))(db)
    assert counts(db, q) == (1, 0, 0, 0)
    clock.advance(3 * settled.EPOCH_SECONDS)
    with pytest.raises(DeadLetterNotFound):
        service.requeue_dead_letter(db, q, a.id)


# --- 2: leases, and 1031 -------------------------------------------------------------------------------


@pytest.mark.parametrize("code", IN_DOUBT)
def test_an_ack_whose_commit_applied_in_doubt_succeeds_when_retried(fdbqueue_db, q, code):
    db = fdbqueue_db
    service.push(db, q, "a")
    lease = service.claim(db, q)
    scripted = Scripted(db)
    scripted.applied_then(code)
    as_a_caller_would(lambda: service.ack(scripted, lease.receipt))
    assert scripted.raised == [code]
    assert counts(db, q) == (0, 0, 0, 0) and service.get_queue(db, q).popped == 1


@pytest.mark.parametrize("code", IN_DOUBT)
def test_a_release_whose_commit_applied_in_doubt_reports_its_outcome(fdbqueue_db, q, code):
    db = fdbqueue_db
    service.set_max_attempts(db, q, None)
    service.push(db, q, "a")
    lease = service.claim(db, q)
    scripted = Scripted(db)
    scripted.applied_then(code)
    assert as_a_caller_would(lambda: service.release(scripted, lease.receipt, delay=60)) == "delayed"
    assert scripted.raised == [code]
    assert counts(db, q) == (0, 0, 1, 0)


def test_a_repeated_ack_answers_as_the_first_and_only_as_the_same_call(fdbqueue_db, q, clock):
    """Within the markers' lifetime: a repeated ack succeeds, a release of the acked receipt does
    not, nor an ack in a caller's transaction (whose other writes are the caller's to settle)."""
    db = fdbqueue_db
    service.push(db, q, "a")
    lease = service.claim(db, q)
    service.ack(db, lease.receipt)
    service.ack(db, lease.receipt)
    with pytest.raises(LeaseNotFound):
        service.release(db, lease.receipt)
    with pytest.raises(LeaseNotFound):
        transactional(lambda tr: service.ack(tr, lease.receipt))(db)
    assert service.get_queue(db, q).popped == 1
    clock.advance(3 * settled.EPOCH_SECONDS)
    with pytest.raises(LeaseNotFound):
        service.ack(db, lease.receipt)


# --- 3: a consumed item and another item's dedup key ------------------------------------------------


def _consume(db, name: str, item, how: str) -> None:
    if how == "pop":
        assert service.pop(db, name).id == item.id
    elif how == "ack":
        lease = service.claim(db, name)
        assert lease.item.id == item.id
        service.ack(db, lease.receipt)
    else:
        service.delete_dead_letter(db, name, item.id)


@pytest.mark.parametrize("how", ["pop", "ack", "delete"])
def test_a_consumed_item_leaves_a_newer_items_dedup_record_alone(fdbqueue_db, q, clock, how):
    """``clear`` forgets key K but keeps dead letter A; B is pushed with K; then A is consumed
    (requeued and popped or acked, or its dead letter deleted). K still names B, alive: a push of
    K is B's duplicate, and stays so after the window (no second copy of B's key)."""
    db = fdbqueue_db
    a = dead_letter(db, q, "a", dedup_key="k")
    service.clear(db, q)
    b = service.push(db, q, "b", dedup_key="k")
    assert not b.duplicate
    if how != "delete":
        service.requeue_dead_letter(db, q, a.id)
    _consume(db, q, a, how)
    again = service.push(db, q, "b again", dedup_key="k")
    assert again.duplicate and again.id == b.id
    clock.advance(dedup.DEDUP_WINDOW_SECONDS + 1)
    later = service.push(db, q, "b later", dedup_key="k")
    assert later.duplicate and later.id == b.id
    assert counts(db, q) == (1, 0, 0, 0)
    assert [item.id for item in service.pop_many(db, q, 10)] == [b.id]
