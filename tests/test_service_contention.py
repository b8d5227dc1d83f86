"""High-contention pops (service/contention.py): exactly once, in order, and safe when poppers fail.

Every test runs per engine through `fdbqueue_db`; those that inject faults need the embedded
engine's fault injector and are skipped on a real cluster. Time is never waited out: deadlines
are moved by giving the protocol a clock that runs ahead (`now_micros`), and clients meet at
barriers and events with bounded waits.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter

import pytest
from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument, QueueNotFound, WrongQueueKind
from django_fdbqueue.fdbapi import ErrorCode, FDBError, fdb, transactional
from django_fdbqueue.service._internals import contention
from django_fdbqueue.service._internals.catalog import require
from django_fdbqueue.service._internals.tokens import parse_item_id
from tests.clock import Clock
from tests.processes import child_database, join_all, kill_leftovers

HC = "high-contention"
JOIN_SECONDS = 60
CLIENTS = 8
SCENARIOS = [("fifo", "min"), ("priority", "min"), ("priority", "max")]
ROUND_ATTEMPTS = 50


# --- helpers ---------------------------------------------------------------------------------


def hc_pop(db, name, end="min", **kwargs):
    return service.pop(db, name, end, mode=HC, **kwargs)


def order_key(item_id: str, end: str) -> tuple:
    """Where an item stands in the pop order of `end` (min: priority up; max: priority down; then push order)."""
    priority, stamp = parse_item_id(item_id)
    packed = fdb.tuple.pack((stamp,))
    return (priority, packed) if end == "min" else (-priority, packed)


def fill(db, name: str, kind: str, count: int) -> list[str]:
    batch = [({"n": n}, 0 if kind == "fifo" else n % 3) for n in range(count)]
    return [item.id for item in service.push_many(db, name, batch)]


@transactional
def staging_keys(tr, name: str) -> dict[str, list[bytes]]:
    """The requests (per end), results and receipts the protocol left in the queue."""
    _entry, qk = require(tr, name)
    out = {}
    for label, space in (
        ("min", qk.requests("min")),
        ("max", qk.requests("max")),
        ("results", qk.results),
        ("receipts", qk.receipts),
    ):
        r = space.range()
        out[label] = [bytes(kv.key) for kv in tr.get_range(r.start, r.stop)]
    return out


def new_pop(name: str, end: str = "min", seconds: float = 5.0) -> contention._Pop:
    """A pop's identity as ``contention.pop`` makes it, for driving the protocol step by step."""
    return contention._Pop(name, end, contention.now_micros() + int(seconds * 1e6), time.monotonic() + seconds)


def committed_round(db, name: str, end: str = "min", fulfil=None) -> contention.Round:
    """One fulfil round that committed. A round is one attempt, and on a shared cluster another
    test's transactions on the same keys can make it conflict: run it again, a bounded number
    of times, as the next popper would.
    ``fulfil`` is the round to run, when a test has switched ``contention._fulfil`` off."""
    run = fulfil or (lambda: contention.fulfil(db, name, end))
    for _attempt in range(ROUND_ATTEMPTS):
        done = run()
        if done.committed:
            return done
    raise AssertionError(f"no fulfil round committed in {ROUND_ATTEMPTS} attempts")


def register(db, p: contention._Pop) -> None:
    """Register `p`'s request (as a pop that skips the fast path does), and nothing else."""
    assert contention._arrive(db, p, stage=True) is contention.STAGED


def settled(db, p: contention._Pop):
    """What a registered pop ends with, driven as ``contention.pop`` drives it: a pop that a
    round named (or that finds nobody leading) runs the next round before it collects."""
    for _attempt in range(ROUND_ATTEMPTS):
        state = contention._settle(db, p, withdraw=False)
        if state is not contention.LEAD:
            return state
        done = contention._fulfil(db, p.name, p.end, p, lead=True)
        if done.committed and done.mine is not None:
            return done.mine  # its own round reached its request
    raise AssertionError(f"the pop still leads after {ROUND_ATTEMPTS} rounds")


