"""The worker: threads that claim items, hand each to a handler, and acknowledge or release it.

Reliable consumption in one loop per thread: ``claim`` (the item stays in the store, hidden for
the lease), ``handler(item)``, then ``ack`` (gone for good) or, when the handler raised,
``release`` with a delay that grows with the item's attempts. An item whose worker dies mid-way
is never lost: its lease runs out and the next claim anywhere gets it again.

The pieces
==========

* **Slot threads** (``concurrency`` of them) each run that loop. A claim waits for work in short
  slices (``poll_wait``, 1 s by default), so a stop is noticed within about that long even on an
  idle queue.
* **One heartbeat thread** keeps every lease in use alive: a third of the way into a lease it
  extends it by a whole lease again, so a handler may run far longer than ``lease`` while
  another worker still cannot claim its item. If an extend finds the lease over
  (``LeaseNotFound``/``LeaseExpired``), the item may already be with someone else: the worker
  logs it and, when the handler returns, neither acks nor releases.
* **Each held item has a lock** that orders the heartbeat's extend, the slot's ack or release and
  an abort's release, so no two of them race on one receipt; a flag says it is settled, after
  which nobody touches the receipt again.

Stopping
========

``stop()`` stops the claiming; handlers already running finish and their items are acked (or
released on error); then ``wait()``/``run()`` return. ``abort()`` (what a second SIGTERM or
Ctrl-C does under :func:`django_fdbqueue.worker.signals.run_until_signalled`) also releases
every held item at once, so other workers can take them, and returns without waiting for the
handlers: their threads are daemons, and whatever they return later is discarded.

Store errors (``FDBError``) never end the worker: a failed claim is logged and retried after a
bounded, jittered back-off; a failed ack or release is retried while the lease lasts, after
which the item simply comes back on its own. A retried ack that finds the lease over asks the
queue whether the item is still there: gone means the failed attempt did ack it (its answer
was lost); still there means it was not acknowledged and will run again, and it counts as lost.

Burst mode (``burst=True``, see ``burst``) ends the worker once nothing is ready and nothing is
in hand, instead of waiting for more work.

The activity charts' gauges (depth, oldest age) are sampled when a worker starts and then once a
minute per process by the heartbeat thread (``service.activity.SAMPLER``), whoever watches.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, TypeAlias, cast

from django_fdbqueue import service
from django_fdbqueue.exceptions import (
    InvalidArgument,
    LeaseExpired,
    LeaseNotFound,
    QueueError,
    WrongQueueKind,
)
from django_fdbqueue.fdbapi import Database, FDBError, Transaction, describe, transactional
from django_fdbqueue.service import activity
from django_fdbqueue.service.extension import check_seconds, check_spread

from .ack_with import AckWith, ack_with, run_alone
from .backoff import Backoff, retry_delay
from .burst import Burst

__all__ = ["Worker", "WorkerStats", "Handler", "logger", "DEFAULT_LEASE"]

logger = logging.getLogger("django_fdbqueue.worker")

#: What a worker calls with each claimed item (and, with ``on_claim``, what it returned);
#: returning is success, raising is failure.
Handler: TypeAlias = Callable[[service.Item], object] | Callable[[service.Item, Any], object]

# Bounds the service enforces too; checked here so a bad setting fails before any thread starts.
MAX_LEASE_SECONDS = service.MAX_LEASE_SECONDS
MAX_WAIT_SECONDS = service.MAX_WAIT_SECONDS
MAX_DELAY_SECONDS = service.MAX_DELAY_SECONDS
MAX_CONCURRENCY = 1_000
#: The lease a worker takes, for queue items and tasks alike. The heartbeat renews it every
#: third of its length while the handler runs, so it does not limit how long a handler may take:
#: it is how long the items of a worker that died (killed, frozen, its machine gone) stay hidden
#: before another worker gets them. Short is better, as long as a renewal (every 10 s) gets
#: through a store's hiccups; the service's default claim lease.
DEFAULT_LEASE = service.DEFAULT_LEASE_SECONDS
#: How often a lease is renewed, as a fraction of its length.
HEARTBEAT_FRACTION = 1 / 3
#: Longest pause after a store error before the next claim.
MAX_STORE_BACKOFF = 10.0


@dataclass
class WorkerStats:
    """What a worker did, for the log line at exit and for callers that want to know."""

    processed: int = 0  # handler returned, item acked
    failed: int = 0  # handler raised, item released (or dead); or acked with AckWith(failed=True)
    dead: int = 0  # of the failed: released for the last time, now a dead letter
    lost: int = 0  # lease over before the worker could settle the item: not acked, it runs again
    released: int = 0  # handed back unprocessed by abort()
    store_errors: int = 0  # FDBErrors met (and retried) along the way

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


class _Held:
    """One claimed item while a slot works on it."""

    __slots__ = ("lease", "step_result", "lock", "next_extend", "lease_end", "settled", "lost")

    def __init__(self, lease: Any, claimed_at: float, seconds: float) -> None:
        self.lease = lease
        # What on_claim returned, kept here: the heartbeat's extends replace ``lease`` with a
        # plain Lease, which does not carry it.
        self.step_result = getattr(lease, "step_result", None)
        self.lock = threading.Lock()
        # ``claimed_at`` is when the claim returned: its lease starts after any wait for an item.
        self.next_extend = claimed_at + seconds * HEARTBEAT_FRACTION  # monotonic clock
        self.lease_end = claimed_at + seconds  # a guess (late by the claim's commit), monotonic clock
        self.settled = False  # acked, released or abandoned: nobody uses the receipt again
        self.lost = False  # an extend found the lease over

    @property
    def item(self) -> Any:
        return self.lease.item

    @property
    def receipt(self) -> str:
        return cast(str, self.lease.receipt)


class Worker:
    """Consume ``queue`` with ``handler``: at-least-once, with retries, back-off and dead letters.

    ``handler(item)`` gets the service's Item (``item.value``, ``item.attempts``, ...). Keep it
    idempotent: an item whose ack was lost (a crash right after the handler, a lease that ran out)
    is handled again. A handler may return :class:`AckWith` to have its own writes commit in the
    ack's transaction (see ``ack_with``). Start with :meth:`run` (blocks) or :meth:`start` and
    :meth:`wait`.

    ``on_claim(tr, lease)``, if given, runs in each claim's own transaction (``service.claim``'s
    ``step``), so what it writes commits with the claim: a task marked running costs no
    transaction of its own. The handler is then called as ``handler(item, what on_claim
    returned)``. It must not raise for an item it cannot handle (that fails the claim, again
    and again): it returns something that tells the handler, which fails the item.

    ``spread`` (2 to 100) is for many workers of one queue: each claim takes one of the first
    ``spread`` ready items at random (``service.claim``), so claims rarely collide, and items leave
    in roughly, not exactly, queue order.

    ``burst=True`` ends the worker once no item is ready and none is in hand (delayed items are
    not waited for); several workers given one :class:`Burst` end together, when that holds for
    all their queues.
    """

    def __init__(
        self,
        db: Database,
        queue: str,
        handler: Handler,
        *,
        concurrency: int = 1,
        lease: float = DEFAULT_LEASE,
        end: str = "min",
        max_backoff: float = 300.0,
        base_backoff: float = 1.0,
        poll_wait: float = 1.0,
        burst: bool | Burst = False,
        on_claim: Callable[[Transaction, service.Lease], Any] | None = None,
        spread: int | None = None,
    ) -> None:
        if not callable(handler):
            raise InvalidArgument(f"The handler must be callable, not {type(handler).__name__}.")
        if on_claim is not None and not callable(on_claim):
            raise InvalidArgument(f"on_claim must be callable as on_claim(tr, lease), not {type(on_claim).__name__}.")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise InvalidArgument(
                f"concurrency must be a whole number from 1 to {MAX_CONCURRENCY}; got {concurrency!r}."
            )
        if end not in ("min", "max"):
            raise InvalidArgument(f"end must be 'min' or 'max', not {end!r}.")
        self.db = db
        self.queue = queue
        self.spread = check_spread(spread)
        self.handler = handler
        self.on_claim = on_claim
        self.concurrency = concurrency
        self.lease = check_seconds(lease, "lease", minimum=0, maximum=MAX_LEASE_SECONDS, inclusive_minimum=False)
        self.end = end
        self.max_backoff = check_seconds(max_backoff, "max_backoff", minimum=0, maximum=MAX_DELAY_SECONDS)
        self.base_backoff = check_seconds(
            base_backoff, "base_backoff", minimum=0, maximum=MAX_DELAY_SECONDS, inclusive_minimum=False
        )
        self.poll_wait = check_seconds(
            poll_wait, "poll_wait", minimum=0, maximum=MAX_WAIT_SECONDS, inclusive_minimum=False
        )
        self.stats = WorkerStats()
        self.burst: Burst | None = Burst() if burst is True else (burst or None)
        # Joined now, before any worker sharing the burst starts claiming (see Burst.join).
        self._members = [self.burst.join() for _ in range(concurrency)] if self.burst else []

        self._cond = threading.Condition()  # guards what follows, and the stats
        self._stopping = threading.Event()
        self._aborting = threading.Event()
        self._slots: list[threading.Thread] = []
        self._slot_held: list[_Held | None] = [None] * concurrency
        self._heartbeat: threading.Thread | None = None

    # --- control ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True once start() (or run()) was called."""
        return bool(self._slots)

    @property
    def stopping(self) -> bool:
        """True once stop() or abort() was called."""
        return self._stopping.is_set()

    def start(self) -> None:
        """Start the threads and return; the queue must exist (QueueNotFound otherwise)."""
        if self._slots:
            raise RuntimeError("This worker was already started; make a new one.")
        self._check_queue()
        for index in range(self.concurrency):
            thread = threading.Thread(
                target=self._slot_main, args=(index,), name=f"fdbqueue-worker-{self.queue}-{index}", daemon=True
            )
            self._slots.append(thread)
        self._heartbeat = threading.Thread(
            target=self._heartbeat_main, name=f"fdbqueue-heartbeat-{self.queue}", daemon=True
        )
        logger.info(
            "Worker started on queue %r: %d thread(s), %gs leases, end %s%s.",
            self.queue,
            self.concurrency,
            self.lease,
            self.end,
            ", until nothing is ready (burst)" if self.burst else "",
        )
        activity.SAMPLER.maybe_sample(self.db)  # the charts' depth and age; never raises
        for thread in self._slots:
            thread.start()
        self._heartbeat.start()

    def run(self) -> WorkerStats:
        """Start, then block until stopped (from another thread, or a signal handler's flag)."""
        self.start()
        try:
            self.wait()
        except BaseException:
            # Ctrl-C without run_until_signalled, say: hand the items back rather than leave
            # them hidden until their leases run out.
            self.abort()
            raise
        return self.stats

    def stop(self) -> None:
        """Take no more work; let the handlers in progress finish and settle their items."""
        if not self._stopping.is_set():
            logger.info(
                "Worker on queue %r stopping: finishing %d item(s) in progress.", self.queue, self.in_progress()
            )
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()

    def abort(self) -> None:
        """Stop at once: release every held item now (their handlers' results will be ignored)."""
        self._stopping.set()
        self._aborting.set()
        with self._cond:
            held = [h for h in self._slot_held if h is not None]
            self._cond.notify_all()
        if held:
            logger.warning("Worker on queue %r aborting: releasing %d item(s) in progress.", self.queue, len(held))
        for entry in held:
            self._release_unfinished(entry)
        with self._cond:
            self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker is done (True) or ``timeout`` seconds pass (False).

        Done means every slot thread ended, or, after abort(), every one still running is stuck
        in a handler whose item was already released.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._done():
                remaining = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def in_progress(self) -> int:
        """How many items the handlers are working on right now."""
        with self._cond:
            return sum(1 for h in self._slot_held if h is not None and not h.settled)

    # --- internals ------------------------------------------------------------------------------

    def _check_queue(self) -> None:
        try:
            info = service.get_queue(self.db, self.queue)
        except FDBError as error:  # the threads will retry; the store may be back soon
            logger.warning("Cannot read queue %r at start (%s); starting anyway.", self.queue, describe(error))
            return
        if info.kind == "fifo" and self.end == "max":
            raise WrongQueueKind(f"Queue {self.queue!r} is a FIFO queue: it is consumed from the min end only.")

    def _done(self) -> bool:  # with self._cond held
        if not self._slots:
            return True
        for index, thread in enumerate(self._slots):
            if not thread.is_alive():
                continue
            held = self._slot_held[index]
            if self._aborting.is_set() and held is not None and held.settled:
                continue  # a handler that outlives abort(): its item is already back
            return False
        return True

    def _count(self, **increments: int) -> None:
        with self._cond:
            for name, amount in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + amount)

    def _running(self) -> bool:
        return not self._stopping.is_set() and not (self.burst is not None and self.burst.over)

    def _slot_main(self, index: int) -> None:
        backoff = Backoff(initial=0.1, maximum=MAX_STORE_BACKOFF)
        burst, member = self.burst, self._members[index] if self.burst else 0
        try:
            while self._running():
                seen = burst.claiming(member) if burst else 0
                claimed, lease = self._claim(backoff)
                claimed_at = time.monotonic()  # after the claim's wait, not before it
                if not claimed:
                    continue
                if lease is None:
                    if burst:
                        burst.found_nothing(member, seen, self.poll_wait)
                    continue
                self._work_on(index, _Held(lease, claimed_at, self.lease))
        finally:
            if index == 0 and burst is not None and burst.over:
                logger.info("Worker on queue %r: nothing ready and nothing in hand, burst over.", self.queue)
            with self._cond:
                self._cond.notify_all()

    def _claim(self, backoff: Backoff) -> tuple[bool, Any]:
        """(True, the lease or None when nothing was ready), or (False, None) after a failed claim
        and its back-off: failures are logged, never fatal."""
        try:
            # In a burst, a claim that finds nothing answers at once: not waiting is the point.
            wait = None if self.burst else self.poll_wait
            lease = service.claim(
                self.db,
                self.queue,
                lease=self.lease,
                end=self.end,
                wait=wait,
                step=self.on_claim,
                spread=self.spread,
            )
        except FDBError as error:
            self._count(store_errors=1)
            pause = backoff.next()
            logger.warning(
                "Claim on queue %r failed: %s (FoundationDB error %s); retrying in %.1fs.",
                self.queue,
                describe(error),
                getattr(error, "code", None),
                pause,
            )
            self._stopping.wait(pause)
            return False, None
        except Exception as error:  # noqa: BLE001 - a deleted queue, a bug: log, never die
            pause = backoff.next()
            logger.error(
                "Claim on queue %r failed: %s; retrying in %.1fs.",
                self.queue,
                error,
                pause,
                exc_info=not isinstance(error, QueueError),  # a traceback only for the unexpected
            )
            self._stopping.wait(pause)
            return False, None
        backoff.reset()
        return True, lease

    def _work_on(self, index: int, held: _Held) -> None:
        """Handle one claimed item in slot `index`, where the heartbeat sees its lease meanwhile."""
        with self._cond:
            self._slot_held[index] = held
            self._cond.notify_all()  # the heartbeat has a new lease to look after
        try:
            if self._aborting.is_set():
                self._release_unfinished(held)  # claimed while aborting: hand it straight back
            else:
                self._handle(held)
        except Exception:  # noqa: BLE001 - the worker's own mistake: keep the thread alive
            logger.exception("Unexpected error in the worker of queue %r.", self.queue)
        finally:
            with self._cond:
                self._slot_held[index] = None
                self._cond.notify_all()
            if self.burst:
                self.burst.settled()

    def _handle(self, held: _Held) -> None:
        item = held.item
        logger.debug("Handling item %s of queue %r (attempt %d).", item.id, self.queue, item.attempts)
        try:
            handler = cast(Callable[..., object], self.handler)  # one argument or two: see on_claim
            if self.on_claim is None:
                returned = handler(item)
            else:
                returned = handler(item, held.step_result)
        except BaseException as error:  # noqa: BLE001 - whatever the handler raises, the item goes back
            failure: BaseException | None = error
            returned = None
        else:
            failure = None
        # A handler's writes to commit with its ack (see ack_with): committed alone if no ack comes.
        writes = returned if isinstance(returned, AckWith) else None
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

    def _acknowledge(self, held: _Held, writes: AckWith | None) -> None:
        """The handler returned: ack the item (with its writes, if it asked for that)."""
        if writes is None:
            acked = self._settle(held, "ack", lambda: service.ack(self.db, held.receipt, name=self.queue))
        else:
            acked = self._settle(held, "ack", lambda: ack_with(self.db, held.receipt, self.queue, writes))
        if not acked:
            self._writes_alone(writes, held.item)
            return
        # A handler may settle an item that failed (a task that raised, recorded as FAILED).
        failed = writes is not None and writes.failed
        self._count(**{"failed" if failed else "processed": 1})
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
            run_alone(self.db, writes, self.queue, item.id)

    def _give_back(self, held: _Held, failure: BaseException) -> None:
        """The handler raised: release the item with a delay that grows with its attempts."""
        item = held.item
        delay = retry_delay(item.attempts, base=self.base_backoff, maximum=self.max_backoff)
        logger.error(
            "Handler failed on item %s of queue %r (attempt %d); releasing it with a %.1fs delay.",
            item.id,
            self.queue,
            item.attempts,
            delay,
            exc_info=failure,
        )
        self._count(failed=1)
        outcome = self._settle(
            held, "release", lambda: service.release(self.db, held.receipt, delay=delay, name=self.queue)
        )
        if outcome == "dead":
            self._count(dead=1)
            logger.warning(
                "Item %s of queue %r moved to the dead letters after %d attempts.",
                item.id,
                self.queue,
                item.attempts,
            )

    def _settle(self, held: _Held, action: str, call: Callable[[], Any]) -> Any:
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

    def _retry_pause(self, held: _Held, action: str, error: FDBError, backoff: Backoff) -> float | None:
        """How long to wait before retrying a settle that hit a store error; None: give up, since
        the lease would end first (the item then comes back by itself)."""
        self._count(store_errors=1)
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

    def _ack_applied(self, held: _Held) -> bool:
        """After a retried ack found the lease over: True if the item is gone for good (acked)."""
        try:
            return not _still_queued(self.db, self.queue, held.item.id)
        except Exception as error:  # noqa: BLE001 - cannot tell: say so, and assume it runs again
            logger.warning(
                "Could not tell whether item %s of queue %r was acknowledged: %s", held.item.id, self.queue, error
            )
            return False

    def _lost(self, held: _Held, action: str, error: Exception) -> None:
        self._count(lost=1)
        logger.warning(
            "Could not %s item %s of queue %r: %s It is or will be delivered again.",
            action,
            held.item.id,
            self.queue,
            error,
        )

    def _release_unfinished(self, held: _Held) -> None:
        """Hand an item back at once, unprocessed (abort)."""
        with held.lock:
            if held.settled or held.lost:
                return
            held.settled = True
            outcome = self._settle(held, "release", lambda: service.release(self.db, held.receipt, name=self.queue))
        if outcome is not None:
            self._count(released=1)
            logger.info("Released item %s of queue %r unprocessed (%s).", held.item.id, self.queue, outcome)

    # --- the heartbeat --------------------------------------------------------------------------

    def _heartbeat_main(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._done():
                        return
                    now = time.monotonic()
                    live = [h for h in self._slot_held if h is not None and not h.settled and not h.lost]
                    due = [h for h in live if h.next_extend <= now]
                    if due or activity.SAMPLER.due():
                        break
                    soonest = min((h.next_extend for h in live), default=now + 1.0)
                    self._cond.wait(min(max(soonest - now, 0.005), 1.0))
            # Once a minute per process, the charts' depth and age (logged, never raised, if it fails).
            activity.SAMPLER.maybe_sample(self.db)
            for held in due:
                self._extend(held)

    def _extend(self, held: _Held) -> None:
        with held.lock:
            if held.settled or held.lost:
                return
            started = time.monotonic()
            try:
                lease = service.extend(self.db, held.receipt, self.lease, name=self.queue)
            except (LeaseNotFound, LeaseExpired) as error:
                held.lost = True
                self._count(lost=1)
                logger.warning(
                    "Lost the lease on item %s of queue %r while its handler runs: %s The result will "
                    "not be acknowledged.",
                    held.item.id,
                    self.queue,
                    error,
                )
                return
            except Exception as error:  # noqa: BLE001 - FDBError and the unexpected: retry soon
                if isinstance(error, FDBError):
                    self._count(store_errors=1)
                retry_in = min(1.0, self.lease * HEARTBEAT_FRACTION / 2)
                held.next_extend = time.monotonic() + retry_in
                logger.warning(
                    "Could not extend the lease on item %s of queue %r: %s; retrying in %.2fs.",
                    held.item.id,
                    self.queue,
                    describe(error) if isinstance(error, FDBError) else error,
                    retry_in,
                )
                return
            held.lease = lease
            held.lease_end = started + self.lease
            held.next_extend = started + self.lease * HEARTBEAT_FRACTION


@transactional
def _still_queued(tr: Any, queue: str, item_id: str) -> bool:
    """Whether the item is still in the queue: ready, delayed, leased, or a dead letter."""
    return service.get_item(tr, queue, item_id) is not None or service.get_dead_letter(tr, queue, item_id) is not None
