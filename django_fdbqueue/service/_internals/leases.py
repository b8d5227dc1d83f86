"""Leases: at-least-once delivery with claim, then ack, release or extend.

A claim takes the next ready item as a pop does but hides it until the lease ends
(``visibility.Hidden`` with a fresh random token) and counts the claim in its attempts; the
receipt's token is checked against the hidden item's entry, so only this lease's receipt acts on
it. Nothing runs for an expired lease: the next pop or claim moves the item back
(``visibility.promote``), or to the dead letters. An ack or release leaves a settled marker
(``settled``), so its retry after a commit in doubt answers as the first attempt did.

Why, and what each operation guarantees: the docs' data model page, "Leases, delays and dead
letters" (docs/explanation/data-model.md), and docs/explanation/guarantees.md.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from django_fdbqueue.exceptions import InvalidReceipt, LeaseExpired, LeaseNotFound
from django_fdbqueue.fdbapi import transactional, vouch

from . import checks, dedup, hinted, keyclaims, keylimits, keys, settled, spread, tally, tenantturns, tokens, visibility
from .waiting import Blocked
from .catalog import counter_bytes, require, require_with_entry, root
from .reading import promote_and_walk
from ..records import Lease, SteppedLease, now_micros, to_datetime

DEFAULT_LEASE_SECONDS = 30.0
MAX_LEASE_SECONDS = 43_200.0

ACKED = "acked"
READY = "ready"
DELAYED = "delayed"
DEAD = "dead"
RELEASED = frozenset({READY, DELAYED, DEAD})


def check_lease(seconds: object, what: str = "lease") -> float:
    """A lease's length as given to claim or extend: over 0, at most MAX_LEASE_SECONDS."""
    return checks.check_seconds(seconds, what, minimum=0, maximum=MAX_LEASE_SECONDS, inclusive_minimum=False)


def _micros(seconds: float) -> int:
    return int(round(seconds * 1_000_000))


# --- claim -----------------------------------------------------------------------------------------


def _claim(
    tr: Any,
    name: str,
    lease: float,
    end: str,
    step: Callable[[Any, Lease], Any] | None = None,
    spreading: int | None = None,
    hint: bytes = b"",
) -> Lease | Blocked | None:
    """Take the next ready item under a lease of ``lease`` seconds; None when none is ready.

        On a queue with per-key limits, the next item whose key is under its limits (``keyclaims``),
        or ``Blocked`` when there are items but none may be claimed now. With ``spreading``, one of
        the first that many ready items (``spread``); with ``hint``, the item its async waiter was
    handed (``hinted``). ``step(tr, lease)`` runs last, in this
        transaction; a SteppedLease then carries what it returned.
    """

    def first_reads(entry: Any, qk: keys.QueueKeys) -> tuple[Any, Any]:
        if spreading is not None and spread.applies(entry):
            return None, spread.first_reads(tr, qk, end, spreading)
        if hinted.applies(entry, qk, end, hint):
            return None, hinted.first_reads(tr, qk, hint)
        return keyclaims.first_reads(tr, entry, qk, end)

    entry, qk, (limits, sent) = require_with_entry(tr, name, first_reads, fifo_ok=end == "min")
    if limits is None and spreading is not None and spread.applies(entry):
        now_us = sent[0]
        kv = spread.choose(tr, entry, qk, end, spreading, sent)
    elif limits is None and hinted.applies(entry, qk, end, hint):
        now_us = sent[0]
        kv = hinted.choose(tr, entry, qk, hint, sent)
    elif limits is None:
        now_us = sent[0]
        walker = tenantturns.promote_and_walk if entry.tenants else promote_and_walk
        kvs, _cut = walker(tr, entry, qk, end, 1, sent=sent)
        kv = kvs[0] if kvs else None
    else:
        now_us = sent[0][0]
        kv = keyclaims.choose(tr, entry, qk, end, limits, sent)
    if kv is None or isinstance(kv, Blocked):
        return kv
    return _lease(tr, name, qk, kv, now_us, lease, step)


def _lease(
    tr: Any, name: str, qk: keys.QueueKeys, kv: Any, now_us: int, lease: float, step: Callable[[Any, Lease], Any] | None
) -> Lease:
    """Hide the chosen ready item under a new lease; run ``step`` (see ``_claim``)."""
    hidden = grant(tr, qk, kv, now_us, now_us + _micros(lease), os.urandom(keys.LEASE_TOKEN_BYTES))
    claimed = leased(name, qk, hidden, kv.value)
    if step is None:
        return claimed
    vouch(tr)  # the item is taken: an exception of the step's fails the claim, it is not run again
    return SteppedLease(claimed.item, claimed.receipt, claimed.lease_expires_at, step(tr, claimed))


def grant(tr: Any, qk: keys.QueueKeys, kv: Any, now_us: int, visible_us: int, token: bytes) -> visibility.Hidden:
    """A claim's writes: hide the ready item ``kv`` under lease ``token`` until ``visible_us``,
    its claim counted in its attempts, in the counters and in the tallies (at ``now_us``)."""
    priority, stamp, meta = visibility.take_ready(tr, qk, bytes(kv.key))
    keylimits.taken(tr, qk, meta)
    tr.add(qk.counter(keys.SIZE), counter_bytes(-1))
    hidden = visibility.Hidden(visible_us, priority, stamp, token, meta.claimed())
    visibility.hide(tr, qk, hidden, bytes(kv.value))
    tally.count(tr, qk, now_us, tally.CLAIMED)
    return hidden


