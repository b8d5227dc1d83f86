"""One watch per queue for all the async waiters of an event loop, and who of them to wake.

A process may have far more waiting coroutines than a database allows watches, so the waiters of
one queue park in a :class:`Channel`, and one keeper task per channel looks at the queue for all
of them (``waiting.look``) and follows the waiting rule (``waiting.next_turn``). It wakes as many
as there may be items, in arrival order, and waits for the look's watches without a thread.

How the keeper makes sure no waiter sleeps past a change it should see: the docs' data model
page, "The wake-up key" (docs/explanation/data-model.md).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import weakref
from typing import Any, cast

from . import offload
from .waiting import WATCH_FAILURE_PAUSE, Blocked, Outlook, look, next_turn

#: Most visible items one look counts: it wakes at most this many waiters at once.
WAKE_BATCH = 1000

_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], Channel]]" = (
    weakref.WeakKeyDictionary()
)


class Channel:
    """The async waiters of one queue on one event loop, and the keeper of their shared watch."""

    def __init__(self, loop: asyncio.AbstractEventLoop, db: Any, name: str) -> None:
        self.loop = loop
        self.db = db
        self.name = name
        #: Parked waiters in arrival order, each with what its last attempt found: nothing
        #: (None), or only items at their key's limit (``Blocked``).
        self.parked: collections.OrderedDict[asyncio.Future[Any], Blocked | None] = collections.OrderedDict()
        self.outstanding = 0  # woken, still attempting
        self.handed: set[bytes] = set()  # the hints of the waiters still attempting
        #: Hints whose waiters are done, while looks still see their items: a look that read
        #: before such a claim committed would hand its item out again.
        self.spent: set[bytes] = set()
        self.short = False  # the last look saw more than it handed out
        self.checking = False
        self.checked_at = float("-inf")  # loop time when the last look's answer arrived
        self.checks = 0  # how many looks (each one a transaction and its watches) were made
        self.watches: Any = None  # the look's watches armed now, if any
        self.keeper: asyncio.Task[Any] | None = None
        self._stir = asyncio.Event()
        self._waits = 0  # numbers the keeper's waits, so a late callback of an old watch is ignored

    async def park(self, deadline: float, seen_at: float, blocked: Blocked | None = None) -> bytes | None:
        """Wait for a turn: its hint (the key of a ready item no other woken waiter was handed,
        or b"" when the look saw too few), or None once ``deadline`` (loop time) passed.

        ``seen_at`` is the loop time at which this waiter's own attempt began; ``blocked`` what
        it returned, if its items were all at their key's limit.
        """
        if deadline <= self.loop.time():
            return None
        fut = self.loop.create_future()
        self.parked[fut] = blocked
        if self.checking or seen_at < self.checked_at:
            self._stir.set()  # a look on now, or the last one, may not have counted this waiter
        if self.keeper is None:
            self.keeper = self.loop.create_task(self._keep())
        timer = self.loop.call_at(deadline, self._expire, fut)
        try:
            return cast("bytes | None", await fut)
        except asyncio.CancelledError:
            if woken(fut):
                self.attempted(None, hint=fut.result())  # woken, but it will not use its turn: pass it on
            else:
                self._leave(fut)
            raise
        finally:
            timer.cancel()

    def attempted(self, got: bool | None, comes_back_in: float | None = None, hint: bytes = b"") -> None:
        """A woken waiter's attempt ended: with an item (True), nothing (False), or given up (None).

        Any outcome but a success that leaves nothing behind makes the keeper look again: a
        waiter that found nothing, or gave up, leaves what the look counted to the others. A
        claim's item comes back when its lease ends (``comes_back_in`` seconds) unless acked,
        and no look has seen that moment: the keeper looks again then. ``hint`` is the one the
        waiter was woken with: free for the next waiters again.
        """
        if hint:
            self.handed.discard(hint)
            self.spent.add(hint)
        self.outstanding -= 1
        if not got or self.short:
            self._stir.set()
        elif comes_back_in is not None and self.parked:
            self.loop.call_later(comes_back_in, self._stir.set)
        self._drop_if_idle()

    def _expire(self, fut: asyncio.Future[Any]) -> None:
        if fut in self.parked and not fut.done():
            fut.set_result(None)
            self._leave(fut)

    def _leave(self, fut: asyncio.Future[Any]) -> None:
        self.parked.pop(fut, None)
        if not self.parked:
            self._stir.set()  # the keeper lets the watch go
        self._drop_if_idle()

    def _wake(self, fut: asyncio.Future[Any], hints: list[bytes]) -> bool:
        """Give ``fut`` its turn, with the first of ``hints`` (used up), if any."""
        del self.parked[fut]
        if fut.done():  # a cancelled waiter's future, before its task leaves
            return False
        hint = hints.pop(0) if hints else b""
        if hint:
            self.handed.add(hint)
        fut.set_result(hint)
        self.outstanding += 1
        return True

    def _fail(self, error: BaseException) -> None:
        parked, self.parked = self.parked, collections.OrderedDict()
        for fut in parked:
            if not fut.done():
                fut.set_exception(error)

    def _limit(self) -> int:
        """How many visible items a look counts: one more than it could hand out."""
        wanting = sum(1 for blocked in self.parked.values() if blocked is None)
        return min(wanting + self.outstanding, WAKE_BATCH) + 1

    async def _keep(self) -> None:
        """Look, hand out, wait for a change; while anyone is parked."""
        try:
            while self.parked:
                self._stir.clear()
                self.checking = True
                try:
                    seen = await offload.run_undoable(
                        functools.partial(look, self.db, self.name, self._limit()),
                        lambda abandoned: abandoned.watches.cancel(),  # the keeper was cancelled
                    )
                except Exception as error:  # noqa: BLE001 - QueueNotFound, or what the waiters must see
                    self._fail(error)
                    return
                finally:
                    self.checking = False
                    self.checked_at = self.loop.time()
                self.checks += 1
                await self._hand_out_and_wait(cast(Outlook, seen))
        finally:
            self.keeper = None
            self._drop_if_idle()

    def _hand_out(self, seen: Outlook) -> float | None:
        """Wake whoever may succeed now (``waiting.next_turn``); seconds until the next turn comes."""
        free = max(0, seen.visible - self.outstanding)
        self.spent.intersection_update(seen.heads)  # gone from this look: later looks read later
        hints = [key for key in seen.heads if key not in self.handed and key not in self.spent]
        woken, soonest = 0, None
        for fut, blocked in list(self.parked.items()):
            turn = next_turn(seen, blocked)
            if turn.now and (blocked is not None or woken < free):
                woken += self._wake(fut, hints if blocked is None else []) and blocked is None
            elif turn.seconds is not None:
                soonest = turn.seconds if soonest is None else min(soonest, turn.seconds)
        # Saw more than it handed out (or as many as it counted: maybe more): some may be gone to
        # earlier waiters, or not; each attempt that ends makes it look again.
        self.short = seen.visible > woken or seen.visible >= seen.limit
        return soonest

    async def _hand_out_and_wait(self, seen: Outlook) -> None:
        soonest = self._hand_out(seen)
        self.watches = seen.watches
        if not self.parked:
            seen.watches.cancel()
            self.watches = None
            return
        waited = self._waits = self._waits + 1
        seen.watches.on_ready(lambda _w: _call_soon(self.loop, lambda: self._fired(waited)))
        timer = None if soonest is None else self.loop.call_later(soonest, self._stir.set)
        try:
            await self._stir.wait()
        finally:
            self._waits += 1  # the cancel below calls the callback too: this wait is over
            if timer is not None:
                timer.cancel()
            failed = seen.watches.is_ready() and seen.watches.failed()
            seen.watches.cancel()
            self.watches = None
        if failed:  # past the transaction timeout, or too many watches: a new one, not a busy loop
            await asyncio.sleep(WATCH_FAILURE_PAUSE)

    def _fired(self, wait: int) -> None:
        """A watch of wait number ``wait`` is ready: stir the keeper if that wait is still on."""
        if wait == self._waits:
            self._stir.set()

    def _drop_if_idle(self) -> None:
        if not self.parked and not self.outstanding and self.keeper is None:
            channels = _hubs.get(self.loop)
            if channels is not None and channels.get((id(self.db), self.name)) is self:
                del channels[(id(self.db), self.name)]


def woken(fut: asyncio.Future[Any]) -> bool:
    """Did a parked waiter's future give it a turn (rather than its deadline, or a failure)?"""
    return fut.done() and not fut.cancelled() and fut.exception() is None and fut.result() is not None


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Any) -> None:
    """From the client's network thread (or the embedded watcher): run ``callback`` on the loop."""
    try:
        loop.call_soon_threadsafe(callback)
    except RuntimeError:  # the loop closed meanwhile: nobody waits any more
        pass


def channel(db: Any, name: str) -> Channel:
    """The running loop's channel for ``name`` on ``db`` (made on first use)."""
    loop = asyncio.get_running_loop()
    channels = _hubs.setdefault(loop, {})
    found = channels.get((id(db), name))
    if found is None:
        found = channels[(id(db), name)] = Channel(loop, db, name)
    return found


def channels(loop: asyncio.AbstractEventLoop | None = None) -> list[Channel]:
    """The channels of ``loop`` (the running one by default): for tests and the waiters script."""
    return list(_hubs.get(loop or asyncio.get_running_loop(), {}).values())
