"""The standard actors: producers, poppers, claimers and a dead-letter keeper, with the waiters
(``actors_waiting``) and the high-contention group (``actors_contention``), as one ``Actors``.

The keeper has ``letters`` (``max_attempts=1``) of its own, where it makes dead letters to requeue
or delete. Each actor draws its operations from its own RNG (made from the seed), so what it does
does not depend on the interleaving; when it runs does.
"""

from __future__ import annotations

import dataclasses
import random
import threading
from functools import partial
from dataclasses import dataclass
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.exceptions import DeadLetterNotFound
from django_fdbqueue.service.popping import PopMode

from .actors_base import CONTENDED, FIFO_QUEUES, KEYED_QUEUES, LIVENESS_QUEUES, QUEUES, SHARED, Doubt
from .actors_contention import Contention
from .actors_waiting import Waiting
from .history import History
from .scheduler import Scheduler
from .world import run_async as run_async_simulated

#: What the simulation's other modules take from here (the groups' names live beside it).
__all__ = ["FIFO_QUEUES", "KEYED_QUEUES", "LIVENESS_QUEUES", "QUEUES", "Actors", "Doubt", "Shape"]


@dataclass(frozen=True)
class Shape:
    """How many actors of each kind, and how many operations each makes."""

    producers: int = 3
    poppers: int = 2
    claimers: int = 3
    keyed_claimers: int = 2  # claimers of the keyed queue only: claims of one key overlap
    waiters: int = 2
    awaiters: int = 2
    keepers: int = 1
    operations: int = 12
    contenders: int = 4  # high-contention pops of one end of ``hc``, several at once
    feeders: int = 1  # producers of ``hc`` only
    tenders: int = 1  # maintenance: fulfil rounds on ``hc``
    # The service's other parts (``services``): tenants, queue admin, schedules, the Tasks worker.
    tenant_producers: int = 1
    tenant_consumers: int = 1
    admins: int = 1  # each creates, purges and deletes a queue of its own
    admin_users: int = 1  # push, pop and claim on the admins' queues meanwhile
    schedulers: int = 2  # two schedulers race to fire one declared schedule
    task_workers: int = 1  # run the tasks one enqueuer enqueues (none without workers)
    workflows: int = 1  # enqueuers of small workflows of tasks (run by the task workers, or the drain)
    hc_claimers: int = 2  # high-contention claims of ``hc``'s contended end, several at once
    coroutines: int = 3  # each async waiter's event loop runs this many waits side by side
    pause: float = 0.0  # a producer pauses up to this long (virtual seconds) between its pushes

    def varied(self, rng: random.Random) -> "Shape":
        """Swarm testing: each group left out, kept or (where more of one kind meet) doubled, as
        ``rng`` picks, so seeds differ in which actors meet; a mix of everything at once hides
        what two kinds alone run into. Half the seeds keep every group; a quarter run one group
        alone (focused)."""
        names = [f.name for f in dataclasses.fields(self) if f.name not in _NOT_COUNTS]
        mix = rng.random()
        if mix < 0.5:  # every group, as given
            counts = {name: getattr(self, name) for name in names}
        elif mix < 0.75:  # focused: one group alone with what it needs
            focus = set(rng.choice(_FOCUSES))
            counts = {name: getattr(self, name) if name in focus else 0 for name in names}
        else:
            counts = {}
            for name in names:
                n = getattr(self, name)
                counts[name] = rng.choices([0, n, 2 * n if name in _DOUBLED else n], weights=[3, 5, 2])[0]
        coroutines = rng.randint(1, 2 * self.coroutines)
        return dataclasses.replace(self, coroutines=coroutines, pause=rng.choice([0.0, 0.2, 1.0]), **counts)

    @classmethod
    def none(cls, operations: int = 12) -> "Shape":
        """No standard actor at all: for a run of a project's own actors only."""
        counts = {f.name: 0 for f in dataclasses.fields(cls) if f.name not in _NOT_COUNTS}
        return cls(operations=operations, **counts)


