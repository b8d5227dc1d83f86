"""The end-of-run oracle: after the drain, nothing the actors used is left behind.

* **watches**: none still registered in the engine, but those of actors stopped midway (a killed
  process's watches die with it; in the simulation they stay in the engine, so they are not
  counted);
* **high-contention state**: no request or result of any queue's two ends, and no lead key
  unless a high-contention pop was stopped midway or gave up with an error (its lead then waits
  out its expiry);
* **key slots**: every per-key lease counter and "full" marker cleared (no lease is held);
* **threads and timers**: no thread started during the run still alive, and every abandoned
  result of a cancelled async operation undone (``offload``), unless its undo was stopped.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterable

from django_fdbqueue.fdbapi import fdb
from django_fdbqueue.service._internals import catalog, offload

from .history import History
from .scheduler import Scheduler

#: How long to wait for an actor's thread that said it was done to end (real seconds).
JOIN_SECONDS = 2.0


class Leftovers:
    """Watches the engine's watches from the start of a run; judges what is left at its end."""

    def __init__(self, db: Any, scheduler: Scheduler, history: History) -> None:
        self.db = db
        self.scheduler = scheduler
        self.history = history
        self.owners: dict[int, str] = {}  # id of a watch's future: the actor that set it
        self.threads = set(threading.enumerate())
        self.pending = offload.pending_undos()
        watcher = db._watcher
        add = watcher.add

        def noted_add(key: bytes, baseline: bytes | None, future: Any) -> None:
            actor = scheduler.current()
            self.owners[id(future)] = "" if actor is None else actor.name
            add(key, baseline, future)

        watcher.add = noted_add

    def check(self, queues: Iterable[str]) -> None:
        self._watches()
        for queue in queues:
            self._queue(queue)
        self._threads()

    def _watches(self) -> None:
        stopped = {a.name for a in self.scheduler.actors if a.stopped}
        stopped |= {a.name for a in self.scheduler.actors if a.owner in stopped}
        left = [w for w in self.db._watcher._watches if not w[2].is_ready()]
        mine = [self.owners.get(id(w[2]), "?") for w in left if self.owners.get(id(w[2]), "?") not in stopped]
        if mine:
            self.history.violate("leftover", f"{len(mine)} watch(es) still registered, set by {sorted(set(mine))}")

    def _queue(self, queue: str) -> None:
        tr = self.db.create_transaction()
        entry = catalog.lookup(tr, catalog.root(tr), queue)
        if entry is None:
            return
        _entry, qk = catalog.require(tr, queue)
        spaces = {
            "request (min)": qk.requests("min").range(),
            "request (max)": qk.requests("max").range(),
            "result": qk.results.range(),
            "key slot": qk.key_counts.range(),
            "key-full marker": qk.key_full.range(),
        }
        for what, r in spaces.items():
            rows = list(tr.snapshot.get_range(r.start, r.stop, limit=5))
            if rows:
                self.history.violate("leftover", f"{queue!r} still has {len(rows)}+ {what} key(s) after the drain")
        for end in ("min", "max"):
            self._lead(tr, queue, qk, end)

    def _lead(self, tr: Any, queue: str, qk: Any, end: str) -> None:
        """A lead key may stay after the drain: a popper stopped or frozen midway, or one that gave
        up with an error, leaves it as a killed process's would. But it names a turn that ends
        (``LEAD_SECONDS``): one still running after the drain's ten minutes would hold up the
        rounds for good."""
        held = tr.snapshot[qk.lead(end)]
        if not held.present():
            return
        _token, until_us = fdb.tuple.unpack(bytes(held))
        if until_us > time.time() * 1e6:
            self.history.violate("leftover", f"{queue!r} has a lead key for {end} whose turn never ends")

    def _threads(self) -> None:
        for actor in self.scheduler.actors:
            if actor.thread is not None:
                actor.thread.join(timeout=JOIN_SECONDS)
        alive = [t.name for t in threading.enumerate() if t not in self.threads and t.is_alive()]
        if alive:
            self.history.violate("leftover", f"threads still running after the run: {sorted(alive)}")
        undos_stopped = any(a.stopped and a.name.startswith("undo") for a in self.scheduler.actors)
        if offload.pending_undos() != self.pending and not undos_stopped:
            owed = offload.pending_undos() - self.pending
            self.history.violate("leftover", f"{owed} abandoned result(s) never undone")
        offload.forget_undos(self.pending)  # a stopped undo's count must not leak into the next run
