"""A record of every change made for a person: who, when, what, on which queue, and from where.

Records go to Django's admin log (``django.contrib.admin.models.LogEntry``), where the admin shows
them ("Recent actions", and each object's history), with the content type of the placeholder
``Queue`` model, ``object_repr`` the queue's name and ``change_message`` a JSON object: the
action, what was done (``detail``) and the client's address. Without ``django.contrib.admin``
installed nothing is written, but the audit counter still counts.

The address is ``REMOTE_ADDR``: behind a proxy that is the proxy's, unless the project's
middleware sets it from a header the proxy controls (a client can write ``X-Forwarded-For``
itself, so it is not trusted here).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from django_fdbqueue.rights import check_action

from . import events

__all__ = ["record"]

logger = logging.getLogger("django_fdbqueue.access")

# LogEntry's ADDITION and DELETION by the operation in ``detail``; every other change is a CHANGE (2).
_FLAGS = {"create": 1, "destroy": 3, "delete": 3}


def record(request: Any, action: str, queue: str, detail: Mapping[str, Any] | str) -> None:
    """Record one change made through a face: ``action`` is the access action it needed,
    ``queue`` the queue's (or schedule's, token's) name, ``detail`` what was done, such as
    ``{"operation": "clear"}``. Never raises: an audit that cannot be written is logged."""
    action = check_action(action)
    events.emit(events.AUDITED, action)
    user = getattr(request, "user", None)
    if user is None or not getattr(user, "is_authenticated", False):
        return
    try:
        _write(request, user, action, queue, detail)
    except Exception:  # noqa: BLE001 - an audit failure must not undo or fail the change it records
        logger.exception("Could not write the audit record of %s on %r", action, queue)


def _write(request: Any, user: Any, action: str, queue: str, detail: Mapping[str, Any] | str) -> None:
    from django.apps import apps

    if not apps.is_installed("django.contrib.admin"):
        return
    from django.contrib.admin.models import LogEntry
    from django.contrib.contenttypes.models import ContentType

    from django_fdbqueue.models import Queue

    body = {"action": action, "detail": detail, "remote_addr": _address(request)}
    operation = detail.get("operation") if isinstance(detail, Mapping) else None
    LogEntry.objects.create(
        user_id=user.pk,
        content_type=ContentType.objects.get_for_model(Queue, for_concrete_model=False),
        object_id=queue,
        object_repr=str(queue)[:200],
        action_flag=_FLAGS.get(str(operation), 2),
        change_message=json.dumps(body, sort_keys=True, default=str),
    )


def _address(request: Any) -> str | None:
    meta = getattr(request, "META", None) or {}
    return meta.get("REMOTE_ADDR")
