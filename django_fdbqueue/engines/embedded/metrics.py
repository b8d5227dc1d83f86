"""Storage metrics a transaction can ask for: the estimated size of a range, and its split points.

On a cluster these come from the storage servers' byte samples, of committed data only (a
transaction's own writes are not in them), and are estimates. Here they are exact sums over the
rows stored now, which a cluster's estimate approximates; no read version is taken for them.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Iterator

from django_fdbqueue.fdbapi import ErrorCode, make_error

from .futures import Future
from .keys import key_bytes
from .storage import Storage

_SIZES = "SELECT key, LENGTH(key) + LENGTH(value) FROM kv WHERE key >= ? AND key < ? ORDER BY key"


def checked_bounds(begin: object, end: object) -> tuple[bytes, bytes]:
    """The range's keys; an inverted range fails with 2005 (inverted_range), as on a cluster."""
    begin_key, end_key = key_bytes(begin), key_bytes(end)
    if begin_key > end_key:
        raise make_error(ErrorCode.INVERTED_RANGE)
    return begin_key, end_key


def _row_sizes(conn: sqlite3.Connection, begin: bytes, end: bytes) -> Iterator[tuple[bytes, int]]:
    yield from conn.execute(_SIZES, (begin, end))


def estimated_range_size(storage: Storage, begin: bytes, end: bytes) -> int:
    """Bytes of keys and values stored in ``[begin, end)``."""
    conn = storage.acquire()
    try:
        (total,) = conn.execute(
            "SELECT COALESCE(SUM(LENGTH(key) + LENGTH(value)), 0) FROM kv WHERE key >= ? AND key < ?", (begin, end)
        ).fetchone()
        return int(total)
    finally:
        storage.release(conn)


def range_split_points(storage: Storage, begin: bytes, end: bytes, chunk_size: int) -> list[bytes]:
    """Keys that cut ``[begin, end)`` into chunks of about ``chunk_size`` bytes, ``begin`` and ``end``
    included (the client's answer has both ends too)."""
    points = [begin]
    conn = storage.acquire()
    try:
        filled = 0
        for key, size in _row_sizes(conn, begin, end):
            if filled >= chunk_size and key > points[-1]:
                points.append(key)
                filled = 0
            filled += size
    finally:
        storage.release(conn)
    if end > points[-1]:
        points.append(end)
    return points


class MetricsMethods:
    """The storage metrics methods of ``transaction.Transaction`` (its only user)."""

    _storage: Storage

    def _check_readable(self) -> None:
        raise NotImplementedError

    def get_estimated_range_size_bytes(self, begin_key: Any, end_key: Any) -> Future:
        """A future of the bytes stored in the range (a cluster's is a sampled estimate of it)."""
        self._check_readable()
        begin, end = checked_bounds(begin_key, end_key)
        return Future(estimated_range_size(self._storage, begin, end))

    def get_range_split_points(self, begin_key: Any, end_key: Any, chunk_size: int) -> Future:
        """A future of the keys that cut the range into chunks of about ``chunk_size`` bytes."""
        if begin_key is None or end_key is None or chunk_size <= 0:
            raise ValueError("Invalid begin key, end key or chunk size")
        self._check_readable()
        begin, end = checked_bounds(begin_key, end_key)
        return Future(range_split_points(self._storage, begin, end, chunk_size))
