"""Consume a queue reliably: a pool of threads that claim, handle, and ack or release items.

Independent of the command line, so anything that needs "call this function for every item,
with leases, retries and back-off" can reuse it: ``manage.py fdbqueue worker`` is one user.

    from django_fdbqueue.connection import get_database
    from django_fdbqueue.worker import Worker

    def send(item):
        deliver_email(**item.value)          # raise to retry later; return to acknowledge

    Worker(get_database(), "emails", send, concurrency=4, lease=60).run()

See ``runner`` for how the threads, the heartbeat and stopping work, ``signals`` for running
under a process supervisor, ``burst`` for ``burst=True``: process what is ready, then end, and
``ack_with`` for a handler whose writes to the store commit in its item's ack.
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
