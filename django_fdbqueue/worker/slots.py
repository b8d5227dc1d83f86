"""The slot threads: each claims an item, hands it to the handler and has it settled, in a loop.

A claim waits for work in short slices (``poll_wait``), so a stop is noticed within about that
long even on an idle queue; in a burst it does not wait at all. A failed claim is logged and
retried after a bounded, jittered back-off: store errors never end a slot.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.fdbapi import FDBError, Transaction, describe

from .ack_with import AckWith
from .backoff import Backoff
from .burst import Burst
from .settling import Settler
from .state import Held, Target, WorkerState

__all__ = ["ClaimOptions", "MAX_STORE_BACKOFF", "Slot"]

logger = logging.getLogger("django_fdbqueue.worker")

#: Longest pause after a store error before the next claim.
MAX_STORE_BACKOFF = 10.0


@dataclass(frozen=True)
class ClaimOptions:
    """How every slot of a worker claims: from which end, waiting how long, how spread or in which
    mode, with what step."""

    end: str
    poll_wait: float
    spread: int | None
    on_claim: Callable[[Transaction, service.Lease], Any] | None
    mode: service.ClaimMode = "plain"


class Slot:
    """One slot thread's work: claim, handle, settle, until the worker stops (or its burst is over)."""

    def __init__(
        self,
        index: int,
        target: Target,
        state: WorkerState,
        settler: Settler,
        handler: Callable[..., object],
        options: ClaimOptions,
        burst: Burst | None = None,
        member: int = 0,
    ) -> None:
        self.index = index
        self.target = target
        self.state = state
        self.settler = settler
        self.handler = handler  # one argument or two: see Worker's on_claim
        self.options = options
        self.burst = burst
        self.member = member  # this slot's place in the burst

    def run(self) -> None:
        """The thread's body."""
        backoff = Backoff(initial=0.1, maximum=MAX_STORE_BACKOFF)
        burst = self.burst
        try:
            while self._running():
                seen = burst.claiming(self.member) if burst else 0
                claimed, lease = self.claim_once(backoff)
                claimed_at = time.monotonic()  # after the claim's wait, not before it
                if not claimed:
                    continue
                if lease is None:
                    if burst:
                        burst.found_nothing(self.member, seen, self.options.poll_wait)
                    continue
                self.work_on(Held(lease, claimed_at, self.target.lease))
        finally:
            if self.index == 0 and burst is not None and burst.over:
                logger.info("Worker on queue %r: nothing ready and nothing in hand, burst over.", self.target.queue)
            self.state.notify()

    def handle(self, held: Held) -> None:
        """Call the handler on a held item, then have the item settled by what it did."""
        item, options = held.item, self.options
        logger.debug("Handling item %s of queue %r (attempt %d).", item.id, self.target.queue, item.attempts)
        try:
            if options.on_claim is None:
                returned = self.handler(item)
            else:
                returned = self.handler(item, held.step_result)
        except BaseException as error:  # noqa: BLE001 - whatever the handler raises, the item goes back
            failure: BaseException | None = error
            returned = None
        else:
            failure = None
        # A handler's writes to commit with its ack (see ack_with): committed alone if no ack comes.
        writes = returned if isinstance(returned, AckWith) else None
        self.settler.finished(held, failure, writes)

    def _running(self) -> bool:
        return not self.state.stopping.is_set() and not (self.burst is not None and self.burst.over)

    def claim_once(self, backoff: Backoff) -> tuple[bool, Any]:
        """(True, the lease or None when nothing was ready), or (False, None) after a failed claim
        and its back-off: failures are logged, never fatal."""
        target, options = self.target, self.options
        try:
            # In a burst, a claim that finds nothing answers at once: not waiting is the point.
            wait = None if self.burst else options.poll_wait
            lease = service.claim(
                target.db,
                target.queue,
                lease=target.lease,
                end=options.end,
                wait=wait,
                step=options.on_claim,
                spread=options.spread,
                mode=options.mode,
            )
        except FDBError as error:
            self.state.count(store_errors=1)
            pause = backoff.next()
            logger.warning(
                "Claim on queue %r failed: %s (FoundationDB error %s); retrying in %.1fs.",
                target.queue,
                describe(error),
                getattr(error, "code", None),
                pause,
            )
            self.state.stopping.wait(pause)
            return False, None
        except Exception as error:  # noqa: BLE001 - a deleted queue, a bug: log, never die
            pause = backoff.next()
            logger.error(
                "Claim on queue %r failed: %s; retrying in %.1fs.",
                target.queue,
                error,
                pause,
                exc_info=not isinstance(error, QueueError),  # a traceback only for the unexpected
            )
            self.state.stopping.wait(pause)
            return False, None
        backoff.reset()
        return True, lease

    def work_on(self, held: Held) -> None:
        """Handle one claimed item, in this slot's place where the heartbeat sees its lease meanwhile."""
        state = self.state
        with state.cond:
            state.held[self.index] = held
            state.cond.notify_all()  # the heartbeat has a new lease to look after
        try:
            if state.aborting.is_set():
                self.settler.hand_back(held)  # claimed while aborting: hand it straight back
            else:
                self.handle(held)
        except Exception:  # noqa: BLE001 - the worker's own mistake: keep the thread alive
            logger.exception("Unexpected error in the worker of queue %r.", self.target.queue)
        finally:
            with state.cond:
                state.held[self.index] = None
                state.cond.notify_all()
            if self.burst:
                self.burst.settled()
