"""Conflict ranges: coalescing them, and the transaction size they count towards.

The rules for which ranges a read or a write records are in ``transaction``'s docstring.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Sequence, TypeVar

from .keys import MAX_TRANSACTION_SIZE

# A range as the transaction records it: reads as lists, writes as tuples (each list sorts alone).
Bounds = TypeVar("Bounds", list[bytes], tuple[bytes, bytes])


def merge_ranges(ranges: Iterable[Bounds]) -> list[tuple[bytes, bytes]]:
    """Sort and coalesce overlapping or touching ranges (fewer rows of conflict history)."""
    merged: list[tuple[bytes, bytes]] = []
    for begin, end in sorted(r for r in ranges if r[0] < r[1]):
        if merged and begin <= merged[-1][1]:
            if end > merged[-1][1]:
                merged[-1] = (merged[-1][0], end)
        else:
            merged.append((begin, end))
    return merged


def transaction_size(mutations: int, reads: Iterable[list[bytes]], writes: Iterable[tuple[bytes, bytes]]) -> int:
    """Bytes as FoundationDB counts them: final mutations plus coalesced conflict ranges."""
    ranges = [*merge_ranges(reads), *merge_ranges(writes)]
    return mutations + sum(len(b) + len(e) for b, e in ranges)


def too_large(mutations: int, reads: Sequence[list[bytes]], writes: Sequence[tuple[bytes, bytes]]) -> bool:
    """Over the 10 MB limit? Coalescing ranges only shrinks them, so the unmerged sum (no
    sorting) settles nearly every transaction; only one near the limit pays for the merge."""
    upper_bound = mutations + sum(len(b) + len(e) for b, e in itertools.chain(reads, writes))
    return upper_bound > MAX_TRANSACTION_SIZE and transaction_size(mutations, reads, writes) > MAX_TRANSACTION_SIZE


def pack_ranges(ranges: Sequence[tuple[bytes, bytes]]) -> bytes:
    """Ranges as one blob: each key preceded by its 4-byte length."""
    parts: list[bytes] = []
    for begin, end in ranges:
        parts += (len(begin).to_bytes(4, "big"), begin, len(end).to_bytes(4, "big"), end)
    return b"".join(parts)


def unpack_ranges(packed: bytes) -> list[tuple[bytes, bytes]]:
    keys, at = [], 0
    while at < len(packed):
        size = int.from_bytes(packed[at : at + 4], "big")
        keys.append(packed[at + 4 : at + 4 + size])
        at += 4 + size
    return list(zip(keys[::2], keys[1::2]))
