"""The pop strategies the bench can compare, and how each one lays out its queue.

A strategy is the function a bench client calls to take the next item:
``pop(db, name, end) -> Item | None``, with the same contract as ``service.pop``. Registering
one is a single line in :data:`STRATEGIES`; ``--strategy NAME`` then selects it and every
strategy-dependent row (pops at each client count, push+pop pairs) is measured with it.

Most strategies pop from one ordinary queue. One that needs its queue made, pushed, counted or
removed differently (several sub-queues, another kind) also adds a :class:`Layout` to
:data:`LAYOUTS` under the same name; everything it leaves out keeps the plain behaviour.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service import Item
from django_fdbqueue.service._internals import keys as queue_keys
from django_fdbqueue.service._internals.catalog import counter_bytes, require
from django_fdbqueue.service._internals.contention import SnapshotReads
from django_fdbqueue.service._internals.items import decode_item
from django_fdbqueue.service._internals.reading import walk

__all__ = [
    "PopStrategy",
    "Layout",
    "PLAIN",
    "STRATEGIES",
    "LAYOUTS",
    "get_strategy",
    "layout_for",
    "registered",
]

#: ``(db, name, end) -> Item | None``: remove and return the next item, None when there is none.
PopStrategy = Callable[[Any, str, str], "Item | None"]


def _fill(db: Any, name: str, batch: Sequence[tuple[Any, int]]) -> None:
    service.push_many(db, name, batch)


def _drop(db: Any, name: str) -> None:
    if service.queue_exists(db, name):
        service.delete_queue(db, name)


@dataclass(frozen=True)
class Layout:
    """How a strategy's queue is created, pushed to, filled, counted and removed.

    ``prepare(db, name, kind)`` creates the (empty) queue; ``push(db, name, value, priority)``
    adds one item in its own transaction; ``fill(db, name, batch)`` adds a batch of
    ``(value, priority)`` pairs (the bench never hands it more than a few thousand at once);
    ``remaining(db, name)`` counts what is left, for the exactly-once check; ``drop(db, name)``
    removes everything, and is called even when the queue was never prepared.
    """

    prepare: Callable[[Any, str, str], Any] = service.create_queue
    push: Callable[[Any, str, Any, int], Any] = service.push
    fill: Callable[[Any, str, Sequence[tuple[Any, int]]], Any] = _fill
    remaining: Callable[[Any, str], int] = service.size
    drop: Callable[[Any, str], Any] = _drop


#: One service queue, used as the application would use it.
PLAIN = Layout()

# --- high-contention pop, and two alternatives to compare it with ---------------------------


def _high_contention(db: Any, name: str, end: str) -> Item | None:
    """The service's staged pop (``service/contention.py``): exact order, batched service."""
    return service.pop(db, name, end, mode="high-contention")


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
        _drop(db, shard)


def _sharded_pop(db: Any, name: str, end: str) -> Item | None:
    """Plain pops, starting at a random sub-queue and moving on while they are empty."""
    shards = shard_names(name)
    start = random.randrange(SHARDS)
    for offset in range(SHARDS):
        item = service.pop(db, shards[(start + offset) % SHARDS], end)
        if item is not None:
            return item
    return None


#: Name -> pop function. Add a strategy here (and, if it needs one, its layout to LAYOUTS).
STRATEGIES: dict[str, PopStrategy] = {
    "plain": service.pop,
    "high-contention": _high_contention,
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


def get_strategy(name: str) -> PopStrategy:
    """The registered pop function; KeyError names the registered ones."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise KeyError(f"Unknown pop strategy {name!r}; registered: {', '.join(STRATEGIES)}.") from None


def layout_for(name: str | None) -> Layout:
    """The strategy's layout; the plain one for strategies that did not register their own."""
    if name is None:
        return PLAIN
    return LAYOUTS.get(name, PLAIN)


def registered(names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The names to run: those given (checked), or every registered strategy in registry order."""
    if not names:
        return tuple(STRATEGIES)
    chosen = []
    for name in names:
        get_strategy(name)
        if name not in chosen:
            chosen.append(name)
    return tuple(chosen)
