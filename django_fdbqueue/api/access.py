"""The REST API's side of ``django_fdbqueue.access``: who may call which route on which queue.

:class:`QueueAccess` runs after ``FDBQUEUE["PERMISSION_CLASSES"]`` on every route: it looks up the
route's action in ``access.REST_ROUTES`` and requires it on the queue in the path (in the body, for
create; on every queue, for the schedules). A refusal is ``access.QueueAccessDenied``, which the
API's exception handler answers with 404 ``queue_not_found`` when the user may not even see the
queue, else 403 ``permission_denied`` naming the action. :func:`audit_change` records the routes
that change a queue's definition or contents wholesale (``manage`` and ``delete``) in the audit log.
"""

from __future__ import annotations

from typing import Any, Iterable

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from django_fdbqueue import access
from django_fdbqueue.access import audit, events
from django_fdbqueue.access.actions import EVERY_QUEUE_ROUTES, REST_ROUTES
from django_fdbqueue.conf import get_settings

__all__ = ["AUDITED_ACTIONS", "EveryQueueView", "QueueAccess", "audit_change", "route_action", "visible_infos"]

#: Routes needing these actions are recorded in the audit log when they succeed.
AUDITED_ACTIONS = frozenset({"manage", "delete"})


def route_action(view: Any) -> str | None:
    """The access action the view's current route needs (None: a route the table does not know)."""
    return REST_ROUTES.get((getattr(view, "basename", None), getattr(view, "action", None)))


def _queue_in_body(request: Request) -> str | None:
    data = request.data
    name = data.get("name") if hasattr(data, "get") else None
    return name if isinstance(name, str) else None


class QueueAccess(BasePermission):
    """Requires the route's action on its queue (see the module docstring)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if getattr(view, "action", None) is None:
            return True  # a method the route lacks (405) or OPTIONS: no queue's data, nothing changed
        action = route_action(view)
        if action is None:
            return False  # a route missing from access.REST_ROUTES is refused, never open
        user, token = request.user, request.auth
        if not getattr(user, "is_authenticated", False):
            # "authenticated" leaves anonymous requests to PERMISSION_CLASSES, as before grants.
            return get_settings().access == "authenticated"
        if view.basename in EVERY_QUEUE_ROUTES:
            access.require_every(user, action, token=token)
        elif view.action == "list":
            pass  # the list shows only the queues the user may view (visible_infos)
        elif view.action == "create":
            self._create(user, action, _queue_in_body(request), token)
        else:
            access.require(user, action, view.kwargs["name"], token=token)
        return True

    @staticmethod
    def _create(user: Any, action: str, name: str | None, token: Any) -> None:
        # A missing or malformed name is the serializer's 400; a refusal is always a 403 here, before
        # the store is asked whether the queue exists, so it tells nothing about other queues.
        if name is not None and not access.can(user, action, name, token=token):
            events.emit(events.REFUSED, action)
            raise access.QueueAccessDenied(action, name, visible=True)


class EveryQueueView(BasePermission):
    """For the metrics endpoint: ``view`` on every queue (``fdbqueue.view_queue``, or a grant on ``*``)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        user = request.user
        if not getattr(user, "is_authenticated", False):
            return get_settings().access == "authenticated"
        access.require_every(user, "view", token=request.auth)
        return True


def visible_infos(request: Request, infos: Iterable[Any]) -> list[Any]:
    """The queue records (with a ``name``) of one page that the request's user may view."""
    user, token = request.user, request.auth
    if not getattr(user, "is_authenticated", False) and get_settings().access == "authenticated":
        return list(infos)
    return [info for info in infos if access.can(user, "view", info.name, token=token)]


def audit_change(request: Request, view: Any, status_code: int) -> None:
    """Record a successful manage or delete route: who, what, on which queue (or schedule), from where."""
    action = route_action(view)
    if action not in AUDITED_ACTIONS or not 200 <= status_code < 300:
        return
    name = view.kwargs.get("name") or _queue_in_body(request) or ""
    detail = {"operation": view.action, "method": request.method, "path": request.path, "status": status_code}
    if view.basename != "queue":
        detail["on"] = view.basename
    if "item_id" in view.kwargs:
        detail["item_id"] = view.kwargs["item_id"]
    audit.record(request, action, name, detail)
