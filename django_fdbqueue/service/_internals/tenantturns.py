"""Pops, claims and peeks of a queue split by tenant: the tenants take turns.

A pop or claim (one transaction, as on any queue) moves what is due into the ready items, reads
the first :data:`CHOICES` tenants of the ring (a snapshot read) and tries one of them at random
first, with a read conflict on that tenant's ring key only; it takes that tenant's first item
from ``end`` and moves the tenant to the back of the ring, or out of it when it has no more.
``tenantkeys`` holds the keys.

Which consumers conflict, and how far the random pick bounds unfairness: the tenants guide, "How
it works, and what it costs" (docs/howto/tenants.md).
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import fdb

from . import keys, runtime, tenantkeys, visibility
from .catalog import COUNTER, Entry, first
from ..records import Page
from .tenantkeys import TenantKeys

#: How many tenants at the front of the ring a consumer chooses from (at random).
CHOICES = 4


def _first_of(tr: Any, qk: keys.QueueKeys, tk: TenantKeys, tenant: str, end: str) -> tuple[Any, Any, bool] | None:
    """The tenant's next item from ``end``: (index key, item key-value, more after it), or None."""
    r = tk.index.range((tenant,))
    while True:
        if end == "min":
            rows = list(tr.get_range(r.start, r.stop, limit=2))
        else:
            top = first(tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True))
            if top is None:
                tr.add_read_conflict_range(r.start, r.stop)
                return None
            priority = tk.index.unpack(bytes(top.key))[1]
            pr = tk.index.range((tenant, priority))
            tr.add_read_conflict_range(pr.stop, r.stop)
            rows = list(tr.get_range(pr.start, pr.stop, limit=1))
            if rows:
                rows += [kv for kv in tr.get_range(r.start, r.stop, limit=2) if kv.key != rows[0].key][:1]
        if not rows:
            return None
        index_key = bytes(rows[0].key)
        _tenant, priority, stamp = tk.index.unpack(index_key)
        item_key = qk.items.pack((priority, stamp, *fdb.tuple.unpack(bytes(rows[0].value))))
        payload = tr[item_key]
        if payload.present():
            return index_key, _KV(item_key, bytes(payload)), len(rows) > 1
        tenantkeys.taken(tr, tk, tenant, index_key)  # stale: its item left another way


class _KV:
    """A key-value pair shaped like a range read's rows."""

    __slots__ = ("key", "value")

    def __init__(self, key: bytes, value: bytes) -> None:
        self.key = key
        self.value = value


def next_item(tr: Any, qk: keys.QueueKeys, end: str, *, choices: int | None = None) -> Any:
    """Take the next item by turn (see the module's docstring); None when no tenant has any."""
    choices = CHOICES if choices is None else choices
    tk = tenantkeys.of(qk)
    r = tk.ring.range()
    while True:
        front = list(tr.snapshot.get_range(r.start, r.stop, limit=choices))
        if not front:
            tr.add_read_conflict_range(r.start, r.stop)  # "no tenant has items" must stay true
            return None
        start = runtime.SHUFFLE.randrange(len(front))
        for kv in front[start:] + front[:start]:
            ring_key = bytes(kv.key)
            turn, tenant = tk.ring.unpack(ring_key)
            tr.add_read_conflict_key(ring_key)
            got = _first_of(tr, qk, tk, tenant, end)
            if got is None:
                tenantkeys.leave(tr, tk, turn, tenant)
                continue
            index_key, item, more = got
            tenantkeys.taken(tr, tk, tenant, index_key)
            del tr[ring_key]
            if more:
                last = first(tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True))
                back = tk.ring.unpack(bytes(last.key))[0] + 1 if last is not None else turn + 1
                tr[tk.ring.pack((max(back, turn + 1), tenant))] = b""
            else:
                del tr[tk.members.pack((tenant,))]
                tr.add(tk.count, tenantkeys.MINUS_ONE)
            return item


def promote_and_walk(
    tr: Any, entry: Entry, qk: keys.QueueKeys, end: str, n: int, max_bytes: int | None = None, sent: Any = None
) -> tuple[list[Any], bool]:
    """What ``reading.promote_and_walk`` is for other queues: up to ``n`` items, tenants in turn."""
    if sent is not None:
        now_us, due = sent[0], sent[1]
        visibility.promote(tr, qk, entry, now_us, rows=due)
    out: list[Any] = []
    size = 0
    while len(out) < n:
        kv = next_item(tr, qk, end)
        if kv is None:
            break
        out.append(kv)
        size += len(kv.value)
        if max_bytes is not None and size >= max_bytes and len(out) < n:
            return out, True
    return out, False


def peek(tr: Any, qk: keys.QueueKeys, end: str) -> Any:
    """The first ready item of the tenant at the front (no writes; due items not counted)."""
    tk = tenantkeys.of(qk)
    r = tk.ring.range()
    for kv in tr.get_range(r.start, r.stop, limit=CHOICES):
        _turn, tenant = tk.ring.unpack(bytes(kv.key))
        span = tk.index.range((tenant,))
        if end != "min":  # the oldest item of the tenant's highest priority
            for top in tr.get_range(span.start, span.stop, limit=1, reverse=True):
                span = tk.index.range((tenant, tk.index.unpack(bytes(top.key))[1]))
        for row in tr.get_range(span.start, span.stop, limit=1):
            _t, priority, stamp = tk.index.unpack(bytes(row.key))
            item_key = qk.items.pack((priority, stamp, *fdb.tuple.unpack(bytes(row.value))))
            payload = tr[item_key]
            if payload.present():
                return _KV(item_key, bytes(payload))
    return None


def count(tr: Any, qk: keys.QueueKeys) -> Any:
    """The future of the number of tenants with ready items (read with the other counters)."""
    return tr[tenantkeys.of(qk).count]


def sizes(tr: Any, qk: keys.QueueKeys, top: int, scan: int = 10_000) -> Page[tuple[str, int]]:
    """The ``top`` tenants by ready items, largest first (snapshot reads of up to ``scan``
    tenants' counters: an overview for the admin, not a transactional count)."""
    tk = tenantkeys.of(qk)
    r = tk.sizes.range()
    rows = [
        (tk.sizes.unpack(bytes(kv.key))[0], COUNTER.unpack(bytes(kv.value))[0])
        for kv in tr.snapshot.get_range(r.start, r.stop, limit=scan)
    ]
    rows = sorted((row for row in rows if row[1] > 0), key=lambda row: (-row[1], row[0]))
    return Page(rows[:top], None)
