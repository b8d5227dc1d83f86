"""Deterministic simulation: many actors on one embedded store, faults injected, run by a seed.

``simulate(seed)`` runs the standard actors (``workload``) among each other on a fresh embedded
store: one actor runs at a time and the seed picks which, at every transaction's read version
and commit, so transactions overlap and conflict as on a cluster; a virtual clock moves on as
they run (leases end, delays pass, watches fire late); faults are injected (1020, 1021 applied
and not applied, stalls that end in 1007 or 1031, actors stopped mid-operation, clock skew).
Invariants are checked as it runs (key limits, liveness) and at the end (every value judged as
ok, lost, duplicated or unexpected; FIFO order; counters against a recount). The same seed and
options replay the same run, step for step; a failure prints its one-line replay and the steps
that led to it, shrunk. See the testing guide for running your own actors.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import os
import random
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping

from django_fdbqueue import service
from django_fdbqueue.service.extension import serve_high_contention
from django_fdbqueue.engines.embedded import EmbeddedDatabase
from django_fdbqueue.engines.embedded.faults import UNKNOWN_APPLIED, UNKNOWN_NOT_APPLIED, FaultConfig, FaultInjector

from . import knobs, services
from .actors_admin import Admin
from .context import ActorContext
from .history import History, Push, Violation
from .keyslots import KeySlots, leases_and_counters
from .liveness import Asleep, Takeable
from .scheduler import Actor, Killed, Scheduler, VirtualClock
from .workload import FIFO_QUEUES, KEYED_QUEUES, LIVENESS_QUEUES, QUEUES, Actors, Doubt, Shape
from .world import simulated

__all__ = [
    "Actor",
    "ActorContext",
    "Faults",
    "History",
    "Killed",
    "Options",
    "Push",
    "Result",
    "Shape",
    "Violation",
    "simulate",
]

#: A waiter asleep this long (virtual seconds) beside an item it could take breaks liveness.
LIVENESS_SECONDS = 1.0
#: Actors whose names start so may wait (``wait=``): the liveness oracle watches the queues' heads for them.
WAITERS = ("waiter", "contender")
#: How far the clock runs on before the store is drained, so every lease and delay has ended.
DRAIN_AFTER_SECONDS = 600.0


@dataclass(frozen=True)
class Faults:
    """What goes wrong, and how often (fractions of commits, or of actors' points)."""

    not_committed: float = 0.03
    unknown_applied: float = 0.02
    unknown_not_applied: float = 0.02
    stall: float = 0.005  # a point where the actor stalls 0.5 to 7 s: 1007, 1031, expired leases
    kill: float = 0.2  # share of actors stopped at a random point of their run
    skew_ms: float = 50.0  # each actor's wall clock is off by up to this much
    latency: float = 0.1  # share of commits held 1 to 100 ms after their reads: others commit meanwhile

    @classmethod
    def parse(cls, text: str) -> "Faults":
        """``none``, ``default``, or ``name=value,...`` over the defaults (e.g. ``kill=0,stall=0.02``)."""
        if text in ("", "default"):
            return cls()
        if text == "none":
            return cls(**{f.name: 0.0 for f in dataclasses.fields(cls)})
        values: dict[str, float] = {}
        names = {f.name for f in dataclasses.fields(cls)}
        for part in text.split(","):
            name, _, raw = part.partition("=")
            if name.strip() not in names:
                raise ValueError(f"unknown fault {name.strip()!r}; expected one of {', '.join(sorted(names))}")
            try:
                values[name.strip()] = float(raw)
            except ValueError:
                raise ValueError(f"fault {name.strip()!r} needs a number, not {raw!r}") from None
        return dataclasses.replace(cls(), **values)

    def text(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name):g}" for f in dataclasses.fields(self))


@dataclass(frozen=True)
class Options:
    faults: Faults = field(default_factory=Faults)
    shape: Shape = field(default_factory=Shape)
    max_steps: int = 50_000
    seconds: float = 60.0  # virtual time the actors have
    timeout: float = 3.0  # the store's transaction timeout (virtual seconds)
    swarm: bool = True  # each seed varies the mix of actors (left out, kept, doubled) and the service's knobs

    def shape_of(self, seed: int) -> Shape:
        """The shape the run of ``seed`` has: ``shape``, varied by the seed when ``swarm``."""
        return self.shape.varied(random.Random(f"{seed}/swarm")) if self.swarm else self.shape

    def faults_of(self, seed: int) -> Faults:
        """The faults the run of ``seed`` has: ``faults``, those of commits scaled by the seed
        (a half to three times) when ``swarm``, so a fault's rare consequences come up too."""
        if not self.swarm:
            return self.faults
        scale = random.Random(f"{seed}/faults").choice([0.5, 1.0, 1.0, 3.0])
        f = self.faults
        return dataclasses.replace(
            f,
            not_committed=min(1.0, f.not_committed * scale),
            unknown_applied=min(1.0, f.unknown_applied * scale),
            unknown_not_applied=min(1.0, f.unknown_not_applied * scale),
        )


