"""Items written: values checked and encoded, pushed (versionstamped, conflict-free) in batches; ``reading`` reads them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from django_fdbqueue import codecs
from django_fdbqueue.exceptions import InvalidArgument, ValueTooLarge, WrongQueueKind
from django_fdbqueue.fdbapi import ErrorCode, fdb, is_transaction, make_error, transactional, tuples

from . import attempts, catalog, checks, dedup, keys, tally, tenantkeys, tokens, visibility
from .attempts import Attempt
from .catalog import QUEUE_ID_BYTES, Entry, counter_bytes, first, require
from ..records import Item, PendingItem, now_micros, to_datetime

MAX_VALUE_BYTES = 100_000
# FoundationDB caps a transaction at 10 MB and recommends staying near 1 MB; batches aim there.
BATCH_BYTES = 1_000_000
PUSH_BATCH_ITEMS = 5_000
POP_BATCH_ITEMS = 1_000
# The tuple layer's user version is 16 bits: at most this many pushes in one transaction.
MAX_PUSHES_PER_TRANSACTION = 1 << 16
Versionstamp = fdb.tuple.Versionstamp
# A complete stamp packs to the same length as the placeholder a push writes.
_SAMPLE_STAMP = Versionstamp(b"\x00" * 10, 0)


# --- user versions: distinct, increasing stamps for several pushes in one transaction -----------


def _take_user_versions(attempt: Attempt, count: int) -> int:
    """Reserve `count` consecutive user versions of the attempt; the first one is returned."""
    with attempts.lock:
        first = attempt.next_user_version
        if first + count > MAX_PUSHES_PER_TRANSACTION:
            raise InvalidArgument(f"At most {MAX_PUSHES_PER_TRANSACTION} items can be pushed in one transaction.")
        attempt.next_user_version = first + count
    return first


# --- values ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prepared:
    """A value checked and encoded before any transaction starts (so errors write nothing)."""

    priority: int
    codec: str
    payload: bytes
    enqueued_us: int
    visible_us: int | None = None  # set: delayed until then
    dedup: str | None = None
    key: str | None = None  # the limit key (keylimits)
    tenant: str | None = None  # on a queue split by tenant (tenantkeys)

    @property
    def meta(self) -> keys.ItemMeta:
        return keys.ItemMeta(self.enqueued_us, self.codec, 0, self.dedup, self.key, self.tenant)

    def cost(self, qk: keys.QueueKeys) -> int:
        """Bytes this push adds to a transaction, as FoundationDB counts them.

        Two versionstamped keys (item and order index, or hidden entry and its index), each
        counted as its mutation (key and value) and its write conflict range (two keys long),
        plus the dedup record, so a long ROOT is paid for in full.
        """
        tail = self.meta.elements()
        item = len(qk.hidden.pack((self.visible_us or 0, self.priority, _SAMPLE_STAMP, b"", *tail)))
        index = len(qk.hidden_index.pack((self.priority, _SAMPLE_STAMP)))
        index_value = len(fdb.tuple.pack((self.visible_us or 0, b"", *tail)))
        extra = 0
        if self.dedup is not None:
            record = len(qk.dedup_records.pack((self.dedup,)))
            extra = 3 * record + len(fdb.tuple.pack((self.priority, _SAMPLE_STAMP, self.enqueued_us, 0))) + 4
        return 3 * item + len(self.payload) + 3 * index + index_value + 2 + extra


def prepare(
    value: Any,
    priority: Any,
    codec: codecs.Codec | str | None,
    *,
    visible_us: int | None = None,
    dedup_key: str | None = None,
    key: str | None = None,
    tenant: str | None = None,
) -> Prepared:
    priority = checks.check_priority(priority)
    chosen = codecs.choose(value, codec)
    payload = chosen.encode(value)
    if len(payload) > MAX_VALUE_BYTES:
        raise ValueTooLarge(
            f"The encoded value is {len(payload):,} bytes; the limit is {MAX_VALUE_BYTES:,} "
            "(one FoundationDB value). Store large payloads elsewhere and queue a reference.",
            size=len(payload),
            limit=MAX_VALUE_BYTES,
        )
    return Prepared(priority, chosen.name, payload, now_micros(), visible_us, dedup_key, key, tenant)


def decode_item(qk: keys.QueueKeys, kv: Any) -> Item:
    priority, stamp, *rest = qk.items.unpack(bytes(kv.key))
    return visibility.item_from(priority, stamp, keys.ItemMeta.from_elements(rest), kv.value)


# --- push ------------------------------------------------------------------------------------


class DuplicatePending:
    """A push whose dedup key an earlier push of the same transaction took: that push's item,
    marked ``duplicate`` once committed (as a duplicate of an older item is at once)."""

    __slots__ = ("first",)

    def __init__(self, first: PendingItem) -> None:
        self.first = first

    def __getattr__(self, name: str) -> Any:  # priority, value, enqueued_at, committed
        return getattr(self.first, name)

    @property
    def id(self) -> str:
        return self.first.id

    def result(self, *, wait: bool = False) -> Item:
        return dataclasses.replace(self.first.result(wait=wait), duplicate=True)


def push_prepared(
    db_or_tr: Any, name: str, batch: list[Prepared]
) -> list[PendingItem | DuplicatePending | dedup.Known]:
    """Write a batch of items. Reads only the catalog entry (and dedup records), never the items.

    Pushes never conflict with each other or with pops; a push with a dedup key conflicts only
    with another push of the same key, and returns the item already stored under it instead.
    Given the database, the push writes while the read that confirms its cached catalog entry is
    in flight (:func:`_push_ahead`); in a caller's transaction it reads the entry first, so it
    never has to ask the caller to start over.
    """
    if is_transaction(db_or_tr):
        return _push(db_or_tr, name, batch)
    return _push_ahead(db_or_tr, name, batch)


@transactional
def _push(tr: Any, name: str, batch: list[Prepared]) -> list[PendingItem | DuplicatePending | dedup.Known]:
    entry, qk = require(tr, name)
    if entry.kind == "fifo":
        for p in batch:
            if p.priority != 0:
                raise WrongQueueKind(f"{name!r} is a FIFO queue: its items all have priority 0.", name=name)
    for p in batch:
        tenantkeys.check_fits(name, entry.tenants, p.tenant)
    return _write(tr, qk, batch)


@transactional
def _push_ahead(tr: Any, name: str, batch: list[Prepared]) -> list[PendingItem | DuplicatePending | dedup.Known]:
    """The writes prepared with the cached entry while the read that confirms it is in flight:
    the client's work overlaps the round trip. A queue deleted or changed meanwhile makes the
    attempt start over (this call owns the transaction), now with the entry as it is."""
    cached = catalog.guess(tr, name)
    if cached is None or not _blind(cached.entry, batch):
        return _push(tr, name, batch)
    out = _write(tr, cached.qk, batch)
    if not cached.holds(tr):
        raise make_error(ErrorCode.NOT_COMMITTED)
    return out


def _blind(entry: Entry, batch: list[Prepared]) -> bool:
    """Can ``batch`` be written before ``entry`` is confirmed? Only when nothing it does depends
    on the entry beyond where its keys go: no dedup keys to read, no kind to refuse."""
    return not entry.tenants and all(
        p.dedup is None and p.tenant is None and (p.priority == 0 or entry.kind != "fifo") for p in batch
    )


def _write(tr: Any, qk: keys.QueueKeys, batch: list[Prepared]) -> list[PendingItem | DuplicatePending | dedup.Known]:
    attempt = attempts.current(tr)
    now_us = now_micros()
    # A key pushed earlier in this attempt has a versionstamped record that cannot be read back
    # (1036): those are answered from the attempt's own memory instead.
    pending_here = {key for (queue_id, key) in attempt.dedup_pending if queue_id == qk.queue_id}
    records = {
        p.dedup: dedup.read(tr, qk, p.dedup) for p in batch if p.dedup is not None and p.dedup not in pending_here
    }
    if records:
        dedup.prune(tr, qk, now_us, skip=pending_here)
    out: list[PendingItem | DuplicatePending | dedup.Known | None] = [None] * len(batch)
    fresh: list[tuple[int, Prepared]] = []
    for position, p in enumerate(batch):
        if p.dedup is not None:
            earlier = attempt.dedup_pending.get((qk.queue_id, p.dedup))
            if earlier is not None:
                out[position] = DuplicatePending(earlier)  # the same key twice in one attempt: one item
                continue
            value = codecs.get(p.codec).decode(p.payload)
            known = dedup.existing(records[p.dedup], value, now_us)
            if known is not None:
                out[position] = dedup.Known(as_stored(tr, qk, known))
                continue
        fresh.append((position, p))
    if not fresh:
        return out  # type: ignore[return-value]
    first = _take_user_versions(attempt, len(fresh))
    ready = delayed = 0
    for offset, (position, p) in enumerate(fresh):
        stamp = Versionstamp(user_version=first + offset)
        if _write_one(tr, qk, p, stamp, now_us):
            delayed += 1
        else:
            ready += 1
        value = codecs.get(p.codec).decode(p.payload)  # what a pop will return (JSON: tuple -> list)
        pending = PendingItem(
            p.priority, value, to_datetime(p.enqueued_us), stamp.user_version, attempt.stamp, tokens.item_id
        )
        if p.dedup is not None:
            dedup.remember(tr, qk, p.dedup, p.priority, stamp, p.enqueued_us)
            attempt.dedup_pending[(qk.queue_id, p.dedup)] = pending
        out[position] = pending
    if ready:
        tr.add(qk.counter(keys.SIZE), counter_bytes(ready))
    if delayed:
        tr.add(qk.counter(keys.DELAYED), counter_bytes(delayed))
    tr.add(qk.counter(keys.PUSHED), counter_bytes(ready + delayed))
    tally.count(tr, qk, now_us, tally.PUSHED, ready + delayed)
    visibility.wake(tr, qk)
    return out  # type: ignore[return-value]


def _write_one(tr: Any, qk: keys.QueueKeys, p: Prepared, stamp: Any, now_us: int) -> bool:
    """Write one item's two versionstamped keys: hidden until later (True), or ready (False)."""
    tail = p.meta.elements()
    if p.visible_us is not None and p.visible_us > now_us:
        tr.set_versionstamped_key(
            qk.hidden.pack_with_versionstamp((p.visible_us, p.priority, stamp, b"", *tail)), p.payload
        )
        tr.set_versionstamped_key(
            qk.hidden_index.pack_with_versionstamp((p.priority, stamp)),
            tuples.pack((p.visible_us, b"", *tail)),
        )
        return True
    tr.set_versionstamped_key(qk.items.pack_with_versionstamp((p.priority, stamp, *tail)), p.payload)
    tr.set_versionstamped_key(qk.order.pack_with_versionstamp((stamp,)), tuples.pack((p.priority, p.enqueued_us)))
    if p.tenant is not None:
        tenantkeys.pushed(tr, qk, p.priority, stamp, p.meta)
    return False


