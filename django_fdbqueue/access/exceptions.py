"""The one refusal of this package: a user (or token) may not do an action on a queue."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied

__all__ = ["QueueAccessDenied"]


class QueueAccessDenied(PermissionDenied):
    """Raised by :func:`~django_fdbqueue.access.require`.

    ``visible`` says whether the user may see the queue at all (any action granted on it): when
    not, faces answer as if the queue did not exist (``code`` is ``queue_not_found``), so queue
    names do not leak; when so, they say what was refused (``code`` is ``permission_denied``).
    A subclass of Django's ``PermissionDenied``, so a project's own views answer 403 by default.
    """

    def __init__(self, action: str, queue: str, *, visible: bool) -> None:
        self.action = action
        self.queue = queue
        self.visible = visible
        self.code = "permission_denied" if visible else "queue_not_found"
        if queue == "*":
            message = f"You may not {action} on every queue, which this needs."
        elif visible:
            message = f"You may not {action} on the queue {queue!r}."
        else:
            message = f"No queue is named {queue!r}."
        super().__init__(message)
