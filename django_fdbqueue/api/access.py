"""The REST API's side of ``django_fdbqueue.access``: who may call which route on which queue.

:class:`QueueAccess` runs after ``FDBQUEUE["PERMISSION_CLASSES"]`` on every route: it looks up the
route's action in ``access.REST_ROUTES`` and requires it on the queue in the path (in the body, for
create). A schedule is its target queue's, as in the admin: its views read it, then require the
action on that queue with :func:`require_on_target` (on every queue for a task target, which may
land in any task queue). A refusal is ``access.QueueAccessDenied``, which the
API's exception handler answers with 404 ``queue_not_found`` when the user may not even see the
queue, else 403 ``permission_denied`` naming the action. :func:`audit_change` records the routes
that change a queue's definition or contents wholesale (``manage`` and ``delete``) in the audit log.
"""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from django_fdbqueue import access
from django_fdbqueue.access import audit, events, listing
from django_fdbqueue.access.actions import EVERY_QUEUE_ROUTES, REST_ROUTES, TARGET_ROUTES
from django_fdbqueue.conf import get_settings
from django_fdbqueue.service.records import Page

__all__ = [
    "AUDITED_ACTIONS",
    "EveryQueueView",
    "QueueAccess",
    "audit_change",
    "may_on_queues",
    "may_on_target",
    "require_on_queues",
    "require_on_target",
    "route_action",
    "visible_page",
]

#: Routes needing these actions are recorded in the audit log when they succeed.
AUDITED_ACTIONS = frozenset({"manage", "delete"})


def route_action(view: Any) -> str | None:
    """The access action the view's current route needs (None: a route the table does not know)."""
    basename, action = getattr(view, "basename", None), getattr(view, "action", None)
    if basename is None or action is None:
        return None
    return REST_ROUTES.get((basename, action))


def _queue_in_body(request: Request) -> str | None:
    data = request.data
    name = data.get("name") if hasattr(data, "get") else None
    return name if isinstance(name, str) else None


class QueueAccess(BasePermission):
    """Requires the route's action on its queue (see the module docstring)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if getattr(view, "action", None) in (None, "metadata"):
            # A method the route lacks (405), or OPTIONS (DRF's "metadata" action): it describes
            # the route, reads no queue and changes nothing. PERMISSION_CLASSES still apply.
            return True
        action = route_action(view)
        if action is None:
            return False  # a route missing from access.REST_ROUTES is refused, never open
        user, token = request.user, request.auth
        if not getattr(user, "is_authenticated", False):
            # "authenticated" leaves anonymous requests to PERMISSION_CLASSES, as before grants.
            return get_settings().access == "authenticated"
        if view.basename in EVERY_QUEUE_ROUTES:
            access.require_every(user, action, token=token)
        elif view.basename in TARGET_ROUTES:
            pass  # the view requires the action on the schedule's target once it has read it
        elif view.action == "list":
            pass  # the list shows only the queues the user may view (visible_page)
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


def _open_to_anonymous(request: Request) -> bool:
    return not getattr(request.user, "is_authenticated", False) and get_settings().access == "authenticated"


def may_on_target(request: Request, action: str, queue: str | None) -> bool:
    """May the request's user do ``action`` on a schedule whose target queue is ``queue``?
    (None: a task target, which may land in any task queue: the action on every queue.)"""
    if _open_to_anonymous(request):
        return True
    user, token = request.user, request.auth
    if queue is None:
        return access.can_every(user, action, token=token)
    return access.can(user, action, queue, token=token)


def require_on_target(request: Request, action: str, queue: str | None, *, creating: bool = False) -> None:
    """Require ``action`` on a schedule's target queue (see :func:`may_on_target`).

    Refused: 404 when the user may not even see that queue, so a schedule into a hidden queue
    stays hidden; 403 otherwise, and always 403 when ``creating`` (the queue named in the body
    may not exist: the answer must not tell).
    """
    if may_on_target(request, action, queue):
        return
    events.emit(events.REFUSED, action)
    user, token = request.user, request.auth
    if queue is None:
        visible = creating or access.can_every(user, "view", token=token)
    else:
        visible = creating or access.may_see(user, queue, token=token)
    raise access.QueueAccessDenied(action, queue or "*", visible=visible)


def may_on_queues(request: Request, action: str, queues: set[str]) -> bool:
    """May the request's user do ``action`` on every one of ``queues`` (a workflow's members'
    task queues)? An empty set asks for the action on every queue."""
    if _open_to_anonymous(request):
        return True
    user, token = request.user, request.auth
    if not queues:
        return access.can_every(user, action, token=token)
    return all(access.can(user, action, queue, token=token) for queue in queues)


def require_on_queues(request: Request, action: str, queues: set[str], what: str) -> None:
    """Require ``action`` on every one of ``queues``. Refused: ``QueueAccessDenied`` naming one
    queue lacking it, ``visible`` when the user may view them all (403), else not (the view
    answers as for an unknown ``what``: 404)."""
    if may_on_queues(request, action, queues):
        return
    events.emit(events.REFUSED, action)
    user, token = request.user, request.auth
    lacking = sorted(q for q in queues if not access.can(user, action, q, token=token)) or ["*"]
    raise access.QueueAccessDenied(action, lacking[0], visible=may_on_queues(request, "view", queues))


def visible_page(request: Request, db: Any, prefix: str, cursor: str | None, limit: int) -> Page[Any]:
    """A page of up to ``limit`` queues the user may view; its cursor names none of the others
    (``access.listing``). One who may view every queue gets one catalog page, as without grants."""
    user, token = request.user, request.auth
    return listing.visible_page(
        db,
        prefix,
        cursor,
        limit,
        sees_all=_open_to_anonymous(request) or access.can_every(user, "view", token=token),
        may_view=lambda name: access.can(user, "view", name, token=token),
    )


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
