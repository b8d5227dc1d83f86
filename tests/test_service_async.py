"""The async face of the service (``apush``, ``apop``, ``aclaim``...): each answers as its sync
twin, waits hold no thread, the waiters of a queue share one watch and are woken one per item.
Every test runs on both engines; coroutines are driven with ``asyncio.run``."""

from __future__ import annotations

import asyncio
import inspect
import math
import multiprocessing
import threading

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound
from django_fdbqueue.service._internals import offload, watchhub

from .processes import child_database, kill_leftovers

#: Bound on every wait of these tests (they take well under a second each when all is well).
DEADLINE = 30.0
#: The waits themselves: the longest allowed (none runs out when all is well).
WAIT = service.MAX_WAIT_SECONDS

TWINS = {
    "apush": service.push,
    "apush_many": service.push_many,
    "apop": service.pop,
    "apeek": service.peek,
    "apeek_min": service.peek_min,
    "apeek_max": service.peek_max,
    "aclaim": service.claim,
    "aack": service.ack,
    "arelease": service.release,
    "aextend": service.extend,
    "asize": service.size,
    "aget_queue": service.get_queue,
    "adead_letters": service.dead_letters,
    "arequeue_dead_letter": service.requeue_dead_letter,
    "adelete_dead_letter": service.delete_dead_letter,
}


