"""What every standard actor shares: its queues, and the bookkeeping of each call it makes.

Three queues cover the service's modes: ``fifo`` (a FIFO queue, whose plain pops are checked for
order), ``prio`` (a priority queue with ``max_attempts``, so spent leases become dead letters)
and ``keyed`` (per-key concurrency 1); ``hc`` is the high-contention group's
(``actors_contention``) and ``letters`` the keeper's. The bookkeeping is what keeps the verdicts
exact: each commit in doubt an actor meets widens what its call may have lost, stored again or
settled, by that much and no more.
"""

from __future__ import annotations

import random
import threading
from functools import partial
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import LeaseGone, QueueError
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt
from django_fdbqueue.service._internals import contention

from .history import History, Push
from .scheduler import Killed, Scheduler

QUEUES: dict[str, dict[str, Any]] = {
    "fifo": {"kind": "fifo"},
    "prio": {"kind": "priority", "max_attempts": 3},
    "keyed": {"kind": "fifo", "key_concurrency": 1},
    "hc": {"kind": "priority"},  # the contenders' own: only high-contention pops take from it
    "letters": {"kind": "fifo", "max_attempts": 1},  # the keeper's own: a release makes a dead letter
}
#: How early (virtual seconds) a lease may be gone: the skew between two actors' clocks, and more.
EARLY_SECONDS = 0.2
#: Contenders start their pops on multiples of this (virtual seconds), so they meet.
TICK_SECONDS = 1.0
SHARED = ("fifo", "prio", "keyed")  # the queues producers and claimers pick from
CONTENDED = "hc"
FIFO_QUEUES = {"fifo"}
KEYED_QUEUES = {"keyed": 1}
LIVENESS_QUEUES = ("fifo", "prio", CONTENDED)  # the waiters' queues: no key limits, so visible is claimable


class Doubt:
    """Counts the commits in doubt (1021, applied or not) the simulation injected into an actor's
    transactions, and its pool jobs' (an event loop's calls overlap, so theirs are pooled)."""

    def __init__(self) -> None:
        self.count = 0