def force_staging(monkeypatch) -> None:
    """Skip the fast path: every pop registers a request and is served by a fulfil round."""
    real = contention._arrive
    monkeypatch.setattr(contention, "_arrive", lambda db, p, stage=False: real(db, p, stage=True))


_registration_count = Counter()


def _registrations() -> int:
    return _registration_count["n"]


@pytest.fixture(autouse=True)
def _count_registrations(monkeypatch):
    """Count pops that registered a request, to prove the staged path was exercised."""
    real = contention._arrive

    def counting(db, p, stage=False):
        got = real(db, p, stage=stage)
        if got is contention.STAGED:
            _registration_count["n"] += 1
        return got

    monkeypatch.setattr(contention, "_arrive", counting)


def check_exactly_once(pushed: list[str], per_client: list[list[str]], remaining: list[str] = ()) -> None:
    popped = [item for got in per_client for item in got]
    duplicates = [item for item, count in Counter(popped).items() if count > 1]
    assert not duplicates, f"popped twice: {duplicates[:5]}"
    assert sorted(popped + list(remaining)) == sorted(pushed), "an item was lost (or invented)"


def check_each_client_in_order(per_client: list[list[str]], end: str) -> None:
    """A client's successive pops come out in queue order (nothing was pushed ahead of them)."""
    for index, got in enumerate(per_client):
        keys = [order_key(item, end) for item in got]
        assert keys == sorted(keys), f"client {index} got items out of queue order"


# --- API and single-client behaviour -----------------------------------------------------------


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_one_client_pops_in_queue_order(fdbqueue_db, kind, end):
    service.create_queue(fdbqueue_db, "q", kind=kind)
    fill(fdbqueue_db, "q", kind, 12)
    expected = [item.id for item in service.browse(fdbqueue_db, "q", end=end, limit=100).items]
    got = [hc_pop(fdbqueue_db, "q", end).id for _ in range(12)]
    assert got == expected
    assert hc_pop(fdbqueue_db, "q", end) is None
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.pushed, info.popped) == (0, 12, 12)


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_staged_pops_are_served_in_queue_order(fdbqueue_db, monkeypatch, kind, end):
    """Through requests and rounds only (no fast path): same items, same order, same counters."""
    force_staging(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind=kind)
    fill(fdbqueue_db, "q", kind, 6)
    expected = [item.id for item in service.browse(fdbqueue_db, "q", end=end).items]
    got = [hc_pop(fdbqueue_db, "q", end) for _ in range(6)]
    assert [item.id for item in got] == expected
    assert hc_pop(fdbqueue_db, "q", end) is None
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (0, 6)
    left = staging_keys(fdbqueue_db, "q")
    assert left["min"] == left["max"] == left["results"] == []


def test_a_round_serves_every_waiting_request_in_request_order(fdbqueue_db):
    """Requests registered first get the earlier items; the owner collects its own result."""
    service.create_queue(fdbqueue_db, "q", kind="priority")
    ids = fill(fdbqueue_db, "q", "priority", 3)
    expected = [item.id for item in service.browse(fdbqueue_db, "q").items]
    pops = [new_pop("q") for _ in range(4)]
    for p in pops:
        register(fdbqueue_db, p)
    done = committed_round(fdbqueue_db, "q")
    assert (done.served, done.answered_empty) == (3, 1)
    got = [settled(fdbqueue_db, p) for p in pops]
    assert [item.id for item in got[:3]] == expected
    assert got[3] is contention.EMPTY  # the queue ran out: "empty", true when the round committed
    assert sorted(ids) == sorted(expected)
    left = staging_keys(fdbqueue_db, "q")
    assert left["min"] == left["results"] == []


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_an_arriving_pop_serves_the_waiting_requests_first(fdbqueue_db, kind, end):
    """A newcomer that finds pops waiting does not overtake them: it registers behind them, and
    the round it runs (nobody else leads) gives them the first items in request order and the
    newcomer the next one."""
    service.create_queue(fdbqueue_db, "q", kind=kind)
    fill(fdbqueue_db, "q", kind, 4)
    expected = [item.id for item in service.browse(fdbqueue_db, "q", end=end).items]
    waiting = [new_pop("q", end) for _ in range(2)]
    for p in waiting:
        register(fdbqueue_db, p)
    assert hc_pop(fdbqueue_db, "q", end).id == expected[2]
    assert [settled(fdbqueue_db, p).id for p in waiting] == expected[:2]
    assert hc_pop(fdbqueue_db, "q", end).id == expected[3]  # nobody waiting: the plain fast path
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (0, 4)


