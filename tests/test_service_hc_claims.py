"""High-contention claims (service/_internals/hcclaims.py): exact order, leases, and claimers that fail.

Every test runs per engine through `fdbqueue_db`; those that need the embedded engine's fault
injector (`faults`) skip on a real cluster, and commits in doubt that must show on both engines
come from :class:`tests.test_contention_recovery.Scripted`. Time is never waited out: leases and
deadlines end with a clock run ahead (`clock`), and threads meet at barriers with bounded waits.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument, InvalidReceipt, LeaseExpired, QueueNotFound, WrongQueueKind
from django_fdbqueue.fdbapi import ErrorCode, FDBError, transactional
from django_fdbqueue.service._internals import hcclaims, staging
from django_fdbqueue.service._internals.catalog import require
from django_fdbqueue.service._internals.claimrounds import Claim
from django_fdbqueue.service._internals.recovery import GRACE_SECONDS
from tests.test_contention_recovery import Scripted
from tests.test_service_contention import SCENARIOS, fill, order_key

HC = "high-contention"
JOIN_SECONDS = 60
CLIENTS = 8
ROUND_ATTEMPTS = 50


# --- helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fresh_thread_state():
    """Each test starts as a thread's first claim: no result to clear, not served among others."""
    hcclaims._spent.__dict__.clear()
    yield
    hcclaims._spent.__dict__.clear()


def hc_claim(db, name, **kwargs):
    return service.claim(db, name, mode=HC, **kwargs)


def new_claim(name: str, end: str = "min", *, lease: float = 30.0, seconds: float = 5.0, step=None) -> Claim:
    """A claim's identity as ``hcclaims.claim`` makes it, for driving the protocol step by step."""
    deadline_us = hcclaims.now_micros() + int(seconds * 1e6)
    return Claim(name, end, deadline_us, time.monotonic() + seconds, lease_us=int(lease * 1e6), step=step)


def register(db, c: Claim) -> None:
    """Register `c`'s request (as a claim that skips the fast path does), and nothing else."""
    assert hcclaims._arrive(db, c, stage=True) is staging.STAGED


def committed_round(db, name: str, end: str = "min"):
    """One claims' round that committed (a round is one attempt: on a shared cluster another
    test's transactions may make it conflict, so it runs again, a bounded number of times)."""
    for _attempt in range(ROUND_ATTEMPTS):
        done = hcclaims.fulfil(db, name, end)
        if done.committed:
            return done
    raise AssertionError(f"no round committed in {ROUND_ATTEMPTS} attempts")


def answered(db, c: Claim):
    """What a registered claim ends with, driven as ``hcclaims.claim`` drives it."""
    for _attempt in range(ROUND_ATTEMPTS):
        state = hcclaims._look(db, c, withdraw=False)
        if state is not staging.LEAD:
            staging.let_go(c)
            return state
        got = hcclaims._lead(db, c)
        if got is not None:
            return got
    raise AssertionError(f"the claim still leads after {ROUND_ATTEMPTS} rounds")


def force_staging(monkeypatch) -> None:
    """Skip the fast path: every claim registers a request and is served by a round."""
    real = hcclaims._arrive
    monkeypatch.setattr(hcclaims, "_arrive", lambda db, c, stage=False: real(db, c, stage=True))


@transactional
def desk_keys(tr, name: str) -> dict[str, list[bytes]]:
    """The claims' requests (per end) and results left in the queue."""
    _entry, qk = require(tr, name)
    desk = staging.claim_desk(qk)
    out = {}
    for label, space in (("min", desk.requests("min")), ("max", desk.requests("max")), ("results", desk.results)):
        r = space.range()
        out[label] = [bytes(kv.key) for kv in tr.get_range(r.start, r.stop)]
    return out


def counts(db, name) -> tuple[int, int, int]:
    info = service.get_queue(db, name)
    return info.size, info.leased, info.dead


