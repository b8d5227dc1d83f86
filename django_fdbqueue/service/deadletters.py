"""Dead letters: items set aside after ``max_attempts`` claims without an ack.

They keep their ``(priority, vs)``, so the dead-letter area lists them in queue order and a
requeued item returns to its old place; its attempts start again from zero. Items get here
through ``visibility.bury``, which moves items between all their places. The public operations
(list, get, requeue, delete) are at the end.

A requeue or delete removes the dead letter, so it leaves a settled marker of the item's id
(``settled``): retried after a commit in doubt, by its own loop or by its caller, it answers as
its first attempt did instead of ``DeadLetterNotFound``. A requeue's marker keeps the item it
returned (its payload in a value of its own), so the answer is the same item.
"""

from __future__ import annotations

from typing import Any, Callable, cast

from django_fdbqueue.exceptions import DeadLetterNotFound
from django_fdbqueue.fdbapi import DatabaseOrTransaction, fdb, transactional

from ._internals import checks, keys, settled, tokens, visibility
from ._internals.catalog import counter_bytes, first, require
from ._internals.visibility import decode_dead_letter
from .observe import observed
from .records import LIMIT_MAX, DeadLetter, Item, Page

_ONE = counter_bytes(1)


@transactional
def page(tr: Any, name: str, after: tuple[Any, ...] | None, limit: int) -> Page[DeadLetter]:
    _entry, qk = require(tr, name)
    r = qk.dead.range()
    begin = r.start if after is None else qk.dead.pack(after) + b"\xff"
    rows = list(tr.get_range(begin, r.stop, limit=limit + 1))
    letters = [decode_dead_letter(qk, kv) for kv in rows[:limit]]
    cursor = None
    if len(rows) > limit:
        priority, stamp = qk.dead.unpack(bytes(rows[limit - 1].key))[:2]
        cursor = tokens.position_cursor(tokens.DEAD_CURSOR, priority, stamp)
    return Page(letters, cursor)


@transactional
def get(tr: Any, name: str, priority: int, stamp: Any) -> DeadLetter | None:
    _entry, qk = require(tr, name)
    prefix = qk.dead.pack((priority, stamp))
    kv = first(tr.get_range(prefix, prefix + b"\xff", limit=1))
    return None if kv is None else decode_dead_letter(qk, kv)


REQUEUED = "requeued"
DELETED = "deleted"


def _token(priority: int, stamp: Any) -> tuple[Any, ...]:
    """The settled marker's name for calls on this dead letter (a lease's is its random token)."""
    return ("dead", priority, stamp)


def _settle(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    priority: int,
    stamp: Any,
    body: Callable[[Any, keys.QueueKeys, Any], Any],
    answer: Callable[[bytes, bytes | None], Any],
) -> Any:
    """``body(tr, qk, kv)`` on the dead letter; when it is gone, ``answer(outcome, payload)`` from
    its settled marker if a call that owns its transaction finds one, else DeadLetterNotFound."""

    def attempt(tr: Any, owned: bool) -> Any:
        _entry, qk = require(tr, name)
        prefix = qk.dead.pack((priority, stamp))
        kv = first(tr.get_range(prefix, prefix + b"\xff", limit=1))
        if kv is not None:
            return body(tr, qk, kv)
        found = settled.recorded(tr, qk, _token(priority, stamp), payload=True) if owned else None
        result = None if found is None else answer(*found)
        if result is None:
            raise DeadLetterNotFound(f"Queue {name!r} has no dead letter with this id.", name=name)
        return result

    return settled.run(db_or_tr, attempt)


def requeue(db_or_tr: DatabaseOrTransaction, name: str, priority: int, stamp: Any) -> Item:
    """Back among the ready items at its old place, attempts reset, waiting pops woken."""

    def body(tr: Any, qk: keys.QueueKeys, kv: Any) -> Item:
        _p, _s, _died, *rest = qk.dead.unpack(bytes(kv.key))
        meta = keys.ItemMeta.from_elements(rest).fresh()
        payload = bytes(kv.value)
        del tr[bytes(kv.key)]
        tr.add(qk.counter(keys.DEAD_COUNT), counter_bytes(-1))
        visibility.put_ready(tr, qk, priority, stamp, meta, payload)
        tr.add(qk.counter(keys.SIZE), _ONE)
        visibility.wake(tr, qk)
        outcome = fdb.tuple.pack((REQUEUED, *meta.elements()))
        settled.mark(tr, qk, _token(priority, stamp), outcome, payload=payload)
        return visibility.item_from(priority, stamp, meta, payload)

    def answer(outcome: bytes, payload: bytes | None) -> Item | None:
        kind, *rest = fdb.tuple.unpack(outcome)
        if kind != REQUEUED or payload is None:
            return None
        return visibility.item_from(priority, stamp, keys.ItemMeta.from_elements(rest), payload)

    return cast(Item, _settle(db_or_tr, name, priority, stamp, body, answer))


def delete(db_or_tr: DatabaseOrTransaction, name: str, priority: int, stamp: Any) -> None:
    """Gone for good: its dedup key is kept for the window, as for any item consumed."""
    from ._internals import dedup

    def body(tr: Any, qk: keys.QueueKeys, kv: Any) -> bool:
        _p, _s, _died, *rest = qk.dead.unpack(bytes(kv.key))
        del tr[bytes(kv.key)]
        tr.add(qk.counter(keys.DEAD_COUNT), counter_bytes(-1))
        dedup.consumed(tr, qk, priority, stamp, keys.ItemMeta.from_elements(rest))
        settled.mark(tr, qk, _token(priority, stamp), fdb.tuple.pack((DELETED,)))
        return True

    def answer(outcome: bytes, payload: bytes | None) -> bool | None:
        return True if fdb.tuple.unpack(outcome)[0] == DELETED else None

    _settle(db_or_tr, name, priority, stamp, body, answer)


# --- public operations ---------------------------------------------------------------------------


@observed
def dead_letters(
    db_or_tr: DatabaseOrTransaction, name: str, *, cursor: str | None = None, limit: int = 50
) -> Page[DeadLetter]:
    """The queue's dead letters, in queue order."""
    checks.check_name(name)
    limit = checks.check_count(limit, "limit", minimum=1, maximum=LIMIT_MAX)
    after = None if cursor is None else tokens.parse_position_cursor(cursor, tokens.DEAD_CURSOR, 2)
    return page(db_or_tr, name, after, limit)


@observed(none_is_empty=True)
def get_dead_letter(db_or_tr: DatabaseOrTransaction, name: str, item_id: str) -> DeadLetter | None:
    """The dead letter with this id, or None if the queue has none such."""
    checks.check_name(name)
    return get(db_or_tr, name, *tokens.parse_item_id(item_id))


@observed
def requeue_dead_letter(db_or_tr: DatabaseOrTransaction, name: str, item_id: str) -> Item:
    """Put a dead letter back among the ready items, at its old place, attempts reset to 0.

    Raises DeadLetterNotFound when the queue has no dead letter with this id. Repeated within an
    hour, given a database, it returns the item the first requeue did: a retry after a commit in
    doubt is safe (see the error codes' "Commits in doubt").
    """
    checks.check_name(name)
    return requeue(db_or_tr, name, *tokens.parse_item_id(item_id))


@observed
def delete_dead_letter(db_or_tr: DatabaseOrTransaction, name: str, item_id: str) -> None:
    """Delete a dead letter for good. Errors, and a repeated call, as for ``requeue_dead_letter``."""
    checks.check_name(name)
    delete(db_or_tr, name, *tokens.parse_item_id(item_id))
