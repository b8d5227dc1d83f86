"""Per-key concurrency and rate limits: claims skip keys at their limit, slots come back.

Every test runs per engine through `fdbqueue_db`. The concurrency tests keep a log of lease
events (the time after a claim returned, the time before its ack was sent: an interval inside the
real lease) and check that no moment had more leases of a key than its limit. Token buckets are
tested with a clock moved ahead on demand, so nothing sleeps.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections import defaultdict

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.service import keyclaims, keylimits, leases

from .processes import child_database, join_all, kill_leftovers

JOIN_SECONDS = 120
#: Filled in by the concurrency tests: the most leases of one key seen at once, per limit.
OBSERVED: dict = {}
#: Half the consumers look at "one" first, half at "three": both queues are busy at once.
QUEUE_ORDERS = (("one", "three"), ("three", "one"))


def most_at_once(events: list[tuple[str, float, float]]) -> dict[str, int]:
    """Per key, the most intervals (claimed, acked) that overlap at any moment."""
    by_key: dict[str, list] = defaultdict(list)
    for key, start, stop in events:
        by_key[key].append((start, 1))
        by_key[key].append((stop, -1))
    out = {}
    for key, points in by_key.items():
        points.sort(key=lambda p: (p[0], p[1]))  # an ack at the same instant ends before a claim
        now = best = 0
        for _t, delta in points:
            now += delta
            best = max(best, now)
        out[key] = best
    return out


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2", 10**9])
def test_a_bad_concurrency_is_refused_and_nothing_stored(fdbqueue_db, bad):
    db = fdbqueue_db
    with pytest.raises(InvalidArgument, match="key_concurrency"):
        service.create_queue(db, "q", key_concurrency=bad)
    assert not service.queue_exists(db, "q")
    service.create_queue(db, "q", key_concurrency=2)
    with pytest.raises(InvalidArgument, match="key_concurrency"):
        service.set_key_limits(db, "q", concurrency=bad)
    assert service.get_queue(db, "q").key_concurrency == 2


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf"), True, "1"])
def test_a_bad_rate_is_refused_and_nothing_stored(fdbqueue_db, bad):
    db = fdbqueue_db
    with pytest.raises(InvalidArgument, match="key_rate"):
        service.create_queue(db, "q", key_rate=bad)
    assert not service.queue_exists(db, "q")
    service.create_queue(db, "q", key_rate=5)
    with pytest.raises(InvalidArgument, match="key_rate"):
        service.set_key_limits(db, "q", rate=bad)
    assert service.get_queue(db, "q").key_rate == 5.0


@pytest.mark.parametrize("bad", ["", "x" * (keylimits.KEY_MAX_BYTES + 1), "é" * 51, "\ud800", 7, b"k"])
def test_a_bad_key_is_refused_and_nothing_stored(fdbqueue_db, bad):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    with pytest.raises(InvalidArgument, match="key must be"):
        service.push(db, "q", "v", key=bad)
    with pytest.raises(InvalidArgument, match="key must be"):
        service.push_many(db, "q", ["v", "w"], key=bad)
    info = service.get_queue(db, "q")
    assert (info.size, info.pushed) == (0, 0)


def test_the_longest_key_is_accepted(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    key = "é" * 50  # 100 bytes of UTF-8
    service.push(db, "q", "v", key=key)
    lease = service.claim(db, "q")
    assert service.key_limit_state(db, "q").at_limit == [key]
    service.ack(db, lease.receipt)


def test_limits_are_kept_in_the_catalog_and_changed_or_removed(fdbqueue_db):
    db = fdbqueue_db
    info = service.create_queue(db, "q", kind="priority", max_attempts=3, key_concurrency=2, key_rate=1.5)
    assert (info.max_attempts, info.key_concurrency, info.key_rate) == (3, 2, 1.5)
    info = service.get_queue(db, "q")
    assert (info.max_attempts, info.key_concurrency, info.key_rate) == (3, 2, 1.5)
    info = service.set_key_limits(db, "q", rate=None)
    assert (info.max_attempts, info.key_concurrency, info.key_rate) == (3, 2, None)
    info = service.set_max_attempts(db, "q", None)
    assert (info.max_attempts, info.key_concurrency, info.key_rate) == (None, 2, None)
    info = service.set_key_limits(db, "q", concurrency=None)
    assert (info.key_concurrency, info.key_rate) == (None, None)
    assert service.get_queue(db, "q").key_concurrency is None


# --- skipping and slots ----------------------------------------------------------------------------


def test_a_claim_skips_a_busy_key_and_takes_the_next_eligible_item(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push(db, "q", "a1", key="a")
    service.push(db, "q", "a2", key="a")
    service.push(db, "q", "b1", key="b")
    service.push(db, "q", "free")
    got = [service.claim(db, "q") for _ in range(4)]
    assert [g.item.value if g else None for g in got] == ["a1", "b1", "free", None]
    state = service.key_limit_state(db, "q")
    assert state.at_limit == ["a", "b"] and dict(state.leased) == {"a": 1, "b": 1}
    assert service.get_queue(db, "q").size == 1  # a2 waits for a's slot


def test_ack_gives_the_slot_back(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    assert service.claim(db, "q") is None
    service.ack(db, first.receipt)
    assert service.claim(db, "q").item.value == "a2"


@pytest.mark.parametrize("delay", [0, 30])
def test_release_gives_the_slot_back(fdbqueue_db, delay):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    assert service.claim(db, "q") is None
    service.release(db, first.receipt, delay=delay)
    assert service.claim(db, "q").item.value == ("a1" if delay == 0 else "a2")


def test_a_lease_that_runs_out_gives_the_slot_back(fdbqueue_db, clock):
    """A consumer killed while holding a lease: its key's slot comes back with the lease."""
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    service.claim(db, "q", lease=5)  # never acked
    assert service.claim(db, "q") is None
    clock.advance(6)
    again = service.claim(db, "q", lease=5)
    assert again.item.value == "a1" and again.item.attempts == 2
    assert dict(service.key_limit_state(db, "q").leased) == {"a": 1}


