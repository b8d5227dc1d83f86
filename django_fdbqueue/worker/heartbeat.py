"""The heartbeat: one thread per worker that keeps every lease in hand alive.

A third of the way into a lease it extends it by a whole lease again, so a handler may run far
longer than ``lease`` while no other worker can claim its item. An extend that finds the lease
over marks the item lost: the slot will neither ack nor release it. Once a minute per process
it also samples the activity charts' gauges (``service.activity.SAMPLER``).
"""

from __future__ import annotations

import logging
import time

from django_fdbqueue import service
from django_fdbqueue.exceptions import LeaseExpired, LeaseNotFound
from django_fdbqueue.fdbapi import FDBError, describe
from django_fdbqueue.service import activity

from .state import HEARTBEAT_FRACTION, Held, Target, WorkerState

__all__ = ["Heartbeat"]

logger = logging.getLogger("django_fdbqueue.worker")


class Heartbeat:
    """The heartbeat thread's work: extend each lease when it falls due, until the worker is done."""

    def __init__(self, target: Target, state: WorkerState) -> None:
        self.target = target
        self.state = state

    def run(self) -> None:
        """The thread's body: wait for the next lease due (or the next sample), extend, again."""
        state = self.state
        while True:
            with state.cond:
                while True:
                    if state.done():
                        return
                    now = time.monotonic()
                    live = [h for h in state.held if h is not None and not h.settled and not h.lost]
                    due = [h for h in live if h.next_extend <= now]
                    if due or activity.SAMPLER.due():
                        break
                    soonest = min((h.next_extend for h in live), default=now + 1.0)
                    state.cond.wait(min(max(soonest - now, 0.005), 1.0))
            # Once a minute per process, the charts' depth and age (logged, never raised, if it fails).
            activity.SAMPLER.maybe_sample(self.target.db)
            for held in due:
                self.extend(held)

    def extend(self, held: Held) -> None:
        """Renew one lease by a whole lease; a lease found over marks the item lost."""
        queue, seconds = self.target.queue, self.target.lease
        with held.lock:
            if held.settled or held.lost:
                return
            started = time.monotonic()
            try:
                lease = service.extend(self.target.db, held.receipt, seconds, name=queue)
            except (LeaseNotFound, LeaseExpired) as error:
                held.lost = True
                self.state.count(lost=1)
                logger.warning(
                    "Lost the lease on item %s of queue %r while its handler runs: %s The result will "
                    "not be acknowledged.",
                    held.item.id,
                    queue,
                    error,
                )
                return
            except Exception as error:  # noqa: BLE001 - FDBError and the unexpected: retry soon
                if isinstance(error, FDBError):
                    self.state.count(store_errors=1)
                retry_in = min(1.0, seconds * HEARTBEAT_FRACTION / 2)
                held.next_extend = time.monotonic() + retry_in
                logger.warning(
                    "Could not extend the lease on item %s of queue %r: %s; retrying in %.2fs.",
                    held.item.id,
                    queue,
                    describe(error) if isinstance(error, FDBError) else error,
                    retry_in,
                )
                return
            held.lease = lease
            held.lease_end = started + seconds
            held.next_extend = started + seconds * HEARTBEAT_FRACTION
