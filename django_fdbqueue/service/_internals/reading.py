"""Items read from either end of a queue: walks in pop order, takes, peeks, pages and counts."""

from __future__ import annotations

from typing import Any, cast

from django_fdbqueue.fdbapi import transactional

from . import dedup, kept, keylimits, keys, tally, tenantkeys, tenantturns, tokens, visibility
from .catalog import Entry, counter_bytes, first, read_counter, require, require_with
from .items import decode_item
from ..records import Item, Page, now_micros


def walk_min(
    tr: Any,
    qk: keys.QueueKeys,
    limit: int,
    *,
    after: tuple[Any, ...] | None = None,
    max_bytes: int | None = None,
    head: Any = None,
) -> tuple[list[Any], bool]:
    """Up to `limit` items from the min end: priority ascending, push order ascending.

    Returns (key-values, cut) where `cut` says the byte budget, not the queue, ended the walk.
    ``head`` is the walk's first read (:func:`head_read`) when the caller already sent it.
    """
    r = qk.items.range()
    begin = r.start if after is None else qk.item_prefix(*after) + b"\xff"
    out: list[Any] = []
    size = 0
    rows = head if head is not None and after is None else tr.get_range(begin, r.stop, limit=limit)
    for kv in rows:
        out.append(kv)
        size += len(kv.value)
        if max_bytes is not None and size >= max_bytes and len(out) < limit:
            return out, True
    return out, False


def walk_max(
    tr: Any,
    qk: keys.QueueKeys,
    limit: int,
    *,
    after: tuple[Any, ...] | None = None,
    max_bytes: int | None = None,
    head: Any = None,
) -> tuple[list[Any], bool]:
    """Up to `limit` items from the max end: priority descending, push order *ascending*.

    The recipe's reverse scan would return the newest item of the top priority; we want the
    oldest. So for each priority, top down: a snapshot reverse read (limit 1) finds it, a
    read-conflict range says "nothing above it changed", and an ordinary forward read takes its
    oldest items. Concurrent pushes at that priority land after what we read and do not
    conflict; a push above it does, and we retry, as serializability requires.
    """
    r = qk.items.range()
    out: list[Any] = []
    size = 0
    upper = r.stop
    if after is not None:
        priority, stamp = after
        pr = qk.priority_range(priority)
        for kv in tr.get_range(qk.item_prefix(priority, stamp) + b"\xff", pr.stop, limit=limit):
            out.append(kv)
            size += len(kv.value)
            if max_bytes is not None and size >= max_bytes and len(out) < limit:
                return out, True
        upper = pr.start
    if after is not None:
        head = None
    while len(out) < limit:
        top = first(head if head is not None else tr.snapshot.get_range(r.start, upper, limit=1, reverse=True))
        head = None
        if top is None:
            tr.add_read_conflict_range(r.start, upper)  # "empty below here" must stay true
            break
        priority = qk.items.unpack(bytes(top.key))[0]
        pr = qk.priority_range(priority)
        tr.add_read_conflict_range(pr.stop, upper)
        for kv in tr.get_range(pr.start, pr.stop, limit=limit - len(out)):
            out.append(kv)
            size += len(kv.value)
            if max_bytes is not None and size >= max_bytes and len(out) < limit:
                return out, True
        upper = pr.start
    return out, False


def walk(tr: Any, qk: keys.QueueKeys, end: str, limit: int, **kwargs: Any) -> tuple[list[Any], bool]:
    return (walk_min if end == "min" else walk_max)(tr, qk, limit, **kwargs)


def head_read(tr: Any, qk: keys.QueueKeys, end: str, limit: int) -> Any:
    """Send the first read a walk from `end` makes (not waited for): see :func:`promote_and_walk`."""
    r = qk.items.range()
    if end == "min":
        return tr.get_range(r.start, r.stop, limit=limit)
    return tr.snapshot.get_range(r.start, r.stop, limit=1, reverse=True)


FirstReads = tuple[int, Any, Any]


def first_reads(tr: Any, qk: keys.QueueKeys, end: str, n: int) -> FirstReads:
    """Send (without waiting) the reads every pop, claim and peek starts with: the time, what is
    due among the hidden items, and the first read of the walk from `end`.

    On a cluster a read waited for is a round trip. These do not depend on each other unless
    something was due, which is rare, so they are sent together (and, through
    ``catalog.require_with``, together with the catalog check).
    """
    now_us = now_micros()
    return now_us, visibility.due(tr, qk, now_us), head_read(tr, qk, end, n)


def promote_and_walk(
    tr: Any,
    entry: Entry,
    qk: keys.QueueKeys,
    end: str,
    n: int,
    max_bytes: int | None = None,
    sent: FirstReads | None = None,
) -> tuple[list[Any], bool]:
    """Move what is due into the ready items, then walk `end`, from :func:`first_reads` (``sent``,
    or sent now); only when items were moved in is the walk's first read made again."""
    now_us, due, head = sent if sent is not None else first_reads(tr, qk, end, n)
    if visibility.promote(tr, qk, entry, now_us, rows=due):
        head = None
    return walk(tr, qk, end, n, max_bytes=max_bytes, head=head)


