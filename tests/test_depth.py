"""What a peek, a pop or a claim costs does not grow with the queue's depth.

Each operation runs in a transaction that records its work: every read it sends (range reads
with their limit, direction and the rows and bytes they returned, point reads), the read
conflict ranges it adds, and the transaction's approximate size (its mutations and conflict
ranges, as the store counts them). The same operation is measured on a queue of 10 items and
again once it holds 10,000 (ready ones, or ready ones behind 10,000 delayed ones, which the due
read must not walk): the records must be equal. Counting work rather than timing it keeps the
test deterministic on a busy machine; on a cluster a range read without a limit, or one whose
limit grew with the queue, would fetch more rows and show here.

The bench's depth rows on a cluster are timed once the storage servers have made the fill
durable: while they absorb a large fill every request is slower, whatever the queue's depth.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest

from django_fdbqueue import service
from django_fdbqueue.service._internals import leases

SHALLOW, DEEP = 10, 10_000
QUEUE = "depth"


class _Rows:
    """A range read's rows, counted (rows and bytes) as the service iterates them."""

    def __init__(self, rows: Any, record: list) -> None:
        self._rows, self._record = rows, record

    def __iter__(self):
        for kv in self._rows:
            self._record[-2] += 1
            self._record[-1] += len(kv.key) + len(kv.value)
            yield kv


class _Reads:
    """Records every read made through it into ``work`` (shared with its snapshot view)."""

    def __init__(self, tr: Any, work: list, tag: str) -> None:
        self._tr, self._work, self._tag = tr, work, tag

    def get_range(self, begin: Any, end: Any, limit: int = 0, reverse: bool = False, **kwargs: Any) -> _Rows:
        record = [self._tag + "range read", limit, reverse, 0, 0]  # ..., rows, bytes
        self._work.append(record)
        return _Rows(self._tr.get_range(begin, end, limit=limit, reverse=reverse, **kwargs), record)

    def __getitem__(self, key: Any) -> Any:
        self._work.append([self._tag + "get"])
        return self._tr[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        self._tr[key] = value

    def __delitem__(self, key: Any) -> None:
        del self._tr[key]

    def add_read_conflict_range(self, begin: Any, end: Any) -> None:
        self._work.append(["conflict range"])
        self._tr.add_read_conflict_range(begin, end)

    def add_read_conflict_key(self, key: Any) -> None:
        self._work.append(["conflict key"])
        self._tr.add_read_conflict_key(key)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tr, name)


class WorkRecorder(_Reads):
    """A transaction of either engine whose reads are recorded (the rest passes through)."""

    def __init__(self, tr: Any) -> None:
        self.work: list[list] = []
        super().__init__(tr, self.work, "")
        self.snapshot = _Reads(tr.snapshot, self.work, "snapshot ")

    def finish(self) -> list[list]:
        """The work done, with the transaction's approximate size; then commit."""
        size = self._tr.get_approximate_size().wait()
        self._tr.commit().wait()
        return [*self.work, ["approximate size", size]]


OPERATIONS: dict[str, Callable[[Any], Any]] = {
    "peek min": lambda tr: service.peek(tr, QUEUE, "min"),
    "peek max": lambda tr: service.peek(tr, QUEUE, "max"),
    "pop min": lambda tr: service.pop(tr, QUEUE, "min"),
    "pop max": lambda tr: service.pop(tr, QUEUE, "max"),
    "claim": lambda tr: service.claim(tr, QUEUE, lease=3600),
}


class _FixedLeaseTokens:
    """``os`` for ``service.leases``, but with lease tokens of one value: a random token holding a
    zero byte packs a byte longer (the tuple layer escapes it), which would change the size."""

    def urandom(self, count: int) -> bytes:
        return b"\x01" * count

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def work_of(db: Any, operation: str) -> list[list]:
    tr = WorkRecorder(db.create_transaction())
    assert OPERATIONS[operation](tr) is not None
    return tr.finish()


def fill(db: Any, count: int, *, delay: float | None = None) -> None:
    """``count`` items of one size at priorities 0-4 (``push_many`` splits them into transactions)."""
    service.push_many(db, QUEUE, [("v", n % 5) for n in range(count)], delay=delay)


@pytest.mark.parametrize("behind", ["ready", "delayed"])
@pytest.mark.parametrize("operation", list(OPERATIONS))
def test_an_operation_does_the_same_work_on_a_deep_queue_as_on_a_shallow_one(
    fdbqueue_db, monkeypatch, operation, behind
):
    monkeypatch.setattr(leases, "os", _FixedLeaseTokens())
    service.create_queue(fdbqueue_db, QUEUE, kind="priority")
    fill(fdbqueue_db, SHALLOW)
    service.peek(fdbqueue_db, QUEUE)  # the catalog entry is cached for both measurements
    shallow = work_of(fdbqueue_db, operation)
    fill(fdbqueue_db, DEEP, delay=None if behind == "ready" else 3600)
    info = service.get_queue(fdbqueue_db, QUEUE)
    assert info.size + info.delayed >= DEEP
    deep = work_of(fdbqueue_db, operation)
    assert deep == shallow
    ranges = [record for record in shallow if record[0].endswith("range read")]
    assert ranges and all(0 < record[1] <= 100 for record in ranges), shallow  # every range read bounded