@dataclass
class Result:
    seed: int
    options: Options
    violations: list[Violation]
    classes: collections.Counter[str]
    steps: int
    virtual_seconds: float
    operations: int
    trace: list[str]
    custom: tuple[str, ...] = ()  # the project's own actors, by name

    @property
    def ok(self) -> bool:
        return not self.violations

    def digest(self) -> str:
        """A fingerprint of the whole run: equal for two runs that went step for step alike."""
        return hashlib.sha256("\n".join(self.trace).encode()).hexdigest()[:16]

    def replay(self) -> str:
        """The one command line (or, with actors of your own, the call) that runs this again, step for step."""
        o = self.options
        if self.custom:
            return f"simulate({self.seed}, {o!r}, actors=<{', '.join(self.custom)}>, queues=<the same>)"
        return (
            f"python manage.py fdbqueue simulate --seed {self.seed} --steps {o.max_steps}"
            f" --operations {o.shape.operations} --faults {o.faults.text()}" + ("" if o.swarm else " --no-swarm")
        )


def simulate(
    seed: int,
    options: Options | None = None,
    *,
    actors: Mapping[str, Callable[[ActorContext], None]] | None = None,
    queues: Mapping[str, Mapping[str, Any]] | None = None,
    directory: str | None = None,
) -> Result:
    """Run one simulation of ``seed`` and judge it (see the module's docstring).

    ``actors`` (name: function of an :class:`ActorContext`) run beside the standard ones (set
    ``options.shape``'s counts to 0 for none of those); ``queues`` (name: ``create_queue``'s
    arguments) are created for them, and judged and drained like the standard queues.
    """
    options = options or Options()
    clash = set(queues or ()) & {*QUEUES, *services.NAMES, *Admin(None, options.shape.admins).names}  # type: ignore[arg-type]
    if clash:
        raise ValueError(f"the simulation's own queues are named {', '.join(sorted(clash))}: choose other names")
    folder = tempfile.mkdtemp(prefix="fdbqueue-sim-", dir=directory)
    try:
        return _run(seed, options, os.path.join(folder, "sim.sqlite3"), dict(actors or {}), dict(queues or {}))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(
    seed: int,
    options: Options,
    path: str,
    custom: dict[str, Callable[[ActorContext], None]],
    own_queues: dict[str, Mapping[str, Any]],
) -> Result:
    rng = random.Random(seed)
    clock = VirtualClock()
    faults = options.faults_of(seed)
    db = EmbeddedDatabase(
        path,
        timeout=options.timeout,
        clock=lambda: clock.now,
        faults=FaultConfig(faults.not_committed, faults.unknown_applied, faults.unknown_not_applied, seed=seed),
    )
    scheduler = Scheduler(rng, clock)
    history = History()
    doubts: dict[str, Doubt] = {}
    try:
        with simulated(scheduler, rng, db), _knobs(options, seed, scheduler):
            _instrument(db, scheduler, rng, faults, doubts)
            _reuse_read_versions(options, seed, scheduler, db)
            actors = Actors(db, scheduler, history, seed, doubts)
            parts = services.Services(actors, options.shape_of(seed))
            queues = {**QUEUES, **own_queues}
            for name, settings in {**queues, **parts.queues()}.items():
                service.create_queue(db, name, **settings)
            with parts.installed():
                _cast(actors, custom, options, rng, parts)
                oracle = Oracle(db, scheduler, history, {**queues, **parts.judged_queues()})
                scheduler.run(max_steps=options.max_steps, until=options.seconds, on_step=_both(oracle, parts))
                steps = scheduler.steps
                workload = [a for a in scheduler.actors if a.name in doubts]
                stored = _end(db, scheduler, history, oracle, options, workload, parts)
        parts.judge()
        actors.count_cancelled_pops()
        classes = history.judge(stored)
        history.check_order(FIFO_QUEUES)
    finally:
        db.close()
    trace = scheduler.trace
    return Result(
        seed, options, history.violations, classes, steps, clock.now, history.operations, trace, tuple(custom)
    )


def _serve_all(db: Any, queue: str, end: str) -> None:
    """Rounds until one says nothing more waits: results of stopped high-contention pops come back."""
    for _ in range(10_000):
        if not serve_high_contention(db, queue, end).more:
            return
    raise AssertionError(f"rounds on {queue!r} ({end}) still report more after 10,000")


