"""The embedded engine's write cache: where versionstamped keys may land, asked by bisection.

A read in a transaction must fail (1036) where a versionstamped key of its own may land. The
landing ranges are kept merged and sorted, so a transaction of many pushes with reads between
them (a workflow starting 10,000 members, one push per limit key) costs a bisection per read,
not a scan of every push so far.
"""

from __future__ import annotations

import random
import time

from django_fdbqueue.engines.embedded.write_cache import WriteCache


def _naive(ranges: list[tuple[bytes, bytes]], key: bytes) -> bool:
    return any(b <= key < e for b, e in ranges)


def _naive_boundary(ranges: list[tuple[bytes, bytes]], begin: bytes, end: bytes, reverse: bool) -> bytes | None:
    hits = [(b, e) for b, e in ranges if b < end and e > begin]
    if not hits:
        return None
    return max(min(e, end) for _b, e in hits) if reverse else min(max(b, begin) for b, _e in hits)


def _key(rng: random.Random) -> bytes:
    return bytes(rng.randrange(6) for _ in range(rng.randrange(1, 4)))


def test_the_merged_ranges_answer_as_a_scan_of_every_range_would():
    rng = random.Random(7)
    for _round in range(200):
        cache, ranges = WriteCache(), []
        for _ in range(rng.randrange(1, 12)):
            begin, end = sorted((_key(rng), _key(rng)))
            end += b"\x00"  # never empty, as a landing range is (versionstamps.landing_range)
            ranges.append((begin, end))
            cache.stamped_key(b"body", 0, b"", (begin, end))
            for _ in range(10):
                probe = _key(rng)
                assert cache.unreadable(probe) == _naive(ranges, probe), (ranges, probe)
                low, high = sorted((_key(rng), _key(rng)))
                for reverse in (False, True):
                    expected = _naive_boundary(ranges, low, high, reverse)
                    assert cache.unreadable_boundary(low, high, reverse) == expected, (ranges, low, high, reverse)


def test_a_read_after_each_of_many_stamped_keys_stays_cheap():
    cache = WriteCache()
    count = 20_000
    started = time.monotonic()
    for n in range(count):
        begin = b"queue/" + n.to_bytes(4, "big")
        cache.stamped_key(b"body", 0, b"", (begin, begin + b"\xff"))
        assert not cache.unreadable(b"catalog/entry")
    # A scan of every range per read would be 200 million comparisons here: minutes, not seconds.
    assert time.monotonic() - started < 10
