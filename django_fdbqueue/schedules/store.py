"""Where schedules are kept, and the Python API that creates, reads, changes and deletes them.

Keys, under the app's root (the same ROOT as the queues, ``catalog.root``)::

    root / "sched" / "s" / name               -> Schedule as JSON (definition and state)
    root / "sched" / "due" / next_run_us / name -> b""     the due index: not paused ones only

A scheduler finds every due schedule with one range read of the due index up to now. Every
change of a schedule rewrites its record and moves its due entry in the same transaction, and
every one reads the record first (an ordinary read), so two writers of one schedule conflict
and the second retries on what the first wrote: that is what makes firing exactly once
(``firing``).

Every function takes a database or an open transaction first, like the service's.
"""

from __future__ import annotations

import os
from typing import Any, cast

from django_fdbqueue.exceptions import InvalidArgument, ScheduleAlreadyExists, ScheduleNotFound
from django_fdbqueue.fdbapi import DatabaseOrTransaction, transactional
from django_fdbqueue.service.extension import root
from django_fdbqueue.service.records import now_micros

from . import model
from .model import Schedule

SPACE = "sched"
RECORDS = "s"
DUE = "due"
LIST_LIMIT_MAX = 1000


def space(tr: Any) -> Any:
    return root(tr)[SPACE]


def record_key(tr: Any, name: str) -> bytes:
    return cast(bytes, space(tr)[RECORDS].pack((name,)))


def due_key(tr: Any, next_run_us: int, name: str) -> bytes:
    return cast(bytes, space(tr)[DUE].pack((next_run_us, name)))


def read(tr: Any, name: str) -> Schedule | None:
    """The schedule (an ordinary, conflict-checked read), or None."""
    raw = tr[record_key(tr, model.check_name(name))]
    return Schedule.unpack(raw) if raw.present() else None


def missing(tr: Any, names: list[str]) -> list[str]:
    """Those of ``names`` that no stored schedule has (the reads are issued together)."""
    reads = [(name, tr[record_key(tr, model.check_name(name))]) for name in names]
    return [name for name, value in reads if not value.present()]


def require(tr: Any, name: str) -> Schedule:
    found = read(tr, name)
    if found is None:
        raise ScheduleNotFound(f"No schedule is named {name!r}.", name=name)
    return found


def write(tr: Any, new: Schedule, old: Schedule | None) -> Schedule:
    """Store ``new`` in place of ``old`` (read in this transaction), moving its due entry."""
    if old is not None and old.next_run_us is not None and not old.paused:
        del tr[due_key(tr, old.next_run_us, old.name)]
    tr[record_key(tr, new.name)] = new.pack()
    if new.next_run_us is not None and not new.paused:
        tr[due_key(tr, new.next_run_us, new.name)] = b""
    return new


def _scheduled(schedule: Schedule, now_us: int) -> Schedule:
    """Anchored now, with its next run after now (a new or retimed schedule)."""
    anchored = schedule.replace(anchor_us=now_us)
    return anchored.replace(next_run_us=model.next_after(anchored, now_us))


# --- the Python API ------------------------------------------------------------------------------


def create(
    db_or_tr: DatabaseOrTransaction,
    name: str,
    target: dict[str, Any],
    *,
    cron: str | None = None,
    interval: float | None = None,
    tz: str = "UTC",
    catch_up: str = "last",
    paused: bool = False,
) -> Schedule:
    """Create a schedule that fires ``target`` on ``cron`` (in ``tz``) or every ``interval`` seconds.

    ``target`` is ``{"kind": "push", "queue": ..., "value": ..., "priority": 0}`` or ``{"kind":
    "task", "task": "dotted.path", "backend": "default", "args": [], "kwargs": {}}``; ``catch_up``
    is "last", "all" or "none" (see ``schedules.model``). Its first run is the first occurrence
    after now. InvalidSchedule (nothing stored) for a bad definition, ScheduleAlreadyExists if
    the name is taken.
    """
    schedule = model.make(name, target, cron=cron, interval=interval, tz=tz, catch_up=catch_up, paused=paused)
    schedule = schedule.replace(token=os.urandom(8).hex())
    return _create(db_or_tr, schedule)


