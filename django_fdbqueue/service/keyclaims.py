"""A claim on a queue with per-key limits: skip the items whose key is at its limit.

``keylimits`` explains the limits, their keys and why they hold. Here is how a claim uses them:

1. With its first reads (the catalog check, what is due, the head of the queue) it sends a scan
   of the first :data:`~keylimits.CANDIDATES` items instead of one, and a snapshot range read of
   the keys marked "full" (at most :data:`~keylimits.MARKERS_READ`). One round trip, as before.
   From the min end the scan is a snapshot read and the claim adds a read conflict on the item
   it takes only, so claims that take different candidates do not conflict (an item pushed ahead
   of the candidates meanwhile, at a lower priority, may be passed over by this claim). From the
   max end the walk is the ordinary one, conflicts included. At a reused read version (see
   ``fdbapi.choice_reads``) every read here is an ordinary one: what finished before the claim
   began but after that version must make it conflict, or it would be passed over.
2. It walks the candidates in queue order, skipping keys marked full. The first item without a
   key is taken at once. Otherwise the counters (and buckets) of the remaining candidates' keys
   are read together (snapshot reads, as above: a second round trip), and the first candidate whose key is
   under its limits is taken, with a read conflict on that key's counter and bucket only.
3. When every candidate is blocked, the claim returns :class:`Blocked`: the queue holds items,
   but none may be claimed at this moment. ``claim`` reports None; with ``wait=`` it waits for
   the queue's wake-up key (an ack or release of a limited key, a lease coming back, a push
   bumps it) or for the next token, at most :data:`MAX_PAUSE` seconds at a time, and tries again.

A busy key never holds back the queue: items of other keys behind it within the candidates are
taken. Items beyond the candidates wait until the ones ahead of them leave; a queue whose first
32 items all belong to keys at their limit has nothing to claim until one of them frees a slot.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from django_fdbqueue.fdbapi import FDBError, choice_reads

from . import items, keylimits, keys, visibility, waiting
from .catalog import Entry, read_counter
from .keylimits import CANDIDATES, MARKERS_READ, Limits

#: Longest a waiting claim sleeps between two looks at a queue whose candidates are all blocked.
MAX_PAUSE = 1.0


@dataclass(frozen=True)
class Blocked:
    """The queue has items, but every candidate's key is at its limit for now."""

    qk: keys.QueueKeys
    retry_seconds: float


def first_reads(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str) -> tuple[Limits | None, Any]:
    """What a claim sends first: as before without limits; with limits, candidates and markers."""
    limits = keylimits.of(entry)
    if limits is None:
        return None, items.first_reads(tr, qk, end, 1)
    markers: Any = ()
    if limits.concurrency is not None:
        r = qk.key_full.range()
        markers = choice_reads(tr).get_range(r.start, r.stop, limit=MARKERS_READ)
    if end != "min":
        return limits, (items.first_reads(tr, qk, end, CANDIDATES), markers)
    # From the min end the candidates are a snapshot read: the claim then conflicts only on the
    # item it takes, not with every claim that takes another candidate.
    now_us = items.now_micros()  # type: ignore[attr-defined]  # items' clock, which tests move
    r = qk.items.range()
    head = choice_reads(tr).get_range(r.start, r.stop, limit=CANDIDATES)
    return limits, ((now_us, visibility.due(tr, qk, now_us), head), markers)


def _key_of(qk: keys.QueueKeys, kv: Any) -> str | None:
    _priority, _stamp, *rest = qk.items.unpack(bytes(kv.key))
    return keys.ItemMeta.from_elements(rest).key


def choose(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, limits: Limits, sent: Any) -> Any:
    """The ready item (a key-value) a limited claim takes, None when none is ready, or Blocked.

    Writes the chosen key's marker and bucket; the caller takes the item and counts the lease.
    """
    (now_us, due, head), markers = sent
    due = list(due)
    kvs, _cut = items.promote_and_walk(tr, entry, qk, end, CANDIDATES, sent=(now_us, due, head))
    if not kvs:
        return None
    # Leases that ran out just gave their slots back, after the markers were read.
    freed = {h.meta.key for h in (visibility.Hidden.from_key(qk, bytes(kv.key)) for kv in due) if h.leased}
    full = {qk.key_full.unpack(bytes(kv.key))[0] for kv in markers} - freed
    candidates: list[tuple[Any, str | None]] = []
    for kv in kvs:
        key = _key_of(qk, kv)
        if key is None:
            candidates.append((kv, None))
            break
        if key not in full:
            candidates.append((kv, key))
    wanted = {key for _kv, key in candidates if key is not None}
    reads = choice_reads(tr)
    counts = {k: reads[qk.key_counts.pack((k,))] for k in wanted} if limits.concurrency is not None else {}
    buckets = {k: reads[qk.key_buckets.pack((k,))] for k in wanted} if limits.rate is not None else {}
    soonest = MAX_PAUSE
    for kv, key in candidates:
        if key is None:
            tr.add_read_conflict_key(bytes(kv.key))  # two claims of this item: one retries
            return kv
        held = read_counter(counts[key]) if limits.concurrency is not None else 0
        if limits.concurrency is not None and held >= limits.concurrency:
            continue
        left = 0.0
        if limits.rate is not None:
            left, _counted = keylimits.tokens(buckets[key], limits, now_us)
            if left < 1.0:
                soonest = min(soonest, keylimits.next_token_seconds(left, limits))
                continue
        tr.add_read_conflict_key(bytes(kv.key))
        _hold(tr, qk, key, limits, held, left, now_us)
        return kv
    return Blocked(qk, soonest)


def _hold(tr: Any, qk: keys.QueueKeys, key: str, limits: Limits, held: int, left: float, now_us: int) -> None:
    """The chosen key: conflict on what was read of it, mark it full, spend its token."""
    if limits.concurrency is not None:
        tr.add_read_conflict_key(qk.key_counts.pack((key,)))
        if held + 1 >= limits.concurrency:
            tr[qk.key_full.pack((key,))] = b""
    if limits.rate is not None:
        tr.add_read_conflict_key(qk.key_buckets.pack((key,)))
        keylimits.spend(tr, qk, key, left - 1.0, now_us)


def pause(db: Any, blocked: Blocked, deadline: float) -> None:
    """Wait (bounded by ``deadline``, on ``time.monotonic()``) for a slot or a token to come."""
    seconds = min(blocked.retry_seconds, deadline - time.monotonic())
    if seconds <= 0:
        return
    tr = db.create_transaction()
    try:
        watch = tr.watch(blocked.qk.wake_key)
        tr.commit().wait()
    except FDBError:
        threading.Event().wait(min(seconds, waiting.WATCH_FAILURE_PAUSE))
        return
    waiting.wait_on(watch, seconds)
