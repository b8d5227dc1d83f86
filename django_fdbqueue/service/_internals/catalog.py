"""The catalog of named queues (create, get, exists, delete, list) and per-queue statistics."""

from __future__ import annotations

import dataclasses
import os
import struct
import threading
from dataclasses import dataclass
from typing import Any, Callable, TypeVar, cast

from django_fdbqueue.conf import get_settings
from django_fdbqueue.exceptions import QueueAlreadyExists, QueueNotFound, WrongQueueKind
from django_fdbqueue.fdbapi import DatabaseOrTransaction, fdb, root_of, subspace_of, transactional

from . import attempts, keys, tokens
from ..records import Page, QueueInfo, now_micros, to_datetime

R = TypeVar("R")

QUEUE_ID_BYTES = 16
TENANTS = "e"  # a tenant queue's tenants (``tenantkeys``, which names the same letter)
LIST_LIMIT_MAX = 1000
#: A counter's value: 8 bytes, little-endian and signed, as FoundationDB's atomic ``add`` takes it.
COUNTER = struct.Struct("<q")


@dataclass(frozen=True)
class Entry:
    """A catalog entry: what a queue is and where its data lives."""

    name: str
    kind: str
    created_us: int
    queue_id: bytes
    #: Claims an item may have without an ack before it becomes a dead letter (None: no limit).
    max_attempts: int | None = None
    #: Most leases held at once by items of one limit key (None: no limit); see ``keylimits``.
    key_concurrency: int | None = None
    #: Claims per second per limit key, a token bucket (None: no limit); see ``keylimits``.
    key_rate: float | None = None
    #: Split by tenant: items pushed with ``tenant=``, consumed tenant by tenant (``tenantkeys``).
    tenants: bool = False

    def pack(self) -> bytes:
        extra: tuple[Any, ...] = () if self.max_attempts is None else (self.max_attempts,)
        if self.key_concurrency is not None or self.key_rate is not None:
            extra = (self.max_attempts, self.key_concurrency, self.key_rate)
        if self.tenants:
            extra = (self.max_attempts, self.key_concurrency, self.key_rate, True)
        return fdb.tuple.pack((self.kind, self.created_us, self.queue_id, *extra))

    def with_options(self, **changes: Any) -> "Entry":
        """The same queue with some options changed (max_attempts, key_concurrency, key_rate)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def unpack(cls, name: str, raw: bytes) -> "Entry":
        kind, created_us, queue_id, *extra = fdb.tuple.unpack(bytes(raw))
        return cls(name, kind, created_us, queue_id, *extra)


def root(db_or_tr: DatabaseOrTransaction | None = None) -> Any:
    """The root subspace of the store that ``db_or_tr`` (a database or a transaction) addresses.

    The engines attach it to every handle they open (``fdbapi.root_of``). A handle opened
    elsewhere (a project's own ``fdb.open()``), or none given, means the configured
    FDBQUEUE['ROOT'], as it is now: such a handle addresses the keys the app's own handle would.
    """
    space = None if db_or_tr is None else root_of(db_or_tr)
    return space if space is not None else subspace_of(get_settings().root)


def counter_bytes(delta: int) -> bytes:
    """The parameter of an atomic add: 8-byte little-endian two's complement."""
    return COUNTER.pack(delta)


def read_counter(raw: Any) -> int:
    if raw is None or not raw.present():
        return 0
    return cast(int, COUNTER.unpack(bytes(raw))[0])


def first(result: Any) -> Any:
    for kv in result:
        return kv
    return None


def read_entry(tr: Any, root_space: Any, name: str) -> Entry | None:
    """An ordinary (conflict-checked) read: a delete or re-create racing us makes us retry."""
    raw = tr[keys.catalog_key(root_space, name)]
    if not raw.present():
        return None
    return Entry.unpack(name, raw)


# --- the entry cache ------------------------------------------------------------------------------
#
# Every operation needs its queue's entry. Reading it costs a read per operation (a round trip on a
# cluster), although entries change only on create and delete. So entries are cached per process,
# each tagged with the value of FoundationDB's metadata version key (\xff/metadataVersion) under
# which it was read; create and delete bump that key (a versionstamped value) in the transaction
# that changes the catalog. A transaction whose metadata version equals an entry's tag sees the
# catalog as it was when the entry was read, so it can use the entry without reading it. It still
# adds a read conflict on the entry's key by hand: a delete racing the operation then conflicts with
# it exactly as if the key had been read. The metadata version comes with the read version (on a
# cluster at no extra cost), and a transaction that wrote it cannot read it back (1036), so an
# attempt that changed the catalog reads entries directly. It is read as a snapshot read: an
# ordinary read would make every queue operation conflict with every create or delete of any queue
# (and with any other layer's bump: the key is shared by every layer on a cluster), where the
# conflict on the entry's own key is all correctness needs. Another layer's bumps then only cost
# cache misses. Writing the catalog other than through
# this module (say, clearing the whole ROOT by hand) must also bump it, or stop the processes.

METADATA_VERSION_KEY = b"\xff/metadataVersion"
# A versionstamped value: 10 placeholder bytes, then the 4-byte offset of the stamp (0).
_METADATA_VERSION_PARAM = b"\x00" * 14
_CACHE_LIMIT = 10_000
_cache_lock = threading.Lock()


class _Cached:
    """A cached entry, its tag (the metadata version it was read under), and what every use of it
    needs made once: the queue's key layout and the entry's own key (its read conflict)."""

    __slots__ = ("tag", "entry", "qk", "key")

    def __init__(self, root_space: Any, name: str, tag: bytes, entry: Entry) -> None:
        self.tag, self.entry = tag, entry
        self.qk = keys.queue_keys(root_space, entry.queue_id)
        self.key = keys.catalog_key(root_space, name)


_cache: dict[tuple[bytes, str], _Cached] = {}


def forget_entries() -> None:
    """Forget every cached catalog entry (a store replaced under the same root: a simulation's)."""
    with _cache_lock:
        _cache.clear()


def _catalog_changed(tr: Any) -> None:
    """Bump the metadata version: every process's cached entries are stale once this commits."""
    tr.set_versionstamped_value(METADATA_VERSION_KEY, _METADATA_VERSION_PARAM)
    attempts.current(tr).catalog_changed = True


def lookup(tr: Any, root_space: Any, name: str) -> Entry | None:
    """The entry, from the cache when the metadata version allows, else read (and cached)."""
    if attempts.changed_catalog(tr):
        return read_entry(tr, root_space, name)
    cached = _cache.get((root_space.key(), name))
    if cached is not None:
        known = Guess(tr, root_space, name, cached)
        return known.entry if known.holds(tr) else known.found
    version_future = tr.snapshot[METADATA_VERSION_KEY]
    entry = read_entry(tr, root_space, name)
    if entry is not None:
        _remember(root_space, name, bytes(version_future) if version_future.present() else b"", entry)
    return entry


def _remember(root_space: Any, name: str, version: bytes, entry: Entry) -> None:
    cached = _Cached(root_space, name, version, entry)
    with _cache_lock:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        _cache[(root_space.key(), name)] = cached


class Guess:
    """A cached entry, used before the metadata version read that decides whether it holds.

    On a cluster each read waited for is a round trip: a caller sends its own reads, or prepares
    its writes, with the cached entry while that read is in flight, then asks :meth:`holds`.
    """

    __slots__ = ("entry", "qk", "found", "_cached", "_version", "_root", "_name")

    def __init__(self, tr: Any, root_space: Any, name: str, cached: _Cached) -> None:
        self.entry, self.qk, self._cached, self._root, self._name = cached.entry, cached.qk, cached, root_space, name
        self.found: Entry | None = cached.entry  #: the entry as :meth:`holds` found it
        self._version = tr.snapshot[METADATA_VERSION_KEY]

    def holds(self, tr: Any) -> bool:
        """Is the entry the queue's at this transaction's read version? (Waits for the read.)

        A changed metadata version is mostly another queue's create or delete: then the entry is
        read (into :attr:`found`, and the cache), and if it is the same the guess holds.
        """
        version = bytes(self._version) if self._version.present() else b""
        if version == self._cached.tag:
            tr.add_read_conflict_key(self._cached.key)
            return True
        self.found = read_entry(tr, self._root, self._name)
        if self.found is None:
            with _cache_lock:
                _cache.pop((self._root.key(), self._name), None)
        else:
            _remember(self._root, self._name, version, self.found)  # the next attempt guesses right
        return self.found == self.entry


def guess(tr: Any, name: str, *, fifo_ok: bool = True) -> Guess | None:
    """The cached entry of ``name`` as a :class:`Guess`, or None when there is none to use."""
    if attempts.changed_catalog(tr):
        return None
    root_space = root(tr)
    cached = _cache.get((root_space.key(), name))
    if cached is None or (not fifo_ok and cached.entry.kind == "fifo"):
        return None
    return Guess(tr, root_space, name, cached)


def require_with(
    tr: Any, name: str, send: Callable[[keys.QueueKeys], R], *, fifo_ok: bool = True
) -> tuple[Entry, keys.QueueKeys, R]:
    """:func:`require_with_entry` for reads that depend only on the queue's keys."""
    return require_with_entry(tr, name, lambda _entry, qk: send(qk), fifo_ok=fifo_ok)


def require_with_entry(
    tr: Any, name: str, send: Callable[[Entry, keys.QueueKeys], R], *, fifo_ok: bool = True
) -> tuple[Entry, keys.QueueKeys, R]:
    """:func:`require`, with the caller's first reads (``send(qk)``, not waited for) sent alongside.

    With the entry cached, ``send`` runs at once, so its reads travel with the metadata version
    read that decides whether the entry holds: one round trip for both instead of two. If it
    does not hold (the queue was deleted, created again or changed), the entry is read and
    ``send`` runs again for the queue as it is; the first reads are left unused, their only
    effect a read conflict on keys of a queue that is gone.
    """
    cached = guess(tr, name, fifo_ok=fifo_ok)
    if cached is not None:
        sent = send(cached.entry, cached.qk)
        if cached.holds(tr):
            return cached.entry, cached.qk, sent
    entry, qk = require(tr, name, fifo_ok=fifo_ok)
    return entry, qk, send(entry, qk)


def require(tr: Any, name: str, *, fifo_ok: bool = True) -> tuple[Entry, keys.QueueKeys]:
    """The queue's entry and key layout, or QueueNotFound."""
    root_space = root(tr)
    entry = lookup(tr, root_space, name)
    if entry is None:
        raise QueueNotFound(f"No queue is named {name!r}.", name=name)
    if not fifo_ok and entry.kind == "fifo":
        raise WrongQueueKind(f"{name!r} is a FIFO queue: it has one end (use dequeue/peek or end='min').", name=name)
    return entry, keys.queue_keys(root_space, entry.queue_id)


def info(tr: Any, entry: Entry, qk: keys.QueueKeys) -> QueueInfo:
    """Statistics in constant time: six counters and the first/last keys of two ranges.

    The reads are ordinary reads (serializable inside a caller's read-write transaction; a
    read-only transaction never conflicts). All of them are issued before any is waited on.
    """
    counters = {which: tr[qk.counter(which)] for which in keys.COUNTERS_ALL}
    tenant_count = tr[qk.space[TENANTS].pack(("n",))] if entry.tenants else None
    r = qk.items.range()
    o = qk.order.range()
    lowest = first(tr.get_range(r.start, r.stop, limit=1))
    highest = first(tr.get_range(r.start, r.stop, limit=1, reverse=True))
    oldest = first(tr.get_range(o.start, o.stop, limit=1))
    oldest_at = None
    if oldest is not None:
        _priority, enqueued_us = fdb.tuple.unpack(bytes(oldest.value))
        oldest_at = to_datetime(enqueued_us)
    return QueueInfo(
        name=entry.name,
        kind=entry.kind,
        size=read_counter(counters[keys.SIZE]),
        pushed=read_counter(counters[keys.PUSHED]),
        popped=read_counter(counters[keys.POPPED]),
        min_priority=qk.items.unpack(bytes(lowest.key))[0] if lowest is not None else None,
        max_priority=qk.items.unpack(bytes(highest.key))[0] if highest is not None else None,
        oldest_enqueued_at=oldest_at,
        created_at=to_datetime(entry.created_us),
        leased=read_counter(counters[keys.LEASED]),
        delayed=read_counter(counters[keys.DELAYED]),
        dead=read_counter(counters[keys.DEAD_COUNT]),
        max_attempts=entry.max_attempts,
        key_concurrency=entry.key_concurrency,
        key_rate=entry.key_rate,
        tenants=read_counter(tenant_count) if tenant_count is not None else None,
    )


# --- public operations (wrapped by the package) ------------------------------------------------


def create_queue(
    db_or_tr: Any,
    name: str,
    kind: str,
    max_attempts: int | None = None,
    key_concurrency: int | None = None,
    key_rate: float | None = None,
    tenants: bool = False,
) -> QueueInfo:
    """Create the queue, choosing its id once for every attempt.

    A fresh random id per queue means its data never meets the data of an earlier queue of this
    name. Choosing it before the first attempt means a retry after ``commit_unknown_result``
    (1021) that finds an entry with *this* id knows that its own earlier attempt committed, and
    reports success instead of QueueAlreadyExists.
    """
    entry = Entry(
        name, kind, now_micros(), os.urandom(QUEUE_ID_BYTES), max_attempts, key_concurrency, key_rate, tenants
    )
    return _create(db_or_tr, entry)


@transactional
def _create(tr: Any, entry: Entry) -> QueueInfo:
    root_space = root(tr)
    existing = read_entry(tr, root_space, entry.name)
    if existing is not None and existing.queue_id != entry.queue_id:
        raise QueueAlreadyExists(f"A queue named {entry.name!r} already exists.", name=entry.name)
    if existing is None:
        tr[keys.catalog_key(root_space, entry.name)] = entry.pack()
        _catalog_changed(tr)
    return QueueInfo(
        entry.name,
        entry.kind,
        0,
        0,
        0,
        None,
        None,
        None,
        to_datetime(entry.created_us),
        max_attempts=entry.max_attempts,
        key_concurrency=entry.key_concurrency,
        key_rate=entry.key_rate,
        tenants=0 if entry.tenants else None,
    )


@transactional
def set_max_attempts(tr: Any, name: str, max_attempts: int | None) -> QueueInfo:
    """Rewrite the entry (and bump the metadata version: every cached copy is now stale).

    Takes effect for leases that run out or are released from now on; items already dead stay.
    """
    entry, qk = require(tr, name)
    changed = entry.with_options(max_attempts=max_attempts)
    if changed != entry:
        tr[keys.catalog_key(qk.root, name)] = changed.pack()
        _catalog_changed(tr)
    return info(tr, changed, qk)


@transactional
def set_options(
    tr: Any, name: str, changes: dict[str, Any], on_change: Callable[[Any, keys.QueueKeys], None]
) -> QueueInfo:
    """Rewrite the entry with ``changes`` (checked by the caller), and bump the metadata version;
    ``on_change(tr, qk)`` runs when anything changed (say, to reset state kept under old options)."""
    entry, qk = require(tr, name)
    changed = entry.with_options(**changes)
    if changed != entry:
        tr[keys.catalog_key(qk.root, name)] = changed.pack()
        _catalog_changed(tr)
        on_change(tr, qk)
    return info(tr, changed, qk)


@transactional
def get_queue(tr: Any, name: str) -> QueueInfo:
    entry, qk = require(tr, name)
    return info(tr, entry, qk)


@transactional
def queue_exists(tr: Any, name: str) -> bool:
    return read_entry(tr, root(tr), name) is not None


def delete_queue(db_or_tr: Any, name: str) -> None:
    """Delete the queue and its data, leaving a short-lived marker of this very call.

    A retry after ``commit_unknown_result`` (1021) finds the marker of its own earlier attempt
    and reports success, where it would otherwise find no queue and raise QueueNotFound.
    """
    _delete(db_or_tr, name, keys.DeletionMarker.new())


@transactional
def _delete(tr: Any, name: str, marker: keys.DeletionMarker) -> None:
    root_space = root(tr)
    if tr[marker.key(root_space)].present():
        return  # an earlier attempt of this call committed
    entry, qk = require(tr, name)
    del tr[keys.catalog_key(qk.root, name)]
    space = qk.space.range()
    tr.clear_range(space.start, space.stop)
    tr[marker.key(root_space)] = b""
    _catalog_changed(tr)
    # Markers only need to outlive a retry loop: forget old ones with a blind clear (no reads,
    # so concurrent deletes never conflict over it).
    expired = marker.expired_before(root_space)
    tr.clear_range(expired.start, expired.stop)


@transactional
def list_queues(tr: Any, prefix: str, after: str | None, limit: int) -> Page[QueueInfo]:
    """One range read of the catalog (limit + 1 rows, to know whether a next page exists)."""
    root_space = root(tr)
    cat = keys.catalog(root_space)
    # Names are ASCII and tuple-encoded as b"\x02" + name + b"\x00": every name starting with
    # `prefix` lies in [b"\x02" + prefix, b"\x02" + prefix + b"\xff").
    begin = cat.key() + b"\x02" + prefix.encode("ascii")
    end = begin + b"\xff"
    if after is not None:
        begin = max(begin, cat.pack((after,)) + b"\x00")
    if begin >= end:
        return Page([], None)
    rows = list(tr.get_range(begin, end, limit=limit + 1))
    infos = []
    for kv in rows[:limit]:
        (name,) = cat.unpack(bytes(kv.key))
        entry = Entry.unpack(name, kv.value)
        infos.append(info(tr, entry, keys.queue_keys(root_space, entry.queue_id)))
    next_cursor = tokens.list_cursor(infos[-1].name) if len(rows) > limit else None
    return Page(infos, next_cursor)
