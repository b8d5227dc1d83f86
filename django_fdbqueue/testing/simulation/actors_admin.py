"""Queue admin: an actor creates, purges and deletes a queue of its own while others use it.

What is judged, from the times each call began and ended (virtual seconds):

* a value pushed before a purge's or a deletion's commit may be gone: its push began before the
  purge (or deletion) ended. A purge or deletion
  that raised a store error (in doubt) or was stopped counts as one that may have applied;
  one that answered QueueNotFound (the queue was not there) did not apply. Any other value
  must come out as usual;
* nothing comes back: a pop or claim that began after a purge or deletion ended never returns a
  value whose push ended before that purge or deletion began (a **resurrected** item);
* while the queue certainly does not exist (after a deletion ended, before the next create
  began), a push, pop or claim raises QueueNotFound (the documented error) and stores or returns
  nothing; while it certainly exists, none raises QueueNotFound;
* at the end the queue, if it exists, counts what a recount finds, and drains to zero.
"""

from __future__ import annotations

import collections
import math
import random
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueAlreadyExists, QueueError, QueueNotFound

from .actors_base import outcome
from .history import Push
from .workload import Actors

ERASERS = ("purge", "delete")


@dataclass
class AdminOp:
    kind: str  # create, purge, delete
    start: float
    end: float = math.inf
    applied: str = "maybe"  # yes, maybe, no
    state: str | None = None  # exists or absent once it ended, when known


@dataclass
class Use:
    actor: str
    queue: str
    kind: str  # push, pop, claim
    start: float
    end: float
    got: Any
    error: BaseException | None


def own_queue(index: int) -> str:
    return f"own{index}"


