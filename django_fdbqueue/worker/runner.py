"""The worker: threads that claim items, hand each to a handler, and acknowledge or release it.

An item whose worker dies mid-way is never lost: its lease runs out and the next claim anywhere
gets it again. This module holds :class:`Worker` itself: its settings, checked before any thread
starts, and its controls (start, stop, abort, wait). The threads are the slots (``slots``: claim,
handle, settle) and the heartbeat (``heartbeat``: keeps leases alive); what they share is in
``state``, what becomes of an item in ``settling``, burst mode in ``burst``.

How these fit together, how stopping works and what the worker does on store errors is in the
workers guide, "How the worker works" (docs/howto/workers.md).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, TypeAlias, cast

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument, WrongQueueKind
from django_fdbqueue.fdbapi import Database, FDBError, Transaction, describe
from django_fdbqueue.service import activity
from django_fdbqueue.service.extension import check_claim_mode, check_seconds, check_spread

from .burst import Burst
from .heartbeat import Heartbeat
from .settling import Settler
from .slots import ClaimOptions, Slot
from .state import Target, WorkerState, WorkerStats

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


class Worker:
    """Consume ``queue`` with ``handler``: at-least-once, with retries, back-off and dead letters.

    ``handler(item)`` gets the service's Item; returning acks it, raising releases it with a
    back-off. Keep it idempotent: an item whose ack was lost is handled again. It may return
    :class:`AckWith` to have its own writes commit in the ack's transaction. ``on_claim(tr,
    lease)``, if given, runs in each claim's own transaction, and the handler is then called as
    ``handler(item, what on_claim returned)``; it must not raise for an item it cannot handle.
    ``spread`` (2 to 100) has each claim take one of the first ``spread`` ready items at random.
    ``claim_mode="high-contention"`` keeps exact order for many slots and workers of one queue
    instead (``service.claim``'s ``mode``; not with ``spread``).
    ``burst=True``, or one :class:`Burst` shared by several workers, ends the worker once no item
    is ready and none is in hand. Start with :meth:`run` (blocks) or :meth:`start` and
    :meth:`wait`.

    Each option, and how the worker works, is explained in the workers guide
    (docs/howto/workers.md).
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
        claim_mode: service.ClaimMode = "plain",
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
        self.claim_mode = check_claim_mode(claim_mode, self.spread)
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
        self._state = WorkerState(concurrency)  # what the threads share
        self.stats: WorkerStats = self._state.stats
        self.burst: Burst | None = Burst() if burst is True else (burst or None)
        # Joined now, before any worker sharing the burst starts claiming (see Burst.join).
        self._members = [self.burst.join() for _ in range(concurrency)] if self.burst else []
        self._settler: Settler | None = None  # the roles, made at start (see _roles)

    # --- control ------------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """True once start() (or run()) was called."""
        return bool(self._state.threads)

    @property
    def stopping(self) -> bool:
        """True once stop() or abort() was called."""
        return self._state.stopping.is_set()

    def start(self) -> None:
        """Start the threads and return; the queue must exist (QueueNotFound otherwise)."""
        if self._state.threads:
            raise RuntimeError("This worker was already started; make a new one.")
        self._check_queue()
        heartbeat, slots = self._roles()
        for slot in slots:
            thread = threading.Thread(target=slot.run, name=f"fdbqueue-worker-{self.queue}-{slot.index}", daemon=True)
            self._state.threads.append(thread)
        beating = threading.Thread(target=heartbeat.run, name=f"fdbqueue-heartbeat-{self.queue}", daemon=True)
        logger.info(
            "Worker started on queue %r: %d thread(s), %gs leases, end %s%s.",
            self.queue,
            self.concurrency,
            self.lease,
            self.end,
            ", until nothing is ready (burst)" if self.burst else "",
        )
        activity.SAMPLER.maybe_sample(self.db)  # the charts' depth and age; never raises
        for thread in self._state.threads:
            thread.start()
        beating.start()

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
        if not self._state.stopping.is_set():
            logger.info(
                "Worker on queue %r stopping: finishing %d item(s) in progress.", self.queue, self.in_progress()
            )
        self._state.stopping.set()
        self._state.notify()

    def abort(self) -> None:
        """Stop at once: release every held item now (their handlers' results will be ignored)."""
        state = self._state
        state.stopping.set()
        state.aborting.set()
        with state.cond:
            held = [h for h in state.held if h is not None]
            state.cond.notify_all()
        if held:
            logger.warning("Worker on queue %r aborting: releasing %d item(s) in progress.", self.queue, len(held))
        for entry in held:
            cast(Settler, self._settler).hand_back(entry)  # an item is held only once started
        state.notify()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the worker is done (True) or ``timeout`` seconds pass (False).

        Done means every slot thread ended, or, after abort(), every one still running is stuck
        in a handler whose item was already released.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state.cond:
            while not self._state.done():
                remaining = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if remaining <= 0:
                    return False
                self._state.cond.wait(remaining)
        return True

    def in_progress(self) -> int:
        """How many items the handlers are working on right now."""
        with self._state.cond:
            return sum(1 for h in self._state.held if h is not None and not h.settled)

    # --- internals ------------------------------------------------------------------------------

    def _check_queue(self) -> None:
        try:
            info = service.get_queue(self.db, self.queue)
        except FDBError as error:  # the threads will retry; the store may be back soon
            logger.warning("Cannot read queue %r at start (%s); starting anyway.", self.queue, describe(error))
            return
        if info.kind == "fifo" and self.end == "max":
            raise WrongQueueKind(f"Queue {self.queue!r} is a FIFO queue: it is consumed from the min end only.")

    def _roles(self) -> tuple[Heartbeat, list[Slot]]:
        """The heartbeat and one slot per thread, made from the settings as they are now."""
        target = Target(self.db, self.queue, self.lease)
        self._settler = Settler(target, self._state, base_backoff=self.base_backoff, max_backoff=self.max_backoff)
        options = ClaimOptions(
            end=self.end, poll_wait=self.poll_wait, spread=self.spread, on_claim=self.on_claim, mode=self.claim_mode
        )
        handler = cast(Callable[..., object], self.handler)  # one argument or two: see on_claim
        slots = [
            Slot(index, target, self._state, self._settler, handler, options, self.burst, member)
            for index, member in enumerate(self._members or [0] * self.concurrency)
        ]
        return Heartbeat(target, self._state), slots
