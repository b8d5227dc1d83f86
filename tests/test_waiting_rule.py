"""The waiting rule (``waiting.next_turn``), which the sync wait and the async keeper both follow:
no waiter sleeps while an item it may take is visible. Each test here once failed on the async
face (issue 36: a capped look that never looked again, a later-visible item never waited for, a
blocked claim polling once a second) or on the sync face (a slot freed between a blocked claim
and its watch). Every test runs on both engines."""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from django_fdbqueue import service
from django_fdbqueue.fdbapi import ErrorCode, FDBError, make_error
from django_fdbqueue.service._internals import keyclaims, leases, waiting, watchhub
from django_fdbqueue.service.extension import runtime

from .test_service_async import DEADLINE, WAIT, parked, until


def _outlook(visible: int = 0, next_us: int | None = None, wake: bytes | None = b"1") -> waiting.Outlook:
    return waiting.Outlook(visible, 2, next_us, 1_000_000, wake, waiting.AnyOf())


def test_the_rule_for_a_waiter_that_found_nothing():
    assert waiting.next_turn(_outlook(visible=1)) == waiting.Turn(True, None)
    assert waiting.next_turn(_outlook(visible=1, next_us=1_500_000)) == waiting.Turn(True, 0.5)
    assert waiting.next_turn(_outlook(next_us=3_000_000)) == waiting.Turn(False, 2.0)
    assert waiting.next_turn(_outlook()) == waiting.Turn(False, None)  # only a change wakes it


def test_the_rule_for_a_claim_whose_items_were_all_at_their_limit(fdbqueue_db):
    qk = None  # the rule reads only the wake value and the times
    blocked = waiting.Blocked(qk, b"1")  # type: ignore[arg-type]
    assert not waiting.next_turn(_outlook(visible=5), blocked).now  # visible, yet not claimable
    assert waiting.next_turn(_outlook(visible=5, wake=b"2"), blocked).now  # a slot given back, a push
    assert waiting.next_turn(_outlook(next_us=4_000_000), blocked) == waiting.Turn(False, 3.0)  # a lease ends
    token = waiting.Blocked(qk, b"1", retry_us=1_500_000)  # type: ignore[arg-type]
    assert waiting.next_turn(_outlook(next_us=4_000_000), token) == waiting.Turn(False, 0.5)
    assert waiting.next_turn(_outlook(), waiting.Blocked(qk, b"1", retry_us=900_000)) == waiting.Turn(True)  # type: ignore[arg-type]
    claimed_at = waiting.Blocked(qk, b"1", seen_us=800_000)  # type: ignore[arg-type]
    shown = dataclasses.replace(_outlook(visible=5), shown_us=900_000)  # a lease ran out after the claim
    assert waiting.next_turn(shown, claimed_at).now
    seen_by_the_claim = dataclasses.replace(_outlook(visible=5), shown_us=800_000)
    assert not waiting.next_turn(seen_by_the_claim, claimed_at).now


def test_a_look_that_counted_its_limit_looks_again(fdbqueue_db, monkeypatch):
    """As many waiters as items, more than one look hands out: every waiter is served."""
    db = fdbqueue_db
    monkeypatch.setattr(watchhub, "WAKE_BATCH", 3)
    service.create_queue(db, "q")
    count = 7

    async def story():
        waiters = [asyncio.ensure_future(service.apop(db, "q", wait=WAIT)) for _ in range(count)]
        await until(lambda: parked("q") == count, "every waiter parked")
        await service.apush_many(db, "q", list(range(count)))
        got = await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)
        return sorted(item.value for item in got if item is not None)

    assert asyncio.run(story()) == list(range(count))