def test_dead_lettering_gives_the_slot_back(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", max_attempts=1, key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2", "a3"], key="a")
    first = service.claim(db, "q")
    assert service.release(db, first.receipt) == "dead"
    second = service.claim(db, "q", lease=5)
    assert second.item.value == "a2"
    clock.advance(6)  # runs out on its last attempt: the next claim buries it, and frees the slot
    assert service.claim(db, "q").item.value == "a3"
    assert service.get_queue(db, "q").dead == 2
    assert dict(service.key_limit_state(db, "q").leased) == {"a": 1}


def test_counts_are_kept_without_limits_and_hold_when_limits_come(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q")
    service.push_many(db, "q", ["a1", "a2", "a3"], key="a")
    held = [service.claim(db, "q"), service.claim(db, "q")]
    service.set_key_limits(db, "q", concurrency=2)
    assert service.claim(db, "q") is None
    service.ack(db, held[0].receipt)
    assert service.claim(db, "q").item.value == "a3"


def test_clear_forgets_the_slots(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push(db, "q", "a1", key="a")
    service.claim(db, "q")
    service.clear(db, "q")
    assert service.key_limit_state(db, "q").keys_leased == 0
    service.push(db, "q", "a2", key="a")
    assert service.claim(db, "q").item.value == "a2"


def test_a_waiting_claim_gets_the_item_when_the_slot_comes_back(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    got: list = []
    started = threading.Event()

    def wait_for_it():
        started.set()
        got.append(service.claim(db, "q", wait=15))

    t = threading.Thread(target=wait_for_it)
    t.start()
    assert started.wait(10)
    service.ack(db, first.receipt)
    t.join(30)
    assert not t.is_alive() and got[0] is not None and got[0].item.value == "a2"


def test_all_candidates_blocked_is_none_for_that_moment(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", [f"a{n}" for n in range(keylimits.CANDIDATES + 1)], key="a")
    service.push(db, "q", "behind the bound")
    assert service.claim(db, "q").item.value == "a0"
    assert service.claim(db, "q") is None  # the free item is past the candidates
    blocked = leases.claim_once(db, "q", 30.0, "min")
    assert isinstance(blocked, keyclaims.Blocked)


def test_the_end_max_skips_busy_keys_too(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority", key_concurrency=1)
    service.push(db, "q", "a-high", 9, key="a")
    service.push(db, "q", "a-high2", 9, key="a")
    service.push(db, "q", "b-low", 1, key="b")
    assert service.claim(db, "q", end="max").item.value == "a-high"
    assert service.claim(db, "q", end="max").item.value == "b-low"
    assert service.claim(db, "q", end="max") is None


# --- token buckets ---------------------------------------------------------------------------------


def test_the_token_bucket_limits_claims_per_second(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", key_rate=2)
    service.push_many(db, "q", [f"a{n}" for n in range(8)], key="a")
    service.push(db, "q", "free")

    def claim_value():
        lease = service.claim(db, "q")
        if lease is None:
            return None
        service.ack(db, lease.receipt)
        return lease.item.value

    assert [claim_value() for _ in range(3)] == ["a0", "a1", "free"]  # a burst of 2, then other keys
    assert claim_value() is None
    clock.advance(0.5)  # one token
    assert [claim_value(), claim_value()] == ["a2", None]
    clock.advance(0.25)  # half a token
    assert claim_value() is None
    clock.advance(0.25)
    assert claim_value() == "a3"
    clock.advance(60)  # the bucket holds at most max(1, rate) tokens
    assert [claim_value(), claim_value(), claim_value()] == ["a4", "a5", None]


def test_rate_and_concurrency_together(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", key_rate=0.5, key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    first = service.claim(db, "q")
    service.ack(db, first.receipt)
    assert service.claim(db, "q") is None  # a free slot, but no token (one per two seconds)
    clock.advance(2)
    assert service.claim(db, "q").item.value == "a2"


# --- many consumers --------------------------------------------------------------------------------


def _fill(db):
    """Queue "one" (key limit 1) and "three" (limit 3), each with limited keys and keyless items."""
    service.create_queue(db, "one", key_concurrency=1)
    service.create_queue(db, "three", key_concurrency=3)
    for n in range(12):
        service.push(db, "one", f"a{n}", key="a")
        service.push(db, "one", f"b{n}", key="b")
        service.push(db, "three", f"c{n}", key="c")
        service.push(db, "three", f"d{n}", key="d")
        for m in range(2):
            service.push(db, "one", f"free-one-{n}-{m}")
            service.push(db, "three", f"free-three-{n}-{m}")
    return 12 * 4 + 12 * 4  # items in both queues


def _consume(db, total, done, log, lock, errors, hold, names):
    try:
        while True:
            with lock:
                if done[0] >= total:
                    return
            got = None
            for name in names:
                got = service.claim(db, name, lease=60)
                if got is not None:
                    break
            if got is None:
                threading.Event().wait(0.002)
                continue
            claimed = time.monotonic()
            key = got.item.value.rsplit("-", 2)[0] if got.item.value.startswith("free") else got.item.value[0]
            threading.Event().wait(hold if not key.startswith("free") else 0.001)
            acked = time.monotonic()
            service.ack(db, got.receipt)
            with lock:
                log.append((key, claimed, acked))
                done[0] += 1
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(repr(exc))


def _check_log(log):
    at_once = most_at_once([(k, s, e) for k, s, e in log if not k.startswith("free")])
    assert at_once["a"] <= 1 and at_once["b"] <= 1, at_once
    assert at_once["c"] <= 3 and at_once["d"] <= 3, at_once
    # Keyless items are not held back: in the queue limited to one lease per key, they were all
    # done while its limited keys still had work.
    last_free = max(e for k, _s, e in log if k == "free-one")
    last_one = max(e for k, _s, e in log if k in ("a", "b"))
    assert last_free < last_one
    return at_once


def test_eight_threads_never_exceed_a_keys_limit(fdbqueue_db, engine_name):
    db = fdbqueue_db
    total = _fill(db)
    done, log, lock, errors = [0], [], threading.Lock(), []
    threads = [
        threading.Thread(target=_consume, args=(db, total, done, log, lock, errors, 0.02, QUEUE_ORDERS[n % 2]))
        for n in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert len(log) == total
    at_once = _check_log(log)
    OBSERVED[("threads", engine_name)] = at_once
    print(f"\nthreads on {engine_name}: most leases of a key at once {at_once}")
    for name in ("one", "three"):
        info = service.get_queue(db, name)
        assert (info.size, info.leased) == (0, 0)
        assert service.key_limit_state(db, name).keys_leased == 0


def _consuming_child(setting, names, start, results):
    try:
        db = child_database(setting)
        start.wait(JOIN_SECONDS)
        log = []
        idle_since = None
        while True:
            got = None
            for name in names:
                got = service.claim(db, name, lease=60)
                if got is not None:
                    break
            if got is None:
                empty = all(service.get_queue(db, n).size + service.get_queue(db, n).leased == 0 for n in ("one", "three"))
                if empty:
                    break
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > JOIN_SECONDS:
                    raise TimeoutError("no progress")
                threading.Event().wait(0.002)
                continue
            idle_since = None
            claimed = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process
            value = got.item.value
            key = value.rsplit("-", 2)[0] if value.startswith("free") else value[0]
            threading.Event().wait(0.02 if not key.startswith("free") else 0.001)
            acked = time.monotonic()
            service.ack(db, got.receipt)
            log.append((key, claimed, acked))
        results.put(("ok", os.getpid(), log))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        results.put(("error", os.getpid(), repr(exc)))


def test_eight_processes_never_exceed_a_keys_limit(fdbqueue_db, engine_name):
    db = fdbqueue_db
    total = _fill(db)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(8)
    results = ctx.Queue()
    setting = dict(django_settings.FDBQUEUE)
    procs = [ctx.Process(target=_consuming_child, args=(setting, QUEUE_ORDERS[n % 2], start, results), daemon=True)
             for n in range(8)]
    for p in procs:
        p.start()
    try:
        log = []
        deadline = time.monotonic() + JOIN_SECONDS * 2
        for _ in procs:
            status, _pid, payload = results.get(timeout=max(0.1, deadline - time.monotonic()))
            assert status == "ok", payload
            log.extend(payload)
        join_all(procs, JOIN_SECONDS)
    finally:
        kill_leftovers(procs)
    assert len(log) == total
    at_once = most_at_once([(k, s, e) for k, s, e in log if not k.startswith("free")])
    assert at_once["a"] <= 1 and at_once["b"] <= 1 and at_once["c"] <= 3 and at_once["d"] <= 3, at_once
    OBSERVED[("processes", engine_name)] = at_once
    print(f"\nprocesses on {engine_name}: most leases of a key at once {at_once}")


# --- round trips ---------------------------------------------------------------------------------


def test_a_limited_claim_sends_its_first_reads_together(fdbqueue_db):
    """The catalog check, what is due, the candidates and the "full" markers: one round trip."""
    from django_fdbqueue.service import catalog

    from .test_round_trips import RecordingTransaction

    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push(db, "q", "a1", key="a")
    service.peek(db, "q")  # the entry is in this process's cache now
    _entry, qk = catalog.require(db.create_transaction(), "q")
    tr = RecordingTransaction(db.create_transaction(), qk.hidden.range().start)
    assert service.claim(tr, "q").item.value == "a1"
    tr.commit().wait()
    first_wait = next(i for i, entry in enumerate(tr.log) if entry.startswith("wait"))
    before = tr.log[:first_wait]
    assert {"send catalog", "send snapshot due"} <= set(before), tr.log
    assert before.count("send snapshot items") == 2, tr.log  # the candidates and the markers