_NOT_COUNTS = ("operations", "coroutines", "pause")
_DOUBLED = {"producers", "poppers", "claimers", "keyed_claimers", "waiters", "awaiters", "contenders", "hc_claimers"}
#: The groups a focused seed runs alone (with the producers they consume from).
_FOCUSES = (
    ("producers", "poppers"),
    ("producers", "claimers"),
    ("producers", "keyed_claimers"),
    ("producers", "waiters"),
    ("producers", "awaiters"),
    ("producers", "waiters", "awaiters"),
    ("keepers",),
    ("feeders", "contenders"),
    ("feeders", "contenders", "tenders"),
    ("tenant_producers", "tenant_consumers"),
    ("admins", "admin_users"),
    ("schedulers",),
    ("task_workers",),
    ("task_workers", "workflows"),
    ("feeders", "hc_claimers", "tenders"),
)


class Actors(Contention, Waiting):
    """Makes the standard actors of a run and records what they do in ``history``."""

    def __init__(
        self,
        db: Any,
        scheduler: Scheduler,
        history: History,
        seed: int,
        doubts: dict[str, Doubt],
        *,
        exact: bool = False,
        run_async: Callable[[Callable[[], Any]], Any] | None = None,
    ) -> None:
        self.db = db
        self.scheduler = scheduler
        self.history = history
        self.seed = seed
        self.doubts = doubts
        #: Only the operations whose commits in doubt cost nothing (a swarm on a real cluster,
        #: where 1021 comes unannounced): pushes with a dedup key, high-contention pops, claims.
        self.exact = exact
        #: Set to end a swarm: each actor stops before its next operation.
        self.stopping = threading.Event()
        self.coroutines, self.pause = Shape.coroutines, Shape.pause
        self.cancelled_pops = []
        self._run_async = run_async or partial(run_async_simulated, scheduler)
        self._simulated_loops = run_async is None  # event loops of the simulation's (LoopTurns)
        #: Contender pops may be stopped, and frozen, midway (the run's faults ``kill``, ``stall``).
        self.stops, self.freezes = not exact, not exact
        #: The end of ``hc`` every contender pops: their rounds meet there.
        self.contended_end = random.Random(f"{seed}/{CONTENDED}").choice(["min", "max"])

    def spawn_all(self, shape: Shape, skew_us: Callable[[], int]) -> None:
        kinds: list[tuple[str, int, Callable[[str, random.Random, int], None]]] = [
            ("producer", shape.producers, self.producer),
            ("popper", shape.poppers, self.popper),
            ("claimer", shape.claimers, self.claimer),
            ("keyclaimer", shape.keyed_claimers, self.keyed_claimer),
            ("waiter", shape.waiters, self.waiter),
            # "waiter-async": a waiter too, for the liveness oracle (which watches the queues'
            # heads while any actor named "waiter..." runs).
            ("waiter-async", shape.awaiters, self.awaiter),
            ("keeper", shape.keepers, self.keeper),
            ("feeder", shape.feeders, self.feeder),
            ("contender", shape.contenders, self.contender),
            ("tender", shape.tenders, self.tender),
            ("hcclaimer", shape.hc_claimers, self.hc_claimer),
        ]
        self.coroutines, self.pause = shape.coroutines, shape.pause
        for kind, count, body in kinds:
            for n in range(count):
                name = f"{kind}{n}"
                rng = random.Random(f"{self.seed}/{name}")
                self.doubts[name] = Doubt()
                self.scheduler.spawn(name, partial(body, name, rng, shape.operations), skew_us=skew_us())

    def producer(self, name: str, rng: random.Random, operations: int) -> None:
        """Pushes one by one, and now and then a burst (``push_many``; see ``_push_many`` when
        ``exact``), ``pause`` apart at most."""
        for n in range(operations):
            if self.stopping.is_set():
                return
            if rng.random() < 0.2:
                self._burst(name, rng, rng.choice(["fifo", "prio"]), n)
            else:
                self._push(name, rng, rng.choice(SHARED), n)
            if self.pause:
                self.scheduler.sleep(rng.uniform(0, self.pause))

    def _burst(self, name: str, rng: random.Random, queue: str, n: int) -> None:
        priority = QUEUES[queue]["kind"] == "priority"
        self._push_many(
            name, queue, [(f"{name}:{n}.{k}", rng.randint(0, 3) if priority else 0) for k in range(rng.randint(2, 6))]
        )

    def popper(self, name: str, rng: random.Random, operations: int) -> None:
        for _ in range(operations):
            if self.stopping.is_set():
                return
            queue = rng.choice(["fifo", "prio"])
            end = "min" if queue == "fifo" else rng.choice(["min", "max"])
            mode: PopMode = "high-contention" if self.exact else rng.choice(["plain", "plain", "high-contention"])
            got, doubt, _error = self._call(
                name,
                f"pop {queue} {end} {mode}",
                partial(service.pop, self.db, queue, end, mode=mode),
                pops=queue,
                receipts=mode != "plain",
            )
            if got is not None:
                self.history.deliver(got.value)
                if mode == "plain" and not doubt:
                    self.history.popped(name, queue, got.value, got.attempts)

    def claimer(self, name: str, rng: random.Random, operations: int) -> None:
        for _ in range(operations):
            if self.stopping.is_set():
                return
            queue = rng.choice(SHARED)
            spread = rng.choice([None, None, 4]) if queue != "keyed" else None
            seconds = rng.choice([0.5, 2.0, 30.0])
            lease, _doubt, _error = self._call(
                name,
                f"claim {queue} lease {seconds}" + (f" spread {spread}" if spread else ""),
                partial(service.claim, self.db, queue, lease=seconds, spread=spread),
            )
            if lease is None:
                continue
            self.history.leased(lease.item.value)
            self._settle(name, rng, lease)

    def keyed_claimer(self, name: str, rng: random.Random, operations: int) -> None:
        """Claims of the keyed queue only, with short leases: claims of one key overlap often."""
        for _ in range(operations):
            if self.stopping.is_set():
                return
            seconds = rng.choice([0.2, 0.5, 2.0])
            lease, _doubt, _error = self._call(
                name, f"claim keyed lease {seconds}", partial(service.claim, self.db, "keyed", lease=seconds)
            )
            if lease is None:
                self.scheduler.sleep(rng.uniform(0.0, 0.2))
                continue
            self.history.leased(lease.item.value)
            self._settle(name, rng, lease)

    def keeper(self, name: str, rng: random.Random, operations: int) -> None:
        """Sets items aside (a claim of ``letters`` released) and requeues or deletes dead letters.

        Only it takes dead letters away, so a requeue or delete of one it just listed must succeed,
        whatever commits in doubt it met (a retry answers from the settled marker).
        """
        for n in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self.scheduler.sleep(rng.uniform(0.2, 1.0))
            if rng.random() < 0.7:
                self._bury(name, rng, n)
            queue = rng.choice(["prio", "letters"])
            page, _doubt, _error = self._call(
                name, f"dead letters of {queue}", partial(service.dead_letters, self.db, queue, limit=5)
            )
            for letter in [] if page is None else page.items:
                self._dispose(name, rng, queue, letter.item)

    def _bury(self, name: str, rng: random.Random, n: int) -> None:
        """Push a value to ``letters`` and claim and release an item there: its one attempt spent."""
        self._push(name, rng, "letters", n)
        lease, _doubt, _error = self._call(
            name, "claim letters", partial(service.claim, self.db, "letters", lease=30.0)
        )
        if lease is not None:
            self.history.leased(lease.item.value)
            value = lease.item.value
            self._call(name, f"release {value}", partial(service.release, self.db, lease.receipt))

    def _dispose(self, name: str, rng: random.Random, queue: str, item: Any) -> None:
        """Requeue or delete a dead letter just listed: the answer must say it was done."""
        value = item.value
        what = "requeue" if rng.random() < 0.5 else "delete"
        if what == "requeue":
            got, _doubt, error = self._call(
                name, f"requeue {value}", partial(service.requeue_dead_letter, self.db, queue, item.id)
            )
            if got is not None and got.value != value:
                self.history.violate("answer", f"requeue of {value} answered {got.value!r}")
        else:
            _got, _doubt, error = self._call(
                name, f"delete {value}", partial(service.delete_dead_letter, self.db, queue, item.id), acks=value
            )
            if error is None:
                self.history.deliver(value)  # handled for good
        if isinstance(error, DeadLetterNotFound):
            # It was just listed, and nobody else takes dead letters: the call applied (an earlier
            # attempt's commit was in doubt) and must say so.
            self.history.violate("answer", f"{what} of {value} answered {error!r}")
