"""Blocking pops and claims: wait for an item through a watch, never by polling the queue.

Every push (and every release or requeue that makes an item visible) adds one to the queue's
wake-up key with an atomic add, which never conflicts. A waiting caller runs a read-only
transaction that checks for a visible item (the first ready key, or a hidden one that is due)
and, in the same transaction, sets a watch on the wake-up key. Because the check and the watch
see the same snapshot, a push that commits after the check changes the key the watch compares
against, so it cannot slip by unnoticed. The caller then sleeps until the watch fires or the
earliest hidden item becomes visible, whichever comes first, and tries again. The watch is set
in its own transaction, apart from the one that takes the item: a watch reads its key, and a
pop that read it would conflict with every push.

The same transaction also watches the queue's catalog entry, which only ``delete_queue`` (and a
change of ``max_attempts``) writes. The wake-up key cannot serve for that: it exists only once
something was pushed, and clearing a key that is absent changes nothing a watch could see. So a
caller waiting on a queue that is deleted wakes as soon as the deletion commits, checks again,
and gets ``QueueNotFound`` instead of sleeping out its wait. (A queue deleted and created again
before the caller looks is a queue of that name: the caller goes on waiting on the new one.)
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, TypeVar

from django_fdbqueue.exceptions import InvalidArgument
from django_fdbqueue.fdbapi import FDBError, _count_retry, bounded, is_transaction

from . import keys, visibility
from .catalog import first, require
from .records import now_micros

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


def blocking(db_or_tr: Any, name: str, end: str, wait: object, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` until it returns something or ``wait`` seconds pass (see above).

    ``wait`` None runs it once. A wait spans several transactions, so it needs the database.
    """
    if wait is None:
        return attempt()
    seconds = keys.check_seconds(wait, "wait", minimum=0, maximum=MAX_WAIT_SECONDS)
    if is_transaction(db_or_tr):
        raise InvalidArgument(
            "wait= blocks across several transactions, so it needs the database, not an open transaction."
        )
    deadline = time.monotonic() + seconds
    while True:
        got = attempt()
        if got is not None or not until_visible(db_or_tr, name, end, deadline):
            return got


def wait_on(watch: Any, seconds: float) -> bool:
    """Block until the watch fires or `seconds` pass, then let the watch go; True if it fired."""
    fired = threading.Event()
    watch.on_ready(lambda _future: fired.set())
    try:
        return fired.wait(max(0.0, seconds))
    finally:
        if not watch.is_ready():
            watch.cancel()


class AnyOf:
    """Several watches seen as one, for :func:`wait_on`: ready as soon as any of them is."""

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


@bounded
def until_visible(db: Any, name: str, end: str, deadline: float) -> bool:
    """Wait until ``name`` may have a visible item (True) or ``deadline`` passes (False).

    ``deadline`` is on ``time.monotonic()``'s clock. True means "try again now": another client
    may still take the item first. Raises ``QueueNotFound`` once the queue is deleted.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        tr = db.create_transaction()
        try:
            _entry, qk = require(tr, name, fifo_ok=end == "min")
            r = qk.items.range()
            ready = tr.get_range(r.start, r.stop, limit=1)
            next_us = visibility.next_visible_us(tr, qk)
            watches = AnyOf(tr.watch(qk.wake_key), tr.watch(keys.catalog_key(qk.root, name)))
            now_us = now_micros()
            if first(ready) is not None or (next_us is not None and next_us <= now_us):
                watches.cancel()
                return True
            tr.commit().wait()  # read-only: it cannot conflict; it starts the watches
        except FDBError as error:
            _count_retry(error.code)
            tr.on_error(error).wait()
            continue
        seconds = left if next_us is None else min(left, (next_us - now_us) / 1_000_000)
        fired = wait_on(watches, seconds)
        failed = fired and watches.failed()
        watches.cancel()
        if failed:
            # A watch past the transaction timeout ends with an error: set a new one. One that
            # failed at once must not make this loop spin.
            threading.Event().wait(min(WATCH_FAILURE_PAUSE, max(0.0, deadline - time.monotonic())))
