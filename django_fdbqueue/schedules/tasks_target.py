"""Enqueueing a schedule's Django task inside the firing transaction.

``FDBQueueBackend.enqueue`` opens its own transaction (it calls ``get_database()``), so it cannot
join the firing one. Its transactional core, ``tasks.backend.enqueue_record(tr, record, ...)``, can:
it writes the task's result record and pushes the queue item in the caller's transaction. We
build the record exactly as ``enqueue`` does and hand it that, so the task is enqueued if and
only if the schedule advances. The ``task_enqueued`` signal is not sent for scheduled tasks
(it would fire before the commit).

The Tasks framework is imported only here, and only when a task target fires: push schedules
work without it.
"""

from __future__ import annotations

from typing import Any

from django_fdbqueue.exceptions import InvalidSchedule
from django_fdbqueue.service.records import now_micros


def new_result_id() -> str | None:
    """A task result id chosen before a transaction (so its retries reuse it), or None without Tasks."""
    try:  # the tasks package needs the framework
        from django_fdbqueue.tasks.results import new_id
    except ImportError:
        return None
    return new_id()


def enqueue_in(tr: Any, target: dict[str, Any], result_id: str | None = None) -> str:
    """Enqueue the target's task in ``tr``; the task result's id."""
    from django.utils.module_loading import import_string

    from django_fdbqueue.tasks import backend as tasks_backend
    from django_fdbqueue.tasks import limits, results
    from django_fdbqueue.tasks.compat import Task
    from django_fdbqueue.tasks.runner import backend_named

    backend = backend_named(target["backend"])
    task = import_string(target["task"])
    if not isinstance(task, Task):
        raise InvalidSchedule(f"{target['task']!r} is not a task (decorate it with @task).")
    backend.validate_task(task)
    record = results.Record(
        id=result_id or results.new_id(),
        task_path=task.module_path,
        backend=backend.alias,
        queue_name=task.queue_name,
        priority=task.priority,
        args=target["args"],
        kwargs=target["kwargs"],
        takes_context=task.takes_context,
        enqueued_us=now_micros(),
    )
    limits.check_new(record)
    tasks_backend.enqueue_record(tr, record, backend.queue_for(task.queue_name), backend.max_attempts, None)
    return record.id
