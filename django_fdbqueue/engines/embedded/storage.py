"""The embedded engine's SQLite file: ordered key-values, commit versions and conflict history.

One file in WAL mode, safe for many threads and processes on one machine, with four tables:
``kv`` (the key-values, in memcmp order as FoundationDB's keys), ``commit_ranges`` (the write
conflict ranges of recent commits, whose newest row's version is the store's), ``kv_past`` (what
recent commits replaced, while versions handed out may be read again: ``pastlog``) and ``meta``
(how far that history was pruned, and how long ``kv_past`` is kept). Reads run in one SQLite read
transaction, a fixed snapshot; a commit checks its read conflict ranges against newer commits
(FoundationDB's resolver) and applies its mutations in one SQLite transaction, or upgrades its
own read snapshot in place when nothing committed since (the fast path).

Why it is built so, and what each step guarantees: the docs' embedded engine page, "How it works"
(docs/explanation/embedded-engine.md).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from typing import Callable, Iterator, Sequence, cast

from . import pastlog
from .conflicts import pack_ranges, unpack_ranges
from .connections import (
    OPS_FUNCTION,
    UPSERT_OPS,
    OpList,
    OpsConnection,
    StoreBusyError,
    immediate,
    on_nothing,
    ops_runner,
)


SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commit_ranges (
    version INTEGER PRIMARY KEY, committed_at REAL NOT NULL, ranges BLOB NOT NULL
);
INSERT OR IGNORE INTO meta (name, value) VALUES ('pruned_through', 0);
INSERT OR IGNORE INTO meta (name, value) VALUES ('keep_past_until', -1);
INSERT OR IGNORE INTO meta (name, value) VALUES ('past_complete_from', 0);
INSERT INTO commit_ranges (version, committed_at, ranges)
    SELECT 0, 0, x'' WHERE NOT EXISTS (SELECT 1 FROM commit_ranges);
"""
# Schema 1 kept one row per write range; its history is only seconds of conflict checking, so
# moving to schema 2 forgets it (transactions older than the move then retry with 1007).
# Schema 3 keeps the store's version in the newest history row instead of meta: the upgrade
# writes it there (a running process of an older release then fails at commit, finding none in meta).
# Schema 4 adds kv_past (``pastlog``; its triggers come and go: keep_past()).
SCHEMA_VERSION = 4
UPGRADE_FROM_1 = """
DROP TABLE IF EXISTS write_ranges;
UPDATE meta SET value = COALESCE((SELECT value FROM meta WHERE name = 'version'), 0) WHERE name = 'pruned_through';
"""
UPGRADE_FROM_2 = """
INSERT OR IGNORE INTO commit_ranges (version, committed_at, ranges)
    SELECT value, 0, x'' FROM meta WHERE name = 'version';
DELETE FROM meta WHERE name = 'version';
"""

# FoundationDB's metadata version: a system key any transaction may read, and write with a
# versionstamped value, so that clients can tell when cached metadata went stale.
METADATA_VERSION_KEY = b"\xff/metadataVersion"
_SNAPSHOT_QUERY = "SELECT (SELECT MAX(version) FROM commit_ranges), (SELECT value FROM kv WHERE key = ?)"
_BUSY_CODES = frozenset({5, 6, 517})  # SQLITE_BUSY, SQLITE_LOCKED, SQLITE_BUSY_SNAPSHOT

# How long SQLite waits for another process's write lock before giving up (seconds).
BUSY_TIMEOUT = 60.0
# Commits between two of this process's WAL checkpoints, and how long one may hold commits back.
CHECKPOINT_EVERY = 1000
CHECKPOINT_WAIT = 0.1
# Versions advance by about a million a second, as FoundationDB's do.
VERSIONS_PER_SECOND = 1_000_000

Range = tuple[bytes, bytes]
# Applies a transaction's mutations at a commit version.
CommitWork = Callable[[sqlite3.Connection, int], None]


class ConflictError(Exception):
    """A read conflict range met a newer commit's write (becomes FoundationDB's 1020)."""


class TooOldError(Exception):
    """The read version predates the kept conflict history (becomes FoundationDB's 1007)."""


