"""Liveness as the run goes: no waiter is still asleep a bounded virtual time beside an item it may take.

The history knows every pop or claim with ``wait=`` under way (:class:`~.history.Wait`). At each
step the checker looks at the queues they wait on and notes, item by item, since when each has
been one a waiter may take: on a queue without key limits, the head (any waiter takes it); on a
queue with ``key_concurrency``, every visible item (ready, or hidden and due: a delay passed, a
lease ran out) whose key holds fewer live leases than its limit. An item that stays takeable for
the bound while a wait is under way means the waiter slept through its chance: a lost wake-up.
A waiter woken in time takes it (or another does), and it is no longer takeable.

What a fault slowed is not judged: a wait whose actor, or one of the jobs it started (an event
loop's pool jobs and undos), was stalled by the simulation in that time.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Iterator, Mapping

from django_fdbqueue import service
from django_fdbqueue.fdbapi import transactional

from .history import History, Wait
from .scheduler import Scheduler

#: How long (virtual seconds) an item may stay takeable while a waiter sleeps: half the bound of
#: the check of waits that gave up. A wake-up takes a watch's delay (up to 0.05 s) and a few turns
#: of the actors involved, among all the others (0.12 s at most in the 40 seeds measured).
ASLEEP_SECONDS = 0.5
_PAGE = 500


class Asleep:
    """Checks, step by step, that no waiter sleeps beside an item it may take (see the module)."""

    def __init__(
        self,
        db: Any,
        scheduler: Scheduler,
        history: History,
        key_limits: Mapping[str, int],
        *,
        bound: float = ASLEEP_SECONDS,
    ) -> None:
        self.db = db
        self.scheduler = scheduler
        self.history = history
        self.key_limits = key_limits
        self.bound = bound
        self.since: dict[str, dict[str, float]] = {}  # queue: {item id: takeable since}
        self.judged: set[int] = set()  # waits already reported

    def step(self) -> None:
        waits = dict(self.history.waits)
        queues = {wait.queue for wait in waits.values()}
        for queue in set(self.since) - queues:
            del self.since[queue]
        if not waits:
            return
        now = self.scheduler.clock.now
        for queue in sorted(queues):
            seen = self.since.get(queue, {})
            self.since[queue] = {item: seen.get(item, now) for item in self._takeable(queue, now)}
        for number, wait in waits.items():
            if number not in self.judged:
                self._judge(number, wait, now)

    def _judge(self, number: int, wait: Wait, now: float) -> None:
        takeable = self.since.get(wait.queue)
        if not takeable:
            return
        item, since = min(takeable.items(), key=lambda pair: (pair[1], pair[0]))
        start = max(since, wait.began)
        if now - start < self.bound or self._stalled(wait.actor, start):
            return
        self.judged.add(number)
        self.history.violate(
            "liveness",
            f"{wait.what}: asleep from {start:.3f} to {now:.3f} while {item} of {wait.queue!r} could be taken",
        )

    def _stalled(self, actor: str, since: float) -> bool:
        """Was ``actor``, or a job it started, stalled by a fault after ``since``?"""
        stalled = self.scheduler.stalled_until
        return any(stalled.get(a.name, 0.0) > since for a in self.scheduler.actors if actor in (a.name, a.owner))

    def _takeable(self, queue: str, now: float) -> Iterator[str]:
        limit = self.key_limits.get(queue)
        if limit is None:
            head = service.peek(self.db, queue)
            if head is not None:
                yield head.id
            return
        wall = dt.datetime.fromtimestamp(self.scheduler.clock.wall(), dt.timezone.utc)
        yield from takeable_under_limits(self.db, self.history, queue, limit, wall)


@transactional
def takeable_under_limits(tr: Any, history: History, queue: str, limit: int, wall: dt.datetime) -> list[str]:
    """Ids of the visible items of ``queue`` whose key holds fewer than ``limit`` live leases at
    ``wall``, in one snapshot. (The queues with key limits here have no ``max_attempts``: a lease
    that ran out is visible.)"""
    live: dict[str | None, int] = {}
    visible: list[tuple[str, str | None]] = []
    for entry in _pages(lambda cursor: service.scheduled(tr, queue, cursor=cursor, limit=_PAGE)):
        key = _key(history, entry.item.value)
        if entry.visible_at > wall:
            if entry.state == "leased":
                live[key] = live.get(key, 0) + 1
        else:
            visible.append((entry.item.id, key))
    for item in _pages(lambda cursor: service.browse(tr, queue, cursor=cursor, limit=_PAGE)):
        visible.append((item.id, _key(history, item.value)))
    return [item_id for item_id, key in visible if key is None or live.get(key, 0) < limit]


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
