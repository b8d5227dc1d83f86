"""A claim on a queue with per-key limits: skip the items whose key is at its limit.

With its first reads the claim scans the first :data:`~keylimits.CANDIDATES` items and the keys
marked "at their limit", walks the candidates in queue order and takes the first whose key is
under its limits, reading the candidates' counters in a second round trip only when it must.
When every candidate is blocked it returns :class:`~waiting.Blocked`, and a waiting claim waits
as ``waiting.next_turn`` says. ``keylimits`` holds the limits themselves.

Which reads conflict, and why a busy key never holds back the queue: the key limits guide, "How
it works, and what it costs" (docs/howto/key-limits.md).
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import choice_reads

from . import items, keylimits, keys, reading, visibility
from .catalog import Entry, read_counter
from .keylimits import Limits
from .waiting import Blocked


def first_reads(tr: Any, entry: Entry, qk: keys.QueueKeys, end: str) -> tuple[Limits | None, Any]:
    """What a claim sends first: as before without limits; with limits, candidates and markers."""
    limits = keylimits.of(entry)
    if limits is None:
        return None, reading.first_reads(tr, qk, end, 1)
    markers: Any = ()
    if limits.concurrency is not None:
        r = qk.key_full.range()
        markers = choice_reads(tr).get_range(r.start, r.stop, limit=keylimits.MARKERS_READ)
    if end != "min":
        return limits, (reading.first_reads(tr, qk, end, keylimits.CANDIDATES), markers)
    # From the min end the candidates are a snapshot read: the claim then conflicts only on the
    # item it takes, not with every claim that takes another candidate.
    now_us = items.now_micros()  # type: ignore[attr-defined]  # items' clock, which tests move
    r = qk.items.range()
    head = choice_reads(tr).get_range(r.start, r.stop, limit=keylimits.CANDIDATES)
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
    kvs, _cut = reading.promote_and_walk(tr, entry, qk, end, keylimits.CANDIDATES, sent=(now_us, due, head))
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
    soonest: float | None = None  # seconds until a blocked key's next rate token
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
                wait = keylimits.next_token_seconds(left, limits)
                soonest = wait if soonest is None else min(soonest, wait)
                continue
        tr.add_read_conflict_key(bytes(kv.key))
        _hold(tr, qk, key, limits, held, left, now_us)
        return kv
    wake = tr.snapshot[qk.wake_key]  # what a waiter compares with: any change is a new chance
    retry_us = None if soonest is None else now_us + max(1, round(soonest * 1_000_000))
    return Blocked(qk, bytes(wake) if wake.present() else None, retry_us, now_us)


def _hold(tr: Any, qk: keys.QueueKeys, key: str, limits: Limits, held: int, left: float, now_us: int) -> None:
    """The chosen key: conflict on what was read of it, mark it full, spend its token."""
    if limits.concurrency is not None:
        tr.add_read_conflict_key(qk.key_counts.pack((key,)))
        if held + 1 >= limits.concurrency:
            tr[qk.key_full.pack((key,))] = b""
    if limits.rate is not None:
        tr.add_read_conflict_key(qk.key_buckets.pack((key,)))
        keylimits.spend(tr, qk, key, left - 1.0, now_us)
