"""The tasks rows' second reference: django-tasks' database backend on SQLite (WAL), in the same run.

The project's goal for Django Tasks is a ratio: enqueue + run of N tasks through this app's
backend with one worker thread, at least
:data:`~django_fdbqueue.bench.goals.TASKS_VS_DB_BACKEND` times the rate of the database backend
that django-tasks started with (now the ``django-tasks-db`` package) on SQLite in WAL mode. This
module measures that backend beside the rows of ours: it starts
:mod:`~benchmarks.tasks_db_child` in a process of its own, with its own settings
(:mod:`~benchmarks.tasks_db_settings`) and its own SQLite file in a temporary directory
beside the embedded store (the same disk), so neither the user's project nor its database plays
any part. That process enqueues the N tasks, runs them with one ``db_worker --batch``, checks
exactly-once and reports back; this side turns its report into a
:class:`~benchmarks.task_run.TaskRun`.

The backend needs Django 5.2 or later and the package, which is optional (the ``bench-tasks-db``
extra): :func:`missing` says why it cannot run, and the bench then leaves its row out with that
line under "Skipped". Every wait on the process is bounded: it has :data:`READY_SECONDS` to set
up and then :data:`GRACE_SECONDS` between two signs of progress, or it is killed and the row is
left out with a warning. The process and its directory are gone when :func:`run_database_backend`
returns, also when it fails or the bench is interrupted.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import subprocess
import sys
import threading
from typing import IO, Any, Callable, Iterator

from django_fdbqueue.bench.runner import GRACE_SECONDS, READY_SECONDS, BenchError
from django_fdbqueue.bench.task_names import TASKS_DB

from .directory import reference_directory
from .task_run import TaskRun
from .tasks_db_settings import DATABASE_ENV

__all__ = [
    "BACKEND_PATH",
    "ReferenceMissing",
    "TASKS_DB",
    "missing",
    "run_database_backend",
]


class ReferenceMissing(Exception):
    """The database backend cannot run here (found during the run); the message says why."""


#: The backend the reference runs.
BACKEND_PATH = "django_tasks_db.DatabaseBackend"
#: The first Django the backend supports.
NEEDS_DJANGO = (5, 2)
#: How to get the reference.
INSTALL = "the app's 'bench-tasks-db' extra (or pip install django-tasks-db)"
_REFERENCE = "django-tasks database backend reference (the Tasks goal's)"
_CHILD = "benchmarks.tasks_db_child"
_STDERR_TAIL = 2000


def missing() -> str | None:
    """Why the reference cannot run here (for the "Skipped" lines), or None."""
    import django

    if django.VERSION < NEEDS_DJANGO:
        return (
            f"{_REFERENCE}: django-tasks-db needs Django 5.2 or later and this is Django "
            f"{django.get_version()}, so it is not measured; on Django 5.2+, {INSTALL} adds it."
        )
    if importlib.util.find_spec("django_tasks_db") is None:
        return f"{_REFERENCE}: django-tasks-db is not installed, so it is not measured; {INSTALL} adds it."
    return None


def run_database_backend(count: int, detail: Callable[[str], None]) -> tuple[TaskRun, dict[str, Any]]:
    """N tasks through the database backend in its own process: the run, and how it ran (metadata).

    Raises :class:`ReferenceMissing` when the backend cannot be imported there, and BenchError
    when the process fails or falls silent.
    """
    with reference_directory() as (directory, location), _child(count, directory) as (process, lines):
        ready, result = _conversation(process, lines, count, detail)
        try:
            status = process.wait(GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            raise BenchError(f"the database backend's process did not exit within {GRACE_SECONDS:.0f}s") from None
        if status != 0:
            raise BenchError(f"the database backend's process exited with status {status}")
    if ready.get("journal_mode") != "wal":
        raise BenchError(f"the database backend's SQLite file is in {ready.get('journal_mode')} mode, not WAL")
    run = TaskRun(
        result["tasks"],
        result["seconds"],
        result["enqueue_seconds"],
        peak_mib=result["peak_mib"],
        problems=list(result["problems"]),
    )
    meta = {
        **ready,
        "backend": BACKEND_PATH,
        "worker": "db_worker --batch, one worker in the process, started after the last enqueue",
        "connection": "persistent (CONN_MAX_AGE None)",
        "location": location,
    }
    return run, meta


@contextlib.contextmanager
def _child(count: int, directory: str) -> Iterator[tuple[subprocess.Popen, "queue.Queue[str | None]"]]:
    """The reference's process, and the lines it writes; killed on the way out unless it ended."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "benchmarks.tasks_db_settings",
        DATABASE_ENV: os.path.join(directory, "tasks.sqlite3"),
        "PYTHONPATH": _python_path(),
    }
    with open(os.path.join(directory, "stderr.txt"), "w+", encoding="utf-8") as errors:
        # Its own session: Ctrl-C reaches the bench alone, which stops this process itself.
        process = subprocess.Popen(
            [sys.executable, "-m", _CHILD, str(count)],
            cwd=directory,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
            encoding="utf-8",
            start_new_session=True,
        )
        lines: queue.Queue[str | None] = queue.Queue()
        reader = threading.Thread(target=_read, args=(process.stdout, lines), daemon=True)
        reader.start()
        try:
            yield process, lines
        except BenchError as error:
            raise BenchError(f"{error}{_tail(errors)}") from None
        finally:
            if process.poll() is None:
                process.kill()
            process.wait(GRACE_SECONDS)
            reader.join(GRACE_SECONDS)
            if process.stdout is not None:
                process.stdout.close()


