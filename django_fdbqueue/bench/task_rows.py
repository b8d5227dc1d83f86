"""The tasks rows: Django Tasks through :class:`FDBQueueBackend`, against the framework's ImmediateBackend.

A row of ours enqueues N tasks of :func:`django_fdbqueue.bench.tasks.echo` (which returns its
argument, nothing more) from the bench's thread while a :class:`TaskWorkers` pool runs them in
this process: the same pool, with 1 and then 4 threads, that ``manage.py fdbqueue worker
--tasks --concurrency N`` runs. Its rate is N over the time from the first enqueue to the last
task's SUCCESSFUL result (seen through the framework's ``task_finished`` signal); the rate of
the enqueues alone, made while the workers already run, is reported beside it. One more row
(mode :data:`~django_fdbqueue.bench.task_names.ENQUEUED_FIRST`) enqueues every task first and
then starts one worker thread, as the database backend's row does: the goal's like-for-like row.

The reference row runs the same N tasks through the framework's ImmediateBackend, which runs
each task inside ``enqueue``: no store, no queue, no other thread. It is the framework's own
cost of a task with no backend at all, the ceiling; ours divided by it tells how much of that
ceiling a durable queue keeps. It takes milliseconds, so it repeats the N tasks until the row's
duration has passed and counts them all. The other reference, django-tasks' database backend on
SQLite, runs in a process of its own (the project's ``benchmarks.tasks_db_ref``,
through :mod:`~django_fdbqueue.bench.references`).

Exactly once, for every row: each enqueued task finished once (one ``task_finished`` per result,
none for a result not enqueued), its stored result is SUCCESSFUL after one attempt and holds its
own argument back, and the queue took every item and holds none (its pushed and popped counters
both grew by N; nothing ready, leased, delayed or dead). For the reference: each result came
back SUCCESSFUL, run once, with its own argument.

The backends are the bench's own: :func:`bench_backends` adds two aliases to ``TASKS`` for the
run (the project's entries stay as they are, and are not used). Our backend's queue prefix is
``fdbqueue-bench.<run id>.tasks.``, so its queue is one of the bench's queues, dropped at the end
like them; the results a row stored are deleted after it.

This module imports nothing from the Tasks framework until it is used, so the bench can say the
framework is missing (:func:`framework_missing`) instead of failing.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from .runner import GRACE_SECONDS, BenchError
from .task_names import BACKEND_ALIAS, ENQUEUED_FIRST_WORKERS, IMMEDIATE, QUEUE_NAME, TASK_WORKERS
from .stats import peak_memory_mib, reset_peak_memory

__all__ = [
    "BACKEND_ALIAS",
    "IMMEDIATE",
    "IMMEDIATE_ALIAS",
    "QUEUE_NAME",
    "ENQUEUED_FIRST_WORKERS",
    "TASK_WORKERS",
    "TaskBench",
    "TaskRun",
    "bench_backends",
    "framework_description",
    "framework_missing",
    "immediate_backend_path",
    "queue_prefix",
]

#: The TASKS alias the bench adds for the reference rows (ours: ``task_names.BACKEND_ALIAS``).
IMMEDIATE_ALIAS = "fdbqueue-bench-immediate"
#: Results read or deleted per transaction.
RESULT_BATCH = 200
#: The workers' claim wait: how soon they notice the stop once every task has run.
STOP_POLL_SECONDS = 0.05


def framework_missing() -> str | None:
    """Why the tasks rows cannot run here, or None: the Tasks framework is an optional extra."""
    try:
        from django_fdbqueue.tasks import compat  # noqa: F401
    except ImportError as error:
        return (
            "the Django Tasks framework is not installed (Django 6.0+ has it; before, pip install "
            f"django-tasks), so the tasks rows are not measured ({error})."
        )
    return None


def _framework_package() -> str:
    from django_fdbqueue.tasks.compat import BaseTaskBackend

    return BaseTaskBackend.__module__.split(".backends", 1)[0]  # "django.tasks" or "django_tasks"


def framework_description() -> str:
    """Which Tasks framework ran the rows, for the run's metadata."""
    import importlib.metadata

    import django

    package = _framework_package()
    if package == "django.tasks":
        return f"django.tasks (Django {django.get_version()})"
    try:
        return f"django-tasks {importlib.metadata.version('django-tasks')}"
    except importlib.metadata.PackageNotFoundError:
        return package


