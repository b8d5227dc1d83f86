"""High-contention claims: many claimers of one queue, in exact order, without fighting over its head.

The high-contention pop's staging (``contention.py``), for claims: a claim that meets other
claimers registers a request (versionstamped, so requests are served in commit order), and one
leader at a time runs fulfil rounds that lease items to every waiting request in one transaction,
then hands the next round on to a claimer it served. What makes claims simpler than pops: a
round's commit *leases* each item to its requester (``claimrounds``), so an item whose claimer
died is not lost, only leased to nobody until its lease ends, and the result a claimer reads is a
record of its lease, not the item itself. So collecting a result needs no commit, and nothing
needs recovering but stale results, which rounds clear blindly.

``claim(db, name, end, lease)`` below is what ``service.claim(..., mode="high-contention")``
calls. The protocol, its guarantees and their reasons: docs/explanation/high-contention-claims.md.
"""

from __future__ import annotations

import os
import threading
import time
from functools import partial
from typing import Any, Callable, cast

from django_fdbqueue.exceptions import InvalidArgument, LeaseNotFound
from django_fdbqueue.fdbapi import ErrorCode, FDBError, bounded, count_retry, is_transaction, make_error

from . import keys, leases, reading, settled, tokens, visibility
from .catalog import Entry, first, require, require_with_entry
from .claimrounds import CLAIM_ROUNDS, Claim, answer_of, is_answer
from ..records import Lease, SteppedLease, now_micros
from .recovery import micros
from .rounds import SnapshotReads, attempt
from .staging import (
    EMPTY,
    GONE,
    LEAD,
    STAGED,
    Outcome,
    answer,
    check_timeout,
    find_request,
    let_go,
    register,
    registered,
    retry,
    take_turns,
    watch_bells,
)

__all__ = ["DEFAULT_TIMEOUT", "STAGE_AFTER_CONFLICTS", "claim", "fulfil"]

#: Seconds a high-contention claim may wait for its turn before it withdraws.
DEFAULT_TIMEOUT = 5.0
#: Conflicting attempts after which an arriving claim registers a request instead of retrying
#: (0: it registers at once, whether others wait or not; the simulation's seeds try it).
STAGE_AFTER_CONFLICTS = 2
#: A collect (with ``step``) found its lease ended before it could run the step: start again.
AGAIN = Outcome("again")

_spent = threading.local()


# --- results already read, cleared by the thread's next claim ------------------------------------


def _spend(c: Claim) -> None:
    """Our result is read: the next claim of this thread clears it with its own commit (a result
    left behind goes anyway, blindly, once its deadline is long past: ``ClaimRounds.recover``)."""
    _spent.results = c.results


def _crowded(crowded: bool | None = None) -> bool:
    """Was this thread's last claim served among others (set with ``crowded``)? Then its next one
    registers at once: claimers served by one round come back together, and racing each other on
    the queue's head, as plain claims, they would only conflict before registering anyway."""
    if crowded is not None:
        _spent.crowded = crowded
    return bool(getattr(_spent, "crowded", False))


def _clear_spent(tr: Any) -> bool:
    spent = getattr(_spent, "results", None)
    if spent is not None:
        tr.clear_range(spent.start, spent.stop)
    return spent is not None


# --- step 1: claim at once, or register -----------------------------------------------------------


def _first_reads(tr: Any, c: Claim, _entry: Entry, qk: keys.QueueKeys) -> tuple[Any, ...]:
    """All snapshot reads, sent together: the time, what is due, the head, the requests, the lead.

    Snapshot reads, so that a registration conflicts with nobody; a claim made at once adds the
    read conflicts a plain claim's reads would have had (:func:`_ahead`).
    """
    now_us = now_micros()
    desk = c.desk_of(qk)
    r = desk.requests(c.end).range()
    waiting = tr.snapshot.get_range(r.start, r.stop, limit=1)
    return (
        now_us,
        visibility.due(tr, qk, now_us),
        reading.head_read(SnapshotReads(tr), qk, c.end, 1),
        waiting,
        tr.snapshot[desk.lead(c.end)],
    )


def _ahead(tr: Any, qk: keys.QueueKeys, end: str, item_key: bytes | None) -> None:
    """Read conflicts on what comes before ``item_key`` in pop order (on everything, for None):
    a push or a return ahead of it committed meanwhile makes this claim retry, as a plain one does."""
    r = qk.items.range()
    if item_key is None:
        tr.add_read_conflict_range(r.start, r.stop)
    elif end == "min":
        tr.add_read_conflict_range(r.start, item_key + b"\x00")
    else:
        pr = qk.priority_range(qk.items.unpack(item_key)[0])
        tr.add_read_conflict_range(pr.start, item_key + b"\x00")
        tr.add_read_conflict_range(pr.stop, r.stop)


