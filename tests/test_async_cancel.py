"""Cancelling an async pop or claim loses nothing: parked, it just leaves (the last one lets the
watch go); mid-transaction, what the commit took is given back (the item at its place, the lease
released with its attempt taken back). Both engines; cancellation points come from a seeded RNG
and are reached through events, never sleeps."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import pytest

from django_fdbqueue import service
from django_fdbqueue.service import asynchronous, popping
from django_fdbqueue.service._internals import offload, watchhub

from .test_service_async import DEADLINE, WAIT, parked, until

UNDO_SECONDS = 30.0


def _held_after_commit(monkeypatch, module, attribute: str) -> tuple[threading.Event, threading.Event]:
    """Make ``module.attribute`` commit, then hold its thread until ``go`` is set."""
    real = getattr(module, attribute)
    committed, go = threading.Event(), threading.Event()

    def held(*args, **kwargs):
        got = real(*args, **kwargs)
        committed.set()
        assert go.wait(DEADLINE)
        return got

    monkeypatch.setattr(module, attribute, held)
    return committed, go


async def _cancel_after_commit(coro, committed: threading.Event, go: threading.Event) -> None:
    task = asyncio.ensure_future(coro)
    await until(committed.is_set, "the transaction to commit")
    task.cancel()
    go.set()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.mark.parametrize("wait", [None, WAIT])
def test_a_claim_cancelled_after_its_commit_gives_the_lease_back(fdbqueue_db, monkeypatch, wait):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo", max_attempts=1)
    first = service.enqueue(db, "q", "a")
    service.enqueue(db, "q", "b")
    committed, go = _held_after_commit(monkeypatch, asynchronous, "_claim_once")
    asyncio.run(_cancel_after_commit(service.aclaim(db, "q", wait=wait), committed, go))
    assert offload.undos_settled(UNDO_SECONDS)
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.dead) == (2, 0, 0)
    again = service.claim(db, "q")
    assert (again.item.id, again.item.value, again.item.attempts) == (first.id, "a", 1)  # its place, its attempts


@pytest.mark.parametrize("mode", ["plain", "high-contention"])
def test_a_pop_cancelled_after_its_commit_puts_the_item_back_at_its_place(fdbqueue_db, monkeypatch, mode):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    first = service.push(db, "q", {"n": 1}, priority=1, dedup_key="one", key="k")
    service.push(db, "q", {"n": 2}, priority=1)
    committed, go = _held_after_commit(monkeypatch, popping, "pop")
    asyncio.run(_cancel_after_commit(service.apop(db, "q", mode=mode), committed, go))
    assert offload.undos_settled(UNDO_SECONDS)
    assert service.size(db, "q") == 2
    assert service.push(db, "q", {"n": 3}, dedup_key="one").duplicate  # its dedup key names it again
    again = service.pop(db, "q")
    assert (again.id, again.value) == (first.id, {"n": 1})


def test_waiters_cancelled_while_parked_leave_and_the_last_lets_the_watch_go(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story() -> None:
        waiters = [asyncio.create_task(service.aclaim(db, "q", wait=WAIT)) for _ in range(20)]
        await until(lambda: parked("q") == 20, "the claims to park")
        (channel,) = watchhub.channels()
        await until(lambda: channel.watches is not None, "the shared watch")
        for waiter in waiters[:19]:
            waiter.cancel()
        await until(lambda: parked("q") == 1, "19 to leave")
        assert channel.watches is not None  # one still waits: the watch stays
        waiters[19].cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        await until(lambda: channel.keeper is None, "the keeper to stop")
        assert channel.watches is None and not watchhub.channels()

    asyncio.run(story())
    assert service.get_queue(db, "q").leased == 0


class Plans:
    """Where each consumer task is cancelled, drawn from a seeded RNG: after its k-th attempt
    commits, when it parks for the k-th time, right after it is woken, or never."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.plans: dict[asyncio.Task, list] = {}
        self.gos: list[threading.Event] = []  # what held transactions wait for, all set at the end

    def draw(self, task: asyncio.Task) -> None:
        self.plans[task] = [self.rng.choice(["commit", "parked", "woken", "never", "never"]), self.rng.randint(1, 3)]

    def due(self, kind: str) -> bool:
        plan = self.plans.get(asyncio.current_task())
        if plan is None or plan[0] != kind:
            return False
        plan[1] -= 1
        return plan[1] == 0


