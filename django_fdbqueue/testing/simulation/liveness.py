"""Liveness as the run goes: no waiter is still asleep a bounded virtual time beside an item it may take.

:class:`Takeable` notes, queue by queue, since when each item has been one a waiter may take: on
a queue without key limits, every visible item (a pop or claim takes one of them); on a queue
with ``key_concurrency``, every visible item among those a limited claim looks at whose key holds
fewer live leases than its limit. It looks again only when that may have changed: after a
commit, or once the clock passes the moment the first hidden item shows.

Two judges read it: :class:`Asleep`, at each step (an item takeable for the bound while a wait,
:class:`~.history.Wait`, is under way: the waiter slept through its chance), and the oracle's
check of waits that ended empty (one gave up while an item was there). What a fault slowed is
not judged: a wait whose actor, or one of the jobs it started (an event loop's pool jobs and
undos), was stalled by the simulation in that time.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any, Iterable, Iterator, Mapping

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service._internals import keylimits

from .history import History, Wait
from .scheduler import Scheduler

#: How long (virtual seconds) an item may stay takeable while a waiter sleeps: half the bound of
#: the check of waits that gave up. A wake-up takes a watch's delay (up to 0.05 s) and a few turns
#: of the actors involved, among all the others (0.12 s at most in the 40 seeds measured).
ASLEEP_SECONDS = 0.5
#: An event loop's job running this long is an attempt at work (retrying after conflicts, say).
LONG_JOB_SECONDS = 0.1
_PAGE = 500


class Takeable:
    """Since when each item of the queues looked at has been takeable (see the module)."""

    def __init__(self, db: Any, scheduler: Scheduler, history: History, key_limits: Mapping[str, int]) -> None:
        self.db = db
        self.scheduler = scheduler
        self.history = history
        self.key_limits = key_limits
        self.since: dict[str, dict[str, float]] = {}  # queue: {item id: takeable since}
        self.looked: dict[str, tuple[int, float]] = {}  # queue: (store version, wall time a hidden item shows)

    def update(self, queues: Iterable[str], version: int | None) -> None:
        """Look at ``queues`` (forgetting the others) where a commit or the clock may have changed them."""
        queues = set(queues)
        for queue in set(self.since) - queues:
            del self.since[queue]
            self.looked.pop(queue, None)
        now, wall = self.scheduler.clock.now, self.scheduler.clock.wall()
        for queue in sorted(queues):
            looked = self.looked.get(queue)
            if version is not None and looked is not None and looked[0] == version and wall < looked[1]:
                continue
            items, shows = self._look(queue, wall)
            seen = self.since.get(queue, {})
            self.since[queue] = {item: seen.get(item, now) for item in items}
            if version is None:
                self.looked.pop(queue, None)
            else:
                self.looked[queue] = (version, shows)

    def earliest(self, queue: str) -> tuple[str, float] | None:
        """The item of ``queue`` takeable the longest, and since when (None: none is)."""
        takeable = self.since.get(queue)
        if not takeable:
            return None
        return min(takeable.items(), key=lambda pair: (pair[1], pair[0]))

    def _look(self, queue: str, wall: float) -> tuple[list[str], float]:
        """The takeable items' ids, and when the first hidden item shows (infinity: none is hidden)."""
        at = dt.datetime.fromtimestamp(wall, dt.timezone.utc)
        return takeable_items(self.db, self.history, queue, self.key_limits.get(queue), at)


