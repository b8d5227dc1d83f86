"""Running tasks: the handler a :class:`~django_fdbqueue.worker.Worker` calls for each claimed item.

For one item: mark its result RUNNING in the claim's transaction (:meth:`TaskRunner.claimed` is
the worker's ``on_claim``; a result already finished means an earlier delivery ran it, and this
one is dropped), call the task, then store SUCCESSFUL or FAILED in the transaction that acks the
item (:meth:`TaskRunner.handle` returns it as ``AckWith``): three transactions a task in all. A
task that raises is a FAILED result, not a failure of the item. An item naming another queue's
or backend's task is dropped unrun (only a worker's claim knows the item's queue:
``TaskRunner(item)`` does not check).

Failures, results too large and repeated deliveries: the tasks guide (docs/howto/tasks.md); why
a task may not run another queue's: docs/explanation/security.md.
A workflow's member is an ordinary task whose record names its node: the transaction that stores
its result also releases what waits on it, and the claim drops it if its workflow stopped
(``workflows``; docs/explanation/workflows.md).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from typing import Any, Iterable

from django.db import close_old_connections

from django_fdbqueue.connection import get_database
from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.fdbapi import FDBError, transactional
from django_fdbqueue.service.extension import parse_receipt
from django_fdbqueue.service import ClaimMode
from django_fdbqueue.service.records import now_micros
from django_fdbqueue.worker import Worker, WorkerStats
from django_fdbqueue.worker.ack_with import AckWith, commit_alone
from django_fdbqueue.worker.burst import Burst

from . import limits, results
from .backend import FDBQueueBackend, ensure_queue
from .workflows import release, stopping
from .compat import (
    TaskContext,
    get_exception_traceback,
    get_module_path,
    get_random_id,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)

# A child of the worker's logger, so the worker command shows it where it shows the worker's own.
logger = logging.getLogger("django_fdbqueue.worker.tasks")


def new_worker_id() -> str:
    """Host, process and a random part: readable in the admin, unique across restarts (<= 64 chars)."""
    return f"{socket.gethostname()[:30]}-{os.getpid()}-{get_random_id()[:8]}"


def _start(db_or_tr: Any, result_id: str, worker_id: str) -> tuple[results.Record, results.Record] | None:
    """RUNNING, with this attempt counted; None if the task is gone or already finished."""
    return _mark_running(db_or_tr, result_id, worker_id, now_micros())


@transactional
def _mark_running(tr: Any, result_id: str, worker_id: str, now_us: int) -> tuple[results.Record, results.Record] | None:
    """``_start``'s transaction. ``now_us`` is chosen once per call, outside the retries: finding
    it already written with this worker's id means an earlier attempt of this very call committed
    before its result was lost (1021), and the attempt must not be counted twice."""
    record = results.read(tr, result_id)
    if record is None or record.finished:
        return None
    if record.workflow is not None and not release.admitted(tr, record):
        return None  # its workflow stopped (marked FAILED), or it is not released yet: not run
    if (
        record.status == results.RUNNING
        and record.last_attempted_us == now_us
        and record.worker_ids[-1:] == [worker_id]
    ):
        return record, record
    running = results.Record(**{**record.__dict__, "worker_ids": [*record.worker_ids, worker_id]})
    running.status = results.RUNNING
    running.started_us = record.started_us or now_us
    running.last_attempted_us = now_us
    running = limits.fitted(running)
    results.write(tr, running, record)
    return record, running


@transactional
def _finish(
    tr: Any, result_id: str, outcome: dict[str, Any], retention_end: int | None
) -> tuple[results.Record, Exception | None] | None:
    """Store the outcome; one too large for the record is stored as a ResultTooLarge failure,
    which is returned beside the record (None otherwise)."""
    record = results.read(tr, result_id)
    if record is None or record.finished:
        return None  # another delivery finished it first (or it was deleted): keep theirs
    done = results.Record(**{**record.__dict__, **outcome})
    done.finished_us = now_micros()
    done.expires_us = retention_end
    too_large = None
    if done.status == results.SUCCESSFUL and not limits.fits(done):
        too_large = limits.result_too_large(done)
        done.status, done.return_value = results.FAILED, None
        done.errors = [*done.errors, _error(too_large)]
    done = limits.fitted(done)
    results.write(tr, done, record)
    results.prune(tr, done.finished_us)
    release.settle(tr, done)  # a workflow's member: release what waited on it, in this transaction
    return done, too_large


def _result_id(item: Any) -> str | None:
    """The id of the result an item's task reports to; None for an item that is no task."""
    value = item.value
    result_id = value.get("result_id") if isinstance(value, dict) else None
    return result_id if isinstance(result_id, str) else None


