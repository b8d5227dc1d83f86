"""Tasks of the workflows bench (``workflows.py``): a chord's members and its callback.

Importable by the task workers because the runs put this directory on their PYTHONPATH. The
callback writes one line to a file each time it *starts*, before it reads anything, so the bench
counts its starts whatever happens to the worker afterwards; it returns the sum of its
predecessors' values, which the bench compares with the sum it expects.
"""

from __future__ import annotations

import json
import os
import time

try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    from django.tasks import task
except ImportError:
    from django_tasks import task

from django_fdbqueue.tasks.workflows import predecessor_results


@task()
def member(number: int, pause: float = 0.0) -> int:
    """Return ``number``, after sleeping ``pause`` seconds (at most 10; 0 by default)."""
    if pause > 0:
        time.sleep(min(float(pause), 10.0))
    return number


@task()
def ping(path: str) -> int:
    """Append this worker's pid to the file ``path`` (the bench waits for every worker's), then
    sleep a moment, so that one round of pings spreads over all the workers' threads."""
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(0.1)
    return os.getpid()


@task(takes_context=True)
def callback(context, starts: str) -> int:
    """Append a line to the file ``starts`` (result id, pid, time), then sum what the members returned."""
    line = json.dumps({"id": context.task_result.id, "pid": os.getpid(), "t": time.time()})
    # One write of one short line in append mode: lines of processes writing at once never mix.
    with open(starts, "a", encoding="utf-8") as out:
        out.write(line + "\n")
    return sum(result.return_value for result in predecessor_results(context))