def _install(monkeypatch, plans: Plans) -> None:
    real_run, real_park = offload.run_undoable, watchhub.Channel.park

    async def run_undoable(func, undo):
        if not plans.due("commit"):
            return await real_run(func, undo)
        task, loop = asyncio.current_task(), asyncio.get_running_loop()
        committed, go = asyncio.Event(), threading.Event()

        def held():
            try:
                return func()
            finally:
                try:
                    loop.call_soon_threadsafe(committed.set)
                except RuntimeError:  # the run is over: nobody will cancel this one
                    go.set()
                go.wait(DEADLINE)

        async def cancel_then_go() -> None:
            await committed.wait()
            task.cancel()
            go.set()

        plans.gos.append(go)
        asyncio.ensure_future(cancel_then_go())
        return await real_run(held, undo)

    async def park(self, deadline, seen_at, blocked=None):
        if plans.due("parked"):
            asyncio.get_running_loop().call_soon(asyncio.current_task().cancel)
        woken = await real_park(self, deadline, seen_at, blocked)
        if woken and plans.due("woken"):
            asyncio.current_task().cancel()
        return woken

    monkeypatch.setattr(offload, "run_undoable", run_undoable)
    monkeypatch.setattr(watchhub.Channel, "park", park)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_consumers_cancelled_at_random_moments_lose_nothing(fdbqueue_db, monkeypatch, seed):
    """Pops and claims, cancelled at drawn moments while items are pushed: every item is either
    delivered to a task that returned it or still in the queue, none twice, no lease held."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    rng = random.Random(seed)
    plans = Plans(rng)
    _install(monkeypatch, plans)
    items, consumers = 60, 30
    delivered: list = []
    receipts: list = []

    async def consume(claims: bool) -> None:
        while True:
            if claims:
                lease = await service.aclaim(db, "q", wait=WAIT)
                if lease is not None:
                    delivered.append(lease.item.value)
                    receipts.append(lease.receipt)  # acked at the end: delivered, its lease is the task's
            else:
                item = await service.apop(db, "q", wait=WAIT)
                if item is not None:
                    delivered.append(item.value)

    async def story() -> None:
        tasks = []
        for n in range(consumers):
            tasks.append(asyncio.ensure_future(consume(claims=n % 2 == 0)))
            plans.draw(tasks[-1])
        for n in range(items):
            await service.apush(db, "q", n)
            for _ in range(rng.randint(0, 3)):
                await asyncio.sleep(0)  # let the consumers run between pushes, as the RNG says
        await until(
            lambda: all(t.done() for t in tasks) or len(delivered) + service.size(db, "q") >= items,
            "every item to be delivered or back in the queue",
        )
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for go in plans.gos:
            go.set()

    asyncio.run(story())
    assert offload.undos_settled(UNDO_SECONDS)
    for receipt in receipts:
        service.ack(db, receipt)
    left = [item.value for item in service.browse(db, "q", limit=items).items]
    assert len(delivered) == len(set(delivered)), "an item was delivered twice"
    assert sorted(delivered + left) == list(range(items))
    info = service.get_queue(db, "q")
    assert (info.leased, info.size) == (0, len(left))


def test_a_claim_cancelled_after_its_lease_ran_out_still_takes_its_attempt_back(fdbqueue_db, monkeypatch, clock):
    """The undo came late (its lease's time was up, nothing had moved the item yet): the item is
    as it was all the same, not one claim nearer its dead letter."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo", max_attempts=1)
    first = service.enqueue(db, "q", "a")
    committed, go = _held_after_commit(monkeypatch, asynchronous, "_claim_once")

    async def story() -> None:
        task = asyncio.ensure_future(service.aclaim(db, "q", lease=1))
        await until(committed.is_set, "the claim to commit")
        clock.advance(5)  # the lease is over before the undo runs
        task.cancel()
        go.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(story())
    assert offload.undos_settled(UNDO_SECONDS)
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.dead) == (1, 0, 0)
    again = service.claim(db, "q")
    assert (again.item.id, again.item.attempts) == (first.id, 1)


def test_a_cancelled_claim_gives_its_rate_token_back(fdbqueue_db, monkeypatch, still_clock):
    db = fdbqueue_db
    service.create_queue(db, "q", key_rate=1)  # one token, refilled once a second
    service.push_many(db, "q", ["a1", "a2"], key="a")
    committed, go = _held_after_commit(monkeypatch, asynchronous, "_claim_once")
    asyncio.run(_cancel_after_commit(service.aclaim(db, "q"), committed, go))
    assert offload.undos_settled(UNDO_SECONDS)
    got = service.claim(db, "q")  # no time passed: only the token given back allows it
    assert got is not None and got.item.value == "a1"