def leased(name: str, qk: keys.QueueKeys, hidden: visibility.Hidden, payload: Any) -> Lease:
    """The Lease a claimer holds for ``hidden`` (a leased item of queue ``name``)."""
    receipt = tokens.Receipt(name, qk.queue_id, hidden.priority, hidden.stamp, hidden.token).hand_out()
    item = visibility.item_from(hidden.priority, hidden.stamp, hidden.meta, payload)
    return Lease(item, receipt, to_datetime(hidden.visible_us))


#: A claim in queue order; "none ready" needs a fresh read version.
claim_once = transactional(trusts=lambda lease: isinstance(lease, Lease))(_claim)
#: A spread claim starts from a fresh read version: at a reused one its read of the first items
#: would have to be an ordinary read (``fdbapi.choice_reads``), and would conflict with every
#: claim of any of them, which is what spreading is for avoiding.
claim_spread_once = transactional(_claim)
#: A hinted claim starts from a fresh read version too: at a reused one its read of the hinted
#: item would conflict with the claims made since, which the hint is for avoiding.
claim_hinted_once = transactional(_claim)


# --- the lease a receipt names ------------------------------------------------------------------


def parse(receipt: object, name: str | None) -> tokens.Receipt:
    if name is not None:
        checks.check_name(name)
    parsed = tokens.parse_receipt(receipt)
    if name is not None and parsed.name != name:
        raise InvalidReceipt(f"This receipt belongs to queue {parsed.name!r}, not {name!r}.", name=name)
    return parsed


class Held:
    """A lease the receipt proved to be current: the queue, the hidden item, the time of checking."""

    __slots__ = ("entry", "qk", "hidden", "now_us")

    def __init__(self, entry: Any, qk: keys.QueueKeys, hidden: visibility.Hidden, now_us: int) -> None:
        self.entry = entry
        self.qk = qk
        self.hidden = hidden
        self.now_us = now_us


def held_lease(tr: Any, r: tokens.Receipt, *, expired_ok: bool = False) -> Held:
    """The lease ``r`` names, still hidden under its token; LeaseExpired once its time is up.

    ``expired_ok``: a lease whose time is up but that nothing has moved on yet (no claim or pop
    promoted it) is still held; a give-back for a caller that went away takes it back whole.
    """
    # The lease's entry is found by the receipt's queue id, so it is read together with the
    # catalog check (one round trip, not two); it matters only when that id is the queue's.
    raw = tr[keys.queue_keys(root(tr), r.queue_id).hidden_index.pack((r.priority, r.stamp))]
    entry, qk = require(tr, r.name)
    if entry.queue_id != r.queue_id:
        raise LeaseNotFound(f"Queue {r.name!r} was deleted and created again since this claim.", name=r.name)
    now_us = now_micros()
    if not raw.present():
        raise LeaseNotFound(name=r.name)
    hidden = visibility.Hidden.from_index(r.priority, r.stamp, bytes(raw))
    if hidden.token != r.token:
        raise LeaseNotFound(name=r.name)
    if hidden.visible_us <= now_us and not expired_ok:
        raise LeaseExpired(name=r.name)
    return Held(entry, qk, hidden, now_us)


def _settle(db_or_tr: Any, r: tokens.Receipt, body: Callable[[Any, Held], str], answers: frozenset[str]) -> str:
    """Run ``body`` on the held lease, retrying like ``transactional``, safe against commits in doubt.

    A lease not found whose token has a settled marker among ``answers`` (the outcomes this
    operation gives) was settled by an earlier attempt, this call's or its caller's: that outcome.
    Given a caller's transaction, it joins it and consults no marker (the caller commits).
    """

    def attempt(tr: Any, owned: bool) -> str:
        try:
            held = held_lease(tr, r)
        except LeaseNotFound:
            outcome = _settled_as(tr, r) if owned else None
            if outcome not in answers:
                raise
            return outcome
        return body(tr, held)

    return settled.run(db_or_tr, attempt)


def _settled_as(tr: Any, r: tokens.Receipt) -> str | None:
    """The outcome a settled marker records for this receipt's lease, if any."""
    _entry, qk = require(tr, r.name)  # the queue is the receipt's: held_lease checked its id
    found = settled.recorded(tr, qk, (r.token,))
    return None if found is None else found[0].decode("ascii")


# --- ack, release, extend --------------------------------------------------------------------------


def ack(db_or_tr: Any, receipt: str, name: str | None = None) -> None:
    r = parse(receipt, name)

    def body(tr: Any, held: Held) -> str:
        hidden, qk = held.hidden, held.qk
        visibility.unhide(tr, qk, hidden)
        keylimits.give_back(tr, qk, held.entry, hidden.meta)
        tr.add(qk.counter(keys.POPPED), counter_bytes(1))
        tally.count(tr, qk, held.now_us, tally.ACKED)
        dedup.consumed(tr, qk, hidden.priority, hidden.stamp, hidden.meta)
        settled.mark(tr, qk, (r.token,), ACKED.encode("ascii"), now_us=held.now_us)
        return ACKED

    _settle(db_or_tr, r, body, frozenset({ACKED}))


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
        tally.count(tr, qk, held.now_us, tally.FAILED)
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
        settled.mark(tr, qk, (r.token,), outcome.encode("ascii"), now_us=held.now_us)
        return outcome

    return _settle(db_or_tr, r, body, RELEASED)


@transactional
def _extend(tr: Any, r: tokens.Receipt, seconds: float) -> Lease:
    held = held_lease(tr, r)
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