def _reuse_read_versions(options: Options, seed: int, scheduler: Scheduler, db: Any) -> None:
    """In half the swarm's seeds, writers start from their thread's last commit, as on a cluster
    (``fdbapi.retrying``): what they conclude at an older read version is judged too."""
    if options.swarm and random.Random(f"{seed}/reuse").random() < 0.5:
        db.reuse_read_versions = True
        scheduler.note("read versions reused")


def _knobs(options: Options, seed: int, scheduler: Scheduler) -> Any:
    return knobs.varied(random.Random(f"{seed}/knobs"), scheduler) if options.swarm else contextlib.nullcontext()


def _both(oracle: "Oracle", parts: services.Services) -> Callable[[], None]:
    def step() -> None:
        oracle.step()
        parts.step()

    return step


def _cast(
    actors: Actors,
    custom: dict[str, Callable[[ActorContext], None]],
    options: Options,
    rng: random.Random,
    parts: services.Services,
) -> None:
    """The standard actors, the project's own, and which of them will be stopped midway."""
    faults = options.faults_of(actors.seed)

    def skew() -> int:
        return int(rng.uniform(-1, 1) * faults.skew_ms * 1000)

    actors.stops, actors.freezes = faults.kill > 0, faults.stall > 0
    shape = options.shape_of(actors.seed)
    if options.swarm:
        counts = (f"{f.name}={getattr(shape, f.name)}" for f in dataclasses.fields(shape) if f.name != "operations")
        actors.scheduler.note(f"swarm: {' '.join(counts)}; faults {faults.text()}")
    actors.spawn_all(shape, skew)
    parts.spawn(skew)
    for name, body in custom.items():
        actors.doubts[name] = Doubt()
        ctx = ActorContext(
            name,
            actors.db,
            actors.scheduler,
            actors.history,
            random.Random(f"{actors.seed}/{name}"),
            actors.doubts[name],
        )
        actors.scheduler.spawn(name, partial(body, ctx), skew_us=skew())
    _plan_kills(actors.scheduler, rng, faults)


def _end(
    db: Any,
    scheduler: Scheduler,
    history: History,
    oracle: "Oracle",
    options: Options,
    workload: list[Actor],
    parts: services.Services,
) -> collections.Counter[str]:
    """Wind the actors down, note their crashes, then drain the store (faults off, time on)."""
    _wind_down(scheduler, history, workload, options)
    for actor in scheduler.actors:
        if actor.error is not None:
            history.violate("crash", f"{actor.name}: {type(actor.error).__name__}: {actor.error}")
    parts.wound_down(options.faults.skew_ms)
    scheduler.clock.now += DRAIN_AFTER_SECONDS
    db.interleave = None
    db.faults = FaultInjector(None)  # the drain's own pops must not lose what they take
    stored = oracle.final_checks()
    parts.final(oracle, stored)
    return stored


def _wind_down(scheduler: Scheduler, history: History, workload: list[Actor], options: Options) -> None:
    """Stop the workload's actors; let them, and what they left running (pool jobs, undos), wind
    down as a process shutting down would; then stop whatever is left."""
    scheduler.request_stop(workload)
    scheduler.run(max_steps=scheduler.steps + options.max_steps, until=scheduler.clock.now + 120.0)
    stuck = scheduler.stop(scheduler.live())
    for actor in stuck:
        history.violate("stuck", f"{actor.name} would not stop (at {actor.label!r})")


def _instrument(db: Any, scheduler: Scheduler, rng: random.Random, faults: Faults, doubts: dict[str, Doubt]) -> None:
    """Note commits in doubt per actor; stall actors now and then at their points."""
    draw, point = db.faults.draw, db.interleave

    def noted_draw() -> str | None:
        fault: str | None = draw()
        actor = scheduler.current()
        owner = None if actor is None else (actor.owner or actor.name)
        if fault in (UNKNOWN_APPLIED, UNKNOWN_NOT_APPLIED) and owner in doubts:
            doubts[owner].count += 1
        return fault

    def stalling_point(label: str) -> None:
        actor = scheduler.current()
        if faults.stall and actor is not None and rng.random() < faults.stall:
            seconds = rng.uniform(0.5, 7.0)
            scheduler.stalled_until[actor.name] = scheduler.clock.now + seconds
            scheduler.note(f"{actor.name} stalls {seconds:.2f} s")
            scheduler.sleep(seconds)
        elif label == "commit" and actor is not None and faults.latency and rng.random() < faults.latency:
            scheduler.sleep(rng.uniform(0.001, 0.1))  # not a stall: the waits it slows are judged
        point(label)

    db.faults.draw = noted_draw
    db.interleave = stalling_point


def _plan_kills(scheduler: Scheduler, rng: random.Random, faults: Faults) -> None:
    for actor in scheduler.actors:
        if rng.random() < faults.kill:
            actor.kill_at_point = rng.randint(1, 60)