def immediate_backend_path() -> str:
    """The framework's ImmediateBackend, from whichever framework the app uses."""
    return f"{_framework_package()}.backends.immediate.ImmediateBackend"


def queue_prefix(run_id: str) -> str:
    """Our backend's QUEUE_PREFIX in run ``run_id``: under the bench's names, so no user queue clashes."""
    return f"fdbqueue-bench.{run_id}.tasks."


@dataclass
class TaskRun:
    """What one tasks row measured, and what its exactly-once check found wrong (if anything)."""

    tasks: int
    seconds: float
    enqueue_seconds: float
    rounds: int = 1
    retries: dict[int, int] | None = None
    peak_mib: float | None = None
    problems: list[str] = field(default_factory=list)
    #: With every task enqueued first: from the workers' start to the last result, the workers alone.
    run_seconds: float | None = None

    @property
    def tasks_per_s(self) -> float:
        return self.tasks / self.seconds if self.seconds > 0 else 0.0

    @property
    def run_per_s(self) -> float | None:
        """Tasks/s of the workers alone (rows that enqueue first), not capped by one enqueuing thread."""
        if self.run_seconds is None or self.run_seconds <= 0:
            return None
        return self.tasks / self.run_seconds

    @property
    def enqueue_per_s(self) -> float:
        return self.tasks / self.enqueue_seconds if self.enqueue_seconds > 0 else 0.0


@contextlib.contextmanager
def bench_backends(run_id: str) -> Iterator["TaskBench"]:
    """The bench's two task backends, in ``TASKS`` for as long as the block runs.

    The framework validates a task against its backend's alias whenever a Task is made (at
    import, and by every ``using()``, also in the worker threads), so the aliases must be in
    the settings, not only in objects the bench holds. The framework resets its backends when
    ``TASKS`` changes, on the way in and out.
    """
    from django.test.utils import override_settings

    from django_fdbqueue.tasks.compat import task_backends

    setting = {
        **task_backends.settings,
        BACKEND_ALIAS: {
            "BACKEND": "django_fdbqueue.tasks.FDBQueueBackend",
            "QUEUES": [QUEUE_NAME],
            "OPTIONS": {"QUEUE_PREFIX": queue_prefix(run_id)},
        },
        IMMEDIATE_ALIAS: {"BACKEND": immediate_backend_path(), "QUEUES": [QUEUE_NAME]},
    }
    with override_settings(TASKS=setting):
        from . import tasks as bench_tasks

        bench = TaskBench(task_backends[BACKEND_ALIAS], bench_tasks.echo)
        try:
            yield bench
        finally:
            bench.drop()


