"""Running one row: its clients as threads or as processes, timed over one shared window.

Each client prepares first (connection, pop strategy), then all start together and stop at the
same deadline; a row lasts from the first client's start to the last client's end, and its
rate is every client's operations over that window. A client times each operation with the
monotonic clock into a :class:`~django_fdbqueue.bench.stats.LatencyHistogram`.

Client processes are started once, with ``spawn`` (nothing inherited: each configures Django and
opens its own database handle, as separate workers of a deployment do), and reused by every
row: a row with N process clients uses the first N. Each reports its own retry counts and peak
memory. They ignore Ctrl-C, which the bench handles by stopping them.

Every wait here is bounded: a client that never gets ready, or does not finish within
:data:`GRACE_SECONDS` of the deadline, fails the row with an error rather than hanging it.
"""

from __future__ import annotations

import math
import multiprocessing
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, cast

from .stats import LatencyHistogram, peak_memory_mib, reset_peak_memory
from .targets import Target, TargetSpec, open_target
from .workloads import RanDry, Timed, Work, make_step

__all__ = [
    "BenchError",
    "ClientResult",
    "Measurement",
    "ProcessTeam",
    "drive",
    "run_threads",
    "READY_SECONDS",
    "GRACE_SECONDS",
]

#: How long clients may take to get ready: a spawned process imports and sets up Django first.
READY_SECONDS = 180.0
#: How long after the deadline the last operation and the results may take to come in.
GRACE_SECONDS = 60.0
_POLL_SECONDS = 0.25
#: FoundationDB's "transaction timed out" (1031): the TIMEOUT setting ran out before a commit.
TIMED_OUT = 1031


class BenchError(Exception):
    """A row could not be measured; the message says which client failed and how."""


@dataclass
class ClientResult:
    """What one client did during a row (picklable: process clients send it back)."""

    ops: int
    started: float
    finished: float
    latency: LatencyHistogram
    popped: list[Hashable]
    ran_dry: bool
    retries: dict[int, int] | None = None
    peak_mib: float | None = None
    pushed: int = 0  # counted by steps that time themselves (see workloads.Timed)
    cpu_seconds: float | None = None  # the client process's CPU time in the window (processes only)
    timed_out: int = 0  # operations that ran out of their transaction's TIMEOUT (see drive)


@dataclass
class Measurement:
    """A row's figures, all clients together."""

    ops: int
    seconds: float
    latency: LatencyHistogram
    popped: list[Hashable] = field(repr=False)
    ran_dry: bool
    retries: dict[int, int] | None
    peak_mib: float | None
    pushed: int = 0
    #: CPU time the clients' processes spent in the window, every thread of theirs counted (the
    #: binding's network thread and, on the embedded engine, the store's own work included).
    cpu_seconds: float | None = None
    timed_out: int = 0

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds if self.seconds > 0 else 0.0

    @classmethod
    def merge(cls, parts: list["Measurement"]) -> "Measurement":
        """Several timed windows of one row as one: their operations over their summed time."""
        peaks = [part.peak_mib for part in parts if part.peak_mib is not None]
        return cls(
            ops=sum(part.ops for part in parts),
            seconds=sum(part.seconds for part in parts),
            latency=LatencyHistogram().merge(part.latency for part in parts),
            popped=[item for part in parts for item in part.popped],
            ran_dry=any(part.ran_dry for part in parts),
            retries=_sum_retries(part.retries for part in parts),
            peak_mib=max(peaks) if peaks else None,
            pushed=sum(part.pushed for part in parts),
            cpu_seconds=_sum_cpu(part.cpu_seconds for part in parts),
            timed_out=sum(part.timed_out for part in parts),
        )


def drive(step: Callable[[], Hashable | Timed | None], deadline: list[float], max_ops: int | None) -> ClientResult:
    """Call ``step`` until ``deadline[0]`` (re-read each time, so it can be moved to stop early).

    One clock reading per operation: the end of one is the start of the next. A step that
    returns a :class:`~django_fdbqueue.bench.workloads.Timed` times itself instead: its latency
    is recorded (and it counts as an operation) only when it gives one. An operation that ran
    out of its transaction's TIMEOUT (FoundationDB error 1031: starved by contention, as plain
    pops are with a hundred clients on one queue) is counted in ``timed_out``, not as an
    operation, and the client goes on.
    """
    clock = time.monotonic
    latency = LatencyHistogram()
    record = latency.add
    popped: list[Hashable] = []
    limit = math.inf if max_ops is None else max_ops
    ops = pushed = timed_out = 0
    ran_dry = False
    started = now = clock()
    while now < deadline[0] and ops < limit:
        try:
            got = step()
        except RanDry:
            ran_dry = True
            now = clock()
            break
        except Exception as error:
            if getattr(error, "code", None) != TIMED_OUT:
                raise
            timed_out += 1
            now = clock()
            continue
        finished = clock()
        if isinstance(got, Timed):
            pushed += got.pushed
            if got.seconds is not None:
                record(got.seconds)
                ops += 1
            got = got.popped
        else:
            record(finished - now)
            ops += 1
        now = finished
        if got is not None:
            popped.append(got)
    return ClientResult(ops, started, now, latency, popped, ran_dry, pushed=pushed, timed_out=timed_out)


