"""Consume a queue reliably: a pool of threads that claim, handle, and ack or release items.

Independent of the command line, so anything that needs "call this function for every item,
with leases, retries and back-off" can reuse it: ``manage.py fdbqueue worker`` is one user::

    Worker(get_database(), "emails", send, concurrency=4, lease=60).run()

``runner`` holds :class:`Worker`, ``signals`` runs it under a process supervisor, ``burst`` ends
it once nothing is ready, ``ack_with`` commits a handler's writes with its item's ack. How to
use it, and how it works: the workers guide (docs/howto/workers.md).
"""

from __future__ import annotations

from .ack_with import AckWith
from .backoff import Backoff, retry_delay
from .burst import Burst
from .runner import DEFAULT_LEASE, Handler, Worker, WorkerStats
from .signals import run_until_signalled

__all__ = [
    "Worker",
    "WorkerStats",
    "Handler",
    "AckWith",
    "Burst",
    "DEFAULT_LEASE",
    "Backoff",
    "retry_delay",
    "run_until_signalled",
]
