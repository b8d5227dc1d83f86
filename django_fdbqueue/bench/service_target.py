"""The app's own queues as a bench target: the service API on whatever FDBQUEUE points at.

Clients share the process's database handle (``get_database()``), as the threads of a Django
process do; a client process opens its own (:mod:`~django_fdbqueue.bench.child`), with the
parent's settings module and FDBQUEUE, so it measures the same store, embedded file or cluster
alike.
"""

from __future__ import annotations

import os
from typing import Any, Hashable, Sequence

from django_fdbqueue import service
from django_fdbqueue.fdbapi import retry_counts

from .strategies import get_strategy, layout_for
from .targets import OURS, TargetSpec

__all__ = ["KIND", "ServiceTarget", "ServiceClient", "ChildServiceTarget"]

#: The bench uses double-ended priority queues: FIFO within a priority, both ends available.
KIND = "priority"


class ServiceClient:
    """A client of one queue through the service API and the row's pop strategy."""

    def __init__(self, db: Any, queue: str, strategy: str | None) -> None:
        self._db = db
        self._queue = queue
        self._push = layout_for(strategy).push
        self._pop = get_strategy(strategy) if strategy is not None else service.pop
        self._held: str | None = None  # a high-contention claimer's lease, acked with its next claim

    def push(self, value: Any, priority: int) -> None:
        self._push(self._db, self._queue, value, priority)

    def pop(self, end: str) -> Hashable | None:
        item = self._pop(self._db, self._queue, end)
        return None if item is None else item.id

    def peek(self, end: str) -> Hashable | None:
        item = service.peek(self._db, self._queue, end)
        return None if item is None else item.id

    def claim_ack(self, end: str, lease: float, spread: int | None = None, mode: str = "plain") -> Hashable | None:
        """Claim the next item (or, with ``spread``, one of the first few) and ack it at once:
        at-least-once consumption's two transactions. High-contention (``mode``), a claimer acks
        its last lease in the commit that asks for the next (``claim(..., ack=...)``), as a steady
        claimer would: the last one is acked when the client closes."""
        if mode != "plain":
            taken = service.claim(self._db, self._queue, lease=lease, end=end, mode="high-contention", ack=self._held)
            self._held = None if taken is None else taken.receipt
            return None if taken is None else taken.item.id
        taken = service.claim(self._db, self._queue, lease=lease, end=end, spread=spread)
        if taken is None:
            return None
        service.ack(self._db, taken.receipt, name=self._queue)
        return taken.item.id

    def pop_waiting(self, end: str, seconds: float) -> tuple[Hashable, Any] | None:
        """A blocking pop: the item's id and value, or None when nothing came within ``seconds``."""
        item = service.pop(self._db, self._queue, end, wait=seconds)
        return None if item is None else (item.id, item.value)

    def close(self) -> None:
        """Ack a high-contention claimer's last lease; the database handle belongs to the process."""
        if self._held is not None:
            service.ack(self._db, self._held, name=self._queue)
            self._held = None


class ServiceTarget:
    """The queue service on the configured engine."""

    name = OURS

    def __init__(self, db: Any, settings_module: str | None, fdbqueue: dict[str, Any]) -> None:
        self._db = db
        self._settings_module = settings_module
        self._fdbqueue = fdbqueue

    @classmethod
    def from_settings(cls, db: Any) -> "ServiceTarget":
        """The target for this process's configured store, described so children can open it too."""
        from django.conf import settings as django_settings

        from django_fdbqueue.conf import get_settings, raw_options

        effective = get_settings()
        options = dict(raw_options())
        if effective.engine == "embedded":
            options["PATH"] = effective.path  # the default depends on BASE_DIR: pin what we use
        # Under override_settings the holder has no SETTINGS_MODULE; the environment still does.
        module = os.environ.get("DJANGO_SETTINGS_MODULE") or getattr(django_settings, "SETTINGS_MODULE", None)
        return cls(db, module, options)

    @property
    def settings_module(self) -> str | None:
        return self._settings_module

    @property
    def fdbqueue(self) -> dict[str, Any]:
        """The FDBQUEUE setting a client process uses to open the same store."""
        return self._fdbqueue

    @property
    def db(self) -> Any:
        return self._db

    def spec(self) -> TargetSpec:
        if not self._settings_module:
            raise RuntimeError(
                "Client processes need the Django settings module (DJANGO_SETTINGS_MODULE) to "
                "configure themselves; run the bench through manage.py, or without processes."
            )
        return TargetSpec(OURS, {"settings_module": self._settings_module, "fdbqueue": self._fdbqueue})

    def prepare(self, queue: str, strategy: str | None) -> None:
        layout_for(strategy).prepare(self._db, queue, KIND)

    def fill(self, queue: str, strategy: str | None, batch: Sequence[tuple[Any, int]]) -> None:
        layout_for(strategy).fill(self._db, queue, batch)

    def remaining(self, queue: str, strategy: str | None) -> int:
        return layout_for(strategy).remaining(self._db, queue)

    def drop(self, queue: str, strategy: str | None) -> None:
        layout_for(strategy).drop(self._db, queue)

    def client(self, queue: str, strategy: str | None) -> ServiceClient:
        return ServiceClient(self._db, queue, strategy)

    def retry_counts(self) -> dict[int, int] | None:
        return retry_counts()

    def server_memory_mib(self) -> float | None:
        return None

    def metadata(self) -> dict[str, Any]:
        from django_fdbqueue.conf import get_settings

        effective = get_settings()
        data: dict[str, Any] = {
            "engine": effective.engine,
            "root": repr(effective.root),
            "timeout": effective.timeout,
            "retry_limit": effective.retry_limit,
        }
        if effective.engine == "foundationdb":
            data["api_version"] = effective.api_version
        if effective.faults:
            data["faults"] = dict(effective.faults)
        return data

    def close(self) -> None:
        """The handle is the app's: whoever opened it closes it."""


class ChildServiceTarget(ServiceTarget):
    """The target in a client process (see :mod:`~django_fdbqueue.bench.child`), which closes the
    process's handle when done."""

    def close(self) -> None:
        from django_fdbqueue import connection

        connection.reset_database()