def _python_path() -> str:
    """The process's PYTHONPATH: this package's directory first, unless it is a site directory.

    The process starts in the temporary directory, so it finds the package only where Python
    looks anyway, or through this; a site directory is left where it is, after the standard library.
    """
    import site

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sites = {os.path.abspath(path) for path in (*site.getsitepackages(), site.getusersitepackages())}
    parts = [] if root in sites else [root]
    return os.pathsep.join([*parts, *filter(None, [os.environ.get("PYTHONPATH")])])


def _read(stream: IO[str] | None, lines: "queue.Queue[str | None]") -> None:
    if stream is not None:
        with contextlib.suppress(ValueError, OSError):  # closed under it: the bench gave up
            for line in stream:
                lines.put(line)
    lines.put(None)


def _tail(errors: IO[str]) -> str:
    """The end of what the process wrote to standard error, to explain a failure."""
    errors.flush()
    errors.seek(0)
    text = errors.read()[-_STDERR_TAIL:].strip()
    return f"; its standard error ends: {text}" if text else ""


def _conversation(
    process: subprocess.Popen, lines: "queue.Queue[str | None]", count: int, detail: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read the process's lines until its result: (how its SQLite file runs, the result)."""
    ready: dict[str, Any] = {}
    wait = READY_SECONDS
    while True:
        try:
            line = lines.get(timeout=wait)
        except queue.Empty:
            raise BenchError(f"the database backend's process showed no progress for {wait:.0f}s") from None
        if line is None:
            raise BenchError(f"the database backend's process ended without a result ({_status(process)})")
        try:
            message = json.loads(line)
        except ValueError:
            continue  # not ours: the channel is the only writer, but never trust a stray line
        if "missing" in message:
            raise ReferenceMissing(
                f"{_REFERENCE}: django-tasks-db cannot be imported ({message['missing']}), so it is not "
                f"measured; {INSTALL} adds it."
            )
        if "result" in message:
            return ready, message["result"]
        ready = message.get("ready", ready)
        wait = GRACE_SECONDS
        for step in ("enqueued", "finished"):
            if step in message:
                detail(f"{message[step]:,}/{count:,} {step}")


def _status(process: subprocess.Popen) -> str:
    try:
        return f"exit status {process.wait(GRACE_SECONDS)}"
    except subprocess.TimeoutExpired:
        return "it is still running"
