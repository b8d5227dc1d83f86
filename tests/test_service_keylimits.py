"""Per-key concurrency and rate limits: claims skip keys at their limit, slots come back.

Every test runs per engine through `fdbqueue_db`. The concurrency tests keep a log of lease
events (a sequence number taken after a claim returned, another before its ack was sent: an
interval inside the real lease) and check that no moment had more leases of a key than its limit.
The numbers come from one counter under a lock, not from clocks, so the order they give is the
order things happened in, however loaded the machine. Token buckets are tested with a clock moved
ahead on demand, so nothing sleeps.
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
from django_fdbqueue.service._internals import keylimits, leases, waiting

from .processes import child_database, join_all, kill_leftovers

JOIN_SECONDS = 120
#: Keyless items of queue "one" (see `_fill`), all claimed while its first leases of "a" and "b" wait.
FREE_ONE = 24
#: Filled in by the concurrency tests: the most leases of one key seen at once, per limit.
OBSERVED: dict = {}
#: Half the consumers look at "one" first, half at "three": both queues are busy at once.
QUEUE_ORDERS = (("one", "three"), ("three", "one"))


def most_at_once(events: list[tuple[str, int, int]]) -> dict[str, int]:
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


def test_a_lease_that_ran_out_counts_until_a_pop_or_claim_takes_it_back(fdbqueue_db, clock):
    """Issue 28, as documented: the statistics and the limit state read counters, which the
    next pop or claim corrects (a peek writes nothing); the claim itself sees the slot free."""
    db = fdbqueue_db
    service.create_queue(db, "q", key_concurrency=1)
    service.push_many(db, "q", ["a1", "a2"], key="a")
    service.claim(db, "q", lease=5)  # never acked
    clock.advance(6)
    for _look in range(2):  # a peek moves nothing either
        state = service.key_limit_state(db, "q")
        assert (service.get_queue(db, "q").leased, state.leased, state.at_limit) == (1, [("a", 1)], ["a"])
        assert service.peek(db, "q").value == "a1"
    again = service.claim(db, "q", lease=5)  # not refused by the stale count
    assert again.item.value == "a1" and again.item.attempts == 2
    clock.advance(6)
    assert service.pop(db, "q").value == "a1"  # a pop takes the lease back too
    state = service.key_limit_state(db, "q")
    assert (service.get_queue(db, "q").leased, state.keys_leased, state.at_limit) == (0, 0, [])


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
    assert isinstance(blocked, waiting.Blocked)


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


def test_the_token_bucket_limits_claims_per_second(fdbqueue_db, still_clock):
    clock = still_clock  # between two claims no time passes but what the test gives
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


def test_rate_and_concurrency_together(fdbqueue_db, still_clock):
    clock = still_clock
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


class _Shared:
    """What the consumer threads share, under one lock: the sequence, the log, the counts.

    The first leases of "a" and "b" in queue "one" are held until every keyless item of that
    queue has been claimed: those items sit behind the held keys' other items, so they can only
    be claimed if busy keys do not hold the queue back. A hold that waits in vain is an error.
    """

    def __init__(self, total: int) -> None:
        self.lock = threading.Lock()
        self.total, self.done, self.seq, self.free_one = total, 0, 0, 0
        self.log: list[tuple[str, int, int]] = []  # (key, claimed, acked) in sequence numbers
        self.errors: list[str] = []
        self.free_one_claimed = threading.Event()

    def finished(self) -> bool:
        with self.lock:
            return self.done >= self.total

    def tick(self, key: str | None = None) -> int:
        """The next sequence number; a claim of a keyless item of "one" is counted with it."""
        with self.lock:
            self.seq += 1
            if key == "free-one":
                self.free_one += 1
                if self.free_one == FREE_ONE:
                    self.free_one_claimed.set()
            return self.seq

    def hold(self, key: str, seconds: float) -> None:
        """Keep the lease a while; one of "a" or "b" until the keyless items of "one" are claimed."""
        if key in ("a", "b") and not self.free_one_claimed.wait(JOIN_SECONDS / 4):
            with self.lock:
                self.errors.append(f"keyless items of 'one' held back behind the lease of {key!r}")
            self.free_one_claimed.set()  # reported once: the other holds need not wait in vain
        threading.Event().wait(seconds)

    def record(self, key: str, claimed: int, acked: int) -> None:
        with self.lock:
            self.log.append((key, claimed, acked))
            self.done += 1


def _key_of(value: str) -> str:
    """ "a".."d" for limited items, "free-one" or "free-three" for keyless ones."""
    return value.rsplit("-", 2)[0] if value.startswith("free") else value[0]


def _claim_first(db, names):
    for name in names:
        got = service.claim(db, name, lease=60)
        if got is not None:
            return got
    return None


def _consume(db, shared: _Shared, hold: float, names) -> None:
    try:
        while not shared.finished():
            got = _claim_first(db, names)
            if got is None:
                threading.Event().wait(0.002)  # a pause between polls, not a synchronisation
                continue
            key = _key_of(got.item.value)
            claimed = shared.tick(key)
            shared.hold(key, hold if not key.startswith("free") else 0.001)
            acked = shared.tick()
            service.ack(db, got.receipt)
            shared.record(key, claimed, acked)
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        with shared.lock:
            shared.errors.append(repr(exc))


def _check_log(log):
    at_once = most_at_once([(k, s, e) for k, s, e in log if not k.startswith("free")])
    assert at_once["a"] <= 1 and at_once["b"] <= 1, at_once
    assert at_once["c"] <= 3 and at_once["d"] <= 3, at_once
    # Keyless items are not held back: in the queue limited to one lease per key, they were all
    # claimed while its first leases of "a" and "b" were held (in sequence, not by the clock).
    last_free = max(s for k, s, _e in log if k == "free-one")
    first_ack = min(e for k, _s, e in log if k in ("a", "b"))
    assert last_free < first_ack, (last_free, first_ack)
    return at_once


def test_eight_threads_never_exceed_a_keys_limit(fdbqueue_db, engine_name):
    db = fdbqueue_db
    shared = _Shared(_fill(db))
    threads = [threading.Thread(target=_consume, args=(db, shared, 0.02, QUEUE_ORDERS[n % 2])) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in threads) and shared.errors == []
    assert len(shared.log) == shared.total
    at_once = _check_log(shared.log)
    OBSERVED[("threads", engine_name)] = at_once
    print(f"\nthreads on {engine_name}: most leases of a key at once {at_once}")
    for name in ("one", "three"):
        info = service.get_queue(db, name)
        assert (info.size, info.leased) == (0, 0)
        assert service.key_limit_state(db, name).keys_leased == 0


def _tick(counter) -> int:
    """The next number of a sequence shared by processes (a ``multiprocessing.Value``)."""
    with counter.get_lock():
        counter.value += 1
        return counter.value


def _consuming_child(setting, names, start, counter, results):
    try:
        db = child_database(setting)
        start.wait(JOIN_SECONDS)
        log = []
        idle_since = None
        while True:
            got = _claim_first(db, names)
            if got is None:
                empty = all(
                    service.get_queue(db, n).size + service.get_queue(db, n).leased == 0 for n in ("one", "three")
                )
                if empty:
                    break
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > JOIN_SECONDS:
                    raise TimeoutError("no progress")
                threading.Event().wait(0.002)  # a pause between polls, not a synchronisation
                continue
            idle_since = None
            claimed = _tick(counter)  # one sequence for every process, in the order things happened
            key = _key_of(got.item.value)
            threading.Event().wait(0.02 if not key.startswith("free") else 0.001)
            acked = _tick(counter)
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
    counter = ctx.Value("q", 0)
    setting = dict(django_settings.FDBQUEUE)
    procs = [
        ctx.Process(target=_consuming_child, args=(setting, QUEUE_ORDERS[n % 2], start, counter, results), daemon=True)
        for n in range(8)
    ]
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
    from django_fdbqueue.service._internals import catalog

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
