"""Public pushes: ``push``, its FIFO spelling ``enqueue``, and ``push_many``, with their checks.

Values are checked and encoded before any transaction starts (``items.prepare``), so a bad
value writes nothing; ``items`` then writes them, versionstamped and conflict-free.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterable, cast

from django_fdbqueue import codecs
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import DatabaseOrTransaction, is_transaction

from ._internals import catalog, checks, keylimits, tenantkeys
from ._internals import items as _items  # push_many's parameter is called items
from ._internals.items import MAX_PUSHES_PER_TRANSACTION
from .observe import observed
from .records import Item, PendingItem, now_micros
from ._internals.visibility import MAX_DELAY_SECONDS

Codec = codecs.Codec | str | None
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _visible_at(delay: object, not_before: object) -> int | None:
    """When a pushed item becomes visible (microseconds), or None for at once."""
    if delay is not None and not_before is not None:
        raise InvalidArgument("Pass delay or not_before, not both.")
    if delay is not None:
        seconds = checks.check_seconds(delay, "delay", minimum=0, maximum=MAX_DELAY_SECONDS)
        return now_micros() + int(round(seconds * 1_000_000)) if seconds > 0 else None
    if not_before is not None:
        if not isinstance(not_before, dt.datetime) or not_before.utcoffset() is None:
            raise InvalidArgument("not_before must be a timezone-aware datetime.", field="not_before")
        micros = int((not_before - _EPOCH).total_seconds() * 1_000_000)
        if micros - now_micros() > MAX_DELAY_SECONDS * 1_000_000:
            raise InvalidArgument("not_before may be at most 366 days ahead.", field="not_before")
        return micros
    return None


@observed
def push(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    value: Any,
    priority: int = 0,
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
    dedup_key: str | None = None,
    key: str | None = None,
    tenant: str | None = None,
) -> Item | PendingItem:
    """Add ``value`` with ``priority``. Never conflicts with other pushes.

    Given a database: the committed Item. Given an open transaction: a PendingItem whose id
    resolves after the caller commits. ``delay`` (seconds) or ``not_before`` (an aware
    datetime) hides the item until then. With ``dedup_key``, a push of a key whose item still
    exists (queued, delayed, leased or dead) or was consumed less than DEDUP_WINDOW_SECONDS ago
    adds nothing and returns that item with ``duplicate=True``, also when retried after
    ``commit_unknown_result``. ``key`` (at most ``keylimits.KEY_MAX_BYTES`` bytes of UTF-8, say
    a customer id) is what the queue's per-key limits count (see ``keylimits``). ``tenant`` (at
    most ``tenantkeys.TENANT_MAX_BYTES`` bytes of UTF-8) is required on a queue split by tenant
    and refused on any other.
    """
    checks.check_name(name)
    dedup_key = None if dedup_key is None else checks.check_dedup_key(dedup_key)
    key = None if key is None else keylimits.check_key(key)
    tenant = None if tenant is None else tenantkeys.check_tenant(tenant)
    prepared = _items.prepare(
        value,
        priority,
        codec,
        visible_us=_visible_at(delay, not_before),
        dedup_key=dedup_key,
        key=key,
        tenant=tenant,
    )
    (pending,) = _items.push_prepared(db_or_tr, name, [prepared])
    # DuplicatePending and dedup.Known stand for a PendingItem (the same attributes and methods).
    return cast("Item | PendingItem", pending if is_transaction(db_or_tr) else pending.result(wait=True))


def enqueue(
    db_or_tr: DatabaseOrTransaction, name: str, value: Any, *, codec: Codec = None, **options: Any
) -> Item | PendingItem:
    """FIFO spelling of ``push(..., priority=0)`` (same ``delay``, ``not_before``, ``dedup_key``, ``key``)."""
    return push(db_or_tr, name, value, 0, codec=codec, **options)


def _split_pair(entry: Any) -> tuple[Any, Any]:
    # Every 2-tuple is (value, priority), so a mistyped priority is an error rather than
    # silently becoming part of the value; anything else is a value with priority 0.
    # To push a pair itself as a value, use a list or wrap it: ((1, 2), 0).
    if isinstance(entry, tuple) and len(entry) == 2:
        return entry
    return entry, 0


@observed
def push_many(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    items: Iterable[Any],
    *,
    codec: Codec = None,
    delay: float | None = None,
    not_before: dt.datetime | None = None,
    key: str | None = None,
    tenant: str | None = None,
) -> list[Item | PendingItem]:
    """Push many values, in order, in as few transactions as the limits allow.

    ``items`` yields ``(value, priority)`` tuples or bare values (priority 0; a list is a value,
    a 2-tuple is always a pair). Everything is
    validated before the first write, so one bad value means nothing is written. ``delay`` or
    ``not_before`` applies to every item, and so do ``key`` and ``tenant`` (see ``push``).
    """
    checks.check_name(name)
    key = None if key is None else keylimits.check_key(key)
    tenant = None if tenant is None else tenantkeys.check_tenant(tenant)
    if isinstance(items, (str, bytes, dict)):
        raise InvalidArgument("items must be an iterable of values or (value, priority) pairs.")
    visible_us = _visible_at(delay, not_before)
    prepared = [
        _items.prepare(*_split_pair(entry), codec, visible_us=visible_us, key=key, tenant=tenant) for entry in items
    ]
    if is_transaction(db_or_tr):
        if len(prepared) > MAX_PUSHES_PER_TRANSACTION:
            raise InvalidArgument(
                f"At most {MAX_PUSHES_PER_TRANSACTION} items can be pushed in one transaction; "
                "pass the database to let push_many split them."
            )
        return cast("list[Item | PendingItem]", _items.push_prepared(db_or_tr, name, prepared))
    results: list[Item | PendingItem] = []
    for batch in _items.push_batches(prepared, catalog.root(db_or_tr)):
        results.extend(p.result(wait=True) for p in _items.push_prepared(db_or_tr, name, batch))
    return results
