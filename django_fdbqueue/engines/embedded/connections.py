"""What each SQLite connection of the store carries: the SQL function that applies atomic
operations to stored values inside SQLite, and ``BEGIN IMMEDIATE`` as a block."""

from __future__ import annotations

import sqlite3
import weakref
from typing import Callable, Sequence

from . import atomic

# A key's atomic operations in order: (operation, parameter), as the write cache keeps them.
OpList = Sequence[tuple[Callable[[bytes | None, bytes], bytes | None], bytes]]
OPS_FUNCTION = "fdbqueue_atomic_ops"
# ?3 is the value for a key that is not there yet (computed beforehand: SQLite evaluates the
# VALUES row for every key, existing or not, and most keys exist).
UPSERT_OPS = (
    "INSERT INTO kv (key, value) VALUES (?1, ?3) ON CONFLICT (key) DO UPDATE SET value = fdbqueue_atomic_ops(value, ?2)"
)


class StoreBusyError(Exception):
    """Another process held the write lock past BUSY_TIMEOUT (becomes FoundationDB's 1031)."""


class OpsConnection(sqlite3.Connection):
    """A connection with a slot for the atomic operations its commit is applying (apply_ops)."""

    pending_ops: list[OpList] = []


def on_nothing(ops: OpList) -> bytes | None:
    """What `ops` leave where no value was. One add (a counter's) leaves its parameter."""
    if len(ops) == 1 and ops[0][0] is atomic.add:
        return ops[0][1]
    value = None
    for op, param in ops:
        value = op(value, param)
    return value


def ops_runner(ref: "weakref.ReferenceType[OpsConnection]") -> Callable[[bytes | None, int], bytes | None]:
    """The SQL function that applies the ``index``-th pending operation list to a stored value
    (a weak reference: the connection owns the function, not the other way round)."""

    def run(stored: bytes | None, index: int) -> bytes | None:
        value = stored
        for op, param in ref().pending_ops[index]:  # type: ignore[union-attr]
            value = op(value, param)
        return value

    return run


class immediate:
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

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