class TaskBench:
    """Runs the tasks rows with the bench's backend and task (see :func:`bench_backends`)."""

    def __init__(self, backend: Any, task: Any) -> None:
        from django_fdbqueue.connection import get_database

        self.backend = backend
        self.task = task
        self.queue: str = backend.queue_for(QUEUE_NAME)
        self.db = get_database()

    # -- ours ------------------------------------------------------------------------------------

    def run_workers(
        self,
        count: int,
        workers: int,
        detail: Callable[[str], None],
        *,
        enqueue_first: bool = False,
        spread: int | None = None,
    ) -> TaskRun:
        """Enqueue ``count`` tasks while ``workers`` worker threads run them; timed to the last result.

        With ``enqueue_first`` every task is enqueued before the workers start, as the database
        backend's row does it: the like-for-like row of the Tasks goal. ``spread`` is the
        workers' claim spread, as the backend's ``CLAIM_SPREAD`` option sets it.
        """
        from django_fdbqueue import service
        from django_fdbqueue.fdbapi import retry_counts
        from django_fdbqueue.tasks.compat import task_finished

        finished = _Finished(self.backend.alias, count)
        group = self._group(workers, spread)
        ids: list[str] = []
        task_finished.connect(finished.receive, weak=False)
        try:
            self._ensure_queue()
            if not enqueue_first:
                group.start()
            before = service.get_queue(self.db, self.queue)
            retries_before = retry_counts()
            reset_peak_memory()
            started = time.monotonic()
            for n in range(count):
                ids.append(self.task.enqueue(n).id)
            enqueued = time.monotonic()
            if enqueue_first:
                group.start()
            self._wait_for(finished.all, lambda: len(finished.results), count, detail)
            seconds = finished.last - started
            peak = peak_memory_mib()
            retries = _delta(retries_before, retry_counts())
            group.stop()
            if not group.wait(GRACE_SECONDS):
                raise BenchError(f"the task workers did not stop within {GRACE_SECONDS:.0f}s")
        except BaseException:
            self._abandon(group, ids)
            raise
        finally:
            task_finished.disconnect(finished.receive)
        after = service.get_queue(self.db, self.queue)
        records = self._forget(ids)
        problems = _check_ours(ids, finished.results, records, before, after)
        run_seconds = finished.last - enqueued if enqueue_first else None
        run = TaskRun(count, seconds, enqueued - started, retries=retries, peak_mib=peak, problems=problems)
        return dataclasses.replace(run, run_seconds=run_seconds)

    def _ensure_queue(self) -> None:
        from django_fdbqueue.tasks.backend import ensure_queue

        ensure_queue(self.db, self.queue, self.backend.max_attempts)

    def _group(self, workers: int, spread: int | None) -> Any:
        """A row's worker threads, polling often enough to stop soon after the last task."""
        from django_fdbqueue.tasks.runner import TaskWorkers

        group = TaskWorkers(self.backend, [QUEUE_NAME], concurrency=workers, spread=spread)
        for worker in group.workers:
            worker.poll_wait = STOP_POLL_SECONDS
        return group

    def _abandon(self, group: Any, ids: list[str]) -> None:
        """Interrupted or failed: stop the workers at once, and still leave no results behind."""
        with contextlib.suppress(Exception):
            group.abort()
            group.wait(GRACE_SECONDS)
        with contextlib.suppress(Exception):
            self._forget(ids)

    def _wait_for(
        self, event: threading.Event, done: Callable[[], int], count: int, detail: Callable[[str], None]
    ) -> None:
        """Until every task finished; a row where none finishes for GRACE_SECONDS fails."""
        seen, since = -1, time.monotonic()
        while not event.wait(0.25):
            now, progress = time.monotonic(), done()
            if progress != seen:
                seen, since = progress, now
                detail(f"{progress:,}/{count:,} finished")
            elif now - since > GRACE_SECONDS:
                raise BenchError(f"no task finished for {GRACE_SECONDS:.0f}s ({progress:,} of {count:,} finished)")

    def _forget(self, ids: list[str]) -> dict[str, Any]:
        """Delete the results of ``ids`` (record, listing entry, retention entry); return what was there."""
        from django_fdbqueue.fdbapi import transactional
        from django_fdbqueue.tasks import results

        @transactional
        def forget_batch(tr: Any, batch: list[str]) -> dict[str, Any]:
            raw = {result_id: tr[results.record_key(result_id)] for result_id in batch}
            found = {}
            for result_id, value in raw.items():
                if value.present():
                    record = found[result_id] = results.Record.loads(bytes(value))
                    results.forget(tr, record)
            return found

        records: dict[str, Any] = {}
        for start in range(0, len(ids), RESULT_BATCH):
            records.update(forget_batch(self.db, ids[start : start + RESULT_BATCH]))
        return records

    def drop(self) -> None:
        """Delete the bench's task queue, if a row created it."""
        from django_fdbqueue import service
        from django_fdbqueue.exceptions import QueueNotFound

        with contextlib.suppress(QueueNotFound):
            service.delete_queue(self.db, self.queue)

    # -- the reference ----------------------------------------------------------------------------

    def run_immediate(self, count: int, min_seconds: float) -> TaskRun:
        """The same ``count`` tasks through ImmediateBackend, repeated until ``min_seconds`` passed.

        Only the enqueues are timed (each runs its task); the results are checked between rounds.
        """
        task = self.task.using(backend=IMMEDIATE_ALIAS)
        problems: list[str] = []
        seconds = 0.0
        rounds = 0
        reset_peak_memory()
        while rounds == 0 or seconds < min_seconds:
            started = time.monotonic()
            done = [task.enqueue(n) for n in range(count)]
            seconds += time.monotonic() - started
            rounds += 1
            problems += _check_immediate(done)
            if problems:
                break
        return TaskRun(rounds * count, seconds, seconds, rounds=rounds, peak_mib=peak_memory_mib(), problems=problems)


