"""Reads at a read version set by hand (``set_read_version``) older than the store's.

A cluster's storage servers keep the last five seconds of versions, so a read at any version in
that window sees the database as it was then, keys changed or cleared since included. The store
keeps the newest value of each key in ``kv``; once a client has been handed a version
(``get_read_version``, ``get_committed_version``), commits also keep what they replace in
``kv_past`` for a few seconds (``pastlog``), so a key's value at that version is the one
the first commit after it replaced, or, if no commit changed it since, the newest.

At a version that history does not cover (one no client was handed here, say), only keys no commit
changed since can be read (their value is the same); a read that reaches a range changed since
fails with 1007 (transaction_too_old), the error a cluster gives for a version whose data it no
longer keeps. A version older than the conflict history fails with 1007 too; one newer than the
store's with 1009 (future_version), as a cluster's reads do once they have waited for it in vain.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from django_fdbqueue.fdbapi import ErrorCode, make_error

from . import pastlog
from .conflicts import merge_ranges
from .storage import Storage


@dataclass
class PastView:
    """How a transaction whose read version is ``version`` reads the current snapshot."""

    version: int
    #: Every read fails with this code (1007: history gone; 1009: a future version), if set.
    error: int | None = None
    #: Whether ``kv_past`` holds every change since ``version``; if not, the ranges commits newer
    #: than ``version`` wrote (sorted, merged), which cannot be read.
    kept: bool = True
    changed: list[tuple[bytes, bytes]] = field(default_factory=list)

    @classmethod
    def at(cls, storage: Storage, conn: sqlite3.Connection, version: int) -> "PastView":
        """The view of ``version`` from the snapshot open on ``conn``."""
        current, pruned_through = storage.versions(conn)
        if version > current:
            return cls(version, ErrorCode.FUTURE_VERSION)
        if version < pruned_through:
            return cls(version, ErrorCode.TRANSACTION_TOO_OLD)
        keeping_until, complete_from = pastlog.kept(conn)
        if keeping_until >= 0 and complete_from <= version:
            return cls(version)
        _current, _pruned, changed = storage.changes_since(conn, version)
        return cls(version, None, False, merge_ranges(changed))

    def check(self, begin: bytes, end: bytes) -> None:
        """Raise if a read of ``[begin, end)`` cannot be answered as of ``version``."""
        if self.error is not None:
            raise make_error(self.error)
        for changed_begin, changed_end in self.changed:
            if changed_begin >= end:
                break
            if begin < changed_end:
                raise make_error(ErrorCode.TRANSACTION_TOO_OLD)

    def value(self, conn: sqlite3.Connection, key: bytes, stored: bytes | None) -> bytes | None:
        """``key``'s value at ``version``, given its newest (``stored``)."""
        if not self.kept:
            return stored  # check() let the read through: no commit since changed it
        changed, then = pastlog.value_at(conn, key, self.version)
        return then if changed else stored

    def rows(
        self, conn: sqlite3.Connection, begin: bytes, end: bytes, reverse: bool, stored: Iterable[tuple[bytes, bytes]]
    ) -> Iterator[tuple[bytes, bytes]]:
        """The rows of [begin, end) at ``version``, in scan order, from the newest rows (``stored``,
        in the same order): a key changed since takes its value then, or is left out if it had none."""
        if not self.kept:  # check() let the read through: no commit since changed the range
            yield from stored
            return
        past = iter(pastlog.rows_at(conn, begin, end, self.version, reverse))
        pending = next(past, None)
        for key, value in stored:
            while pending is not None and (pending[0] > key if reverse else pending[0] < key):
                if pending[1] is not None:
                    yield pending[0], pending[1]
                pending = next(past, None)
            if pending is not None and pending[0] == key:
                if pending[1] is not None:
                    yield key, pending[1]
                pending = next(past, None)
            else:
                yield key, value
        while pending is not None:
            if pending[1] is not None:
                yield pending[0], pending[1]
            pending = next(past, None)
