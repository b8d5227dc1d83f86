"""What every admin page of the app shares: access checks, addresses, context, rendering,
and turning store failures into a clear 503 page instead of a server error.

The pages sit under the placeholder ``Queue`` model (see ``__init__``), behind the admin's login
and staff check; beyond that the user's rights on each queue decide (``django_fdbqueue.access``:
grants, and the model's permissions on every queue). A queue the user may not see at all is a
404, as if it did not exist, so its name does not leak; a refused action on a queue the user may
see is a 403. ``queues``, ``tasks`` and ``tokens`` are the pages themselves.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
from typing import Any, Callable

from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from django_fdbqueue import access, exceptions
from django_fdbqueue.access import audit as audit_log
from django_fdbqueue.access import events
from django_fdbqueue.access.somewhere import can_somewhere
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import FDBError, describe

logger = logging.getLogger(__name__)

TEMPLATE_DIR = "admin/django_fdbqueue"

View = Callable[..., HttpResponse]


class StoreCannotOpen(Exception):
    """The store could not be opened; the page says only that (the details go to the log)."""

    def __str__(self) -> str:
        return "the store could not be opened (the server's log says why)"


def store_guard(view: View) -> View:
    """Turn a missing queue into a 404 and a store failure into a clear 503 page."""

    @functools.wraps(view)
    def wrapper(self: "AdminPages", request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            # Opening the store is where an unusable file (or a lock held past TIMEOUT) shows up, as
            # an OSError or sqlite3 error rather than an FDBError: an outage page too, as in the API.
            get_database()
        except Exception as error:  # noqa: BLE001 - any failure to open the store is reported the same way
            logger.error("Cannot open the queue store", exc_info=error)
            return self.store_error(request, StoreCannotOpen())
        try:
            return view(self, request, *args, **kwargs)
        except exceptions.QueueNotFound as error:
            raise Http404(str(error)) from error
        except exceptions.QueueError as error:
            # One the view did not turn into a form error, e.g. an item stored with a codec
            # this process has not registered: say so instead of failing with a 500.
            return self.queue_error(request, error)
        except FDBError as error:
            return self.store_error(request, error)

    return wrapper


def tasks_framework_available() -> bool:
    """Whether ``django.tasks`` (Django 6.0+) or the ``django_tasks`` backport can be imported.

    Asked without importing it, so a project without the framework never pays for the question.
    """
    for module in ("django.tasks", "django_tasks"):
        try:
            if importlib.util.find_spec(module) is not None:
                return True
        except ImportError:  # a parent package that is missing or fails to import
            continue
    return False


class AdminPages:
    """Pages bound to the ``ModelAdmin`` whose permissions and admin site they use."""

    def __init__(self, model_admin: ModelAdmin[Any]) -> None:
        self.model_admin = model_admin
        self.opts = model_admin.model._meta

    # -- helpers ---------------------------------------------------------------------------

    def require(self, request: HttpRequest, action: str) -> None:
        """Refuse (403) unless the user holds ``action`` on at least one queue (a page not about
        one queue yet, such as the queue list); each queue is then checked by ``require_on``.
        Counted as a refusal, as every other refusal of the admin and of REST is."""
        if not can_somewhere(request.user, action):
            events.emit(events.REFUSED, action)
            raise PermissionDenied

    def require_on(self, request: HttpRequest, action: str, queue: str) -> None:
        """404 unless the user may see the queue at all (its name must not leak); 403 unless the
        user holds ``action`` on it. Counted as a refusal either way (``access.require``)."""
        try:
            access.require(request.user, action, queue)
        except access.QueueAccessDenied as refusal:
            if not refusal.visible:
                raise Http404(str(refusal)) from None
            raise

    def require_every(self, request: HttpRequest, action: str) -> None:
        """403 unless the user holds ``action`` on every queue (for what may reach any queue)."""
        access.require_every(request.user, action)

    def refused(self, request: HttpRequest, action: str, queue: str | None) -> bool:
        """Whether ``action`` on ``queue`` (on every queue when None) is refused, counting the
        refusal: for a form that names its queue in a field and shows the refusal as its error."""
        try:
            if queue is None:
                access.require_every(request.user, action)
            else:
                access.require(request.user, action, queue)
        except access.QueueAccessDenied:
            return True
        return False

    def may(self, request: HttpRequest, action: str, queue: str) -> bool:
        """Whether the user holds ``action`` on ``queue``: to show a button only to those it serves."""
        return access.can(request.user, action, queue)

    def granted(self, request: HttpRequest, queue: str) -> dict[str, bool]:
        """Each action's name -> whether the user holds it on ``queue`` (the templates' ``may``)."""
        return {action: access.can(request.user, action, queue) for action in access.ACTIONS}

    def audit(self, request: HttpRequest, action: str, queue: str, **detail: Any) -> None:
        """Record a change made through the admin (Django's admin log, and the audit counter)."""
        audit_log.record(request, action, queue, detail)

    def url(self, page: str, name: str | None = None, item_id: str | None = None, /, **query: str) -> str:
        """The address of one of these pages, e.g. ``url("change", "jobs", end="max")``.

        The leading arguments are positional-only, so any query parameter (``view=``) is free.
        """
        args = tuple(arg for arg in (name, item_id) if arg is not None)
        address = reverse(
            f"admin:{self.opts.app_label}_{self.opts.model_name}_{page}",
            args=args,
            current_app=self.model_admin.admin_site.name,
        )
        query = {key: value for key, value in query.items() if value}
        return f"{address}?{urlencode(query)}" if query else address

    def context(self, request: HttpRequest, title: str, **extra: Any) -> dict[str, Any]:
        """What every page needs: the admin site's context, the model's options, permissions."""
        admin = self.model_admin
        return {
            **admin.admin_site.each_context(request),
            "opts": self.opts,
            "title": title,
            "has_view_permission": admin.has_view_permission(request),
            "has_add_permission": admin.has_add_permission(request),
            "has_change_permission": admin.has_change_permission(request),
            "has_delete_permission": admin.has_delete_permission(request),
            "changelist_url": self.url("changelist"),
            **extra,
        }

    def render(self, request: HttpRequest, template: str, context: dict[str, Any], status: int = 200) -> HttpResponse:
        request.current_app = self.model_admin.admin_site.name
        return TemplateResponse(request, f"{TEMPLATE_DIR}/{template}", context, status=status)

    def queue_error(self, request: HttpRequest, error: exceptions.QueueError) -> HttpResponse:
        """The page shown when the service refuses a request the page itself could not foresee."""
        logger.warning("FDB queue error on %s %s: %r", request.method, request.path, error)
        context = self.context(request, "The queue cannot do that", error_message=str(error))
        return self.render(request, "queue_error.html", context, status=400)

    def store_error(self, request: HttpRequest, error: Exception) -> HttpResponse:
        """The page shown when the store fails: what happened, and what to do about it."""
        logger.warning("FDB queue store error on %s %s: %r", request.method, request.path, error)
        context = self.context(
            request,
            "The queue store is unavailable",
            error_code=getattr(error, "code", None),
            error_description=describe(error),
            was_change=request.method == "POST",
            retry_url=request.get_full_path(),
        )
        return self.render(request, "store_error.html", context, status=503)

    # -- queue list --------------------------------------------------------------------------