@transactional
def lead_of(tr, name: str, end: str = "min") -> bytes | None:
    """The token of the pop the ``lead`` key names, or None when nobody leads."""
    _entry, qk = require(tr, name)
    raw = tr[qk.lead(end)]
    return fdb.tuple.unpack(bytes(raw))[0] if raw.present() else None


def test_a_leading_round_names_the_last_pop_it_answered_to_run_the_next(fdbqueue_db):
    """One pop leads at a time: its round answers every request it sees, in order, and hands the
    rounds to the last one it answered, which runs the next round before collecting; a round
    that answers nobody else leaves the rounds to nobody."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 5)
    first, second, third = (new_pop("q") for _ in range(3))
    for p in (first, second, third):
        register(fdbqueue_db, p)
    assert (first.leads, second.leads, third.leads) == (True, False, False)  # the first named itself
    done = contention._fulfil(fdbqueue_db, "q", "min", first, lead=True)
    assert done.committed and done.served == 3 and done.mine.id == ids[0]
    assert lead_of(fdbqueue_db, "q") == third.token
    assert contention._settle(fdbqueue_db, second, withdraw=False).id == ids[1]  # not named: collects
    assert contention._settle(fdbqueue_db, third, withdraw=False) is contention.LEAD
    late = new_pop("q")
    register(fdbqueue_db, late)
    assert not late.leads  # the third pop leads now: the newcomer waits for its round
    assert contention._fulfil(fdbqueue_db, "q", "min", late, lead=True).led_elsewhere
    done = contention._fulfil(fdbqueue_db, "q", "min", third, lead=True)
    assert done.committed and done.served == 1 and lead_of(fdbqueue_db, "q") == late.token
    assert contention._settle(fdbqueue_db, third, withdraw=False).id == ids[2]
    assert settled(fdbqueue_db, late).id == ids[3]
    assert lead_of(fdbqueue_db, "q") is None  # its round answered nobody else
    assert staging_keys(fdbqueue_db, "q")["results"] == []


def test_a_pop_named_to_lead_that_never_does_is_replaced(fdbqueue_db, monkeypatch):
    """The named pop died: once its turn has run out, a waiting pop runs the round itself."""
    clock = Clock(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 3)
    leader, dead = new_pop("q", seconds=30), new_pop("q", seconds=30)
    register(fdbqueue_db, leader)
    register(fdbqueue_db, dead)
    assert contention._fulfil(fdbqueue_db, "q", "min", leader, lead=True).committed
    assert lead_of(fdbqueue_db, "q") == dead.token  # and it never runs its round
    waiting = new_pop("q", seconds=30)
    register(fdbqueue_db, waiting)
    assert not waiting.leads
    assert not isinstance(contention._settle(fdbqueue_db, waiting, withdraw=False), contention.Outcome)
    clock.advance(contention.LEAD_SECONDS + 0.1)
    assert contention._settle(fdbqueue_db, waiting, withdraw=False) is contention.LEAD
    assert settled(fdbqueue_db, waiting).id == ids[2]
    assert contention._settle(fdbqueue_db, dead, withdraw=True).id == ids[1]  # kept for it meanwhile


def test_empty_queue_returns_none_promptly(fdbqueue_db):
    service.create_queue(fdbqueue_db, "q", kind="priority")
    long = 60.0  # timeouts far beyond what three answers take on a loaded machine
    started = time.monotonic()
    assert hc_pop(fdbqueue_db, "q", timeout=long) is None  # nobody waiting: the fast path says "empty"
    # With a request already waiting, the newcomer registers behind it and its round answers both "empty".
    other = new_pop("q", seconds=long)
    register(fdbqueue_db, other)
    assert hc_pop(fdbqueue_db, "q", timeout=long) is None
    assert hc_pop(fdbqueue_db, "q", "max", timeout=long) is None
    assert time.monotonic() - started < long / 2  # no waiting for a timeout
    assert settled(fdbqueue_db, other) is contention.EMPTY


def test_arguments_are_checked(fdbqueue_db):
    service.create_queue(fdbqueue_db, "fifo", kind="fifo")
    with pytest.raises(WrongQueueKind):
        hc_pop(fdbqueue_db, "fifo", "max")
    with pytest.raises(InvalidArgument):
        service.pop(fdbqueue_db, "fifo", mode="fast")
    with pytest.raises(InvalidArgument):
        service.pop(fdbqueue_db, "fifo", timeout=1.0)  # a plain pop has no timeout of its own
    for bad in (0, -1, "1", True, 10_000):
        with pytest.raises(InvalidArgument):
            hc_pop(fdbqueue_db, "fifo", timeout=bad)
    with pytest.raises(QueueNotFound):
        hc_pop(fdbqueue_db, "missing")


def test_inside_a_transaction_is_refused(fdbqueue_db):
    """It runs several transactions, so it cannot be part of the caller's: said plainly, nothing written."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    service.enqueue(fdbqueue_db, "q", "x")

    @transactional
    def inside(tr):
        return service.dequeue(tr, "q", mode=HC)

    with pytest.raises(InvalidArgument, match="transaction"):
        inside(fdbqueue_db)
    assert service.size(fdbqueue_db, "q") == 1
    assert transactional(lambda tr: service.dequeue(tr, "q"))(fdbqueue_db).value == "x"  # plain joins it


