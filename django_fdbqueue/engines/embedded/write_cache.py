"""A transaction's own writes: what they say about each key, and what the commit applies."""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any, Callable

from django_fdbqueue.fdbapi import ErrorCode, make_error

from .atomic import compare_and_clear
from .versionstamps import with_stamp

if TYPE_CHECKING:
    import sqlite3

    from .storage import Storage


class WriteCache:
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
        # Where versionstamped keys may land: disjoint ranges, sorted, as starts and ends, so a
        # read asks with a bisection (a transaction of 10,000 pushes asks after each of them).
        self._landing_starts: list[bytes] = []
        self._landing_ends: list[bytes] = []
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
        self._add_landing(*landing)

    def _add_landing(self, begin: bytes, end: bytes) -> None:
        """Add [begin, end) to the landing ranges, merged with those it overlaps or touches."""
        if begin >= end:
            return
        starts, ends = self._landing_starts, self._landing_ends
        lo, hi = bisect.bisect_left(ends, begin), bisect.bisect_right(starts, end)
        if lo < hi:
            begin, end = min(begin, starts[lo]), max(end, ends[hi - 1])
        starts[lo:hi], ends[lo:hi] = [begin], [end]

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
        if key in self.unreadable_keys:
            return True
        index = bisect.bisect_right(self._landing_starts, key) - 1
        return index >= 0 and key < self._landing_ends[index]

    def unreadable_boundary(self, begin: bytes, end: bytes, reverse: bool) -> bytes | None:
        """Where a scan of [begin, end) first meets an unreadable range (None: it never does)."""
        lo = bisect.bisect_right(self._landing_ends, begin)  # the first range ending after begin
        hi = bisect.bisect_left(self._landing_starts, end)  # the first range starting at end or later
        if lo >= hi:
            return None
        if reverse:
            return min(self._landing_ends[hi - 1], end)
        return max(self._landing_starts[lo], begin)

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
            known: bytes | None = payload
            return known
        if kind == self.STAMPED:  # callers check unreadable() first; this is the last line of defence
            raise make_error(ErrorCode.ACCESSED_UNREADABLE)
        value = stored
        for op, param in payload:
            value = op(value, param)
        return value

    @property
    def empty(self) -> bool:
        return not self.entries and not self.range_mutations

    def apply(self, storage: "Storage", conn: "sqlite3.Connection", stamp: bytes) -> None:
        """Write the final mutations, the commit's versionstamp filled in (inside the storage's commit).

        Range mutations first, in the order they were made; then one write per key, since the
        cache already folds every later write over earlier ones. Consecutive writes go to SQLite
        as one statement: a later write of the same key (a point write after a versionstamped
        key landed there) still wins, as it comes later in the batch.
        """
        puts: list[tuple[bytes, bytes]] = []
        for mutation in self.range_mutations:
            if mutation[0] == "clear":
                storage.put_many(conn, puts)  # what came before the clear goes before it
                puts = []
                storage.delete_range(conn, mutation[1], mutation[2])
            else:
                _, body, offset, value = mutation
                puts.append((with_stamp(body, offset, stamp), value))
        deletes: list[bytes] = []
        ops: list[tuple[bytes, Any]] = []
        settled: list[bytes] = []  # operations that may clear their key: settled from the stored value
        for key in self.keys:
            kind, payload = self.entries[key]
            if kind == self.OPS and any(op is compare_and_clear for op, _param in payload):
                settled.append(key)
            elif kind == self.OPS:
                ops.append((key, payload))
            else:
                self._sort(key, self._final_value(key, None, stamp), puts, deletes)
        storage.put_many(conn, puts)
        storage.apply_ops(conn, ops)  # after the puts: a versionstamped key may have landed there
        stored = storage.get_many(conn, settled) if settled else {}
        puts = []
        for key in settled:
            self._sort(key, self._final_value(key, stored.get(key), stamp), puts, deletes)
        storage.put_many(conn, puts)
        storage.delete_many(conn, deletes)

    @staticmethod
    def _sort(key: bytes, value: bytes | None, puts: list[tuple[bytes, bytes]], deletes: list[bytes]) -> None:
        """A key's final value goes to the writes, or (None) to the deletes."""
        if value is None:
            deletes.append(key)
        else:
            puts.append((key, value))

    def _final_value(self, key: bytes, stored: bytes | None, stamp: bytes) -> bytes | None:
        kind, payload = self.entries[key]
        if kind == self.KNOWN:
            known: bytes | None = payload
            return known
        if kind == self.OPS:
            value = stored
            ops = payload
        else:  # a versionstamped value, then the atomic ops written after it
            body, offset, ops = payload
            value = with_stamp(body, offset, stamp)
        for op, param in ops:
            value = op(value, param)
        return value