@transactional
def _create(tr: Any, schedule: Schedule) -> Schedule:
    existing = read(tr, schedule.name)
    if existing is not None:
        if existing.token == schedule.token:  # our own first attempt committed (1021)
            return existing
        raise ScheduleAlreadyExists(f"A schedule named {schedule.name!r} already exists.", name=schedule.name)
    return write(tr, _scheduled(schedule, now_micros()), None)


@transactional
def get(tr: Any, name: str) -> Schedule:
    """The schedule named ``name``; ScheduleNotFound otherwise."""
    return require(tr, name)


@transactional
def list_schedules(tr: Any, *, limit: int = LIST_LIMIT_MAX) -> list[Schedule]:
    """Schedules by name (one range read)."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= LIST_LIMIT_MAX:
        raise InvalidArgument(f"limit must be an integer from 1 to {LIST_LIMIT_MAX}.", field="limit")
    records = space(tr)[RECORDS]
    return [Schedule.unpack(kv.value) for kv in tr.get_range(records.range().start, records.range().stop, limit=limit)]


UPDATABLE = ("target", "cron", "interval", "tz", "catch_up")


def update(db_or_tr: DatabaseOrTransaction, name: str, **changes: Any) -> Schedule:
    """Change a schedule's definition; a new trigger or time zone re-anchors it and sets next_run anew.

    Given ``cron`` the interval is dropped and the other way round. Runtime state (last run, last
    result, paused) is kept.
    """
    unknown = set(changes) - set(UPDATABLE)
    if unknown:
        raise InvalidArgument(f"Cannot change {', '.join(sorted(unknown))}; changeable: {', '.join(UPDATABLE)}.")
    if "cron" in changes and changes["cron"] is not None:
        changes.setdefault("interval", None)
    if "interval" in changes and changes["interval"] is not None:
        changes.setdefault("cron", None)
    model.check_name(name)
    return _update(db_or_tr, name, changes)


@transactional
def _update(tr: Any, name: str, changes: dict[str, Any]) -> Schedule:
    old = require(tr, name)
    fields = {**old.definition(), **changes}
    checked = model.make(
        name, fields.pop("target"), paused=old.paused, anchor_us=old.anchor_us, declared=old.declared, **fields
    )
    new = old.replace(**{key: getattr(checked, key) for key in UPDATABLE})
    if (new.cron, new.interval, new.tz) != (old.cron, old.interval, old.tz):
        new = _scheduled(new, now_micros())
    return write(tr, new, old)


@transactional
def pause(tr: Any, name: str) -> Schedule:
    """Stop firing it (its due entry goes); ``resume`` starts again from the next future occurrence."""
    old = require(tr, name)
    return old if old.paused else write(tr, old.replace(paused=True), old)


@transactional
def resume(tr: Any, name: str) -> Schedule:
    """Fire it again, from its next occurrence after now: occurrences while paused are not caught up."""
    old = require(tr, name)
    if not old.paused:
        return old
    return write(tr, old.replace(paused=False, next_run_us=model.next_after(old, now_micros())), old)


@transactional
def delete(tr: Any, name: str) -> bool:
    """Delete it; True if it existed (False also for a retry whose first attempt deleted it)."""
    old = read(tr, name)
    if old is None:
        return False
    if old.next_run_us is not None and not old.paused:
        del tr[due_key(tr, old.next_run_us, old.name)]
    del tr[record_key(tr, name)]
    return True


@transactional
def due_names(tr: Any, now_us: int, limit: int) -> list[str]:
    """Names of the schedules due at ``now_us``, soonest first (a snapshot read: firing re-reads each)."""
    due = space(tr)[DUE]
    end = due.pack((now_us + 1,))
    return [due.unpack(kv.key)[1] for kv in tr.snapshot.get_range(due.range().start, end, limit=limit)]


@transactional
def first_due_us(tr: Any) -> int | None:
    """When the soonest schedule is due (microseconds), or None when none is waiting."""
    due = space(tr)[DUE]
    for kv in tr.snapshot.get_range(due.range().start, due.range().stop, limit=1):
        return cast("int | None", due.unpack(kv.key)[0])
    return None


__all__ = ["create", "get", "list_schedules", "update", "pause", "resume", "delete"]
