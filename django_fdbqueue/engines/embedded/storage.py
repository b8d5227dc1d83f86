"""The embedded engine's SQLite file: ordered key-values, commit versions and conflict history.

Tables (one file, WAL mode, safe for many threads and processes on one machine):

- ``kv(key, value)``: the key-value store. ``WITHOUT ROWID`` with a BLOB primary key, so rows
  are kept in memcmp order, the same order as FoundationDB's keys.
- ``meta(name, value)``: ``version``, the last commit version, and ``pruned_through``, the
  newest commit whose conflict history has been forgotten: a read version older than that
  predates a commit we can no longer check against, so it gets ``transaction_too_old``.
- ``write_ranges(version, committed_at, begin, end)``: the write conflict ranges of recent
  commits, kept for a little longer than the transaction age limit.

A transaction's reads run inside one SQLite read transaction, which WAL keeps at a fixed
snapshot across processes; the ``version`` it sees there is the FoundationDB read version.
Commits take SQLite's write lock (``BEGIN IMMEDIATE``), check the committer's read conflict
ranges against ``write_ranges`` newer than its read version (FoundationDB's resolver), apply
the mutations, record the new write ranges and bump the version, all in one SQLite
transaction: a commit is atomic and durable once ``COMMIT`` returns, even if the process is
killed a moment later.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Callable, Iterator, Sequence

SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS write_ranges (
    version INTEGER NOT NULL, committed_at REAL NOT NULL, begin BLOB NOT NULL, "end" BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS write_ranges_by_version ON write_ranges (version);
INSERT OR IGNORE INTO meta (name, value) VALUES ('version', 0), ('pruned_through', 0);
"""

# How long SQLite waits for another process's write lock before giving up (seconds).
BUSY_TIMEOUT = 60.0
# Versions advance by about a million a second, as FoundationDB's do.
VERSIONS_PER_SECOND = 1_000_000

Range = tuple[bytes, bytes]
# Applies a transaction's mutations at a commit version; returns its write conflict ranges.
CommitWork = Callable[[sqlite3.Connection, int], list[Range]]


class ConflictError(Exception):
    """A read conflict range met a newer commit's write (becomes FoundationDB's 1020)."""


class TooOldError(Exception):
    """The read version predates the kept conflict history (becomes FoundationDB's 1007)."""


class StoreBusyError(Exception):
    """Another process held the write lock past BUSY_TIMEOUT (becomes FoundationDB's 1031)."""


