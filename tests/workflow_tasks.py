"""Task functions for the workflow tests: module-level, as the framework requires."""

from __future__ import annotations

from pathlib import Path

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task

from django_fdbqueue.tasks.workflows import predecessor_results


@task()
def double(x: int) -> int:
    return 2 * x


@task(takes_context=True)
def collect(context, log: str | None = None, page_size: int = 500) -> list:
    """The predecessors' results in order: values, or "error:<class path>" for a failed one.

    With ``log``, appends a line to that file per run, so a test counts the runs.
    """
    if log is not None:
        with open(log, "a", encoding="utf-8") as out:
            out.write(f"{context.task_result.id}\n")
    return [
        r.return_value if r.succeeded else f"error:{r.errors[-1].exception_class_path}"
        for r in predecessor_results(context, page_size=page_size)
    ]


@task(takes_context=True)
def total(context) -> int:
    """The sum of the predecessors' values (a callback over many members)."""
    return sum(r.return_value for r in predecessor_results(context))


@task()
def touch(path: str, label: str) -> str:
    """Append ``label`` to a file, the order steps ran in."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(label + "\n")
    return label


@task()
def wait_for(path: str, started: str | None = None) -> str:
    """Say it started (a file), then wait until ``path`` exists (bounded)."""
    import time

    if started is not None:
        Path(started).write_text("", encoding="utf-8")
    deadline = time.monotonic() + 60
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError("never released")
        time.sleep(0.02)
    return "released"


@task()
def explode(message: str) -> None:
    raise ValueError(message)
