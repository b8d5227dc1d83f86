"""Measuring one row: its timed windows, the prefill that keeps a queue from running dry, and
the exactly-once check of every window that pops."""

from __future__ import annotations

import json
import math
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Hashable

from .progress import Progress
from .results import Row
from .runner import Measurement, ProcessTeam, run_threads
from .stats import peak_memory_mib, reset_peak_memory, store_cpu_seconds
from .store_info import STATUS_KEY
from .targets import Target
from .workloads import Work, batches, claim_mode, claim_spread

if TYPE_CHECKING:
    from .plan import BenchConfig

#: Rows on a queue filled beforehand; one that runs dry is measured again on a fuller queue, up to
#: MEASURE_ATTEMPTS windows in all.
PREFILLED = ("pop", "claim+ack")
MEASURE_ATTEMPTS = 3
#: The shortest window of the wake-up row: it pushes one item per WAKE_INTERVAL only.
WAKE_MIN_SECONDS = 1.0
#: Queue items per expected pop in the timed window, so concurrent pops do not run dry.
# Three times the fastest rate seen so far: a row measured while the machine was busier than
# during the pop rows must not leave them an empty queue (items are cheap to fill in batches).
PREFILL_SAFETY = 3.0
MAX_PREFILL = 2_000_000
#: After a fill a cluster's storage servers keep absorbing it for seconds (about 6 s after a million
#: items here), and every request is slower meanwhile: a peek timed then took 10 ms against 0.2 ms.
#: So the depth rows wait, untimed, until every storage server has made the fill durable (its
#: ``durable_version`` in the cluster's status, read every SETTLE_POLL seconds, reaches a version
#: taken after the fill), for at most SETTLE_TIMEOUT seconds. The embedded engine writes a fill at
#: its commit: no wait. Nor does a fill of fewer than SETTLE_MIN_ITEMS (a few MB, absorbed with
#: the cluster hardly slower; the wait, 5-10 s on a cluster, would only lengthen the run).
SETTLE_MIN_ITEMS = 5_000
SETTLE_POLL = 0.5
SETTLE_TIMEOUT = 120.0


def durable_behind(db: Any, version: int) -> int | None:
    """How many versions the least durable storage server of the cluster is behind ``version``
    (0 when none is), from its status; None for a store without one (the embedded engine) or a
    status that cannot be read."""
    try:
        status = json.loads(bytes(db[STATUS_KEY]))
        durable: list[int] = [
            role["durable_version"]
            for process in status["cluster"]["processes"].values()
            for role in process.get("roles", ())
            if role.get("role") == "storage"
        ]
        return max(0, version - min(durable))
    except Exception:  # noqa: BLE001 - nothing to wait for, never a reason to stop the bench
        return None


def settle(
    measure: Callable[[], int | None],
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
    pause: Callable[[float], None] = time.sleep,
) -> float | None:
    """Poll ``measure`` until it reports nothing left (0, or None: nothing to wait for): the
    seconds that took, or None when ``timeout`` seconds passed first."""
    started = clock()
    while measure():
        if clock() - started >= timeout:
            return None
        pause(SETTLE_POLL)
    return clock() - started