class _StartFailed:
    """Marking a task RUNNING failed in the claim's transaction: the handler raises ``error``."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class _Foreign:
    """The item names a task result of another queue (or backend): it is dropped, not run."""

    __slots__ = ("queue", "record")

    def __init__(self, queue: str, record: results.Record) -> None:
        self.queue = queue
        self.record = record


#: ``handle``'s default: the worker did not mark the task RUNNING in its claim.
_NOT_YET = object()


def _error(exc: BaseException) -> dict[str, str]:
    return {"exception_class_path": get_module_path(type(exc)), "traceback": get_exception_traceback(exc)}


def _send_finished(sender: type, task_result: Any, failure: BaseException | None) -> None:
    """``task_finished``; for a failed task, sent while its exception is being handled, as the
    framework's own backends do: its receiver logs a failure with ``logger.exception``, which
    outside an ``except`` block logs ``NoneType: None`` instead of the traceback."""
    if failure is None:
        task_finished.send(sender, task_result=task_result)
        return
    original = failure.__traceback__
    try:
        raise failure
    except BaseException:  # noqa: BLE001 - the task's own failure, raised here to be handled
        task_finished.send(sender, task_result=task_result)
    finally:
        failure.__traceback__ = original  # without the frame the raise above added


class TaskRunner:
    """The handler: runs the task an item names, and records what happened."""

    def __init__(self, backend: FDBQueueBackend, worker_id: str | None = None) -> None:
        self.backend = backend
        self.worker_id = worker_id or new_worker_id()

    def __call__(self, item: Any) -> None:
        """Run the task an item names, and store its result in a transaction of its own."""
        writes = self.handle(item)
        if writes is not None:
            commit_alone(get_database(), writes)

    def _belongs(self, record: results.Record, queue: str) -> bool:
        """Whether a task result is this backend's and its queue is ``queue``: an item pushed to
        one task queue by someone allowed to push there must not run another queue's task."""
        try:
            return record.backend == self.backend.alias and self.backend.queue_for(record.queue_name) == queue
        except QueueError:
            return False

    def claimed(self, tr: Any, lease: Any) -> Any:
        """The worker's ``on_claim``: mark the task RUNNING in the transaction that claims its item.

        What it returns reaches :meth:`handle`. A record that cannot be read or written must
        not fail the claim (the same item would come back first, every time): the error is
        returned instead, and the handler raises it, so the item is released and retried.
        Each attempt of the claim reads the clock anew: an attempt after a lost commit (1021)
        claims another item, the first one being hidden by its lease, so none counts twice.
        """
        result_id = _result_id(lease.item)
        if result_id is None:
            return None
        try:
            queue = parse_receipt(lease.receipt).name
            record = results.read(tr, result_id)
            if record is not None and not self._belongs(record, queue):
                return _Foreign(queue, record)
            return _mark_running(tr, result_id, self.worker_id, now_micros())
        except FDBError:
            raise
        except Exception as exc:  # noqa: BLE001 - the handler raises it (see above)
            return _StartFailed(exc)

    def handle(self, item: Any, started: Any = _NOT_YET) -> AckWith | None:
        """Run the task an item names; the result's writes, for the worker to commit with the ack.

        What a worker calls (one transaction fewer per task than storing the result, then
        acking): see :mod:`django_fdbqueue.worker.ack_with`. ``started`` is what
        :meth:`claimed` returned in the claim's transaction; without it, the result is marked
        RUNNING here, in a transaction of its own. None when there is nothing to store.
        """
        result_id = _result_id(item)
        if result_id is None:
            logger.error("Item %s is not a task (no result id); dropping it.", item.id)
            return None
        if started is _NOT_YET:
            started = _start(get_database(), result_id, self.worker_id)
        elif isinstance(started, _StartFailed):
            raise started.error
        elif isinstance(started, _Foreign):
            logger.error(
                "Item %s in queue %r names task %s of %r (TASKS[%r]); dropping it without running the task.",
                item.id,
                started.queue,
                result_id,
                started.record.queue_name,
                started.record.backend,
            )
            return None
        if started is None:
            logger.info("Task %s already finished or no longer exists; skipping it.", result_id)
            return None
        _previous, record = started
        close_old_connections()
        try:
            outcome, result, failure = self._run(record)
        finally:
            close_old_connections()
        retention_end = self.backend.retention_end(now_micros())
        stored: list[tuple[results.Record, Exception | None]] = []

        def step(tr: Any) -> None:
            finished = _finish(tr, result_id, outcome, retention_end)
            if finished is not None:  # None: finished already, by this very step's earlier attempt or another run
                stored[:] = [finished]
                writes.failed = finished[0].status == results.FAILED

        def after(committed: bool) -> None:
            if committed and stored:
                done, too_large = stored[0]
                self._announce(done, outcome, record, result, too_large or failure)
                self._sweep(done)

        writes = AckWith(step, after, failed=outcome["status"] == results.FAILED)  # the worker counts it
        return writes

    def _announce(
        self,
        done: results.Record,
        outcome: dict[str, Any],
        record: results.Record,
        result: Any,
        failure: BaseException | None,
    ) -> None:
        """After the result is stored: a warning if it is not what the task gave, and the signal."""
        if done.status != outcome["status"]:
            logger.warning("Task %s (%s) failed: %s", done.id, record.task_path, done.errors[-1]["traceback"].strip())
        if result is not None:
            finished = self.backend.to_result(result.task, done)
            _send_finished(type(self.backend), finished, failure if done.status == results.FAILED else None)

    def _sweep(self, done: results.Record) -> None:
        """A member's failure that stopped its workflow: mark the members that will never run."""
        if done.workflow is None or done.status != results.FAILED:
            return
        try:
            stopping.sweep_after_failure(get_database(), done)
        except Exception:  # noqa: BLE001 - the result is stored; cancel_workflow finishes the marking
            logger.exception("Could not mark the members of workflow %s that will not run.", done.workflow[0])

    def _run(self, record: results.Record) -> tuple[dict[str, Any], Any, BaseException | None]:
        """Call the task: (the outcome to store, its TaskResult or None, the exception it raised)."""
        try:
            task = self.backend.task_of(record)
        except Exception as exc:  # noqa: BLE001 - an unimportable task is a failed task
            logger.error("Task %s (%s) cannot be loaded.", record.id, record.task_path, exc_info=exc)
            return {"status": results.FAILED, "errors": [*record.errors, _error(exc)]}, None, exc
        result = self.backend.to_result(task, record)
        task_started.send(type(self.backend), task_result=result)
        try:
            if task.takes_context:
                value = task.call(TaskContext(task_result=result), *record.args, **record.kwargs)
            else:
                value = task.call(*record.args, **record.kwargs)
            value = normalize_json(value)
            json.dumps(value, allow_nan=False)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - whatever the task raises is its failure
            logger.warning("Task %s (%s) failed.", record.id, record.task_path, exc_info=exc)
            return {"status": results.FAILED, "errors": [*record.errors, _error(exc)]}, result, exc
        return {"status": results.SUCCESSFUL, "return_value": value}, result, None


