"""Burst mode: process what is ready, then end (``manage.py fdbqueue worker --burst``).

A burst is over when, since the last item was settled anywhere in it, every slot (every claiming
thread, of every queue's worker in it) found nothing ready, and no slot holds an item. Items
delayed into the future are not waited for. The last settled item may have pushed more work, so
every slot looks again after each one; and a slot counts as busy from the start of its claim
until it finds nothing, so an item being claimed is never overlooked.

One ``Burst`` can span several workers (``worker --tasks``: one per task queue), so a task that
enqueues another on a different queue still sees it run before the command exits.
"""

from __future__ import annotations

import threading

__all__ = ["Burst"]


class Burst:
    """Tells the slots taking part when the burst is over (see the module docstring)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._settled = 0  # items settled so far: a new count means everyone looks again
        self._idle: list[int | None] = []  # per slot: the count at its last empty claim, or None
        self._over = threading.Event()

    @property
    def over(self) -> bool:
        return self._over.is_set()

    def join(self) -> int:
        """A new slot, busy until its first empty claim; returns its number.

        All slots must join before any starts claiming, or the burst may end without them.
        """
        with self._cond:
            self._idle.append(None)
            return len(self._idle) - 1

    def claiming(self, slot: int) -> int:
        """The slot starts a claim: busy. Returns the count the claim's answer will be about."""
        with self._cond:
            self._idle[slot] = None
            return self._settled

    def found_nothing(self, slot: int, seen: int, pause: float) -> None:
        """The slot's claim found nothing ready: end the burst if everyone agrees, else wait for news.

        Waits at most ``pause`` seconds, so the slot still notices a stop() in time.
        """
        with self._cond:
            self._idle[slot] = seen
            if all(mark == self._settled for mark in self._idle):
                self._over.set()
                self._cond.notify_all()
                return
            if seen == self._settled:
                self._cond.wait_for(lambda: self._settled != seen or self._over.is_set(), pause)

    def settled(self) -> None:
        """A slot is done with an item (acked, released or lost): every slot looks again."""
        with self._cond:
            self._settled += 1
            self._cond.notify_all()
