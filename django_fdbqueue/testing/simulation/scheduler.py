"""One actor at a time, in the order a seed picks, on a virtual clock.

Each actor is a thread, but only the one holding the turn runs: it gives the turn back at its
*points* (the embedded engine calls :meth:`Scheduler.point` before each transaction takes its
read version and before each commit) and whenever it blocks (a sleep, a watch, a parked
coroutine). The scheduler then picks the next actor among those that may run, with the seed's
RNG, and moves the virtual clock on a little. When none may run, the clock jumps to the
earliest time one of them wakes. So transactions of different actors overlap exactly as the
seed says (one reads, another commits, the first commits and conflicts), and the same seed
replays the same run, step for step. Between two points an actor's code runs alone, so what it
computes from its snapshot cannot depend on thread timing.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

#: Longest virtual time one step takes (an actor's work between two points), in seconds.
STEP_SECONDS = 0.002


class Killed(BaseException):
    """Raised in an actor the simulation stops mid-operation, as a process killed there would be."""


class Stuck(Exception):
    """An actor did not give its turn back: the scheduler cannot go on (a real wait in its code)."""


@dataclass
class Actor:
    """One simulated client: its thread, where it stands, and what it waits for."""

    name: str
    body: Callable[[], Any]
    skew_us: int = 0
    state: str = "new"  # new, ready, blocked, running, done
    label: str = "start"
    wake_at: float | None = None
    condition: Callable[[], bool] | None = None
    kill_at_point: int | None = None  # stop at this point (counted from 1), if any
    pause_at_point: tuple[int, float] | None = None  # (point, seconds): freeze there that long, once
    #: Freeze once a watch it waits on fires, once: for how long, given the clock then.
    pause_on_wake: Callable[[float], float] | None = None
    kill_on_wake: bool = False  # stop once a watch it waits on fires (answered, and gone)
    stop_requested: bool = False  # stop wherever it resumes next (the end of a run)
    owner: str | None = None  # the actor that started this one (a pool job's event loop)
    points: int = 0
    stopped: bool = False  # stopped midway (Killed), as a killed process: what it held is gone
    error: BaseException | None = None
    thread: threading.Thread | None = field(default=None, repr=False)

    def may_run(self, now: float) -> bool:
        if self.state == "ready":
            return True
        if self.state != "blocked":
            return False
        if self.wake_at is not None and self.wake_at <= now:
            return True
        return self.condition is not None and self.condition()


class VirtualClock:
    """Seconds since the run began; wall time is a fixed epoch plus that, plus an actor's skew."""

    EPOCH = 1_900_000_000.0  # a fixed wall time, so that runs of one seed agree everywhere

    def __init__(self) -> None:
        self.now = 0.0

    def wall(self, skew_us: int = 0) -> float:
        return self.EPOCH + self.now + skew_us / 1_000_000


