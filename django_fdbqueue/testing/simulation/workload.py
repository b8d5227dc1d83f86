"""The standard actors: producers, poppers, claimers, waiters, a dead-letter keeper, and
high-contention contenders with their feeder and tender.

Three queues cover the service's modes: ``fifo`` (a FIFO queue, whose plain pops are checked for
order), ``prio`` (a priority queue with ``max_attempts``, so spent leases become dead letters)
and ``keyed`` (per-key concurrency 1). Two have actors of their own: ``hc``, where several
high-contention pops meet on one end each tick (their rounds overlap; some pops stop or freeze
at a step of the protocol), and ``letters`` (``max_attempts=1``), where the keeper makes dead
letters to requeue or delete. Each actor draws its operations from its own RNG (made
from the seed), so what it does does not depend on the interleaving; when it runs does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
import threading
from functools import partial
from dataclasses import dataclass
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import DeadLetterNotFound, LeaseGone, QueueError
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt
from django_fdbqueue.service._internals import contention, watchhub
from django_fdbqueue.service.popping import PopMode

from .history import History, Push, Wait
from .scheduler import Killed, Scheduler
from .world import run_async as run_async_simulated

QUEUES: dict[str, dict[str, Any]] = {
    "fifo": {"kind": "fifo"},
    "prio": {"kind": "priority", "max_attempts": 3},
    "keyed": {"kind": "fifo", "key_concurrency": 1},
    "hc": {"kind": "priority"},  # the contenders' own: only high-contention pops take from it
    "letters": {"kind": "fifo", "max_attempts": 1},  # the keeper's own: a release makes a dead letter
}
#: Contenders start their pops on multiples of this (virtual seconds), so they meet.
TICK_SECONDS = 1.0
SHARED = ("fifo", "prio", "keyed")  # the queues producers and claimers pick from
CONTENDED = "hc"
FIFO_QUEUES = {"fifo"}
KEYED_QUEUES = {"keyed": 1}
LIVENESS_QUEUES = ("fifo", "prio", CONTENDED)  # the waiters' queues: no key limits, so visible is claimable


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
    contenders: int = 4  # high-contention pops of one end of ``hc``, several at once
    feeders: int = 1  # producers of ``hc`` only
    tenders: int = 1  # maintenance: fulfil rounds on ``hc``
    # The service's other parts (``services``): tenants, queue admin, schedules, the Tasks worker.
    tenant_producers: int = 1
    tenant_consumers: int = 1
    admins: int = 1  # each creates, purges and deletes a queue of its own
    admin_users: int = 1  # push, pop and claim on the admins' queues meanwhile
    schedulers: int = 2  # two schedulers race to fire one declared schedule
    task_workers: int = 1  # run the tasks one enqueuer enqueues (none without workers)
    coroutines: int = 3  # each async waiter's event loop runs this many waits side by side

    def varied(self, rng: random.Random) -> "Shape":
        """Swarm testing: each group left out, kept or (where more of one kind meet) doubled, as
        ``rng`` picks, so seeds differ in which actors meet; a mix of everything at once hides
        what two kinds alone run into."""
        counts = {}
        for f in dataclasses.fields(self):
            if f.name not in ("operations", "coroutines"):
                n = getattr(self, f.name)
                counts[f.name] = rng.choices([0, n, 2 * n if f.name in _DOUBLED else n], weights=[3, 5, 2])[0]
        return dataclasses.replace(self, coroutines=rng.randint(1, 2 * self.coroutines), **counts)

    @classmethod
    def none(cls, operations: int = 12) -> "Shape":
        """No standard actor at all: for a run of a project's own actors only."""
        counts = {f.name: 0 for f in dataclasses.fields(cls) if f.name not in ("operations", "coroutines")}
        return cls(operations=operations, **counts)