def as_stored(tr: Any, qk: keys.QueueKeys, known: Item) -> Item:
    """The item a dedup key names, as stored now (its value, its attempts), marked duplicate.

    A duplicate push answers with what the queue holds, never with the value it was sent. The
    reads are snapshot reads, issued together: a duplicate push must not conflict with pops and
    claims of that item. An item already consumed (popped, acked, or deleted as a dead letter)
    has no value left: it comes back with ``value=None``; so does one a high-contention pop has
    taken but not yet collected (it is in flight, in that pop's result).
    """
    priority, stamp = tokens.parse_item_id(known.id)
    ready_at = qk.item_prefix(priority, stamp)
    dead_at = qk.dead.pack((priority, stamp))
    ready = tr.snapshot.get_range(ready_at, ready_at + b"\xff", limit=1)
    hidden = tr.snapshot[qk.hidden_index.pack((priority, stamp))]
    dead = tr.snapshot.get_range(dead_at, dead_at + b"\xff", limit=1)
    stored = _stored(tr, qk, (priority, stamp), first(ready), hidden, first(dead))
    if stored is None:
        return dataclasses.replace(known, value=None)
    return dataclasses.replace(stored, duplicate=True)


def _stored(tr: Any, qk: keys.QueueKeys, place: tuple[int, Any], ready: Any, hidden: Any, dead: Any) -> Item | None:
    """Decode whichever of the three places holds the item at ``place`` (at most one does)."""
    if ready is not None:
        return decode_item(qk, ready)
    if hidden.present():
        h = visibility.Hidden.from_index(*place, bytes(hidden))
        payload = tr.snapshot[h.key(qk)]
        return visibility.item_from(h.priority, h.stamp, h.meta, payload) if payload.present() else None
    if dead is not None:
        return visibility.decode_dead_letter(qk, dead).item
    return None


def push_batches(prepared: list[Prepared], root_space: Any) -> Iterable[list[Prepared]]:
    """Split into transactions of about BATCH_BYTES / PUSH_BATCH_ITEMS, keeping order.

    Sized from the real key lengths under ``root_space`` (the store's ROOT), with a queue id of
    the longest encoding, so a batch never underestimates what it will cost.
    """
    qk = keys.QueueKeys(root_space, b"\x00" * QUEUE_ID_BYTES)
    batch: list[Prepared] = []
    cost = 0
    for p in prepared:
        item_cost = p.cost(qk)
        if batch and (cost + item_cost > BATCH_BYTES or len(batch) >= PUSH_BATCH_ITEMS):
            yield batch
            batch, cost = [], 0
        batch.append(p)
        cost += item_cost
    if batch:
        yield batch