def test_a_waiter_that_parks_during_a_look_is_counted(fdbqueue_db, monkeypatch):
    """A look's limit was set before the second waiter parked; two items came before it read."""
    db = fdbqueue_db
    service.create_queue(db, "q")
    in_look, go_on = threading.Event(), threading.Event()
    real_look = watchhub.look
    looks = []

    def held_look(*args, **kwargs):
        looks.append(args)
        if len(looks) == 2:  # the keeper's second look: after the first waiter parked
            in_look.set()
            assert go_on.wait(DEADLINE)
        return real_look(*args, **kwargs)

    monkeypatch.setattr(watchhub, "look", held_look)

    async def story():
        first = asyncio.ensure_future(service.apop(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 1 and len(looks) >= 1, "the first waiter parked")
        chan = watchhub.channels()[0]
        chan._stir.set()  # a look is on, its limit counting the first waiter only
        await until(in_look.is_set, "the second look started")
        second = asyncio.ensure_future(service.apop(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 2, "the second waiter parked during the look")
        await service.apush_many(db, "q", ["a", "b"])
        go_on.set()
        got = await asyncio.wait_for(asyncio.gather(first, second), DEADLINE)
        return sorted(item.value for item in got if item is not None)

    try:
        assert asyncio.run(story()) == ["a", "b"]
    finally:
        go_on.set()


def test_an_item_visible_after_another_due_one_is_waited_for(fdbqueue_db):
    """Two delayed items: the waiter of the second is woken when it shows, not at its wait's end."""
    db = fdbqueue_db
    service.create_queue(db, "q")

    async def story():
        await service.apush(db, "q", "sooner", delay=0.2)
        await service.apush(db, "q", "later", delay=0.8)
        waiters = [asyncio.ensure_future(service.apop(db, "q", wait=WAIT)) for _ in range(2)]
        got = await asyncio.wait_for(asyncio.gather(*waiters), DEADLINE)
        return sorted(item.value for item in got if item is not None)

    assert asyncio.run(story()) == ["later", "sooner"]


def test_a_blocked_async_claim_parks_until_a_slot_is_given_back(fdbqueue_db, monkeypatch):
    """No polling: the claim waits for the ack's change of the wake-up key, however long a pause was."""
    db = fdbqueue_db
    monkeypatch.setattr(keyclaims, "MAX_PAUSE", 60.0, raising=False)  # the old poll: longer than the wait
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    attempts = []
    real_once = leases.claim_once
    monkeypatch.setattr(leases, "claim_once", lambda *a, **k: attempts.append(1) or real_once(*a, **k))

    async def story():
        waiter = asyncio.ensure_future(service.aclaim(db, "q", wait=WAIT))
        await until(lambda: parked("q") == 1, "the blocked claim parked")
        chan = watchhub.channels()[0]
        await until(lambda: chan.watches is not None, "its keeper watching")
        assert isinstance(next(iter(chan.parked.values())), waiting.Blocked)
        assert len(attempts) == 1  # parked after one attempt: no second one without a change
        await service.aack(db, first.receipt)
        return await asyncio.wait_for(waiter, DEADLINE)

    got = asyncio.run(story())
    assert got is not None and got.item.value == "a2"


def test_a_blocked_async_claim_takes_the_slot_of_a_lease_that_ran_out(fdbqueue_db):
    """No ack, no push: the lease holding the key's one slot ends, and the parked claim takes it.

    The simulation found it (issue 37): the keeper's timer looked again when the lease ended, but
    the rule saw no change of the wake-up key, so the claim slept out its wait beside the item.
    """
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q", lease=0.3)
    assert first is not None
    got = asyncio.run(asyncio.wait_for(service.aclaim(db, "q", wait=WAIT), DEADLINE))
    assert got is not None and got.item.value in ("a1", "a2")


def test_a_sync_claim_sees_a_slot_given_back_before_its_watch_is_set(fdbqueue_db, monkeypatch):
    """The ack lands between the blocked attempt and the look: the wake-up key's value says so."""
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    real_once = leases.claim_once

    def then_ack(*args, **kwargs):
        got = real_once(*args, **kwargs)
        if isinstance(got, waiting.Blocked) and first is not None:
            service.ack(db, first.receipt)
        return got

    monkeypatch.setattr(leases, "claim_once", then_ack)
    timed_out = []
    real_wait_on = runtime.wait_on

    def recorded(watch, seconds):
        fired = real_wait_on(watch, seconds)
        timed_out.append(not fired)
        return fired

    monkeypatch.setattr(runtime, "wait_on", recorded)
    got = service.claim(db, "q", wait=3)
    assert got is not None and got.item.value == "a2"
    assert not any(timed_out), "the claim slept out a wait although a slot was free"


def test_a_sync_wait_whose_attempt_timed_out_waits_on(fdbqueue_db, monkeypatch):
    """A store too busy to commit within TIMEOUT (1031) while the wait has time left: try again."""
    db = fdbqueue_db
    service.create_queue(db, "q")
    service.push(db, "q", "x")
    real_once, calls = leases.claim_once, []

    def timing_out_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise make_error(ErrorCode.TRANSACTION_TIMED_OUT)
        return real_once(*args, **kwargs)

    monkeypatch.setattr(leases, "claim_once", timing_out_once)
    got = service.claim(db, "q", wait=5)
    assert got is not None and got.item.value == "x" and len(calls) == 2
    calls.clear()
    with pytest.raises(FDBError) as raised:  # no wait: the error is the caller's, as before
        service.claim(db, "q")
    assert raised.value.code == ErrorCode.TRANSACTION_TIMED_OUT


def test_woken_waiters_get_distinct_hints_and_a_late_look_does_not_hand_out_a_spent_one():
    """Hints (``hinted``): each claim woken with others is handed a ready item none of them holds.
    A look that read before a claim committed still sees that claim's item: it is not handed out
    again, until a later look no longer sees it."""

    async def story() -> list:
        loop = asyncio.get_running_loop()
        chan = watchhub.Channel(loop, None, "q")
        futures = [loop.create_future() for _ in range(3)]

        def look(visible: int, heads: tuple[bytes, ...]) -> None:
            seen = dataclasses.replace(_outlook(visible=visible), limit=10, heads=heads)
            chan._hand_out(seen)

        for fut in futures[:2]:
            chan.parked[fut] = None
        look(2, (b"k1", b"k2"))
        first = [fut.result() for fut in futures[:2]]
        chan.attempted(True, hint=b"k1")  # its claim took k1
        chan.parked[futures[2]] = None
        look(2, (b"k1", b"k2", b"k3"))  # read before k1's claim committed; k2's claim still on
        late = futures[2].result()
        chan.attempted(True, hint=b"k2")
        chan.attempted(True, hint=b"k3")
        look(0, ())  # nothing ready: the spent hints are forgotten
        return [first, late, chan.handed, chan.spent, chan.outstanding]

    first, late, handed, spent, outstanding = asyncio.run(story())
    assert first == [b"k1", b"k2"] and late == b"k3"
    assert (handed, spent, outstanding) == (set(), set(), 0)
