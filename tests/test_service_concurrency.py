"""Many clients on one queue at once: threads, then separate processes.

What must hold: every pushed item is popped exactly once (none lost, none duplicated), and each
producer's items of one priority come out in the order it pushed them. "Come out" is measured
by the commit order of the pops: each pop runs in a transaction whose versionstamp we keep, so
the check does not depend on thread scheduling or clocks.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections import defaultdict
from typing import Any

from django.conf import settings as django_settings

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service._internals.tokens import parse_item_id
from tests.processes import child_database, join_all, kill_leftovers

PRIORITIES = (0, 1, 2)
JOIN_SECONDS = 120


@transactional
def _stamped_pop(tr, name: str, end: str):
    """Pop in a transaction and return the item with the future of that commit's versionstamp."""
    return service.pop(tr, name, end), tr.get_versionstamp()


def pop_stamped(db, name: str, end: str) -> tuple[Any, bytes] | None:
    item, stamp = _stamped_pop(db, name, end)
    if item is None:
        return None
    return item, bytes(stamp.wait())


def produce(db, name: str, producer: int, count: int, first_pop) -> list[str]:
    """Push `count` items over three priorities, alternating single pushes and small batches.

    Halfway through, wait (bounded) until some consumer has popped: so pops and pushes surely
    interleave, however the machine schedules the clients.
    """
    ids = []
    seq = 0
    while seq < count:
        if seq >= count // 2:
            first_pop.wait(JOIN_SECONDS)
        if seq % 5 == 4 and seq + 2 <= count:
            batch = [({"p": producer, "s": s}, PRIORITIES[s % 3]) for s in (seq, seq + 1)]
            ids.extend(item.id for item in service.push_many(db, name, batch))
            seq += 2
        else:
            ids.append(service.push(db, name, {"p": producer, "s": seq}, PRIORITIES[seq % 3]).id)
            seq += 1
    return ids


def consume(db, name: str, consumer: int, producers_done, first_pop, all_popped) -> list[tuple]:
    """Pop (alternating ends) until the producers are done and the queue is empty.

    After its first item each consumer waits at `all_popped` until every consumer has one, so
    the work is surely shared.
    """
    popped = []
    turn = consumer
    while True:
        finished = producers_done.is_set()  # read before popping: an empty pop after it is final
        end = "min" if turn % 2 == 0 else "max"
        turn += 1
        got = pop_stamped(db, name, end)
        if got is None:
            if finished:
                return popped
            producers_done.wait(0.005)  # empty for now: back off briefly, wake early when done
            continue
        item, stamp = got
        popped.append((stamp, item.id, item.priority, item.value["p"], item.value["s"]))
        if len(popped) == 1:
            first_pop.set()
            all_popped.wait(JOIN_SECONDS)


def check_exactly_once_in_order(pushed_ids: list[str], popped: list[tuple], producers: int, per_producer: int) -> None:
    popped_ids = [row[1] for row in popped]
    assert len(popped_ids) == len(set(popped_ids)), "an item was popped twice"
    assert sorted(popped_ids) == sorted(pushed_ids), "an item was lost (or invented)"
    assert len(pushed_ids) == producers * per_producer
    stamps = [row[0] for row in popped]
    assert len(set(stamps)) == len(stamps)  # one pop per transaction: distinct commits
    sequences: dict[tuple[int, int], list[int]] = defaultdict(list)
    for _stamp, _id, priority, producer, seq in sorted(popped):
        sequences[(producer, priority)].append(seq)
    for (producer, priority), seqs in sequences.items():
        assert seqs == sorted(seqs), f"producer {producer}'s items of priority {priority} came out of order"
    # The clients really overlapped: some pop committed before the last push did.
    last_push = max(parse_item_id(i)[1].tr_version for i in pushed_ids)
    assert min(stamps) < last_push, "every pop came after every push: no concurrency was exercised"


# --- threads ----------------------------------------------------------------------------------


