"""The standard actors: producers, poppers, claimers, waiters and a dead-letter keeper.

Three queues cover the service's modes: ``fifo`` (a FIFO queue, whose plain pops are checked for
order), ``prio`` (a priority queue with ``max_attempts``, so spent leases become dead letters)
and ``keyed`` (per-key concurrency 1). Each actor draws its operations from its own RNG (made
from the seed), so what it does does not depend on the interleaving; when it runs does.
"""

from __future__ import annotations

import asyncio
import random
import threading
from functools import partial
from dataclasses import dataclass
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import DeadLetterNotFound, LeaseGone, QueueError
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt
from django_fdbqueue.service.popping import PopMode

from .history import History, Push
from .scheduler import Killed, Scheduler
from .world import run_async as run_async_simulated

QUEUES: dict[str, dict[str, Any]] = {
    "fifo": {"kind": "fifo"},
    "prio": {"kind": "priority", "max_attempts": 3},
    "keyed": {"kind": "fifo", "key_concurrency": 1},
}
FIFO_QUEUES = {"fifo"}
KEYED_QUEUES = {"keyed": 1}
LIVENESS_QUEUES = ("fifo", "prio")  # the waiters' queues: no key limits, so visible is claimable


@dataclass(frozen=True)
class Shape:
    """How many actors of each kind, and how many operations each makes."""

    producers: int = 3
    poppers: int = 2
    claimers: int = 3
    keyed_claimers: int = 2  # claimers of the keyed queue only: claims of one key overlap
    waiters: int = 2
    awaiters: int = 2
    keepers: int = 1
    operations: int = 12

    @classmethod
    def none(cls, operations: int = 12) -> "Shape":
        """No standard actor at all: for a run of a project's own actors only."""
        return cls(0, 0, 0, 0, 0, 0, 0, operations)


class Doubt:
    """Counts the commits in doubt (1021, applied or not) the simulation injected into an actor's
    transactions, and its pool jobs' (an event loop's calls overlap, so theirs are pooled)."""

    def __init__(self) -> None:
        self.count = 0