# --- one claimer ---------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_one_claimer_claims_in_queue_order(fdbqueue_db, kind, end):
    db = fdbqueue_db
    service.create_queue(db, "q", kind=kind)
    fill(db, "q", kind, 6)
    expected = [item.id for item in service.browse(db, "q", end=end).items]
    leases = [hc_claim(db, "q", end=end) for _ in range(6)]
    assert [lease.item.id for lease in leases] == expected
    assert {lease.item.attempts for lease in leases} == {1}
    assert hc_claim(db, "q", end=end) is None
    assert counts(db, "q") == (0, 6, 0)
    for lease in leases:
        service.ack(db, lease.receipt)
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.popped) == (0, 0, 6)


@pytest.mark.parametrize("kind, end", SCENARIOS)
def test_staged_claims_are_served_in_queue_order(fdbqueue_db, monkeypatch, kind, end):
    """Through requests and rounds only (no fast path): the same leases, usable as any lease."""
    force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind=kind)
    fill(db, "q", kind, 4)
    expected = [item.id for item in service.browse(db, "q", end=end).items]
    before = hcclaims.now_micros()
    leases = [hc_claim(db, "q", end=end, lease=60) for _ in range(4)]
    assert [lease.item.id for lease in leases] == expected
    assert all(lease.lease_expires_at.timestamp() * 1e6 >= before + 59e6 for lease in leases)
    assert hc_claim(db, "q", end=end) is None
    assert counts(db, "q") == (0, 4, 0)
    service.ack(db, leases[0].receipt)
    assert service.release(db, leases[1].receipt) == "ready"
    service.extend(db, leases[2].receipt, 120)
    again = hc_claim(db, "q", end=end)
    assert (again.item.id, again.item.attempts) == (leases[1].item.id, 2)
    left = desk_keys(db, "q")
    assert left["min"] == left["max"] == []