def test_spellings_pass_the_mode_through(fdbqueue_db):
    service.create_queue(fdbqueue_db, "p", kind="priority")
    service.push_many(fdbqueue_db, "p", [("low", 1), ("high", 9), ("low2", 1)])
    assert service.pop_max(fdbqueue_db, "p", mode=HC).value == "high"
    assert service.pop_min(fdbqueue_db, "p", mode=HC, timeout=2).value == "low"
    service.create_queue(fdbqueue_db, "f", kind="fifo")
    service.enqueue(fdbqueue_db, "f", "a")
    assert service.dequeue(fdbqueue_db, "f", mode=HC).value == "a"


# --- abandonment and timeouts ------------------------------------------------------------------


def test_abandoned_result_goes_back_to_its_original_place(fdbqueue_db, monkeypatch):
    """A popper registers, is served, and vanishes: after its deadline (+ grace) the item returns."""
    clock = Clock(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="priority")
    fill(fdbqueue_db, "q", "priority", 5)
    before = [item.id for item in service.browse(fdbqueue_db, "q").items]
    ghost = new_pop("q", seconds=1.0)
    register(fdbqueue_db, ghost)
    assert committed_round(fdbqueue_db, "q").served == 1
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == before[1:]
    assert service.get_queue(fdbqueue_db, "q").size == 4
    assert len(staging_keys(fdbqueue_db, "q")["results"]) == 2  # the item and the owner's bell

    clock.advance(1.0 + contention.GRACE_SECONDS / 2)  # past the deadline, within the grace
    assert committed_round(fdbqueue_db, "q").restored == 0
    clock.advance(contention.GRACE_SECONDS)
    assert committed_round(fdbqueue_db, "q").restored == 1
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == before  # same id, same place
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.pushed, info.popped) == (5, 5, 0)
    assert staging_keys(fdbqueue_db, "q")["results"] == []
    assert hc_pop(fdbqueue_db, "q").id == before[0]
    # The owner coming back late finds nothing of its own: it timed out, nothing is duplicated.
    with pytest.raises(FDBError) as raised:
        contention._finish(contention._settle(fdbqueue_db, ghost, withdraw=True))
    assert raised.value.code == ErrorCode.TRANSACTION_TIMED_OUT


