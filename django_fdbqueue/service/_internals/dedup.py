"""Idempotent pushes: a ``dedup_key`` names an item, and a second push of that key adds nothing.

Each key has one record, written with a versionstamped value in the push's own transaction so it
names the item exactly, kept while the item exists and :data:`DEDUP_WINDOW_SECONDS` after it is
consumed; :func:`restored` makes it alive again for an item that comes back. A push reads the
record with an ordinary read, so two pushes of one key conflict and a retry after
``commit_unknown_result`` finds its own first attempt. Pushes that carry a key forget up to
:data:`PRUNE_BATCH` expired records each.

The record, its expiry entries and why: the docs' data model page, "Dedup keys"
(docs/explanation/data-model.md).
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import fdb

from . import keys, tokens
from ..records import Item, now_micros, to_datetime

DEDUP_WINDOW_SECONDS = 300
PRUNE_BATCH = 4
_ALIVE = 0


class Known:
    """What a deduplicated push hands back inside a transaction: the first item, already known."""

    __slots__ = ("item",)
    committed = True

    def __init__(self, item: Item) -> None:
        self.item = item

    @property
    def id(self) -> str:
        return self.item.id

    def result(self, *, wait: bool = False) -> Item:
        return self.item


def read(tr: Any, qk: keys.QueueKeys, dedup_key: str) -> Any:
    """The record's future (an ordinary read: a concurrent push of the same key conflicts)."""
    return tr[qk.dedup_records.pack((dedup_key,))]


def existing(raw: Any, value: Any, now_us: int) -> Item | None:
    """The first item of the key, if the record still holds it; else None (push anew)."""
    if raw is None or not raw.present():
        return None
    priority, stamp, enqueued_us, kept_until_us = fdb.tuple.unpack(bytes(raw))
    if kept_until_us != _ALIVE and kept_until_us <= now_us:
        return None
    return Item(tokens.item_id(priority, stamp), priority, value, to_datetime(enqueued_us), duplicate=True)


def remember(tr: Any, qk: keys.QueueKeys, dedup_key: str, priority: int, stamp: Any, enqueued_us: int) -> None:
    """Record the key for the item this transaction pushes (its stamp is filled in at commit)."""
    tr.set_versionstamped_value(
        qk.dedup_records.pack((dedup_key,)),
        fdb.tuple.pack_with_versionstamp((priority, stamp, enqueued_us, _ALIVE)),
    )


def consumed(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta) -> None:
    """The item is gone for good: keep its key for the window, then forget it (see ``consumed_all``)."""
    consumed_all(tr, qk, [(priority, stamp, meta)])


def consumed_all(tr: Any, qk: keys.QueueKeys, gone: list[tuple[int, Any, keys.ItemMeta]]) -> None:
    """These items are gone for good: each key whose record still names its item is kept for the
    window, then forgotten.

    A record naming another item is that item's: ``clear`` forgets keys but keeps dead letters,
    so a requeued dead letter and a newer item can carry one key, and consuming the old one must
    not make a push of the key answer with it (nor let a second copy of the newer one in once the
    window passes). A forgotten record stays forgotten. Ordinary reads, issued together: a push
    of the key at the same moment conflicts, and its retry sees the outcome.
    """
    pending = [
        (priority, stamp, meta, read(tr, qk, meta.dedup)) for priority, stamp, meta in gone if meta.dedup is not None
    ]
    if not pending:
        return
    kept_until_us = now_micros() + DEDUP_WINDOW_SECONDS * 1_000_000
    for priority, stamp, meta, raw in pending:
        if not raw.present() or tuple(fdb.tuple.unpack(bytes(raw))[:2]) != (priority, stamp):
            continue
        tr[qk.dedup_records.pack((meta.dedup,))] = fdb.tuple.pack((priority, stamp, meta.enqueued_us, kept_until_us))
        tr[qk.dedup_expiry.pack((kept_until_us, meta.dedup))] = b""


def restored(tr: Any, qk: keys.QueueKeys, priority: int, stamp: Any, meta: keys.ItemMeta) -> None:
    """The item is back in the queue: its record names it, alive, again (and stops expiring).

    An ordinary read of the record, so a push of the same key at the same moment conflicts and
    its retry sees the outcome. A record naming another item (the key was forgotten and pushed
    again while this one was away) is left to that item; a forgotten record is written anew.
    """
    if meta.dedup is None:
        return
    record = qk.dedup_records.pack((meta.dedup,))
    raw = read(tr, qk, meta.dedup)
    if raw.present():
        named_priority, named_stamp, _enqueued_us, kept_until_us = fdb.tuple.unpack(bytes(raw))
        if (named_priority, named_stamp) != (priority, stamp) or kept_until_us == _ALIVE:
            return
        del tr[qk.dedup_expiry.pack((kept_until_us, meta.dedup))]
    tr[record] = fdb.tuple.pack((priority, stamp, meta.enqueued_us, _ALIVE))


def prune(tr: Any, qk: keys.QueueKeys, now_us: int, skip: set[str] | frozenset[str] = frozenset()) -> None:
    """Forget up to PRUNE_BATCH keys whose window has passed (except ``skip``: pushed just now)."""
    r = qk.dedup_expiry.range()
    rows = list(tr.snapshot.get_range(r.start, qk.dedup_expiry.pack((now_us,)), limit=PRUNE_BATCH))
    pending = []
    for kv in rows:
        kept_until_us, dedup_key = qk.dedup_expiry.unpack(bytes(kv.key))
        if dedup_key in skip:
            continue
        pending.append((bytes(kv.key), kept_until_us, dedup_key, read(tr, qk, dedup_key)))
    for expiry_key, kept_until_us, dedup_key, raw in pending:
        tr.add_read_conflict_key(expiry_key)
        del tr[expiry_key]
        if raw.present() and fdb.tuple.unpack(bytes(raw))[3] == kept_until_us:
            del tr[qk.dedup_records.pack((dedup_key,))]


def forget_all(tr: Any, qk: keys.QueueKeys) -> None:
    for space in (qk.dedup_records, qk.dedup_expiry):
        r = space.range()
        tr.clear_range(r.start, r.stop)
