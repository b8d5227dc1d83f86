"""Dead letters: items set aside after ``max_attempts`` claims without an ack.

They keep their ``(priority, vs)``, so the dead-letter area lists them in queue order and a
requeued item returns to its old place; its attempts start again from zero. Items get here
through ``visibility.bury``, which moves items between all their places.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import DeadLetterNotFound
from django_fdbqueue.fdbapi import transactional

from . import keys, visibility
from .catalog import counter_bytes, first, require
from .records import DeadLetter, Item, Page, to_datetime

_ONE = counter_bytes(1)


def decode(qk: keys.QueueKeys, kv: Any) -> DeadLetter:
    """A dead-letter row as the caller sees it: the item, and when it died."""
    priority, stamp, died_us, *rest = qk.dead.unpack(bytes(kv.key))
    meta = keys.ItemMeta.from_elements(rest)
    return DeadLetter(visibility.item_from(priority, stamp, meta, kv.value), to_datetime(died_us))


def _find(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, name: str) -> Any:
    prefix = qk.dead.pack((priority, stamp))
    kv = first(tr.get_range(prefix, prefix + b"\xff", limit=1))
    if kv is None:
        raise DeadLetterNotFound(f"Queue {name!r} has no dead letter with this id.", name=name)
    return kv


@transactional
def page(tr: Any, name: str, after: tuple | None, limit: int) -> Page[DeadLetter]:
    _entry, qk = require(tr, name)
    r = qk.dead.range()
    begin = r.start if after is None else qk.dead.pack(after) + b"\xff"
    rows = list(tr.get_range(begin, r.stop, limit=limit + 1))
    letters = [decode(qk, kv) for kv in rows[:limit]]
    cursor = None
    if len(rows) > limit:
        priority, stamp = qk.dead.unpack(bytes(rows[limit - 1].key))[:2]
        cursor = keys.position_cursor(keys.DEAD_CURSOR, priority, stamp)
    return Page(letters, cursor)


@transactional
def get(tr: Any, name: str, priority: int, stamp: Any) -> DeadLetter | None:
    _entry, qk = require(tr, name)
    prefix = qk.dead.pack((priority, stamp))
    kv = first(tr.get_range(prefix, prefix + b"\xff", limit=1))
    return None if kv is None else decode(qk, kv)


@transactional
def requeue(tr: Any, name: str, priority: int, stamp: Any) -> Item:
    """Back among the ready items at its old place, attempts reset, waiting pops woken."""
    _entry, qk = require(tr, name)
    kv = _find(tr, qk, priority, stamp, name)
    letter = decode(qk, kv)
    _p, _s, _died, *rest = qk.dead.unpack(bytes(kv.key))
    meta = keys.ItemMeta.from_elements(rest).fresh()
    del tr[bytes(kv.key)]
    tr.add(qk.counter(keys.DEAD_COUNT), counter_bytes(-1))
    visibility.put_ready(tr, qk, priority, stamp, meta, bytes(kv.value))
    tr.add(qk.counter(keys.SIZE), _ONE)
    visibility.wake(tr, qk)
    item = letter.item
    return Item(item.id, item.priority, item.value, item.enqueued_at, 0)


@transactional
def delete(tr: Any, name: str, priority: int, stamp: Any) -> None:
    from . import dedup

    _entry, qk = require(tr, name)
    kv = _find(tr, qk, priority, stamp, name)
    _p, _s, _died, *rest = qk.dead.unpack(bytes(kv.key))
    del tr[bytes(kv.key)]
    tr.add(qk.counter(keys.DEAD_COUNT), counter_bytes(-1))
    dedup.consumed(tr, qk, priority, stamp, keys.ItemMeta.from_elements(rest))
