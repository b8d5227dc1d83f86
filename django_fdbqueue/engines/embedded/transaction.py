"""Transactions of the embedded engine, with FoundationDB's semantics.

A transaction reads one consistent snapshot plus its own writes, buffers its mutations, and
records the read and write conflict ranges FoundationDB's client would; at commit the storage
layer fails it with 1020 if a newer commit wrote into one of its read ranges. This module is the
``Transaction`` API: its lifecycle, reads, writes, commit and retry. Its parts live beside it
(``keys``, ``reads``, ``write_cache``, ``conflicts``, ``versionstamps``).

The conflict range each kind of read and write adds is listed on the docs' embedded engine page,
"What it reproduces" (docs/explanation/embedded-engine.md).
"""

from __future__ import annotations

import random
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from django_fdbqueue.fdbapi import RETRYABLE_CODES, ErrorCode, FDBError, make_error

from .conflicts import merge_ranges, too_large, transaction_size
from .faults import NOT_COMMITTED, UNKNOWN_APPLIED, UNKNOWN_NOT_APPLIED
from .futures import DeferredFuture, Future, KeyValue, RangeResult
from .keys import LEGAL_KEY_END, MAX_KEY_SIZE, is_selector, key_bytes
from .options import TransactionOptions
from .past import PastView
from .metrics import MetricsMethods
from .reads import FIRST_BATCH_ROWS, ReadView, Snapshot, merged_rows, read_ahead, streaming_mode_error
from .connections import StoreBusyError
from .storage import METADATA_VERSION_KEY, ConflictError, Storage, TooOldError
from .versionstamps import VersionstampFuture, VersionstampSlot, stamp_of
from .watches import WatchFuture
from .write_cache import WriteCache
from .writes import WriteMethods

if TYPE_CHECKING:
    import sqlite3

    from .faults import FaultInjector
    from .wakeup import CommitSignal
    from .watches import Watcher

__all__ = ["FIRST_BATCH_ROWS", "Host", "Snapshot", "Transaction", "TransactionOptions"]


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
    interleave: Callable[[str], None] | None


def _failed_range(error: Exception) -> Iterator[KeyValue]:
    """The rows of a range read the client refused: iterating raises its error."""
    raise error
    yield  # a generator: the error comes on iteration, as from the binding's first batch


def _release_connection(storage: Storage, conn: "sqlite3.Connection") -> None:
    storage.release(conn)