def _delta(before: dict[int, int] | None, after: dict[int, int] | None) -> dict[int, int] | None:
    if before is None or after is None:
        return None
    changed = {code: count - before.get(code, 0) for code, count in after.items()}
    return {code: count for code, count in changed.items() if count}


def _sum_retries(parts: Iterable[dict[int, int] | None]) -> dict[int, int] | None:
    total: dict[int, int] = {}
    for part in parts:
        if part is None:
            return None
        for code, count in part.items():
            total[code] = total.get(code, 0) + count
    return total


def _sum_cpu(parts: Iterable[float | None]) -> float | None:
    """The CPU seconds of several parts, or None when any part was not measured."""
    total = 0.0
    for part in parts:
        if part is None:
            return None
        total += part
    return total


def _combine(
    results: list[ClientResult],
    retries: dict[int, int] | None,
    peak_mib: float | None,
    cpu_seconds: float | None = None,
) -> Measurement:
    started = min(result.started for result in results)
    finished = max(result.finished for result in results)
    return Measurement(
        ops=sum(result.ops for result in results),
        seconds=finished - started,
        latency=LatencyHistogram().merge(result.latency for result in results),
        popped=[item for result in results for item in result.popped],
        ran_dry=any(result.ran_dry for result in results),
        retries=retries,
        peak_mib=peak_mib,
        pushed=sum(result.pushed for result in results),
        cpu_seconds=cpu_seconds if cpu_seconds is not None else _sum_cpu(r.cpu_seconds for r in results),
        timed_out=sum(result.timed_out for result in results),
    )


# --- threads ---------------------------------------------------------------------------------