def test_abandoned_request_is_dropped_and_takes_nothing(fdbqueue_db, monkeypatch):
    clock = Clock(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="priority")
    fill(fdbqueue_db, "q", "priority", 2)
    ghost = new_pop("q", "max", seconds=1.0)
    register(fdbqueue_db, ghost)
    assert staging_keys(fdbqueue_db, "q")["max"] == [ghost.request_key]
    clock.advance(1.0 + contention.GRACE_SECONDS + 0.1)
    done = committed_round(fdbqueue_db, "q", "max")
    assert (done.dropped, done.served) == (1, 0)
    assert staging_keys(fdbqueue_db, "q")["max"] == []
    assert service.size(fdbqueue_db, "q") == 2


def test_a_pop_that_times_out_withdraws_its_request(fdbqueue_db, monkeypatch):
    """Nobody serves it (rounds are switched off): it withdraws and raises 1031; items untouched."""
    force_staging(monkeypatch)
    monkeypatch.setattr(contention, "_fulfil", lambda db, name, end, p, lead=False: contention.Round())
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    fill(fdbqueue_db, "q", "fifo", 2)
    started = time.monotonic()
    with pytest.raises(FDBError) as raised:
        hc_pop(fdbqueue_db, "q", timeout=0.3)
    assert raised.value.code == ErrorCode.TRANSACTION_TIMED_OUT
    assert time.monotonic() - started < 3.0
    left = staging_keys(fdbqueue_db, "q")
    assert left["min"] == left["results"] == []
    assert service.size(fdbqueue_db, "q") == 2


def test_a_pop_that_times_out_takes_the_result_written_for_it(fdbqueue_db, monkeypatch):
    """Served at the last moment, just before withdrawing: the item is returned, never dropped."""
    force_staging(monkeypatch)
    real_fulfil, real_settle = contention._fulfil, contention._settle
    monkeypatch.setattr(contention, "_fulfil", lambda db, name, end, p, lead=False: contention.Round())

    def settle(db, p, *, withdraw):
        if withdraw:  # someone else's round serves us just as we give up
            assert committed_round(db, p.name, p.end, lambda: real_fulfil(db, p.name, p.end, None)).served == 1
        return real_settle(db, p, withdraw=withdraw)

    monkeypatch.setattr(contention, "_settle", settle)
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 2)
    item = hc_pop(fdbqueue_db, "q", timeout=0.2)
    assert item.id == ids[0]
    left = staging_keys(fdbqueue_db, "q")
    assert left["min"] == left["results"] == []
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (1, 1)


# --- many clients: threads ---------------------------------------------------------------------


