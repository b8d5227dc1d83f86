"""Running a worker until the process is told to stop: SIGTERM and SIGINT, once then twice.

A process supervisor (systemd, Kubernetes, supervisord) stops a program with SIGTERM and, after
a grace period, SIGKILL. So the first signal means "finish what you hold and exit", and a second
one "hand everything back now". SIGKILL cannot be caught; the leases cover that case.

The signal handler only records the signal. Acting on it (stop, abort, logging) happens in the
main thread's loop, outside the handler: a handler runs between two bytecodes of the main
thread, possibly while it holds one of the worker's locks, and taking that lock again there
would deadlock.
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Iterable

from .runner import Worker, WorkerStats, logger

__all__ = ["DEFAULT_SIGNALS", "run_until_signalled"]

DEFAULT_SIGNALS: tuple[int, ...] = (signal.SIGTERM, signal.SIGINT)


def run_until_signalled(worker: Worker, *, signals: Iterable[int] = DEFAULT_SIGNALS, poll: float = 0.2) -> WorkerStats:
    """Run ``worker`` until it ends; the first signal stops it, the second aborts it.

    Must be called from the main thread (only it may install signal handlers). The previous
    handlers are put back on return.
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("run_until_signalled() installs signal handlers, so it must run in the main thread.")
    received: list[int] = []

    def record(signum: int, frame: Any) -> None:
        received.append(signum)  # nothing else here: see the module docstring

    previous = {signum: signal.signal(signum, record) for signum in signals}
    try:
        worker.start()
        acted = 0
        while not worker.wait(poll):
            while acted < len(received):
                name = signal.Signals(received[acted]).name
                acted += 1
                if acted == 1:
                    logger.info(
                        "Received %s: finishing the items in progress (send it again to release them now).", name
                    )
                    worker.stop()
                else:
                    logger.warning("Received %s again: releasing the items in progress.", name)
                    worker.abort()
    except BaseException:
        worker.abort()
        raise
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return worker.stats