class Oracle:
    """Looks at the store between steps (on the scheduler's thread, outside every actor)."""

    def __init__(
        self,
        db: Any,
        scheduler: Scheduler,
        history: History,
        queues: Mapping[str, Mapping[str, Any]],
        *,
        liveness_seconds: float = LIVENESS_SECONDS,
    ) -> None:
        self.db = db
        self.queues = queues
        self.liveness_seconds = liveness_seconds
        self.scheduler = scheduler
        self.history = history
        self.judged = 0  # gave_up entries checked so far
        self.takeable = Takeable(db, scheduler, history, KEYED_QUEUES)
        self.asleep = Asleep(self.takeable, bound=liveness_seconds / 2)
        self.key_slots = KeySlots(db, history)
        self.checked_at: int | None = None  # the store's version at the last key-limit check

    def step(self) -> None:
        version = self._version()
        if version is None or version != self.checked_at:
            for queue, limit in KEYED_QUEUES.items():  # only a commit can take a key's slot
                self._key_limit(queue, limit)
        self.checked_at = version
        self.takeable.update(self._watched(), version)
        self._gave_up()
        self.asleep.step()

    def _version(self) -> int | None:
        """The last commit's version, as the embedded engine tells its watchers (None: unknown),
        to skip looks at a store that has not changed."""
        read = getattr(getattr(self.db, "_signal", None), "read", None)
        return None if read is None else read()

    def _watched(self) -> set[str]:
        """The queues waits are under way on, and the waiters' queues while a waiter lives."""
        queues = {wait.queue for wait in self.history.waits.values()}
        if any(a.name.startswith(WAITERS) for a in self.scheduler.live()):
            queues.update(LIVENESS_QUEUES)
        return queues

    def _gave_up(self) -> None:
        """No waiter gives up while an item it could take was visible for LIVENESS_SECONDS."""
        now = self.scheduler.clock.now
        for name, queue, began, _ended in self.history.gave_up[self.judged :]:
            earliest = self.takeable.earliest(queue)
            stalled = self.scheduler.stalled_until.get(name, 0.0) > began
            if earliest is not None and not stalled and now - max(earliest[1], began) >= self.liveness_seconds:
                self.history.violate(
                    "liveness",
                    f"{name} gave up on {queue!r} at {now:.3f}; {earliest[0]} was there from {earliest[1]:.3f}",
                )
        self.judged = len(self.history.gave_up)

    def _key_limit(self, queue: str, limit: int) -> None:
        held, stored = leases_and_counters(self.db, self.history, queue)
        for key, count in held.items():
            if count > limit:
                self.history.violate("key-limit", f"{count} leases of key {key!r} on {queue!r} (limit {limit})")
        self.key_slots.check(queue, held, stored)

    def final_checks(self) -> collections.Counter[str]:
        """Counters against a recount, then drain every queue: what is still stored, by value."""
        stored: collections.Counter[str] = collections.Counter()
        for queue, settings in self.queues.items():
            for end in ("min", "max") if settings.get("kind") == "priority" else ("min",):
                _serve_all(self.db, queue, end)
            self._recount(queue)
            while (item := service.pop(self.db, queue)) is not None:
                stored[item.value] += 1
            for letter in _all(partial(_dead_page, self.db, queue)):
                stored[letter.item.value] += 1
            self.key_slots.drained(queue)
            info = service.get_queue(self.db, queue)
            if (info.size, info.leased, info.delayed) != (0, 0, 0):
                self.history.violate("counters", f"{queue!r} drained still counts {info}")
        return stored

    def _recount(self, queue: str) -> None:
        info = service.get_queue(self.db, queue)
        ready = len(list(_all(lambda cursor: service.browse(self.db, queue, cursor=cursor, limit=500))))
        hidden = collections.Counter(
            s.state for s in _all(lambda cursor: service.scheduled(self.db, queue, cursor=cursor, limit=500))
        )
        dead = len(list(_all(lambda cursor: service.dead_letters(self.db, queue, cursor=cursor, limit=500))))
        counted = (info.size, info.leased, info.delayed, info.dead)
        recounted = (ready, hidden["leased"], hidden["delayed"], dead)
        if counted != recounted:
            self.history.violate("counters", f"{queue!r} counts {counted}, a recount finds {recounted}")


def _dead_page(db: Any, queue: str, cursor: str | None) -> Any:
    return service.dead_letters(db, queue, cursor=cursor, limit=500)


def _all(page: Callable[[str | None], Any]) -> Any:
    cursor = None
    while True:
        got = page(cursor)
        yield from got.items
        cursor = got.next_cursor
        if cursor is None:
            return
