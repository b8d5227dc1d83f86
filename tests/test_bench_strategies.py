"""The project's comparison pop strategies (``benchmarks/strategies.py``): random-k and sharded
pops, which give up exact order, measured beside the service's pop modes. They reach the bench
through its hook from a clone; installed from the wheel alone the bench offers the service's
modes only. Every test runs per engine through ``fdbqueue_db``.
"""

from __future__ import annotations

import threading

import pytest

from benchmarks import strategies as comparisons
from benchmarks.strategies import pop_random_k
from django_fdbqueue import service
from django_fdbqueue.bench import references as hook
from django_fdbqueue.bench import strategies as bench_strategies
from tests.test_service_contention import JOIN_SECONDS, check_exactly_once, fill


def test_from_a_clone_the_bench_offers_the_service_modes_then_the_comparisons():
    assert list(bench_strategies.available()) == ["plain", "high-contention", "random-k", "sharded"]
    assert bench_strategies.registered() == ("plain", "high-contention", "random-k", "sharded")


def test_from_the_wheel_alone_only_the_service_modes_are_there(monkeypatch):
    monkeypatch.setattr(hook, "PROVIDER", "fdbqueue_no_such_benchmarks.references")
    assert bench_strategies.registered() == ("plain", "high-contention")
    assert bench_strategies.layout_for("sharded") is bench_strategies.PLAIN
    with pytest.raises(KeyError, match="registered: plain, high-contention"):
        bench_strategies.get_strategy("random-k")


def test_random_k_pops_exactly_once_from_the_first_k(fdbqueue_db):
    service.create_queue(fdbqueue_db, "q", kind="priority")
    pushed = fill(fdbqueue_db, "q", "priority", 60)
    first_k = {item.id for item in service.browse(fdbqueue_db, "q", end="max", limit=4).items}
    assert pop_random_k(fdbqueue_db, "q", "max", 4).id in first_k
    got: list[list[str]] = [[] for _ in range(4)]
    errors = []

    def client(index):
        try:
            while (item := pop_random_k(fdbqueue_db, "q", "min")) is not None:
                got[index].append(item.id)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN_SECONDS)
    assert not errors and not any(t.is_alive() for t in threads)
    popped_first = [i for i in pushed if i not in {x for g in got for x in g}]
    assert len(popped_first) == 1 and popped_first[0] in first_k  # the one popped from the max end
    check_exactly_once(pushed, got, popped_first)
    assert service.get_queue(fdbqueue_db, "q").size == 0


def test_sharded_layout_spreads_and_drains(fdbqueue_db):
    layout = bench_strategies.layout_for("sharded")
    pop = bench_strategies.get_strategy("sharded")
    layout.prepare(fdbqueue_db, "q", "priority")
    layout.fill(fdbqueue_db, "q", [({"n": n}, n % 3) for n in range(40)])
    layout.push(fdbqueue_db, "q", {"n": 40}, 1)
    assert layout.remaining(fdbqueue_db, "q") == 41
    sizes = [service.size(fdbqueue_db, shard) for shard in comparisons.shard_names("q")]
    assert len(sizes) == comparisons.SHARDS and sum(sizes) == 41 and max(sizes) <= 6
    popped = []
    while (item := pop(fdbqueue_db, "q", "min")) is not None:
        popped.append(item.value["n"])
    assert sorted(popped) == list(range(41))
    layout.drop(fdbqueue_db, "q")
    assert not any(service.queue_exists(fdbqueue_db, shard) for shard in comparisons.shard_names("q"))
