"""The activity counters' keys, and the atomic adds the operations make to them (no read).

The public side, which reads the counters and samples the gauges, is ``service.activity``; this
is the side every operation writes. The data model and why it costs the hot path nothing are on
the docs' data model page (docs/explanation/data-model.md, "Activity buckets").
"""

from __future__ import annotations

import threading
from typing import Any

from . import keys
from .catalog import counter_bytes

ACTIVITY = "v"
MINUTES = "m"
HOURS = "h"

PUSHED = "pushed"
POPPED = "popped"
CLAIMED = "claimed"
ACKED = "acked"
FAILED = "failed"
DEAD = "dead"
COUNTERS = (PUSHED, POPPED, CLAIMED, ACKED, FAILED, DEAD)
DEPTH = "depth"
AGE = "age"
GAUGES = (DEPTH, AGE)

#: Minute buckets kept (two hours), and hour buckets kept (two days).
MINUTES_KEPT = 120
HOURS_KEPT = 48

_ONE = counter_bytes(1)
US_PER_MINUTE = 60_000_000
_MINUTES_PER_HOUR = 60
_CURRENT_MAX = 4096
# Per queue: (minute, {counter: (minute key, hour key)}) of the bucket this process writes now.
_current: dict[keys.QueueKeys, tuple[int, dict[str, tuple[bytes, bytes]]]] = {}
_lock = threading.Lock()


def space(qk: keys.QueueKeys) -> Any:
    """The queue's activity subspace."""
    return qk.space[ACTIVITY]


def _start_minute(tr: Any, qk: keys.QueueKeys, minute: int) -> dict[str, tuple[bytes, bytes]]:
    """Build this minute's keys for ``qk`` and blindly clear the buckets past retention."""
    act = space(qk)
    hour = minute // _MINUTES_PER_HOUR
    minutes, hours = act[MINUTES], act[HOURS]
    built = {which: (minutes.pack((minute, which)), hours.pack((hour, which))) for which in COUNTERS + GAUGES}
    tr.clear_range(minutes.range().start, minutes.pack((minute - MINUTES_KEPT,)))
    tr.clear_range(hours.range().start, hours.pack((hour - HOURS_KEPT,)))
    with _lock:
        if len(_current) >= _CURRENT_MAX:
            _current.clear()
        _current[qk] = (minute, built)
    return built


def keys_now(tr: Any, qk: keys.QueueKeys, now_us: int) -> dict[str, tuple[bytes, bytes]]:
    minute = now_us // US_PER_MINUTE
    state = _current.get(qk)
    if state is not None and state[0] == minute:
        return state[1]
    return _start_minute(tr, qk, minute)


def count(tr: Any, qk: keys.QueueKeys, now_us: int, which: str, n: int = 1) -> None:
    """Add ``n`` to counter ``which`` of the buckets holding ``now_us``: two atomic adds, no read."""
    if n <= 0:
        return
    minute_key, hour_key = keys_now(tr, qk, now_us)[which]
    param = _ONE if n == 1 else counter_bytes(n)
    tr.add(minute_key, param)
    tr.add(hour_key, param)


def forget_buckets() -> None:
    """Drop the bucket keys this process built (tests that move the clock back use it)."""
    with _lock:
        _current.clear()
