"""Leases: at-least-once delivery with claim, then ack, release or extend.

A claim takes the next ready item as a pop does, but instead of deleting it, hides it until the
lease ends (``visibility.Hidden`` with a fresh random token) and counts the claim in the item's
attempts. The receipt it returns names the queue, the queue's id, the item's place and the
token; the token is checked against the hidden item's index entry, so a receipt from an earlier
claim of the same item (whose lease ran out and was claimed again) or a forged one can never
act on the current lease.

Nothing has to run for an expired lease to come back: the item is hidden until its expiry, and
the next pop, claim or peek moves it back to its place in queue order (``visibility.promote``),
or to the dead letters once it has had ``max_attempts`` claims.

Retries after ``commit_unknown_result`` (1021). An ack or release whose commit may have
happened must not then report ``LeaseNotFound`` (its own first attempt removed the lease). So
both leave a small marker ``s/epoch/token -> outcome`` in the same transaction, and an attempt
that follows a 1021 looks for it first. Markers live one to two hours (blind clears of older
epochs, no reads). A claim retried after 1021 may leave the first attempt's lease behind; that
item simply comes back when the lease ends: delivered at least once, never lost.
"""

from __future__ import annotations

import os
import random
from typing import Any, Callable

from django_fdbqueue.exceptions import InvalidReceipt, LeaseExpired, LeaseNotFound
from django_fdbqueue.fdbapi import ErrorCode, FDBError, _count_retry, bounded, is_transaction, transactional

from . import activity, dedup, keyclaims, keylimits, keys, tenantturns, visibility
from .catalog import counter_bytes, require, require_with_entry
from .items import promote_and_walk
from .records import Lease, SteppedLease, now_micros, to_datetime

DEFAULT_LEASE_SECONDS = 30.0
MAX_LEASE_SECONDS = 43_200.0
SETTLED_EPOCH_SECONDS = 3600
# Clearing markers of old epochs is a blind range clear; doing it on one settle in this many
# keeps them bounded without adding a write to every ack.
EXPIRE_SETTLED_EVERY = 32

ACKED = "acked"
READY = "ready"
DELAYED = "delayed"
DEAD = "dead"


