"""A second deadline on the ``foundationdb`` engine's blocking waits, kept by the waiting thread.

TIMEOUT is kept by the client library's network thread, which covers a slow, recovering or
absent cluster but not a library that stops setting a future: a consumer blocked that way would
never consume again. So inside an operation of the service on a database the engine opened
(``fdbapi.bounded_waits``), a wait on a future that outlasts :func:`bound_for` (TIMEOUT plus a
grace as long, at least :data:`GRACE_FLOOR` seconds) cancels the future, raises 1031 as
FoundationDB itself would, and logs the process's stacks at most once a minute.

What was seen, which waits are left alone, and how it is tested: the docs' reliability page,
"Faults on a real cluster" (docs/explanation/reliability.md).
"""

from __future__ import annotations

import _thread
import logging
import sys
import threading
import time
import traceback
from typing import Any

from django_fdbqueue.fdbapi import ErrorCode, FDBError, wait_bound

logger = logging.getLogger("django_fdbqueue.engine")

#: The least grace past TIMEOUT before a wait counts as stuck: FoundationDB measures its timeout
#: from the transaction's start, this bound from the wait's, so the grace only has to cover
#: scheduling on a loaded machine.
GRACE_FLOOR = 5.0
#: At most one report (with stacks) per this many seconds.
REPORT_EVERY = 60.0

_install_lock = threading.Lock()
_last_report = 0.0


def bound_for(timeout: float | None) -> float | None:
    """How long one blocking wait may last under TIMEOUT ``timeout`` (None: no bound)."""
    if timeout is None:
        return None
    return timeout + max(timeout, GRACE_FLOOR)


def install(impl: Any) -> None:
    """Make the binding's futures (``impl``: ``fdb.impl``) keep the thread's bound; once a process."""
    with _install_lock:
        future = impl.Future
        if getattr(future, "_fdbqueue_bounded", False):
            return
        unbounded_wait = future.block_until_ready
        plain_watch = impl.Transaction.watch

        def block_until_ready(self: Any) -> None:
            seconds = wait_bound()
            if seconds is None or getattr(self, "_fdbqueue_watch", False) or self.is_ready():
                unbounded_wait(self)
                return
            _wait_or_give_up(self, seconds)

        def watch(self: Any, key: Any) -> Any:
            watched = plain_watch(self, key)
            watched._fdbqueue_watch = True
            return watched

        future.block_until_ready = block_until_ready
        impl.Transaction.watch = watch
        future._fdbqueue_bounded = True


def _wait_or_give_up(future: Any, seconds: float) -> None:
    ready = _thread.allocate_lock()  # the cheapest primitive to hand over: released when ready
    ready.acquire()
    future.on_ready(lambda _future: ready.release())
    if ready.acquire(timeout=seconds):
        return
    future.cancel()
    _report(seconds)
    raise FDBError(ErrorCode.TRANSACTION_TIMED_OUT)


def _report(seconds: float) -> None:
    """Log that the client library did not end a wait, with every thread's stack (rate-limited)."""
    global _last_report
    now = time.monotonic()
    if _last_report and now - _last_report < REPORT_EVERY:
        return
    _last_report = now
    stacks = "\n".join(
        f"Thread {ident}:\n{''.join(traceback.format_stack(frame))}" for ident, frame in sys._current_frames().items()
    )
    logger.error(
        "A FoundationDB future was not ready %.1f s into a wait, past TIMEOUT and its grace: the "
        "client library did not time the transaction out, so the wait was given up (error 1031). "
        "Stacks of this process:\n%s",
        seconds,
        stacks,
    )
