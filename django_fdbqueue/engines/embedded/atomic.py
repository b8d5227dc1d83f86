"""FoundationDB's atomic mutations, computed on the embedded engine at commit time.

Each function takes the key's current value (None when absent) and the operation's parameter,
and returns the new value (None to clear). Integer operations are little-endian, with the
existing value truncated or zero-extended to the parameter's length, as in FoundationDB.
"""

from __future__ import annotations

from typing import Callable

MAX_VALUE_SIZE = 100_000


def _resize(existing: bytes | None, length: int) -> bytes:
    existing = existing or b""
    return existing[:length].ljust(length, b"\x00")


def add(existing: bytes | None, param: bytes) -> bytes:
    size = len(param)
    if existing is None or len(existing) != size:  # the counters' case (same width) skips this
        existing = _resize(existing, size)
    total = int.from_bytes(existing, "little") + int.from_bytes(param, "little")
    return (total & ((1 << (8 * size)) - 1)).to_bytes(size, "little") if size else b""


def _bitwise(combine: Callable[[int, int], int]) -> Callable[[bytes | None, bytes], bytes]:
    def operation(existing: bytes | None, param: bytes) -> bytes:
        current = _resize(existing, len(param))
        return bytes(combine(a, b) for a, b in zip(current, param))

    return operation


bit_or = _bitwise(lambda a, b: a | b)
bit_xor = _bitwise(lambda a, b: a ^ b)
_bit_and = _bitwise(lambda a, b: a & b)


def bit_and(existing: bytes | None, param: bytes) -> bytes:
    return param if existing is None else _bit_and(existing, param)


def max_(existing: bytes | None, param: bytes) -> bytes:
    if existing is None:
        return param
    current = _resize(existing, len(param))
    return max(current, param, key=lambda v: int.from_bytes(v, "little"))


def min_(existing: bytes | None, param: bytes) -> bytes:
    if existing is None:
        return param
    current = _resize(existing, len(param))
    return min(current, param, key=lambda v: int.from_bytes(v, "little"))


def byte_max(existing: bytes | None, param: bytes) -> bytes:
    return param if existing is None else max(existing, param)


def byte_min(existing: bytes | None, param: bytes) -> bytes:
    return param if existing is None else min(existing, param)


def compare_and_clear(existing: bytes | None, param: bytes) -> bytes | None:
    return None if existing == param else existing


def append_if_fits(existing: bytes | None, param: bytes) -> bytes:
    existing = existing or b""
    return existing + param if len(existing) + len(param) <= MAX_VALUE_SIZE else existing


OPERATIONS: dict[str, Callable[[bytes | None, bytes], bytes | None]] = {
    "add": add,
    "bit_and": bit_and,
    "bit_or": bit_or,
    "bit_xor": bit_xor,
    "max": max_,
    "min": min_,
    "byte_max": byte_max,
    "byte_min": byte_min,
    "compare_and_clear": compare_and_clear,
    "append_if_fits": append_if_fits,
}