def _micros(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


def _epoch(micros: int) -> int:
    return micros // (SETTLED_EPOCH_SECONDS * 1_000_000)


# --- claim -----------------------------------------------------------------------------------------


@transactional(trusts=lambda lease: isinstance(lease, Lease))  # "none ready" needs a fresh read version
def claim_once(
    tr: Any, name: str, lease: float, end: str, step: Callable[[Any, Lease], Any] | None = None
) -> Lease | keyclaims.Blocked | None:
    """Take the next ready item under a lease of ``lease`` seconds; None when none is ready.

    On a queue with per-key limits, the next item whose key is under its limits (``keyclaims``),
    or ``Blocked`` when there are items but none may be claimed now. ``step(tr, lease)`` runs
    last, in this transaction; a SteppedLease then carries what it returned.
    """
    entry, qk, (limits, sent) = require_with_entry(
        tr, name, lambda entry, qk: keyclaims.first_reads(tr, entry, qk, end), fifo_ok=end == "min"
    )
    if limits is None:
        now_us = sent[0]
        walker = tenantturns.promote_and_walk if entry.tenants else promote_and_walk
        kvs, _cut = walker(tr, entry, qk, end, 1, sent=sent)
        kv = kvs[0] if kvs else None
    else:
        now_us = sent[0][0]
        kv = keyclaims.choose(tr, entry, qk, end, limits, sent)
    if kv is None or isinstance(kv, keyclaims.Blocked):
        return kv
    priority, stamp, meta = visibility.take_ready(tr, qk, bytes(kv.key))
    keylimits.taken(tr, qk, meta)
    tr.add(qk.counter(keys.SIZE), counter_bytes(-1))
    hidden = visibility.Hidden(now_us + _micros(lease), priority, stamp, os.urandom(keys.LEASE_TOKEN_BYTES), meta.claimed())
    visibility.hide(tr, qk, hidden, bytes(kv.value))
    activity.count(tr, qk, now_us, activity.CLAIMED)
    receipt = keys.Receipt(name, qk.queue_id, priority, stamp, hidden.token).encode()
    item = visibility.item_from(priority, stamp, hidden.meta, kv.value)
    claimed = Lease(item, receipt, to_datetime(hidden.visible_us))
    if step is None:
        return claimed
    return SteppedLease(item, receipt, claimed.lease_expires_at, step(tr, claimed))


# --- the lease a receipt names ------------------------------------------------------------------


def parse(receipt: object, name: str | None) -> keys.Receipt:
    if name is not None:
        keys.check_name(name)
    parsed = keys.parse_receipt(receipt)
    if name is not None and parsed.name != name:
        raise InvalidReceipt(
            f"This receipt belongs to queue {parsed.name!r}, not {name!r}.", name=name
        )
    return parsed


class Held:
    """A lease the receipt proved to be current: the queue, the hidden item, the time of checking."""

    __slots__ = ("entry", "qk", "hidden", "now_us")

    def __init__(self, entry: Any, qk: keys.QueueKeys, hidden: visibility.Hidden, now_us: int) -> None:
        self.entry = entry
        self.qk = qk
        self.hidden = hidden
        self.now_us = now_us


def _settled(tr: Any, qk: keys.QueueKeys, r: keys.Receipt, since_us: int) -> str | None:
    """After a 1021: the outcome an earlier attempt of this call recorded, if it committed."""
    now_us = now_micros()
    futures = [tr[qk.settled.pack((epoch, r.token))] for epoch in range(_epoch(since_us), _epoch(now_us) + 1)]
    for future in futures:
        if future.present():
            return bytes(future).decode("ascii")
    return None


def _held(tr: Any, r: keys.Receipt) -> Held:
    entry, qk = require(tr, r.name)
    if entry.queue_id != r.queue_id:
        raise LeaseNotFound(
            f"Queue {r.name!r} was deleted and created again since this claim.", name=r.name
        )
    raw = tr[qk.hidden_index.pack((r.priority, r.stamp))]
    now_us = now_micros()
    if not raw.present():
        raise LeaseNotFound(name=r.name)
    hidden = visibility.Hidden.from_index(r.priority, r.stamp, bytes(raw))
    if hidden.token != r.token:
        raise LeaseNotFound(name=r.name)
    if hidden.visible_us <= now_us:
        raise LeaseExpired(name=r.name)
    return Held(entry, qk, hidden, now_us)


def _mark(tr: Any, held: Held, token: bytes, outcome: str) -> None:
    qk = held.qk
    tr[qk.settled.pack((_epoch(held.now_us), token))] = outcome.encode("ascii")
    if random.randrange(EXPIRE_SETTLED_EVERY) == 0:
        r = qk.settled.range()
        tr.clear_range(r.start, qk.settled.pack((_epoch(held.now_us) - 1,)))


@bounded
def _settle(db_or_tr: Any, r: keys.Receipt, body: Callable[[Any, Held], str]) -> str:
    """Run ``body`` on the held lease, retrying like ``transactional``, safe against 1021.

    Given a caller's transaction, it joins it (the caller commits, and owns any 1021).
    """
    if is_transaction(db_or_tr):
        return body(db_or_tr, _held(db_or_tr, r))
    tr = db_or_tr.create_transaction()
    started_us = now_micros()
    in_doubt = False
    while True:
        try:
            if in_doubt:
                entry, qk = require(tr, r.name)
                if entry.queue_id == r.queue_id:
                    outcome = _settled(tr, qk, r, started_us)
                    if outcome is not None:
                        return outcome
            outcome = body(tr, _held(tr, r))
            tr.commit().wait()
            return outcome
        except FDBError as error:
            if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
                in_doubt = True
            _count_retry(error.code)
            tr.on_error(error).wait()


# --- ack, release, extend --------------------------------------------------------------------------


def ack(db_or_tr: Any, receipt: str, name: str | None = None) -> None:
    r = parse(receipt, name)

    def body(tr: Any, held: Held) -> str:
        hidden, qk = held.hidden, held.qk
        visibility.unhide(tr, qk, hidden)
        keylimits.give_back(tr, qk, held.entry, hidden.meta)
        tr.add(qk.counter(keys.POPPED), counter_bytes(1))
        activity.count(tr, qk, held.now_us, activity.ACKED)
        dedup.consumed(tr, qk, hidden.priority, hidden.stamp, hidden.meta)
        _mark(tr, held, r.token, ACKED)
        return ACKED

    _settle(db_or_tr, r, body)


def release(db_or_tr: Any, receipt: str, delay: float, name: str | None = None) -> str:
    r = parse(receipt, name)
    delay_us = _micros(delay)

    def body(tr: Any, held: Held) -> str:
        hidden, qk = held.hidden, held.qk
        payload = tr[hidden.key(qk)]
        if not payload.present():  # the index and the hidden key are written together
            raise LeaseNotFound(name=r.name)
        payload = bytes(payload)
        visibility.unhide(tr, qk, hidden)
        keylimits.give_back(tr, qk, held.entry, hidden.meta)
        activity.count(tr, qk, held.now_us, activity.FAILED)
        if visibility.exhausted(held.entry, hidden.meta):
            visibility.bury(tr, qk, hidden.priority, hidden.stamp, hidden.meta, payload, held.now_us)
            outcome = DEAD
        elif delay_us > 0:
            later = visibility.Hidden(held.now_us + delay_us, hidden.priority, hidden.stamp, b"", hidden.meta)
            visibility.hide(tr, qk, later, payload)
            visibility.wake(tr, qk)  # waiters recompute when the next item shows
            outcome = DELAYED
        else:
            visibility.ready_again(tr, qk, hidden, payload)
            visibility.wake(tr, qk)
            outcome = READY
        _mark(tr, held, r.token, outcome)
        return outcome

    return _settle(db_or_tr, r, body)


@transactional
def _extend(tr: Any, r: keys.Receipt, seconds: float) -> Lease:
    held = _held(tr, r)
    hidden, qk = held.hidden, held.qk
    old_key = hidden.key(qk)
    payload = tr[old_key]
    if not payload.present():
        raise LeaseNotFound(name=r.name)
    longer = visibility.Hidden(held.now_us + _micros(seconds), hidden.priority, hidden.stamp, hidden.token, hidden.meta)
    del tr[old_key]
    tr[longer.key(qk)] = bytes(payload)
    tr[longer.index_key(qk)] = longer.index_value()
    item = visibility.item_from(hidden.priority, hidden.stamp, hidden.meta, payload)
    return Lease(item, r.encode(), to_datetime(longer.visible_us))


def extend(db_or_tr: Any, receipt: str, seconds: float, name: str | None = None) -> Lease:
    """The lease now ends ``seconds`` from now. A retry re-extends: the outcome is the same."""
    return _extend(db_or_tr, parse(receipt, name), seconds)