def test_failing_undos_do_not_hold_the_pool(fdbqueue_db, monkeypatch):
    """More failing undos than the pool has threads (an outage): operations still run meanwhile."""
    db = fdbqueue_db
    service.create_queue(db, "q")
    healed = threading.Event()

    def undo(_what) -> None:
        if not healed.is_set():
            raise RuntimeError("the store is away")

    monkeypatch.setattr(offload, "UNDO_PAUSE", 0.2)
    for n in range(offload.POOL_THREADS + 4):
        offload.undo_later(undo, n)

    async def meanwhile() -> int:
        return await asyncio.wait_for(service.asize(db, "q"), offload.UNDO_PAUSE_MAX * 2)

    try:
        assert asyncio.run(meanwhile()) == 0
    finally:
        healed.set()
    assert offload.undos_settled(UNDO_SECONDS)


def test_a_keeper_cancelled_during_its_look_lets_the_look_s_watches_go(fdbqueue_db, monkeypatch):
    """At loop shutdown the keeper is cancelled wherever it is: watches its look set are let go."""
    db = fdbqueue_db
    service.create_queue(db, "q")
    in_look, go_on = threading.Event(), threading.Event()
    real_look, looks, seen = watchhub.look, [], []

    def held_look(*args, **kwargs):
        looks.append(1)
        if len(looks) == 2:
            in_look.set()
            assert go_on.wait(DEADLINE)
        got = real_look(*args, **kwargs)
        seen.append(got)
        return got

    monkeypatch.setattr(watchhub, "look", held_look)

    async def story() -> None:
        waiter = asyncio.ensure_future(service.apop(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 1 and len(looks) == 1, "the waiter parked")
        watchhub.channels()[0]._stir.set()
        await until(in_look.is_set, "the second look")
        waiter.cancel()  # the last waiter leaves; then the keeper is cancelled mid-look
        keeper = watchhub.channels()[0].keeper
        keeper.cancel()
        go_on.set()
        await asyncio.gather(waiter, keeper, return_exceptions=True)

    try:
        asyncio.run(story())
    finally:
        go_on.set()
    assert offload.undos_settled(UNDO_SECONDS)
    assert len(seen) == 2
    # Cancelled (ready with an error), not left armed; the binding readies a cancelled watch
    # from its network thread, so it is polled for, with a deadline.
    deadline = time.monotonic() + DEADLINE
    while not all(watch.is_ready() for watch in seen[-1].watches.watches):
        assert time.monotonic() < deadline, "the look's watches are still armed"
        threading.Event().wait(0.01)


def test_a_woken_waiter_that_finds_nothing_and_gives_up_passes_its_turn_on(fdbqueue_db, monkeypatch):
    """Woken for an item another client took first, it finds nothing and its wait is over; a look
    made meanwhile counted the next item as its: the keeper must look again and wake the next."""
    db = fdbqueue_db
    service.create_queue(db, "q")
    real_pop, calls = popping.pop, []
    attempted, go = threading.Event(), threading.Event()

    def pop(*args, **kwargs):
        calls.append(1)
        if len(calls) != 3:  # 1, 2: each waiter's first look; 3: the first waiter, woken
            return real_pop(*args, **kwargs)
        real_pop(*args, **kwargs)  # another client takes the item first
        got = real_pop(*args, **kwargs)
        attempted.set()
        assert go.wait(DEADLINE)
        return got

    monkeypatch.setattr(popping, "pop", pop)

    async def story():
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(service.apop(db, "q", wait=0.3))
        ends = loop.time() + 0.3
        await until(lambda: parked("q") == 1, "the first waiter parked")
        second = asyncio.ensure_future(service.apop(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 2, "the second waiter parked")
        chan = watchhub.channels()[0]
        await service.apush(db, "q", "taken by another")
        await until(attempted.is_set, "the first waiter's attempt")
        checks = chan.checks
        await service.apush(db, "q", "for the second")
        await until(lambda: chan.checks > checks and chan.watches is not None, "a look while it attempts")
        await until(lambda: loop.time() > ends, "the first waiter's wait to end")
        go.set()
        assert await asyncio.wait_for(first, DEADLINE) is None
        got = await asyncio.wait_for(second, DEADLINE)
        return None if got is None else got.value

    try:
        assert asyncio.run(story()) == "for the second"
    finally:
        go.set()
