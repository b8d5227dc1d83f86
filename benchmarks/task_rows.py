"""The tasks rows: Django Tasks through :class:`FDBQueueBackend`, against the framework's ImmediateBackend.

A row of ours enqueues N tasks of :func:`benchmarks.tasks.echo` (which returns its
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
SQLite, runs in a process of its own (:mod:`benchmarks.tasks_db_ref`).

The bench plans these rows by the names in :mod:`django_fdbqueue.bench.task_names` and, from a
clone, hands them here through its hook (:func:`measure`); installed from the wheel alone it
skips them, saying so.

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
from typing import TYPE_CHECKING, Any, Callable, Iterator

from django_fdbqueue.bench.progress import Progress
from django_fdbqueue.bench.results import Row
from django_fdbqueue.bench.runner import GRACE_SECONDS, BenchError
from django_fdbqueue.bench.stats import peak_memory_mib, reset_peak_memory
from django_fdbqueue.bench.task_names import (
    BACKEND_ALIAS,
    ENQUEUED_FIRST,
    ENQUEUED_FIRST_WORKERS,
    IMMEDIATE,
    QUEUE_NAME,
    TASK_WORKERS,
    TASKS_DB,
)
from django_fdbqueue.bench.workloads import claim_spread

from . import tasks_db_ref
from .task_run import TaskRun

if TYPE_CHECKING:
    from django_fdbqueue.bench.suite import Bench

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
    "measure",
    "queue_prefix",
    "run_tasks_db",
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
        from . import tasks as bench_tasks  # its Task needs the alias just added

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


# --- the rows of a run -------------------------------------------------------------------------------


def measure(bench: Bench, progress: Progress) -> dict[str, Any] | None:
    """The tasks rows of ``bench``, in plan order, with the bench's own task backends.

    Fills in each row, records failures, warnings and "Skipped" lines on the bench, and returns
    how the rows ran (the run's ``tasks`` metadata); None when the run has none left.
    """
    rows = [row for row in bench.rows if row.group == "tasks"]
    if not rows:
        return None
    framework = framework_description()
    database: dict[str, Any] | None = None
    with bench_backends(bench.run_id) as tasks:
        for row in rows:
            progress.start(row.label())
            run: TaskRun | None
            if row.target == TASKS_DB:
                done = run_tasks_db(bench, row, progress)
                if done is None:
                    continue  # left out, saying why
                run, database = done
            else:
                run = _run_row(bench, tasks, row, progress)
            _record(bench, row, run)
            progress.done(row.summary())
    if not any(row.group == "tasks" for row in bench.rows):
        return None
    return {
        "per_row": bench.config.tasks,
        "workers": list(TASK_WORKERS),
        "framework": framework,
        "backend": "django_fdbqueue.tasks.FDBQueueBackend",
        "reference": immediate_backend_path(),
        "queue_prefix": queue_prefix(bench.run_id),
        "database_backend": database,
    }


def _run_row(bench: Bench, tasks: TaskBench, row: Row, progress: Progress) -> TaskRun:
    """One row of ours or ImmediateBackend's; its notes get its rounds or its enqueues/s."""
    if row.target == IMMEDIATE:
        run = tasks.run_immediate(bench.config.tasks, bench.config.duration)
        row.notes["rounds"] = run.rounds
        return run
    return tasks.run_workers(
        bench.config.tasks,
        row.clients,
        progress.detail,
        enqueue_first=row.mode == ENQUEUED_FIRST,
        spread=claim_spread(row),
    )


def _record(bench: Bench, row: Row, run: TaskRun) -> None:
    """A row's figures from its run, and a failure line when exactly-once did not hold."""
    if row.target != IMMEDIATE:
        row.notes["enqueue_per_s"] = round(run.enqueue_per_s, 2)
        if run.run_per_s is not None:
            row.notes["run_per_s"] = round(run.run_per_s, 2)
    row.ops, row.seconds, row.ops_per_s = run.tasks, round(run.seconds, 6), run.tasks_per_s
    row.peak_mib = run.peak_mib
    if run.retries is not None:
        row.retries_by_code = dict(run.retries)
        row.retries = sum(run.retries.values())
        row.retries_per_op = row.retries / row.ops if row.ops else 0.0
    row.exactly_once = not run.problems
    if run.problems:
        bench.failures.append(f"{row.label()}: " + "; ".join(run.problems) + ".")


def run_tasks_db(bench: Bench, row: Row, progress: Progress) -> tuple[TaskRun, dict[str, Any]] | None:
    """The database backend's row and how it ran; None, and the row left out, when it cannot run or fails.

    The reference is optional, so it never fails the bench: a backend its process cannot
    import is a "Skipped" line, a process that fails or falls silent is a warning.
    """
    try:
        return tasks_db_ref.run_database_backend(bench.config.tasks, progress.detail)
    except tasks_db_ref.ReferenceMissing as missing:
        bench.skipped.append(str(missing))
        progress.note(f"Skipped: {missing}")
    except BenchError as error:
        bench.warnings.append(f"{row.label()}: not measured, the reference failed: {error}")
        progress.note(f"Warning: {bench.warnings[-1]}")
    bench.rows.remove(row)
    return None
