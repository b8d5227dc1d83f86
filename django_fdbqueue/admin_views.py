"""The admin's queue pages: list, create, browse, push, pop, peek, clear and delete.

They replace the changelist, add, change and delete views of the placeholder ``Queue`` model
(see ``admin.py``), so they sit at the usual admin addresses, behind the admin's login, with the
model's permissions:

- view (or change) permission: the list, the queue page, peek;
- add: create a queue; change: push, pop, clear; delete: delete a queue.

The views stay thin: a form checks the input, one service call does the work, and the outcome is
reported through Django's messages framework. Service errors become form errors or messages, a
queue that does not exist is a 404, and a store failure (``FDBError``) is a page that says so,
with status 503, never a server error.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

from django.contrib import messages
from django.contrib.admin import ModelAdmin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import urlencode

from . import exceptions, service
from .connection import get_database
from .fdbapi import FDBError, describe, transactional
from .forms import (
    BrowseForm,
    ConfirmForm,
    EndForm,
    PushForm,
    QueueCreateForm,
    QueueFilterForm,
    add_service_error,
)
from .templatetags.fdbqueue_admin import compact_json

logger = logging.getLogger(__name__)

QUEUES_PER_PAGE = 50
ITEMS_PER_PAGE = 25
TEMPLATE_DIR = "admin/django_fdbqueue"

View = Callable[..., HttpResponse]


def _store_guard(view: View) -> View:
    """Turn a missing queue into a 404 and a store failure into a clear 503 page."""

    @functools.wraps(view)
    def wrapper(self: "QueueAdminViews", request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
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


@transactional
def _read_queue_page(tr: Any, name: str, end: str, cursor: str | None, limit: int) -> tuple[Any, Any, str]:
    """The queue's statistics and one page of its items, from one consistent snapshot.

    A FIFO queue has only its min end to read from, whatever end was asked for.
    """
    info = service.get_queue(tr, name)
    if info.kind == "fifo":
        end = "min"
    return info, service.browse(tr, name, end=end, cursor=cursor, limit=limit), end


@transactional
def _clear_counting(tr: Any, name: str) -> int:
    """Clear the queue and say how many items that removed (one transaction, so exact)."""
    removed = service.size(tr, name)
    service.clear(tr, name)
    return removed


class QueueAdminViews:
    """The views, bound to the ``ModelAdmin`` whose permissions and admin site they use."""

    def __init__(self, model_admin: ModelAdmin) -> None:
        self.model_admin = model_admin
        self.opts = model_admin.model._meta

    # -- helpers ---------------------------------------------------------------------------

    def require(self, request: HttpRequest, action: str) -> None:
        """Refuse (403) unless the user holds the model permission for `action`."""
        check = getattr(self.model_admin, f"has_{action}_permission")
        if not check(request):
            raise PermissionDenied

    def url(self, view: str, name: str | None = None, **query: str) -> str:
        """The address of one of these pages, e.g. ``url("change", "jobs", end="max")``."""
        args = () if name is None else (name,)
        address = reverse(f"admin:{self.opts.app_label}_{self.opts.model_name}_{view}", args=args,
                          current_app=self.model_admin.admin_site.name)
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

    @_store_guard
    def changelist(self, request: HttpRequest) -> HttpResponse:
        """All queues, ordered by name, one page at a time, with a create form."""
        self.require(request, "view")
        filters = QueueFilterForm(request.GET)
        prefix, cursor, page = "", None, None
        if filters.is_valid():
            prefix = filters.cleaned_data["prefix"]
            cursor = filters.cleaned_data["cursor"] or None
            try:
                page = service.list_queues(get_database(), prefix=prefix, cursor=cursor, limit=QUEUES_PER_PAGE)
            except exceptions.InvalidCursor:
                messages.warning(request, "That page link has expired; showing the first page.")
                cursor = None
                page = service.list_queues(get_database(), prefix=prefix, limit=QUEUES_PER_PAGE)
            except exceptions.QueueError as error:
                filters.add_error("prefix", str(error))
        context = self.context(
            request,
            "Queues",
            filter_form=filters,
            prefix=prefix,
            queues=page.items if page else [],
            first_page_url=self.url("changelist", prefix=prefix) if cursor else None,
            next_page_url=(
                self.url("changelist", prefix=prefix, cursor=page.next_cursor)
                if page and page.next_cursor
                else None
            ),
            create_form=QueueCreateForm() if self.model_admin.has_add_permission(request) else None,
            add_url=self.url("add"),
        )
        return self.render(request, "queue_list.html", context)

    @_store_guard
    def add(self, request: HttpRequest) -> HttpResponse:
        """Create a queue: the form on its own page (and the target of the list page's form)."""
        self.require(request, "add")
        form = QueueCreateForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            name, kind = form.cleaned_data["name"], form.cleaned_data["kind"]
            try:
                service.create_queue(get_database(), name, kind)
            except exceptions.QueueError as error:
                add_service_error(form, error)
            else:
                messages.success(request, f"The {kind} queue “{name}” was created.")
                return HttpResponseRedirect(self.url("change", name))
        context = self.context(request, "Add queue", form=form, add_url=self.url("add"))
        return self.render(request, "queue_add.html", context)

    # -- one queue ---------------------------------------------------------------------------

    @_store_guard
    def change(self, request: HttpRequest, name: str) -> HttpResponse:
        """The queue page: statistics, a page of items from either end, and the action forms."""
        self.require(request, "view")
        return self.queue_page(request, name)

    def queue_page(self, request: HttpRequest, name: str, *, push_form: PushForm | None = None,
                   status: int = 200) -> HttpResponse:
        """Render the queue page, with a bound push form when re-showing its errors."""
        browse = BrowseForm(request.GET)
        end, cursor = "min", None
        if browse.is_valid():
            end, cursor = browse.cleaned_data["end"], browse.cleaned_data["cursor"] or None
        database = get_database()
        try:
            info, page, end = _read_queue_page(database, name, end, cursor, ITEMS_PER_PAGE)
        except exceptions.InvalidCursor:
            messages.warning(request, "That page link has expired; showing the first page.")
            cursor = None
            info, page, end = _read_queue_page(database, name, end, None, ITEMS_PER_PAGE)
        can_change = self.model_admin.has_change_permission(request)
        context = self.context(
            request,
            name,
            queue=info,
            items=page.items,
            end=end,
            other_end="max" if end == "min" else "min",
            is_priority=info.kind == "priority",
            min_end_url=self.url("change", name),
            max_end_url=self.url("change", name, end="max"),
            first_page_url=self.url("change", name, end=end if end != "min" else "") if cursor else None,
            next_page_url=(
                self.url("change", name, end=end if end != "min" else "", cursor=page.next_cursor)
                if page.next_cursor
                else None
            ),
            push_form=(push_form or PushForm(kind=info.kind)) if can_change else None,
            push_url=self.url("push", name),
            pop_url=self.url("pop", name),
            peek_url=self.url("peek", name),
            clear_url=self.url("clear", name),
            delete_url=self.url("delete", name),
        )
        return self.render(request, "queue_detail.html", context, status=status)

    @_store_guard
    def push(self, request: HttpRequest, name: str) -> HttpResponse:
        """Push one value; bad input re-renders the queue page with the form's errors."""
        self.require(request, "change")
        if request.method != "POST":
            return HttpResponseRedirect(self.url("change", name))
        info = service.get_queue(get_database(), name)
        form = PushForm(request.POST, kind=info.kind)
        if form.is_valid():
            value, priority = form.cleaned_data["value"], form.cleaned_data["priority"]
            try:
                item = service.push(get_database(), name, value, priority)
            except exceptions.QueueNotFound:
                raise
            except exceptions.QueueError as error:
                add_service_error(form, error)
            else:
                where = f" with priority {item.priority}" if info.kind == "priority" else ""
                messages.success(request, f"Pushed {compact_json(item.value, 120)}{where} to “{name}”.")
                return HttpResponseRedirect(self.url("change", name))
        return self.queue_page(request, name, push_form=form)

    @_store_guard
    def pop(self, request: HttpRequest, name: str) -> HttpResponse:
        """Remove and report the item at the chosen end."""
        self.require(request, "change")
        return self._take(request, name, remove=True)

    @_store_guard
    def peek(self, request: HttpRequest, name: str) -> HttpResponse:
        """Report the item at the chosen end without removing it."""
        self.require(request, "view")
        return self._take(request, name, remove=False)

    def _take(self, request: HttpRequest, name: str, *, remove: bool) -> HttpResponse:
        back = self.url("change", name)
        if request.method != "POST":
            return HttpResponseRedirect(back)
        form = EndForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Choose the min end or the max end.")
            return HttpResponseRedirect(back)
        end = form.cleaned_data["end"]
        operation = service.pop if remove else service.peek
        try:
            item = operation(get_database(), name, end=end)
        except exceptions.QueueNotFound:
            raise
        except exceptions.QueueError as error:
            messages.error(request, str(error))
            return HttpResponseRedirect(back)
        verb = "Popped" if remove else "Peeked at"
        if item is None:
            messages.info(request, f"“{name}” is empty: nothing to {'pop' if remove else 'peek at'}.")
        else:
            messages.success(
                request,
                f"{verb} the {end} end of “{name}”: priority {item.priority}, "
                f"value {compact_json(item.value, 200)} (item {item.id}).",
            )
        return HttpResponseRedirect(back)

    @_store_guard
    def clear(self, request: HttpRequest, name: str) -> HttpResponse:
        """Confirmation page, then remove every item (the queue itself stays)."""
        self.require(request, "change")
        return self._confirm(request, name, action="clear")

    @_store_guard
    def delete(self, request: HttpRequest, name: str) -> HttpResponse:
        """Confirmation page, then delete the queue and its items."""
        self.require(request, "delete")
        return self._confirm(request, name, action="delete")

    def _confirm(self, request: HttpRequest, name: str, *, action: str) -> HttpResponse:
        database = get_database()
        if request.method == "POST" and ConfirmForm(request.POST).is_valid():
            if action == "clear":
                removed = _clear_counting(database, name)
                messages.success(request, f"Cleared “{name}”: removed {removed} item{'s' if removed != 1 else ''}.")
                return HttpResponseRedirect(self.url("change", name))
            service.delete_queue(database, name)
            messages.success(request, f"The queue “{name}” was deleted.")
            return HttpResponseRedirect(self.url("changelist"))
        info = service.get_queue(database, name)
        title = "Clear the queue?" if action == "clear" else "Delete the queue?"
        context = self.context(
            request,
            title,
            queue=info,
            action=action,
            form=ConfirmForm(),
            queue_url=self.url("change", name),
        )
        return self.render(request, "queue_confirm.html", context)