class Admin:
    """The admins, their queues' users, and the judge of both (see the module's docstring)."""

    def __init__(self, actors: Actors, admins: int) -> None:
        self.actors = actors
        self.names = [own_queue(n) for n in range(admins)]
        self.ops: dict[str, list[AdminOp]] = {name: [] for name in self.names}
        self.uses: list[Use] = []
        self.pushed_at: dict[str, tuple[str, float, float]] = {}  # value: (queue, began, ended)
        self.taken: list[tuple[str, str, float]] = []  # (value, queue, the take began)

    def queues(self) -> dict[str, dict[str, Any]]:
        return {name: {"kind": "fifo"} for name in self.names}

    def spawn(self, shape: Any, spawn: Any) -> None:
        spawn("admin", shape.admins, self.admin)
        if self.names:
            spawn("admin-user", shape.admin_users, self.user)

    def _now(self) -> float:
        return self.actors.scheduler.clock.now

    # -- the admin ----------------------------------------------------------------------------
    def admin(self, name: str, rng: random.Random, operations: int) -> None:
        queue = own_queue(int(name.removeprefix("admin")))
        state: str | None = "exists"  # created before the actors start
        for _ in range(max(2, operations // 3)):
            self.actors.scheduler.sleep(rng.uniform(0.2, 1.5))
            if state == "absent":
                kind = "create"
            elif state == "exists":
                kind = rng.choice(["purge", "purge", "delete"])
            else:
                kind = rng.choice(["create", "delete"])
            state = self._admin_op(name, queue, kind, state)

    def _admin_op(self, name: str, queue: str, kind: str, state: str | None) -> str | None:
        db = self.actors.db
        calls: dict[str, Callable[[], Any]] = {
            "create": partial(service.create_queue, db, queue),
            "purge": partial(service.clear, db, queue),
            "delete": partial(service.delete_queue, db, queue),
        }
        op = AdminOp(kind, self._now())
        self.ops[queue].append(op)
        try:
            _got, _doubt, error = self.actors._call(name, f"{kind} {queue}", calls[kind])
        finally:
            op.end = self._now()
        expected = {"create": "absent", "purge": "exists", "delete": "exists"}[kind]
        if error is None:
            op.applied, op.state = "yes", ("absent" if kind == "delete" else "exists")
        elif isinstance(error, (QueueNotFound, QueueAlreadyExists)):
            op.applied = "no"
            op.state = "absent" if isinstance(error, QueueNotFound) else "exists"
            if state == expected:
                self.actors.history.violate("answer", f"{kind} of {queue} answered {error!r}; it was {state}")
        return op.state

    # -- its queues' users --------------------------------------------------------------------
    def user(self, name: str, rng: random.Random, operations: int) -> None:
        for n in range(max(1, operations // 3)):
            self.actors.scheduler.sleep(rng.uniform(0.0, 0.6))  # spread over the admins' calls
            queue = rng.choice(self.names)
            kind = rng.choice(["push", "push", "pop", "claim"])
            start = self._now()
            if kind == "push":
                got, error = self._push(name, rng, queue, f"{name}:{n}", start)
            elif kind == "pop":
                got, error = self._pop(name, queue, start)
            else:
                got, error = self._claim(name, rng, queue, start)
            self.uses.append(Use(name, queue, kind, start, self._now(), got, error))

    def _push(self, name: str, rng: random.Random, queue: str, value: str, start: float) -> tuple[Any, Any]:
        dedup = rng.random() < 0.5
        push = Push(value, queue, dedup, order_ok=False)
        self.actors.history.pushed(push)
        self.pushed_at[value] = (queue, start, math.inf)
        delay = rng.choice([None, None, 0.3])
        call = partial(service.push, self.actors.db, queue, value, delay=delay, dedup_key=value if dedup else None)
        got, doubt, error = self.actors._call(name, f"push {value} to {queue}", call, pushes=(push,))
        outcome(push, doubt, error)
        self.pushed_at[value] = (queue, start, self._now())
        return got, error

    def _pop(self, name: str, queue: str, start: float) -> tuple[Any, Any]:
        call = partial(service.pop, self.actors.db, queue)
        got, _doubt, error = self.actors._call(name, f"pop {queue}", call, pops=queue)
        if got is not None:
            self.actors.history.deliver(got.value)
            self.taken.append((got.value, queue, start))
        return got, error

    def _claim(self, name: str, rng: random.Random, queue: str, start: float) -> tuple[Any, Any]:
        call = partial(service.claim, self.actors.db, queue, lease=rng.choice([0.5, 5.0]))
        lease, _doubt, error = self.actors._call(name, f"claim {queue}", call)
        if lease is None:
            return None, error
        value = lease.item.value
        self.actors.history.leased(value)
        self.taken.append((value, queue, start))
        self.actors.scheduler.sleep(rng.uniform(0.0, 0.5))  # a purge or deletion may come meanwhile
        if rng.random() < 0.3:
            self.actors._call(name, f"release {value}", partial(service.release, self.actors.db, lease.receipt))
            return lease, error
        _got, _d, acked = self.actors._call(
            name, f"ack {value}", partial(service.ack, self.actors.db, lease.receipt), acks=value
        )
        if acked is None:
            self.actors.history.deliver(value)
        return lease, error

    # -- the judge ----------------------------------------------------------------------------
    def judge(self) -> None:
        """Before the verdict: what purges and deletions may have taken; what came back; answers."""
        history = self.actors.history
        for value, (queue, began, _ended) in self.pushed_at.items():
            if any(op.end > began for op in self._erasers(queue, ("yes", "maybe"))):  # it may commit later
                history.erasable.add(value)
        for value, queue, began in self.taken:
            _q, _pb, pushed = self.pushed_at.get(value, (queue, 0.0, math.inf))
            for op in self._erasers(queue, ("yes",)):
                if pushed < op.start and op.end < began:
                    history.violate(
                        "resurrected",
                        f"{value} taken from {queue} at {began:.3f}, after the {op.kind} of {op.start:.3f}",
                    )
        for use in self.uses:
            self._answer(use)

    def _erasers(self, queue: str, applied: tuple[str, ...]) -> list[AdminOp]:
        return [op for op in self.ops[queue] if op.kind in ERASERS and op.applied in applied]

    def _state_during(self, queue: str, start: float, end: float) -> str | None:
        """Whether the queue certainly existed, or certainly not, from ``start`` to ``end``."""
        state: str | None = "exists"
        for op in self.ops[queue]:
            if op.start < end and op.end > start:
                return None  # an admin call overlaps: either may hold
            if op.end <= start:
                state = op.state
        return state

    def _answer(self, use: Use) -> None:
        state = self._state_during(use.queue, use.start, use.end)
        missing = isinstance(use.error, QueueNotFound)
        if state == "absent" and not missing and (use.error is None or isinstance(use.error, QueueError)):
            self.actors.history.violate(
                "answer", f"{use.actor}'s {use.kind} on deleted {use.queue} answered {use.error or use.got!r}"
            )
        elif state == "exists" and missing:
            self.actors.history.violate("answer", f"{use.actor}'s {use.kind} on {use.queue} answered QueueNotFound")

    def final(self, oracle: Any, stored: collections.Counter[str]) -> None:
        """Drain the admins' queues that exist at the end; their counters first."""
        db = self.actors.db
        for queue in self.names:
            if not service.queue_exists(db, queue):
                continue
            oracle._recount(queue)
            while (item := service.pop(db, queue)) is not None:
                stored[item.value] += 1
            info = service.get_queue(db, queue)
            if (info.size, info.leased, info.delayed) != (0, 0, 0):
                self.actors.history.violate("counters", f"{queue!r} drained still counts {info}")