_DOUBLED = {"producers", "poppers", "claimers", "keyed_claimers", "waiters", "awaiters", "contenders"}


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
        self.coroutines = Shape.coroutines
        self._run_async = run_async or partial(run_async_simulated, scheduler)
        self._simulated_loops = run_async is None  # event loops of the simulation's (LoopTurns)
        #: Contender pops may be stopped, and frozen, midway (the run's faults ``kill``, ``stall``).
        self.stops, self.freezes = not exact, not exact
        #: The end of ``hc`` every contender pops: their rounds meet there.
        self.contended_end = random.Random(f"{seed}/{CONTENDED}").choice(["min", "max"])

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
            ("feeder", shape.feeders, self.feeder),
            ("contender", shape.contenders, self.contender),
            ("tender", shape.tenders, self.tender),
        ]
        self.coroutines = shape.coroutines
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
        if acks is not None and failed is not None and _may_have_settled(failed, seen):
            self.history.maybe(acks)
        if pops is not None and (failed is not None or not receipts):
            self.history.lossy(pops, seen)
        self.scheduler.note(f"{name} {what} -> {_shown(got, failed)}{f' ({seen} in doubt)' if seen else ''}")
        return got, seen, failed

    # -- the actors ---------------------------------------------------------------------------
    def producer(self, name: str, rng: random.Random, operations: int) -> None:
        for n in range(operations):
            if self.stopping.is_set():
                return
            self._push(name, rng, rng.choice(SHARED), n)

    def feeder(self, name: str, rng: random.Random, operations: int) -> None:
        """Pushes bursts to ``hc`` (``push_many``) just before the contenders meet over them."""
        pushed = 0
        for _ in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            values = [f"{name}:{pushed + k}" for k in range(rng.randint(3, 10))]
            pushed += len(values)
            pushes = [Push(value, CONTENDED, False, order_ok=False) for value in values]
            for push in pushes:
                self.history.pushed(push)
            _got, doubt, error = self._call(
                name,
                f"push_many {values[0]}..{values[-1]} to {CONTENDED}",
                partial(service.push_many, self.db, CONTENDED, [(value, rng.randint(0, 3)) for value in values]),
                pushes=tuple(pushes),
            )
            for push in pushes:
                push.doubts = doubt
                push.outcome = ("doubt" if doubt else "ok") if error is None else ("unsure" if doubt else "failed")

    def _push(self, name: str, rng: random.Random, queue: str, n: int) -> Push:
        """Push the value ``name:n`` to ``queue`` (a delay, a dedup key, a key or a priority
        drawn from ``rng``), and record what came of it."""
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
            pushes=(push,),
        )
        push.doubts = doubt
        if error is None:
            push.outcome = "doubt" if doubt else "ok"
        else:
            push.outcome = "unsure" if doubt else "failed"
        push.order_ok = push.order_ok and push.outcome == "ok"
        return push

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
            queue = rng.choice(SHARED)
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

    def contender(self, name: str, rng: random.Random, operations: int) -> None:
        """High-contention pops of one end of ``hc``, several at once, so that rounds overlap.

        Each pop runs as an actor of its own (a worker thread of this process) that may be
        stopped or frozen at any step of the protocol: requests, results and lead keys are left
        behind for later rounds (and the pop itself, late) to find. Some pops wait (``wait=``):
        items that come back by recovery must wake them.
        """
        for n in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            # Mid-tick: most find the queue empty and wait, to be woken together by the next burst.
            self.scheduler.sleep(TICK_SECONDS / 2)
            pops = [self._contended(name, f"{name}.{n}{'abcd'[k]}", rng) for k in range(rng.choice([3, 4]))]
            if not self.exact:
                self.scheduler.block("its pops", condition=partial(_all_done, pops))

    def _contended(self, owner: str, name: str, rng: random.Random) -> Any:
        """Start one pop of ``hc`` as an actor (run it, in a swarm), maybe to be stopped or frozen midway."""
        timeout = rng.choice([None, 1.0, 1.0, 2.0])
        wait = rng.choice([None, 1.0, 2.0, 2.0])  # woken together by a burst: a thundering herd
        what = f"pop {CONTENDED} {self.contended_end} high-contention" + (f" timeout {timeout}" if timeout else "")
        what += f" wait {wait}" if wait else ""
        if self.exact:  # a swarm: real threads, nothing stopped
            return self._contended_pop(owner, what, timeout, wait)
        pop = self.scheduler.spawn(name, partial(self._contended_pop, name, what, timeout, wait))
        self.doubts[name] = self.doubts[owner]  # its commits in doubt are its owner's
        self._plan_stop(pop, rng, waits=wait is not None)
        return pop

    def tender(self, name: str, rng: random.Random, operations: int) -> None:
        """A maintenance task running fulfil rounds on ``hc`` now and then, beside the pops' own
        rounds: they serve requests and put back the results of pops that gave up or died."""
        end = self.contended_end
        for _ in range(operations):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            self.scheduler.sleep(TICK_SECONDS / 2)  # when the contenders meet
            for _ in range(rng.randint(1, 4)):
                self.scheduler.sleep(rng.uniform(0.0, 0.03))
                self._call(name, f"fulfil {CONTENDED} {end}", partial(contention.fulfil, self.db, CONTENDED, end))

    def _plan_stop(self, pop: Any, rng: random.Random, *, waits: bool) -> None:
        """Maybe stop or freeze ``pop`` at a step of the protocol.

        From its 5th point on: a pop that got that far was staged (points 1 to 4 are its races on
        the fast path), so it stops with a request, a lead or a result in the store. A pop that
        does not wait for items watches only its bells: woken, it was answered or handed the
        lead, and it stops there or freezes (often long enough for its deadline and the grace to
        pass: its result is put back by a round, or it collects it late, among the others' rounds).
        """
        plan = rng.random()
        if plan >= 0.5:
            return
        if waits:  # it may also be woken by an item pushed: some plans at its points instead
            plan = rng.random() * 0.5
        stop, freeze = plan < 0.1 or 0.3 <= plan < 0.4, not (plan < 0.1 or 0.3 <= plan < 0.4)
        if (stop and not self.stops) or (freeze and not self.freezes):
            return
        if plan < 0.1:
            pop.kill_on_wake = True
        elif plan < 0.3:
            pop.pause_on_wake = partial(self._till_meeting, rng.uniform(4.0, 12.0) + rng.uniform(0.0, 0.05))
        elif plan < 0.4:
            pop.kill_at_point = rng.randint(5, 10)
        else:
            pop.pause_at_point = (rng.randint(5, 10), rng.uniform(4.0, 12.0))

    @staticmethod
    def _till_meeting(at_least: float, now: float) -> float:
        """Seconds from ``now`` until the contenders meet (mid-tick), ``at_least`` from now (and the
        fraction of a tick it asks for): a frozen pop comes back among the others' rounds."""
        later = now + at_least
        return later - later % TICK_SECONDS + TICK_SECONDS / 2 + at_least % 0.05 - now

    def _meet(self, tick: float) -> None:
        """Sleep until the clock's next multiple of ``tick``: the contenders that do pop together."""
        now = self.scheduler.clock.now
        self.scheduler.sleep(tick - now % tick)

    def _contended_pop(self, name: str, what: str, timeout: float | None, wait: float | None) -> None:
        started = self.scheduler.clock.now
        got, _doubt, error = self._call(
            name,
            what,
            partial(
                service.pop, self.db, CONTENDED, self.contended_end, mode="high-contention", timeout=timeout, wait=wait
            ),
            pops=CONTENDED,
            receipts=True,
        )
        if got is not None:
            self.history.deliver(got.value)
        elif wait is not None and error is None:
            self.history.gave_up_on(name, CONTENDED, started, self.scheduler.clock.now)

    def waiter(self, name: str, rng: random.Random, operations: int) -> None:
        """Pops and claims that wait: each must wake for an item it may take (liveness)."""
        for _ in range(max(1, operations // 3)):
            if self.stopping.is_set():
                return
            queue = rng.choice(["fifo", "prio", CONTENDED])
            started = self.scheduler.clock.now
            if not self.exact and rng.random() < 0.5:
                what = f"pop {queue} wait 3"
                call = partial(self._call, name, what, partial(service.pop, self.db, queue, wait=3.0), pops=queue)
                got, _doubt, _error = self._waiting(name, queue, what, call)
                if got is not None:
                    self.history.deliver(got.value)
            else:
                what = f"claim {queue} wait 3"
                call = partial(self._call, name, what, partial(service.claim, self.db, queue, lease=30.0, wait=3.0))
                got, _doubt, _error = self._waiting(name, queue, what, call)
                if got is not None:
                    self.history.leased(got.item.value)
                    _got, _d, error = self._call(
                        name, f"ack {got.item.value}", partial(service.ack, self.db, got.receipt), acks=got.item.value
                    )
                    if error is None:
                        self.history.deliver(got.item.value)
            if got is None and _error is None:
                self.history.gave_up_on(name, queue, started, self.scheduler.clock.now)

    def _waiting(self, name: str, queue: str, what: str, call: Callable[[], Any]) -> Any:
        """``call()``, a wait the liveness check follows while it lasts."""
        number = self.history.wait_began(Wait(name, queue, self.scheduler.clock.now, f"{name} {what}"))
        try:
            return call()
        finally:
            self.history.wait_ended(number)

    def awaiter(self, name: str, rng: random.Random, operations: int) -> None:
        """An event loop whose coroutines pop and claim with ``wait=``; some are cancelled."""
        in_flight: dict[int, str] = {}  # apops awaited now: each task's queue
        turns = LoopTurns()
        main = partial(self._awaiting, name, rng, operations, in_flight, turns)
        try:
            if self._simulated_loops:
                run_async_simulated(self.scheduler, main, each_turn=turns.tick)
            else:
                self._run_async(main)
        except Killed:
            for queue in in_flight.values():  # stopped with its event loop: as a killed process's pop
                self.history.lossy(queue, 1)
            raise
        finally:
            self.history.waits_ended(name)

    async def _awaiting(
        self, name: str, rng: random.Random, operations: int, in_flight: dict[int, str], turns: "LoopTurns"
    ) -> None:
        ops = [self._aconsumer(name, k, rng, operations, in_flight, turns) for k in range(self.coroutines)]
        await asyncio.gather(*ops)
        await self._hub_left_idle(name)

    async def _aconsumer(
        self, name: str, k: int, rng: random.Random, operations: int, in_flight: dict[int, str], turns: "LoopTurns"
    ) -> None:
        """One coroutine's pops and claims that wait, then what it does with each item."""
        for n in range(max(1, operations // 3)):
            if self.stopping.is_set():
                return
            queue = rng.choice(["fifo", "prio", "fifo", "prio", "keyed"])
            claims = self.exact or queue == "keyed" or rng.random() < 0.5
            what = f"{name}/{k} a{'claim' if claims else 'pop'} {queue} wait 2 (#{n})"
            task = self._astart(name, what, queue, claims, rng, in_flight, turns)
            started = self.scheduler.clock.now
            try:
                got = await task
            except asyncio.CancelledError:
                if task.cancelled():
                    self.scheduler.note(f"{what} -> cancelled")
                    continue
                await self._received(name, what, task.result(), claims, None)  # our own cancel: got it
                raise
            except (FDBError, QueueError) as error:
                self.scheduler.note(f"{what} -> {_shown(None, error)}")
                continue
            if got is None and queue in LIVENESS_QUEUES and not self._pool_stalled(started):
                self.history.gave_up_on(name, queue, started, self.scheduler.clock.now)
            await self._received(name, what, got, claims, rng)

    def _astart(
        self,
        name: str,
        what: str,
        queue: str,
        claims: bool,
        rng: random.Random,
        in_flight: dict[int, str],
        turns: "LoopTurns",
    ) -> "asyncio.Task[Any]":
        """Start one wait (a task), followed by the liveness check; plan its cancel, if any."""
        lease = rng.choice([0.5, 2.0, 30.0])
        call = (
            service.aclaim(self.db, queue, lease=lease, wait=2.0) if claims else service.apop(self.db, queue, wait=2.0)
        )
        task = asyncio.ensure_future(call)
        if not claims:
            in_flight[id(task)] = queue
            task.add_done_callback(lambda done: in_flight.pop(id(done), None))
        number = self.history.wait_began(Wait(name, queue, self.scheduler.clock.now, what))
        task.add_done_callback(lambda _done: self.history.wait_ended(number))
        if rng.random() < 0.3:
            # At any time of its wait; or (a third each) while its first transaction runs, when
            # what it took must be given back; or at a turn of the loop, between any two of its
            # steps (woken, and not yet attempting, say).
            way = rng.choice(["time", "first", "turn"])
            if way == "turn":
                turns.cancel_at(task, rng.randint(1, 24))
            else:
                later = rng.uniform(0.0, 2.5) if way == "time" else rng.uniform(0.0, 0.01)
                asyncio.get_running_loop().call_later(later, task.cancel)
        self.history.operation()
        self.scheduler.note(what)
        doubts = self.doubts[name].count
        task.add_done_callback(partial(self._pop_in_doubt, name, queue, doubts, claims))
        return task

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

    async def _received(self, name: str, what: str, got: Any, claims: bool, rng: random.Random | None) -> None:
        """A popped item is delivered; a claimed one is handled a while (with ``rng``), then settled
        as the sync claimers settle theirs: ack, release, extend then ack, or walk away."""
        self.scheduler.note(f"{what} -> {_shown(got, None)}")
        if got is None:
            return
        if not claims:
            self.history.deliver(got.value)
            return
        value = got.item.value
        self.history.leased(value)
        choice = 1.0 if rng is None else rng.random()  # no rng: acked at once
        if rng is not None:
            await asyncio.sleep(rng.choice([0.0, 0.0, 0.05, 0.3]))  # handling it, holding its key's slot
        if choice < 0.15:
            self.scheduler.note(f"{name} walks away from {value}")  # the lease runs out
            return
        if choice < 0.3:
            delay = 0.2 if choice < 0.2 else 0.0
            await self._asettle(name, f"release {value}", service.arelease(self.db, got.receipt, delay=delay))
            return
        if choice < 0.4 and not await self._asettle(
            name, f"extend {value}", service.aextend(self.db, got.receipt, 5.0)
        ):
            return
        if await self._asettle(name, f"ack {value}", service.aack(self.db, got.receipt), acks=value):
            self.history.deliver(value)

    async def _asettle(self, name: str, what: str, call: Any, acks: str | None = None) -> bool:
        """Await an ack, release or extend: True if it went through.

        ``acks``: the value it acknowledges; raising after a commit in doubt, or stopped while it
        goes on, it may have settled it (delivered, or not).
        """
        self.scheduler.note(f"{name} {what}")
        before = self.doubts[name].count
        try:
            await asyncio.shield(call)
        except (FDBError, QueueError) as error:
            self.scheduler.note(f"{name} {what} -> {_shown(None, error)}")
            seen = self.doubts[name].count - before + (1 if commit_in_doubt(error) else 0)
            if acks is not None and _may_have_settled(error, seen):
                self.history.maybe(acks)
            return False
        except asyncio.CancelledError:
            if acks is not None:
                self.history.maybe(acks)  # it goes on: done, or not
            raise
        self.scheduler.note(f"{name} {what} -> done")
        return True

    async def _hub_left_idle(self, name: str) -> None:
        """Once its waits ended, the loop's async waiting holds nothing: no waiter, turn or watch.

        A turn never passed on (a woken waiter that went away counted as still attempting) wakes
        one waiter fewer per item from then on: waiters sleep beside items. (An idle channel may
        stay, for the next waiter of its queue.)
        """
        for _ in range(10):
            keepers = [chan.keeper for chan in watchhub.channels() if chan.keeper is not None]
            if not keepers:
                break
            await asyncio.wait(keepers, timeout=5.0)
        for chan in watchhub.channels():
            if chan.parked or chan.outstanding or chan.keeper is not None or chan.watches is not None:
                self.history.violate(
                    "left-behind",
                    f"{name}'s channel of {chan.name!r} once its waits ended: {len(chan.parked)} parked, "
                    f"{chan.outstanding} woken still attempting, keeper {'on' if chan.keeper else 'gone'}",
                )

    def keeper(self, name: str, rng: random.Random, operations: int) -> None:
        """Sets items aside (a claim of ``letters`` released) and requeues or deletes dead letters.

        Only it takes dead letters away, so a requeue or delete of one it just listed must succeed,
        whatever commits in doubt it met (a retry answers from the settled marker).
        """
        for n in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self.scheduler.sleep(rng.uniform(0.2, 1.0))
            if rng.random() < 0.7:
                self._bury(name, rng, n)
            queue = rng.choice(["prio", "letters"])
            page, _doubt, _error = self._call(
                name, f"dead letters of {queue}", partial(service.dead_letters, self.db, queue, limit=5)
            )
            for letter in [] if page is None else page.items:
                self._dispose(name, rng, queue, letter.item)

    def _bury(self, name: str, rng: random.Random, n: int) -> None:
        """Push a value to ``letters`` and claim and release an item there: its one attempt spent."""
        self._push(name, rng, "letters", n)
        lease, _doubt, _error = self._call(
            name, "claim letters", partial(service.claim, self.db, "letters", lease=30.0)
        )
        if lease is not None:
            self.history.leased(lease.item.value)
            value = lease.item.value
            self._call(name, f"release {value}", partial(service.release, self.db, lease.receipt))

    def _dispose(self, name: str, rng: random.Random, queue: str, item: Any) -> None:
        """Requeue or delete a dead letter just listed: the answer must say it was done."""
        value = item.value
        what = "requeue" if rng.random() < 0.5 else "delete"
        if what == "requeue":
            got, _doubt, error = self._call(
                name, f"requeue {value}", partial(service.requeue_dead_letter, self.db, queue, item.id)
            )
            if got is not None and got.value != value:
                self.history.violate("answer", f"requeue of {value} answered {got.value!r}")
        else:
            _got, _doubt, error = self._call(
                name, f"delete {value}", partial(service.delete_dead_letter, self.db, queue, item.id), acks=value
            )
            if error is None:
                self.history.deliver(value)  # handled for good
        if isinstance(error, DeadLetterNotFound):
            # It was just listed, and nobody else takes dead letters: the call applied (an earlier
            # attempt's commit was in doubt) and must say so.
            self.history.violate("answer", f"{what} of {value} answered {error!r}")


def _all_done(actors: list[Any]) -> bool:
    return all(actor.state == "done" for actor in actors)


class LoopTurns:
    """Cancels tasks at a chosen turn of their event loop: between any two of their steps."""

    def __init__(self) -> None:
        self.planned: dict["asyncio.Task[Any]", int] = {}

    def cancel_at(self, task: "asyncio.Task[Any]", turns: int) -> None:
        self.planned[task] = turns
        task.add_done_callback(lambda done: self.planned.pop(done, None))

    def tick(self) -> None:
        for task in list(self.planned):
            self.planned[task] -= 1
            if self.planned[task] <= 0:
                del self.planned[task]
                task.cancel()


def _may_have_settled(error: BaseException, doubts: int) -> bool:
    """Did an ack that raised ``error`` after ``doubts`` commits in doubt maybe apply?

    Not if it says the lease is gone: an ack whose commit applied answers from the lease's
    settled marker when it is tried again, so "gone" means this ack did not settle it.
    """
    return doubts > 0 and not isinstance(error, LeaseGone)


def _shown(got: Any, error: BaseException | None) -> str:
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