class ActorsBase:
    """The state and the calls every group of standard actors uses (``workload.Actors`` sets them)."""

    db: Any
    scheduler: Scheduler
    history: History
    seed: int
    doubts: dict[str, Doubt]
    exact: bool
    stopping: threading.Event

    def _call(
        self,
        name: str,
        what: str,
        fn: Callable[[], Any],
        *,
        pops: str | None = None,
        receipts: bool = False,
        acks: str | None = None,
        pushes: tuple[Push, ...] = (),
    ) -> tuple[Any, int, BaseException | None]:
        """Run one service call: (its result, how many of its commits were in doubt, its error).

        Each commit in doubt may have applied (the service retries it): a push may have stored
        its value once more for each, a plain pop lost one item for each. ``pops``: the call
        takes items from that queue for good (a pop); stopped midway, it may lose one too.
        ``receipts``: the pop's retry reads what its first attempt took (a high-contention pop),
        so only one stopped midway, or raising after a commit in doubt, may have lost an item.
        ``acks``: the call acknowledges that value; stopped midway, or failing with FoundationDB's
        error after a commit in doubt, it may have settled it (delivered, or not). ``pushes``: the
        values the call pushes; stopped midway, each may have been stored once for each commit in
        doubt before, and once more.
        """
        doubt = self.doubts[name]
        before = doubt.count
        self.history.operation()
        self.scheduler.note(f"{name} {what}")
        failed: BaseException | None = None
        try:
            got = fn()
        except (FDBError, QueueError) as error:
            got, failed = None, error
        except Killed:
            for push in pushes:
                push.doubts = doubt.count - before
            if pops is not None:
                self.history.lossy(pops, 1 + doubt.count - before)
            if acks is not None:
                self.history.maybe(acks)
            raise
        seen = doubt.count - before + (1 if failed is not None and commit_in_doubt(failed) else 0)
        if acks is not None and failed is not None and may_have_settled(failed, seen):
            self.history.maybe(acks)
        if pops is not None and (failed is not None or not receipts):
            self.history.lossy(pops, seen)
        self.scheduler.note(f"{name} {what} -> {shown(got, failed)}{f' ({seen} in doubt)' if seen else ''}")
        return got, seen, failed

    def _push(self, name: str, rng: random.Random, queue: str, n: int) -> Push:
        """Push the value ``name:n`` to ``queue`` (a delay, a dedup key, a key or a priority
        drawn from ``rng``), and record what came of it."""
        value = f"{name}:{n}"
        dedup = self.exact or rng.random() < 0.5
        delay = rng.choice([None, None, None, 0.05, 0.3])
        key = rng.choice(["a", "b", "c", None]) if queue == "keyed" else None  # keyless: never limited
        push = Push(value, queue, dedup, key, order_ok=delay is None)
        self.history.pushed(push)
        got, doubt, error = self._call(
            name,
            f"push {value} to {queue}" + (f" delay {delay}" if delay else "") + (" dedup" if dedup else ""),
            partial(
                service.push,
                self.db,
                queue,
                value,
                priority=rng.randint(0, 3) if QUEUES[queue]["kind"] == "priority" else 0,
                delay=delay,
                dedup_key=value if dedup else None,
                key=key,
            ),
            pushes=(push,),
        )
        outcome(push, doubt, error)
        return push

    def _push_many(self, name: str, queue: str, items: list[tuple[str, int]]) -> None:
        """Push ``(value, priority)`` pairs in one ``push_many``, and record what came of each
        (not checked for order: a burst's values share their versionstamp's transaction).

        When ``exact``, one push with a dedup key each instead: a batch retried after a commit in
        doubt may be stored twice, and on a cluster a commit in doubt comes unannounced.
        """
        if self.exact:
            for value, priority in items:
                self._push_deduplicated(name, queue, value, priority)
            return
        pushes = [Push(value, queue, False, order_ok=False) for value, _priority in items]
        for push in pushes:
            self.history.pushed(push)
        _got, doubt, error = self._call(
            name,
            f"push_many {items[0][0]}..{items[-1][0]} to {queue}",
            partial(service.push_many, self.db, queue, items),
            pushes=tuple(pushes),
        )
        for push in pushes:
            outcome(push, doubt, error)

    def _push_deduplicated(self, name: str, queue: str, value: str, priority: int) -> None:
        push = Push(value, queue, True)
        self.history.pushed(push)
        _got, doubt, error = self._call(
            name,
            f"push {value} to {queue} dedup",
            partial(service.push, self.db, queue, value, priority=priority, dedup_key=value),
            pushes=(push,),
        )
        outcome(push, doubt, error)

    def _settle(self, name: str, rng: random.Random, lease: Any) -> None:
        """Ack, release, extend then ack, or walk away (the lease runs out)."""
        choice = rng.random()
        if choice < 0.15:
            return  # walks away: the item comes back when the lease ends
        value = lease.item.value
        if choice < 0.3:
            delay = rng.choice([0, 0.2])
            _got, _doubt, error = self._call(
                name, f"release {value}", partial(service.release, self.db, lease.receipt, delay=delay)
            )
            self._gone_early(name, lease, error)
            return
        if choice < 0.4:
            _got, _doubt, error = self._call(
                name, f"extend {value}", partial(service.extend, self.db, lease.receipt, 5.0)
            )
            self._gone_early(name, lease, error)
        _got, _doubt, error = self._call(name, f"ack {value}", partial(service.ack, self.db, lease.receipt), acks=value)
        self._gone_early(name, lease, error)
        if error is None:
            self.history.deliver(lease.item.value)
        elif not isinstance(error, (LeaseGone, FDBError)):
            raise error

    def _gone_early(self, name: str, lease: Any, error: BaseException | None) -> None:
        """An item is leased to one consumer at a time: a lease settled here (of a queue no actor
        purges) is not gone while its time runs, but for the skew between clocks. Two claims of one
        item that both committed leave the first holder's lease gone early."""
        if not isinstance(error, LeaseGone):
            return
        left = lease.lease_expires_at.timestamp() - self.scheduler.clock.wall()
        if left > EARLY_SECONDS:
            self.history.violate(
                "lease", f"{name}'s lease of {lease.item.value} was gone ({error.reason}) {left:.3f} s before its end"
            )


def outcome(push: Push, doubt: int, error: BaseException | None) -> None:
    """Record how a push ended: after ``doubt`` commits in doubt, raising ``error`` or not."""
    push.doubts = doubt
    if error is None:
        push.outcome = "doubt" if doubt else "ok"
    else:
        push.outcome = "unsure" if doubt else "failed"
    push.order_ok = push.order_ok and push.outcome == "ok"


def may_have_settled(error: BaseException, doubts: int) -> bool:
    """Did an ack that raised ``error`` after ``doubts`` commits in doubt maybe apply?

    Not if it says the lease is gone: an ack whose commit applied answers from the lease's
    settled marker when it is tried again, so "gone" means this ack did not settle it.
    """
    return doubts > 0 and not isinstance(error, LeaseGone)


def shown(got: Any, error: BaseException | None) -> str:
    if error is not None:
        return f"{type(error).__name__}({getattr(error, 'code', '')})"
    if got is None:
        return "None"
    if isinstance(got, list):
        return f"{len(got)} items"
    if isinstance(got, contention.Round):
        return f"round: {got.served} served, {got.dropped} dropped, {got.restored} put back"
    item = getattr(got, "item", got)
    return repr(getattr(item, "value", got))
