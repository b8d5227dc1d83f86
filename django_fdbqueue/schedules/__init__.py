"""Periodic schedules: push an item, or enqueue a Django task, on a cron expression or an interval.

A capability on top of the queue service (it calls ``service``; the service knows nothing of
it), with the same shape: every function takes a database or a transaction first.

* ``model``: what a schedule is (definition, state, catch-up policies) and its occurrences.
* ``store``: its keys under the app's root and the Python API: create, get, list, update, pause,
  resume, delete.
* ``firing``: firing exactly once (``fire``, ``fire_due``, ``run_now``).
* ``registry``: ``@periodic`` and ``declare`` in code, written to the store by ``sync``.
* ``scheduler``: the loop behind ``manage.py fdbqueue scheduler``.

Its faces: the REST viewset (``api/schedules.py``), the admin page (``admin/schedules.py``) and
the command (``cli/schedules.py``). docs/howto/schedules.md shows it at work.
"""

from __future__ import annotations

from .registry import declare, declared, periodic, sync
from .firing import Fired, fire, fire_due, run_now
from .model import CATCH_UP_POLICIES, GRACE_SECONDS, MAX_CATCH_UP, Schedule
from .scheduler import Scheduler, run_once
from .store import create, delete, get, list_schedules, pause, resume, update

__all__ = [
    "Schedule",
    "Fired",
    "CATCH_UP_POLICIES",
    "GRACE_SECONDS",
    "MAX_CATCH_UP",
    "create",
    "get",
    "list_schedules",
    "update",
    "pause",
    "resume",
    "delete",
    "run_now",
    "fire",
    "fire_due",
    "declare",
    "declared",
    "periodic",
    "sync",
    "Scheduler",
    "run_once",
]
