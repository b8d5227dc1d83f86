"""One watch per queue for all the async waiters of an event loop, and who of them to wake.

The binding allows 10,000 watches per database by default, and a process may have far more
waiting coroutines than that. So the waiters of one queue park in a :class:`Channel`, and one
keeper task per channel does what ``waiting.until_visible`` does for one thread: a read-only
transaction (on the pool) counts the visible items (the first ready keys and the due hidden
ones, up to a limit) and, in the same snapshot, watches the wake key and the catalog entry.
Then it wakes as many parked waiters as there may be items, in arrival order; the rest stay
parked until the next change (no thundering herd). The keeper then waits for the watch, the
earliest hidden item's time, or a nudge, without a thread: the watch's ``on_ready`` callback
(the client's network thread, or the embedded engine's watcher) hands over to the loop with
``call_soon_threadsafe``.

No waiter sleeps past a change it should see. A check's watch catches every change after the
check's snapshot, and the check hands out what it saw to those parked by then. A waiter whose
own look started before the last check ended, and that parks after it, may have missed items
that check saw: it nudges the keeper, which looks again. Woken waiters still attempting are
subtracted from what a check hands out; when a check saw more than it handed out, each success
nudges it to look again, and so does a woken waiter that gives up (cancelled, or an error),
since it leaves its item to the others. A deleted queue wakes everyone with ``QueueNotFound``.
"""

from __future__ import annotations

import asyncio
import collections
import weakref
from dataclasses import dataclass
from typing import Any, cast

from django_fdbqueue.fdbapi import FDBError, _count_retry, bounded

from . import keys, offload
from .catalog import require
from .records import now_micros
from .waiting import WATCH_FAILURE_PAUSE, AnyOf

#: Most ready keys one check reads: it wakes at most this many waiters at once.
WAKE_BATCH = 1000

_hubs: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[int, str], Channel]]" = (
    weakref.WeakKeyDictionary()
)


@dataclass
class Look:
    """What one check saw: visible items (up to its limit), the next hidden one's time, the watches."""

    visible: int
    limit: int
    next_us: int | None
    now_us: int
    watches: AnyOf


@bounded
def look(db: Any, name: str, limit: int) -> Look:
    """Count the visible items of ``name`` (up to ``limit``) and watch for the next change."""
    while True:
        tr = db.create_transaction()
        try:
            _entry, qk = require(tr, name)
            now_us = now_micros()
            r, h = qk.items.range(), qk.hidden.range()
            ready = tr.snapshot.get_range(r.start, r.stop, limit=limit)
            due = tr.snapshot.get_range(h.start, qk.hidden.pack((now_us + 1,)), limit=limit)
            later = tr.snapshot.get_range(h.start, h.stop, limit=1)
            watches = AnyOf(tr.watch(qk.wake_key), tr.watch(keys.catalog_key(qk.root, name)))
            visible = min(limit, len(list(ready)) + len(list(due)))
            next_us = next((qk.hidden.unpack(bytes(kv.key))[0] for kv in later), None)
            tr.commit().wait()  # read-only: it cannot conflict; it starts the watches
        except FDBError as error:
            _count_retry(error.code)
            tr.on_error(error).wait()
            continue
        return Look(visible, limit, next_us, now_us, watches)


class Channel:
    """The async waiters of one queue on one event loop, and the keeper of their shared watch."""

    def __init__(self, loop: asyncio.AbstractEventLoop, db: Any, name: str) -> None:
        self.loop = loop
        self.db = db
        self.name = name
        self.parked: collections.OrderedDict[asyncio.Future[Any], None] = collections.OrderedDict()
        self.outstanding = 0  # woken, still attempting
        self.short = False  # the last check saw more than it handed out
        self.checking = False
        self.checked_at = float("-inf")  # loop time when the last check's answer arrived
        self.checks = 0  # how many checks (each one a transaction and its watches) were made
        self.watches: AnyOf | None = None  # armed now, if any
        self.keeper: asyncio.Task[Any] | None = None
        self._stir = asyncio.Event()
        self._waits = 0  # numbers the keeper's waits, so a late callback of an old watch is ignored

    async def park(self, deadline: float, seen_at: float) -> bool:
        """Wait for a turn: True to try again, False once ``deadline`` (loop time) passed.

        ``seen_at`` is the loop time at which this waiter's own look began.
        """
        if deadline <= self.loop.time():
            return False
        fut = self.loop.create_future()
        self.parked[fut] = None
        if not self.checking and seen_at < self.checked_at:
            self._stir.set()  # the last check may have seen, and handed out, items it did not
        if self.keeper is None:
            self.keeper = self.loop.create_task(self._keep())
        timer = self.loop.call_at(deadline, self._expire, fut)
        try:
            return cast(bool, await fut)
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled() and fut.exception() is None and fut.result():
                self.attempted(None)  # woken, but it will not use its turn: pass it on
            else:
                self._leave(fut)
            raise
        finally:
            timer.cancel()

    def attempted(self, got: bool | None) -> None:
        """A woken waiter's attempt ended: with an item (True), nothing (False), or given up (None)."""
        self.outstanding -= 1
        if got is None or (got and self.short):
            self._stir.set()
        self._drop_if_idle()

    def _expire(self, fut: asyncio.Future[Any]) -> None:
        if fut in self.parked and not fut.done():
            fut.set_result(False)
            self._leave(fut)

    def _leave(self, fut: asyncio.Future[Any]) -> None:
        self.parked.pop(fut, None)
        if not self.parked:
            self._stir.set()  # the keeper lets the watch go
        self._drop_if_idle()

    def _wake(self, count: int) -> None:
        while count and self.parked:
            fut, _ = self.parked.popitem(last=False)
            if not fut.done():  # a cancelled waiter's future, before its task leaves
                self.outstanding += 1
                fut.set_result(True)
                count -= 1

    def _fail(self, error: BaseException) -> None:
        parked, self.parked = self.parked, collections.OrderedDict()
        for fut in parked:
            if not fut.done():
                fut.set_exception(error)

    async def _keep(self) -> None:
        """Check, hand out, wait for a change; while anyone is parked."""
        try:
            while self.parked:
                self._stir.clear()
                self.checking = True
                try:
                    seen = await offload.run(
                        look, self.db, self.name, min(len(self.parked) + self.outstanding, WAKE_BATCH)
                    )
                except Exception as error:  # noqa: BLE001 - QueueNotFound, or what the waiters must see
                    self._fail(error)
                    return
                finally:
                    self.checking = False
                    self.checked_at = self.loop.time()
                self.checks += 1
                await self._hand_out_and_wait(seen)
        finally:
            self.keeper = None
            self._drop_if_idle()

    async def _hand_out_and_wait(self, seen: Look) -> None:
        free = max(0, seen.visible - self.outstanding)
        woken = min(len(self.parked), free)
        self._wake(woken)
        # Saw more than it woke now: some may be gone to earlier waiters, or not; look again
        # when any of those still attempting is done.
        self.short = seen.visible > woken
        self.watches = seen.watches
        if not self.parked:
            seen.watches.cancel()
            self.watches = None
            return
        waited = self._waits = self._waits + 1
        seen.watches.on_ready(lambda _w: _call_soon(self.loop, lambda: self._fired(waited)))
        timer = None
        if seen.next_us is not None and seen.next_us > seen.now_us:
            timer = self.loop.call_later((seen.next_us - seen.now_us) / 1_000_000, self._stir.set)
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