def run_threads(target: Target, work: Work, clients: int, duration: float) -> Measurement:
    """Run ``work`` on ``clients`` threads of this process for ``duration`` seconds."""
    ready = threading.Barrier(clients + 1)
    go = threading.Event()
    deadline = [math.inf]
    results: list[ClientResult | None] = [None] * clients
    errors: list[BaseException] = []

    threads = [
        threading.Thread(
            target=_client_main,
            args=(target, work, index, deadline, ready, go, results, errors),
            name=f"fdbqueue-bench-client-{index}",
            daemon=True,
        )
        for index in range(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        try:
            ready.wait(READY_SECONDS)
        except threading.BrokenBarrierError:
            go.set()
            for thread in threads:
                thread.join(GRACE_SECONDS)
            if errors:
                raise errors[0]
            raise BenchError(f"the {clients} client threads did not get ready within {READY_SECONDS:.0f}s") from None
        reset_peak_memory()
        before = target.retry_counts()
        cpu_before = time.process_time()
        deadline[0] = time.monotonic() + duration
        go.set()
        finish_by = deadline[0] + GRACE_SECONDS
        for thread in threads:
            thread.join(max(0.0, finish_by - time.monotonic()))
        if any(thread.is_alive() for thread in threads):
            raise BenchError(f"a client thread was still busy {GRACE_SECONDS:.0f}s after the row's end")
    except BaseException:
        deadline[0] = 0.0  # interrupted or failed: let the clients stop at their next operation
        go.set()
        raise
    if errors:
        raise errors[0]
    cpu = time.process_time() - cpu_before
    retries = _delta(before, target.retry_counts())
    return _combine([result for result in results if result is not None], retries, peak_memory_mib(), cpu)


def _client_main(
    target: Target,
    work: Work,
    index: int,
    deadline: list[float],
    ready: threading.Barrier,
    go: threading.Event,
    results: list[ClientResult | None],
    errors: list[BaseException],
) -> None:
    """One client thread of ``run_threads``: get ready, wait for the start, drive until the deadline."""
    client = None
    try:
        client = target.client(work.queue, work.strategy)
        step = make_step(work, client, index, deadline)
        ready.wait(READY_SECONDS)
        if go.wait(READY_SECONDS):
            results[index] = drive(step, deadline, work.max_ops)
    except threading.BrokenBarrierError:
        pass  # another client failed to get ready; its error is the one reported
    except BaseException as error:  # handed to the bench's thread, which raises it
        errors.append(error)
        deadline[0] = 0.0  # stop the others: this row is lost anyway
        ready.abort()
    finally:
        if client is not None:
            client.close()


# --- processes -------------------------------------------------------------------------------


class _BenchGone(Exception):
    """The pipe to the bench closed: the bench exited or was killed."""


def _send(conn: Any, message: tuple[Any, ...]) -> None:
    try:
        conn.send(message)
    except OSError:
        raise _BenchGone from None


def _recv(conn: Any) -> tuple[Any, ...]:
    try:
        return cast("tuple[Any, ...]", conn.recv())
    except (EOFError, OSError):
        raise _BenchGone from None


def _worker_main(conn: Any) -> None:
    """A client process: run jobs from the bench until told to stop or the bench goes away."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the bench stops us on Ctrl-C
    opened: dict[str, tuple[TargetSpec, Target]] = {}
    try:
        while True:
            message = _recv(conn)
            if message[0] != "job":
                return
            _, spec, work, index = message
            _send(conn, _run_job(conn, opened, spec, work, index))
    except _BenchGone:
        return
    finally:
        for _spec, target in opened.values():
            try:
                target.close()
            except Exception:  # noqa: BLE001 - exiting anyway
                pass


def _run_job(
    conn: Any, opened: dict[str, tuple[TargetSpec, Target]], spec: TargetSpec, work: Work, index: int
) -> tuple[str, Any]:
    """Prepare, report ready, wait for the start, run: the outcome to send back."""
    client = None
    try:
        known = opened.get(spec.kind)
        if known is None or known[0] != spec:
            if known is not None:
                known[1].close()
            opened[spec.kind] = (spec, open_target(spec))
        target = opened[spec.kind][1]
        client = target.client(work.queue, work.strategy)
        deadline = [math.inf]
        step = make_step(work, client, index, deadline)
        reset_peak_memory()
        _send(conn, ("ready", None))
        message = _recv(conn)
        if message[0] != "go":
            raise _BenchGone  # told to stop instead
        before = target.retry_counts()
        deadline[0] = message[1]
        cpu_before = time.process_time()
        result = drive(step, deadline, work.max_ops)
        result.cpu_seconds = time.process_time() - cpu_before
        result.retries = _delta(before, target.retry_counts())
        result.peak_mib = peak_memory_mib()
        return ("done", result)
    except _BenchGone:
        raise
    except Exception:  # noqa: BLE001 - reported to the bench, which fails the row with it
        return ("error", traceback.format_exc())
    finally:
        if client is not None:
            client.close()


class _Worker:
    def __init__(self, context: Any, slot: int) -> None:
        self.slot = slot
        self.conn, child_end = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(child_end,), name=f"fdbqueue-bench-client-{slot}", daemon=True
        )
        self.process.start()
        child_end.close()

    def send(self, message: tuple[Any, ...]) -> None:
        try:
            self.conn.send(message)
        except OSError as error:
            raise BenchError(f"client process {self.slot} is gone ({error})") from None

    def receive(self, expected: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"client process {self.slot} did not answer within {timeout:.0f}s")
            if self.conn.poll(min(left, _POLL_SECONDS)):
                try:
                    kind, payload = self.conn.recv()
                except (EOFError, OSError):  # the pipe closed, or was reset by a dying child
                    raise BenchError(f"client process {self.slot} exited (status {self.process.exitcode})") from None
                if kind == "error":
                    raise BenchError(f"client process {self.slot} failed:\n{payload}")
                if kind != expected:
                    raise BenchError(f"client process {self.slot} answered {kind!r}, expected {expected!r}")
                return payload
            if not self.process.is_alive():
                raise BenchError(f"client process {self.slot} exited (status {self.process.exitcode})")

    def stop(self, timeout: float) -> None:
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        self.process.join(timeout)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(5.0)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5.0)
        self.conn.close()


class ProcessTeam:
    """Client processes, started on first use and reused by every row; ``close()`` stops them."""

    def __init__(self) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []

    def __enter__(self) -> "ProcessTeam":
        return self

    def __exit__(self, exc_type: Any, *rest: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def run(self, spec: TargetSpec, work: Work, clients: int, duration: float) -> Measurement:
        """Run ``work`` on ``clients`` processes for ``duration`` seconds."""
        while len(self._workers) < clients:
            self._workers.append(_Worker(self._context, len(self._workers)))
        team = self._workers[:clients]
        try:
            for index, worker in enumerate(team):
                worker.send(("job", spec, work, index))
            for worker in team:
                worker.receive("ready", READY_SECONDS)
            deadline = time.monotonic() + duration
            for worker in team:
                worker.send(("go", deadline))
            finish_within = duration + GRACE_SECONDS
            results: list[ClientResult] = [worker.receive("done", finish_within) for worker in team]
        except BaseException:
            self.abort()  # the clients' state is unknown now: start afresh if there is a next row
            raise
        retries = _sum_retries(result.retries for result in results)
        peaks = [result.peak_mib for result in results if result.peak_mib is not None]
        return _combine(results, retries, max(peaks) if peaks else None)

    def close(self) -> None:
        """Ask every client process to exit, and make sure it did."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop(10.0)

    def abort(self) -> None:
        """Stop every client process now, whatever it is doing."""
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.kill()
