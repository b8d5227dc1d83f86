"""Items: push (versionstamped, conflict-free), pop and peek at both ends, browse, batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from django_fdbqueue import codecs
from django_fdbqueue.exceptions import InvalidArgument, ValueTooLarge, WrongQueueKind
from django_fdbqueue.fdbapi import fdb, transactional

from . import attempts, keys
from .attempts import Attempt
from .catalog import QUEUE_ID_BYTES, counter_bytes, first, read_counter, require, root
from .records import Item, Page, PendingItem, now_micros, to_datetime

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
            raise InvalidArgument(
                f"At most {MAX_PUSHES_PER_TRANSACTION} items can be pushed in one transaction."
            )
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

    def cost(self, qk: keys.QueueKeys) -> int:
        """Bytes this push adds to a transaction, as FoundationDB counts them.

        Two versionstamped keys (item and order index), each counted as its mutation (key and
        value) and its write conflict range (two keys long), so a long ROOT is paid for in full.
        """
        item = len(qk.items.pack((self.priority, _SAMPLE_STAMP, self.enqueued_us, self.codec)))
        order = len(qk.order.pack((_SAMPLE_STAMP,)))
        order_value = len(fdb.tuple.pack((self.priority, self.enqueued_us)))
        return 3 * item + len(self.payload) + 3 * order + order_value + 2


def prepare(value: Any, priority: Any, codec: codecs.Codec | str | None) -> Prepared:
    priority = keys.check_priority(priority)
    chosen = codecs.choose(value, codec)
    payload = chosen.encode(value)
    if len(payload) > MAX_VALUE_BYTES:
        raise ValueTooLarge(
            f"The encoded value is {len(payload):,} bytes; the limit is {MAX_VALUE_BYTES:,} "
            "(one FoundationDB value). Store large payloads elsewhere and queue a reference.",
            size=len(payload),
            limit=MAX_VALUE_BYTES,
        )
    return Prepared(priority, chosen.name, payload, now_micros())


def decode_item(qk: keys.QueueKeys, kv: Any) -> Item:
    priority, stamp, enqueued_us, codec_name = qk.items.unpack(bytes(kv.key))
    value = codecs.get(codec_name).decode(bytes(kv.value))
    return Item(keys.item_id(priority, stamp), priority, value, to_datetime(enqueued_us))


# --- push ------------------------------------------------------------------------------------


@transactional
def push_prepared(tr: Any, name: str, batch: list[Prepared]) -> list[PendingItem]:
    """Write a batch of items. Reads only the catalog entry, never the items: no push conflicts."""
    entry, qk = require(tr, name)
    if entry.kind == "fifo":
        for p in batch:
            if p.priority != 0:
                raise WrongQueueKind(
                    f"{name!r} is a FIFO queue: its items all have priority 0.", name=name
                )
    attempt = attempts.current(tr)
    first = _take_user_versions(attempt, len(batch))
    pending = []
    for offset, p in enumerate(batch):
        stamp = Versionstamp(user_version=first + offset)
        tr.set_versionstamped_key(
            qk.items.pack_with_versionstamp((p.priority, stamp, p.enqueued_us, p.codec)), p.payload
        )
        tr.set_versionstamped_key(
            qk.order.pack_with_versionstamp((stamp,)), fdb.tuple.pack((p.priority, p.enqueued_us))
        )
        value = codecs.get(p.codec).decode(p.payload)  # what a pop will return (JSON: tuple -> list)
        pending.append(PendingItem(p.priority, value, to_datetime(p.enqueued_us), stamp.user_version, attempt.stamp))
    if batch:
        tr.add(qk.counter(keys.SIZE), counter_bytes(len(batch)))
        tr.add(qk.counter(keys.PUSHED), counter_bytes(len(batch)))
    return pending


def push_batches(prepared: list[Prepared]) -> Iterable[list[Prepared]]:
    """Split into transactions of about BATCH_BYTES / PUSH_BATCH_ITEMS, keeping order.

    Sized from the real key lengths under the configured ROOT, with a queue id of the longest
    encoding, so a batch never underestimates what it will cost.
    """
    qk = keys.QueueKeys(root(), b"\x00" * QUEUE_ID_BYTES)
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


# --- reading from either end -------------------------------------------------------------------


def walk_min(tr: Any, qk: keys.QueueKeys, limit: int, *, after: tuple | None = None,
             max_bytes: int | None = None) -> tuple[list[Any], bool]:
    """Up to `limit` items from the min end: priority ascending, push order ascending.

    Returns (key-values, cut) where `cut` says the byte budget, not the queue, ended the walk.
    """
    r = qk.items.range()
    begin = r.start if after is None else qk.item_prefix(*after) + b"\xff"
    out: list[Any] = []
    size = 0
    for kv in tr.get_range(begin, r.stop, limit=limit):
        out.append(kv)
        size += len(kv.value)
        if max_bytes is not None and size >= max_bytes and len(out) < limit:
            return out, True
    return out, False


def walk_max(tr: Any, qk: keys.QueueKeys, limit: int, *, after: tuple | None = None,
             max_bytes: int | None = None) -> tuple[list[Any], bool]:
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
    while len(out) < limit:
        top = first(tr.snapshot.get_range(r.start, upper, limit=1, reverse=True))
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


def take(tr: Any, qk: keys.QueueKeys, end: str, n: int, max_bytes: int | None = None) -> tuple[list[Item], bool]:
    """Remove up to n items from `end` (both keys of each) and update the counters atomically."""
    kvs, cut = walk(tr, qk, end, n, max_bytes=max_bytes)
    items = []
    for kv in kvs:
        item_key = bytes(kv.key)
        _priority, stamp, _enqueued, _codec = qk.items.unpack(item_key)
        del tr[item_key]
        del tr[qk.order.pack((stamp,))]
        items.append(decode_item(qk, kv))
    if items:
        tr.add(qk.counter(keys.SIZE), counter_bytes(-len(items)))
        tr.add(qk.counter(keys.POPPED), counter_bytes(len(items)))
    return items, cut


@transactional
def pop_n(tr: Any, name: str, end: str, n: int, max_bytes: int | None) -> tuple[list[Item], bool]:
    _entry, qk = require(tr, name, fifo_ok=end == "min")
    return take(tr, qk, end, n, max_bytes)


@transactional
def peek_one(tr: Any, name: str, end: str) -> Item | None:
    _entry, qk = require(tr, name, fifo_ok=end == "min")
    kvs, _cut = walk(tr, qk, end, 1)
    return decode_item(qk, kvs[0]) if kvs else None


@transactional
def browse_page(tr: Any, name: str, end: str, after: tuple | None, limit: int) -> Page[Item]:
    """limit + 1 items, so the page knows whether another follows."""
    _entry, qk = require(tr, name, fifo_ok=end == "min")
    kvs, _cut = walk(tr, qk, end, limit + 1, after=after)
    items = [decode_item(qk, kv) for kv in kvs[:limit]]
    next_cursor = None
    if len(kvs) > limit:
        last_priority, last_stamp = qk.items.unpack(bytes(kvs[limit - 1].key))[:2]
        next_cursor = keys.browse_cursor(end, last_priority, last_stamp)
    return Page(items, next_cursor)


@transactional
def get_item(tr: Any, name: str, priority: int, stamp: Any) -> Item | None:
    _entry, qk = require(tr, name)
    prefix = qk.item_prefix(priority, stamp)
    kv = first(tr.get_range(prefix, prefix + b"\xff", limit=1))
    return decode_item(qk, kv) if kv is not None else None


# --- counters and clearing -------------------------------------------------------------------------


@transactional
def size(tr: Any, name: str) -> int:
    _entry, qk = require(tr, name)
    return read_counter(tr[qk.counter(keys.SIZE)])


@transactional
def empty(tr: Any, name: str) -> bool:
    """Looks at the first item rather than the size counter: conflicts only with its neighbours."""
    _entry, qk = require(tr, name)
    r = qk.items.range()
    return first(tr.get_range(r.start, r.stop, limit=1)) is None


@transactional
def clear(tr: Any, name: str) -> None:
    """Blind writes only: a push committed after us lands after the clear and is counted."""
    _entry, qk = require(tr, name)
    for space in (qk.items, qk.order):
        r = space.range()
        tr.clear_range(r.start, r.stop)
    tr[qk.counter(keys.SIZE)] = counter_bytes(0)
