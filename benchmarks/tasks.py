"""The task the bench's tasks rows enqueue: module-level, so workers can import it by its path.

Importing this module creates a Task, which the framework validates against its backend at
once; the backend is the bench's own alias, which exists only while the bench runs
(:func:`benchmarks.task_rows.bench_backends` adds it to ``TASKS``). Import it only
from there: the project's ``TASKS`` setting plays no part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_fdbqueue.bench.task_names import BACKEND_ALIAS, QUEUE_NAME

if TYPE_CHECKING:  # checked against the backport, as in django_fdbqueue.tasks.compat
    from django_tasks import task
else:
    try:  # Django 6.0 and later
        from django.tasks import task
    except ImportError:  # the django-tasks backport
        from django_tasks import task

__all__ = ["echo"]


@task(backend=BACKEND_ALIAS, queue_name=QUEUE_NAME)
def echo(n: int) -> int:
    """Return ``n``: as little work as a task can do, so the rows measure the machinery around it.

    Returning its argument lets the bench check that each result belongs to its own task.
    """
    return n
