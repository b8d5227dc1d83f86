"""The project's comparison pop strategies for the bench: random-k and sharded pops.

Both give up exact order to let many poppers of one queue commit side by side; the project
measures them beside the service's pop modes (``--strategy random-k``, ``--strategy sharded``)
to know what exact order costs. They are comparison points, not the service's: random-k removes
an item with its own transaction, outside the service's rules, so it stays here, out of the
wheel. The bench's hook adds :data:`STRATEGIES` and :data:`LAYOUTS` after the app's own
(:mod:`django_fdbqueue.bench.strategies`).
"""

from __future__ import annotations

import random
from typing import Any, Sequence

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service import Item
from django_fdbqueue.service._internals import keys as queue_keys
from django_fdbqueue.service._internals.catalog import counter_bytes, require
from django_fdbqueue.service._internals.contention import SnapshotReads
from django_fdbqueue.service._internals.items import decode_item
from django_fdbqueue.service._internals.reading import walk
from django_fdbqueue.bench.strategies import Layout, PopStrategy

__all__ = ["LAYOUTS", "RANDOM_K", "SHARDS", "STRATEGIES", "pop_random_k", "shard_names"]


#: How many of the first items a random-k pop chooses among: as many as a spread claim (64), so
#: that 32 poppers seldom pick the same one (with 8, 32 poppers at 5 ms commits made 4.6x one).
RANDOM_K = 64


@transactional
def pop_random_k(tr: Any, name: str, end: str = "min", k: int = RANDOM_K) -> Item | None:
    """A random one of the first ``k`` items of ``end`` (the idea of Apple's QuiCK).

    Snapshot-reads the first k items and takes one at random with a read conflict on that key
    only, so concurrent pops usually take different items and all commit. Order holds only
    approximately (within the first k), and, like a plain pop, a retry after 1021 may lose an
    item. Measured for comparison; it is not part of the service's API.
    """
    _entry, qk = require(tr, name, fifo_ok=end == "min")
    kvs, _cut = walk(SnapshotReads(tr), qk, end, k)
    if not kvs:
        items = qk.items.range()
        tr.add_read_conflict_range(items.start, items.stop)  # "empty" must hold at commit
        return None
    kv = random.choice(kvs)
    item_key = bytes(kv.key)
    tr.add_read_conflict_key(item_key)
    del tr[item_key]
    del tr[qk.order.pack((qk.items.unpack(item_key)[1],))]
    tr.add(qk.counter(queue_keys.SIZE), counter_bytes(-1))
    tr.add(qk.counter(queue_keys.POPPED), counter_bytes(1))
    return decode_item(qk, kv)


def _random_k(db: Any, name: str, end: str) -> Item | None:
    return pop_random_k(db, name, end)


#: Sub-queues of one "sharded" queue: items are spread over them, order holds per sub-queue only.
#: As many as the bench's largest usual popper count short of 128, so poppers seldom share one.
SHARDS = 32


def shard_names(name: str) -> list[str]:
    return [f"{name}.s{index}" for index in range(SHARDS)]


def _sharded_prepare(db: Any, name: str, kind: str) -> None:
    for shard in shard_names(name):
        service.create_queue(db, shard, kind)


def _sharded_push(db: Any, name: str, value: Any, priority: int) -> Any:
    return service.push(db, random.choice(shard_names(name)), value, priority)


def _sharded_fill(db: Any, name: str, batch: Sequence[tuple[Any, int]]) -> None:
    batch = list(batch)
    for index, shard in enumerate(shard_names(name)):
        if batch[index::SHARDS]:
            service.push_many(db, shard, batch[index::SHARDS])


def _sharded_remaining(db: Any, name: str) -> int:
    return sum(service.size(db, shard) for shard in shard_names(name))


def _sharded_drop(db: Any, name: str) -> None:
    for shard in shard_names(name):
        if service.queue_exists(db, shard):
            service.delete_queue(db, shard)


def _sharded_pop(db: Any, name: str, end: str) -> Item | None:
    """Plain pops, starting at a random sub-queue and moving on while they are empty."""
    shards = shard_names(name)
    start = random.randrange(SHARDS)
    for offset in range(SHARDS):
        item = service.pop(db, shards[(start + offset) % SHARDS], end)
        if item is not None:
            return item
    return None


#: Name -> pop function, after the app's own in the bench's registry.
STRATEGIES: dict[str, PopStrategy] = {
    "random-k": _random_k,
    "sharded": _sharded_pop,
}

#: Name -> Layout, for the strategies that do not use the plain layout.
LAYOUTS: dict[str, Layout] = {
    "sharded": Layout(
        prepare=_sharded_prepare,
        push=_sharded_push,
        fill=_sharded_fill,
        remaining=_sharded_remaining,
        drop=_sharded_drop,
    ),
}