async def until(condition, what: str) -> None:
    """Poll ``condition()`` on the loop until true, bounded by DEADLINE."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.005)


def parked(name: str | None = None) -> int:
    return sum(len(c.parked) for c in watchhub.channels() if name is None or c.name == name)


def _parameters(func) -> list:
    return [(p.name, p.kind, p.default) for p in inspect.signature(func).parameters.values()]


@pytest.mark.parametrize("name", sorted(TWINS))
def test_each_async_op_takes_its_twins_parameters_and_defaults(name):
    # A claim's step and ack: see aclaim (each would commit with a claim its caller may abandon).
    expected = [p for p in _parameters(TWINS[name]) if p[0] not in ("step", "ack")]
    got = [(n if n != "db" else "db_or_tr", kind, default) for n, kind, default in _parameters(getattr(service, name))]
    assert got == expected
    assert inspect.iscoroutinefunction(getattr(service, name))


def test_every_async_op_answers_as_its_sync_twin(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "s", kind="priority", max_attempts=1)
    service.create_queue(db, "a", kind="priority", max_attempts=1)

    def sync_story(q: str) -> list:
        out = [service.push(db, q, "x", 3).value, [i.value for i in service.push_many(db, q, [("y", 1), "z"])]]
        out += [service.peek(db, q).value, service.peek_min(db, q).value, service.peek_max(db, q).value]
        out += [service.pop(db, q, "max").value, service.size(db, q)]
        lease = service.claim(db, q, lease=60)
        out += [lease.item.value, service.extend(db, lease.receipt, 30).item.value, service.release(db, lease.receipt)]
        dead = service.dead_letters(db, q).items
        out += [[d.item.value for d in dead], service.requeue_dead_letter(db, q, dead[0].item.id).value]
        lease = service.claim(db, q)
        out += [service.ack(db, lease.receipt), service.get_queue(db, q).size, service.pop(db, q).value]
        service.push(db, q, "w")
        service.release(db, service.claim(db, q).receipt)
        out += [service.delete_dead_letter(db, q, service.dead_letters(db, q).items[0].item.id)]
        return out + [service.pop(db, q), service.get_queue(db, q).dead]

    async def async_story(q: str) -> list:
        out = [
            (await service.apush(db, q, "x", 3)).value,
            [i.value for i in await service.apush_many(db, q, [("y", 1), "z"])],
        ]
        out += [
            (await service.apeek(db, q)).value,
            (await service.apeek_min(db, q)).value,
            (await service.apeek_max(db, q)).value,
        ]
        out += [(await service.apop(db, q, "max")).value, await service.asize(db, q)]
        lease = await service.aclaim(db, q, lease=60)
        out += [
            lease.item.value,
            (await service.aextend(db, lease.receipt, 30)).item.value,
            await service.arelease(db, lease.receipt),
        ]
        dead = (await service.adead_letters(db, q)).items
        out += [[d.item.value for d in dead], (await service.arequeue_dead_letter(db, q, dead[0].item.id)).value]
        lease = await service.aclaim(db, q)
        out += [
            await service.aack(db, lease.receipt),
            (await service.aget_queue(db, q)).size,
            (await service.apop(db, q)).value,
        ]
        await service.apush(db, q, "w")
        await service.arelease(db, (await service.aclaim(db, q)).receipt)
        out += [await service.adelete_dead_letter(db, q, (await service.adead_letters(db, q)).items[0].item.id)]
        return out + [await service.apop(db, q), (await service.aget_queue(db, q)).dead]

    assert asyncio.run(async_story("a")) == sync_story("s")


def test_errors_are_the_sync_twins_and_a_transaction_is_refused(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def refused(coro) -> BaseException:
        with pytest.raises(Exception) as caught:
            await coro
        return caught.value

    async def story() -> None:
        for bad_wait in (-1, service.MAX_WAIT_SECONDS + 1, "1", True, math.nan):
            for sync, coro in (
                (lambda: service.pop(db, "q", wait=bad_wait), service.apop(db, "q", wait=bad_wait)),
                (lambda: service.claim(db, "q", wait=bad_wait), service.aclaim(db, "q", wait=bad_wait)),
            ):
                with pytest.raises(InvalidArgument) as expected:
                    sync()
                got = await refused(coro)
                assert (type(got), str(got)) == (type(expected.value), str(expected.value))
        assert isinstance(await refused(service.apop(db, "nope", wait=1)), QueueNotFound)
        assert isinstance(await refused(service.aclaim(db, "q", lease=0)), InvalidArgument)
        tr = db.create_transaction()
        got = await refused(service.apush(db=tr, name="q", value=1))
        assert isinstance(got, InvalidArgument) and "not an open transaction" in str(got)

    asyncio.run(story())


def test_a_wait_ends_with_none_when_nothing_comes(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story() -> tuple:
        return await service.apop(db, "q", wait=0), await service.aclaim(db, "q", wait=0.05)

    assert asyncio.run(story()) == (None, None)
    assert not watchhub._hubs or all(not c for c in watchhub._hubs.values())


def test_a_waiting_claim_is_woken_by_a_push_from_another_thread(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story():
        waiter = asyncio.create_task(service.aclaim(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 1, "the claim to park")
        pusher = threading.Thread(target=service.push, args=(db, "q", "hello"))
        pusher.start()
        lease = await asyncio.wait_for(waiter, DEADLINE)
        pusher.join(DEADLINE)
        return lease

    assert asyncio.run(story()).item.value == "hello"


def _push_in_child(setting: dict, values: list, go) -> None:
    db = child_database(setting)
    go.wait(DEADLINE)
    for value in values:
        service.push(db, "q", value)


def test_waiting_claims_are_woken_by_pushes_from_another_process(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    child = ctx.Process(target=_push_in_child, args=(dict(django_settings.FDBQUEUE), [1, 2, 3], go), daemon=True)
    child.start()

    async def story():
        waiters = [asyncio.create_task(service.aclaim(db, "q", wait=WAIT)) for _ in range(3)]
        await until(lambda: parked("q") == 3, "the claims to park")
        go.set()
        return await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)

    try:
        leases = asyncio.run(story())
        child.join(DEADLINE)
        assert child.exitcode == 0
    finally:
        kill_leftovers([child])
    assert sorted(lease.item.value for lease in leases) == [1, 2, 3]


def test_waiting_holds_no_thread(fdbqueue_db):
    """200 parked waiters: the process has no more threads than with none (the pool is warm)."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story() -> tuple[int, int]:
        warm = threading.Barrier(offload.POOL_THREADS, timeout=DEADLINE)
        await asyncio.gather(*(offload.run(warm.wait) for _ in range(offload.POOL_THREADS)))
        await service.aclaim(db, "q", wait=0.01)  # the embedded engine's watcher thread, once
        before = threading.active_count()
        waiters = [asyncio.create_task(service.aclaim(db, "q", wait=WAIT)) for _ in range(200)]
        await until(lambda: parked("q") == 200, "200 claims to park")
        during = threading.active_count()
        for waiter in waiters:
            waiter.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        return before, during

    before, during = asyncio.run(story())
    assert during <= before


def test_many_waiters_share_one_watch_and_each_push_wakes_one(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    count = 1000

    async def story() -> tuple[list, int]:
        waiters = [asyncio.create_task(service.apop(db, "q", wait=WAIT)) for _ in range(count)]
        await until(lambda: parked("q") == count, "every pop to park")
        (channel,) = watchhub.channels()  # one channel, so one watch (wake key and catalog entry) for all
        await until(lambda: channel.watches is not None, "the shared watch to be armed")
        pusher = threading.Thread(target=lambda: [service.push(db, "q", n) for n in range(count)])
        pusher.start()
        items = await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)
        pusher.join(DEADLINE)
        return items, channel.checks

    items, checks = asyncio.run(story())
    assert sorted(item.value for item in items) == list(range(count))
    assert service.size(db, "q") == 0
    assert checks <= 3 * count  # woken by turns, not all at each push
    assert not any(watchhub._hubs.values())  # the last waiter let the watch go