def _claim_now(tr: Any, c: Claim, entry: Entry, qk: keys.QueueKeys, sent: tuple[Any, ...]) -> Lease | None:
    """Claim the next ready item as a plain claim does (None: none ready); its step runs here."""
    now_us, due, head = sent[:3]
    if visibility.promote(tr, qk, entry, now_us, rows=due):
        head = None
    kvs, _cut = reading.walk(SnapshotReads(tr), qk, c.end, 1, head=head)
    kv = kvs[0] if kvs else None
    _ahead(tr, qk, c.end, None if kv is None else bytes(kv.key))
    if kv is None:
        return None
    hidden = leases.grant(tr, qk, kv, now_us, now_us + c.lease_us, _new_token())
    lease = leases.leased(c.name, qk, hidden, kv.value)
    if c.step is None:
        return lease
    return SteppedLease(lease.item, lease.receipt, lease.lease_expires_at, c.step(tr, lease))


def _new_token() -> bytes:
    return os.urandom(keys.LEASE_TOKEN_BYTES)


def _confirm(tr: Any, qk: keys.QueueKeys, c: Claim) -> Lease | None:
    """After a 1021 on a claim made at once: its lease, if that commit happened.

    The lease's own token is the proof: the item is hidden under it only if that attempt committed
    (after reporting 1021 it never will later). Resolved either way once the read answers.
    """
    assert c.candidate is not None
    r = tokens.parse_receipt(c.candidate.receipt)
    raw = tr.snapshot[qk.hidden_index.pack((r.priority, r.stamp))]
    held = raw.present() and visibility.Hidden.from_index(r.priority, r.stamp, bytes(raw)).token == r.token
    candidate, c.candidate = c.candidate, None
    return candidate if held else None


def _arrive(db: Any, c: Claim, *, stage: bool = False) -> Lease | Outcome:
    """Claim at once (a Lease, or EMPTY), or register a request (STAGED).

    One transaction per attempt, reading as :func:`_first_reads` says. If no request waits, it
    claims as a plain claim does; if one does, it registers behind it in the same attempt: an
    arriving claim never overtakes a waiting one. After :data:`STAGE_AFTER_CONFLICTS` conflicts
    it registers instead of racing on (``stage=True``: at once). Commits in doubt: a claim made at once is confirmed by its
    lease's token (:func:`_confirm`), a registration by its request (``staging.find_request``).
    """
    tr = db.create_transaction()
    conflicts, unsure = 0, False
    while True:
        took: Lease | None = None
        registering = stage
        try:
            entry, qk, sent = require_with_entry(tr, c.name, partial(_first_reads, tr, c), fifo_ok=c.end == "min")
            c.check(entry, qk)
            if c.ack is not None:
                _ack_in(tr, c.ack)  # its reads overlap the claim's, already sent
            confirmed = _confirm(tr, qk, c) if c.candidate is not None else None
            if confirmed is not None:
                return confirmed
            if unsure and find_request(tr, c):
                return STAGED
            if not registering:
                registering = first(sent[3]) is not None
            if not registering:
                took = _claim_now(tr, c, entry, qk, sent)
            else:
                stamp, leads = register(tr, c, sent[4])
            cleared = (registering or took is not None) and _clear_spent(tr)
            tr.commit().wait()
            if cleared:
                _spent.results = None
            if registering:
                registered(c, stamp, leads)
                return STAGED
            return EMPTY if took is None else took
        except FDBError as error:
            let_go(c)
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
                unsure = unsure or registering
                c.candidate = took if took is not None else c.candidate
            elif error.code == ErrorCode.NOT_COMMITTED and not registering:
                conflicts += 1
                if conflicts >= STAGE_AFTER_CONFLICTS:
                    count_retry(error.code)
                    stage, tr = True, db.create_transaction()  # the lost races' budget is not the registration's
                    continue
            retry(tr, error)


def _ack_in(tr: Any, receipt: str) -> None:
    """Ack ``receipt`` in the claim's first transaction: a claimer's previous lease settled by the
    commit that registers its next claim. A lease not found whose settled marker says "acked" was
    acked already (by an attempt of ours in doubt, or a call of the caller's that raised): done."""
    try:
        leases.ack(tr, receipt)
    except LeaseNotFound:
        r = tokens.parse_receipt(receipt)
        _entry, qk = require(tr, r.name)
        found = settled.recorded(tr, qk, (r.token,))
        if found is None or found[0] != leases.ACKED.encode("ascii"):
            raise


# --- steps 2 and 3: rounds, and looking ----------------------------------------------------------


def _lead(db: Any, c: Claim) -> Lease | Outcome | None:
    """Run the round we lead: our own answer, if it committed (else None: look)."""
    done = attempt(db, c.name, c.end, c, lead=True, kind=CLAIM_ROUNDS)
    if not done.committed or done.mine is None:
        return None
    _crowded(done.served + done.answered_empty > 1)
    if c.step is not None and done.mine is not EMPTY:
        return None  # the step runs in the transaction that collects our result
    _spend(c)
    return cast("Lease | Outcome", done.mine)


@bounded
def fulfil(db: Any, name: str, end: str = "min") -> Any:
    """One claims' round for ``end`` of ``name`` (a maintenance task's, or a test's); one attempt."""
    if is_transaction(db):
        raise InvalidArgument("fulfil runs its own transaction: pass the database.")
    return attempt(db, name, end, None, kind=CLAIM_ROUNDS)


