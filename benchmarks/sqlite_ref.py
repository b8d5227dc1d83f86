"""The raw SQLite reference: the simplest durable queue one could write on the same disk.

One table per queue, ``(seq, priority, value)`` with an index on ``(priority, seq)``, in WAL
mode with ``synchronous=NORMAL`` (the embedded engine's own durability), and one transaction per
operation: a push is ``BEGIN IMMEDIATE; INSERT; COMMIT``, a pop is ``BEGIN IMMEDIATE``, SELECT
the first row by ``(priority, seq)``, DELETE it, ``COMMIT``. What the embedded engine adds on top
(conflict detection, versionstamps, counters, the FoundationDB API) shows as the difference
between its rows and these. Every client has its own connection.

``seq`` is the rowid: larger than every row present when a row is inserted, so rows of one
priority come out in insertion order at both ends. SQLite reuses the rowid of a deleted last
row, so an item's identity for the exactly-once check is its stored value, which the bench makes
unique (every value it pushes has its own number).
"""

from __future__ import annotations

import json
import re
import sqlite3
from typing import Any, Hashable, Sequence

from django_fdbqueue.bench.targets import TargetSpec

__all__ = ["SqliteTarget", "SqliteClient", "open_target"]

# As long as the embedded engine waits for another process's write lock.
_BUSY_SECONDS = 60.0


def _connect(path: str) -> sqlite3.Connection:
    # isolation_level=None: the module opens no transaction of its own; we write BEGIN/COMMIT.
    conn = sqlite3.connect(path, timeout=_BUSY_SECONDS, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def _rollback(conn: sqlite3.Connection) -> None:
    # A failed COMMIT may or may not have ended the transaction; never mask the first error.
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def table_name(queue: str) -> str:
    """A queue's table: the name with everything but letters, digits and _ replaced."""
    return "q_" + re.sub(r"[^A-Za-z0-9_]", "_", queue)


class SqliteClient:
    """One connection working on one queue table."""

    def __init__(self, path: str, queue: str) -> None:
        self._conn = _connect(path)
        table = table_name(queue)
        self._insert = f"INSERT INTO {table} (priority, value) VALUES (?, ?)"
        self._first = {
            "min": f"SELECT seq, value FROM {table} ORDER BY priority, seq LIMIT 1",
            "max": (
                f"SELECT seq, value FROM {table} WHERE priority = (SELECT MAX(priority) FROM {table}) "
                "ORDER BY seq LIMIT 1"
            ),
        }
        self._delete = f"DELETE FROM {table} WHERE seq = ?"

    def push(self, value: Any, priority: int) -> None:
        encoded = json.dumps(value, separators=(",", ":")).encode()
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(self._insert, (priority, encoded))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def pop(self, end: str) -> Hashable | None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            row = conn.execute(self._first[end]).fetchone()
            if row is not None:
                conn.execute(self._delete, (row[0],))
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        if row is None:
            return None
        json.loads(row[1])  # the app's pop decodes the value too
        return row[1]

    def peek(self, end: str) -> Hashable | None:
        row = self._conn.execute(self._first[end]).fetchone()
        if row is None:
            return None
        json.loads(row[1])
        return row[1]

    def close(self) -> None:
        self._conn.close()


class SqliteTarget:
    """A SQLite file seen as a bench target; the strategy is ignored."""

    name = "sqlite"

    def __init__(self, path: str, location: str | None = None) -> None:
        self._path = path
        self._location = location
        self._conn = _connect(path)

    def spec(self) -> TargetSpec:
        return TargetSpec("sqlite", {"path": self._path}, opener=f"{__name__}:open_target")

    def prepare(self, queue: str, strategy: str | None) -> None:
        table = table_name(queue)
        self._conn.execute(f"DROP TABLE IF EXISTS {table}")
        self._conn.execute(
            f"CREATE TABLE {table} (seq INTEGER PRIMARY KEY, priority INTEGER NOT NULL, value BLOB NOT NULL)"
        )
        self._conn.execute(f"CREATE INDEX {table}_order ON {table} (priority, seq)")

    def fill(self, queue: str, strategy: str | None, batch: Sequence[tuple[Any, int]]) -> None:
        rows = [(priority, json.dumps(value, separators=(",", ":")).encode()) for value, priority in batch]
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(f"INSERT INTO {table_name(queue)} (priority, value) VALUES (?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

    def remaining(self, queue: str, strategy: str | None) -> int:
        return int(self._conn.execute(f"SELECT COUNT(*) FROM {table_name(queue)}").fetchone()[0])

    def drop(self, queue: str, strategy: str | None) -> None:
        self._conn.execute(f"DROP TABLE IF EXISTS {table_name(queue)}")

    def client(self, queue: str, strategy: str | None) -> SqliteClient:
        return SqliteClient(self._path, queue)

    def retry_counts(self) -> dict[int, int] | None:
        return None

    def server_memory_mib(self) -> float | None:
        return None

    def metadata(self) -> dict[str, Any]:
        return {
            "sqlite_version": sqlite3.sqlite_version,
            "journal_mode": "wal",
            "synchronous": "normal",
            "transactions": "one per push and per pop (BEGIN IMMEDIATE)",
            **({"location": self._location} if self._location else {}),
        }

    def close(self) -> None:
        self._conn.close()


def open_target(path: str) -> SqliteTarget:
    """A client process's view of the parent's file."""
    return SqliteTarget(path)
