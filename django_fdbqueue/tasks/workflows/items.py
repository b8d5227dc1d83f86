"""Pushing released nodes' items: what makes a member runnable, inside the releasing transaction.

A member's item is what ``FDBQueueBackend.enqueue`` pushes for a lone task (``{"result_id":
...}``, its priority, its ``run_after`` as a delay, its limit key), pushed only once the member
is released: at launch for the roots, by its last predecessor's finish for the others. Nodes
are pushed with one ``push_many`` per queue, key and delay, not one push each: a release may
push thousands (a group's roots, a fan-out), and one call per group keeps that one pass.
"""

from __future__ import annotations

from typing import Any, Iterable

from django_fdbqueue import service
from django_fdbqueue.exceptions import QueueNotFound
from django_fdbqueue.service.records import to_datetime

from ..backend import ensure_queue
from .keys import StoredNode


def push_nodes(tr: Any, nodes: Iterable[StoredNode], max_attempts: int | None) -> int:
    """Push the nodes' items in ``tr``; the number pushed."""
    groups: dict[tuple[str, str | None, int | None], list[tuple[dict[str, str], int]]] = {}
    for node in nodes:
        groups.setdefault((node.queue, node.key, node.run_after_us), []).append(
            ({"result_id": node.result_id}, node.priority)
        )
    for (queue, key, run_after_us), entries in groups.items():
        not_before = None if run_after_us is None else to_datetime(run_after_us)
        try:
            service.push_many(tr, queue, entries, not_before=not_before, key=key)
        except QueueNotFound:
            ensure_queue(tr, queue, max_attempts)
            service.push_many(tr, queue, entries, not_before=not_before, key=key)
    return sum(len(entries) for entries in groups.values())
