"""A queue split by tenant, its actors, and the fairness oracle.

Producers push for several tenants (one of them, ``t0``, far more than the others); consumers pop
and claim across them. What ``tenantturns`` promises, checked after every commit:

* **every tenant with ready items has its turn**: the tenants in the ring are exactly those with
  items in their index (a tenant with items but no turn would wait for ever);
* **a consumer takes one of the first** ``tenantturns.CHOICES`` **tenants of the ring**: the
  tenant whose turn a commit used up had fewer than ``CHOICES`` turns ahead of it that were
  already in the ring when its own turn was given. (A turn given later may sit ahead of it, since
  the back of the ring is read as a snapshot: the consumer's read may not have seen it.) So a
  tenant with items is passed over by the tenants ahead of it and by the picks among the first
  few, never by a whole backlog.

Within one tenant, items leave in queue order: each producer's values are named by tenant, so the
standard FIFO order check covers them.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueNotFound
from django_fdbqueue.service._internals import catalog, tenantkeys, tenantturns

from .actors_base import outcome
from .history import Push
from .workload import Actors

TENANT_QUEUE = "tenants"
QUEUES: dict[str, dict[str, Any]] = {TENANT_QUEUE: {"kind": "fifo", "tenants": True}}
#: ``t0`` is the big tenant: more than half the pushes are its; six tenants, more than CHOICES.
TENANTS = ("t0", "t0", "t0", "t0", "t0", "t0", "t1", "t2", "t3", "t4", "t5")


class Tenants:
    """The tenant queue's actors and its fairness oracle (see the module's docstring)."""

    def __init__(self, actors: Actors) -> None:
        self.actors = actors
        self.commits = 0  # commits of the whole store, to look at the ring once per commit
        self.seen = 0
        #: The ring as last seen: (turn, tenant) -> the commit count when it was first seen.
        self.ring: dict[tuple[int, str], int] = {}
        self.broken = False  # a purge or drain of the queue: the oracle stops

    def spawn(self, shape: Any, spawn: Any) -> None:
        self.broken = not (shape.tenant_producers and shape.tenant_consumers)  # no oracle without them
        spawn("tenant-producer", shape.tenant_producers, self.producer)
        spawn("tenant-consumer", shape.tenant_consumers, self.consumer)

    def producer(self, name: str, rng: random.Random, operations: int) -> None:
        for n in range(max(1, operations // 2)):
            tenant = rng.choice(TENANTS)
            value = f"{name}.{tenant}:{n}"  # the order check's producer is "NAME.TENANT"
            dedup = rng.random() < 0.5
            delay = rng.choice([None, None, None, 0.2])
            push = Push(value, TENANT_QUEUE, dedup, order_ok=delay is None)
            self.actors.history.pushed(push)
            call = partial(
                service.push,
                self.actors.db,
                TENANT_QUEUE,
                value,
                tenant=tenant,
                delay=delay,
                dedup_key=value if dedup else None,
            )
            _got, doubt, error = self.actors._call(name, f"push {value} for {tenant}", call, pushes=(push,))
            outcome(push, doubt, error)

    def consumer(self, name: str, rng: random.Random, operations: int) -> None:
        """Plain pops and claims (waiting now and then) across the tenants."""
        db, history = self.actors.db, self.actors.history
        for _ in range(max(1, operations // 2)):
            wait = rng.choice([None, None, 0.5])
            if rng.random() < 0.5:
                call: partial[Any] = partial(service.pop, db, TENANT_QUEUE, wait=wait)
                got, doubt, _error = self.actors._call(name, "pop tenants", call, pops=TENANT_QUEUE)
                if got is not None:
                    history.deliver(got.value)
                    if not doubt:
                        history.popped(name, TENANT_QUEUE, got.value, got.attempts)
                continue
            call = partial(service.claim, db, TENANT_QUEUE, lease=rng.choice([0.5, 5.0]), wait=wait)
            lease, _doubt, _error = self.actors._call(name, "claim tenants", call)
            if lease is not None:
                history.leased(lease.item.value)
                self.actors._settle(name, rng, lease)

    # -- the oracle ---------------------------------------------------------------------------
    def committed(self) -> None:
        self.commits += 1

    def step(self) -> None:
        """After each commit: every tenant with items has a turn; a turn used up was near the front."""
        if self.broken or self.commits == self.seen:
            return
        one_commit = self.commits == self.seen + 1
        self.seen = self.commits
        ring, indexed = self._read()
        if ring is None:
            return
        if set(t for _turn, t in ring) != indexed or len(ring) != len(indexed):
            self.actors.history.violate(
                "fairness", f"tenants with items {sorted(indexed)}, tenants with a turn {sorted(t for _, t in ring)}"
            )
        if one_commit:
            self._check_used_turns(ring)
        self.ring = {key: self.ring.get(key, self.commits) for key in ring}

    def _check_used_turns(self, ring: list[tuple[int, str]]) -> None:
        now = set(ring)
        old = sorted(self.ring)
        for position, key in enumerate(old):
            if key in now:
                continue
            given = self.ring[key]
            ahead = [k for k in old[:position] if k in now and self.ring[k] < given]
            if len(ahead) >= tenantturns.CHOICES:
                self.actors.history.violate(
                    "fairness",
                    f"tenant {key[1]!r} took its turn {key[0]} with {len(ahead)} older turns ahead of it"
                    f" ({', '.join(t for _, t in ahead)}): a consumer takes one of the first {tenantturns.CHOICES}",
                )

    def _read(self) -> tuple[list[tuple[int, str]] | None, set[str]]:
        """The ring's (turn, tenant) pairs in order, and the tenants with items in their index."""
        tr = self.actors.db.create_transaction()
        try:
            _entry, qk = catalog.require(tr, TENANT_QUEUE)
        except QueueNotFound:
            return None, set()
        tk = tenantkeys.of(qk)
        ring = [tk.ring.unpack(bytes(kv.key)) for kv in tr.snapshot.get_range(*_span(tk.ring))]
        indexed = {tk.index.unpack(bytes(kv.key))[0] for kv in tr.snapshot.get_range(*_span(tk.index))}
        return [(int(turn), str(tenant)) for turn, tenant in ring], indexed


def _span(space: Any) -> tuple[bytes, bytes]:
    r = space.range()
    return r.start, r.stop