def backend_named(alias: str) -> FDBQueueBackend:
    backend = task_backends[alias]
    if not isinstance(backend, FDBQueueBackend):
        raise QueueError(
            f"TASKS[{alias!r}] uses {type(backend).__name__}, not FDBQueueBackend: its tasks do not "
            "run through these queues."
        )
    return backend


class TaskWorkers:
    """One :class:`Worker` per task queue, run and stopped together (the Worker interface).

    ``concurrency`` is per queue: each queue's worker has that many threads. With ``burst``
    they share one :class:`Burst`, so they end together once no queue has a task ready and
    none is running.
    """

    def __init__(
        self,
        backend: FDBQueueBackend,
        queue_names: Iterable[str] | None = None,
        *,
        concurrency: int = 1,
        lease: float | None = None,
        burst: bool = False,
        spread: int | None = None,
        claim_mode: ClaimMode | None = None,
    ) -> None:
        names = sorted(queue_names or backend.queues)
        if not names:
            raise QueueError("No task queue to work on: give queue names, or list them in TASKS[...]['QUEUES'].")
        for name in names:
            if backend.queues and name not in backend.queues:
                raise QueueError(f"Queue {name!r} is not one of TASKS[{backend.alias!r}]['QUEUES'].")
        self.backend = backend
        self.runner = TaskRunner(backend)
        db = get_database()
        shared = Burst() if burst else False
        self.workers = [
            Worker(
                db,
                backend.queue_for(name),
                self.runner.handle,
                concurrency=concurrency,
                lease=lease or backend.lease,
                end="max",
                burst=shared,
                on_claim=self.runner.claimed,
                spread=backend.claim_spread if spread is None else spread,
                claim_mode=backend.claim_mode if claim_mode is None else claim_mode,
            )
            for name in names
        ]

    @property
    def worker_id(self) -> str:
        return self.runner.worker_id

    def start(self) -> None:
        for worker in self.workers:
            ensure_queue(worker.db, worker.queue, self.backend.max_attempts)
            worker.start()

    def wait(self, timeout: float | None = None) -> bool:
        return all(worker.wait(timeout) for worker in self.workers)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()

    def abort(self) -> None:
        for worker in self.workers:
            worker.abort()

    def run(self) -> WorkerStats:
        self.start()
        self.wait()
        return self.stats

    @property
    def stats(self) -> WorkerStats:
        total = WorkerStats()
        for worker in self.workers:
            for name, amount in worker.stats.as_dict().items():
                setattr(total, name, getattr(total, name) + amount)
        return total
