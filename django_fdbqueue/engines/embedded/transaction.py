"""Transactions of the embedded engine, with FoundationDB's semantics.

A transaction reads one consistent snapshot (its read version) plus its own writes, buffers
its mutations, and records *read conflict ranges* (what it read without ``snapshot``) and
*write conflict ranges* (what it wrote). At commit the storage layer fails it with 1020
(not_committed) if a transaction that committed after its read version wrote into one of its
read ranges; otherwise all its mutations apply atomically at a new, larger version.

Conflict ranges follow FoundationDB's client:

- ``get(key)``: ``[key, key + b"\\x00")``; a key whose value the transaction itself determined
  (set or cleared earlier) is answered locally and adds nothing.
- ``get_range``: the whole range when the read returned all of it; when a limit (or the caller
  stopping early) cut it short, only the part covered: forward ``[begin, last + b"\\x00")``,
  reverse ``[last, end)``.
- ``get_key(selector)``: from the selector's anchor to the key found.
- writes: the key, the cleared range, the atomic op's key; a versionstamped key the span
  between its stamp filled with the read version (zero when it has none) and with ``\\xff``.
- ``snapshot`` reads add none; atomic operations read nothing, so they never conflict.
"""

from __future__ import annotations

import bisect
import itertools
import random
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Protocol, Sequence

from django_fdbqueue.fdbapi import RETRYABLE_CODES, ErrorCode, FDBError, make_error, strinc

from . import atomic
from .faults import NOT_COMMITTED, UNKNOWN_APPLIED, UNKNOWN_NOT_APPLIED
from .futures import DeferredFuture, Future, Key, KeyValue, RangeResult, Value
from .storage import METADATA_VERSION_KEY, ConflictError, Storage, StoreBusyError, TooOldError
from .watches import WatchFuture

if TYPE_CHECKING:
    import sqlite3

    from .faults import FaultInjector
    from .wakeup import CommitSignal
    from .watches import Watcher


class Host(Protocol):
    """What a transaction needs of the database that made it (``EmbeddedDatabase`` is the one):
    named here so that this module does not depend on the database's."""

    max_transaction_age: float
    faults: "FaultInjector"
    _storage: Storage
    _clock: Callable[[], float]
    _timeout: float | None
    _retry_limit: int | None
    _max_retry_delay: float
    _signal: "CommitSignal"
    _watcher: "Watcher"

MAX_KEY_SIZE = 10_000
MAX_VALUE_SIZE = 100_000
MAX_TRANSACTION_SIZE = 10_000_000
VERSIONSTAMP_SIZE = 10
LEGAL_KEY_END = b"\xff"
# Rows a range read fetches when get_range is called, before anyone iterates it.
FIRST_BATCH_ROWS = 100


def _key_bytes(key: Any) -> bytes:
    if hasattr(key, "as_foundationdb_key"):
        key = key.as_foundationdb_key()
    if not isinstance(key, bytes):
        raise TypeError("Key must be of type bytes, not %s" % type(key).__name__)
    return bytes(key)


def _value_bytes(value: Any) -> bytes:
    if hasattr(value, "as_foundationdb_value"):
        value = value.as_foundationdb_value()
    if not isinstance(value, bytes):
        raise TypeError("Value must be of type bytes, not %s" % type(value).__name__)
    return bytes(value)


def _checked_range(begin: Any, end: Any) -> tuple[bytes, bytes]:
    """A conflict range's keys; an inverted range is an error, as in the binding (2005)."""
    begin, end = _key_bytes(begin), _key_bytes(end)
    if begin > end:
        raise make_error(ErrorCode.INVERTED_RANGE)
    return begin, end


def _is_selector(obj: Any) -> bool:
    return hasattr(obj, "or_equal") and hasattr(obj, "offset") and hasattr(obj, "key")


