"""What a simulation takes over while it runs: time, randomness, sleeps, watches and threads.

Inside :func:`simulated`, for the simulation's actors:

* ``time.time``, ``time.time_ns`` and ``time.monotonic`` read the virtual clock (wall time with
  the actor's own skew), and ``time.sleep`` blocks the actor on it;
* ``os.urandom`` and the ``random`` module draw from the seed, and so do the service's own RNGs;
* a wait on a watch (``runtime.wait_on``, the service's seam) blocks the actor until the watch fires or the virtual
  time passes; the embedded engine's watches fire when the simulation says (late, by a seeded
  delay after each commit), not from a thread of their own;
* the async face's thread pool runs each job as a new actor;
* the package's log records go into the run's trace (one line each), not to the handlers.

Other threads (the scheduler's own) see the virtual clock too, and real randomness. Everything
is put back on exit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import random
import selectors
import time
from typing import Any, Callable, Iterator

from django_fdbqueue.service.extension import forget_cached_queues, runtime


from .scheduler import Scheduler

#: Longest a watch takes to hear of a commit, in virtual seconds (each one drawn from the seed).
WATCH_DELAY_SECONDS = 0.05


class ActorPool(concurrent.futures.Executor):
    """The async face's pool inside a simulation: each job runs as an actor of its own."""

    def __init__(self, scheduler: Scheduler, prefix: str) -> None:
        self.scheduler = scheduler
        self.prefix = prefix
        self.jobs = 0

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self.jobs += 1

        def body() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as error:  # noqa: BLE001 - the awaiting coroutine gets it
                future.set_exception(error)

        self.scheduler.spawn(f"{self.prefix}{self.jobs}", body)
        return future


class _Patches:
    """Attributes replaced for a run, and put back after it in reverse order."""

    def __init__(self) -> None:
        self.saved: list[tuple[Any, str, Any]] = []

    def put(self, owner: Any, name: str, value: Any) -> None:
        self.saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, value)

    def restore(self) -> None:
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)


@contextlib.contextmanager
def simulated(scheduler: Scheduler, rng: random.Random, db: Any) -> Iterator[None]:
    """Take over time, randomness, waits and the pool for ``scheduler``'s actors (see above)."""
    patches = _Patches()
    state = random.getstate()
    try:
        _virtual_time(patches, scheduler, rng)
        _virtual_waits(patches, scheduler)
        _actor_pools(patches, scheduler)
        _seeded_engine(patches, scheduler, rng, db)
        _traced_logs(patches, scheduler)
        # Queue entries cached by an earlier run: tagged with a metadata version that this fresh
        # store, whose versions follow the same virtual clock, may well reach again.
        forget_cached_queues()
        random.seed(rng.random())
        patches.put(runtime, "PICK", random.Random(rng.random()))
        patches.put(runtime, "SHUFFLE", random.Random(rng.random()))
        yield
    finally:
        random.setstate(state)
        patches.restore()


class _TraceHandler(logging.Handler):
    """A log record as one line of the trace: injected faults make the service log retries by
    the hundred, which are the run's story, not noise for the terminal."""

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(logging.DEBUG)
        self.scheduler = scheduler

    def emit(self, record: logging.LogRecord) -> None:
        first = record.getMessage().splitlines()[0][:200]
        self.scheduler.note(f"log {record.levelname.lower()} {record.name}: {first}")


def _traced_logs(patches: _Patches, scheduler: Scheduler) -> None:
    handler = _TraceHandler(scheduler)
    # The framework's logger too: it logs each failed task (a workflow member that raises).
    for name in ("django_fdbqueue", "django_tasks"):
        logger = logging.getLogger(name)
        patches.put(logger, "handlers", [handler])
        patches.put(logger, "propagate", False)


def _virtual_time(patches: _Patches, scheduler: Scheduler, rng: random.Random) -> None:
    """Clocks read the virtual one (wall time with the actor's skew); sleeps and urandom too."""
    clock = scheduler.clock
    real_sleep, real_urandom = time.sleep, os.urandom

    def skew() -> int:
        actor = scheduler.current()
        return 0 if actor is None else actor.skew_us

    def sleep(seconds: float) -> None:
        if scheduler.current() is None:
            real_sleep(seconds)
        else:
            scheduler.sleep(seconds)

    def urandom(n: int) -> bytes:
        return rng.randbytes(n) if scheduler.current() is not None else real_urandom(n)

    patches.put(time, "time", lambda: clock.wall(skew()))
    patches.put(time, "time_ns", lambda: int(clock.wall(skew()) * 1_000_000_000))
    patches.put(time, "monotonic", lambda: clock.now)
    patches.put(time, "sleep", sleep)
    patches.put(os, "urandom", urandom)


