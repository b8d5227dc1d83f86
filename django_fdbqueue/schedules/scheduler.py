"""The scheduler loop: fire what is due, wait until the next due time (bounded), again.

Run as many schedulers as you like (one per host, say): each occurrence fires once however many
run, since firing and advancing are one transaction (``firing``). A schedule created or changed
elsewhere is seen within ``max_wait`` seconds, the longest the loop sleeps between looks.

Each pass also samples the queues' depth and oldest age for the activity charts, at most once a
minute per process (``service.activity.SAMPLER``; a failed sample is logged, the loop goes on).

``clock`` (a callable returning microseconds since the epoch) replaces the wall clock, for tests
and for replaying a day; ``stop`` (a ``threading.Event``) ends the loop between passes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from django_fdbqueue.fdbapi import FDBError, describe
from django_fdbqueue.service import activity
from django_fdbqueue.service.records import now_micros

from . import firing, registry, store
from .firing import Fired

logger = logging.getLogger("django_fdbqueue.schedules")

#: The longest the loop sleeps between looks at the due index (seconds).
DEFAULT_MAX_WAIT = 5.0


class Scheduler:
    """Fire the due schedules of ``db`` until ``stop`` is set (see the module docstring)."""

    def __init__(
        self,
        db: Any,
        *,
        clock: Callable[[], int] = now_micros,
        max_wait: float = DEFAULT_MAX_WAIT,
        stop: threading.Event | None = None,
        sync: bool = True,
    ) -> None:
        self.db = db
        self.clock = clock
        self.max_wait = max_wait
        self.stop = stop or threading.Event()
        self.sync = sync
        self.fired: list[Fired] = []

    def run_once(self) -> list[Fired]:
        """One pass: fire every schedule due now."""
        done = firing.fire_due(self.db, self.clock())
        for fired in done:
            logger.info("fired %s at %s: %s", fired.name, fired.occurrences, fired.result.get("status"))
        self.fired.extend(done)
        return done

    def seconds_to_wait(self) -> float:
        """Until the soonest due time, at most ``max_wait`` and at least 0."""
        soonest = store.first_due_us(self.db)
        if soonest is None:
            return self.max_wait
        return min(self.max_wait, max(0.0, (soonest - self.clock()) / 1e6))

    def run(self) -> list[Fired]:
        """Sync the declared schedules, then loop until ``stop`` is set; everything fired."""
        if self.sync:
            registry.sync(self.db)
        while not self.stop.is_set():
            self.stop.wait(self._pass())
        return self.fired

    def _pass(self) -> float:
        """Fire what is due; how long to wait before the next pass. A store failure (a timeout, a
        cluster down) is logged and waited out: the loop goes on, and nothing due is lost."""
        activity.SAMPLER.maybe_sample(self.db)  # the charts' depth and age, once a minute; never raises
        try:
            self.run_once()
            return self.seconds_to_wait()
        except FDBError as error:
            logger.warning("The store failed (%s); trying again in %g s.", describe(error), self.max_wait)
            return self.max_wait


def run_once(db: Any, now_us: int | None = None, *, sync: bool = True) -> list[Fired]:
    """Sync the declared schedules and fire what is due at ``now_us`` (default: now), once."""
    if sync:
        registry.sync(db)
    activity.SAMPLER.maybe_sample(db)  # the charts' depth and age; never raises
    return firing.fire_due(db, now_micros() if now_us is None else now_us)