def test_threads_push_and_pop_one_queue(fdbqueue_db):
    name = "shared"
    service.create_queue(fdbqueue_db, name, kind="priority")
    producers, consumers, per_producer = 4, 4, 50
    barrier = threading.Barrier(producers + consumers, timeout=30)
    producers_done = threading.Event()
    first_pop = threading.Event()
    all_popped = threading.Barrier(consumers, timeout=JOIN_SECONDS)
    pushed: list[list[str]] = [[] for _ in range(producers)]
    popped: list[list[tuple]] = [[] for _ in range(consumers)]
    errors: list[BaseException] = []

    def producer(i: int) -> None:
        try:
            barrier.wait()
            pushed[i] = produce(fdbqueue_db, name, i, per_producer, first_pop)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def consumer(i: int) -> None:
        try:
            barrier.wait()
            popped[i] = consume(fdbqueue_db, name, i, producers_done, first_pop, all_popped)
        except BaseException as exc:
            errors.append(exc)
            producers_done.set()

    producer_threads = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(producers)]
    consumer_threads = [threading.Thread(target=consumer, args=(i,), daemon=True) for i in range(consumers)]
    for thread in producer_threads + consumer_threads:
        thread.start()
    for thread in producer_threads:
        thread.join(JOIN_SECONDS)
    producers_done.set()
    for thread in consumer_threads:
        thread.join(JOIN_SECONDS)
    assert not any(t.is_alive() for t in producer_threads + consumer_threads), "a client hung"
    assert not errors, errors
    all_popped = [row for rows in popped for row in rows]
    check_exactly_once_in_order([i for ids in pushed for i in ids], all_popped, producers, per_producer)
    assert all(popped), "a consumer took no item: the work was not shared"
    info = service.get_queue(fdbqueue_db, name)
    assert (info.size, info.pushed, info.popped) == (0, producers * per_producer, producers * per_producer)


# --- processes --------------------------------------------------------------------------------


def _process_main(
    role: str,
    index: int,
    fdbqueue_setting: dict,
    name: str,
    per_producer: int,
    barrier,
    producers_done,
    first_pop,
    all_popped,
    results,
) -> None:
    try:
        db = child_database(fdbqueue_setting)
        barrier.wait(60)
        if role == "producer":
            results.put((role, index, produce(db, name, index, per_producer, first_pop)))
        else:
            results.put((role, index, consume(db, name, index, producers_done, first_pop, all_popped)))
    except BaseException as exc:  # the parent fails the test with this
        results.put(("error", index, repr(exc)))


def test_processes_push_and_pop_one_queue(fdbqueue_db):
    name = "shared-across-processes"
    service.create_queue(fdbqueue_db, name, kind="priority")
    producers, consumers, per_producer = 2, 2, 25
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(producers + consumers)
    producers_done = ctx.Event()
    first_pop = ctx.Event()
    all_popped = ctx.Barrier(consumers)
    results = ctx.Queue()
    setting = dict(django_settings.FDBQUEUE)
    procs = [
        ctx.Process(
            target=_process_main,
            args=(role, i, setting, name, per_producer, barrier, producers_done, first_pop, all_popped, results),
            daemon=True,
        )
        for role, count in (("producer", producers), ("consumer", consumers))
        for i in range(count)
    ]
    for proc in procs:
        proc.start()
    try:
        collected = []
        while len([r for r in collected if r[0] == "producer"]) < producers:
            collected.append(results.get(timeout=JOIN_SECONDS))
            assert collected[-1][0] != "error", collected[-1]
        producers_done.set()
        while len(collected) < producers + consumers:
            collected.append(results.get(timeout=JOIN_SECONDS))
            assert collected[-1][0] != "error", collected[-1]
        join_all(procs, JOIN_SECONDS)
    finally:
        kill_leftovers(procs)
    pushed = [i for role, _, ids in collected if role == "producer" for i in ids]
    popped = [tuple(row) for role, _, rows in collected if role == "consumer" for row in rows]
    check_exactly_once_in_order(pushed, popped, producers, per_producer)
    info = service.get_queue(fdbqueue_db, name)
    assert (info.size, info.pushed, info.popped) == (0, producers * per_producer, producers * per_producer)
