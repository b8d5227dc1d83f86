"""Dead letters: items set aside after ``max_attempts`` claims without an ack.

They keep their ``(priority, vs)``, so the dead-letter area lists them in queue order and a
requeued item returns to its old place; its attempts start again from zero. Items get here
through ``visibility.bury``, which moves items between all their places. The public operations
(list, get, requeue, delete) are at the end.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import DeadLetterNotFound
from django_fdbqueue.fdbapi import transactional

from . import keys, visibility
from .catalog import counter_bytes, first, require
from .observe import observed
from .records import LIMIT_MAX, DeadLetter, Item, Page, to_datetime

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


# --- public operations ---------------------------------------------------------------------------


@observed
def dead_letters(db_or_tr: Any, name: str, *, cursor: str | None = None, limit: int = 50) -> Page[DeadLetter]:
    """The queue's dead letters, in queue order."""
    keys.check_name(name)
    limit = keys.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = None if cursor is None else keys.parse_position_cursor(cursor, keys.DEAD_CURSOR, 2)
    return page(db_or_tr, name, after, limit)


@observed(none_is_empty=True)
def get_dead_letter(db_or_tr: Any, name: str, item_id: str) -> DeadLetter | None:
    """The dead letter with this id, or None if the queue has none such."""
    keys.check_name(name)
    return get(db_or_tr, name, *keys.parse_item_id(item_id))


@observed
def requeue_dead_letter(db_or_tr: Any, name: str, item_id: str) -> Item:
    """Put a dead letter back among the ready items, at its old place, attempts reset to 0."""
    keys.check_name(name)
    return requeue(db_or_tr, name, *keys.parse_item_id(item_id))


@observed
def delete_dead_letter(db_or_tr: Any, name: str, item_id: str) -> None:
    keys.check_name(name)
    delete(db_or_tr, name, *keys.parse_item_id(item_id))
