"""Blocking pops and claims: wait for an item through a watch, never by polling the queue.

A waiter looks at the queue in a read-only transaction (:func:`look`): what is visible, when the
next hidden item shows, the wake-up key's value, and, in the same snapshot, watches on the
wake-up key and the catalog entry, so a change that commits after the look fires a watch. One
rule (:func:`next_turn`) says from a look when a waiter may next succeed; the sync wait
(:func:`until_visible`) and the async keeper (``watchhub``) both follow it. A claim that found
every candidate's key at its limit is :class:`Blocked`.

Why the watches are set apart from the transaction that takes the item, and what wakes whom: the
docs' data model page, "The wake-up key" (docs/explanation/data-model.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import ErrorCode, FDBError, count_retry, bounded, is_transaction

from . import checks, keys, runtime
from .catalog import require
from ..records import now_micros

#: Longest a pop or claim may block with ``wait=``, in every face (Python, REST, CLI, worker).
#: A wait holds what it runs in for its whole length: over HTTP a server worker, and the read
#: timeout of every proxy on the way (often 30 or 60 s), so 20 s stays under them. A longer
#: wait is a loop of these, which costs one read and one watch per 20 s. Longer is refused,
#: never silently cut.
MAX_WAIT_SECONDS = 20.0
T = TypeVar("T")

#: After a watch that failed at once (not a timeout), wait this long before setting another,
#: so a failing watch cannot turn into a busy loop.
WATCH_FAILURE_PAUSE = 0.05
#: Pause before a waiting pop or claim tries again after its attempt timed out (1031).
TIMED_OUT_PAUSE = 0.1


def try_again_after(error: BaseException, left: float) -> bool:
    """Should a wait with ``left`` seconds to go try again after its attempt raised ``error``?

    An attempt is one transaction, bounded by TIMEOUT; a wait is up to 20 s of them. A store too
    busy to commit within TIMEOUT (the embedded engine's write lock, which the threads of several
    processes take in turn) times an attempt out with 1031 with most of the wait still ahead: the
    waiter goes on waiting, after :data:`TIMED_OUT_PAUSE`, rather than answering the error (a REST
    long poll: 503). A 1031 may leave a commit in doubt on a cluster: a claim that did commit
    leaves a lease that ends by itself (as after 1021); a pop that did is lost to the caller, as it
    is when the error is raised.
    """
    return getattr(error, "code", None) == ErrorCode.TRANSACTION_TIMED_OUT and left > TIMED_OUT_PAUSE


@dataclass(frozen=True)
class Blocked:
    """A claim found visible items, but every candidate's key is at its limit for now.

    ``wake`` is the wake-up key's value in the claim's own snapshot: any change after it (a slot
    given back, a push) is a new chance. ``retry_us`` is when the next rate token comes, if any.
    ``seen_us`` is the claim's clock: a hidden item that shows after it (a lease running out frees
    its key's slot) is a new chance too, though the wake-up key did not change.
    """

    qk: keys.QueueKeys
    wake: bytes | None
    retry_us: int | None = None
    seen_us: int | None = None


@dataclass(frozen=True)
class Outlook:
    """What one look at a queue saw in one snapshot, and the watches that catch any change after it."""

    visible: int  # visible items, counted up to the look's limit
    limit: int
    next_us: int | None  # when the next hidden item that is not due yet becomes visible
    now_us: int
    wake: bytes | None  # the wake-up key's value
    watches: "AnyOf"
    shown_us: int | None = None  # when the latest hidden item that is due now became visible
    heads: tuple[bytes, ...] = ()  # the keys of the ready items counted, from the min end


@dataclass(frozen=True)
class Turn:
    """When a waiter may succeed: ``now``; and, failing that, in ``seconds`` (None: on a change)."""

    now: bool
    seconds: float | None = None


def next_turn(seen: Outlook, blocked: Blocked | None = None) -> Turn:
    """The waiting rule: from a look, when may a waiter (that found nothing, or was blocked) succeed?

    ``seconds`` is the next chance after the visible items are gone to others (a hidden item
    showing, a rate token): a waiter not woken now waits for it, or for a change.
    """
    if blocked is None:
        return Turn(seen.visible > 0, _seconds(seen, seen.next_us))
    changed = seen.wake != blocked.wake
    shown = seen.shown_us is not None and blocked.seen_us is not None and seen.shown_us > blocked.seen_us
    token_due = blocked.retry_us is not None and blocked.retry_us <= seen.now_us
    times = [us for us in (seen.next_us, blocked.retry_us) if us is not None and us > seen.now_us]
    return Turn(changed or shown or token_due, _seconds(seen, min(times)) if times else None)


def _seconds(seen: Outlook, at_us: int | None) -> float | None:
    return None if at_us is None else max(0.0, (at_us - seen.now_us) / 1_000_000)


@bounded
def look(db: Any, name: str, limit: int, *, end: str = "min") -> Outlook:
    """Count the visible items of ``name`` (up to ``limit``) and watch for the next change.

    The caller owns the returned watches: it must cancel them (each counts against the
    database's limit). Raises ``QueueNotFound`` once the queue is deleted.
    """
    while True:
        tr = db.create_transaction()
        try:
            _entry, qk = require(tr, name, fifo_ok=end == "min")
            now_us = now_micros()
            r, h = qk.items.range(), qk.hidden.range()
            after_now = qk.hidden.pack((now_us + 1,))
            ready = tr.snapshot.get_range(r.start, r.stop, limit=limit)
            due = tr.snapshot.get_range(h.start, after_now, limit=limit)
            later = tr.snapshot.get_range(after_now, h.stop, limit=1)  # not the earliest: it may be due
            wake = tr.snapshot[qk.wake_key]
            watches = AnyOf(tr.watch(qk.wake_key), tr.watch(keys.catalog_key(qk.root, name)))
            heads = tuple(bytes(kv.key) for kv in ready)
            visible = min(limit, len(heads) + len(list(due)))
            last_due = tr.snapshot.get_range(h.start, after_now, limit=1, reverse=True)
            next_us = next((qk.hidden.unpack(bytes(kv.key))[0] for kv in later), None)
            shown_us = next((qk.hidden.unpack(bytes(kv.key))[0] for kv in last_due), None)
            wake_value = bytes(wake) if wake.present() else None
            seen = Outlook(visible, limit, next_us, now_us, wake_value, watches, shown_us, heads)
            tr.commit().wait()  # read-only: it cannot conflict; it starts the watches
        except FDBError as error:
            count_retry(error.code)
            tr.on_error(error).wait()
            continue
        return seen


def blocking(db_or_tr: Any, name: str, end: str, wait: object, attempt: Callable[[], T | Blocked | None]) -> T | None:
    """Run ``attempt`` until it returns something or ``wait`` seconds pass (see above).

    ``wait`` None runs it once. A wait spans several transactions, so it needs the database.
    """
    if wait is None:
        got = attempt()
        return None if isinstance(got, Blocked) else got
    seconds = checks.check_seconds(wait, "wait", minimum=0, maximum=MAX_WAIT_SECONDS)
    if is_transaction(db_or_tr):
        raise InvalidArgument(
            "wait= blocks across several transactions, so it needs the database, not an open transaction."
        )
    deadline = time.monotonic() + seconds
    while True:
        try:
            got = attempt()
        except FDBError as error:
            if not try_again_after(error, deadline - time.monotonic()):
                raise
            runtime.pause(TIMED_OUT_PAUSE)
            continue
        blocked = got if isinstance(got, Blocked) else None
        if got is not None and blocked is None:
            return got  # type: ignore[return-value]  # not Blocked: a T
        if not until_visible(db_or_tr, name, end, deadline, blocked):
            return None


class AnyOf:
    """Several watches seen as one, for ``runtime.wait_on``: ready as soon as any of them is."""

    def __init__(self, *watches: Any) -> None:
        self.watches = watches

    def on_ready(self, callback: Any) -> None:
        for watch in self.watches:
            watch.on_ready(lambda _watch: callback(self))

    def is_ready(self) -> bool:
        return any(watch.is_ready() for watch in self.watches)

    def failed(self) -> bool:
        """Did a watch that is ready end with an error rather than a change?"""
        return any(watch.is_ready() and _watch_failed(watch) for watch in self.watches)

    def cancel(self) -> None:
        """Let go of the watches still waiting (each one counts against the database's limit)."""
        for watch in self.watches:
            if not watch.is_ready():
                watch.cancel()


def _watch_failed(watch: Any) -> bool:
    try:
        watch.wait()
    except FDBError:
        return True
    return False


def until_visible(db: Any, name: str, end: str, deadline: float, blocked: Blocked | None = None) -> bool:
    """Wait until this waiter may succeed (True: try again now) or ``deadline`` passes (False).

    ``deadline`` is on ``time.monotonic()``'s clock; ``blocked`` is what a claim that found only
    items at their key's limit returned. True means "try again now": another client may still
    take the item first. Raises ``QueueNotFound`` once the queue is deleted.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        seen = look(db, name, 1, end=end)
        turn = next_turn(seen, blocked)
        if turn.now:
            seen.watches.cancel()
            return True
        fired = runtime.wait_on(seen.watches, left if turn.seconds is None else min(left, turn.seconds))
        failed = fired and seen.watches.failed()
        seen.watches.cancel()
        if not failed:
            return time.monotonic() < deadline  # a change or the time it named: try again
        # A watch past the transaction timeout ends with an error: set a new one. One that
        # failed at once must not make this loop spin.
        runtime.pause(min(WATCH_FAILURE_PAUSE, deadline - time.monotonic()))