class Transaction(ReadView, WriteMethods, MetricsMethods):
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
        self._conn_finalizer: weakref.finalize[Any, Any] | None = None
        self._slot = VersionstampSlot()
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
        # set_read_version: the version asked for, and what can be read at it once taken.
        self._wanted_version: int | None = None
        self._past: PastView | None = None
        # An error every later read (and the commit) fails with, as the client's deferred error.
        self._read_error: int | None = None
        self._metadata_version: bytes | None = None
        self._read_version_at = 0.0
        self._cache = WriteCache()
        self._read_ranges: list[list[bytes]] = []
        self._write_ranges: list[tuple[bytes, bytes]] = []
        self._deferred_error: int | None = None
        self._committed_version: int | None = None
        # Set by a commit that went through (or found nothing to do) until reset/on_error: as on a
        # cluster, a second commit then fails with 2017 and nothing is ever applied twice.
        self._committed = False
        # set_next_write_no_write_conflict_range: consumed by the next write; keys so written.
        self._no_write_conflict_next = False
        self._unconflicted_keys: set[bytes] = set()
        self._special_writes = False
        if self._slot.stamp is None and self._slot.error is None:
            self._slot.error = ErrorCode.TRANSACTION_CANCELLED
        self._slot = VersionstampSlot()
        if self._watches:
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
        """Reads of a committed transaction fail with 2017 (used_during_commit), as on a cluster;
        an error kept from an earlier call comes first, even on a cancelled transaction."""
        if self._read_error is not None:
            raise make_error(self._read_error)
        self._check_usable()
        if self._committed:
            raise make_error(ErrorCode.USED_DURING_COMMIT)

    def _write_allowed(self) -> bool:
        """False after commit: the write is dropped and the next commit fails with 2017.

        The binding's writes return nothing, so a write to a committed transaction cannot fail at
        once; FoundationDB keeps the error for the next commit, and so do we. So it is for a
        cancelled or timed-out transaction: the write is dropped, the commit fails with the error.
        """
        try:
            self._check_usable()
        except FDBError as error:
            self._deferred_error = self._deferred_error or error.code
            return False
        if self._committed:
            self._deferred_error = self._deferred_error or ErrorCode.USED_DURING_COMMIT
            return False
        return True

    def _unreadable(self) -> Exception:
        """A read reached an unknowable key: it fails, and so does this attempt's commit (1036)."""
        self._deferred_error = self._deferred_error or ErrorCode.ACCESSED_UNREADABLE
        return make_error(ErrorCode.ACCESSED_UNREADABLE)

    def _check_age(self) -> None:
        if self._read_version is not None and self._clock() - self._read_version_at > self.db.max_transaction_age:
            raise make_error(ErrorCode.TRANSACTION_TOO_OLD)

    def _ensure_read_version(self) -> int:
        self._check_readable()
        if self._read_version is None:
            if self.db.interleave is not None:
                self.db.interleave("read version")  # a simulation's turn: another actor may go first
            conn = self._storage.acquire()
            self._conn_finalizer = weakref.finalize(self, _release_connection, self._storage, conn)
            self._conn = conn
            self._read_version, self._metadata_version = self._storage.begin_snapshot(conn)
            self._read_version_at = self._clock()
            if self._wanted_version is not None:  # set by hand: older than the store's, it reads the past
                if self._wanted_version != self._read_version:
                    self._past = PastView.at(self._storage, conn, self._wanted_version)
                self._read_version = self._wanted_version
        self._check_age()
        return self._read_version

    def _hand_out_read_version(self) -> int:
        """The read version, for the caller to keep: it may come back through ``set_read_version``
        within the next seconds, so from now on commits keep what they replace (``past``)."""
        version = self._ensure_read_version()
        self._storage.keep_past()
        return version

    def set_read_version(self, version: int) -> None:
        """Read at ``version`` (one a transaction was given, or a commit's) instead of the latest.

        As on a cluster it never fails itself: once the transaction has a read version, its later
        reads fail with 2010 (read_version_already_set). What can be read at an older version:
        ``past``.
        """
        if self._read_version is not None:
            self._read_error = self._read_error or ErrorCode.READ_VERSION_ALREADY_SET
        elif version <= 0:  # no version a transaction or commit hands out (-1: "no commit")
            self._read_error = self._read_error or ErrorCode.VERSION_INVALID
        else:
            self._wanted_version = int(version)

    # -- reads -----------------------------------------------------------------------
    def _read_key(self, key: bytes, snapshot: bool) -> bytes | None:
        self._check_readable()
        if key >= LEGAL_KEY_END and key != METADATA_VERSION_KEY:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        if self._cache.unreadable(key):
            raise self._unreadable()
        kind, payload = self._cache.lookup(key)
        if kind == WriteCache.KNOWN:
            known: bytes | None = payload
            return known
        self._ensure_read_version()
        if self._past is not None:
            self._past.check(key, key + b"\x00")
        if key == METADATA_VERSION_KEY:
            stored = self._metadata_version  # read with the snapshot, as the read version is
        else:
            stored = self._storage.get(self._conn, key)  # type: ignore[arg-type]
        if self._past is not None:
            stored = self._past.value(self._conn, key, stored)  # type: ignore[arg-type]
        if not snapshot:
            self._read_ranges.append([key, key + b"\x00"])
        return self._cache.resolve(key, stored)

    def _range(
        self, begin: Any, end: Any, limit: int, reverse: bool, snapshot: bool, streaming_mode: Any = None
    ) -> RangeResult:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError("limit must be a non-negative integer, not %r" % (limit,))
        refused = streaming_mode_error(streaming_mode, limit)
        if refused is not None:  # the client refuses it before anything is read
            failure = make_error(refused)
            return RangeResult(lambda: _failed_range(failure))
        begin = b"" if begin is None else begin
        end = LEGAL_KEY_END if end is None else end
        begin = self._resolve_selector(begin, snapshot) if is_selector(begin) else key_bytes(begin)
        end = self._resolve_selector(end, snapshot) if is_selector(end) else key_bytes(end)
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
            first=read_ahead(first, min(limit or FIRST_BATCH_ROWS, FIRST_BATCH_ROWS), same_attempt),
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
        if self._past is not None:
            self._past.check(begin, end)
        covered = [end, end] if reverse else [begin, begin]
        if not snapshot:
            self._read_ranges.append(covered)
        local = self._cache.keys_between(begin, end)
        if reverse:
            local.reverse()
        batch = max(1, min(limit or 100, 10_000))
        stored = self._storage.scan(snapshot_conn, begin, end, reverse, batch=batch)  # type: ignore[arg-type]
        if self._past is not None:
            stored = self._past.rows(snapshot_conn, begin, end, reverse, stored)  # type: ignore[arg-type]

        def check() -> None:
            self._check_usable()
            self._check_age()
            if self._conn is not snapshot_conn:
                # Committed, reset or retried since the read began: its snapshot is gone.
                raise make_error(ErrorCode.TRANSACTION_CANCELLED)

        unreadable_at = self._cache.unreadable_boundary(begin, end, reverse)
        rows = merged_rows(self._cache, stored, local, reverse, unreadable_at, check, self._unreadable)
        count = 0
        for key, value in rows:
            if reverse:
                covered[0] = key
            else:
                covered[1] = key + b"\x00"
            count += 1
            yield KeyValue(key, value)
            if limit and count >= limit:
                return
        covered[0], covered[1] = begin, end

    def _resolve_selector(self, selector: Any, snapshot: bool) -> bytes:
        """The key a KeySelector names: `offset` keys on from the last key < (or <=) its key."""
        anchor = key_bytes(selector.key)
        offset = selector.offset
        if offset >= 1:
            start = anchor + b"\x00" if selector.or_equal else anchor
            found = list(self._iterate(start, LEGAL_KEY_END, offset, False, snapshot))
            return found[-1].key if len(found) == offset else LEGAL_KEY_END
        stop = anchor + b"\x00" if selector.or_equal else anchor
        wanted = 1 - offset
        found = list(self._iterate(b"", min(stop, LEGAL_KEY_END), wanted, True, snapshot))
        return found[-1].key if len(found) == wanted else b""

    # -- watches ---------------------------------------------------------------------
    def watch(self, key: Any) -> WatchFuture:
        """A future that becomes ready when `key` changes after this transaction commits.

        As in FoundationDB, setting a watch reads the key (an ordinary read, so a change by
        another transaction before this one commits is a conflict: 1020) and the watch compares
        against the value this transaction sees at that point, its own writes included. It stays
        idle until the commit succeeds, and fails with the commit's error if it does not.
        """
        key = key_bytes(key)
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
    def get_versionstamp(self) -> VersionstampFuture:
        """A future of this attempt's 10-byte versionstamp, ready once commit succeeds."""
        return VersionstampFuture(self._slot)

    def get_committed_version(self) -> int:
        """The commit's version; -1 before a commit went through, or for a read-only one (as the
        client answers: it has no error to give here). Handed out, it may be read at (``past``)."""
        if self._committed_version is None or self._committed_version < 0:
            return -1
        self._storage.keep_past()
        return self._committed_version

    def get_approximate_size(self) -> Future:
        return Future(self._size())

    def _size(self) -> int:
        """Bytes as FoundationDB counts them: final mutations plus coalesced conflict ranges."""
        return transaction_size(self._cache.size, self._read_ranges, self._write_ranges)

    def _too_large(self) -> bool:
        return too_large(self._cache.size, self._read_ranges, self._write_ranges)

    def commit(self) -> Future:
        """Commit; the returned future raises FDBError (1020, 1021, 1007, limits...) on wait()."""
        if self.db.interleave is not None:
            self.db.interleave("commit")
        try:
            self._commit()
        except FDBError as error:
            self._end_watches(error)
            return Future(error=error)
        return Future()

    def _commit(self) -> None:
        if self._committed:
            raise make_error(ErrorCode.USED_DURING_COMMIT)
        if self._read_error is not None:  # kept from a write, it comes before a cancellation's
            raise make_error(self._read_error)
        self._check_usable()
        slot = self._slot
        if self._deferred_error is not None or self._read_error is not None:
            raise make_error(self._deferred_error or self._read_error)  # type: ignore[arg-type]
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
        snapshot = self._conn
        if self._past is not None:  # an older read version: the snapshot's commit path is not for it
            self._release_snapshot()
            snapshot = None
        try:
            version = self._storage.commit(
                self._read_version, reads, merge_ranges(self._write_ranges), self._apply, snapshot=snapshot
            )
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
        slot.stamp = stamp_of(version)
        self._start_watches()
        self._announce(version)

    def _announce(self, version: int) -> None:
        """Wake the watches of every process: this handle's at once, others' through the signal."""
        self.db._signal.publish(version)
        self.db._watcher.notify()

    def _apply(self, conn: "sqlite3.Connection", version: int) -> None:
        """Write the final mutations at `version` (inside the storage's commit)."""
        self._cache.apply(self._storage, conn, stamp_of(version))

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
            self._check_usable()  # a cancelled (or timed-out) transaction answers with that error
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