def run_threads(
    db,
    name: str,
    end: str,
    clients: int,
    *,
    staged: set[int] = frozenset(),
    producer: list | None = None,
    timeout: float | None = None,
) -> tuple[list[list[str]], list[str]]:
    """`clients` threads pop `name` until it is empty (and the producer, if any, is done).

    Each client waits after its first item until every client has one, so the work is surely
    shared and the pops surely overlap. Clients in `staged` never take the fast path.
    Returns what each client got, in the order it got it, and what the producer pushed.
    """
    start = threading.Barrier(clients + (1 if producer is not None else 0), timeout=JOIN_SECONDS)
    all_have_one = threading.Barrier(clients, timeout=JOIN_SECONDS)
    producer_done = threading.Event()
    if producer is None:
        producer_done.set()
    got: list[list[str]] = [[] for _ in range(clients)]
    pushed: list[str] = []
    errors: list[BaseException] = []
    local = threading.local()
    real_arrive = contention._arrive

    def arrive(db_, p, stage=False):
        return real_arrive(db_, p, stage=stage or getattr(local, "staged", False))

    contention._arrive = arrive

    def consumer(index: int) -> None:
        local.staged = index in staged
        try:
            start.wait()
            while True:
                finished = producer_done.is_set()  # read before popping: an empty pop after it is final
                item = hc_pop(db, name, end, timeout=timeout)
                if item is None:
                    if finished:
                        return
                    producer_done.wait(0.005)
                    continue
                got[index].append(item.id)
                if len(got[index]) == 1:
                    all_have_one.wait()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            all_have_one.abort()

    def produce() -> None:
        try:
            start.wait()
            for n in range(len(producer)):
                pushed.append(service.enqueue(db, name, producer[n]).id)
        except BaseException as exc:
            errors.append(exc)
        finally:
            producer_done.set()

    threads = [threading.Thread(target=consumer, args=(i,), daemon=True) for i in range(clients)]
    if producer is not None:
        threads.append(threading.Thread(target=produce, daemon=True))
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(JOIN_SECONDS)
    finally:
        contention._arrive = real_arrive
    assert not any(thread.is_alive() for thread in threads), "a client hung"
    assert not errors, errors
    return got, pushed


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_threads_pop_exactly_once_in_order(fdbqueue_db, kind, end):
    service.create_queue(fdbqueue_db, "q", kind=kind)
    pushed = fill(fdbqueue_db, "q", kind, 160)
    registered_before = _registrations()
    got, _ = run_threads(fdbqueue_db, "q", end, CLIENTS, staged={1, 3, 5, 7})
    check_exactly_once(pushed, got)
    check_each_client_in_order(got, end)
    assert all(got), "a client took no item"
    assert _registrations() > registered_before, "no pop was staged"
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.pushed, info.popped) == (0, 160, 160)
    left = staging_keys(fdbqueue_db, "q")
    assert left["min"] == left["max"] == left["results"] == []
    assert len(left["receipts"]) <= CLIENTS + 1  # one slot per client thread (and the test's own)


