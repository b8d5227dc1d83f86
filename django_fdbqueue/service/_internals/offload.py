"""The bounded thread pool that runs the async face's transactions, and the undo of abandoned ones.

A transaction is a few blocking calls into the client (or into SQLite), so an ``async`` operation
runs its sync twin on this pool: one small, bounded set of threads per process, however many
coroutines await. (``scripts/async-ops.py`` measured it against asgiref's ``sync_to_async``; see
docs/explanation/code-map.md.) Waiting for an item is not done here: see ``awaiting``.

A coroutine cancelled while its transaction runs cannot stop the commit. For a pop or a claim
that would take an item from everyone and give it to no one, so :func:`run_undoable` hands
what such a commit returned to an ``undo`` (put the item back, release the lease), tried again
until it succeeds or :data:`UNDO_TRIES` are spent. Undos run on threads of their own, and wait
between tries on a timer, holding no thread: in an outage, failing undos must not take the
pool from the operations (every one of which would then stall behind them).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import threading
from typing import Any, Callable, TypeVar

from . import runtime

T = TypeVar("T")
logger = logging.getLogger("django_fdbqueue.service")

#: Threads of the pool (``runtime.pool``). A transaction mostly waits on the network (or on
#: SQLite's lock), so a few more than the cores keep the cluster busy; more would only queue.
POOL_THREADS = runtime.POOL_THREADS
#: Attempts of an undo (each one a retried transaction) before it is given up and logged.
UNDO_TRIES = 20
#: Pause between two failed attempts of an undo, doubled each time up to :data:`UNDO_PAUSE_MAX`.
UNDO_PAUSE = 0.05
UNDO_PAUSE_MAX = 2.0

_lock = threading.Lock()
#: Abandoned results not yet undone (or found to need nothing), for :func:`undos_settled`.
_pending = 0
_settled = threading.Condition(_lock)


async def run(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` on the pool; a cancelled caller abandons what it returns."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(runtime.pool(), functools.partial(func, *args, **kwargs))


async def run_undoable(func: Callable[[], T | None], undo: Callable[[T], None]) -> T | None:
    """``func()`` on the pool; if the caller is cancelled once it started, ``undo`` its result.

    Not started yet: it never runs. Running or done: whatever it returns (None is nothing to
    undo) goes to :func:`undo_later`, since no one will receive it.
    """
    job = runtime.pool().submit(func)
    waited = asyncio.wrap_future(job)
    try:
        return await asyncio.shield(waited)
    except asyncio.CancelledError:
        waited.add_done_callback(_retrieved)  # its error goes to the undo's log, not asyncio's
        if not job.cancel():
            _count(1)
            job.add_done_callback(lambda done: _abandoned(done, undo))
        raise


def _retrieved(waited: asyncio.Future[Any]) -> None:
    if not waited.cancelled():
        waited.exception()


def _abandoned(job: concurrent.futures.Future[Any], undo: Callable[[Any], None]) -> None:
    result = None if job.exception() is not None else job.result()
    if result is None:  # nothing was taken (or the caller would have had an error, not an item)
        _count(-1)
        return
    runtime.undo_pool().submit(_undo, undo, result, 1, UNDO_PAUSE)


def undo_later(undo: Callable[[T], None], result: T) -> None:
    """Run ``undo(result)`` on the undo threads, again after each failure, until done or given up."""
    _count(1)
    runtime.undo_pool().submit(_undo, undo, result, 1, UNDO_PAUSE)


def _count(change: int) -> None:
    global _pending
    with _settled:
        _pending += change
        if not _pending:
            _settled.notify_all()


def _undo(undo: Callable[[T], None], result: T, attempt: int, pause: float) -> None:
    """One try of ``undo(result)``; after a failure, the next one on a timer (no thread waits)."""
    try:
        undo(result)
    except Exception:  # noqa: BLE001 - tried again: the item must not stay taken
        logger.warning("Undo of an abandoned %r failed (attempt %d)", result, attempt, exc_info=True)
        if attempt < UNDO_TRIES:
            longer = min(pause * 2, UNDO_PAUSE_MAX)
            runtime.later(pause, lambda: runtime.undo_pool().submit(_undo, undo, result, attempt + 1, longer))
            return
        logger.error("Gave up undoing an abandoned %r after %d attempts", result, UNDO_TRIES)
    _count(-1)


def pending_undos() -> int:
    """Abandoned results not yet undone (or found to need nothing) in this process."""
    with _settled:
        return _pending


def forget_undos(count: int) -> None:
    """Set the count of undos still owed to ``count`` (a simulation whose undo actors it stopped)."""
    global _pending
    with _settled:
        _pending = count


def undos_settled(timeout: float) -> bool:
    """Wait (at most ``timeout`` seconds) until every abandoned result is undone; True if so."""
    with _settled:
        return _settled.wait_for(lambda: not _pending, timeout=timeout)