class Asleep:
    """Checks, step by step, that no waiter sleeps beside an item it may take (see the module)."""

    def __init__(self, takeable: Takeable, *, bound: float = ASLEEP_SECONDS) -> None:
        self.takeable = takeable
        self.scheduler = takeable.scheduler
        self.history = takeable.history
        self.bound = bound
        self.judged: set[int] = set()  # waits already reported
        self.busy_at: dict[int, float] = {}  # wait: when it was last seen attempting, not asleep
        self.job_seen: dict[str, float] = {}  # an event loop's job: when it was first seen running

    def step(self) -> None:
        now = self.scheduler.clock.now
        waits = dict(self.history.waits)
        for number in set(self.busy_at) - set(waits):
            del self.busy_at[number]
        if not waits:
            return
        working = self._working(now)
        for number, wait in waits.items():
            if number in self.judged:
                continue
            if wait.actor in working:
                self.busy_at[number] = now
            else:
                self._judge(number, wait, now)

    def _working(self, now: float) -> set[str]:
        """The waiters at work rather than asleep: an event loop while a job of its own has run a
        while (an attempt losing conflicts under contention, say: a look or a quick attempt of
        another of its waits does not count), a thread anywhere but a watch's wait."""
        live = self.scheduler.live()
        for job in live:
            if job.owner is not None:
                self.job_seen.setdefault(job.name, now)
        loops = {a.owner for a in self.scheduler.actors if a.owner is not None}
        working = {a.owner for a in live if a.owner is not None and now - self.job_seen[a.name] >= LONG_JOB_SECONDS}
        working.update(a.name for a in live if a.name not in loops and a.owner is None and a.label != "watch")
        return working

    def _judge(self, number: int, wait: Wait, now: float) -> None:
        earliest = self.takeable.earliest(wait.queue)
        if earliest is None:
            return
        item, since = earliest
        start = max(since, wait.began, self.busy_at.get(number, -math.inf))
        if now - start < self.bound or stalled_since(self.scheduler, wait.actor, start):
            return
        self.judged.add(number)
        self.history.violate(
            "liveness",
            f"{wait.what}: asleep from {start:.3f} to {now:.3f} while {item} of {wait.queue!r} could be taken",
        )


def stalled_since(scheduler: Scheduler, actor: str, since: float) -> bool:
    """Was ``actor``, or a job it started, stalled by a fault after ``since``?"""
    stalled = scheduler.stalled_until
    return any(stalled.get(a.name, 0.0) > since for a in scheduler.actors if actor in (a.name, a.owner))


@transactional
def takeable_items(
    tr: Any, history: History, queue: str, limit: int | None, wall: dt.datetime
) -> tuple[list[str], float]:
    """Ids of the items of ``queue`` a waiter may take at ``wall``, in one snapshot, and when the
    first hidden item shows (a delay passes, a lease runs out).

    Without key limits (``limit`` None): every ready item and every delayed one now due (a pop or
    claim takes one of them, whichever it is). With them: those a limited claim looks at (its
    first ``keylimits.CANDIDATES``) whose key holds fewer than ``limit`` live leases; the queues
    with key limits here have no ``max_attempts``, so a lease that ran out is visible too.
    """
    live: dict[str | None, int] = {}
    due: list[tuple[str, str | None]] = []
    shows = math.inf
    for entry in _pages(lambda cursor: service.scheduled(tr, queue, cursor=cursor, limit=_PAGE)):
        key = _key(history, entry.item.value)
        if entry.visible_at > wall:
            shows = min(shows, entry.visible_at.timestamp())
            if entry.state == "leased":
                live[key] = live.get(key, 0) + 1
        elif limit is not None or entry.state == "delayed":  # a spent lease may be a dead letter
            due.append((entry.item.id, key))
    ready = [
        (item.id, _key(history, item.value))
        for item in _pages(lambda c: service.browse(tr, queue, cursor=c, limit=_PAGE))
    ]
    if limit is None:
        return [item_id for item_id, _key_ in due + ready], shows
    looked_at = _candidates(due, ready, keylimits.CANDIDATES)
    return [item_id for item_id, key in looked_at if key is None or live.get(key, 0) < limit], shows


def _candidates(due: list[Any], ready: list[Any], window: int) -> list[Any]:
    """The items a claim surely looks at: all, when they fit its window; else the ready items
    that stay within it wherever the due ones (moved in by the claim) land."""
    if len(due) + len(ready) <= window:
        return due + ready
    return ready[: max(0, window - len(due))]


def _key(history: History, value: Any) -> str | None:
    push = history.pushes.get(value) if isinstance(value, str) else None
    return None if push is None else push.key


def _pages(page: Any) -> Iterator[Any]:
    cursor = None
    while True:
        got = page(cursor)
        yield from got.items
        cursor = got.next_cursor
        if cursor is None:
            return