def _collect(tr: Any, c: Claim, qk: keys.QueueKeys, answer: Any) -> Lease | Outcome:
    """Our answer. Without a step, only read (its lease is granted already); with one, the step
    runs here and the results are cleared, so that this commit is the claim's last word."""
    got = answer_of(c.name, qk, c.desk, answer)
    if c.step is None or not isinstance(got, Lease):
        return got
    r = tokens.parse_receipt(got.receipt)
    raw = tr[qk.hidden_index.pack((r.priority, r.stamp))]  # an ordinary read: a promotion conflicts
    tr.clear_range(c.results.start, c.results.stop)
    if not raw.present():
        return AGAIN  # the lease ended before we could take it up, and the item moved on
    hidden = visibility.Hidden.from_index(r.priority, r.stamp, bytes(raw))
    if hidden.token != r.token or hidden.visible_us <= now_micros():
        return AGAIN  # the same, or it ended and the item is about to come back
    return SteppedLease(got.item, got.receipt, got.lease_expires_at, c.step(tr, got))


def _look(db: Any, c: Claim, *, withdraw: bool) -> Any:
    """Collect our answer if there is one; else lead, watch our bells or, to withdraw, clear the request.

    Returns a Lease, EMPTY, GONE, AGAIN, LEAD (nobody else runs the rounds, or a round named
    us), or a watch future (the request is still waiting).
    """
    tr = db.create_transaction()
    while True:
        got: Any = None
        try:
            desk = c.desk_of(c.bind(tr))
            lead = tr.snapshot[desk.lead(c.end)]
            rows = list(tr.get_range(c.results.start, c.results.stop))
            named = c.named(lead)
            answers = [kv for kv in rows if is_answer(desk, kv)]
            if named and not withdraw:
                got = LEAD  # a round named us: run the next one first, then collect
            elif answers:
                got = _collect(tr, c, cast(keys.QueueKeys, c.qk), answers[0])
            elif c.collected is not None:
                got = c.collected  # our collect, in doubt, did commit: it cleared our results
            elif c.request_key is not None and tr[c.request_key].present():
                got = _wait_on(tr, c, lead, withdraw)
            else:
                got = GONE  # dropped after the deadline, or results cleared long after it
            if named and withdraw:
                del tr[desk.lead(c.end)]  # out of time: leave the rounds to whoever finds them unled
            tr.commit().wait()  # read-only while watching or collecting without a step
            if (isinstance(got, Lease) and c.step is None) or got is EMPTY:
                _spend(c)
            if isinstance(got, Lease) or got is EMPTY:
                _crowded(True)  # served by another's round
            return got
        except FDBError as error:
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT and isinstance(got, SteppedLease):
                c.collected = got
            retry(tr, error)


def _wait_on(tr: Any, c: Claim, lead: Any, withdraw: bool) -> Any:
    """Our request still waits: withdraw it (GONE), lead (nobody else does), or watch our bells."""
    if withdraw:
        assert c.request_key is not None
        del tr[c.request_key]
        del tr[c.bell]
        return GONE
    if c.may_lead(lead, now_micros()):
        return LEAD  # nobody else runs the rounds: the one who leads may have died
    return watch_bells(tr, c)


# --- the entry point ------------------------------------------------------------------------------


def _finish(got: Any) -> Lease | None:
    return cast("Lease | None", answer(got))


@bounded
def claim(
    db: Any,
    name: str,
    end: str,
    lease: float,
    *,
    timeout: float | None = None,
    step: Callable[[Any, Lease], Any] | None = None,
    ack: str | None = None,
) -> Lease | None:
    """Claim from ``end`` of ``name`` for ``lease`` seconds, through a staged request when others compete.

    Same contract as ``service.claim``: a Lease, or None when nothing is visible. It needs the
    database, since it runs several transactions. If it cannot be served within ``timeout``
    seconds (default :data:`DEFAULT_TIMEOUT`) it withdraws and raises ``FDBError`` 1031.
    ``ack``: a receipt acked in the claim's first commit (its errors are raised, nothing claimed).
    """
    if is_transaction(db):
        raise InvalidArgument(
            "A high-contention claim runs several transactions of its own, so it cannot join an "
            "open transaction: pass the database, or claim with mode='plain' inside a transaction."
        )
    seconds = check_timeout(timeout, DEFAULT_TIMEOUT)
    deadline_us, deadline = now_micros() + micros(seconds), time.monotonic() + seconds
    while True:
        c = Claim(name, end, deadline_us, deadline, lease_us=micros(lease), step=step, ack=ack)
        try:
            got = _serve(db, c)
        finally:
            let_go(c)
        ack = None  # committed with the first arrival
        if got is not AGAIN:
            return _finish(got)
        if c.left() <= 0:
            raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)


def _serve(db: Any, c: Claim) -> Any:
    """``claim``'s steps: arrive; then lead, wait for a bell or look until answered."""
    got = _arrive(db, c, stage=STAGE_AFTER_CONFLICTS <= 0 or _crowded())
    if got is not STAGED:
        _crowded(False)
        return got
    return take_turns(c, lambda: _lead(db, c), lambda withdraw: _look(db, c, withdraw=withdraw))