class Actors:
    """Makes the standard actors of a run and records what they do in ``history``."""

    def __init__(
        self,
        db: Any,
        scheduler: Scheduler,
        history: History,
        seed: int,
        doubts: dict[str, Doubt],
        *,
        exact: bool = False,
        run_async: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        self.db = db
        self.scheduler = scheduler
        self.history = history
        self.seed = seed
        self.doubts = doubts
        #: Only the operations whose commits in doubt cost nothing (a swarm on a real cluster,
        #: where 1021 comes unannounced): pushes with a dedup key, high-contention pops, claims.
        self.exact = exact
        #: Set to end a swarm: each actor stops before its next operation.
        self.stopping = threading.Event()
        self._run_async = run_async or partial(run_async_simulated, scheduler)

    def spawn_all(self, shape: Shape, skew_us: Callable[[], int]) -> None:
        kinds: list[tuple[str, int, Callable[[str, random.Random, int], None]]] = [
            ("producer", shape.producers, self.producer),
            ("popper", shape.poppers, self.popper),
            ("claimer", shape.claimers, self.claimer),
            ("keyclaimer", shape.keyed_claimers, self.keyed_claimer),
            ("waiter", shape.waiters, self.waiter),
            # "waiter-async": a waiter too, for the liveness oracle (which watches the queues'
            # heads while any actor named "waiter..." runs).
            ("waiter-async", shape.awaiters, self.awaiter),
            ("keeper", shape.keepers, self.keeper),
        ]
        for kind, count, body in kinds:
            for n in range(count):
                name = f"{kind}{n}"
                rng = random.Random(f"{self.seed}/{name}")
                self.doubts[name] = Doubt()
                self.scheduler.spawn(name, partial(body, name, rng, shape.operations), skew_us=skew_us())

    # -- bookkeeping --------------------------------------------------------------------------
    def _call(
        self,
        name: str,
        what: str,
        fn: Callable[[], Any],
        *,
        pops: str | None = None,
        receipts: bool = False,
        acks: str | None = None,
    ) -> tuple[Any, int, BaseException | None]:
        """Run one service call: (its result, how many of its commits were in doubt, its error).

        Each commit in doubt may have applied (the service retries it): a push may have stored
        its value once more for each, a plain pop lost one item for each. ``pops``: the call
        takes items from that queue for good (a pop); stopped midway, it may lose one too.
        ``receipts``: the pop's retry reads what its first attempt took (a high-contention pop),
        so only one stopped midway, or raising after a commit in doubt, may have lost an item.
        ``acks``: the call acknowledges that value; stopped midway, or failing with FoundationDB's
        error after a commit in doubt, it may have settled it (delivered, or not).
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
            if pops is not None:
                self.history.lossy(pops, 1 + doubt.count - before)
            if acks is not None:
                self.history.maybe(acks)
            raise
        seen = doubt.count - before + (1 if failed is not None and commit_in_doubt(failed) else 0)
        if acks is not None and isinstance(failed, FDBError) and seen:
            self.history.maybe(acks)  # not a QueueError: retried in doubt, an ack answers truly
        if pops is not None and (failed is not None or not receipts):
            self.history.lossy(pops, seen)
        self.scheduler.note(f"{name} {what} -> {_shown(got, failed)}{f' ({seen} in doubt)' if seen else ''}")
        return got, seen, failed

    # -- the actors ---------------------------------------------------------------------------
    def producer(self, name: str, rng: random.Random, operations: int) -> None:
        for n in range(operations):
            if self.stopping.is_set():
                return
            queue = rng.choice(list(QUEUES))
            value = f"{name}:{n}"
            dedup = self.exact or rng.random() < 0.5
            delay = rng.choice([None, None, None, 0.05, 0.3])
            key = rng.choice(["a", "b", "c"]) if queue == "keyed" else None
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
            )
            push.doubts = doubt
            if error is None:
                push.outcome = "doubt" if doubt else "ok"
            else:
                push.outcome = "unsure" if doubt else "failed"
            push.order_ok = push.order_ok and push.outcome == "ok"

    def popper(self, name: str, rng: random.Random, operations: int) -> None:
        for _ in range(operations):
            if self.stopping.is_set():
                return
            queue = rng.choice(["fifo", "prio"])
            end = "min" if queue == "fifo" else rng.choice(["min", "max"])
            mode: PopMode = "high-contention" if self.exact else rng.choice(["plain", "plain", "high-contention"])
            got, doubt, _error = self._call(
                name,
                f"pop {queue} {end} {mode}",
                partial(service.pop, self.db, queue, end, mode=mode),
                pops=queue,
                receipts=mode != "plain",
            )
            if got is not None:
                self.history.deliver(got.value)
                if mode == "plain" and not doubt:
                    self.history.popped(name, queue, got.value)

    def claimer(self, name: str, rng: random.Random, operations: int) -> None:
        for _ in range(operations):
            if self.stopping.is_set():
                return
            queue = rng.choice(list(QUEUES))
            spread = rng.choice([None, None, 4]) if queue != "keyed" else None
            seconds = rng.choice([0.5, 2.0, 30.0])
            lease, _doubt, _error = self._call(
                name,
                f"claim {queue} lease {seconds}" + (f" spread {spread}" if spread else ""),
                partial(service.claim, self.db, queue, lease=seconds, spread=spread),
            )
            if lease is None:
                continue
            self.history.leased(lease.item.value)
            self._settle(name, rng, lease)

    def keyed_claimer(self, name: str, rng: random.Random, operations: int) -> None:
        """Claims of the keyed queue only, with short leases: claims of one key overlap often."""
        for _ in range(operations):
            if self.stopping.is_set():
                return
            seconds = rng.choice([0.2, 0.5, 2.0])
            lease, _doubt, _error = self._call(
                name, f"claim keyed lease {seconds}", partial(service.claim, self.db, "keyed", lease=seconds)
            )
            if lease is None:
                self.scheduler.sleep(rng.uniform(0.0, 0.2))
                continue
            self.history.leased(lease.item.value)
            self._settle(name, rng, lease)

    def _settle(self, name: str, rng: random.Random, lease: Any) -> None:
        """Ack, release, extend then ack, or walk away (the lease runs out)."""
        choice = rng.random()
        if choice < 0.15:
            return  # walks away: the item comes back when the lease ends
        value = lease.item.value
        if choice < 0.3:
            delay = rng.choice([0, 0.2])
            self._call(name, f"release {value}", partial(service.release, self.db, lease.receipt, delay=delay))
            return
        if choice < 0.4:
            self._call(name, f"extend {value}", partial(service.extend, self.db, lease.receipt, 5.0))
        _got, _doubt, error = self._call(name, f"ack {value}", partial(service.ack, self.db, lease.receipt), acks=value)
        if error is None:
            self.history.deliver(lease.item.value)
        elif not isinstance(error, (LeaseGone, FDBError)):
            raise error

    def waiter(self, name: str, rng: random.Random, operations: int) -> None:
        """Pops and claims that wait: each must wake for an item it may take (liveness)."""
        for _ in range(max(1, operations // 3)):
            if self.stopping.is_set():
                return
            queue = rng.choice(["fifo", "prio"])
            started = self.scheduler.clock.now
            if not self.exact and rng.random() < 0.5:
                got, _doubt, _error = self._call(
                    name, f"pop {queue} wait 3", partial(service.pop, self.db, queue, wait=3.0), pops=queue
                )
                if got is not None:
                    self.history.deliver(got.value)
            else:
                got, _doubt, _error = self._call(
                    name, f"claim {queue} wait 3", partial(service.claim, self.db, queue, lease=30.0, wait=3.0)
                )
                if got is not None:
                    self.history.leased(got.item.value)
                    _got, _d, error = self._call(
                        name, f"ack {got.item.value}", partial(service.ack, self.db, got.receipt), acks=got.item.value
                    )
                    if error is None:
                        self.history.deliver(got.item.value)
            if got is None and _error is None:
                self.history.gave_up_on(name, queue, started, self.scheduler.clock.now)

    def awaiter(self, name: str, rng: random.Random, operations: int) -> None:
        """An event loop with three coroutines that pop and claim with ``wait=``; some are cancelled."""
        in_flight: dict[int, str] = {}  # apops awaited now: each task's queue
        try:
            self._run_async(lambda: self._awaiting(name, rng, operations, in_flight))
        except Killed:
            for queue in in_flight.values():  # stopped with its event loop: as a killed process's pop
                self.history.lossy(queue, 1)
            raise

    async def _awaiting(self, name: str, rng: random.Random, operations: int, in_flight: dict[int, str]) -> None:
        loop = asyncio.get_running_loop()

        async def one(k: int) -> None:
            for n in range(max(1, operations // 3)):
                if self.stopping.is_set():
                    return
                queue = rng.choice(["fifo", "prio", "fifo", "prio", "keyed"])
                claims = self.exact or queue == "keyed" or rng.random() < 0.5
                what = f"{name}/{k} a{'claim' if claims else 'pop'} {queue} wait 2 (#{n})"
                call = (
                    service.aclaim(self.db, queue, lease=30.0, wait=2.0)
                    if claims
                    else service.apop(self.db, queue, wait=2.0)
                )
                task = asyncio.ensure_future(call)
                if not claims:
                    in_flight[id(task)] = queue
                    task.add_done_callback(lambda done: in_flight.pop(id(done), None))
                if rng.random() < 0.3:
                    # At any time of its wait, or (half of them) while its first transaction runs,
                    # when what it took must be given back.
                    cancel_after = rng.uniform(0.0, 2.5) if rng.random() < 0.5 else rng.uniform(0.0, 0.01)
                    loop.call_later(cancel_after, task.cancel)
                self.history.operation()
                started = self.scheduler.clock.now
                self.scheduler.note(what)
                doubts = self.doubts[name].count
                task.add_done_callback(partial(self._pop_in_doubt, name, queue, doubts, claims))
                try:
                    got = await task
                except asyncio.CancelledError:
                    if task.cancelled():
                        self.scheduler.note(f"{what} -> cancelled")
                        continue
                    await self._received(name, what, task.result(), claims)  # our own cancel: got it
                    raise
                except (FDBError, QueueError) as error:
                    self.scheduler.note(f"{what} -> {_shown(None, error)}")
                    continue
                if got is None and queue in LIVENESS_QUEUES and not self._pool_stalled(started):
                    self.history.gave_up_on(name, queue, started, self.scheduler.clock.now)
                await self._received(name, what, got, claims)

        await asyncio.gather(*(one(k) for k in range(3)))

    def _pop_in_doubt(self, name: str, queue: str, before: int, claims: bool, _task: Any) -> None:
        """An async pop that overlapped a commit in doubt of its loop's jobs may have lost an item.

        The loop's coroutines share its jobs' faults, so which pop met it is not known: each one
        that overlapped counts (the verdict is the more lenient for it, never wrong).
        """
        if not claims:
            self.history.lossy(queue, self.doubts[name].count - before)

    def _pool_stalled(self, since: float) -> bool:
        """Was a pool job (an attempt or a look of an async waiter) stalled by a fault since then?

        An async waiter's slowness is then the fault's, not a defect: it is not judged.
        """
        return any(
            until > since
            for actor, until in self.scheduler.stalled_until.items()
            if actor.startswith(("pool-", "undo"))
        )

    async def _received(self, name: str, what: str, got: Any, claims: bool) -> None:
        self.scheduler.note(f"{what} -> {_shown(got, None)}")
        if got is None:
            return
        if not claims:
            self.history.deliver(got.value)
            return
        self.history.leased(got.item.value)
        try:
            await asyncio.shield(service.aack(self.db, got.receipt))
        except (FDBError, QueueError):
            return
        except asyncio.CancelledError:
            self.history.maybe(got.item.value)  # the ack goes on: done, or not
            raise
        self.history.deliver(got.item.value)

    def keeper(self, name: str, rng: random.Random, operations: int) -> None:
        """Requeues dead letters now and then."""
        for _ in range(max(1, operations // 4)):
            if self.stopping.is_set():
                return
            self.scheduler.sleep(rng.uniform(0.5, 2.0))
            page, _doubt, _error = self._call(
                name, "dead letters of prio", partial(service.dead_letters, self.db, "prio", limit=5)
            )
            for letter in [] if page is None else page.items:
                item_id = letter.item.id
                _got, _doubt, error = self._call(
                    name, f"requeue {letter.item.value}", partial(service.requeue_dead_letter, self.db, "prio", item_id)
                )
                if isinstance(error, DeadLetterNotFound):
                    # Only this keeper takes dead letters away, and it just listed this one: the
                    # requeue applied (an earlier attempt's commit was in doubt) or was never needed.
                    self.history.violate("answer", f"requeue of {letter.item.value} answered {error!r}")


def _shown(got: Any, error: BaseException | None) -> str:
    if error is not None:
        return f"{type(error).__name__}({getattr(error, 'code', '')})"
    if got is None:
        return "None"
    item = getattr(got, "item", got)
    return repr(getattr(item, "value", got))
