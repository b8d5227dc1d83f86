"""Writes: the methods a transaction offers to change keys (sets, clears, atomic operations,
versionstamped keys and values, conflict ranges by hand), buffered in its write cache until commit.

Checks that FoundationDB makes at commit (key and value sizes) are deferred here too: the
binding's write calls return nothing, so their errors come from ``commit``.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import ErrorCode, make_error, strinc

from . import atomic
from .keys import LEGAL_KEY_END, MAX_KEY_SIZE, MAX_VALUE_SIZE, checked_range, is_selector, key_bytes, value_bytes
from .storage import METADATA_VERSION_KEY
from .versionstamps import landing_range, split_stamp_offset
from .write_cache import WriteCache

#: The special key space's prefix, and the module of it a clear may name (the tenant map).
SPECIAL_KEYS = b"\xff\xff"
TENANT_MAP = b"\xff\xff/management/tenant/map/"
TENANT_MAP_END = b"\xff\xff/management/tenant/map0"


class WriteMethods:
    """The write methods of ``transaction.Transaction`` (its only user), apart so each file reads
    in one sitting; the state they use is the transaction's own."""

    _cache: WriteCache
    _write_ranges: list[tuple[bytes, bytes]]
    _read_ranges: list[list[bytes]]
    _deferred_error: int | None
    _read_error: int | None
    _read_version: int | None
    _committed: bool
    _no_write_conflict_next: bool
    _unconflicted_keys: set[bytes]
    _special_writes: bool

    def _write_allowed(self) -> bool:
        raise NotImplementedError

    def _ensure_read_version(self) -> int:
        raise NotImplementedError

    def _resolve_selector(self, selector: Any, snapshot: bool) -> bytes:
        raise NotImplementedError

    # -- writes ----------------------------------------------------------------------
    def _check_key(self, key: bytes, system_ok: bool = False) -> None:
        """Key limits fail later, as in the binding (its writes return nothing): the client keeps
        the error, and every later read fails with it, and so does the commit."""
        if len(key) > MAX_KEY_SIZE:
            self._read_error = self._read_error or ErrorCode.KEY_TOO_LARGE
        elif key >= LEGAL_KEY_END and not (system_ok and key == METADATA_VERSION_KEY):
            self._read_error = self._read_error or ErrorCode.KEY_OUTSIDE_LEGAL_RANGE

    def _check_value(self, value: bytes) -> None:
        if len(value) > MAX_VALUE_SIZE:
            self._read_error = self._read_error or ErrorCode.VALUE_TOO_LARGE

    def _takes_write_conflict(self) -> bool:
        """False for the one write after ``set_next_write_no_write_conflict_range``."""
        if self._no_write_conflict_next:
            self._no_write_conflict_next = False
            return False
        return True

    def _write_point(self, key: bytes, system_ok: bool = False) -> bool:
        """Common checks of a one-key write; records its write conflict range once per key (none
        for a write after ``set_next_write_no_write_conflict_range``, until another write of it)."""
        if not self._write_allowed():
            if not self._committed:  # cancelled: the client still checks the key's limits
                self._check_key(key, system_ok)
            return False
        self._check_key(key, system_ok)
        first = key not in self._cache.entries
        if not self._takes_write_conflict():
            if first:
                self._unconflicted_keys.add(key)
        elif first or key in self._unconflicted_keys:
            self._unconflicted_keys.discard(key)
            self._write_ranges.append((key, key + b"\x00"))
        return True

    def set(self, key: Any, value: Any) -> None:
        key, value = key_bytes(key), value_bytes(value)
        allowed = self._write_point(key)
        if allowed or not self._committed:
            self._check_value(value)
        if allowed:
            self._cache.set(key, value)

    def clear(self, key: Any) -> None:
        if is_selector(key):
            key = self._resolve_selector(key, False)
        key = key_bytes(key)
        if self._write_point(key):
            self._cache.set(key, None)

    def clear_range(self, begin: Any, end: Any) -> None:
        begin = b"" if begin is None else begin
        end = LEGAL_KEY_END if end is None else end
        begin = self._resolve_selector(begin, False) if is_selector(begin) else key_bytes(begin)
        end = self._resolve_selector(end, False) if is_selector(end) else key_bytes(end)
        if begin > end:
            raise make_error(ErrorCode.INVERTED_RANGE)
        if begin.startswith(SPECIAL_KEYS):
            self._special_clear(begin, end)
            return
        if end > LEGAL_KEY_END:
            raise make_error(ErrorCode.KEY_OUTSIDE_LEGAL_RANGE)
        if begin == end or not self._write_allowed():
            return
        self._cache.clear_range(begin, end)
        unconflicted = {key for key in self._unconflicted_keys if begin <= key < end}
        self._unconflicted_keys -= unconflicted  # their later writes need no range of their own now
        if self._takes_write_conflict():
            self._write_ranges.append((begin, end))

    def _special_clear(self, begin: bytes, end: bytes) -> None:
        """A clear in the special key space: only the tenant map's, which is empty (the engine has
        no tenants), so clearing it changes nothing. Other modules are left out. The errors come
        later, as the client's: the reads after it fail, and the commit."""
        if not self._special_writes:
            self._read_error = self._read_error or ErrorCode.SPECIAL_KEYS_WRITE_DISABLED
        elif not (begin.startswith(TENANT_MAP) and end <= TENANT_MAP_END):
            self._read_error = self._read_error or ErrorCode.SPECIAL_KEYS_NO_MODULE_FOUND

    def clear_range_startswith(self, prefix: Any) -> None:
        prefix = key_bytes(prefix)
        self.clear_range(prefix, strinc(prefix))

    def __setitem__(self, key: Any, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: Any) -> None:
        if isinstance(key, slice):
            self.clear_range(key.start, key.stop)
        else:
            self.clear(key)

    def _atomic(self, name: str, key: Any, param: Any) -> None:
        key, param = key_bytes(key), value_bytes(param)
        allowed = self._write_point(key)
        if allowed or not self._committed:
            self._check_value(param)
        if allowed:
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

    def set_versionstamped_key(self, key: Any, value: Any) -> None:
        """Write `value` at `key` with its 10-byte placeholder replaced by the commit's stamp."""
        key, value = key_bytes(key), value_bytes(value)
        body, offset = split_stamp_offset(key)
        if not self._write_allowed():
            return
        self._check_key(body)
        self._check_value(value)
        landing = landing_range(body, offset, self._read_version)
        if self._takes_write_conflict():
            self._write_ranges.append(landing)
        self._cache.stamped_key(body, offset, value, landing)

    def set_versionstamped_value(self, key: Any, value: Any) -> None:
        """Write `value` with its placeholder replaced by the commit's stamp; unreadable until then."""
        key, value = key_bytes(key), value_bytes(value)
        body, offset = split_stamp_offset(value)
        # The one system key a versionstamped value may be written to without special options.
        if self._write_point(key, system_ok=True):
            self._check_value(body)
            self._cache.stamped_value(key, body, offset)

    # -- conflict ranges by hand -----------------------------------------------------
    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        """Like a write, it cannot fail at once in the binding: on a cancelled or committed
        transaction it is dropped, and the commit fails."""
        begin, end = checked_range(begin, end)
        if self._write_allowed() and self._read_error is None:
            self._ensure_read_version()
            self._read_ranges.append([begin, end])

    def add_read_conflict_key(self, key: Any) -> None:
        key = key_bytes(key)
        self.add_read_conflict_range(key, key + b"\x00")

    def add_write_conflict_range(self, begin: Any, end: Any) -> None:
        begin, end = checked_range(begin, end)
        if self._write_allowed():
            self._write_ranges.append((begin, end))

    def add_write_conflict_key(self, key: Any) -> None:
        key = key_bytes(key)
        self.add_write_conflict_range(key, key + b"\x00")
