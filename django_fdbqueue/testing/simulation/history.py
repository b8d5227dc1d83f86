"""What the actors did, and the verdict on it: Jepsen's classes for every pushed value.

Every value pushed is unique (its producer's name and a number). Actors record each push with
its outcome, each delivery (a pop's item, a claim's item once its ack succeeded) and each call
that met a commit in doubt. At the end the store is drained, and every value is judged by how
many copies came out (delivered plus still stored, dead letters included):

* **ok**: as many as its push allows: exactly one, or one or two for a push without a dedup key
  whose commit was in doubt (the documented cost of a blind retry), none to two for a push that
  failed in doubt;
* **lost**: none, beyond what plain pops in doubt may have taken (each may lose one item),
  acks whose caller stopped waiting may have settled, and a purge or a queue's deletion may have
  taken (values pushed before its commit);
* **duplicated**: more than its push allows;
* **unexpected**: a value delivered that was never pushed.
"""

from __future__ import annotations

import collections
import itertools
import threading
from dataclasses import dataclass, field


@dataclass
class Push:
    value: str
    queue: str
    dedup: bool
    key: str | None = None
    doubts: int = 0  # commits in doubt during the push: each may have stored the value once more
    outcome: str = "pending"  # ok, doubt (returned after commits in doubt), failed, unsure (raised after them)
    order_ok: bool = True  # pushed at once, no delay, no doubt: FIFO order may be checked


@dataclass(frozen=True)
class Wait:
    """A pop or claim with ``wait=`` under way, for the liveness check as it runs."""

    actor: str  # who waits: an async waiter's event loop (the owner of its pool jobs), or a thread
    queue: str
    began: float
    what: str


@dataclass
class Violation:
    kind: str  # lost, duplicated, unexpected, order, liveness, counters, key-limit, crash
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


@dataclass
class History:
    """What every actor did, in the order the simulation ran it."""

    pushes: dict[str, Push] = field(default_factory=dict)
    delivered: collections.Counter[str] = field(default_factory=collections.Counter)
    leased_ever: set[str] = field(default_factory=set)
    #: Per consumer and queue, the values it popped (plain pops), in order.
    popped_by: dict[tuple[str, str], list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    #: Values whose ack went on after its caller stopped waiting: delivered, or not.
    maybe_delivered: collections.Counter[str] = field(default_factory=collections.Counter)
    #: Plain pops whose commit was in doubt, per queue: each may have lost one item.
    lossy_pops: collections.Counter[str] = field(default_factory=collections.Counter)
    #: Values a purge or a queue's deletion may have taken (pushed before its commit, or maybe).
    erasable: set[str] = field(default_factory=set)
    #: Waits that ended with nothing: (actor, queue, began, ended), for the liveness check.
    gave_up: list[tuple[str, str, float, float]] = field(default_factory=list)
    #: Waits under way, by number: the liveness check looks at them at every step.
    waits: dict[int, Wait] = field(default_factory=dict)
    _wait_numbers: "itertools.count[int]" = field(default_factory=itertools.count, repr=False)
    violations: list[Violation] = field(default_factory=list)
    operations: int = 0
    #: Actors of a swarm record from threads that really run at once.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def pushed(self, push: Push) -> None:
        with self._lock:
            self.pushes[push.value] = push

    def operation(self) -> None:
        with self._lock:
            self.operations += 1

    def deliver(self, value: str) -> None:
        with self._lock:
            self.delivered[value] += 1

    def maybe(self, value: str) -> None:
        """``value``'s ack went on after its caller stopped waiting: delivered, or not."""
        with self._lock:
            self.maybe_delivered[value] += 1

    def lossy(self, queue: str, pops: int) -> None:
        """``pops`` pops of ``queue`` may each have taken an item for nobody (commits in doubt)."""
        with self._lock:
            self.lossy_pops[queue] += pops

    def leased(self, value: str) -> None:
        with self._lock:
            self.leased_ever.add(value)

    def popped(self, consumer: str, queue: str, value: str, attempts: int = 0) -> None:
        """A plain pop's value. One with ``attempts`` was leased before (maybe by a claim in
        doubt, which no actor knew it took): its place in the order is the lease's doing."""
        with self._lock:
            self.popped_by[(consumer, queue)].append(value)
            if attempts:
                self.leased_ever.add(value)

    def gave_up_on(self, actor: str, queue: str, began: float, ended: float) -> None:
        with self._lock:
            self.gave_up.append((actor, queue, began, ended))

    def wait_began(self, wait: Wait) -> int:
        """A wait began: its number, for :meth:`wait_ended`."""
        with self._lock:
            number = next(self._wait_numbers)
            self.waits[number] = wait
            return number

    def wait_ended(self, number: int) -> None:
        with self._lock:
            self.waits.pop(number, None)

    def waits_ended(self, actor: str) -> None:
        """Every wait of ``actor`` ended (it was stopped, with its event loop)."""
        with self._lock:
            for number in [n for n, w in self.waits.items() if w.actor == actor]:
                del self.waits[number]

    def violate(self, kind: str, detail: str) -> None:
        with self._lock:
            self.violations.append(Violation(kind, detail))

    def judge(self, stored: collections.Counter[str]) -> collections.Counter[str]:
        """Classify every value (see the module's docstring); record the violations; the counts."""
        classes: collections.Counter[str] = collections.Counter()
        lost_per_queue: dict[str, list[str]] = collections.defaultdict(list)
        for value, push in self.pushes.items():
            copies = self.delivered[value] + stored[value]
            low, high = _allowed(push)
            if value in self.erasable:
                low = 0
            if copies < low - self.maybe_delivered[value]:
                lost_per_queue[push.queue].append(value)
                classes["lost"] += 1
            elif copies > high:
                classes["duplicated"] += 1
                self.violate("duplicated", f"{value} came out {copies} times (pushed {push.outcome})")
            else:
                classes["ok"] += 1
        for queue, lost in lost_per_queue.items():
            if len(lost) > self.lossy_pops[queue]:
                self.violate("lost", f"{', '.join(sorted(lost)[:5])} of {queue!r} never came out")
        for value in set(self.delivered) | set(stored):
            if value not in self.pushes:
                classes["unexpected"] += 1
                self.violate("unexpected", f"{value!r} came out but was never pushed")
        return classes

    def check_order(self, fifo_queues: set[str]) -> None:
        """Each consumer pops a producer's never-claimed values of a FIFO queue in push order."""
        for (consumer, queue), values in self.popped_by.items():
            if queue not in fifo_queues:
                continue
            last: dict[str, int] = {}
            for value in values:
                push = self.pushes.get(value)
                if push is None or not push.order_ok or value in self.leased_ever:
                    continue
                producer, number = value.rsplit(":", 1)
                if last.get(producer, -1) > int(number):
                    self.violate("order", f"{consumer} popped {value} after {producer}:{last[producer]}")
                last[producer] = max(last.get(producer, -1), int(number))


def _allowed(push: Push) -> tuple[int, int]:
    """How many copies of a value its push allows (low, high)."""
    if push.outcome == "ok" or (push.outcome == "doubt" and push.dedup):
        return 1, 1
    if push.outcome == "doubt":
        return 1, 1 + push.doubts
    if push.outcome == "unsure":  # raised after commits in doubt: each may have stored it
        return 0, 1 if push.dedup else push.doubts
    if push.outcome == "failed":
        return 0, 0
    return 0, 1 if push.dedup else 1 + push.doubts  # pending: the pusher stopped midway