def test_threads_with_a_concurrent_producer_keep_fifo_order(fdbqueue_db):
    """FIFO: a push lands behind every item a round saw, so each client still gets push order."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    prefilled = fill(fdbqueue_db, "q", "fifo", 40)
    got, pushed = run_threads(
        fdbqueue_db, "q", "min", CLIENTS, staged={0, 2, 4, 6}, producer=[{"late": n} for n in range(80)]
    )
    check_exactly_once(prefilled + pushed, got)
    check_each_client_in_order(got, "min")
    assert service.get_queue(fdbqueue_db, "q").size == 0


# --- many clients: processes -------------------------------------------------------------------


def _child_main(index: int, setting: dict, name: str, end: str, staged: bool, start, all_have_one, results) -> None:
    try:
        db = child_database(setting)
        if staged:
            real = contention._arrive
            contention._arrive = lambda db_, p, stage=False: real(db_, p, stage=True)
        start.wait(JOIN_SECONDS)
        got = []
        while (item := hc_pop(db, name, end)) is not None:
            got.append(item.id)
            if len(got) == 1:
                all_have_one.wait(JOIN_SECONDS)
        results.put(("ok", index, got))
    except BaseException as exc:  # the parent fails the test with this
        results.put(("error", index, repr(exc)))


@pytest.mark.parametrize("kind, ends", [("fifo", ("min",)), ("priority", ("min", "max"))])
def test_processes_pop_exactly_once_in_order(fdbqueue_db, kind, ends):
    """Eight processes on one queue (half of them always staged; for the priority queue, half
    popping each end): every item once, each process's items in its end's order."""
    name = "shared"
    service.create_queue(fdbqueue_db, name, kind=kind)
    pushed = fill(fdbqueue_db, name, kind, 160)
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(CLIENTS)
    all_have_one = ctx.Barrier(CLIENTS)
    results = ctx.Queue()
    setting = dict(django_settings.FDBQUEUE)
    ends_of = [ends[i % len(ends)] for i in range(CLIENTS)]
    procs = [
        ctx.Process(
            target=_child_main,
            args=(i, setting, name, ends_of[i], i % 4 >= 2, start, all_have_one, results),
            daemon=True,
        )
        for i in range(CLIENTS)
    ]
    for proc in procs:
        proc.start()
    try:
        collected = {}
        deadline = time.monotonic() + JOIN_SECONDS * 2
        while len(collected) < CLIENTS:
            status, index, payload = results.get(timeout=max(0.1, deadline - time.monotonic()))
            assert status == "ok", payload
            collected[index] = payload
        join_all(procs, JOIN_SECONDS)
    finally:
        kill_leftovers(procs)
    got = [collected[i] for i in range(CLIENTS)]
    check_exactly_once(pushed, got)
    for end in ends:
        check_each_client_in_order([got[i] for i in range(CLIENTS) if ends_of[i] == end], end)
    assert all(got), "a process took no item"
    info = service.get_queue(fdbqueue_db, name)
    assert (info.size, info.popped) == (0, 160)
    left = staging_keys(fdbqueue_db, name)
    assert left["min"] == left["max"] == left["results"] == []


# --- commit failures ---------------------------------------------------------------------------
# `faults` (conftest.py) is the embedded engine's fault injector; on a real cluster these skip.


def test_fast_pop_applied_despite_1021_returns_its_item_once(fdbqueue_db, faults):
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 3)
    faults.fail_next("unknown_applied")
    assert hc_pop(fdbqueue_db, "q").id == ids[0]  # the receipt says the first attempt took it
    assert faults.injected["unknown_applied"] == 1
    assert [hc_pop(fdbqueue_db, "q").id for _ in range(2)] == ids[1:]
    assert service.get_queue(fdbqueue_db, "q").popped == 3


def test_fast_pop_not_applied_under_1021_pops_again(fdbqueue_db, faults):
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 2)
    faults.fail_next("unknown_not_applied", "unknown_not_applied")
    assert hc_pop(fdbqueue_db, "q").id == ids[0]
    assert service.get_queue(fdbqueue_db, "q").size == 1


@pytest.mark.parametrize("kind", ["unknown_applied", "unknown_not_applied"])
def test_registration_under_1021_leaves_exactly_one_request(fdbqueue_db, faults, kind):
    service.create_queue(fdbqueue_db, "q", kind="priority")
    fill(fdbqueue_db, "q", "priority", 2)
    p = new_pop("q")
    faults.fail_next(kind)
    register(fdbqueue_db, p)
    assert staging_keys(fdbqueue_db, "q")["min"] == [p.request_key]
    assert contention.fulfil(fdbqueue_db, "q").served == 1
    assert isinstance(settled(fdbqueue_db, p), service.Item)
    assert service.size(fdbqueue_db, "q") == 1


def fail_first_round(monkeypatch, faults, fault: str) -> None:
    """Make the commit of the first fulfil round fail with `fault`, and only that one."""
    real_fulfil = contention._fulfil
    rounds = []

    def fulfil(db, name, end, p, lead=False):
        if not rounds:
            faults.fail_next(fault)
        rounds.append(1)
        return real_fulfil(db, name, end, p, lead=lead)

    monkeypatch.setattr(contention, "_fulfil", fulfil)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_own_round_under_1021(fdbqueue_db, faults, monkeypatch, fault):
    """Commit 1 registers, commit 2 is the round that serves the pop itself and ends in 1021."""
    force_staging(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="priority")
    ids = [item.id for item in service.push_many(fdbqueue_db, "q", [("a", 1), ("b", 2)])]
    fail_first_round(monkeypatch, faults, fault)
    assert hc_pop(fdbqueue_db, "q").id == ids[0]
    assert hc_pop(fdbqueue_db, "q").id == ids[1]
    assert hc_pop(fdbqueue_db, "q") is None
    assert faults.injected[fault] == 1
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (0, 2)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_collect_under_1021(fdbqueue_db, faults, fault):
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 2)
    p = new_pop("q")
    register(fdbqueue_db, p)
    assert contention.fulfil(fdbqueue_db, "q").served == 1
    faults.fail_next(fault)
    assert settled(fdbqueue_db, p).id == ids[0]
    assert staging_keys(fdbqueue_db, "q")["results"] == []
    assert contention._settle(fdbqueue_db, p, withdraw=True) is contention.GONE  # nothing left for it


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_own_empty_answer_under_1021(fdbqueue_db, faults, monkeypatch, fault):
    force_staging(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    fail_first_round(monkeypatch, faults, fault)
    assert hc_pop(fdbqueue_db, "q") is None
    assert staging_keys(fdbqueue_db, "q")["min"] == []


def test_random_faults_lose_and_duplicate_nothing(fdbqueue_db, faults, monkeypatch):
    """Conflicts and unknown results on 30% of commits, 8 clients: every item popped at most once,
    and every item not popped is in the queue, or back in it once the deadlines have passed.

    What 1021 can do here: an attempt that took an item may or may not have committed; the pop
    finds out from its receipt (or, for a registration, by looking for its token) and never takes
    a second item for itself; a round serving others is simply redone from a fresh read.
    """
    clock = Clock(monkeypatch)
    service.create_queue(fdbqueue_db, "q", kind="priority")
    pushed = fill(fdbqueue_db, "q", "priority", 120)
    faults.configure(not_committed=0.2, unknown_applied=0.05, unknown_not_applied=0.05, seed=20261121)
    got, _ = run_threads(fdbqueue_db, "q", "min", CLIENTS, staged={0, 1, 2, 3}, timeout=30)
    injected = dict(faults.injected)
    faults.disable()
    assert injected["unknown_applied"] and injected["unknown_not_applied"] and injected["not_committed"]
    clock.advance(30 + contention.GRACE_SECONDS + 1)  # every pop's deadline, and the grace, passed
    for end in ("min", "max"):
        while (done := contention.fulfil(fdbqueue_db, "q", end)).more or not done.committed:
            pass
    remaining = [item.id for item in service.pop_many(fdbqueue_db, "q", 1000)]
    check_exactly_once(pushed, got, remaining)
    check_each_client_in_order(got, "min")
    assert remaining == [], "an item was stranded although every popper stayed alive"
    info = service.get_queue(fdbqueue_db, "q")
    assert (info.size, info.popped) == (0, 120)


def test_fast_pop_in_doubt_whose_retry_times_out_returns_its_item(fdbqueue_db, faults, monkeypatch):
    """A fast-path pop commits in doubt (1021, applied), then its retry runs out of time (1031).

    The item left the queue with the applied attempt; only the receipt says whose it was, and only
    this call can read it: raising 1031 lost the item (the simulation's seeds met it). The pop reads
    its receipt once more, in a transaction of its own, and returns the item.
    """
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 2)
    real_retry = contention._retry

    def retry(tr, error):
        if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:  # the TIMEOUT budget is spent by now
            raise FDBError(ErrorCode.TRANSACTION_TIMED_OUT)
        real_retry(tr, error)

    monkeypatch.setattr(contention, "_retry", retry)
    faults.fail_next("unknown_applied")
    assert hc_pop(fdbqueue_db, "q").id == ids[0]
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == ids[1:]


def test_pop_in_doubt_not_applied_whose_retry_times_out_raises(fdbqueue_db, faults, monkeypatch):
    """The same, the attempt in doubt not applied: nothing was taken, the pop raises 1031."""
    service.create_queue(fdbqueue_db, "q", kind="fifo")
    ids = fill(fdbqueue_db, "q", "fifo", 2)
    real_retry = contention._retry

    def retry(tr, error):
        if error.code == ErrorCode.COMMIT_UNKNOWN_RESULT:
            raise FDBError(ErrorCode.TRANSACTION_TIMED_OUT)
        real_retry(tr, error)

    monkeypatch.setattr(contention, "_retry", retry)
    faults.fail_next("unknown_not_applied")
    with pytest.raises(FDBError) as raised:
        hc_pop(fdbqueue_db, "q")
    assert raised.value.code == ErrorCode.TRANSACTION_TIMED_OUT
    assert [item.id for item in service.browse(fdbqueue_db, "q").items] == ids
