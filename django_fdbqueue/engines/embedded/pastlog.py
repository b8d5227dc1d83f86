"""What recent commits replaced (``kv_past``), kept while a client may read at a version it was handed.

A key's value before the first commit newer than a version is its value at that version (NULL:
it had none). Triggers on ``kv`` record it for every write, whatever statement makes it, under the
newest history row's version, which each commit inserts before it writes. They exist only while a
client may read at a version it was handed (``Storage.keep_past``), so a store whose clients never
ask for one pays nothing. ``meta`` says until when they are kept (``keep_past_until``, in the
clock's microseconds; -1: not kept) and since which version ``kv_past`` holds every change without
a break (``past_complete_from``). How reads use it: ``past``.
"""

from __future__ import annotations

import sqlite3
from typing import cast

TABLE = """CREATE TABLE IF NOT EXISTS kv_past (
    version INTEGER NOT NULL, key BLOB NOT NULL, value BLOB, PRIMARY KEY (version, key)
) WITHOUT ROWID"""
# The NOT EXISTS keeps the first change of a key in a commit (an outer INSERT OR REPLACE would
# turn an OR IGNORE here into a replace).
_KEEP = """
INSERT INTO kv_past (key, version, value)
    SELECT {key}, latest.version, {old} FROM (SELECT MAX(version) AS version FROM commit_ranges) AS latest
    WHERE NOT EXISTS (SELECT 1 FROM kv_past WHERE key = {key} AND version = latest.version)"""
_TRIGGERS = {
    "kv_keep_inserted": ("INSERT", "NEW.key", "(SELECT value FROM kv WHERE key = NEW.key)"),
    "kv_keep_updated": ("UPDATE", "OLD.key", "OLD.value"),
    "kv_keep_deleted": ("DELETE", "OLD.key", "OLD.value"),
}
KEEP_TRIGGERS = tuple(
    f"CREATE TRIGGER IF NOT EXISTS {name} BEFORE {event} ON kv BEGIN{_KEEP.format(key=key, old=old)}; END"
    for name, (event, key, old) in _TRIGGERS.items()
)
DROP_TRIGGERS = tuple(f"DROP TRIGGER IF EXISTS {name}" for name in _TRIGGERS)


def kept(conn: sqlite3.Connection) -> tuple[int, int]:
    """(``keep_past_until``, ``past_complete_from``) as the snapshot open on ``conn`` sees them."""
    return cast(
        "tuple[int, int]",
        conn.execute(
            "SELECT (SELECT value FROM meta WHERE name = 'keep_past_until'),"
            " (SELECT value FROM meta WHERE name = 'past_complete_from')"
        ).fetchone(),
    )


def keep(conn: sqlite3.Connection, current: int, until: int) -> int:
    """Keep what commits replace until at least ``until`` (inside the caller's write transaction);
    the new ``keep_past_until``. Switched on now, ``kv_past`` is complete from ``current`` only."""
    keeping_until, complete_from = kept(conn)
    if keeping_until < 0:  # off: the commits so far kept nothing
        complete_from = current
        for statement in KEEP_TRIGGERS:
            conn.execute(statement)
    keeping_until = max(keeping_until, until)
    conn.execute("UPDATE meta SET value = ? WHERE name = 'keep_past_until'", (keeping_until,))
    conn.execute("UPDATE meta SET value = ? WHERE name = 'past_complete_from'", (complete_from,))
    return keeping_until


def stop_if_idle(conn: sqlite3.Connection, now_us: int) -> None:
    """Once no client was handed a version lately, drop the triggers and what they kept."""
    (keeping_until,) = conn.execute("SELECT value FROM meta WHERE name = 'keep_past_until'").fetchone()
    if 0 <= keeping_until < now_us:
        for statement in DROP_TRIGGERS:
            conn.execute(statement)
        conn.execute("UPDATE meta SET value = -1 WHERE name = 'keep_past_until'")
        conn.execute("DELETE FROM kv_past")  # reads fall back while keeping is off (past)


def forget(conn: sqlite3.Connection, newest: int) -> None:
    """What commits up to ``newest`` replaced goes with their conflict history."""
    conn.execute("DELETE FROM kv_past WHERE version <= ?", (newest,))


def value_at(conn: sqlite3.Connection, key: bytes, version: int) -> tuple[bool, bytes | None]:
    """(True, its value then) if a commit newer than ``version`` changed ``key``, else (False, None)."""
    row = conn.execute(
        "SELECT value FROM kv_past WHERE key = ? AND version > ? ORDER BY version LIMIT 1", (key, version)
    ).fetchone()
    return (False, None) if row is None else (True, row[0])


def rows_at(
    conn: sqlite3.Connection, begin: bytes, end: bytes, version: int, reverse: bool
) -> list[tuple[bytes, bytes | None]]:
    """The keys of [begin, end) commits newer than ``version`` changed, in scan order, each with
    its value then (None: it had none). SQLite gives a bare column the MIN()'s row's value."""
    order = "DESC" if reverse else ""
    rows = conn.execute(
        "SELECT key, value, MIN(version) FROM kv_past WHERE key >= ? AND key < ? AND version > ?"
        f" GROUP BY key ORDER BY key {order}",
        (begin, end, version),
    ).fetchall()
    return [(key, value) for key, value, _version in rows]
