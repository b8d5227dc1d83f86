"""Where an item is visible from: ready, hidden until a time (delayed or leased), or dead.

An item moves between these places, always with its own ``(priority, vs)`` and its
:class:`~keys.ItemMeta`, so when it becomes ready again it lands at exactly its old place in
queue order. Hidden items are kept ordered by the time they become visible (the idea of Apple's
QuiCK, whose items carry a "vesting time"): whatever is due is the first keys of one range.

Nothing sweeps that range in the background. Every pop, claim and peek first moves what is due
(at most :data:`PROMOTE_BATCH` entries) into the ready items, judged by the calling client's
clock. It reads the due range with a snapshot read and adds a read conflict on each key it
moves, so two clients moving the same item conflict (one retries and finds it moved) while a
client that finds nothing due adds no conflict at all. A lease that runs out after the item's
``max_attempts``-th claim sends the item to the dead letters instead.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator, cast

from django_fdbqueue import codecs
from django_fdbqueue.fdbapi import choice_reads, tuples

from . import keylimits, keys, tally, tenantkeys, tokens
from .catalog import Entry, counter_bytes
from ..records import DeadLetter, Item, ScheduledItem, to_datetime

#: Furthest into the future an item may be hidden: a push's delay, a release's delay.
MAX_DELAY_SECONDS = 366 * 86_400.0
#: Due items moved per operation: a backlog larger than this enters the ready order over
#: the next operations, earliest-due first.
PROMOTE_BATCH = 100
_ONE = counter_bytes(1)
LEASED = "leased"
DELAYED = "delayed"


def item_from(priority: int, stamp: Any, meta: keys.ItemMeta, payload: Any) -> Item:
    value = codecs.get(meta.codec).decode(bytes(payload))
    return Item(tokens.item_id(priority, stamp), priority, value, to_datetime(meta.enqueued_us), meta.attempts)


class Hidden:
    """One hidden item as its ``"d"`` key says: when it shows, whose lease it is, what it carries."""

    __slots__ = ("visible_us", "priority", "stamp", "token", "meta")

    def __init__(self, visible_us: int, priority: int, stamp: Any, token: bytes, meta: keys.ItemMeta) -> None:
        self.visible_us = visible_us
        self.priority = priority
        self.stamp = stamp
        self.token = token
        self.meta = meta

    @classmethod
    def from_key(cls, qk: keys.QueueKeys, key: bytes) -> "Hidden":
        visible_us, priority, stamp, token, *rest = qk.hidden.unpack(key)
        return cls(visible_us, priority, stamp, token, keys.ItemMeta.from_elements(rest))

    @classmethod
    def from_index(cls, priority: int, stamp: Any, raw: bytes) -> "Hidden":
        visible_us, token, *rest = tuples.unpack(raw)
        return cls(visible_us, priority, stamp, token, keys.ItemMeta.from_elements(rest))

    @property
    def leased(self) -> bool:
        return bool(self.token)

    def key(self, qk: keys.QueueKeys) -> bytes:
        return qk.hidden.pack((self.visible_us, self.priority, self.stamp, self.token, *self.meta.elements()))

    def index_key(self, qk: keys.QueueKeys) -> bytes:
        return qk.hidden_index.pack((self.priority, self.stamp))

    def index_value(self) -> bytes:
        return tuples.pack((self.visible_us, self.token, *self.meta.elements()))

    def counter(self) -> str:
        return keys.LEASED if self.leased else keys.DELAYED


# --- moving items between places ----------------------------------------------------------------


def put_ready(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta, payload: bytes) -> None:
    """The item's ready key and push-order entry (no counters: callers count)."""
    tr[qk.items.pack((priority, stamp, *meta.elements()))] = payload
    tr[qk.order.pack((stamp,))] = tuples.pack((priority, meta.enqueued_us))
    if meta.tenant is not None:
        tenantkeys.ready(tr, qk, priority, stamp, meta)  # back in its tenant's sub-queue


def take_ready(
    tr: Any, qk: keys.QueueKeys, item_key: bytes, parts: tuple[Any, ...] | None = None
) -> tuple[int, Any, keys.ItemMeta]:
    """Clear a ready item's two keys; what it was (no counters: callers count).

    ``parts`` is the key unpacked (``qk.items.unpack(item_key)``) when the caller already has it.
    """
    priority, stamp, *rest = qk.items.unpack(item_key) if parts is None else parts
    del tr[item_key]
    del tr[qk.order.pack((stamp,))]
    return priority, stamp, keys.ItemMeta.from_elements(rest)


def wake(tr: Any, qk: keys.QueueKeys) -> None:
    """Tell waiting pops something became visible: an atomic add, so it never conflicts."""
    tr.add(qk.wake_key, _ONE)


def hide(tr: Any, qk: keys.QueueKeys, hidden: Hidden, payload: bytes) -> None:
    tr[hidden.key(qk)] = payload
    tr[hidden.index_key(qk)] = hidden.index_value()
    tr.add(qk.counter(hidden.counter()), _ONE)


