"""What a project's own actor gets in a simulation: the store, its RNG, and the means to be judged.

An actor is a function ``actor(ctx)``. It calls the service (or its own code that calls it) on
``ctx.db`` as usual, and tells the simulation what it did with the items, so that every value is
judged as the standard actors' are: ``ctx.push`` pushes a value of the simulation's making (and
records it), ``ctx.delivered`` says an item was handled for good (after its ack, say). It sleeps
with ``ctx.sleep`` or ``time.sleep`` (virtual either way) and draws its choices from ``ctx.rng``,
so the same seed replays it.
"""

from __future__ import annotations

import random
from typing import Any

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt

from .history import History, Push
from .scheduler import Scheduler
from .workload import Doubt


class ActorContext:
    """One actor's view of the simulation (see the module's docstring)."""

    def __init__(
        self, name: str, db: Any, scheduler: Scheduler, history: History, rng: random.Random, doubt: Doubt
    ) -> None:
        self.name = name
        self._doubt = doubt
        self.db = db
        self.rng = rng
        self._scheduler = scheduler
        self._history = history
        self._pushed = 0

    def now(self) -> float:
        """Virtual seconds since the run began."""
        return self._scheduler.clock.now

    def sleep(self, seconds: float) -> None:
        self._scheduler.sleep(seconds)

    def note(self, text: str) -> None:
        """A line of this actor's own in the run's trace."""
        self._scheduler.note(f"{self.name} {text}")

    def push(self, queue: str, *, dedup: bool = False, **kwargs: Any) -> Any:
        """Push a new value (``"NAME:N"``) to ``queue``, recorded for the verdict; what push returned.

        ``kwargs`` go to ``service.push`` (priority, delay, key, tenant...). Raises what it raised.
        """
        value = f"{self.name}:{self._pushed}"
        self._pushed += 1
        push = Push(value, queue, dedup, kwargs.get("key"), order_ok=False)
        self._history.pushed(push)
        self.note(f"push {value} to {queue}")
        before = self._doubt.count
        try:
            got = service.push(self.db, queue, value, dedup_key=value if dedup else None, **kwargs)
        except (FDBError, QueueError) as error:
            push.doubts = self._doubt.count - before + (1 if commit_in_doubt(error) else 0)
            push.outcome = "unsure" if push.doubts else "failed"
            raise
        push.doubts = self._doubt.count - before
        push.outcome = "doubt" if push.doubts else "ok"
        return got

    def delivered(self, value: str) -> None:
        """``value`` was handled for good (popped, or claimed and acked): count it once."""
        self.note(f"delivered {value}")
        self._history.deliver(value)

    def maybe_delivered(self, value: str) -> None:
        """``value``'s ack was stopped midway, or raised after a commit in doubt: handled, or not."""
        self.note(f"maybe delivered {value}")
        self._history.maybe(value)

    def lossy(self, queue: str) -> None:
        """A pop of ``queue`` ended in doubt (its item may be lost to everyone): allow one loss."""
        self._history.lossy(queue, 1)
