"""What a schedule is: its definition (checked here, before anything is stored) and its occurrences.

A schedule's *definition* is what its owner chose: a name, a target (push a value, or enqueue a
task), a trigger (a cron expression, or an interval from its ``anchor``), a time zone and a
catch-up policy. Its *state* is what firing changes: paused, next_run, last_run, last result.
Both travel as one :class:`Schedule` record (see ``store`` for where it is kept), and
:func:`due_occurrences` applies the catch-up policy to what is due.

The target's form, the triggers and the catch-up policies: the schedules guide
(docs/howto/schedules.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import re
import zoneinfo
from typing import Any

from croniter import croniter

from django_fdbqueue.exceptions import InvalidArgument, InvalidSchedule

#: The most missed occurrences one firing of a catch_up="all" schedule pushes (the latest ones).
MAX_CATCH_UP = 100
#: How late an occurrence may be fired and still count as on time for catch_up="none".
GRACE_SECONDS = 60
CATCH_UP_POLICIES = ("last", "all", "none")
NAME_MAX_LENGTH = 100
#: The shortest interval (seconds), and the longest (one year).
MIN_INTERVAL, MAX_INTERVAL = 1, 366 * 86_400
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,%d}" % NAME_MAX_LENGTH)
_TASK_PATH_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_SECOND = 1_000_000


@dataclasses.dataclass(frozen=True)
class Schedule:
    """One schedule: definition (name .. catch_up, anchor_us) and state (paused .. last_result)."""

    name: str
    target: dict[str, Any]
    cron: str | None = None
    interval: float | None = None
    tz: str = "UTC"
    catch_up: str = "last"
    anchor_us: int = 0
    declared: bool = False
    paused: bool = False
    next_run_us: int | None = None
    last_run_us: int | None = None
    #: {"status": "ok" | "error", "detail": text, "item": id or None, "task_result": id or None,
    #:  "fired": occurrences fired, "skipped": missed occurrences skipped, "at_us": when}
    last_result: dict[str, Any] | None = None
    #: Random, chosen by the ``create`` call that stored it: its retry after 1021 knows its own record.
    token: str = ""

    def pack(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"), sort_keys=True).encode()

    @classmethod
    def unpack(cls, raw: bytes) -> "Schedule":
        return cls(**json.loads(bytes(raw)))

    def definition(self) -> dict[str, Any]:
        """The fields its owner chose (what ``declare`` compares and ``update`` changes)."""
        return {
            "target": self.target,
            "cron": self.cron,
            "interval": self.interval,
            "tz": self.tz,
            "catch_up": self.catch_up,
        }

    def replace(self, **changes: Any) -> "Schedule":
        return dataclasses.replace(self, **changes)


# --- checks ------------------------------------------------------------------------------------


def target_queue(target: dict[str, Any]) -> str | None:
    """The queue a schedule's target pushes to; None for a task (its task picks the queue)."""
    return target.get("queue") if target.get("kind") == "push" else None


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidSchedule(
            f"Schedule names are 1 to {NAME_MAX_LENGTH} characters of letters, digits, '.', '_' and '-'.", field="name"
        )
    return name


def check_tz(tz: object) -> str:
    if not isinstance(tz, str) or not tz:
        raise InvalidSchedule("tz must be an IANA time zone name such as 'UTC' or 'Europe/Paris'.", field="tz")
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(
            f"Unknown time zone {tz!r}: use an IANA name such as 'Europe/Paris'.", field="tz"
        ) from None
    return tz


def check_catch_up(catch_up: object) -> str:
    if catch_up not in CATCH_UP_POLICIES:
        raise InvalidSchedule(
            f"catch_up must be one of {', '.join(CATCH_UP_POLICIES)}, not {catch_up!r}.", field="catch_up"
        )
    return catch_up


def check_trigger(cron: object, interval: object) -> tuple[str | None, float | None]:
    """Exactly one of a valid cron expression and an interval in seconds (1 s to 366 days)."""
    if (cron is None) == (interval is None):
        raise InvalidSchedule("Give a cron expression or an interval in seconds (exactly one).", field="cron")
    if cron is not None:
        if not isinstance(cron, str) or len(cron) > 200 or not croniter.is_valid(cron):
            raise InvalidSchedule(
                f"{cron!r} is not a valid cron expression (five fields, e.g. '*/5 * * * *').", field="cron"
            )
        return " ".join(cron.split()), None
    if (
        isinstance(interval, bool)
        or not isinstance(interval, (int, float))
        or not math.isfinite(interval)
        or not MIN_INTERVAL <= interval <= MAX_INTERVAL
    ):
        raise InvalidSchedule(
            f"interval must be a number of seconds from {MIN_INTERVAL} to {MAX_INTERVAL}, not {interval!r}.",
            field="interval",
        )
    return None, float(interval)


def check_target(target: object) -> dict[str, Any]:
    """A push target (queue, JSON value, priority) or a task target (dotted path, backend, arguments)."""
    if not isinstance(target, dict) or target.get("kind") not in ("push", "task"):
        raise InvalidSchedule(
            "target must be {'kind': 'push', 'queue': ...} or {'kind': 'task', 'task': ...}.", field="target"
        )
    return _push_target(target) if target["kind"] == "push" else _task_target(target)


