"""The process that measures django-tasks' database backend for the bench: ``python -m`` this, with N.

:mod:`~benchmarks.tasks_db_ref` starts it, in a temporary directory, with
:mod:`~benchmarks.tasks_db_settings` as its settings. It creates the backend's table in
its own SQLite file (``migrate``, untimed), then enqueues N tasks of
:func:`benchmarks.tasks.echo` and runs them with the backend's own worker: the
``db_worker`` command with ``--batch``, which exits once no task is ready, one worker in this one
process. Every enqueue comes first, then the worker: neither waits for the other on SQLite's
single write lock, which favours the reference if anything. The time runs from the first enqueue
to the last task's SUCCESSFUL result (seen through the framework's ``task_finished`` signal), as
for the rows of ours; the enqueues alone are timed too.

Exactly once: each enqueued task finished once (one ``task_finished`` per result, none for a
result not enqueued), and its stored result is SUCCESSFUL after one attempt by the one worker,
holding its own argument back; no task is left ready or running, and the table holds no other.

It speaks to the bench in JSON lines on standard output (what else this process would print goes
to standard error): ``{"missing": why}`` when the backend cannot be imported here; otherwise
``{"ready": {...}}`` once migrated (the SQLite file's settings), progress (``enqueued``,
``finished``) at most every quarter of a second, ``{"checking": true}``, and last
``{"result": {...}}``.
"""

from __future__ import annotations

import collections
import json
import sys
import time
from typing import Any, TextIO

from django_fdbqueue.bench.stats import peak_memory_mib, reset_peak_memory
from django_fdbqueue.bench.task_names import BACKEND_ALIAS, QUEUE_NAME

#: The least time between two progress lines.
PROGRESS_SECONDS = 0.25
#: The worker's id, which every stored result must name once.
WORKER_ID = "fdbqueue-bench"


class Channel:
    """JSON lines to the bench, progress lines no more often than :data:`PROGRESS_SECONDS`."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._sent = 0.0

    def send(self, **message: Any) -> None:
        self._stream.write(json.dumps(message) + "\n")
        self._stream.flush()
        self._sent = time.monotonic()

    def progress(self, **message: Any) -> None:
        if time.monotonic() - self._sent >= PROGRESS_SECONDS:
            self.send(**message)


def import_error() -> str | None:
    """Why the database backend cannot run here, or None once it is imported and Django is set up."""
    try:
        import django_tasks_db  # noqa: F401
    except Exception as error:  # ImportError; ValueError when it finds no Tasks framework
        return f"{type(error).__name__}: {error}"
    import django

    django.setup()
    return None


def prepare() -> dict[str, Any]:
    """Create the backend's table (untimed); what the SQLite file runs with."""
    import importlib.metadata
    import sqlite3

    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0, interactive=False)
    with connection.cursor() as cursor:
        journal_mode = cursor.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = cursor.execute("PRAGMA synchronous").fetchone()[0]
    return {
        "package": f"django-tasks-db {importlib.metadata.version('django-tasks-db')}",
        "sqlite_version": sqlite3.sqlite_version,
        "journal_mode": str(journal_mode).lower(),
        "synchronous": {0: "off", 1: "normal", 2: "full", 3: "extra"}.get(synchronous, str(synchronous)),
    }


def measure(count: int, channel: Channel) -> dict[str, Any]:
    """Enqueue ``count`` tasks, then run them with ``db_worker --batch``; timed to the last result."""
    from django.core.management import call_command
    from django_tasks_db.compat import task_finished

    from benchmarks.tasks import echo

    finished: list[tuple[str, str]] = []
    last_finished = [0.0]

    def on_finished(sender: Any, task_result: Any, **kwargs: Any) -> None:
        last_finished[0] = time.monotonic()
        finished.append((task_result.id, str(task_result.status)))
        channel.progress(finished=len(finished))

    task_finished.connect(on_finished, weak=False)
    reset_peak_memory()
    started = time.monotonic()
    ids = []
    for n in range(count):
        ids.append(echo.enqueue(n).id)
        if n % 64 == 0:
            channel.progress(enqueued=n)
    enqueued = time.monotonic()
    call_command(
        "db_worker",
        "--batch",
        "--interval",
        "0",
        "--no-startup-delay",
        "--no-reload",
        "--queue-name",
        QUEUE_NAME,
        "--backend",
        BACKEND_ALIAS,
        "--worker-id",
        WORKER_ID,
        verbosity=0,
    )
    ended = last_finished[0] if finished else time.monotonic()
    peak = peak_memory_mib()
    task_finished.disconnect(on_finished)
    channel.send(checking=True)
    return {
        "tasks": count,
        "seconds": ended - started,
        "enqueue_seconds": enqueued - started,
        "peak_mib": peak,
        "problems": check(ids, finished),
    }


def check(ids: list[str], finished: list[tuple[str, str]]) -> list[str]:
    """What went wrong with exactly-once (nothing, normally); see the module's docstring."""
    from django_tasks_db.models import DBTaskResult

    problems = []
    count = len(ids)
    if len(set(ids)) != count:
        problems.append(f"{count - len(set(ids)):,} result ids given out twice")
    times = collections.Counter(result_id for result_id, _status in finished)
    for number, what in (
        (sum(1 for seen in times.values() if seen > 1), "tasks finished more than once"),
        (len(set(ids) - set(times)), "tasks never finished"),
        (len(set(times) - set(ids)), "tasks finished that were not enqueued"),
        (sum(1 for _id, status in finished if status != "SUCCESSFUL"), "tasks finished but not SUCCESSFUL"),
    ):
        if number:
            problems.append(f"{number:,} {what}")
    fields = ("id", "status", "worker_ids", "args_kwargs", "return_value")
    stored = {str(row[0]): row[1:] for row in DBTaskResult.objects.values_list(*fields)}
    missing = len(set(ids) - set(stored))
    if missing:
        problems.append(f"{missing:,} results missing from the database")
    wrong = sum(
        1
        for n, result_id in enumerate(ids)
        if result_id in stored and stored[result_id] != ("SUCCESSFUL", [WORKER_ID], {"args": [n], "kwargs": {}}, n)
    )
    if wrong:
        problems.append(f"{wrong:,} stored results not SUCCESSFUL after one attempt with their own argument back")
    stray = len(set(stored) - set(ids))
    if stray:
        problems.append(f"{stray:,} results in the database that were not enqueued")
    return problems


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.tasks_db_child N``: measure N tasks, tell the bench."""
    count = int((sys.argv[1:] if argv is None else argv)[0])
    channel = Channel(sys.stdout)
    sys.stdout = sys.stderr  # what Django or the worker would print stays out of the channel
    why = import_error()
    if why is not None:
        channel.send(missing=why)
        return 0
    channel.send(ready=prepare())
    channel.send(result=measure(count, channel))
    return 0


if __name__ == "__main__":
    sys.exit(main())
