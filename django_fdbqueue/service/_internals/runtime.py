"""Where the service meets the world: waits on watches, pauses, thread pools, timers, random picks.

The service looks each of these up here when it needs one, so they are in one place: a
deterministic simulation (``testing.simulation``) replaces them all here, and nothing else of
the service needs to know it runs in one.
"""

from __future__ import annotations

import concurrent.futures
import random
import threading
from typing import Any, Callable

#: Threads of the async operations' pool (each holds one transaction at a time).
POOL_THREADS = 16
#: Threads that run the undos of abandoned async results, apart from the pool.
UNDO_THREADS = 2

#: A spread claim's pick among the first ready items.
PICK = random.Random()
#: Where a turn over the tenants starts.
SHUFFLE = random.Random()

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_undo_pool: concurrent.futures.ThreadPoolExecutor | None = None
_lock = threading.Lock()


def wait_on(watch: Any, seconds: float) -> bool:
    """Block until the watch fires or ``seconds`` pass, then let the watch go; True if it fired."""
    fired = threading.Event()
    watch.on_ready(lambda _future: fired.set())
    try:
        return fired.wait(max(0.0, seconds))
    finally:
        if not watch.is_ready():
            watch.cancel()


def pause(seconds: float) -> None:
    """Sleep ``seconds`` (between two tries of a wait)."""
    threading.Event().wait(max(0.0, seconds))


def later(seconds: float, job: Callable[[], Any]) -> None:
    """Run ``job`` on a timer's thread in ``seconds``."""
    timer = threading.Timer(seconds, job)
    timer.daemon = True
    timer.start()


def pool() -> concurrent.futures.ThreadPoolExecutor:
    """The process's pool of the async operations, made on first use."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="fdbqueue-async")
        return _pool


def undo_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The threads of the undos, made on first use (apart, so undos never wait behind the pool)."""
    global _undo_pool
    with _lock:
        if _undo_pool is None:
            _undo_pool = concurrent.futures.ThreadPoolExecutor(UNDO_THREADS, thread_name_prefix="fdbqueue-undo")
        return _undo_pool
