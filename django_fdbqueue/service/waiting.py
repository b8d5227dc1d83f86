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
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django_fdbqueue.fdbapi import FDBError, _count_retry

from . import visibility
from .catalog import first, require
from .records import now_micros

#: After a watch that failed at once (not a timeout), wait this long before setting another,
#: so a failing watch cannot turn into a busy loop.
WATCH_FAILURE_PAUSE = 0.05


def wait_on(watch: Any, seconds: float) -> bool:
    """Block until the watch fires or `seconds` pass, then let the watch go; True if it fired."""
    fired = threading.Event()
    watch.on_ready(lambda _future: fired.set())
    try:
        return fired.wait(max(0.0, seconds))
    finally:
        if not watch.is_ready():
            watch.cancel()


def _watch_failed(watch: Any) -> bool:
    try:
        watch.wait()
    except FDBError:
        return True
    return False


def until_visible(db: Any, name: str, end: str, deadline: float) -> bool:
    """Wait until ``name`` may have a visible item (True) or ``deadline`` passes (False).

    ``deadline`` is on ``time.monotonic()``'s clock. True means "try again now": another client
    may still take the item first.
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
            watch = tr.watch(qk.wake_key)
            now_us = now_micros()
            if first(ready) is not None or (next_us is not None and next_us <= now_us):
                watch.cancel()
                return True
            tr.commit().wait()  # read-only: it cannot conflict; it starts the watch
        except FDBError as error:
            _count_retry(error.code)
            tr.on_error(error).wait()
            continue
        seconds = left if next_us is None else min(left, (next_us - now_us) / 1_000_000)
        if wait_on(watch, seconds) and _watch_failed(watch):
            # A watch past the transaction timeout ends with an error: set a new one. One that
            # failed at once must not make this loop spin.
            threading.Event().wait(min(WATCH_FAILURE_PAUSE, max(0.0, deadline - time.monotonic())))
