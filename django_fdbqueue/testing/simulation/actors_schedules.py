"""Schedules firing: two schedulers race to fire one declared schedule into a queue of its own.

The schedule fires every few (virtual) seconds with ``catch_up="all"``, so the documented
guarantee is exact: **each due occurrence fires exactly once**, however many schedulers run and
whatever faults they meet. Checked two ways:

* no occurrence is reported fired by two firings (a double firing from two schedulers racing, or
  a retry after a commit in doubt that fired again);
* at the end, once a last pass (faults off) has fired what is due, the queue holds one item for
  each occurrence from the schedule's first to that moment: none skipped, none twice (the
  pushes' dedup keys would hide a second push of one occurrence, not a skipped one).
"""

from __future__ import annotations

import collections
import random
from functools import partial
from typing import Any

from django_fdbqueue import service
from django_fdbqueue.exceptions import ScheduleNotFound
from django_fdbqueue.schedules import firing, model, registry, store

from .workload import Actors

SCHEDULE_QUEUE = "sched"
SCHEDULE = "sim-every"
INTERVAL_SECONDS = 5
QUEUES: dict[str, dict[str, Any]] = {SCHEDULE_QUEUE: {"kind": "fifo"}}


def declared() -> model.Schedule:
    """The schedule, as declared in code (``schedules.declare``), without touching the registry."""
    target = {"kind": "push", "queue": SCHEDULE_QUEUE, "value": "tick", "priority": 0}
    return model.make(SCHEDULE, target, interval=INTERVAL_SECONDS, catch_up="all", declared=True)


class Schedules:
    """The schedulers and the oracle of their firings (see the module's docstring)."""

    def __init__(self, actors: Actors) -> None:
        self.actors = actors
        self.fired: dict[int, str] = {}  # occurrence (microseconds): the scheduler that fired it
        self.final_us = 0

    def spawn(self, shape: Any, spawn: Any) -> None:
        spawn("scheduler", shape.schedulers, self.scheduler)

    def scheduler(self, name: str, rng: random.Random, operations: int) -> None:
        """What ``manage.py fdbqueue scheduler`` does: sync the declared schedule, then fire what is
        due, again and again (its own loop waits on a real event; this one on the virtual clock)."""
        db = self.actors.db
        self.actors._call(name, "sync the declared schedule", partial(registry.sync, db, [declared()]))
        for _ in range(max(1, operations // 4)):
            fired, _doubt, _error = self.actors._call(name, "fire due", partial(firing.fire_due, db))
            for one in fired or ():
                self._fired(name, one.occurrences)
            self.actors.scheduler.sleep(rng.uniform(0.5, 2.0 * INTERVAL_SECONDS))

    def _fired(self, name: str, occurrences: list[int]) -> None:
        for occurrence in occurrences:
            other = self.fired.get(occurrence)
            if other is not None:
                self.actors.history.violate("schedule", f"occurrence {occurrence} fired by {other} and again by {name}")
            self.fired[occurrence] = name

    def wound_down(self, skew_ms: float) -> None:
        """The actors stopped: the last pass fires at a wall time no actor's clock had reached."""
        self.final_us = int((self.actors.scheduler.clock.wall() + skew_ms / 1000 + 0.5) * 1_000_000)

    def final(self, oracle: Any) -> None:
        """Fire what is due (faults off), then one item per occurrence up to then."""
        db = self.actors.db
        for one in firing.fire_due(db, self.final_us):
            self._fired("the last pass", one.occurrences)
        try:
            schedule = store.get(db, SCHEDULE)
        except ScheduleNotFound:
            schedule = None  # never synced: no scheduler got that far
        due = 0
        if schedule is not None:
            step = INTERVAL_SECONDS * 1_000_000
            due = max(0, (self.final_us - schedule.anchor_us) // step)
            if (schedule.last_result or {}).get("skipped"):
                self.actors.history.violate("schedule", f"a firing skipped due occurrences: {schedule.last_result}")
        oracle._recount(SCHEDULE_QUEUE)
        items = 0
        while service.pop(db, SCHEDULE_QUEUE) is not None:
            items += 1
        if items != due:
            self.actors.history.violate("schedule", f"{items} items pushed by {SCHEDULE!r} for {due} due occurrences")
        counts = collections.Counter(self.fired.values())
        self.actors.scheduler.note(f"schedule fired {len(self.fired)} occurrences: {dict(counts)}")