@pytest.mark.parametrize("kind", ["fifo", "priority"])
def test_claims_woken_together_take_different_items_without_colliding(fdbqueue_db, kind):
    """Woken at once for as many items, claims in queue order would all read the first item and
    all but one would conflict and back off (wake-ups of hundreds of ms on a cluster); each takes
    the item at its place instead, and the items go in queue order all the same."""
    from django_fdbqueue.fdbapi import ErrorCode, retry_counts

    db = fdbqueue_db
    service.create_queue(db, "q", kind=kind)
    count = 12

    async def story() -> list:
        waiters = [asyncio.create_task(service.aclaim(db, "q", wait=WAIT)) for _ in range(count)]
        await until(lambda: parked("q") == count, "every claim to park")
        await offload.run(service.push_many, db, "q", [(n, 0) for n in range(count)])
        return await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)

    before = retry_counts().get(ErrorCode.NOT_COMMITTED, 0)
    leases = asyncio.run(story())
    assert retry_counts().get(ErrorCode.NOT_COMMITTED, 0) == before
    assert sorted(lease.item.value for lease in leases) == list(range(count))
    assert service.get_queue(db, "q").leased == count


def test_deleting_the_queue_wakes_its_waiters_with_queue_not_found(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story() -> list:
        waiters = [asyncio.create_task(service.apop(db, "q", wait=WAIT)) for _ in range(5)]
        await until(lambda: parked("q") == 5, "the pops to park")
        await offload.run(service.delete_queue, db, "q")
        return await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), DEADLINE)

    assert all(isinstance(got, QueueNotFound) for got in asyncio.run(story()))


def test_a_delayed_item_wakes_a_waiter_when_it_comes_due(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story():
        waiter = asyncio.create_task(service.apop(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 1, "the pop to park")
        await service.apush(db, "q", "later", delay=0.2)
        return await asyncio.wait_for(waiter, DEADLINE)

    assert asyncio.run(story()).value == "later"


def test_a_lease_a_woken_claim_walked_away_from_wakes_the_next_waiter_when_it_ends(fdbqueue_db):
    """Found by the simulator (seed 6, 4 operations): the claim the keeper woke took the only item
    and never acked; nothing changed the wake-up key, and no look had seen the lease's end, so the
    other waiter slept beside the item once the lease ran out."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")

    async def story():
        first = asyncio.create_task(service.aclaim(db, "q", lease=0.3, wait=WAIT))
        second = asyncio.create_task(service.aclaim(db, "q", lease=0.3, wait=WAIT))
        await until(lambda: parked("q") == 2, "both claims to park")
        await service.apush(db, "q", "only")
        done, _pending = await asyncio.wait([first, second], timeout=DEADLINE, return_when=asyncio.FIRST_COMPLETED)
        taker = done.pop()
        other = second if taker is first else first
        return taker.result(), await asyncio.wait_for(other, DEADLINE)  # the taker never acks

    walked_away, came_back = asyncio.run(story())
    assert walked_away.item.value == "only"
    assert came_back is not None and came_back.item.value == "only" and came_back.item.attempts == 2


def test_a_watch_callback_reaches_the_loop_from_another_thread(db, keyspace):
    """What the hub relies on, on both engines: ``on_ready`` is called (from the network thread or
    the embedded watcher) when the key changes, and when the watch is cancelled."""
    key = keyspace.pack(("k",))

    async def story() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        results = []
        for change in (True, False):
            tr = db.create_transaction()
            watch = tr.watch(key)
            tr.commit().wait()
            fired = loop.create_future()
            watch.on_ready(lambda _w, fired=fired: loop.call_soon_threadsafe(fired.set_result, None))
            if change:
                threading.Thread(target=db.__setitem__, args=(key, b"changed")).start()
            else:
                watch.cancel()
            await asyncio.wait_for(fired, DEADLINE)
            try:
                watch.wait()
                results.append(True)
            except Exception:  # noqa: BLE001 - a cancelled watch ends with an error
                results.append(False)
        return tuple(results)

    assert asyncio.run(story()) == (True, False)
