"""Schedules declared in code: ``@periodic`` on a Django task, ``declare(...)`` for any target.

Declarations are kept in this process's registry, checked when made (a bad cron expression
fails at import time), and written to the store by :func:`sync`, which the scheduler calls when
it starts. ``sync`` creates the missing ones and updates those whose definition changed,
keeping their runtime state (paused, last run, last result; ``next_run`` too unless the trigger
or time zone changed). A stored schedule of a declared name that was not declared (made through
REST, the admin or ``create`` before the first sync) is replaced, state and all: the code owns
its names. It never deletes: a schedule no longer declared stays until deleted.

Where declarations are found: :func:`discover` imports every installed app's ``schedules``
module (:data:`MODULE`), as Django's admin imports ``admin.py``, the first time the registry is
read (:func:`declared`: the scheduler's sync, the system check), not when the app starts, so a
process that never reads it pays nothing.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from django.utils.module_loading import autodiscover_modules

from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import now_micros

from . import model, store
from .model import Schedule

logger = logging.getLogger("django_fdbqueue.schedules")

_registry: dict[str, Schedule] = {}
#: The module of each installed app that :func:`discover` imports for its declarations.
MODULE = "schedules"
_discovered = False
_discovering = threading.RLock()  # re-entrant: a schedules module may read the registry itself


def discover() -> None:
    """Import every installed app's ``schedules`` module, once a process (again after a failure).

    A module that fails to import (a refused declaration, a bad import) raises here, as it does
    at Django's start-up for ``admin.py``: a schedule that is silently missing is worse.
    """
    global _discovered
    with _discovering:
        if _discovered:
            return
        _discovered = True
        try:
            autodiscover_modules(MODULE)
        except BaseException:
            _discovered = False
            raise


def declare(
    name: str,
    *,
    queue: str | None = None,
    value: Any = None,
    priority: int = 0,
    task: str | None = None,
    backend: str = "default",
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
    cron: str | None = None,
    interval: float | None = None,
    tz: str = "UTC",
    catch_up: str = "last",
) -> Schedule:
    """Declare a schedule that pushes ``value`` to ``queue``, or enqueues the task at ``task`` (a dotted path)."""
    if (queue is None) == (task is None):
        from django_fdbqueue.exceptions import InvalidSchedule

        raise InvalidSchedule("Declare a queue to push to, or a task to enqueue (exactly one).", field="target")
    target = (
        {"kind": "push", "queue": queue, "value": value, "priority": priority}
        if queue is not None
        else {"kind": "task", "task": task, "backend": backend, "args": args or [], "kwargs": kwargs or {}}
    )
    schedule = model.make(name, target, cron=cron, interval=interval, tz=tz, catch_up=catch_up, declared=True)
    _registry[schedule.name] = schedule
    return schedule


def periodic(
    cron: str | None = None,
    *,
    interval: float | None = None,
    name: str | None = None,
    tz: str = "UTC",
    catch_up: str = "last",
    backend: str = "default",
    args: list[Any] | None = None,
    kwargs: dict[str, Any] | None = None,
) -> Callable[[Any], Any]:
    """Decorate a Django task (put it above ``@task``) to enqueue it on a schedule.

    The schedule's name defaults to the task's dotted path. Returns the task unchanged.
    """

    def decorate(task: Any) -> Any:
        path = getattr(task, "module_path", None) or f"{task.__module__}.{task.__qualname__}"
        declare(
            name or path,
            task=path,
            backend=backend,
            args=args,
            kwargs=kwargs,
            cron=cron,
            interval=interval,
            tz=tz,
            catch_up=catch_up,
        )
        return task

    return decorate


def declared() -> list[Schedule]:
    """The schedules declared in this process, by name (the apps' ``schedules`` modules imported first)."""
    discover()
    return [_registry[name] for name in sorted(_registry)]


def forget(name: str) -> None:
    """Drop a declaration from this process's registry (the stored schedule stays)."""
    _registry.pop(name, None)


def sync(db: Any, schedules: list[Schedule] | None = None) -> list[str]:
    """Create or update the declared schedules in the store; the names created or changed."""
    return [s.name for s in (declared() if schedules is None else schedules) if _sync_one(db, s)]


@transactional
def _sync_one(tr: Any, declared_one: Schedule) -> bool:
    old = store.read(tr, declared_one.name)
    if old is not None and old.declared and old.definition() == declared_one.definition():
        return False
    now_us = now_micros()
    if old is not None and not old.declared:
        # Made through REST, the admin or the Python API under a name the code declares, maybe by
        # someone who may manage some queue but not the code's target: the code's takes over,
        # with a state of its own (not paused, no runs), never the other's.
        logger.warning("Schedule %r is declared in code: the stored one, not declared, is replaced.", old.name)
    if old is None or not old.declared:
        new = declared_one.replace(anchor_us=now_us)
    else:
        new = old.replace(**declared_one.definition(), declared=True)
        if (new.cron, new.interval, new.tz) == (old.cron, old.interval, old.tz):
            store.write(tr, new, old)
            return True
        new = new.replace(anchor_us=now_us)
    store.write(tr, new.replace(next_run_us=model.next_after(new, now_us)), old)
    return True
