"""Activity of each queue over time: counters per minute and per hour, for the admin's charts.

The operations count what they commit with atomic adds and never read (:func:`count`); the
gauges, depth and oldest age, are recorded with an atomic ``max`` when sampled (:func:`sample`,
and at most once a minute per process through :data:`SAMPLER`); :func:`series` reads the buckets
back for the charts. Buckets past :data:`MINUTES_KEPT` and :data:`HOURS_KEPT` are cleared blindly.

What each counter means, who samples the gauges and how long buckets are kept: the charts guide
(docs/howto/charts.md). The keys, and why two adds per commit: the data model page
(docs/explanation/data-model.md, "Activity buckets").
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import transactional

from ._internals import catalog as _catalog
from ._internals import checks, keys
from ._internals.catalog import counter_bytes, require
from ._internals.tally import (
    US_PER_MINUTE,
    ACKED,
    ACTIVITY,
    AGE,
    CLAIMED,
    COUNTERS,
    DEAD,
    DEPTH,
    FAILED,
    GAUGES,
    HOURS,
    HOURS_KEPT,
    MINUTES,
    MINUTES_KEPT,
    POPPED,
    PUSHED,
    count,
    forget_buckets,
    keys_now,
    space,
)
from .records import now_micros

logger = logging.getLogger("django_fdbqueue.service")

#: The spans a chart asks for: bucket size in seconds and how many buckets (the current one last).
SPANS = {"hour": (60, 60), "day": (3600, 24)}
#: At most this many queues in one overview read.
OVERVIEW_QUEUES_MAX = 200

__all__ = [
    "ACKED",
    "ACTIVITY",
    "AGE",
    "CLAIMED",
    "COUNTERS",
    "DEAD",
    "DEPTH",
    "FAILED",
    "GAUGES",
    "HOURS",
    "HOURS_KEPT",
    "MINUTES",
    "MINUTES_KEPT",
    "POPPED",
    "PUSHED",
    "SAMPLER",
    "SPANS",
    "Sampler",
    "check_span",
    "count",
    "forget_process_state",
    "now_micros",
    "sample",
    "series",
    "space",
]


def forget_process_state() -> None:
    """Drop the bucket keys this process built, and when it last sampled (tests that move the
    clock back use it)."""
    forget_buckets()
    SAMPLER.reset()


# --- gauges ------------------------------------------------------------------------------------


def _entries(tr: Any, names: list[str] | None) -> list[tuple[str, Any, keys.QueueKeys]]:
    """The named queues (each must exist), or the first OVERVIEW_QUEUES_MAX of the catalog."""
    if names is not None:
        return [(name, *require(tr, name)) for name in names]
    root_space = _catalog.root(tr)
    cat = keys.catalog(root_space)
    r = cat.range()
    out = []
    for kv in tr.get_range(r.start, r.stop, limit=OVERVIEW_QUEUES_MAX):
        (name,) = cat.unpack(bytes(kv.key))
        entry = _catalog.Entry.unpack(name, kv.value)
        out.append((name, entry, keys.queue_keys(root_space, entry.queue_id)))
    return out


def _gauges(tr: Any, entry: Any, qk: keys.QueueKeys, now_us: int) -> None:
    info = _catalog.info(tr.snapshot, entry, qk)  # a sample must not conflict with the traffic it measures
    age = 0
    if info.oldest_enqueued_at is not None:
        age = max(0, (now_us - int(info.oldest_enqueued_at.timestamp() * 1_000_000)) // 1_000_000)
    built = keys_now(tr, qk, now_us)
    for which, value in ((DEPTH, max(0, info.size)), (AGE, age)):
        param = counter_bytes(value)
        for key in built[which]:
            tr.max(key, param)


@transactional
def _sample(tr: Any, names: list[str] | None, now_us: int) -> None:
    for _name, entry, qk in _entries(tr, names):
        _gauges(tr, entry, qk, now_us)


def sample(db_or_tr: Any, name: str | None = None, *, now_us: int | None = None) -> None:
    """Record the depth and oldest age of a queue (or of all) in the current buckets (atomic max)."""
    if name is not None:
        checks.check_name(name)
    _sample(db_or_tr, None if name is None else [name], now_micros() if now_us is None else now_us)


class Sampler:
    """Sample every queue's gauges at most once per minute bucket, for long-running loops.

    :meth:`maybe_sample` is cheap to call as often as a loop turns (a comparison under a lock
    until the next minute starts) and never raises: a failed sample is logged and tried again
    :data:`RETRY_SECONDS` later, and the caller's loop goes on.
    """

    #: After a failed sample, the next try comes no sooner than this (seconds).
    RETRY_SECONDS = 5.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next_us: int | None = None  # no try before this moment; None: at the first call

    def reset(self) -> None:
        """Sample at the next call, whatever minute it is."""
        with self._lock:
            self._next_us = None

    def due(self, now_us: int | None = None) -> bool:
        """Whether :meth:`maybe_sample` would sample now."""
        now_us = now_micros() if now_us is None else now_us
        return self._next_us is None or now_us >= self._next_us

    def maybe_sample(self, db: Any, now_us: int | None = None) -> bool:
        """Sample all queues (:func:`sample`) unless this minute's sample is done; True if it sampled."""
        now_us = now_micros() if now_us is None else now_us
        with self._lock:
            if self._next_us is not None and now_us < self._next_us:
                return False
            # Claimed before sampling, so concurrent callers do not sample the same minute twice.
            self._next_us = (now_us // US_PER_MINUTE + 1) * US_PER_MINUTE
        try:
            sample(db, now_us=now_us)
            return True
        except Exception:  # noqa: BLE001 - a chart's gauge must never stop a worker or a scheduler
            logger.warning("Could not sample the queues' depth and age for the activity charts.", exc_info=True)
            with self._lock:
                self._next_us = min(self._next_us or 0, now_us + int(self.RETRY_SECONDS * 1_000_000))
            return False


#: The process's sampler, shared by its workers and scheduler: one sample per minute per process.
SAMPLER = Sampler()


# --- reading -------------------------------------------------------------------------------------


def check_span(span: object) -> str:
    if span not in SPANS:
        raise InvalidArgument(f"span must be one of {', '.join(SPANS)}; got {span!r}."[:200], field="span")
    return span


def _read_queue(tr: Any, qk: keys.QueueKeys, granularity: str, first: int, last: int) -> Any:
    sub = space(qk)[granularity]
    return tr.get_range(sub.pack((first,)), sub.pack((last + 1,)))


def _fold(rows: Any, sub: Any, first: int, length: int) -> dict[str, list[int | None]]:
    out: dict[str, list[int | None]] = {which: [0] * length for which in COUNTERS}
    out.update({which: [None] * length for which in GAUGES})
    for kv in rows:
        bucket, which = sub.unpack(bytes(kv.key))
        if which in out and 0 <= bucket - first < length:
            out[which][bucket - first] = int.from_bytes(bytes(kv.value), "little", signed=True)
    return out


def totals(per_queue: dict[str, dict[str, list[Any]]], length: int) -> dict[str, list[int | None]]:
    total: dict[str, list[int | None]] = {which: [0] * length for which in COUNTERS}
    total.update({which: [None] * length for which in GAUGES})
    for series in per_queue.values():
        for which, values in series.items():
            for i, value in enumerate(values):
                if value is None:
                    continue
                if which == AGE:
                    total[which][i] = max(total[which][i] or 0, value)
                else:
                    total[which][i] = (total[which][i] or 0) + value
    return total


@transactional
def _read(tr: Any, names: list[str] | None, span: str, now_us: int) -> dict[str, Any]:
    """Every queue's range read is sent before any is waited on."""
    step, length = SPANS[span]
    granularity = MINUTES if step == 60 else HOURS
    last = now_us // (step * 1_000_000)
    first = last - length + 1
    reads = [(name, qk, _read_queue(tr, qk, granularity, first, last)) for name, _e, qk in _entries(tr, names)]
    queues = {name: _fold(rows, space(qk)[granularity], first, length) for name, qk, rows in reads}
    return {
        "span": span,
        "step": step,
        "buckets": [(first + i) * step for i in range(length)],
        "counters": list(COUNTERS),
        "gauges": list(GAUGES),
        "queues": queues,
        "total": totals(queues, length),
    }


def series(db_or_tr: Any, name: str | None = None, *, span: str = "hour", now_us: int | None = None) -> dict[str, Any]:
    """The activity of one queue (``name``) or of all queues, over the last hour or day.

    Returns ``{"span", "step", "buckets", "counters", "gauges", "queues", "total"}``:
    ``buckets`` are the buckets' start times (Unix seconds, oldest first, the current one
    last), ``queues`` maps each queue's name to ``{counter or gauge: [value per bucket]}``
    (gauges ``None`` where nobody sampled), and ``total`` sums the queues (the age: their
    maximum).
    """
    check_span(span)
    if name is not None:
        checks.check_name(name)
    names = None if name is None else [name]
    return _read(db_or_tr, names, span, now_micros() if now_us is None else now_us)
