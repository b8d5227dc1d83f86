"""What a worker's threads share: the items in hand, the counts, the stop flags, one lock over them.

The slot threads (``slots``), the heartbeat (``heartbeat``), the settling of items (``settling``)
and the worker's controls (``runner``) all read and write these; each of those modules does one
job, and this one is where they meet.
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any, cast

from django_fdbqueue.fdbapi import Database

__all__ = ["HEARTBEAT_FRACTION", "Held", "Target", "WorkerState", "WorkerStats"]

#: How often a lease is renewed, as a fraction of its length.
HEARTBEAT_FRACTION = 1 / 3


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


class Held:
    """One claimed item while a slot works on it.

    Its lock orders the heartbeat's extend, the slot's ack or release and an abort's release, so
    no two of them race on one receipt; ``settled`` says nobody touches the receipt again.
    """

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


@dataclass(frozen=True)
class Target:
    """The store and queue a worker consumes, and the lease its claims and extends take."""

    db: Database
    queue: str
    lease: float


class WorkerState:
    """The item each slot holds, the counts and the stop flags, with the condition that guards them.

    Waiting on ``cond`` is how the heartbeat hears of a new lease and ``Worker.wait`` of a slot
    thread that ended: whoever changes what it guards notifies it.
    """

    def __init__(self, concurrency: int) -> None:
        self.cond = threading.Condition()  # guards what follows, and the stats
        self.stopping = threading.Event()
        self.aborting = threading.Event()
        self.stats = WorkerStats()
        self.held: list[Held | None] = [None] * concurrency  # one place per slot thread
        self.threads: list[threading.Thread] = []  # the slot threads, once started

    def count(self, **increments: int) -> None:
        """Add to the stats (``lost=1``, ...)."""
        with self.cond:
            for name, amount in increments.items():
                setattr(self.stats, name, getattr(self.stats, name) + amount)

    def notify(self) -> None:
        """Wake whoever waits on the condition: something it guards changed."""
        with self.cond:
            self.cond.notify_all()

    def done(self) -> bool:
        """Every slot thread ended, or, after abort(), those left are stuck in a handler whose item
        is already back. Call with ``cond`` held."""
        if not self.threads:
            return True
        for index, thread in enumerate(self.threads):
            if not thread.is_alive():
                continue
            held = self.held[index]
            if self.aborting.is_set() and held is not None and held.settled:
                continue  # a handler that outlives abort(): its item is already back
            return False
        return True