def _virtual_waits(patches: _Patches, scheduler: Scheduler) -> None:
    """A wait on a watch blocks the actor until the watch fires or the virtual time passes."""

    def wait_on(watch: Any, seconds: float) -> bool:
        scheduler.block("watch", until=scheduler.clock.now + max(0.0, seconds), condition=watch.is_ready)
        fired = bool(watch.is_ready())
        if not fired:
            watch.cancel()
        else:
            scheduler.woken()
        return fired

    patches.put(runtime, "wait_on", wait_on)
    patches.put(runtime, "pause", lambda seconds: scheduler.sleep(seconds))


def _actor_pools(patches: _Patches, scheduler: Scheduler) -> None:
    """The async face's pool, its undo threads and their timers run jobs as actors."""

    def later(seconds: float, job: Callable[[], Any]) -> None:
        def body() -> None:
            scheduler.sleep(seconds)
            job()

        scheduler.spawn("undo-later", body)

    patches.put(runtime, "_pool", ActorPool(scheduler, "pool-"))
    patches.put(runtime, "_undo_pool", ActorPool(scheduler, "undo-"))
    patches.put(runtime, "later", later)


def _seeded_engine(patches: _Patches, scheduler: Scheduler, rng: random.Random, db: Any) -> None:
    """The engine's turns, clock and watches go by the scheduler."""
    watcher = db._watcher
    patches.put(watcher, "manual", True)
    patches.put(db, "interleave", scheduler.point)
    patches.put(db, "_clock", lambda: scheduler.clock.now)
    patches.put(db._signal, "publish", _announcer(scheduler, rng, watcher, db._signal.publish))
    patches.put(watcher, "add", _stale_checker(scheduler, rng, watcher, watcher.add))


def _announcer(scheduler: Scheduler, rng: random.Random, watcher: Any, publish: Callable[[int], None]) -> Any:
    """After each commit, the watches hear of it a seeded moment later (on the scheduler's thread)."""

    def announce(version: int) -> None:
        publish(version)
        scheduler.at(scheduler.clock.now + rng.uniform(0.0, WATCH_DELAY_SECONDS), watcher.check_now)

    return announce


def _stale_checker(scheduler: Scheduler, rng: random.Random, watcher: Any, add: Callable[..., None]) -> Any:
    """A watch set on a value that changed after its transaction read it fires a seeded moment
    later, with no commit to come: a storage server compares it with what it holds at once.
    (Checked on commits alone, it slept until the next one: a waiter's look whose commit was held
    while a push went through slept past the push.)"""

    def add_checked(key: bytes, baseline: bytes | None, future: Any) -> None:
        add(key, baseline, future)
        conn = watcher._storage.acquire()
        try:
            stale = watcher._storage.get(conn, key) != baseline
        finally:
            watcher._storage.release(conn)
        if stale:
            scheduler.at(scheduler.clock.now + rng.uniform(0.0, WATCH_DELAY_SECONDS), watcher.check_now)

    return add_checked


class SimSelector(selectors.BaseSelector):
    """An event loop's selector inside a simulation: waiting for I/O or a timer blocks the actor.

    The loop's own wake-up (``call_soon_threadsafe`` from a pool job or a watch's callback)
    writes to its self-pipe; the actor may run again once that is readable, or once the virtual
    time its timers name has come. ``each_turn`` is called once per turn of the loop, after its
    wait and before it runs what is ready: an actor may cancel its tasks there, between any two
    of their steps.
    """

    def __init__(self, scheduler: Scheduler, each_turn: Callable[[], None] | None = None) -> None:
        self.scheduler = scheduler
        self.each_turn = each_turn
        self._real = selectors.DefaultSelector()

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._real.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = self._real.select(0)
        if not ready and (timeout is None or timeout > 0):
            until = None if timeout is None else self.scheduler.clock.now + timeout
            self.scheduler.block("event loop", until=until, condition=lambda: bool(self._real.select(0)))
            ready = self._real.select(0)
        if self.each_turn is not None:
            self.each_turn()
        return ready

    def close(self) -> None:
        self._real.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._real.get_key(fileobj)

    def get_map(self) -> Any:
        return self._real.get_map()


def run_async(scheduler: Scheduler, main: Callable[[], Any], *, each_turn: Callable[[], None] | None = None) -> Any:
    """Run the coroutine ``main()`` on an event loop of this actor's own, on virtual time
    (``each_turn``: see :class:`SimSelector`)."""
    loop = asyncio.SelectorEventLoop(SimSelector(scheduler, each_turn))
    try:
        return loop.run_until_complete(main())
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        finally:
            loop.close()
