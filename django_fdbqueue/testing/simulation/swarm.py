"""The simulation's actors and invariants on a real store, in real threads: a swarm.

On a cluster, interleavings are real and no one picks them, so this is not deterministic: the
same seed gives each actor the same choices, and the store decides the rest. What a swarm keeps
from the simulation: the standard actors (their exact-once operations only, since a commit in
doubt on a cluster comes unannounced: pushes with a dedup key, high-contention pops, claims),
the verdict on every value, the counters against a recount, key limits and liveness (checked by
a monitor thread a few times a second), and the drain. Run it beside whatever the cluster goes
through: commit latency from the knobs, a process killed (``scripts/reliability``).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any, Callable

from django_fdbqueue import service
from django_fdbqueue.fdbapi import FDBError

from . import Faults, Options, Oracle, Result
from .history import History
from .scheduler import Actor, Scheduler, VirtualClock
from .workload import QUEUES, Actors, Shape

#: A swarm's waiters may be slow for reasons of the machine (a loaded CI runner): its liveness
#: bound is wider than the simulation's.
LIVENESS_SECONDS = 5.0
#: How long after the actors stop the drain looks at the store as if (the service's clock runs
#: ahead: every lease and delay has ended).
DRAIN_AHEAD_SECONDS = 600.0


class RealClock(VirtualClock):
    """Seconds since the swarm began, on the machine's clock."""

    def __init__(self) -> None:
        super().__init__()
        self._start = time.monotonic()

    @property
    def now(self) -> float:
        return time.monotonic() - self._start

    @now.setter
    def now(self, value: float) -> None:
        pass  # real time moves by itself

    def wall(self, skew_us: int = 0) -> float:
        return time.time() + skew_us / 1_000_000  # the service's own clock, as the oracle reads it


class Swarm(Scheduler):
    """The scheduler's interface, with every actor a thread that really runs at once."""

    def __init__(self) -> None:
        super().__init__(random.Random(0), RealClock())  # its RNG picks no turns: never drawn from
        self._notes = threading.Lock()

    def spawn(self, name: str, body: Callable[[], Any], *, skew_us: int = 0) -> Actor:
        actor = Actor(name, body, skew_us, state="running")

        def run() -> None:
            try:
                body()
            except BaseException as error:  # noqa: BLE001 - kept for the verdict: an actor's crash
                actor.error = error
            finally:
                actor.state = "done"

        actor.thread = threading.Thread(target=run, name=f"swarm-{name}", daemon=True)
        self.actors.append(actor)
        actor.thread.start()
        return actor

    def note(self, text: str) -> None:
        with self._notes:
            self.trace.append(f"{self.clock.now:9.4f}   {text}")

    def point(self, label: str) -> None:
        pass

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def current(self) -> Actor | None:
        return None


def swarm(
    db: Any,
    seed: int,
    *,
    seconds: float = 10.0,
    shape: Shape | None = None,
    liveness_seconds: float = LIVENESS_SECONDS,
) -> Result:
    """Run the standard actors on ``db`` for ``seconds`` in real threads, then judge the store.

    ``db`` is a database the app opened (either engine), whose ROOT holds no queues of the
    simulation's names (``fifo``, ``prio``, ``keyed``, ``hc``, ``letters``). ``liveness_seconds``:
    how long a waiter may give up beside an item it could take; wider when the run has an outage
    of its own (a killed fdbserver: the cluster answers nothing while it recovers).
    """
    shape = shape or Shape(operations=1_000_000)  # they run until told to stop
    crowd = Swarm()
    history = History()
    for name, settings in QUEUES.items():
        service.create_queue(db, name, **settings)
    actors = Actors(db, crowd, history, seed, {}, exact=True, run_async=lambda main: asyncio.run(main()))
    actors.spawn_all(shape, lambda: 0)
    oracle = Oracle(db, crowd, history, QUEUES, liveness_seconds=liveness_seconds)
    monitor = threading.Thread(target=_watch, args=(oracle, crowd, seconds), name="swarm-monitor", daemon=True)
    monitor.start()
    monitor.join(seconds + 60)
    actors.stopping.set()
    for actor in crowd.actors:
        if actor.thread is not None:
            actor.thread.join(timeout=60)
    for actor in crowd.actors:
        if actor.state != "done":
            history.violate("stuck", f"{actor.name} did not stop within a minute of being told to")
        elif actor.error is not None:
            history.violate("crash", f"{actor.name}: {type(actor.error).__name__}: {actor.error}")
    with _service_clock_ahead(DRAIN_AHEAD_SECONDS):
        stored = oracle.final_checks()
    classes = history.judge(stored)
    options = Options(faults=Faults.parse("none"), shape=shape)
    return Result(seed, options, history.violations, classes, 0, crowd.clock.now, history.operations, crowd.trace)


def _watch(oracle: Oracle, crowd: Swarm, seconds: float) -> None:
    """The invariants checked as the swarm runs, a few times a second, until its time is up (a look
    the store could not answer, as in an outage, is skipped)."""
    while crowd.clock.now < seconds:
        try:
            oracle.step()
        except FDBError as error:
            crowd.note(f"monitor: the store did not answer ({error.code})")
        time.sleep(0.2)


class _service_clock_ahead:
    """The service's wall clock ``seconds`` ahead (leases and delays over), for the drain only."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def __enter__(self) -> None:
        self.saved = (time.time, time.time_ns)
        real_time, real_ns = self.saved
        ahead = self.seconds
        time.time = lambda: real_time() + ahead
        time.time_ns = lambda: real_ns() + int(ahead * 1e9)

    def __exit__(self, *exc: Any) -> None:
        time.time, time.time_ns = self.saved
