"""The per-process budget of long polls: how many REST requests may wait for an item at once.

Under a WSGI server every waiting pop or claim holds a server thread for up to 20 s; with more
waiters than threads, pushes and reads queue behind them and the API stops. The view asks the
budget before it waits (``try_enter``, which never blocks) and gives its place back when the
wait ends (``leave``, in a ``finally``); a request that finds the budget spent does not wait. A
server that waits without holding a thread (ASGI) simply does not ask.

The limit is ``FDBQUEUE["WAIT_BUDGET"]``, read at each entry so a changed setting applies at
once; ``None`` is no limit. The count is per process, as the threads it protects are.
"""

from __future__ import annotations

import threading
from typing import Callable

from django_fdbqueue.conf import get_settings

#: Seconds a client told to come back (a 204 with ``Retry-After``) waits: long enough that the
#: refused clients cost a few requests per second, short enough that one soon waits again.
RETRY_AFTER_SECONDS = 1


class WaitBudget:
    """A counting semaphore taken without blocking, whose size ``limit()`` gives at each entry."""

    def __init__(self, limit: Callable[[], int | None]) -> None:
        self._limit = limit
        self._lock = threading.Lock()
        self._active = 0

    @property
    def active(self) -> int:
        """The waits in progress now (tests poll it to know the waiters are parked)."""
        return self._active

    def try_enter(self) -> bool:
        """Take a place if one is free and say so; never waits. Every True needs one ``leave()``."""
        limit = self._limit()
        with self._lock:
            if limit is not None and self._active >= limit:
                return False
            self._active += 1
            return True

    def leave(self) -> None:
        """Give back the place a successful ``try_enter()`` took."""
        with self._lock:
            if self._active <= 0:
                raise RuntimeError("WaitBudget.leave() without a place taken by try_enter()")
            self._active -= 1


def _configured_limit() -> int | None:
    return get_settings().wait_budget


#: The process's one budget, shared by every thread of a WSGI server process.
budget = WaitBudget(_configured_limit)