# -- the bench's depth rows: timed once the store has absorbed the fill ------------------------------


class _Clock:
    """Seconds that pass only when the bench pauses between two polls."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def pause(self, seconds: float) -> None:
        self.now += seconds


def _polls(answers: list[int | None], log: list[str] | None = None) -> Callable[[], int | None]:
    """A probe of the store that answers ``answers`` in turn (versions not yet durable)."""
    behind = iter(answers)

    def measure() -> int | None:
        answer = next(behind)
        if log is not None:
            log.append(f"behind {answer}")
        return answer

    return measure


def test_settling_waits_until_the_storage_servers_have_made_the_fill_durable():
    """Right after a million items a cluster's storage server still had 250 MB to make durable, and
    a peek took 10 ms against 0.2 ms once it had: a row timed then measures that, not its operation."""
    from django_fdbqueue.bench.measure import SETTLE_POLL, settle

    clock = _Clock()
    waited = settle(_polls([9_000_000, 4_000_000, 0]), timeout=60, clock=clock, pause=clock.pause)
    assert waited == 2 * SETTLE_POLL
    assert settle(_polls([None]), timeout=60, clock=clock, pause=clock.pause) == 0  # the embedded engine


def test_a_store_that_never_settles_is_waited_for_a_bounded_time():
    from django_fdbqueue.bench.measure import settle

    clock = _Clock()
    assert settle(_polls([10**9] * 1000), timeout=10, clock=clock, pause=clock.pause) is None
    assert clock.now == 10.0


class _DepthRows:
    """The part of a bench run that measures the depth rows, on a fake target and a scripted store."""

    def __init__(self, db: Any) -> None:
        from django_fdbqueue.bench.measure import RowMeasuring
        from django_fdbqueue.bench.plan import BenchConfig

        self.events: list[str] = []
        self.measuring = RowMeasuring()
        self.measuring.db, self.measuring.config = db, BenchConfig.build(duration=0.0)
        self.measuring.warnings, self.measuring.failures, self.measuring._block = [], [], 0
        self.queued = 0

    def fill(self, queue: str, strategy: Any, batch: Any) -> None:
        self.events.append(f"fill {len(batch)}")
        self.queued += len(batch)

    def remaining(self, queue: str, strategy: Any) -> int:
        return self.queued

    def server_memory_mib(self) -> None:
        return None

    def detail(self, text: str) -> None:
        pass


def test_the_depth_rows_are_timed_once_the_fill_is_durable(monkeypatch, embedded_db):
    from django_fdbqueue.bench import measure
    from django_fdbqueue.bench.results import Row

    rows = _DepthRows(embedded_db)
    probe = _polls([20_000_000, 0], rows.events)
    monkeypatch.setattr(measure, "durable_behind", lambda db, version: probe())
    monkeypatch.setattr(measure, "SETTLE_POLL", 0.0)
    monkeypatch.setattr(measure, "SETTLE_MIN_ITEMS", 3)
    row = Row("fdbqueue", "fill", 1, "threads", "-", depth=3)
    rows.measuring._measure_fill(rows, row, "q", None, rows)
    assert rows.events == ["fill 3", "behind 20000000", "behind 0"]
    assert rows.measuring.warnings == [] and row.exactly_once


def test_a_small_fill_is_not_waited_for(monkeypatch, embedded_db):
    from django_fdbqueue.bench import measure
    from django_fdbqueue.bench.results import Row

    rows = _DepthRows(embedded_db)
    monkeypatch.setattr(measure, "durable_behind", lambda db, version: rows.events.append("asked") or 10**9)
    rows.measuring._measure_fill(rows, Row("fdbqueue", "fill", 1, "threads", "-", depth=3), "q", None, rows)
    assert rows.events == ["fill 3"] and rows.measuring.warnings == []


def test_a_fill_the_store_never_makes_durable_is_reported(monkeypatch, embedded_db):
    from django_fdbqueue.bench import measure
    from django_fdbqueue.bench.results import Row

    rows = _DepthRows(embedded_db)
    monkeypatch.setattr(measure, "durable_behind", lambda db, version: 10**9)
    monkeypatch.setattr(measure, "SETTLE_TIMEOUT", 0.0)
    monkeypatch.setattr(measure, "SETTLE_MIN_ITEMS", 3)
    rows.measuring._measure_fill(rows, Row("fdbqueue", "fill", 1, "threads", "-", depth=3), "q", None, rows)
    assert "had still not made it durable" in rows.measuring.warnings[0]


def test_how_far_behind_the_storage_servers_are_is_read_from_the_cluster_status(db, engine_name):
    """On a cluster, versions (none behind a version long past); nothing on the embedded engine."""
    from django_fdbqueue.bench.measure import durable_behind

    if engine_name == "embedded":
        assert durable_behind(db, 10**9) is None
        return
    assert durable_behind(db, 0) == 0
    assert durable_behind(db, 10**18) > 0  # a version to come: every server is behind it