class _WriteCache:
    """What the transaction's own writes say about each key: read-your-writes, and the commit.

    A key's entry is either a known value (set, cleared, or an atomic op on a known value),
    a list of atomic ops awaiting the stored value, or a versionstamped value with the atomic ops
    written after it (applied to the stamped value at commit, as FoundationDB does: none is
    dropped). Cleared ranges hide stored rows; later writes inside them get entries of their own.
    Unreadable ranges are where a versionstamped key may land, and unreadable keys those written
    with a versionstamped value: as in FoundationDB, a read that reaches one fails with 1036
    (accessed_unreadable), since its contents are unknown until the commit. A key stays
    unreadable after a later set or atomic op, as on a cluster; only a clear ends that.

    The cache is also what the commit applies, as FoundationDB's client does with its write
    map: one final mutation per written key (a key set 10,000 times is written, and counted
    against the 10 MB limit, once), after the range mutations (clears and versionstamped keys)
    in the order they were made.
    """

    KNOWN, OPS, STAMPED = "known", "ops", "stamped"

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.entries: dict[bytes, tuple[str, Any]] = {}
        self.clears: list[tuple[bytes, bytes]] = []
        self.unreadable_ranges: list[tuple[bytes, bytes]] = []
        self.unreadable_keys: set[bytes] = set()
        # ("clear", begin, end) and ("stamped_key", body, offset, value), in call order.
        self.range_mutations: list[tuple[Any, ...]] = []
        self._costs: dict[bytes, int] = {}
        self.size = 0  # bytes of the final mutations, as FoundationDB counts them

    def _put(self, key: bytes, entry: tuple[str, Any], cost: int) -> None:
        if key not in self.entries:
            bisect.insort(self.keys, key)
        self.entries[key] = entry
        self.size += cost - self._costs.get(key, 0)
        self._costs[key] = cost

    def set(self, key: bytes, value: bytes | None) -> None:
        """A value, or None for a cleared key (a clear of ``[key, key + b"\\x00")``).

        A clear makes a key written with a versionstamped value readable again; a set does not.
        """
        if value is None:
            self.unreadable_keys.discard(key)
        self._known(key, value)

    def _known(self, key: bytes, value: bytes | None) -> None:
        cost = len(key) + (len(value) if value is not None else len(key) + 1)
        self._put(key, (self.KNOWN, value), cost)

    def clear_range(self, begin: bytes, end: bytes) -> None:
        lo, hi = bisect.bisect_left(self.keys, begin), bisect.bisect_left(self.keys, end)
        for key in self.keys[lo:hi]:
            del self.entries[key]
            self.size -= self._costs.pop(key)
        del self.keys[lo:hi]
        self.unreadable_keys = {key for key in self.unreadable_keys if not begin <= key < end}
        self.clears.append((begin, end))
        self.range_mutations.append(("clear", begin, end))
        self.size += len(begin) + len(end)

    def stamped_key(self, body: bytes, offset: int, value: bytes, landing: tuple[bytes, bytes]) -> None:
        self.range_mutations.append(("stamped_key", body, offset, value))
        self.size += len(body) + len(value)
        self.unreadable_ranges.append(landing)

    def atomic(self, key: bytes, op: Callable[[bytes | None, bytes], bytes | None], param: bytes) -> None:
        kind, payload = self.lookup(key)
        if kind == self.KNOWN:
            self._known(key, op(payload, param))  # a result of None (compare_and_clear) is no clear
            return
        if kind == self.STAMPED:
            body, offset, ops = payload
            cost = self._costs[key] + len(key) + len(param)
            self._put(key, (self.STAMPED, (body, offset, ops + ((op, param),))), cost)
            return
        ops = payload + [(op, param)] if kind == self.OPS else [(op, param)]
        # FoundationDB's write map folds a repeated operation into one mutation.
        folded = kind == self.OPS and payload[-1][0] is op
        cost = self._costs.get(key, 0) + (0 if folded else len(key) + len(param))
        self._put(key, (self.OPS, ops), cost)

    def stamped_value(self, key: bytes, body: bytes, offset: int) -> None:
        """A versionstamped value: `body` with its stamp placeholder at `offset` (no ops after it yet)."""
        self._put(key, (self.STAMPED, (body, offset, ())), len(key) + len(body))
        self.unreadable_keys.add(key)

    def unreadable(self, key: bytes) -> bool:
        """Is `key`'s value unknowable until the commit (a versionstamp may be part of it)?"""
        return key in self.unreadable_keys or any(b <= key < e for b, e in self.unreadable_ranges)

    def unreadable_boundary(self, begin: bytes, end: bytes, reverse: bool) -> bytes | None:
        """Where a scan of [begin, end) first meets an unreadable range (None: it never does)."""
        hits = [(b, e) for b, e in self.unreadable_ranges if b < end and e > begin]
        if not hits:
            return None
        if reverse:
            return max(min(e, end) for _b, e in hits)
        return min(max(b, begin) for b, _e in hits)

    def cleared(self, key: bytes) -> bool:
        return any(b <= key < e for b, e in self.clears)

    def lookup(self, key: bytes) -> tuple[str | None, Any]:
        """(kind, payload) for `key`, or (None, None) when only the database can tell."""
        if key in self.entries:
            return self.entries[key]
        if self.cleared(key):
            return self.KNOWN, None
        return None, None

    def keys_between(self, begin: bytes, end: bytes) -> list[bytes]:
        return self.keys[bisect.bisect_left(self.keys, begin) : bisect.bisect_left(self.keys, end)]

    def resolve(self, key: bytes, stored: bytes | None) -> bytes | None:
        """The value a read of `key` sees, given the stored value (None when absent)."""
        kind, payload = self.lookup(key)
        if kind is None:
            return stored
        if kind == self.KNOWN:
            return payload
        if kind == self.STAMPED:  # callers check unreadable() first; this is the last line of defence
            raise make_error(ErrorCode.ACCESSED_UNREADABLE)
        value = stored
        for op, param in payload:
            value = op(value, param)
        return value

    @property
    def empty(self) -> bool:
        return not self.entries and not self.range_mutations