class Storage:
    """One SQLite file and a pool of connections to it, shared by a database's transactions."""

    def __init__(self, path: str, *, history_seconds: float = 5.0, lock_timeout: float | None = None) -> None:
        self.path = path
        # The database's TIMEOUT: a lock another process holds longer than that must fail the
        # transaction within it (1031), not after BUSY_TIMEOUT (see lock_wait()).
        self.lock_timeout = lock_timeout
        # Conflict history outlives the transaction age limit by a margin, so a transaction
        # young enough to commit always finds every commit made since its snapshot.
        self.history_seconds = history_seconds + 1.0
        self._next_prune = 0.0
        # This process's last extension of keep_past_until (see keep_past()).
        self._keeping_until = -1
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._pool: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        # Commits from this process queue here rather than in SQLite's sleeping busy handler.
        self._commit_lock = threading.Lock()
        self._commits_since_checkpoint = 0
        self._closed = False
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            (schema,) = conn.execute("PRAGMA user_version").fetchone()
            upgrade = (UPGRADE_FROM_1 if schema < 2 else "") + (UPGRADE_FROM_2 if schema < 3 else "")
            for statement in (SCHEMA + upgrade).split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(pastlog.TABLE)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        finally:
            self.release(conn)

    def lock_wait(self) -> float:
        """Seconds to wait for a lock held elsewhere: BUSY_TIMEOUT, or the TIMEOUT when shorter.

        Without the cap, a store locked by another process (a long write transaction, a backup
        tool) held every commit, and the opening of the store, for BUSY_TIMEOUT (a minute) however
        short the transaction's TIMEOUT: requests hung past their server's own timeouts.
        """
        if self.lock_timeout is None:
            return BUSY_TIMEOUT
        return min(BUSY_TIMEOUT, self.lock_timeout)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path,
            timeout=self.lock_wait(),
            isolation_level=None,
            check_same_thread=False,
            factory=OpsConnection,
        )
        conn.create_function(OPS_FUNCTION, 2, ops_runner(weakref.ref(conn)))
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives the process being killed; only a power cut
        # or OS crash could lose the last commits.
        conn.execute("PRAGMA synchronous=NORMAL")
        # SQLite's own checkpointing runs inside COMMIT once the WAL passes 1,000 pages, and with
        # readers always present (several threads or processes) the WAL never resets, so it then
        # runs, and syncs, on nearly every commit. We checkpoint every CHECKPOINT_EVERY commits
        # instead, after the commit lock is released (see commit()).
        conn.execute("PRAGMA wal_autocheckpoint=0")
        return conn

    # -- connections -------------------------------------------------------------------
    def acquire(self) -> sqlite3.Connection:
        """A connection with no open transaction."""
        if self._closed:
            raise RuntimeError("the embedded database is closed")
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        return self._connect()

    def release(self, conn: sqlite3.Connection) -> None:
        """Give back a connection, ending whatever transaction it had open."""
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            conn.close()
            return
        with self._pool_lock:
            if not self._closed:
                self._pool.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()

    # -- reads (inside a snapshot opened by begin_snapshot) ----------------------------
    def begin_snapshot(self, conn: sqlite3.Connection) -> tuple[int, bytes | None]:
        """Open a read transaction on `conn`: the read version it sees, and the value of
        ``\\xff/metadataVersion`` then (FoundationDB hands it out with the read version, too)."""
        conn.execute("BEGIN")
        return cast("tuple[int, bytes | None]", conn.execute(_SNAPSHOT_QUERY, (METADATA_VERSION_KEY,)).fetchone())

    def current_version(self) -> int:
        """The last commit version, read outside any snapshot (for the watcher's polling)."""
        conn = self.acquire()
        try:
            return self._versions(conn)[0]
        finally:
            self.release(conn)

    def versions(self, conn: sqlite3.Connection) -> tuple[int, int]:
        """(the store's version, the newest forgotten commit), as the snapshot open on ``conn`` sees them."""
        return self._versions(conn)

    def changes_since(self, conn: sqlite3.Connection, version: int) -> tuple[int, int, list[Range]]:
        """(the store's version, the newest forgotten commit, the write ranges of commits newer than
        ``version``), as the snapshot open on ``conn`` sees them."""
        current, pruned_through = self._versions(conn)
        changed: list[Range] = []
        for (packed,) in conn.execute("SELECT ranges FROM commit_ranges WHERE version > ?", (version,)):
            changed += unpack_ranges(packed)
        return current, pruned_through, changed

    def keep_past(self) -> None:
        """A client was handed a version and may read at it again (``set_read_version``) while the
        history lasts: have commits keep what they replace (the triggers) until a little after
        that (``keep_past_until``, in the clock's microseconds, as the history's pruning goes by the
        clock). Best effort: when the store is busy, reads at that version fall back to what the
        conflict history can tell (``past``).

        Commits made since that version before this call kept nothing if keeping was off: then
        ``past_complete_from`` moves to the newest commit, and reads before it fall back too."""
        until = int((time.time() + self.history_seconds + 1.0) * 1_000_000)
        if self._keeping_until >= until - 1_000_000:  # extended less than a second ago
            return
        conn = self.acquire()
        try:
            with immediate(conn):
                self._keeping_until = pastlog.keep(conn, self._versions(conn)[0], until)
        except (StoreBusyError, sqlite3.OperationalError):
            pass
        finally:
            self.release(conn)

    @staticmethod
    def get(conn: sqlite3.Connection, key: bytes) -> bytes | None:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @staticmethod
    def get_many(conn: sqlite3.Connection, keys: Sequence[bytes]) -> dict[bytes, bytes]:
        """The stored values of `keys` that exist, in one statement per 500 keys."""
        found: dict[bytes, bytes] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(conn.execute(f"SELECT key, value FROM kv WHERE key IN ({marks})", chunk).fetchall())
        return found

    @staticmethod
    def scan(
        conn: sqlite3.Connection, begin: bytes, end: bytes, reverse: bool, batch: int
    ) -> Iterator[tuple[bytes, bytes]]:
        """Rows of [begin, end) in key order (or reverse), fetched `batch` rows at a time."""
        while begin < end:
            if reverse:
                rows = conn.execute(
                    "SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key DESC LIMIT ?",
                    (begin, end, batch),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT key, value FROM kv WHERE key >= ? AND key < ? ORDER BY key LIMIT ?",
                    (begin, end, batch),
                ).fetchall()
            yield from rows
            if len(rows) < batch:
                return
            if reverse:
                end = rows[-1][0]
            else:
                begin = rows[-1][0] + b"\x00"
            batch = min(batch * 2, 10_000)

    # -- commit ------------------------------------------------------------------------
    def commit(
        self,
        read_version: int | None,
        read_ranges: Sequence[Range],
        write_ranges: Sequence[Range],
        apply: CommitWork,
        snapshot: sqlite3.Connection | None = None,
    ) -> int:
        """Resolve conflicts and apply one transaction; return its commit version.

        `write_ranges` are kept for later commits to check against; `apply(conn, version)` writes
        the mutations.
        `snapshot` is the connection holding the transaction's read snapshot, if any: when it is
        still the newest state the commit happens on it (the fast path, docs/explanation/embedded-engine.md); the caller
        releases it afterwards either way. Raises ConflictError or TooOldError without writing
        anything.
        """
        # Never wait while holding a read snapshot: a checkpoint may be waiting for it to end while
        # holding the write lock we wait for. So the in-place path is only for a free lock.
        locked = self._commit_lock.acquire(blocking=False)
        try:
            version = None
            if locked and snapshot is not None and read_version is not None:
                version = self._commit_in_place(snapshot, read_version, write_ranges, apply)
            if version is None:
                if snapshot is not None and snapshot.in_transaction:
                    snapshot.execute("ROLLBACK")
                if not locked:
                    # Bounded too: threads queued here behind a commit that waits for another
                    # process's lock would otherwise wait one lock_wait() each, in turn.
                    locked = self._commit_lock.acquire(timeout=self.lock_wait())
                    if not locked:
                        raise StoreBusyError()
                version = self._commit_resolving(read_version, read_ranges, write_ranges, apply)
            self._commits_since_checkpoint += 1
            checkpoint = self._commits_since_checkpoint >= CHECKPOINT_EVERY
            if checkpoint:
                self._commits_since_checkpoint = 0
        finally:
            if locked:
                self._commit_lock.release()
        if checkpoint:
            self.checkpoint()
        return version

    def _commit_resolving(
        self,
        read_version: int | None,
        read_ranges: Sequence[Range],
        write_ranges: Sequence[Range],
        apply: CommitWork,
    ) -> int:
        """The full path: take the write lock, check conflicts against newer commits, apply."""
        conn = self.acquire()
        try:
            with immediate(conn):
                current, pruned_through = self._versions(conn)
                if read_version is not None:
                    if read_version < pruned_through:
                        raise TooOldError()
                    if read_ranges and self._conflicts(conn, read_version, read_ranges):
                        raise ConflictError()
                version = self._next_version(current)
                self._record(conn, version, write_ranges)
                apply(conn, version)
            return version
        finally:
            self.release(conn)

    def checkpoint(self) -> None:
        """Copy committed pages from the WAL into the database file and restart the WAL.

        With several threads or processes some read snapshot is nearly always open, and a
        checkpoint that waits for no one then never gets to restart the WAL, which grows without
        end (hundreds of MB per ten thousand commits). RESTART waits for the snapshots open now
        to end (they last one transaction: milliseconds), holding new commits back meanwhile, so
        it waits at most CHECKPOINT_WAIT and otherwise gives up until the next turn.
        """
        conn = self.acquire()
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(CHECKPOINT_WAIT * 1000)}")
            conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", None) not in _BUSY_CODES:
                raise
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(self.lock_wait() * 1000)}")
            self.release(conn)

    def _commit_in_place(
        self, conn: sqlite3.Connection, read_version: int, write_ranges: Sequence[Range], apply: CommitWork
    ) -> int | None:
        """Commit on the read snapshot if no one committed since; None when someone did."""
        version = self._next_version(read_version)
        now = time.time()
        try:
            # The first write asks SQLite for the write lock, which it grants a read transaction
            # only if that transaction's snapshot is the newest: then no commit is newer than
            # read_version, and there is nothing to conflict with.
            self._insert_history(conn, version, now, write_ranges)
        except sqlite3.OperationalError as error:
            if getattr(error, "sqlite_errorcode", None) in _BUSY_CODES:
                return None
            raise
        try:
            self._forget_old_history(conn, now)
            apply(conn, version)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return version

    @staticmethod
    def _next_version(current: int) -> int:
        return max(current + 1, int(time.time() * VERSIONS_PER_SECOND))

    def _record(self, conn: sqlite3.Connection, version: int, write_ranges: Sequence[Range]) -> None:
        """Keep this commit's write conflict ranges for the transactions that read before it."""
        now = time.time()
        self._insert_history(conn, version, now, write_ranges)
        self._forget_old_history(conn, now)

    @staticmethod
    def _insert_history(conn: sqlite3.Connection, version: int, now: float, write_ranges: Sequence[Range]) -> None:
        """The commit's row: its write ranges, and (as the newest row) the store's new version."""
        conn.execute(
            "INSERT INTO commit_ranges (version, committed_at, ranges) VALUES (?, ?, ?)",
            (version, now, pack_ranges(write_ranges)),
        )

    @staticmethod
    def _versions(conn: sqlite3.Connection) -> tuple[int, int]:
        """(the last commit version, the newest commit whose conflict history is forgotten)."""
        return cast(
            "tuple[int, int]",
            conn.execute(
                "SELECT (SELECT MAX(version) FROM commit_ranges),"
                " (SELECT value FROM meta WHERE name = 'pruned_through')"
            ).fetchone(),
        )

    @staticmethod
    def _conflicts(conn: sqlite3.Connection, read_version: int, reads: Sequence[Range]) -> bool:
        for (packed,) in conn.execute("SELECT ranges FROM commit_ranges WHERE version > ?", (read_version,)):
            writes = unpack_ranges(packed)
            if any(rb < we and wb < re for wb, we in writes for rb, re in reads):
                return True
        return False

    def _forget_old_history(self, conn: sqlite3.Connection, now: float) -> None:
        """Drop conflict history older than the age limit (checked about once a second).

        Every commit newer than a read version happened after that transaction's snapshot
        was taken, so if such a commit is old enough to be forgotten, the transaction is too
        old to commit: ``pruned_through`` records the newest forgotten commit for that check.
        What commits replaced goes with it, and once no client was handed a version for a while,
        the triggers that keep it go too (keep_past()).
        """
        if now < self._next_prune:
            return
        self._next_prune = now + 1.0
        pastlog.stop_if_idle(conn, int(now * 1_000_000))
        # Versions are never behind the clock of their commit (see _next_version), so a version
        # below the cutoff's was committed before it: found through the primary key, not a scan.
        cutoff = int((now - self.history_seconds) * VERSIONS_PER_SECOND)
        (newest,) = conn.execute("SELECT MAX(version) FROM commit_ranges WHERE version < ?", (cutoff,)).fetchone()
        if newest is None:
            return
        conn.execute("DELETE FROM commit_ranges WHERE version <= ?", (newest,))
        pastlog.forget(conn, newest)
        conn.execute("UPDATE meta SET value = ? WHERE name = 'pruned_through'", (newest,))

    @staticmethod
    def delete_range(conn: sqlite3.Connection, begin: bytes, end: bytes) -> None:
        conn.execute("DELETE FROM kv WHERE key >= ? AND key < ?", (begin, end))

    @staticmethod
    def put_many(conn: sqlite3.Connection, rows: Sequence[tuple[bytes, bytes]]) -> None:
        if rows:
            conn.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", rows)

    @staticmethod
    def apply_ops(conn: sqlite3.Connection, rows: Sequence[tuple[bytes, OpList]]) -> None:
        """Apply each key's atomic operations to its stored value, in SQLite, one statement.

        Reading the stored values first would cost a statement and a pass through Python: the
        operations run instead inside the write, through a function registered on the
        connection. None of them may clear the key (the column is NOT NULL): callers settle
        those (``compare_and_clear``) themselves.
        """
        if not rows:
            return
        conn.pending_ops = [ops for _key, ops in rows]  # type: ignore[attr-defined]
        try:
            conn.executemany(UPSERT_OPS, [(key, index, on_nothing(ops)) for index, (key, ops) in enumerate(rows)])
        finally:
            conn.pending_ops = []  # type: ignore[attr-defined]

    @staticmethod
    def delete_many(conn: sqlite3.Connection, keys: Sequence[bytes]) -> None:
        if keys:
            conn.executemany("DELETE FROM kv WHERE key = ?", ((key,) for key in keys))
