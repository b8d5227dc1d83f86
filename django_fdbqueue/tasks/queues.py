"""Which task queues the configured backends have, and which store queue each one uses.

Asked by the admin's task pages (the overview, a queue's results) and by its queue pages (the
link from a queue to its tasks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from django_fdbqueue import service

from .backend import FDBQueueBackend
from .compat import InvalidTaskError, task_backends

logger = logging.getLogger(__name__)

# With QUEUES empty (any queue name allowed), the task queues are found among the store's queues.
DISCOVERY_LIMIT = 200


@dataclass
class ConfiguredBackends:
    """The TASKS aliases sorted into ours, other kinds of backend, and those that fail to load."""

    ours: dict[str, FDBQueueBackend]
    others: list[tuple[str, str]]
    broken: list[str]


def configured_backends() -> ConfiguredBackends:
    """Every TASKS backend, loaded: a broken one elsewhere in TASKS must not take these pages down."""
    ours: dict[str, FDBQueueBackend] = {}
    others: list[tuple[str, str]] = []
    broken: list[str] = []
    for alias in sorted(task_backends):
        try:
            backend = task_backends[alias]
        except ImproperlyConfigured as error:  # InvalidTaskBackendError: its class cannot be imported
            logger.warning("TASKS[%r] cannot be loaded: %s", alias, error)
            broken.append(alias)
            continue
        if isinstance(backend, FDBQueueBackend):
            ours[alias] = backend
        else:
            others.append((alias, type(backend).__name__))
    return ConfiguredBackends(ours, others, broken)


def our_backend(alias: str) -> FDBQueueBackend | None:
    """The FDBQueueBackend configured under ``alias``, or None."""
    return configured_backends().ours.get(alias)


def task_queue_names(db: Any, backend: FDBQueueBackend) -> list[str]:
    """The backend's task queues: its QUEUES, or with none listed the queues found under its prefix."""
    if backend.queues:
        return sorted(backend.queues)
    if not backend.queue_prefix:
        return []  # every queue of the store would match: nothing tells task queues apart
    page = service.list_queues(db, prefix=backend.queue_prefix, limit=DISCOVERY_LIMIT)
    return [info.name[len(backend.queue_prefix) :] for info in page.items]


def accepts_queue(backend: FDBQueueBackend, queue_name: str) -> bool:
    """Whether the backend would run tasks of ``queue_name`` (listed, and a valid queue name)."""
    if backend.queues and queue_name not in backend.queues:
        return False
    try:
        backend.queue_for(queue_name)
    except InvalidTaskError:
        return False
    return True


def task_queue_of(queue: str) -> tuple[str, str] | None:
    """(backend alias, task queue name) whose tasks run through our queue ``queue``, or None.

    For a link from a queue's page to its tasks: ``url("task_list", *task_queue_of(name))``.
    """
    for alias, backend in configured_backends().ours.items():
        prefix = backend.queue_prefix
        if prefix and queue.startswith(prefix) and accepts_queue(backend, queue[len(prefix) :]):
            return alias, queue[len(prefix) :]
    return None
