"""Which REST route, admin page or admin action needs which of the five actions on its queue.

One table (:data:`REST_ROUTES`, :data:`ADMIN_PAGES`, :data:`ADMIN_ACTIONS`) so every face asks
the same question for the same operation, and a test can check that no route is left out. The
actions themselves, and how they are written, are ``django_fdbqueue.rights``'s.
"""

from __future__ import annotations

__all__ = [
    "ADMIN_ACTIONS",
    "ADMIN_PAGES",
    "EVERY_QUEUE_ROUTES",
    "PERMISSIONS",
    "REST_ROUTES",
    "TARGET_ROUTES",
]


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
    # A workflow's members may use several task queues: its routes need the action on each of them.
    ("workflow", "list"): "view",
    ("workflow", "retrieve"): "view",
    ("workflow", "cancel"): "consume",
}

#: Router basenames whose routes are checked against every queue, not one named in the path.
EVERY_QUEUE_ROUTES: frozenset[str] = frozenset()
#: REST routes whose queue is a schedule's target (or a workflow's members' queues), known once
#: it is read: their views check the action themselves (``api.access.require_on_target``,
#: ``api.access.require_on_queues``), as the admin's pages do.
TARGET_ROUTES: frozenset[str] = frozenset({"schedule", "workflow"})

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
    "workflows": "view",
    "workflow_detail": "view",
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
    "workflow_cancel": "consume",
    "delete": "delete",
}