def _push_target(target: dict[str, Any]) -> dict[str, Any]:
    from django_fdbqueue.service.extension import check_name, check_priority

    queue = check_name(target.get("queue"))
    priority = check_priority(target.get("priority", 0))
    value = target.get("value")
    _check_json(value, "value")
    return {"kind": "push", "queue": queue, "value": value, "priority": priority}


def _task_target(target: dict[str, Any]) -> dict[str, Any]:
    path, backend = target.get("task"), target.get("backend", "default")
    if not isinstance(path, str) or not _TASK_PATH_RE.fullmatch(path):
        raise InvalidSchedule(f"task must be the dotted path of a task function, not {path!r}.", field="task")
    if not isinstance(backend, str) or not backend:
        raise InvalidSchedule("backend must be the alias of a TASKS backend.", field="backend")
    args, kwargs = target.get("args", []), target.get("kwargs", {})
    if not isinstance(args, list) or not isinstance(kwargs, dict):
        raise InvalidSchedule("args must be a list and kwargs an object.", field="args")
    _check_json([args, kwargs], "args")
    return {"kind": "task", "task": path, "backend": backend, "args": args, "kwargs": kwargs}


def _check_json(value: Any, field: str) -> None:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise InvalidSchedule(f"{field} must be JSON: {error}", field=field) from None


def make(
    name: Any,
    target: Any,
    *,
    cron: Any = None,
    interval: Any = None,
    tz: Any = "UTC",
    catch_up: Any = "last",
    paused: Any = False,
    anchor_us: int = 0,
    declared: bool = False,
) -> Schedule:
    """A checked Schedule without state (next_run is set when it is stored)."""
    cron, interval = check_trigger(cron, interval)
    if not isinstance(paused, bool):
        raise InvalidArgument("paused must be true or false.", field="paused")
    return Schedule(
        check_name(name),
        check_target(target),
        cron,
        interval,
        check_tz(tz),
        check_catch_up(catch_up),
        anchor_us,
        declared,
        paused,
    )


# --- occurrences ---------------------------------------------------------------------------------


def _local(micros: int, tz: str) -> dt.datetime:
    return (_EPOCH + dt.timedelta(microseconds=micros)).astimezone(zoneinfo.ZoneInfo(tz))


def _micros(moment: dt.datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * _SECOND + delta.microseconds


def next_after(schedule: Schedule, after_us: int) -> int:
    """The first occurrence strictly after ``after_us``."""
    if schedule.interval is not None:
        step = int(schedule.interval * _SECOND)
        count = (after_us - schedule.anchor_us) // step + 1
        return schedule.anchor_us + max(count, 1) * step
    return _micros(croniter(schedule.cron, _local(after_us, schedule.tz)).get_next(dt.datetime))


def latest_until(schedule: Schedule, until_us: int, since_us: int, limit: int) -> list[int]:
    """Occurrences in ``[since_us, until_us]``, the latest ``limit`` of them, oldest first."""
    if schedule.interval is not None:
        step = int(schedule.interval * _SECOND)
        last = schedule.anchor_us + (until_us - schedule.anchor_us) // step * step
        found = [last - k * step for k in range(limit) if last - k * step >= since_us]
        return found[::-1]
    start = _local(until_us - until_us % _SECOND + _SECOND, schedule.tz)  # get_prev is strict
    walker = croniter(schedule.cron, start)
    found = []
    while len(found) < limit:
        moment = _micros(walker.get_prev(dt.datetime))
        if moment < since_us:
            break
        if moment <= until_us:
            found.append(moment)
    return found[::-1]


def due_occurrences(schedule: Schedule, now_us: int) -> tuple[list[int], bool]:
    """The occurrences to fire now under the catch-up policy, and whether due ones are skipped.

    Due means in ``[next_run, now]``; an occurrence is skipped when it is due but not fired.
    """
    next_us = schedule.next_run_us
    if next_us is None or next_us > now_us:
        return [], False
    if schedule.catch_up == "all":
        fire = latest_until(schedule, now_us, next_us, MAX_CATCH_UP)
    else:
        fire = latest_until(schedule, now_us, next_us, 1)
        if schedule.catch_up == "none" and fire and now_us - fire[-1] > GRACE_SECONDS * _SECOND:
            fire = []
    return fire, not (fire and fire[0] == next_us)  # skipped: at least the one at next_run


def iso(micros: int | None) -> str | None:
    """Microseconds since the epoch as ISO 8601 in UTC with a ``Z`` (as the REST API shows times)."""
    if micros is None:
        return None
    return (_EPOCH + dt.timedelta(microseconds=micros)).isoformat().replace("+00:00", "Z")


def as_data(schedule: Schedule) -> dict[str, Any]:
    """The schedule as JSON-ready data, times in ISO 8601: what the REST API and ``--json`` show."""
    last = dict(schedule.last_result) if schedule.last_result else None
    if last is not None:
        last["at"] = iso(last.pop("at_us", None))
    return {
        "name": schedule.name,
        "target": schedule.target,
        "cron": schedule.cron,
        "interval": schedule.interval,
        "tz": schedule.tz,
        "catch_up": schedule.catch_up,
        "paused": schedule.paused,
        "declared": schedule.declared,
        "next_run": None if schedule.paused else iso(schedule.next_run_us),
        "last_run": iso(schedule.last_run_us),
        "last_result": last,
    }