class RowMeasuring:
    """The part of a run (``suite.Bench``) that measures one row on one target.

    It uses the run's ``config``, records into its ``failures`` and ``warnings``, and keeps the
    fastest per-client rate seen per target (``_rate_hint``, capped at ``_scale_cap`` clients) to
    size the next prefill, and ``_block``, the last range of value numbers handed out.
    """

    config: "BenchConfig"
    db: Any
    failures: list[str]
    warnings: list[str]
    _rate_hint: dict[str, float]
    _scale_cap: int
    _block: int
    #: Whether this machine's fdbserver processes are the measured store (a cluster engine).
    _store_is_cluster: bool = False

    def _next_block(self) -> int:
        """A fresh range of value numbers, so no two rows push the same n."""
        self._block += 1
        return self._block * 10**15

    def _measure(
        self, target: Target, row: Row, queue: str, strategy: str | None, team: ProcessTeam, progress: Progress
    ) -> None:
        """Measure ``row`` on ``target`` and fill in its figures and its exactly-once verdict."""
        if row.operation == "fill":
            self._measure_fill(target, row, queue, strategy, progress)
            return
        if row.operation == "pop" and row.depth is not None:
            self._measure_pops_at_depth(target, row, queue, strategy, progress)
            return
        duration = self.config.duration
        if row.operation == "wake":
            duration = max(duration, WAKE_MIN_SECONDS)  # enough pushes for percentiles, even in --quick
        prefilled = row.operation in PREFILLED
        held = True
        at_least = 0
        for attempt in range(MEASURE_ATTEMPTS if prefilled else 1):
            if prefilled:
                self._top_up(target, row, queue, strategy, progress, at_least)
            held = self._measure_once(target, row, queue, strategy, team, duration, progress) and held
            self._learn_rate(row)  # from a dry window too: its rate is real, it just ended early
            if not (prefilled and row.ran_dry):
                break
            if attempt == 0:
                # The prefill estimate came from slower rows (or a busier moment): measure again on
                # a queue filled for the rate just seen, rather than report a cut-short window.
                row.notes["measured_again"] = "the queue ran dry in the first window"
            # A rate learned from a window of a few items can be low (thread start-up weighs in
            # it): each further window starts with at least twice what the last one had.
            at_least = 2 * int(row.notes.get("queued_at_start", 0))
        if row.operation != "peek":
            row.exactly_once = held
        if row.ran_dry and row.depth is None:
            self.warnings.append(
                f"{row.label()}: the queue ran dry during the timed window; its rate covers less than a full window."
            )

    def _measure_once(
        self,
        target: Target,
        row: Row,
        queue: str,
        strategy: str | None,
        team: ProcessTeam,
        duration: float,
        progress: Progress,
    ) -> bool:
        """One timed window of ``row``: its figures recorded, and whether exactly-once held in it."""
        before = target.remaining(queue, strategy)
        work = Work(
            row.operation,
            queue,
            strategy,
            first_n=self._next_block(),
            spread=claim_spread(row),
            claim_mode=claim_mode(row),
        )
        progress.detail("running")
        store_before = store_cpu_seconds() if self._store_is_cluster else None
        if row.mode == "processes":
            measurement = team.run(target.spec(), work, row.clients, duration)
        else:
            measurement = run_threads(target, work, row.clients, duration)
        self._record(row, measurement)
        self._record_cpu(row, measurement, store_before)
        if row.operation == "peek":
            return True
        pushed = row.ops if row.operation in ("push", "push+pop") else measurement.pushed
        after = target.remaining(queue, strategy)
        return self._check_exactly_once(row, measurement.popped, before, after, pushed, measurement.timed_out)

    def _measure_pops_at_depth(
        self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress
    ) -> None:
        """Pop for the row's duration without letting the queue fall below half its depth.

        Each round pops at most half the queue; between rounds it is topped up again, untimed.
        """
        assert row.depth is not None
        per_round = max(1, row.depth // 2)
        parts: list[Measurement] = []
        before = after = 0
        spent = 0.0
        while spent < self.config.duration:
            have = target.remaining(queue, strategy)
            if have < row.depth:
                self._fill(target, queue, strategy, row.depth - have, progress)
                self._settle(row.depth - have, progress)
            before += target.remaining(queue, strategy)
            work = Work("pop", queue, strategy, max_ops=per_round)
            progress.detail(f"round {len(parts) + 1}")
            part = run_threads(target, work, 1, self.config.duration - spent)
            after += target.remaining(queue, strategy)
            parts.append(part)
            spent += part.seconds
            if part.ran_dry or part.ops == 0:
                break
        measurement = Measurement.merge(parts)
        self._record(row, measurement)
        row.notes["rounds"] = len(parts)
        self._check_exactly_once(row, measurement.popped, before, after, 0)

    def _measure_fill(self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress) -> None:
        """Fill an empty queue to the row's depth in batches: items/s, and the peak memory it took."""
        assert row.depth is not None
        reset_peak_memory()
        seconds = self._fill(target, queue, strategy, row.depth, progress)
        self._settle(row.depth, progress)  # the peek and pop rows that follow time their own work
        row.ops, row.seconds = row.depth, seconds
        row.ops_per_s = row.depth / seconds if seconds > 0 else 0.0
        row.peak_mib = peak_memory_mib()
        server = target.server_memory_mib()
        if server is not None:
            row.notes["server_peak_mib"] = round(server, 1)
        left = target.remaining(queue, strategy)
        row.exactly_once = left == row.depth
        if not row.exactly_once:
            self.failures.append(f"{row.label()}: pushed {row.depth:,} items into an empty queue, found {left:,}.")

    def _fill(self, target: Target, queue: str, strategy: str | None, count: int, progress: Progress) -> float:
        started = time.monotonic()
        done = 0
        for batch in batches(self._next_block(), count):
            target.fill(queue, strategy, batch)
            done += len(batch)
            progress.detail(f"filling {done:,}/{count:,}")
        return time.monotonic() - started

    def _settle(self, count: int, progress: Progress) -> None:
        """Wait until the store has made what was just filled durable (see SETTLE_TIMEOUT)."""
        if count < SETTLE_MIN_ITEMS:
            return
        tr = self.db.create_transaction()
        version = tr.get_read_version().wait()  # after the fill's last commit
        progress.detail("waiting for the store to absorb the fill")
        if settle(lambda: durable_behind(self.db, version), timeout=SETTLE_TIMEOUT) is None:
            self.warnings.append(
                f"{SETTLE_TIMEOUT:g} s after a fill of {count:,} items the store had still not made "
                "it durable: the next depth row's figures include that work."
            )

    def _top_up(
        self, target: Target, row: Row, queue: str, strategy: str | None, progress: Progress, at_least: int = 0
    ) -> None:
        """Fill the queue so that the row's clients cannot empty it in the timed window.

        The estimate scales the fastest per-client rate seen so far on this target by the
        number of clients (at most twice the CPU count: beyond that, clients share CPUs).
        """
        per_client = self._rate_hint.get(row.target, 1000.0)
        expected = per_client * min(row.clients, self._scale_cap) * self.config.duration
        need = min(MAX_PREFILL, max(at_least, math.ceil(PREFILL_SAFETY * expected) + 100))
        have = target.remaining(queue, strategy)
        if have < need:
            self._fill(target, queue, strategy, need - have, progress)
        row.notes["queued_at_start"] = max(have, need)

    def _record(self, row: Row, measurement: Measurement) -> None:
        row.ops = measurement.ops
        row.seconds = round(measurement.seconds, 6)
        row.ops_per_s = measurement.ops_per_s
        row.p50_ms = measurement.latency.percentile_ms(0.50)
        row.p99_ms = measurement.latency.percentile_ms(0.99)
        row.peak_mib = measurement.peak_mib
        row.ran_dry = measurement.ran_dry
        if measurement.retries is not None:
            row.retries_by_code = dict(sorted(measurement.retries.items()))
            row.retries = sum(measurement.retries.values())
            row.retries_per_op = row.retries / row.ops if row.ops else 0.0

    def _record_cpu(self, row: Row, measurement: Measurement, store_before: float | None) -> None:
        """CPU per operation of the clients and of a local cluster's servers, and how busy the
        machine's cores were (see ``Row.cpu_busy``)."""
        if not row.ops or measurement.cpu_seconds is None or measurement.seconds <= 0:
            return
        store_after = store_cpu_seconds() if store_before is not None else None
        store = None if store_before is None or store_after is None else store_after - store_before
        row.cpu_ms_per_op = round(1000 * measurement.cpu_seconds / row.ops, 4)
        if store is not None:
            row.store_cpu_ms_per_op = round(1000 * store / row.ops, 4)
        cores = os.cpu_count() or 1
        row.cpu_busy = round((measurement.cpu_seconds + (store or 0.0)) / (measurement.seconds * cores), 3)

    def _check_exactly_once(
        self, row: Row, popped: list[Hashable], before: int, after: int, pushed: int, timed_out: int = 0
    ) -> bool:
        """Every popped id distinct, and the queue's count changed by exactly what was done.

        A pop that timed out (1031) is in doubt: its commit may have landed, so up to
        ``timed_out`` items may be gone without a client holding them, and are reported so.
        """
        problems = []
        distinct = len(set(popped))
        if distinct != len(popped):
            problems.append(f"{len(popped) - distinct:,} item ids popped more than once")
        taken = len(popped)
        in_doubt = before + pushed - taken - after
        if timed_out:
            row.notes["timed_out"] = timed_out
            self.warnings.append(
                f"{row.label()}: {timed_out:,} operations ran out of the transaction TIMEOUT (error 1031, "
                f"starved by contention) and were not counted; {max(0, in_doubt):,} of them took an item."
            )
        if 0 < in_doubt <= timed_out:
            pass  # taken by timed-out pops whose commit landed: in doubt, as FoundationDB says
        elif before + pushed - taken != after:
            problems.append(
                f"{before:,} queued + {pushed:,} pushed - {taken:,} popped = {before + pushed - taken:,}, "
                f"but {after:,} remain"
            )
        row.exactly_once = not problems
        if problems:
            self.failures.append(f"{row.label()}: " + "; ".join(problems) + ".")
        return not problems

    def _learn_rate(self, row: Row) -> None:
        if row.depth is not None or row.ops_per_s <= 0 or row.operation == "wake":
            return  # a wake row's rate is its pusher's pace
        per_client = row.ops_per_s / min(row.clients, self._scale_cap)
        if row.operation == "push+pop":
            per_client *= 2  # a pair is two operations
        self._rate_hint[row.target] = max(self._rate_hint.get(row.target, 0.0), per_client)