class Scheduler:
    """Hands the one turn from actor to actor (see the module's docstring)."""

    def __init__(self, rng: random.Random, clock: VirtualClock, *, step_seconds: float = STEP_SECONDS) -> None:
        self.rng = rng
        self.clock = clock
        self.step_seconds = step_seconds
        self.actors: list[Actor] = []
        self.steps = 0
        self.trace: list[str] = []
        self._cv = threading.Condition()
        self._turn: Actor | None = None
        self._local = threading.local()
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        #: Until when each actor was stalled by an injected fault (its slowness is not a defect).
        self.stalled_until: dict[str, float] = {}
        self._event_ids = itertools.count()

    # -- who is running -----------------------------------------------------------------------
    def current(self) -> Actor | None:
        """The actor whose thread this is (None on the scheduler's, or any other, thread)."""
        return getattr(self._local, "actor", None)

    def spawn(self, name: str, body: Callable[[], Any], *, skew_us: int = 0) -> Actor:
        """A new actor, ready to run ``body`` when first picked (owned by the actor starting it)."""
        parent = self.current()
        actor = Actor(name, body, skew_us if parent is None else parent.skew_us)
        actor.owner = None if parent is None else (parent.owner or parent.name)
        actor.thread = threading.Thread(target=self._run_actor, args=(actor,), name=f"sim-{name}", daemon=True)
        self.actors.append(actor)
        actor.state = "ready"
        actor.thread.start()
        return actor

    def note(self, text: str) -> None:
        """Add a line to the trace (what an actor does, as it does it)."""
        self.trace.append(f"{self.clock.now:9.4f}   {text}")

    def at(self, when: float, event: Callable[[], None]) -> None:
        """Run ``event`` on the scheduler's thread once the clock reaches ``when``."""
        heapq.heappush(self._events, (when, next(self._event_ids), event))

    # -- the actor's side ---------------------------------------------------------------------
    def point(self, label: str) -> None:
        """An actor's point: give the turn back; go on when picked again (or be stopped here)."""
        actor = self.current()
        if actor is None:
            return
        actor.points += 1
        if actor.kill_at_point is not None and actor.points >= actor.kill_at_point:
            actor.kill_at_point = None
            self.note(f"{actor.name} is stopped at its {label}")
            raise Killed(f"{actor.name} stopped at its {label}")
        if actor.pause_at_point is not None and actor.points >= actor.pause_at_point[0]:
            seconds, actor.pause_at_point = actor.pause_at_point[1], None
            self.pause(seconds, label)
        self._give_turn(actor, "ready", label)

    def woken(self) -> None:
        """This actor's watch fired: stop or freeze it now if it is planned to (see ``Actor``)."""
        actor = self.current()
        if actor is not None and actor.kill_on_wake:
            actor.kill_on_wake = False
            self.note(f"{actor.name} is stopped as its watch fires")
            raise Killed(f"{actor.name} stopped as its watch fired")
        if actor is not None and actor.pause_on_wake is not None:
            seconds, actor.pause_on_wake = actor.pause_on_wake(self.clock.now), None
            self.pause(seconds, "wake-up")

    def pause(self, seconds: float, label: str) -> None:
        """Freeze this actor (a process paused, or swapped out) at ``label``: its deadlines pass."""
        actor = self.current()
        assert actor is not None
        self.stalled_until[actor.name] = self.clock.now + seconds
        self.note(f"{actor.name} pauses {seconds:.2f} s at its {label}")
        self.sleep(seconds)

    def block(self, label: str, *, until: float | None = None, condition: Callable[[], bool] | None = None) -> None:
        """Block this actor until ``condition()`` holds or the clock reaches ``until``."""
        actor = self.current()
        if actor is None:
            raise RuntimeError("only an actor blocks in a simulation")
        actor.wake_at, actor.condition = until, condition
        try:
            self._give_turn(actor, "blocked", label)
        finally:
            actor.wake_at, actor.condition = None, None

    def sleep(self, seconds: float) -> None:
        self.block("sleep", until=self.clock.now + max(0.0, seconds))

    def _give_turn(self, actor: Actor, state: str, label: str) -> None:
        with self._cv:
            actor.state, actor.label = state, label
            self._turn = None
            self._cv.notify_all()
            while self._turn is not actor:
                self._cv.wait()
            actor.state = "running"
        if actor.stop_requested:
            actor.stop_requested = False
            raise Killed(f"{actor.name} stopped at the end of the run")

    def _run_actor(self, actor: Actor) -> None:
        self._local.actor = actor
        with self._cv:
            while self._turn is not actor:
                self._cv.wait()
            actor.state = "running"
        try:
            actor.body()
        except Killed:
            actor.stopped = True
        except BaseException as error:  # noqa: BLE001 - kept for the checker: an actor's crash
            actor.error = error
        finally:
            with self._cv:
                actor.state = "done"
                self._turn = None
                self._cv.notify_all()

    # -- the scheduler's side -----------------------------------------------------------------
    def run(self, *, max_steps: int, until: float, on_step: Callable[[], None] | None = None) -> None:
        """Run actors until all are done, ``max_steps`` steps, or the clock passes ``until``."""
        while self.steps < max_steps and self.clock.now <= until:
            self._due_events()
            runnable = [a for a in self.actors if a.may_run(self.clock.now)]
            if not runnable:
                if not self._jump():
                    return
                continue
            actor = self.rng.choice(runnable)
            self.clock.now += self.rng.uniform(0.0, self.step_seconds)
            self.steps += 1
            self.trace.append(f"{self.clock.now:9.4f} {actor.name}: {actor.label}")
            self._hand(actor)
            if on_step is not None:
                on_step()

    def _hand(self, actor: Actor) -> None:
        with self._cv:
            self._turn = actor
            self._cv.notify_all()
            if not self._cv.wait_for(lambda: self._turn is not actor, timeout=60.0):
                raise Stuck(f"{actor.name} kept its turn for a minute after {actor.label!r}")

    def _due_events(self) -> None:
        while self._events and self._events[0][0] <= self.clock.now:
            _when, _id, event = heapq.heappop(self._events)
            event()

    def _jump(self) -> bool:
        """Move the clock to the next time something happens; False if nothing ever will."""
        times = [a.wake_at for a in self.actors if a.state == "blocked" and a.wake_at is not None]
        if self._events:
            times.append(self._events[0][0])
        if not times:
            return False
        self.clock.now = max(self.clock.now, min(times))
        return True

    def live(self) -> list[Actor]:
        return [a for a in self.actors if a.state != "done"]

    def request_stop(self, actors: list[Actor]) -> None:
        """Ask ``actors`` to stop: each raises Killed where it next resumes, then winds down."""
        for actor in actors:
            if actor.state in ("ready", "blocked"):
                actor.stop_requested = True
                actor.state = "ready"

    def stop(self, actors: list[Actor], *, rounds: int = 100) -> list[Actor]:
        """Stop ``actors`` now, again each time one blocks while winding down; those that would not."""
        for _ in range(rounds):
            left = [a for a in actors if a.state != "done"]
            if not left:
                return []
            for actor in left:
                if actor.state in ("ready", "blocked"):
                    actor.stop_requested = True
                    actor.state = "ready"
                    self._hand(actor)
        return [a for a in actors if a.state != "done"]
