"""Keys and values as the binding takes them: coercion to bytes, size limits, the legal range."""

from __future__ import annotations

from typing import Any

from django_fdbqueue.fdbapi import ErrorCode, make_error

MAX_KEY_SIZE = 10_000
MAX_VALUE_SIZE = 100_000
MAX_TRANSACTION_SIZE = 10_000_000
LEGAL_KEY_END = b"\xff"


def key_bytes(key: Any) -> bytes:
    if hasattr(key, "as_foundationdb_key"):
        key = key.as_foundationdb_key()
    if not isinstance(key, bytes):
        raise TypeError("Key must be of type bytes, not %s" % type(key).__name__)
    return bytes(key)


def value_bytes(value: Any) -> bytes:
    if hasattr(value, "as_foundationdb_value"):
        value = value.as_foundationdb_value()
    if not isinstance(value, bytes):
        raise TypeError("Value must be of type bytes, not %s" % type(value).__name__)
    return bytes(value)


def checked_range(begin: Any, end: Any) -> tuple[bytes, bytes]:
    """A conflict range's keys; an inverted range is an error, as in the binding (2005)."""
    begin, end = key_bytes(begin), key_bytes(end)
    if begin > end:
        raise make_error(ErrorCode.INVERTED_RANGE)
    return begin, end


def is_selector(obj: Any) -> bool:
    return hasattr(obj, "or_equal") and hasattr(obj, "offset") and hasattr(obj, "key")
