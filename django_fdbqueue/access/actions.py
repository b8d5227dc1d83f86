"""The five actions a user may be granted on a queue, and which route, page or action needs which.

One table (:data:`REST_ROUTES`, :data:`ADMIN_PAGES`, :data:`ADMIN_ACTIONS`) so every face asks
the same question for the same operation, and a test can check that no route is left out.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable

__all__ = [
    "ACTIONS",
    "ADMIN_ACTIONS",
    "ADMIN_PAGES",
    "Action",
    "EVERY_QUEUE_ROUTES",
    "PERMISSIONS",
    "REST_ROUTES",
    "TARGET_ROUTES",
    "check_action",
    "join_actions",
    "parse_actions",
]


class Action(str, Enum):
    """What a grant allows on the queues its pattern matches."""

    VIEW = "view"  # list, stats, peek, browse, scheduled items, dead letters read, key limits read
    PUSH = "push"
    CONSUME = "consume"  # pop, claim, ack, release, extend
    MANAGE = "manage"  # create, settings, clear, dead letters requeue/delete, key limits, schedules
    DELETE = "delete"

    def __str__(self) -> str:
        return self.value


#: The actions' names, in their canonical order.
ACTIONS: tuple[str, ...] = tuple(action.value for action in Action)

#: The Django permission (on the placeholder ``Queue`` model) that gives an action on every queue.
PERMISSIONS: dict[str, str] = {
    "view": "fdbqueue.view_queue",
    "push": "fdbqueue.push_queue",
    "consume": "fdbqueue.consume_queue",
    "manage": "fdbqueue.manage_queue",
    "delete": "fdbqueue.delete_queue",
}

#: REST routes: (router basename, DRF viewset action) -> the action it needs on the queue in the path
#: (``queue``: in the body for ``create``; the ``list`` shows only the queues the user may view).
REST_ROUTES: dict[tuple[str, str], str] = {
    ("queue", "list"): "view",
    ("queue", "retrieve"): "view",
    ("queue", "peek"): "view",
    ("queue", "items"): "view",
    ("queue", "scheduled"): "view",
    ("queue", "dead_letters"): "view",
    ("queue", "key_limits"): "view",
    ("queue", "push"): "push",
    ("queue", "pop"): "consume",
    ("queue", "claim"): "consume",
    ("queue", "ack"): "consume",
    ("queue", "release"): "consume",
    ("queue", "extend"): "consume",
    ("queue", "create"): "manage",
    ("queue", "partial_update"): "manage",
    ("queue", "clear"): "manage",
    ("queue", "requeue_dead_letter"): "manage",
    ("queue", "delete_dead_letter"): "manage",
    ("queue", "destroy"): "delete",
    # A schedule may push into any queue or enqueue any task: its routes need the action on every queue.
    ("schedule", "list"): "view",
    ("schedule", "retrieve"): "view",
    ("schedule", "create"): "manage",
    ("schedule", "partial_update"): "manage",
    ("schedule", "destroy"): "manage",
    ("schedule", "pause"): "manage",
    ("schedule", "resume"): "manage",
    ("schedule", "run_now"): "manage",
}

#: Router basenames whose routes are checked against every queue, not one named in the path.
EVERY_QUEUE_ROUTES: frozenset[str] = frozenset()
#: REST routes whose queue is a schedule's target, known once the schedule is read: their views
#: check the action themselves (``api.access.require_on_target``), as the admin's pages do.
TARGET_ROUTES: frozenset[str] = frozenset({"schedule"})

#: Admin pages -> the action they need on their queue (the queue list shows viewable queues only).
ADMIN_PAGES: dict[str, str] = {
    "queue_list": "view",
    "queue_detail": "view",
    "items": "view",
    "leases": "view",
    "dead_letters": "view",
    "activity": "view",
    "tasks": "view",
    "task_detail": "view",
    "schedules": "view",
    "queue_create": "manage",
}

#: Admin actions (buttons and forms) -> the action they need on their queue.
ADMIN_ACTIONS: dict[str, str] = {
    "push": "push",
    "pop": "consume",
    "claim": "consume",
    "ack": "consume",
    "release": "consume",
    "extend": "consume",
    "create": "manage",
    "settings": "manage",
    "key_limits": "manage",
    "clear": "manage",
    "requeue": "manage",
    "delete_dead_letter": "manage",
    "schedule_change": "manage",
    "task_requeue": "consume",
    "delete": "delete",
}


def check_action(action: object) -> str:
    """``action`` as one of :data:`ACTIONS`, or ValueError naming the ones there are."""
    value = action.value if isinstance(action, Action) else action
    if not isinstance(value, str) or value not in ACTIONS:
        raise ValueError(f"Unknown action {action!r}: the actions are {', '.join(ACTIONS)}.")
    return value


def parse_actions(text: str | Iterable[str]) -> tuple[str, ...]:
    """Actions written ``"push,consume"`` (or given as a list): checked, deduplicated, in canonical order."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    names = [part.strip() if isinstance(part, str) else part for part in parts]
    if all(name == "" for name in names):
        raise ValueError(f"Name at least one action: {', '.join(ACTIONS)}.")
    if "" in names:
        raise ValueError(f"An empty action in {text!r}: separate the actions ({', '.join(ACTIONS)}) by single commas.")
    chosen = {check_action(name) for name in names}
    return tuple(action for action in ACTIONS if action in chosen)


def join_actions(actions: Iterable[str]) -> str:
    """The stored form of a set of actions: canonical order, comma-separated."""
    return ",".join(parse_actions(list(actions)))
