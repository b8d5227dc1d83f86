"""Spread claims (``claim(..., spread=k)``): one of the first k ready items, leased exactly as a
claim in order is; for many claimers of one queue. Every test runs on both engines."""

from __future__ import annotations

import threading

import pytest

from django_fdbqueue import service
from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.tasks.backend import FDBQueueBackend
from django_fdbqueue.worker import Worker
from django_fdbqueue.service.extension import runtime

from .cli_helpers import run

JOIN_SECONDS = 120


def _ready_values(db, name: str, end: str = "min") -> list:
    return [item.value for item in service.browse(db, name, end=end, limit=200).items]


@pytest.mark.parametrize("end", ["min", "max"])
def test_a_spread_claim_takes_one_of_the_first_k_ready_items(fdbqueue_db, monkeypatch, end):
    """Whatever the random pick, the item was among the first k of the ready items at that
    moment, and every pick of the k is possible (the pick is scripted to try each)."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    for n in range(12):
        service.push(db, "q", n, priority=n)
    picks = iter([0, 3, 2, 1] * 3)
    monkeypatch.setattr(runtime, "PICK", type("Scripted", (), {"choice": staticmethod(lambda kvs: kvs[next(picks)])})())
    taken = []
    for _ in range(8):
        ahead = _ready_values(db, "q", end)[:4]
        lease = service.claim(db, "q", end=end, spread=4)
        assert lease.item.value in ahead
        assert lease.item.attempts == 1
        taken.append((ahead.index(lease.item.value), lease.item.value))
    assert [place for place, _value in taken] == [0, 3, 2, 1] * 2
    info = service.get_queue(db, "q")
    assert (info.size, info.leased) == (4, 8)


def test_bad_spreads_are_refused_and_nothing_is_claimed(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    service.enqueue(db, "q", "x")
    for bad in (0, 1, 101, True, 2.5, "3"):
        with pytest.raises(InvalidArgument, match="spread"):
            service.claim(db, "q", spread=bad)
    assert service.get_queue(db, "q").leased == 0
    assert service.claim(db, "q", spread=service.MAX_SPREAD).item.value == "x"


def test_a_spread_claim_on_an_empty_queue_waits_and_answers_none(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    assert service.claim(db, "q", spread=8) is None
    assert service.claim(db, "q", spread=8, wait=0.05) is None


def test_queues_with_key_limits_or_tenants_keep_their_own_order(fdbqueue_db):
    """Their claims already choose (keys under their limit, tenants in turn): spread is ignored."""
    db = fdbqueue_db
    service.create_queue(db, "limited", kind="fifo", key_concurrency=1)
    service.create_queue(db, "split", kind="fifo", tenants=True)
    for n in range(6):
        service.push(db, "limited", n, key=f"k{n}")
        service.push(db, "split", n, tenant="t")
    assert [service.claim(db, "limited", spread=6).item.value for _ in range(6)] == list(range(6))
    assert [service.claim(db, "split", spread=6).item.value for _ in range(6)] == list(range(6))


def test_eight_threads_of_spread_claims_lease_each_item_once(fdbqueue_db):
    """Every item is acked exactly once, and no item is leased by two claimers at a time."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="fifo")
    total = 160
    for start in range(0, total, 40):
        service.push_many(db, "q", [(n, 0) for n in range(start, start + 40)])
    held: set = set()
    acked: list = []
    twice: list = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def claimer():
        start.wait(JOIN_SECONDS)
        while True:
            lease = service.claim(db, "q", lease=120, spread=16)
            if lease is None:
                return
            with lock:
                if lease.item.id in held:
                    twice.append(lease.item.id)
                held.add(lease.item.id)
            service.ack(db, lease.receipt)
            with lock:
                held.discard(lease.item.id)
                acked.append(lease.item.value)

    threads = [threading.Thread(target=claimer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
        assert not thread.is_alive()
    assert twice == []
    assert sorted(acked) == list(range(total))
    info = service.get_queue(db, "q")
    assert (info.size, info.leased, info.popped) == (0, 0, total)


def test_a_worker_with_spread_claims_processes_every_item(fdbqueue_db):
    db = fdbqueue_db
    service.create_queue(db, "jobs", kind="fifo")
    service.push_many(db, "jobs", [(n, 0) for n in range(30)])
    seen: list = []
    worker = Worker(db, "jobs", lambda item: seen.append(item.value), concurrency=3, burst=True, spread=8)
    worker.run()
    assert sorted(seen) == list(range(30))
    assert worker.stats.processed == 30
    with pytest.raises(InvalidArgument, match="spread"):
        Worker(db, "jobs", print, spread=1)


def test_the_tasks_backend_passes_its_claim_spread_on_and_checks_it():
    backend = FDBQueueBackend("default", {"QUEUES": ["default"], "OPTIONS": {"CLAIM_SPREAD": 16}})
    assert backend.claim_spread == 16 and list(backend.check()) == []
    for bad in (1, 500, "16"):
        bad_backend = FDBQueueBackend("default", {"QUEUES": ["default"], "OPTIONS": {"CLAIM_SPREAD": bad}})
        assert [m.msg for m in bad_backend.check()] == [
            "TASKS['default'] (FDBQueueBackend): CLAIM_SPREAD must be None or an integer from 2 to 100."
        ]


def test_the_worker_command_refuses_a_spread_below_two(fdbqueue_db):
    service.create_queue(fdbqueue_db, "jobs", kind="fifo")
    result = run("worker", "jobs", "--handler", "json.dumps", "--spread", "1", "--burst")
    assert result.code == 2 and "spread must be at least 2" in result.err


def test_random_picks_spread_over_the_first_k(fdbqueue_db):
    """With the real random pick, 200 claims of one of the first 5 take every place (that one is
    never picked in 200 has a chance below 1e-18)."""
    db = fdbqueue_db
    service.create_queue(db, "q", kind="priority")
    service.push_many(db, "q", [(n, n) for n in range(400)])
    places = set()
    for _ in range(200):
        ahead = _ready_values(db, "q")[:5]
        places.add(ahead.index(service.claim(db, "q", spread=5).item.value))
    assert places == {0, 1, 2, 3, 4}