class _Finished:
    """The ``task_finished`` signals of one row: (id, status) of each, and when the last came."""

    def __init__(self, alias: str, count: int) -> None:
        self.alias, self.count = alias, count
        self.results: list[tuple[str, str]] = []
        self.last = 0.0
        self.all = threading.Event()
        self._lock = threading.Lock()

    def receive(self, sender: Any, task_result: Any, **kwargs: Any) -> None:
        if task_result.backend != self.alias:
            return
        now = time.monotonic()
        with self._lock:
            self.results.append((task_result.id, str(task_result.status)))
            self.last = now
            if len(self.results) >= self.count:
                self.all.set()


def _delta(before: dict[int, int], after: dict[int, int]) -> dict[int, int]:
    changed = {code: count - before.get(code, 0) for code, count in after.items()}
    return {code: count for code, count in sorted(changed.items()) if count}


def _check_ours(
    ids: list[str], finished: list[tuple[str, str]], records: dict[str, Any], before: Any, after: Any
) -> list[str]:
    """What went wrong with exactly-once in a row of ours (nothing, normally)."""
    problems = []
    count = len(ids)
    if len(set(ids)) != count:
        problems.append(f"{count - len(set(ids)):,} result ids given out twice")
    times = collections.Counter(result_id for result_id, _status in finished)
    twice = sum(1 for seen in times.values() if seen > 1)
    if twice:
        problems.append(f"{twice:,} tasks finished more than once")
    never = len(set(ids) - set(times))
    if never:
        problems.append(f"{never:,} tasks never finished")
    stray = len(set(times) - set(ids))
    if stray:
        problems.append(f"{stray:,} tasks finished that were not enqueued")
    failed = sum(1 for _id, status in finished if status != "SUCCESSFUL")
    if failed:
        problems.append(f"{failed:,} tasks finished but not SUCCESSFUL")
    missing = count - len(records)
    if missing:
        problems.append(f"{missing:,} results missing from the store")
    wrong = [
        result_id
        for result_id, record in records.items()
        if record.status != "SUCCESSFUL" or len(record.worker_ids) != 1 or record.args != [record.return_value]
    ]
    if wrong:
        problems.append(f"{len(wrong):,} stored results not SUCCESSFUL after one attempt with their own argument back")
    pushed, popped = after.pushed - before.pushed, after.popped - before.popped
    if (pushed, popped) != (count, count):
        problems.append(f"the queue took {pushed:,} items and gave out {popped:,} for {count:,} tasks")
    left = {"ready": after.size, "leased": after.leased, "delayed": after.delayed, "dead": after.dead}
    if any(left.values()):
        problems.append("items left in the queue: " + ", ".join(f"{n:,} {what}" for what, n in left.items() if n))
    return problems


def _check_immediate(done: list[Any]) -> list[str]:
    """The reference's results: each SUCCESSFUL, run once, with its own argument back."""
    wrong = sum(
        1
        for n, result in enumerate(done)
        if str(result.status) != "SUCCESSFUL" or len(result.worker_ids) != 1 or result.return_value != n
    )
    return [f"{wrong:,} results not SUCCESSFUL after one run with their own argument back"] if wrong else []
