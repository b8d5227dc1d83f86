"""The settling policy: what becomes of an item once its handler is done, or the worker aborts.

A handler that returned gets its item acked (with its writes, for ``AckWith``); one that raised
gets it released with a delay that grows with the item's attempts; an abort hands it back at
once. Store errors are retried while the lease lasts, after which the item comes back by itself;
a retried ack that finds the lease over asks the queue whether the earlier attempt applied.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import LeaseExpired, LeaseNotFound, QueueError
from django_fdbqueue.fdbapi import FDBError, describe, transactional

from .ack_with import AckWith, ack_with, run_alone
from .backoff import Backoff, retry_delay
from .state import Held, Target, WorkerState

__all__ = ["Settler"]

logger = logging.getLogger("django_fdbqueue.worker")


class Settler:
    """Acks, releases and hands back the items of one worker, counting what became of each."""

    def __init__(self, target: Target, state: WorkerState, *, base_backoff: float, max_backoff: float) -> None:
        self.target = target
        self.state = state
        self.base_backoff = base_backoff
        self.max_backoff = max_backoff

    @property
    def queue(self) -> str:
        return self.target.queue

    def finished(self, held: Held, failure: BaseException | None, writes: AckWith | None) -> None:
        """The handler is done: it raised ``failure``, or returned (``writes`` if it asked for them)."""
        item = held.item
        with held.lock:
            if held.settled:  # abort() released it meanwhile
                logger.info(
                    "Item %s of queue %r finished after it was released; %s.",
                    item.id,
                    self.queue,
                    "not acknowledged, its writes commit alone" if writes else "result ignored",
                )
                self._writes_alone(writes, item)
                return
            held.settled = True  # from here on the heartbeat leaves it alone
            if held.lost:
                if failure is not None:
                    logger.error("Handler failed on item %s of queue %r.", item.id, self.queue, exc_info=failure)
                logger.warning(
                    "Not acknowledging item %s of queue %r: its lease was lost while the handler ran, "
                    "so it is or will be delivered again.",
                    item.id,
                    self.queue,
                )
                self._writes_alone(writes, item)
                return
            if failure is None:
                self._acknowledge(held, writes)
            else:
                self._give_back(held, failure)

    def hand_back(self, held: Held) -> None:
        """Hand an item back at once, unprocessed (abort)."""
        db = self.target.db
        with held.lock:
            if held.settled or held.lost:
                return
            held.settled = True
            outcome = self._settle(held, "release", lambda: service.release(db, held.receipt, name=self.queue))
        if outcome is not None:
            self.state.count(released=1)
            logger.info("Released item %s of queue %r unprocessed (%s).", held.item.id, self.queue, outcome)

    def _acknowledge(self, held: Held, writes: AckWith | None) -> None:
        """The handler returned: ack the item (with its writes, if it asked for that)."""
        db = self.target.db
        if writes is None:
            acked = self._settle(held, "ack", lambda: service.ack(db, held.receipt, name=self.queue))
        else:
            acked = self._settle(held, "ack", lambda: ack_with(db, held.receipt, self.queue, writes))
        if not acked:
            self._writes_alone(writes, held.item)
            return
        # A handler may settle an item that failed (a task that raised, recorded as FAILED).
        failed = writes is not None and writes.failed
        self.state.count(**{"failed" if failed else "processed": 1})
        # One line per item at the worker's default verbosity: a newcomer sees each one go by.
        logger.info(
            "%s item %s of queue %r (attempt %d).",
            "Recorded the failure of" if failed else "Processed",
            held.item.id,
            self.queue,
            held.item.attempts,
        )
        if writes is not None:
            writes.done(True)

    def _writes_alone(self, writes: AckWith | None, item: Any) -> None:
        if writes is not None:
            run_alone(self.target.db, writes, self.queue, item.id)

    def _give_back(self, held: Held, failure: BaseException) -> None:
        """The handler raised: release the item with a delay that grows with its attempts."""
        item, db = held.item, self.target.db
        delay = retry_delay(item.attempts, base=self.base_backoff, maximum=self.max_backoff)
        logger.error(
            "Handler failed on item %s of queue %r (attempt %d); releasing it with a %.1fs delay.",
            item.id,
            self.queue,
            item.attempts,
            delay,
            exc_info=failure,
        )
        self.state.count(failed=1)
        outcome = self._settle(held, "release", lambda: service.release(db, held.receipt, delay=delay, name=self.queue))
        if outcome == "dead":
            self.state.count(dead=1)
            logger.warning(
                "Item %s of queue %r moved to the dead letters after %d attempts.",
                item.id,
                self.queue,
                item.attempts,
            )

    def _settle(self, held: Held, action: str, call: Callable[[], Any]) -> Any:
        """Run an ack or release, retrying store errors while the lease lasts; None if it did not happen.

        A retry that finds the lease gone after a failed attempt may follow an attempt that did
        apply (its answer was lost), or a lease taken away meanwhile. For a release either way
        the item is back. For an ack, the item still being in the queue tells them apart.
        """
        backoff = Backoff(initial=0.05, maximum=1.0)
        retried = False
        while True:
            try:
                outcome = call()
                return True if outcome is None else outcome  # ack returns None, which here means "failed"
            except LeaseNotFound as error:
                if retried and (action != "ack" or self._ack_applied(held)):
                    logger.info(
                        "Retried %s of item %s of queue %r found the lease over: the earlier attempt applied.",
                        action,
                        held.item.id,
                        self.queue,
                    )
                    return True
                self._lost(held, action, error)
                return None
            except LeaseExpired as error:
                self._lost(held, action, error)
                return None
            except FDBError as error:
                pause = self._retry_pause(held, action, error, backoff)
                if pause is None:
                    return None
                retried = True
                time.sleep(pause)
            except Exception as error:  # noqa: BLE001 - a deleted queue, say: log, keep the worker alive
                logger.error(
                    "Could not %s item %s of queue %r: %s",
                    action,
                    held.item.id,
                    self.queue,
                    error,
                    exc_info=not isinstance(error, QueueError),
                )
                return None

    def _retry_pause(self, held: Held, action: str, error: FDBError, backoff: Backoff) -> float | None:
        """How long to wait before retrying a settle that hit a store error; None: give up, since
        the lease would end first (the item then comes back by itself)."""
        self.state.count(store_errors=1)
        pause = backoff.next()
        if time.monotonic() + pause >= held.lease_end:
            logger.error(
                "Could not %s item %s of queue %r: %s (FoundationDB error %s). Giving up: the item "
                "comes back when its lease ends.",
                action,
                held.item.id,
                self.queue,
                describe(error),
                getattr(error, "code", None),
            )
            return None
        logger.warning(
            "Could not %s item %s of queue %r: %s; retrying in %.2fs.",
            action,
            held.item.id,
            self.queue,
            describe(error),
            pause,
        )
        return pause

    def _ack_applied(self, held: Held) -> bool:
        """After a retried ack found the lease over: True if the item is gone for good (acked)."""
        try:
            return not _still_queued(self.target.db, self.queue, held.item.id)
        except Exception as error:  # noqa: BLE001 - cannot tell: say so, and assume it runs again
            logger.warning(
                "Could not tell whether item %s of queue %r was acknowledged: %s", held.item.id, self.queue, error
            )
            return False

    def _lost(self, held: Held, action: str, error: Exception) -> None:
        self.state.count(lost=1)
        logger.warning(
            "Could not %s item %s of queue %r: %s It is or will be delivered again.",
            action,
            held.item.id,
            self.queue,
            error,
        )


@transactional
def _still_queued(tr: Any, queue: str, item_id: str) -> bool:
    """Whether the item is still in the queue: ready, delayed, leased, or a dead letter."""
    return service.get_item(tr, queue, item_id) is not None or service.get_dead_letter(tr, queue, item_id) is not None