def take(
    tr: Any,
    entry: Entry,
    qk: keys.QueueKeys,
    end: str,
    n: int,
    max_bytes: int | None = None,
    sent: FirstReads | None = None,
) -> tuple[list[Item], bool]:
    """Remove up to n items from `end` (both keys of each) and update the counters atomically.

    What is due among the hidden items is moved in first, so it is taken in its turn.
    """
    walker = tenantturns.promote_and_walk if entry.tenants else promote_and_walk
    kvs, cut = walker(tr, entry, qk, end, n, max_bytes, sent)
    keeping = kept.active()  # an async pop whose caller may go away (``giveback``)
    items: list[Item] = []
    gone: list[tuple[int, Any, keys.ItemMeta]] = []
    for kv in kvs:
        key = bytes(kv.key)
        parts = qk.items.unpack(key)  # once per item: its place and meta, for the item and the clear
        taken = visibility.take_ready(tr, qk, key, parts)
        items.append(visibility.item_from(*taken, kv.value))
        gone.append(taken)
        if keeping:
            kept.note(qk, parts, kv.value)
    dedup.consumed_all(tr, qk, gone)
    if items:
        tr.add(qk.counter(keys.SIZE), counter_bytes(-len(items)))
        tr.add(qk.counter(keys.POPPED), counter_bytes(len(items)))
        tally.count(tr, qk, now_micros(), tally.POPPED, len(items))
    return items, cut


@transactional(trusts=lambda popped: bool(popped[0]))  # "empty" needs a fresh read version
def pop_n(tr: Any, name: str, end: str, n: int, max_bytes: int | None) -> tuple[list[Item], bool]:
    entry, qk, sent = require_with(tr, name, lambda qk: first_reads(tr, qk, end, n), fifo_ok=end == "min")
    return take(tr, entry, qk, end, n, max_bytes, sent)


@transactional
def peek_one(tr: Any, name: str, end: str) -> Item | None:
    """What a pop would take, without writing: the first ready item or a due hidden one."""
    entry, qk, (_now_us, due, head) = require_with(
        tr, name, lambda qk: first_reads(tr, qk, end, 1), fifo_ok=end == "min"
    )  # the catalog check, the due read and the walk's first read: one round trip for all
    kvs, _cut = walk(tr, qk, end, 1, head=head)
    if entry.tenants:  # the front tenant's item (due items are not looked at)
        ahead = tenantturns.peek(tr, qk, end)
        kvs, due = ([ahead] if ahead is not None else []), []
    best = None
    if kvs:
        priority, stamp, *rest = qk.items.unpack(bytes(kvs[0].key))
        best = (priority, stamp, (keys.ItemMeta.from_elements(rest), kvs[0].value))
    for candidate in visibility.due_as_ready(qk, entry, due):
        if best is None or _before(candidate, best, end):
            best = candidate
    if best is None:
        return None
    priority, stamp, (meta, payload) = best
    return visibility.item_from(priority, stamp, meta, payload)


def _before(a: tuple[Any, ...], b: tuple[Any, ...], end: str) -> bool:
    """Would a pop from `end` take (priority, stamp) `a` before `b`?"""
    if a[0] != b[0]:
        return cast(bool, a[0] < b[0] if end == "min" else a[0] > b[0])
    return cast(bool, a[1] < b[1])


@transactional
def browse_page(tr: Any, name: str, end: str, after: tuple[Any, ...] | None, limit: int) -> Page[Item]:
    """limit + 1 items, so the page knows whether another follows."""
    _entry, qk = require(tr, name, fifo_ok=end == "min")
    kvs, _cut = walk(tr, qk, end, limit + 1, after=after)
    items = [decode_item(qk, kv) for kv in kvs[:limit]]
    next_cursor = None
    if len(kvs) > limit:
        last_priority, last_stamp = qk.items.unpack(bytes(kvs[limit - 1].key))[:2]
        next_cursor = tokens.browse_cursor(end, last_priority, last_stamp)
    return Page(items, next_cursor)


@transactional
def get_item(tr: Any, name: str, priority: int, stamp: Any) -> Item | None:
    """The item if it is ready, delayed or leased (two reads, issued together)."""
    _entry, qk = require(tr, name)
    prefix = qk.item_prefix(priority, stamp)
    ready = tr.get_range(prefix, prefix + b"\xff", limit=1)
    hidden = tr[qk.hidden_index.pack((priority, stamp))]
    kv = first(ready)
    if kv is not None:
        return decode_item(qk, kv)
    if hidden.present():
        h = visibility.Hidden.from_index(priority, stamp, bytes(hidden))
        payload = tr[h.key(qk)]
        return visibility.item_from(priority, stamp, h.meta, payload) if payload.present() else None
    return None


# --- counters and clearing -------------------------------------------------------------------------


@transactional
def size(tr: Any, name: str) -> int:
    _entry, qk = require(tr, name)
    return read_counter(tr[qk.counter(keys.SIZE)])


@transactional
def empty(tr: Any, name: str) -> bool:
    """Looks at the first item rather than the size counter: conflicts only with its neighbours.

    A hidden item whose time has come counts, since the next pop would take it.
    """
    entry, qk = require(tr, name)
    r = qk.items.range()
    if first(tr.get_range(r.start, r.stop, limit=1)) is not None:
        return False
    return not any(visibility.due_as_ready(qk, entry, visibility.due(tr, qk, now_micros())))


@transactional
def clear(tr: Any, name: str) -> None:
    """Remove ready, delayed and leased items, and forget dedup keys; dead letters stay.

    Blind writes only: a push committed after us lands after the clear and is counted. Leases
    cleared this way can no longer be acked (``LeaseNotFound``).
    """
    _entry, qk = require(tr, name)
    for space in (qk.items, qk.order, qk.hidden, qk.hidden_index):
        r = space.range()
        tr.clear_range(r.start, r.stop)
    dedup.forget_all(tr, qk)
    tenantkeys.clear(tr, qk)
    keylimits.reset(tr, qk, counts=True)  # the leases are gone, and their keys' slots with them
    for which in (keys.SIZE, keys.LEASED, keys.DELAYED):
        tr[qk.counter(which)] = counter_bytes(0)