def unhide(tr: Any, qk: keys.QueueKeys, hidden: Hidden) -> None:
    del tr[hidden.key(qk)]
    del tr[hidden.index_key(qk)]
    tr.add(qk.counter(hidden.counter()), counter_bytes(-1))


def ready_again(tr: Any, qk: keys.QueueKeys, hidden: Hidden, payload: bytes) -> None:
    """A hidden item (already unhidden) back in the ready items, at its old place."""
    put_ready(tr, qk, hidden.priority, hidden.stamp, hidden.meta, payload)
    tr.add(qk.counter(keys.SIZE), _ONE)


def bury(
    tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta, payload: bytes, now_us: int
) -> None:
    """Put an item (already taken from where it was) among the dead letters, and count it."""
    tr[qk.dead.pack((priority, stamp, now_us, *meta.elements()))] = payload
    tr.add(qk.counter(keys.DEAD_COUNT), _ONE)
    tally.count(tr, qk, now_us, tally.DEAD)


def exhausted(entry: Entry, meta: keys.ItemMeta) -> bool:
    """Has the item had all the claims its queue allows?"""
    return entry.max_attempts is not None and meta.attempts >= entry.max_attempts


# --- what is due ----------------------------------------------------------------------------------


def due(tr: Any, qk: keys.QueueKeys, now_us: int, limit: int = PROMOTE_BATCH) -> Iterable[Any]:
    """Hidden entries whose time has come, earliest first (a snapshot read: no conflict, except
    at a reused read version, where an item that came due since must conflict: ``choice_reads``).

    The read is sent now and waited for when iterated (once), so a caller can send its other
    reads before waiting: on a cluster each read waited for in turn is a round trip.
    """
    r = qk.hidden.range()
    return cast("Iterable[Any]", choice_reads(tr).get_range(r.start, qk.hidden.pack((now_us + 1,)), limit=limit))


def promote(tr: Any, qk: keys.QueueKeys, entry: Entry, now_us: int, rows: Iterable[Any] | None = None) -> int:
    """Move what is due into the ready items (or, spent leases, to the dead letters).

    ``rows`` is :func:`due`'s read when the caller already sent it. Returns how many moved.
    """
    moved = 0
    for kv in due(tr, qk, now_us) if rows is None else rows:
        key = bytes(kv.key)
        hidden = Hidden.from_key(qk, key)
        tr.add_read_conflict_key(key)  # two clients moving the same item: one retries
        unhide(tr, qk, hidden)
        if hidden.leased:
            keylimits.give_back(tr, qk, entry, hidden.meta)  # a lease ran out: its key's slot too
            tally.count(tr, qk, now_us, tally.FAILED)
        if hidden.leased and exhausted(entry, hidden.meta):
            bury(tr, qk, hidden.priority, hidden.stamp, hidden.meta, bytes(kv.value), now_us)
        else:
            ready_again(tr, qk, hidden, bytes(kv.value))
        moved += 1
    return moved


def due_as_ready(qk: keys.QueueKeys, entry: Entry, rows: Iterable[Any]) -> Iterator[tuple[int, Any, Any]]:
    """For a peek that must not write: the due rows that a pop would move into the ready items."""
    for kv in rows:
        hidden = Hidden.from_key(qk, bytes(kv.key))
        if not (hidden.leased and exhausted(entry, hidden.meta)):
            yield hidden.priority, hidden.stamp, (hidden.meta, kv.value)


# --- listing ---------------------------------------------------------------------------------------


def scheduled_page(
    tr: Any, qk: keys.QueueKeys, after: tuple[Any, ...] | None, limit: int
) -> tuple[list[ScheduledItem], tuple[Any, ...] | None]:
    """Hidden items by the time they become visible; the position of the last when more follow."""
    r = qk.hidden.range()
    begin = r.start if after is None else qk.hidden.pack(after) + b"\xff"
    rows = list(tr.get_range(begin, r.stop, limit=limit + 1))
    out = []
    for kv in rows[:limit]:
        hidden = Hidden.from_key(qk, bytes(kv.key))
        item = item_from(hidden.priority, hidden.stamp, hidden.meta, kv.value)
        out.append(ScheduledItem(item, LEASED if hidden.leased else DELAYED, to_datetime(hidden.visible_us)))
    last = None
    if len(rows) > limit:
        h = Hidden.from_key(qk, bytes(rows[limit - 1].key))
        last = (h.visible_us, h.priority, h.stamp, h.token)
    return out, last


def decode_dead_letter(qk: keys.QueueKeys, kv: Any) -> DeadLetter:
    """A dead-letter row as the caller sees it: the item, and when it died."""
    priority, stamp, died_us, *rest = qk.dead.unpack(bytes(kv.key))
    meta = keys.ItemMeta.from_elements(rest)
    return DeadLetter(item_from(priority, stamp, meta, kv.value), to_datetime(died_us))
