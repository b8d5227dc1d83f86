"""A task for the kill run: one that is still running when its task worker is SIGKILLed.

The demo's example tasks finish in milliseconds, so a kill would almost never catch one; this one
sleeps, so the run can show a task taken from a dead worker coming back after its lease and
finishing on the next worker (two attempts, SUCCESSFUL). Importable by the task worker because
the runs put this directory on its PYTHONPATH.
"""

from __future__ import annotations

import time

try:  # Django 6.0+ has the Tasks framework built in; before, the django-tasks backport provides it
    from django.tasks import task
except ImportError:
    from django_tasks import task


@task()
def hold(seconds: float) -> float:
    """Sleep ``seconds`` (at most 30), then return them."""
    seconds = min(float(seconds), 30.0)
    time.sleep(seconds)
    return seconds