class _VersionstampSlot:
    """Where a commit leaves its versionstamp for ``get_versionstamp()`` futures."""

    def __init__(self) -> None:
        self.stamp: bytes | None = None
        self.error: int | None = None

    def wait(self) -> Key:
        if self.stamp is not None:
            return Key(self.stamp)
        if self.error is not None:
            raise make_error(self.error)
        raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)


class _VersionstampFuture(Future):
    def __init__(self, slot: _VersionstampSlot) -> None:
        super().__init__()
        self._slot = slot

    def wait(self) -> Key:
        return self._slot.wait()

    def is_ready(self) -> bool:
        return self._slot.stamp is not None or self._slot.error is not None

    # Key-like access, as the binding's Key future offers.
    @property
    def value(self) -> bytes:
        return self.wait().value  # type: ignore[return-value]


class _ReadView:
    """The read methods, shared by a transaction and its ``snapshot`` view."""

    _tr: "Transaction"
    _snapshot: bool

    def get(self, key: Any) -> Value:
        return Value(self._tr._read_key(_key_bytes(key), self._snapshot))

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.get_range(key.start, key.stop, reverse=(key.step == -1))
        return self.get(key)

    def get_key(self, key_selector: Any) -> Key:
        return Key(self._tr._resolve_selector(key_selector, self._snapshot))

    def get_range(
        self, begin: Any, end: Any, limit: int = 0, reverse: bool = False, streaming_mode: Any = None
    ) -> RangeResult:
        return self._tr._range(begin, end, limit, reverse, self._snapshot)

    def get_range_startswith(self, prefix: Any, *args: Any, **kwargs: Any) -> RangeResult:
        prefix = _key_bytes(prefix)
        return self.get_range(prefix, strinc(prefix), *args, **kwargs)

    def get_read_version(self) -> Future:
        return Future(self._tr._ensure_read_version())


class Snapshot(_ReadView):
    """``tr.snapshot``: the same reads (own writes included) with no read conflict ranges."""

    def __init__(self, tr: "Transaction") -> None:
        self._tr = tr
        self._snapshot = True
        self.db = tr.db


class TransactionOptions:
    """The per-transaction options the embedded engine honours (same names as the binding)."""

    def __init__(self, tr: "Transaction") -> None:
        self._tr = tr

    def set_timeout(self, milliseconds: int) -> None:
        self._tr._timeout = milliseconds / 1000.0 if milliseconds else None

    def set_retry_limit(self, limit: int) -> None:
        self._tr._retry_limit = None if limit is None or limit < 0 else limit

    def set_max_retry_delay(self, milliseconds: int) -> None:
        self._tr._max_retry_delay = milliseconds / 1000.0


def _release_connection(storage: Storage, conn: "sqlite3.Connection") -> None:
    storage.release(conn)