class Storage:
    """One SQLite file and a pool of connections to it, shared by a database's transactions."""

    def __init__(self, path: str, *, history_seconds: float = 5.0) -> None:
        self.path = path
        # Conflict history outlives the transaction age limit by a margin, so a transaction
        # young enough to commit always finds every commit made since its snapshot.
        self.history_seconds = history_seconds + 1.0
        self._next_prune = 0.0
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self._pool: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        # Commits from this process queue here rather than in SQLite's sleeping busy handler.
        self._commit_lock = threading.Lock()
        self._closed = False
        conn = self._connect()
        try:
            conn.executescript("BEGIN IMMEDIATE;" + SCHEMA + "COMMIT;")
        finally:
            self.release(conn)

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=BUSY_TIMEOUT, isolation_level=None, check_same_thread=False
        )
        conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a commit survives the process being killed; only a power cut
        # or OS crash could lose the last commits.
        conn.execute("PRAGMA synchronous=NORMAL")
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
    def begin_snapshot(self, conn: sqlite3.Connection) -> int:
        """Open a read transaction on `conn` and return the read version it sees."""
        conn.execute("BEGIN")
        return conn.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()[0]

    def current_version(self) -> int:
        """The last commit version, read outside any snapshot (for the watcher's polling)."""
        conn = self.acquire()
        try:
            return self._meta(conn, "version")
        finally:
            self.release(conn)

    @staticmethod
    def get(conn: sqlite3.Connection, key: bytes) -> bytes | None:
        row = conn.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    @staticmethod
    def scan(
        conn: sqlite3.Connection, begin: bytes, end: bytes, reverse: bool, batch: int
    ) -> Iterator[tuple[bytes, bytes]]:
        """Rows of [begin, end) in key order (or reverse), fetched `batch` rows at a time."""
        while begin < end:
            if reverse:
                rows = conn.execute(
                    "SELECT key, value FROM kv WHERE key >= ? AND key < ? "
                    "ORDER BY key DESC LIMIT ?",
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
        apply: CommitWork,
    ) -> int:
        """Resolve conflicts and apply one transaction; return its commit version.

        `apply(conn, version)` writes the mutations and returns the write conflict ranges.
        Raises ConflictError or TooOldError without writing anything.
        """
        conn = self.acquire()
        try:
            with self._commit_lock, _immediate(conn):
                current = self._meta(conn, "version")
                if read_version is not None:
                    if read_version < self._meta(conn, "pruned_through"):
                        raise TooOldError()
                    if read_ranges and self._conflicts(conn, read_version, read_ranges):
                        raise ConflictError()
                version = max(current + 1, int(time.time() * VERSIONS_PER_SECOND))
                write_ranges = apply(conn, version)
                now = time.time()
                conn.executemany(
                    'INSERT INTO write_ranges (version, committed_at, begin, "end") '
                    "VALUES (?, ?, ?, ?)",
                    ((version, now, b, e) for b, e in write_ranges),
                )
                conn.execute("UPDATE meta SET value = ? WHERE name = 'version'", (version,))
                self._forget_old_history(conn, now)
            return version
        finally:
            self.release(conn)

    @staticmethod
    def _meta(conn: sqlite3.Connection, name: str) -> int:
        return conn.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()[0]

    @staticmethod
    def _conflicts(conn: sqlite3.Connection, read_version: int, reads: Sequence[Range]) -> bool:
        writes = conn.execute(
            'SELECT begin, "end" FROM write_ranges WHERE version > ?', (read_version,)
        ).fetchall()
        return any(rb < we and wb < re for wb, we in writes for rb, re in reads)

    def _forget_old_history(self, conn: sqlite3.Connection, now: float) -> None:
        """Drop conflict history older than the age limit (checked about once a second).

        Every commit newer than a read version happened after that transaction's snapshot
        was taken, so if such a commit is old enough to be forgotten, the transaction is too
        old to commit: ``pruned_through`` records the newest forgotten commit for that check.
        """
        if now < self._next_prune:
            return
        self._next_prune = now + 1.0
        cutoff = now - self.history_seconds
        (newest,) = conn.execute(
            "SELECT MAX(version) FROM write_ranges WHERE committed_at < ?", (cutoff,)
        ).fetchone()
        if newest is None:
            return
        conn.execute("DELETE FROM write_ranges WHERE version <= ?", (newest,))
        conn.execute("UPDATE meta SET value = ? WHERE name = 'pruned_through'", (newest,))

    @staticmethod
    def put(conn: sqlite3.Connection, key: bytes, value: bytes) -> None:
        conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (key, value))

    @staticmethod
    def delete_range(conn: sqlite3.Connection, begin: bytes, end: bytes) -> None:
        conn.execute("DELETE FROM kv WHERE key >= ? AND key < ?", (begin, end))

    @staticmethod
    def delete(conn: sqlite3.Connection, key: bytes) -> None:
        conn.execute("DELETE FROM kv WHERE key = ?", (key,))

    @staticmethod
    def put_many(conn: sqlite3.Connection, rows: Sequence[tuple[bytes, bytes]]) -> None:
        if rows:
            conn.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", rows)

    @staticmethod
    def delete_many(conn: sqlite3.Connection, keys: Sequence[bytes]) -> None:
        if keys:
            conn.executemany("DELETE FROM kv WHERE key = ?", ((key,) for key in keys))


class _immediate:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (or ``ROLLBACK`` on error) on one connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> sqlite3.Connection:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as error:
            if "locked" in str(error) or "busy" in str(error):
                raise StoreBusyError() from error
            raise
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")

