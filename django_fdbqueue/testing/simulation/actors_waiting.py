"""The waiters: pops and claims with ``wait=``, each of which must wake for an item it may take.

The liveness oracle follows each wait while it lasts. Sync waiters wait in threads of their own;
an async waiter's event loop runs several waits side by side, some cancelled at any turn, and
once they end its async waiting must hold nothing (no waiter, turn or watch left behind).
"""

from __future__ import annotations

import asyncio
import random
from functools import partial
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueError
from django_fdbqueue.fdbapi import FDBError, commit_in_doubt
from django_fdbqueue.service._internals import watchhub

from .actors_base import CONTENDED, LIVENESS_QUEUES, ActorsBase, may_have_settled, shown
from .history import Wait
from .scheduler import Killed
from .world import run_async as run_async_simulated


class Waiting(ActorsBase):
    """The sync and async waiters (see the module's docstring); ``Actors`` sets their state."""

    coroutines: int  # how many waits each async waiter's event loop runs side by side
    cancelled_pops: list[tuple[str, str, int]]  # (event loop, queue, its doubts when the pop began)
    _run_async: Callable[[Callable[[], Any]], Any]
    _simulated_loops: bool

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
        turns = LoopTurns(self.scheduler.note)
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
                self.scheduler.note(f"{what} -> {shown(None, error)}")
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
            # At any time of its wait; or (a quarter each) while its first transaction runs, when
            # what it took must be given back; or at a turn of the loop, between any two of its
            # steps; or just after its channel woke it (before or while it attempts).
            way = rng.choice(["time", "first", "turn", "woken"])
            if way == "turn":
                turns.cancel_at(task, rng.randint(1, 24))
            elif way == "woken":
                turns.cancel_when_woken(task, rng.randint(0, 3))
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
        if claims:
            return
        if _task.cancelled():  # its pool job goes on (and its give-back after it): count at the end
            self.cancelled_pops.append((name, queue, before))
        else:
            self.history.lossy(queue, self.doubts[name].count - before)

    def count_cancelled_pops(self) -> None:
        """Once every job has ended: a cancelled pop may have lost an item for each commit in
        doubt its loop's jobs met from its start on (its own job ran past the cancel)."""
        for name, queue, before in self.cancelled_pops:
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
        self.scheduler.note(f"{what} -> {shown(got, None)}")
        if got is None:
            return
        if not claims:
            self.history.deliver(got.value)
            if rng is not None:  # a client handles it before it polls again; its peers wait on
                await asyncio.sleep(rng.choice([0.0, 0.0, 0.05, 0.3, 1.0]))
            return
        value = got.item.value
        self.history.leased(value)
        choice = 1.0 if rng is None else rng.random()  # no rng: acked at once
        if rng is not None:
            await asyncio.sleep(rng.choice([0.0, 0.0, 0.05, 0.3, 1.0]))  # handling it, holding its key's slot
        if choice < 0.15:
            self.scheduler.note(f"{name} walks away from {value}")  # the lease runs out
            return
        if choice < 0.3:
            delay = 0.2 if choice < 0.2 else 0.0
            await self._asettle(name, f"release {value}", service.arelease(self.db, got.receipt, delay=delay), got)
            return
        if choice < 0.4 and not await self._asettle(
            name, f"extend {value}", service.aextend(self.db, got.receipt, 5.0), got
        ):
            return
        if await self._asettle(name, f"ack {value}", service.aack(self.db, got.receipt), got, acks=value):
            self.history.deliver(value)

    async def _asettle(self, name: str, what: str, call: Any, lease: Any, acks: str | None = None) -> bool:
        """Await an ack, release or extend: True if it went through.

        ``acks``: the value it acknowledges; raising after a commit in doubt, or stopped while it
        goes on, it may have settled it (delivered, or not).
        """
        self.scheduler.note(f"{name} {what}")
        before = self.doubts[name].count
        try:
            await asyncio.shield(call)
        except (FDBError, QueueError) as error:
            self.scheduler.note(f"{name} {what} -> {shown(None, error)}")
            self._gone_early(name, lease, error)
            seen = self.doubts[name].count - before + (1 if commit_in_doubt(error) else 0)
            if acks is not None and may_have_settled(error, seen):
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


class LoopTurns:
    """Cancels tasks at a chosen turn of their event loop: between any two of their steps.

    A cancel planned "when woken" waits for the turn at which the task's channel has woken it
    (its turn handed to it, not yet used): the moment a woken waiter that goes away must pass its
    turn on. A task woken for the first time in that many turns is cancelled then.
    """

    def __init__(self, note: Callable[[str], None]) -> None:
        self.note = note  # the trace's: the tests check that woken waiters do get cancelled
        self.planned: dict["asyncio.Task[Any]", int] = {}
        self.when_woken: dict["asyncio.Task[Any]", int] = {}

    def cancel_at(self, task: "asyncio.Task[Any]", turns: int) -> None:
        self.planned[task] = turns
        task.add_done_callback(lambda done: self.planned.pop(done, None))

    def cancel_when_woken(self, task: "asyncio.Task[Any]", turns: int) -> None:
        """Cancel ``task`` ``turns`` turns after its channel wakes it (0: before it runs again)."""
        self.when_woken[task] = turns
        task.add_done_callback(lambda done: self.when_woken.pop(done, None))

    def tick(self) -> None:
        for task in list(self.planned):
            self.planned[task] -= 1
            if self.planned[task] <= 0:
                del self.planned[task]
                task.cancel()
        for task, turns in list(self.when_woken.items()):
            if _just_woken(task):
                del self.when_woken[task]
                self.note(f"woken waiter cancelled in {turns} turns")
                if turns:
                    self.cancel_at(task, turns)
                else:
                    task.cancel()


def _just_woken(task: "asyncio.Task[Any]") -> bool:
    """Is ``task`` parked in a channel (``watchhub.Channel.park``) whose future says "your turn"?

    Read from the coroutine the task awaits innermost: the simulator may look inside the service.
    """
    coro: Any = task.get_coro()
    while hasattr(getattr(coro, "cr_await", None), "cr_frame"):
        coro = coro.cr_await
    frame = getattr(coro, "cr_frame", None)
    if frame is None or frame.f_code is not watchhub.Channel.park.__code__:
        return False
    fut = frame.f_locals.get("fut")
    return fut is not None and watchhub.woken(fut)