class Transaction(_ReadView):
    """A FoundationDB transaction on the embedded engine. Use it from one thread at a time."""

    def __init__(self, db: Host) -> None:
        self.db = db
        self._tr = self
        self._snapshot = False
        self._storage: Storage = db._storage
        self._clock = db._clock
        self._timeout: float | None = db._timeout
        self._retry_limit: int | None = db._retry_limit
        self._max_retry_delay: float = db._max_retry_delay
        self.options = TransactionOptions(self)
        self.snapshot = Snapshot(self)
        self._conn: "sqlite3.Connection | None" = None
        self._conn_finalizer: weakref.finalize | None = None
        self._slot = _VersionstampSlot()
        self._watches: list[tuple[bytes, bytes | None, WatchFuture]] = []
        self._start_lifetime()
        self._clear_state()

    # -- lifecycle -------------------------------------------------------------------
    def _start_lifetime(self) -> None:
        self._started = self._clock()
        self._retries = 0
        self._cancelled = False

    def _clear_state(self) -> None:
        self._release_snapshot()
        self._read_version: int | None = None
        self._metadata_version: bytes | None = None
        self._read_version_at = 0.0
        self._cache = _WriteCache()
        self._read_ranges: list[list[bytes]] = []
        self._write_ranges: list[tuple[bytes, bytes]] = []
        self._deferred_error: int | None = None
        self._committed_version: int | None = None
        # Set by a commit that went through (or found nothing to do) until reset/on_error: as on a
        # cluster, a second commit then fails with 2017 and nothing is ever applied twice.
        self._committed = False
        if self._slot.stamp is None and self._slot.error is None:
            self._slot.error = ErrorCode.TRANSACTION_CANCELLED
        self._slot = _VersionstampSlot()
        self._end_watches(make_error(ErrorCode.TRANSACTION_CANCELLED))

    def _release_snapshot(self) -> None:
        if self._conn_finalizer is not None:
            self._conn_finalizer()
            self._conn_finalizer = None
        self._conn = None

    def reset(self) -> None:
        """Forget everything, as a new transaction: writes, reads, retries and timeout clock."""
        self._clear_state()
        self._start_lifetime()

    def cancel(self) -> None:
        self._cancelled = True
        self._release_snapshot()

    def _check_usable(self) -> None:
        if self._cancelled:
            raise make_error(ErrorCode.TRANSACTION_CANCELLED)
        if self._timeout is not None and self._clock() - self._started > self._timeout:
            raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)

    def _check_readable(self) -> None:
        """Reads of a committed transaction fail with 2017 (used_during_commit), as on a cluster."""
        self._check_usable()
        if self._committed:
            raise make_error(ErrorCode.USED_DURING_COMMIT)

    def _write_allowed(self) -> bool:
        """False after commit: the write is dropped and the next commit fails with 2017.

        The binding's writes return nothing, so a write to a committed transaction cannot fail at
        once; FoundationDB keeps the error for the next commit, and so do we.
        """
        self._check_usable()
        if self._committed:
            self._deferred_error = self._deferred_error or ErrorCode.USED_DURING_COMMIT
            return False
        return True

    def _unreadable(self) -> Exception:
        """A read reached an unknowable key: it fails, and so does this attempt's commit (1036)."""
        self._deferred_error = self._deferred_error or ErrorCode.ACCESSED_UNREADABLE
        return make_error(ErrorCode.ACCESSED_UNREADABLE)

    def _check_age(self) -> None:
        if (
            self._read_version is not None
            and self._clock() - self._read_version_at > self.db.max_transaction_age
        ):
            raise make_error(ErrorCode.TRANSACTION_TOO_OLD)

    def _ensure_read_version(self) -> int:
        self._check_readable()
        if self._read_version is None:
            conn = self._storage.acquire()
            self._conn_finalizer = weakref.finalize(self, _release_connection, self._storage, conn)
            self._conn = conn
            self._read_version, self._metadata_version = self._storage.begin_snapshot(conn)
            self._read_version_at = self._clock()
        self._check_age()
        return self._read_version

    # -- reads -----------------------------------------------------------------------
    def _read_key(self, key: bytes, snapshot: bool) -> bytes | None:
        self._check_readable()
        if key >= LEGAL_KEY_END and key != METADATA_VERSION_KEY:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        if self._cache.unreadable(key):
            raise self._unreadable()
        kind, payload = self._cache.lookup(key)
        if kind == _WriteCache.KNOWN:
            return payload
        self._ensure_read_version()
        if key == METADATA_VERSION_KEY:
            stored = self._metadata_version  # read with the snapshot, as the read version is
        else:
            stored = self._storage.get(self._conn, key)  # type: ignore[arg-type]
        if not snapshot:
            self._read_ranges.append([key, key + b"\x00"])
        return self._cache.resolve(key, stored)

    def _range(self, begin: Any, end: Any, limit: int, reverse: bool, snapshot: bool) -> RangeResult:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError("limit must be a non-negative integer, not %r" % (limit,))
        begin = b"" if begin is None else begin
        end = LEGAL_KEY_END if end is None else end
        begin = self._resolve_selector(begin, snapshot) if _is_selector(begin) else _key_bytes(begin)
        end = self._resolve_selector(end, snapshot) if _is_selector(end) else _key_bytes(end)
        if end > LEGAL_KEY_END:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        # Like the binding, whose range read starts when get_range is called: the first batch is
        # read (and its conflict range recorded) now, even if the result is never iterated; the
        # rest follows lazily from this attempt's snapshot, and fails (1025) once it has ended.
        self._ensure_read_version()
        snapshot_conn = self._conn
        first = self._iterate(begin, end, limit, reverse, snapshot, snapshot_conn)

        def same_attempt() -> None:
            if self._conn is not snapshot_conn:
                raise make_error(ErrorCode.TRANSACTION_CANCELLED)

        return RangeResult(
            lambda: self._iterate(begin, end, limit, reverse, snapshot, snapshot_conn),
            first=_read_ahead(first, min(limit or FIRST_BATCH_ROWS, FIRST_BATCH_ROWS), same_attempt),
        )

    def _iterate(
        self,
        begin: bytes,
        end: bytes,
        limit: int,
        reverse: bool,
        snapshot: bool,
        snapshot_conn: "sqlite3.Connection | None" = None,
    ) -> Iterator[KeyValue]:
        """Stored rows merged with the transaction's own writes, in order, lazily."""
        if begin >= end:
            return
        self._ensure_read_version()
        if snapshot_conn is None:
            snapshot_conn = self._conn
        elif self._conn is not snapshot_conn:
            raise make_error(ErrorCode.TRANSACTION_CANCELLED)
        covered = [end, end] if reverse else [begin, begin]
        if not snapshot:
            self._read_ranges.append(covered)
        local = self._cache.keys_between(begin, end)
        if reverse:
            local.reverse()
        stored = self._storage.scan(
            snapshot_conn, begin, end, reverse, batch=max(1, min(limit or 100, 10_000))  # type: ignore[arg-type]
        )
        ahead = lambda a, b: a > b if reverse else a < b  # noqa: E731
        unreadable = self._cache.unreadable_boundary(begin, end, reverse)
        row = next(stored, None)
        index = count = 0
        while row is not None or index < len(local):
            self._check_usable()
            self._check_age()
            if self._conn is not snapshot_conn:
                # Committed, reset or retried since the read began: its snapshot is gone.
                raise make_error(ErrorCode.TRANSACTION_CANCELLED)
            mine = local[index] if index < len(local) else None
            upcoming = mine if row is None or (mine is not None and ahead(mine, row[0])) else row[0]
            if unreadable is not None and (upcoming < unreadable if reverse else upcoming >= unreadable):
                raise self._unreadable()
            if mine is None or (row is not None and ahead(row[0], mine)):
                key, value = row  # type: ignore[misc]
                row = next(stored, None)
                if self._cache.cleared(key):
                    value = None
            else:
                if mine in self._cache.unreadable_keys:
                    raise self._unreadable()
                key, base = mine, None
                if row is not None and row[0] == mine:
                    base = row[1]
                    row = next(stored, None)
                index += 1
                value = self._cache.resolve(key, base)
            if value is None:
                continue
            if reverse:
                covered[0] = key
            else:
                covered[1] = key + b"\x00"
            count += 1
            yield KeyValue(key, value)
            if limit and count >= limit:
                return
        if unreadable is not None:
            raise self._unreadable()  # the rest of the range is unknowable
        covered[0], covered[1] = begin, end

    def _resolve_selector(self, selector: Any, snapshot: bool) -> bytes:
        """The key a KeySelector names: `offset` keys on from the last key < (or <=) its key."""
        anchor = _key_bytes(selector.key)
        offset = selector.offset
        if offset >= 1:
            start = anchor + b"\x00" if selector.or_equal else anchor
            found = list(self._iterate(start, LEGAL_KEY_END, offset, False, snapshot))
            return found[-1].key if len(found) == offset else LEGAL_KEY_END
        stop = anchor + b"\x00" if selector.or_equal else anchor
        wanted = 1 - offset
        found = list(self._iterate(b"", min(stop, LEGAL_KEY_END), wanted, True, snapshot))
        return found[-1].key if len(found) == wanted else b""

    # -- writes ----------------------------------------------------------------------
    def _check_key(self, key: bytes, system_ok: bool = False) -> None:
        """Key limits fail at commit, as in the binding (its writes return nothing)."""
        if len(key) > MAX_KEY_SIZE:
            self._deferred_error = self._deferred_error or ErrorCode.KEY_TOO_LARGE
        elif key >= LEGAL_KEY_END and not (system_ok and key == METADATA_VERSION_KEY):
            self._deferred_error = self._deferred_error or ErrorCode.KEY_OUTSIDE_LEGAL_RANGE

    def _check_value(self, value: bytes) -> None:
        if len(value) > MAX_VALUE_SIZE:
            self._deferred_error = self._deferred_error or ErrorCode.VALUE_TOO_LARGE

    def _write_point(self, key: bytes, system_ok: bool = False) -> bool:
        """Common checks of a one-key write; records its write conflict range once per key."""
        if not self._write_allowed():
            return False
        self._check_key(key, system_ok)
        if key not in self._cache.entries:
            self._write_ranges.append((key, key + b"\x00"))
        return True

    def set(self, key: Any, value: Any) -> None:
        key, value = _key_bytes(key), _value_bytes(value)
        if self._write_point(key):
            self._check_value(value)
            self._cache.set(key, value)

    def clear(self, key: Any) -> None:
        if _is_selector(key):
            key = self._resolve_selector(key, False)
        key = _key_bytes(key)
        if self._write_point(key):
            self._cache.set(key, None)

    def clear_range(self, begin: Any, end: Any) -> None:
        begin = b"" if begin is None else begin
        end = LEGAL_KEY_END if end is None else end
        begin = self._resolve_selector(begin, False) if _is_selector(begin) else _key_bytes(begin)
        end = self._resolve_selector(end, False) if _is_selector(end) else _key_bytes(end)
        if begin > end:
            raise make_error(ErrorCode.INVERTED_RANGE)
        if end > LEGAL_KEY_END:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        if begin == end or not self._write_allowed():
            return
        self._cache.clear_range(begin, end)
        self._write_ranges.append((begin, end))

    def clear_range_startswith(self, prefix: Any) -> None:
        prefix = _key_bytes(prefix)
        self.clear_range(prefix, strinc(prefix))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            self.clear_range(key.start, key.stop)
        else:
            self.clear(key)

    def _atomic(self, name: str, key: Any, param: Any) -> None:
        key, param = _key_bytes(key), _value_bytes(param)
        if self._write_point(key):
            self._check_value(param)
            self._cache.atomic(key, atomic.OPERATIONS[name], param)

    def add(self, key: Any, param: Any) -> None:
        """Atomic little-endian add; reads nothing, so concurrent adds never conflict."""
        self._atomic("add", key, param)

    def bit_and(self, key: Any, param: Any) -> None:
        self._atomic("bit_and", key, param)

    def bit_or(self, key: Any, param: Any) -> None:
        self._atomic("bit_or", key, param)

    def bit_xor(self, key: Any, param: Any) -> None:
        self._atomic("bit_xor", key, param)

    def max(self, key: Any, param: Any) -> None:
        self._atomic("max", key, param)

    def min(self, key: Any, param: Any) -> None:
        self._atomic("min", key, param)

    def byte_max(self, key: Any, param: Any) -> None:
        self._atomic("byte_max", key, param)

    def byte_min(self, key: Any, param: Any) -> None:
        self._atomic("byte_min", key, param)

    def compare_and_clear(self, key: Any, param: Any) -> None:
        self._atomic("compare_and_clear", key, param)

    def append_if_fits(self, key: Any, param: Any) -> None:
        self._atomic("append_if_fits", key, param)

    @staticmethod
    def _split_stamp_offset(data: bytes) -> tuple[bytes, int]:
        """Strip the 4-byte little-endian offset that ends a versionstamped key or value."""
        if len(data) < 4:
            raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)
        body, offset = data[:-4], int.from_bytes(data[-4:], "little")
        if offset + VERSIONSTAMP_SIZE > len(body):
            raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)
        return body, offset

    def set_versionstamped_key(self, key: Any, value: Any) -> None:
        """Write `value` at `key` with its 10-byte placeholder replaced by the commit's stamp."""
        key, value = _key_bytes(key), _value_bytes(value)
        body, offset = self._split_stamp_offset(key)
        if not self._write_allowed():
            return
        self._check_key(body)
        self._check_value(value)
        # Like the binding, use the read version only if the transaction already has one: a
        # blind insert takes none (and so can never be too old).
        floor = (self._read_version or 0).to_bytes(8, "big") + b"\x00\x00"
        lowest = body[:offset] + floor + body[offset + 10 :]
        highest = body[:offset] + b"\xff" * VERSIONSTAMP_SIZE + body[offset + 10 :]
        self._write_ranges.append((lowest, highest + b"\x00"))
        self._cache.stamped_key(body, offset, value, (lowest, highest + b"\x00"))

    def set_versionstamped_value(self, key: Any, value: Any) -> None:
        """Write `value` with its placeholder replaced by the commit's stamp; unreadable until then."""
        key, value = _key_bytes(key), _value_bytes(value)
        body, offset = self._split_stamp_offset(value)
        # The one system key a versionstamped value may be written to without special options.
        if self._write_point(key, system_ok=True):
            self._check_value(body)
            self._cache.stamped_value(key, body, offset)

    # -- conflict ranges by hand -----------------------------------------------------
    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        begin, end = _checked_range(begin, end)
        self._ensure_read_version()
        self._read_ranges.append([begin, end])

    def add_read_conflict_key(self, key: Any) -> None:
        key = _key_bytes(key)
        self.add_read_conflict_range(key, key + b"\x00")

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        begin, end = _checked_range(begin, end)
        if self._write_allowed():
            self._write_ranges.append((begin, end))

    def add_write_conflict_key(self, key: Any) -> None:
        key = _key_bytes(key)
        self.add_write_conflict_range(key, key + b"\x00")

    # -- watches ---------------------------------------------------------------------
    def watch(self, key: Any) -> WatchFuture:
        """A future that becomes ready when `key` changes after this transaction commits.

        As in FoundationDB, setting a watch reads the key (an ordinary read, so a change by
        another transaction before this one commits is a conflict: 1020) and the watch compares
        against the value this transaction sees at that point, its own writes included. It stays
        idle until the commit succeeds, and fails with the commit's error if it does not.
        """
        key = _key_bytes(key)
        self._check_readable()
        if len(key) > MAX_KEY_SIZE:
            raise make_error(ErrorCode.KEY_TOO_LARGE)
        if key >= LEGAL_KEY_END:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        baseline = self._read_key(key, snapshot=False)
        future = WatchFuture()
        self._watches.append((key, baseline, future))
        return future

    def _end_watches(self, error: BaseException) -> None:
        """Fail the watches of an attempt that will not commit."""
        watches, self._watches = self._watches, []
        for _key, _baseline, future in watches:
            future._finish(error)

    def _start_watches(self) -> None:
        watches, self._watches = self._watches, []
        for key, baseline, future in watches:
            self.db._watcher.add(key, baseline, future)

    # -- commit and retry ------------------------------------------------------------
    def get_versionstamp(self) -> _VersionstampFuture:
        """A future of this attempt's 10-byte versionstamp, ready once commit succeeds."""
        return _VersionstampFuture(self._slot)

    def get_committed_version(self) -> int:
        if self._committed_version is None:
            raise make_error(ErrorCode.CLIENT_INVALID_OPERATION)
        return self._committed_version

    def get_approximate_size(self) -> Future:
        return Future(self._size())

    def _size(self) -> int:
        """Bytes as FoundationDB counts them: final mutations plus coalesced conflict ranges."""
        ranges = [*_merge_ranges(self._read_ranges), *_merge_ranges(self._write_ranges)]
        return self._cache.size + sum(len(b) + len(e) for b, e in ranges)

    def _too_large(self) -> bool:
        """Over the 10 MB limit? Coalescing ranges only shrinks them, so the unmerged sum (no
        sorting) settles nearly every transaction; only one near the limit pays for the merge."""
        ranges = itertools.chain(self._read_ranges, self._write_ranges)
        upper_bound = self._cache.size + sum(len(b) + len(e) for b, e in ranges)
        return upper_bound > MAX_TRANSACTION_SIZE and self._size() > MAX_TRANSACTION_SIZE

    def commit(self) -> Future:
        """Commit; the returned future raises FDBError (1020, 1021, 1007, limits...) on wait()."""
        try:
            self._commit()
        except FDBError as error:
            self._end_watches(error)
            return Future(error=error)
        return Future()

    def _commit(self) -> None:
        if self._committed:
            raise make_error(ErrorCode.USED_DURING_COMMIT)
        self._check_usable()
        slot = self._slot
        if self._deferred_error is not None:
            raise make_error(self._deferred_error)
        if self._cache.empty and not self._write_ranges:
            # Read-only: nothing to resolve, so (as in FoundationDB) no conflict check and no
            # age limit: reads that were served stay valid however long ago they were made.
            self._release_snapshot()
            self._committed = True
            self._committed_version = -1
            slot.error = ErrorCode.NO_COMMIT_VERSION
            self._start_watches()
            return
        self._check_age()
        if self._too_large():
            raise make_error(ErrorCode.TRANSACTION_TOO_LARGE)
        fault = self.db.faults.draw()
        if fault == NOT_COMMITTED:
            raise make_error(ErrorCode.NOT_COMMITTED)
        if fault == UNKNOWN_NOT_APPLIED:
            raise make_error(ErrorCode.COMMIT_UNKNOWN_RESULT)
        reads = [(b, e) for b, e in self._read_ranges if b < e]
        try:
            version = self._storage.commit(self._read_version, reads, self._apply, snapshot=self._conn)
        except ConflictError:
            raise make_error(ErrorCode.NOT_COMMITTED) from None
        except TooOldError:
            raise make_error(ErrorCode.TRANSACTION_TOO_OLD) from None
        except StoreBusyError:
            raise make_error(ErrorCode.TRANSACTION_TIMED_OUT) from None
        finally:
            self._release_snapshot()
        self._committed = True
        if fault == UNKNOWN_APPLIED:
            # The commit happened: other clients' watches hear of it as of any commit, while
            # this transaction's own watches fail with the error its caller sees.
            self._announce(version)
            slot.error = ErrorCode.COMMIT_UNKNOWN_RESULT
            raise make_error(ErrorCode.COMMIT_UNKNOWN_RESULT)
        self._committed_version = version
        slot.stamp = version.to_bytes(8, "big") + b"\x00\x00"
        self._start_watches()
        self._announce(version)

    def _announce(self, version: int) -> None:
        """Wake the watches of every process: this handle's at once, others' through the signal."""
        self.db._signal.publish(version)
        self.db._watcher.notify()

    def _apply(self, conn: "sqlite3.Connection", version: int) -> list[tuple[bytes, bytes]]:
        """Write the final mutations at `version` (inside the storage's commit).

        Range mutations first, in the order they were made; then one write per key from the
        write cache, which already folds every later write over earlier ones.
        """
        stamp = version.to_bytes(8, "big") + b"\x00\x00"
        storage = self._storage
        cache = self._cache
        for mutation in cache.range_mutations:
            if mutation[0] == "clear":
                storage.delete_range(conn, mutation[1], mutation[2])
            else:
                _, body, offset, value = mutation
                storage.put(conn, body[:offset] + stamp + body[offset + 10 :], value)
        puts: list[tuple[bytes, bytes]] = []
        deletes: list[bytes] = []
        # Atomic operations apply to the stored values: all of them are read in one statement.
        stored = storage.get_many(conn, [k for k in cache.keys if cache.entries[k][0] == _WriteCache.OPS])
        for key in cache.keys:
            kind, payload = cache.entries[key]
            if kind == _WriteCache.KNOWN:
                value = payload
            elif kind == _WriteCache.OPS:
                value = stored.get(key)
                for op, param in payload:
                    value = op(value, param)
            else:  # a versionstamped value, then the atomic ops written after it
                body, offset, ops = payload
                value = body[:offset] + stamp + body[offset + 10 :]
                for op, param in ops:
                    value = op(value, param)
            if value is None:
                deletes.append(key)
            else:
                puts.append((key, value))
        storage.put_many(conn, puts)
        storage.delete_many(conn, deletes)
        return _merge_ranges(self._write_ranges)

    def on_error(self, error: Any) -> DeferredFuture:
        """Decide on an error: for retryable codes back off, reset and return; else re-raise.

        As in the binding, the decision is delivered by the returned future's ``wait()``.
        """
        if isinstance(error, FDBError):
            code = error.code
        elif isinstance(error, int):
            code = error
        else:
            raise error

        def decide() -> None:
            if code not in RETRYABLE_CODES:
                raise make_error(code)
            if self._retry_limit is not None and self._retries >= self._retry_limit:
                raise make_error(code)
            delay = min(self._max_retry_delay, 0.005 * (2**self._retries))
            delay *= random.uniform(0.5, 1.0)
            if self._timeout is not None:
                remaining = self._timeout - (self._clock() - self._started)
                if remaining <= delay:
                    self._clear_state()
                    raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)
            self._clear_state()
            self._retries += 1
            time.sleep(delay)

        return DeferredFuture(decide)


def _read_ahead(rows: Iterator[KeyValue], count: int, check: Callable[[], None]) -> Iterator[KeyValue]:
    """Read up to `count` rows of a range now; hand them out (or the read's error) when iterated.

    `check` runs before each row is handed out, so rows read ahead are not served once their
    transaction attempt has ended, just as rows still to be read are not.
    """
    buffered: list[KeyValue] = []
    failure: BaseException | None = None
    try:
        for row in rows:
            buffered.append(row)
            if len(buffered) >= count:
                break
    except FDBError as error:
        failure = error

    def serve() -> Iterator[KeyValue]:
        for row in buffered:
            check()
            yield row
        if failure is not None:
            raise failure
        yield from rows

    return serve()


def _merge_ranges(ranges: Iterable[Sequence[bytes]]) -> list[tuple[bytes, bytes]]:
    """Sort and coalesce overlapping or touching ranges (fewer rows of conflict history)."""
    merged: list[tuple[bytes, bytes]] = []
    for begin, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and begin <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((begin, end))
    return merged