def test_a_round_leases_to_every_waiting_request_in_request_order(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    fill(db, "q", "priority", 3)
    expected = [item.id for item in service.browse(db, "q").items]
    claims = [new_claim("q", lease=10 + n) for n in range(4)]
    for c in claims:
        register(db, c)
    done = committed_round(db, "q")
    assert (done.served, done.answered_empty) == (3, 1)
    assert counts(db, "q") == (0, 3, 0)  # leased by the round itself, before anyone collects
    got = [answered(db, c) for c in claims]
    assert [lease.item.id for lease in got[:3]] == expected
    assert got[3] is staging.EMPTY
    lengths = [(lease.lease_expires_at - got[0].lease_expires_at).total_seconds() for lease in got[:3]]
    assert lengths == [0, 1, 2]  # each request's own lease length, from the same round
    for lease in got[:3]:
        service.ack(db, lease.receipt)
    assert desk_keys(db, "q")["min"] == []


def test_an_arriving_claim_registers_behind_waiting_ones(fdbqueue_db):
    """A newcomer that finds requests waiting does not overtake them; as nobody else leads, it
    runs the round, and they get the first items in request order, the newcomer the next."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 4)
    waiting = [new_claim("q") for _ in range(2)]
    for c in waiting:
        register(db, c)
    staging.let_go(waiting[0])
    assert hc_claim(db, "q").item.id == ids[2]
    assert [answered(db, c).item.id for c in waiting] == ids[:2]


def test_arguments_are_checked(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "fifo", kind="fifo")
    service.enqueue(db, "fifo", "x")
    with pytest.raises(WrongQueueKind):
        hc_claim(db, "fifo", end="max")
    with pytest.raises(InvalidArgument, match="mode"):
        service.claim(db, "fifo", mode="fast")
    with pytest.raises(InvalidArgument, match="spread"):
        hc_claim(db, "fifo", spread=8)
    with pytest.raises(InvalidArgument, match="timeout"):
        service.claim(db, "fifo", timeout=1.0)  # a plain claim has no timeout of its own
    for bad in (0, -1, "1", True, 10_000):
        with pytest.raises(InvalidArgument):
            hc_claim(db, "fifo", timeout=bad)
    with pytest.raises(QueueNotFound):
        hc_claim(db, "missing")

    @transactional
    def inside(tr):
        return hc_claim(tr, "fifo")

    with pytest.raises(InvalidArgument, match="transaction"):
        inside(db)
    assert counts(db, "fifo") == (1, 0, 0)


@pytest.mark.parametrize("options", [{"tenants": True}, {"key_concurrency": 2}, {"key_rate": 5.0}])
def test_queues_rounds_cannot_serve_are_refused(fdbqueue_db, options):
    """Per-key limits skip items and tenants take turns: neither is a round's order. Said plainly."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo", **options)
    service.push(db, "q", "x", **({"tenant": "t"} if options.get("tenants") else {}))
    with pytest.raises(InvalidArgument, match="mode='plain'"):
        hc_claim(db, "q")
    assert counts(db, "q") == (1, 0, 0)
    assert desk_keys(db, "q") == {"min": [], "max": [], "results": []}


def test_waiting_for_an_item(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    started = time.monotonic()
    assert hc_claim(db, "q", wait=0.2) is None
    assert 0.15 < time.monotonic() - started < 5
    pusher = threading.Timer(0.2, lambda: service.enqueue(db, "q", "late"))
    pusher.start()
    try:
        lease = hc_claim(db, "q", wait=10)
    finally:
        pusher.join(JOIN_SECONDS)
    assert lease.item.value == "late"


def test_aclaim_passes_the_mode_through(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    service.enqueue(db, "q", "a")
    lease = asyncio.run(service.aclaim(db, "q", mode=HC, timeout=2))
    assert lease.item.value == "a"
    with pytest.raises(InvalidArgument):
        asyncio.run(service.aclaim(db, "q", mode=HC, spread=4))


# --- acking the last lease in the next claim's commit ---------------------------------------------


@pytest.mark.parametrize("staged", [False, True])
def test_a_steady_claimer_acks_its_last_lease_with_its_next_claim(fdbqueue_db, monkeypatch, staged):
    if staged:
        force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 3)
    got, receipt = [], None
    while (lease := hc_claim(db, "q", ack=receipt)) is not None:
        got.append(lease.item.id)
        receipt = lease.receipt
        info = service.get_queue(db, "q")
        assert (info.leased, info.popped) == (1, len(got) - 1)  # the one held, the others acked
    assert got == ids
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.popped) == (0, 0, 3)  # the last ack went with the empty answer


def test_an_ack_that_fails_claims_nothing(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    fill(db, "q", "fifo", 2)
    lease = hc_claim(db, "q", lease=1)
    clock.advance(2)
    with pytest.raises(LeaseExpired):
        hc_claim(db, "q", ack=lease.receipt)
    assert counts(db, "q") == (1, 1, 0)
    with pytest.raises(InvalidReceipt):
        hc_claim(db, "q", ack="not-a-receipt")
    with pytest.raises(InvalidArgument, match="ack"):
        service.claim(db, "q", ack=lease.receipt)  # a plain claim joins a transaction instead


def test_an_ack_done_already_is_not_done_again(fdbqueue_db):
    """Repeated (the caller's retry of a claim that raised after its commit): the settled marker
    says the ack applied, and the claim goes on."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    first = hc_claim(db, "q")
    service.ack(db, first.receipt)
    assert hc_claim(db, "q", ack=first.receipt).item.id == ids[1]
    assert service.get_queue(db, "q").popped == 1


def test_an_ack_with_a_claim_applied_in_doubt_is_done_once(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 3)
    first = hc_claim(db, "q")
    scripted = Scripted(db)
    scripted.applied_then(ErrorCode.COMMIT_UNKNOWN_RESULT)
    second = hc_claim(scripted, "q", ack=first.receipt)
    assert scripted.raised == [ErrorCode.COMMIT_UNKNOWN_RESULT]
    assert second.item.id == ids[1]
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.popped) == (1, 1, 1)


# --- claimers that die, time out, or run out of attempts ----------------------------------------


def test_a_dead_claimers_item_comes_back_when_its_lease_ends(fdbqueue_db, clock):
    """It registered, was served, and was never heard of again: its item is leased to nobody, and
    only until the lease ends; its result goes once its deadline (and the grace) passed."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    dead = new_claim("q", lease=10, seconds=1)
    register(db, dead)
    staging.let_go(dead)
    assert committed_round(db, "q").served == 1
    assert hc_claim(db, "q").item.id == ids[1]
    assert hc_claim(db, "q") is None
    clock.advance(11)
    back = hc_claim(db, "q")
    assert (back.item.id, back.item.attempts) == (ids[0], 2)
    assert desk_keys(db, "q")["results"] != []
    clock.advance(1 + GRACE_SECONDS + 1)
    committed_round(db, "q")
    assert desk_keys(db, "q")["results"] == []


def test_a_dead_claimers_last_attempt_goes_to_the_dead_letters(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo", max_attempts=1)
    ids = fill(db, "q", "fifo", 1)
    dead = new_claim("q", lease=5)
    register(db, dead)
    staging.let_go(dead)
    assert committed_round(db, "q").served == 1
    clock.advance(6)
    assert hc_claim(db, "q") is None  # the lease ran out on its only attempt
    assert counts(db, "q") == (0, 0, 1)
    assert [letter.item.id for letter in service.dead_letters(db, "q").items] == ids


def test_a_dead_claimers_request_is_dropped_after_the_grace(fdbqueue_db, clock):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    dead = new_claim("q", seconds=1)
    register(db, dead)
    staging.let_go(dead)
    clock.advance(1 + GRACE_SECONDS + 1)
    service.enqueue(db, "q", "x")
    done = committed_round(db, "q")
    assert (done.dropped, done.served) == (1, 0)
    assert counts(db, "q") == (1, 0, 0)


def test_a_claim_that_times_out_withdraws_its_request(fdbqueue_db, monkeypatch):
    """Nobody serves it (rounds switched off): it withdraws and raises 1031; items untouched."""
    force_staging(monkeypatch)
    monkeypatch.setattr(hcclaims, "_lead", lambda db, c: None)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    fill(db, "q", "fifo", 2)
    with pytest.raises(FDBError) as raised:
        hc_claim(db, "q", timeout=0.3)
    assert raised.value.code == ErrorCode.TRANSACTION_TIMED_OUT
    assert desk_keys(db, "q")["min"] == []
    assert counts(db, "q") == (2, 0, 0)


def test_a_claim_that_times_out_takes_the_lease_written_for_it(fdbqueue_db, monkeypatch):
    force_staging(monkeypatch)
    monkeypatch.setattr(hcclaims, "_lead", lambda db, c: None)
    real_look = hcclaims._look

    def look(db, c, *, withdraw):
        if withdraw:  # someone else's round serves us just as we give up
            assert committed_round(db, c.name, c.end).served == 1
        return real_look(db, c, withdraw=withdraw)

    monkeypatch.setattr(hcclaims, "_look", look)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    assert hc_claim(db, "q", timeout=0.2).item.id == ids[0]
    assert counts(db, "q") == (1, 1, 0)


# --- step -----------------------------------------------------------------------------------------


def _logging_step(tr, lease):
    service.push(tr, "log", lease.item.value)
    return f"ran {lease.item.value}"


@pytest.mark.parametrize("staged", [False, True])
def test_a_step_commits_with_the_claim_once(fdbqueue_db, monkeypatch, staged):
    """At once, the step runs in the claim's transaction; staged, in the one that collects the lease."""
    if staged:
        force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    service.create_queue(db, "log", kind="fifo")
    service.push_many(db, "q", ["a", "b"])
    got = [hc_claim(db, "q", step=_logging_step) for _ in range(2)]
    assert [lease.step_result for lease in got] == ["ran a", "ran b"]
    assert [item.value for item in service.browse(db, "log").items] == ["a", "b"]
    assert desk_keys(db, "q")["results"] == []  # a collect with a step clears its result


def test_a_step_that_finds_its_lease_ended_starts_again(fdbqueue_db, monkeypatch, clock):
    """Served a lease so short that it ended before the collect: the step does not run on an item
    back in the queue; the claim starts again and gets it anew."""
    force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    service.create_queue(db, "log", kind="fifo")
    service.push(db, "q", "a")
    real_lead = hcclaims._lead
    ran = []

    def lead(db_, c):
        got = real_lead(db_, c)
        if not ran:
            ran.append(1)
            clock.advance(2)  # the one-second lease its round granted ends before it collects
        return got

    monkeypatch.setattr(hcclaims, "_lead", lead)
    lease = hc_claim(db, "q", lease=1, step=_logging_step, timeout=5)
    assert lease.step_result == "ran a" and lease.item.attempts == 2
    assert [item.value for item in service.browse(db, "log").items] == ["a"]


# --- many claimers ----------------------------------------------------------------------------------


def run_claimers(db, name: str, end: str, clients: int, *, timeout: float = 10) -> list[list[str]]:
    """``clients`` threads claim and ack until the queue is empty; what each acked, in order."""
    start = threading.Barrier(clients, timeout=JOIN_SECONDS)
    got: list[list[str]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def claimer(index: int) -> None:
        try:
            start.wait()
            while (lease := hc_claim(db, name, end=end, timeout=timeout)) is not None:
                got[index].append(lease.item.id)
                service.ack(db, lease.receipt)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    threads = [threading.Thread(target=claimer, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    assert not any(thread.is_alive() for thread in threads), "a claimer hung"
    assert not errors, errors
    return got


def check_exactly_once_in_order(pushed: list[str], got: list[list[str]], end: str) -> None:
    claimed = [item for items in got for item in items]
    duplicates = [item for item, n in Counter(claimed).items() if n > 1]
    assert not duplicates, f"acked twice: {duplicates[:5]}"
    assert sorted(claimed) == sorted(pushed), "an item was lost (or invented)"
    for index, items in enumerate(got):
        keys = [order_key(item, end) for item in items]
        assert keys == sorted(keys), f"claimer {index} got items out of queue order"


@pytest.mark.parametrize("kind, end", SCENARIOS)
@pytest.mark.parametrize("staged", [False, True])
def test_threads_claim_exactly_once_in_order(fdbqueue_db, monkeypatch, kind, end, staged):
    if staged:
        force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind=kind)
    pushed = fill(db, "q", kind, 120)
    got = run_claimers(db, "q", end, CLIENTS)
    check_exactly_once_in_order(pushed, got, end)
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.popped) == (0, 0, 120)
    left = desk_keys(db, "q")
    assert left["min"] == left["max"] == []
    assert len(left["results"]) <= 3 * CLIENTS  # at most each thread's last result, kept for its next claim


# --- commits in doubt ----------------------------------------------------------------------------


def test_a_claim_at_once_applied_in_doubt_returns_its_lease_once(fdbqueue_db):
    """1021 after the commit happened (on both engines): the lease's token says it did."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    scripted = Scripted(db)
    scripted.applied_then(ErrorCode.COMMIT_UNKNOWN_RESULT)
    lease = hc_claim(scripted, "q")
    assert scripted.raised == [ErrorCode.COMMIT_UNKNOWN_RESULT]
    assert (lease.item.id, lease.item.attempts) == (ids[0], 1)
    assert counts(db, "q") == (1, 1, 0)
    service.ack(db, lease.receipt)
    assert hc_claim(db, "q").item.id == ids[1]


def test_a_step_applied_in_doubt_runs_once(fdbqueue_db, monkeypatch):
    """The collect that runs the step commits, then reports 1021 (on both engines): its retry finds
    the results it cleared gone, and answers with what the step returned, without running it again."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    service.create_queue(db, "log", kind="fifo")
    service.push(db, "q", "a")
    scripted = Scripted(db)
    real_lead = hcclaims._lead

    def lead(db_, c):
        got = real_lead(db_, c)
        if not scripted.raised:
            scripted.applied_then(ErrorCode.COMMIT_UNKNOWN_RESULT)  # the next commit: the collect's
        return got

    monkeypatch.setattr(hcclaims, "_lead", lead)
    c = new_claim("q", step=_logging_step)
    register(db, c)  # nobody leads: it does
    lease = answered(scripted, c)
    assert scripted.raised == [ErrorCode.COMMIT_UNKNOWN_RESULT]
    assert lease.step_result == "ran a"
    assert [item.value for item in service.browse(db, "log").items] == ["a"]
    assert counts(db, "q") == (0, 1, 0)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_a_claim_at_once_in_doubt(fdbqueue_db, faults, fault):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    faults.fail_next(fault)
    assert hc_claim(db, "q").item.id == ids[0]
    assert faults.injected[fault] == 1
    assert counts(db, "q") == (1, 1, 0)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_a_registration_in_doubt_leaves_exactly_one_request(fdbqueue_db, faults, fault):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    fill(db, "q", "fifo", 2)
    c = new_claim("q")
    faults.fail_next(fault)
    register(db, c)
    assert desk_keys(db, "q")["min"] == [c.request_key]
    assert committed_round(db, "q").served == 1
    assert isinstance(answered(db, c), service.Lease)
    assert counts(db, "q") == (1, 1, 0)


@pytest.mark.parametrize("fault", ["unknown_applied", "unknown_not_applied"])
def test_the_leaders_own_round_in_doubt(fdbqueue_db, faults, monkeypatch, fault):
    """Commit 1 registers; commit 2 is the round that serves the claim itself, and ends in 1021:
    its result (written for the leader too) says what the round did."""
    force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    ids = fill(db, "q", "fifo", 2)
    real_lead = hcclaims._lead
    leads = []

    def lead(db_, c):
        if not leads:
            faults.fail_next(fault)
        leads.append(1)
        return real_lead(db_, c)

    monkeypatch.setattr(hcclaims, "_lead", lead)
    assert hc_claim(db, "q").item.id == ids[0]
    assert hc_claim(db, "q").item.id == ids[1]
    assert hc_claim(db, "q") is None
    assert faults.injected[fault] == 1
    assert counts(db, "q") == (0, 2, 0)


def test_random_faults_lose_and_duplicate_nothing(fdbqueue_db, faults, monkeypatch, clock):
    """Conflicts and unknown results on 30% of commits, 8 claimers that ack: every item acked at
    most once, and every item not acked is back in the queue once the leases have ended."""
    force_staging(monkeypatch)
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    pushed = fill(db, "q", "priority", 96)
    faults.configure(not_committed=0.2, unknown_applied=0.05, unknown_not_applied=0.05, seed=20260407)
    got = run_claimers(db, "q", "min", CLIENTS, timeout=30)
    injected = dict(faults.injected)
    faults.disable()
    assert injected["unknown_applied"] and injected["unknown_not_applied"] and injected["not_committed"]
    clock.advance(service.DEFAULT_LEASE_SECONDS + 1)
    remaining = []
    while (lease := service.claim(db, "q")) is not None:
        remaining.append(lease.item.id)
        service.ack(db, lease.receipt)
    acked = [item for items in got for item in items]
    assert not [item for item, n in Counter(acked).items() if n > 1]
    assert sorted(acked + remaining) == sorted(pushed)
    assert remaining == [], "a lease was left behind although every claimer stayed alive"
