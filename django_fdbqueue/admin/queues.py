"""The admin's queue pages: list, create, browse, push, pop, peek, clear, delete, dead letters.

They replace the changelist, add, change and delete views of the placeholder ``Queue`` model
(see ``__init__``), behind the admin's login and staff check; then each queue's access actions
decide what the user may see and do (``django_fdbqueue.access``; the same mapping as its
``ADMIN_PAGES`` and ``ADMIN_ACTIONS``). The views stay thin: a form checks the input, one service
call does the work, and the outcome is reported through Django's messages framework.

Which action each page and button needs, the tabs, and what a refusal or a store failure shows:
the admin guide (docs/howto/admin.md).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from django_fdbqueue import access, exceptions, service
from django_fdbqueue.access import listing
from django_fdbqueue.connection import get_database
from django_fdbqueue.fdbapi import transactional
from django_fdbqueue.service.records import Page
from django_fdbqueue.templatetags.fdbqueue_admin import age, compact_json

from .forms import (
    BrowseForm,
    ConfirmForm,
    EndForm,
    MaxAttemptsForm,
    PushForm,
    QueueCreateForm,
    QueueFilterForm,
    add_service_error,
    limit_text,
)
from .pages import AdminPages, store_guard, tasks_framework_available
from .tenants import tenant_rows

QUEUES_PER_PAGE = 50
ITEMS_PER_PAGE = 25


@transactional
def _read_queue_page(tr: Any, name: str, view: str, end: str, cursor: str | None, limit: int) -> tuple[Any, Any, str]:
    """The queue's statistics and one page of the chosen tab, from one consistent snapshot.

    A FIFO queue has only its min end to read from, whatever end was asked for.
    """
    info = service.get_queue(tr, name)
    if info.kind == "fifo":
        end = "min"
    page: Page[service.ScheduledItem] | Page[service.DeadLetter] | Page[service.Item]
    if view == "scheduled":
        page = service.scheduled(tr, name, cursor=cursor, limit=limit)
    elif view == "dead":
        page = service.dead_letters(tr, name, cursor=cursor, limit=limit)
    else:
        page = service.browse(tr, name, end=end, cursor=cursor, limit=limit)
    return info, page, end


#: Keys the queue page lists by leases held, and at their limit.
KEY_LIMIT_ROWS = 10


def _key_limits(database: Any, info: Any) -> dict[str, str] | None:
    """The per-key limits and where the keys stand, in words; None for a queue without limits
    (then nothing more is read)."""
    if info.key_concurrency is None and info.key_rate is None:
        return None
    state = service.key_limit_state(database, info.name, top=KEY_LIMIT_ROWS)
    parts = []
    if state.concurrency is not None:
        parts.append(f"{state.concurrency} leased at once")
    if state.rate is not None:
        parts.append(f"{state.rate:g} claims per second")
    return {
        "limits": ", ".join(parts) + " per key",
        "keys_leased": str(state.keys_leased),
        "busiest": ", ".join(f"{key} ({count})" for key, count in state.leased) or "—",
        "at_limit": ", ".join(state.at_limit) or "—",
    }


@transactional
def _clear_counting(tr: Any, name: str) -> int:
    """Clear the queue and say how many items that removed (one transaction, so exact).

    Clearing removes the ready, leased and delayed items; the dead letters stay.
    """
    info = service.get_queue(tr, name)
    service.clear(tr, name)
    return info.size + info.leased + info.delayed


class QueueAdminViews(AdminPages):
    """The queue pages."""

    @store_guard
    def changelist(self, request: HttpRequest) -> HttpResponse:
        """All queues, ordered by name, one page at a time, with a create form."""
        self.require(request, "view")
        filters = QueueFilterForm(request.GET)
        prefix, cursor, page = "", None, None
        if filters.is_valid():
            prefix = filters.cleaned_data["prefix"]
            cursor = filters.cleaned_data["cursor"] or None
            try:
                page = self._visible_page(request, prefix, cursor)
            except exceptions.InvalidCursor:
                messages.warning(request, "That page link has expired; showing the first page.")
                cursor = None
                page = self._visible_page(request, prefix, None)
            except exceptions.QueueError as error:
                filters.add_error("prefix", str(error))
        deletable = {info.name for info in page.items if self.may(request, "delete", info.name)} if page else set()
        context = self.context(
            request,
            "Queues",
            filter_form=filters,
            prefix=prefix,
            queues=page.items if page else [],
            deletable=deletable,
            first_page_url=self.url("changelist", prefix=prefix) if cursor else None,
            next_page_url=(
                self.url("changelist", prefix=prefix, cursor=page.next_cursor) if page and page.next_cursor else None
            ),
            create_form=QueueCreateForm() if self.model_admin.has_add_permission(request) else None,
            add_url=self.url("add"),
        )
        return self.render(request, "queue_list.html", context)

    def _visible_page(self, request: HttpRequest, prefix: str, cursor: str | None) -> Page[Any]:
        """A page of the queues the user may view, whose cursor names none of the others
        (``access.listing``, as the REST list)."""
        user = request.user
        return listing.visible_page(
            get_database(),
            prefix,
            cursor,
            QUEUES_PER_PAGE,
            sees_all=access.can_every(user, "view"),
            may_view=lambda name: self.may(request, "view", name),
        )

    @store_guard
    def add(self, request: HttpRequest) -> HttpResponse:
        """Create a queue: the form on its own page (and the target of the list page's form).

        Shown to users who may manage some queue; the name posted must be one they may manage
        (else 403 with the form, and nothing is created).
        """
        self.require(request, "manage")
        form = QueueCreateForm(request.POST if request.method == "POST" else None)
        status = 200
        if form.is_valid():
            name, kind = form.cleaned_data["name"], form.cleaned_data["kind"]
            max_attempts = form.cleaned_data.get("max_attempts")
            tenants = bool(form.cleaned_data.get("tenants"))
            if self.refused(request, "manage", name):
                form.add_error("name", f"You may not create a queue named “{name}”: no grant to manage it.")
                status = 403
            else:
                try:
                    service.create_queue(get_database(), name, kind, max_attempts=max_attempts, tenants=tenants)
                except exceptions.QueueError as error:
                    add_service_error(form, error)
                else:
                    self.audit(
                        request,
                        "manage",
                        name,
                        operation="create",
                        kind=kind,
                        max_attempts=max_attempts,
                        tenants=tenants,
                    )
                    limit = f" ({limit_text(max_attempts)})" if max_attempts is not None else ""
                    messages.success(request, f"The {kind} queue “{name}” was created{limit}.")
                    return HttpResponseRedirect(self.url("change", name))
        context = self.context(request, "Add queue", form=form, add_url=self.url("add"))
        return self.render(request, "queue_add.html", context, status=status)

    # -- one queue ---------------------------------------------------------------------------

    @store_guard
    def change(self, request: HttpRequest, name: str) -> HttpResponse:
        """The queue page: statistics, a page of items from either end, and the action forms."""
        self.require_on(request, "view", name)
        return self.queue_page(request, name)

    def _queue_urls(self, name: str) -> dict[str, str]:
        """The queue page's fixed links: its tabs, its ends and the forms' targets."""
        return {
            "items_url": self.url("change", name),
            "scheduled_url": self.url("change", name, view="scheduled"),
            "dead_url": self.url("change", name, view="dead"),
            "min_end_url": self.url("change", name),
            "max_end_url": self.url("change", name, end="max"),
            **{f"{form}_url": self.url(form, name) for form in ("push", "pop", "peek", "clear", "delete")},
            "max_attempts_url": self.url("max_attempts", name),
        }

    def queue_page(
        self,
        request: HttpRequest,
        name: str,
        *,
        push_form: PushForm | None = None,
        max_attempts_form: MaxAttemptsForm | None = None,
        status: int = 200,
    ) -> HttpResponse:
        """Render the queue page, with a bound form when re-showing that form's errors."""
        browse = BrowseForm(request.GET)
        view, end, cursor = "items", "min", None
        if browse.is_valid():
            view = browse.cleaned_data["view"]
            end, cursor = browse.cleaned_data["end"], browse.cleaned_data["cursor"] or None
        if view != "items":
            end = "min"  # only the ready items are read from either end
        database = get_database()
        try:
            info, page, end = _read_queue_page(database, name, view, end, cursor, ITEMS_PER_PAGE)
        except exceptions.InvalidCursor:
            messages.warning(request, "That page link has expired; showing the first page.")
            cursor = None
            info, page, end = _read_queue_page(database, name, view, end, None, ITEMS_PER_PAGE)
        may = self.granted(request, name)
        tab = "" if view == "items" else view
        end_query = end if end != "min" else ""
        if max_attempts_form is None and may["manage"]:
            max_attempts_form = MaxAttemptsForm(initial={"max_attempts": info.max_attempts})
        context = self.context(
            request,
            name,
            queue=info,
            may=may,
            view=view,
            items=page.items if view == "items" else [],
            scheduled=page.items if view == "scheduled" else [],
            dead_letters=page.items if view == "dead" else [],
            rows_on_page=len(page.items),
            end=end,
            other_end="max" if end == "min" else "min",
            is_priority=info.kind == "priority",
            first_page_url=self.url("change", name, view=tab, end=end_query) if cursor else None,
            next_page_url=(
                self.url("change", name, view=tab, end=end_query, cursor=page.next_cursor) if page.next_cursor else None
            ),
            tasks_url=self._tasks_url(name),
            push_form=(push_form or PushForm(kind=info.kind, tenants=info.tenants is not None))
            if may["push"]
            else None,
            max_attempts_form=max_attempts_form if may["manage"] else None,
            key_limits=_key_limits(database, info),
            tenants=tenant_rows(database, info),
            **self._queue_urls(name),
        )
        return self.render(request, "queue_detail.html", context, status=status)

    @store_guard
    def push(self, request: HttpRequest, name: str) -> HttpResponse:
        """Push one value; bad input re-renders the queue page with the form's errors."""
        self.require_on(request, "push", name)
        if request.method != "POST":
            return HttpResponseRedirect(self.url("change", name))
        info = service.get_queue(get_database(), name)
        form = PushForm(request.POST, kind=info.kind, tenants=info.tenants is not None)
        if form.is_valid():
            data = form.cleaned_data
            value, priority, delay = data["value"], data["priority"], data.get("delay")
            dedup_key = data.get("dedup_key")
            tenant = {"tenant": data["tenant"]} if "tenant" in data else {}
            try:
                item = service.push(get_database(), name, value, priority, delay=delay, dedup_key=dedup_key, **tenant)
            except exceptions.QueueNotFound:
                raise
            except exceptions.QueueError as error:
                add_service_error(form, error)
            else:
                self._report_push(request, name, info.kind, item, delay, dedup_key)
                return HttpResponseRedirect(self.url("change", name))
        return self.queue_page(request, name, push_form=form)

    def _report_push(
        self, request: HttpRequest, name: str, kind: str, item: Any, delay: float | None, dedup_key: str | None
    ) -> None:
        """Say what the push did: added (maybe delayed), or nothing because of its dedup key."""
        if getattr(item, "duplicate", False):
            messages.warning(
                request,
                f"An item with the dedup key “{dedup_key}” already existed in “{name}” (item {item.id}), "
                "so nothing was pushed.",
            )
            return
        where = f" with priority {item.priority}" if kind == "priority" else ""
        when = f", delayed by {age(delay)}" if delay else ""
        messages.success(request, f"Pushed {compact_json(item.value, 120)}{where} to “{name}”{when}.")

    @store_guard
    def set_max_attempts(self, request: HttpRequest, name: str) -> HttpResponse:
        """Change the queue's attempt limit; bad input re-renders the queue page with the error."""
        self.require_on(request, "manage", name)
        if request.method != "POST":
            return HttpResponseRedirect(self.url("change", name))
        form = MaxAttemptsForm(request.POST)
        if form.is_valid():
            limit = form.cleaned_data.get("max_attempts")
            try:
                info = service.set_max_attempts(get_database(), name, limit)
            except exceptions.QueueNotFound:
                raise
            except exceptions.QueueError as error:
                add_service_error(form, error)
            else:
                self.audit(request, "manage", name, operation="settings", max_attempts=info.max_attempts)
                messages.success(request, f"“{name}” now allows {limit_text(info.max_attempts)} per item.")
                return HttpResponseRedirect(self.url("change", name))
        return self.queue_page(request, name, max_attempts_form=form)

    @store_guard
    def dead_requeue(self, request: HttpRequest, name: str, item_id: str) -> HttpResponse:
        """Put a dead letter back among the ready items, at its old place, with no attempts."""
        self.require_on(request, "manage", name)
        back = self.url("change", name, view="dead")
        if request.method != "POST":
            return HttpResponseRedirect(back)
        try:
            item = service.requeue_dead_letter(get_database(), name, item_id)
        except exceptions.QueueNotFound:
            raise
        except exceptions.QueueError as error:
            messages.error(request, self._dead_letter_error(name, error, item_id))
            return HttpResponseRedirect(back)
        self.audit(request, "manage", name, operation="requeue_dead_letter", item=item.id)
        messages.success(
            request,
            f"Requeued the dead letter {compact_json(item.value, 120)} (item {item.id}) in “{name}”: "
            "it is ready again, with no attempts counted.",
        )
        return HttpResponseRedirect(back)

    @store_guard
    def dead_delete(self, request: HttpRequest, name: str, item_id: str) -> HttpResponse:
        """Confirmation page, then delete one dead letter for good."""
        self.require_on(request, "manage", name)
        back = self.url("change", name, view="dead")
        database = get_database()
        if request.method == "POST" and ConfirmForm(request.POST).is_valid():
            try:
                service.delete_dead_letter(database, name, item_id)
            except exceptions.QueueNotFound:
                raise
            except exceptions.QueueError as error:
                messages.error(request, self._dead_letter_error(name, error, item_id))
                return HttpResponseRedirect(back)
            self.audit(request, "manage", name, operation="delete_dead_letter", item=item_id)
            messages.success(request, f"Deleted the dead letter {item_id} of “{name}”.")
            return HttpResponseRedirect(back)
        info = service.get_queue(database, name)
        try:
            letter = service.get_dead_letter(database, name, item_id)
            if letter is None:
                raise exceptions.DeadLetterNotFound()
        except exceptions.QueueError as error:
            messages.error(request, self._dead_letter_error(name, error, item_id))
            return HttpResponseRedirect(back)
        context = self.context(
            request,
            "Delete the dead letter?",
            queue=info,
            action="dead_delete",
            item_id=item_id,
            letter=letter,
            form=ConfirmForm(),
            queue_url=self.url("change", name),
            dead_url=back,
        )
        return self.render(request, "queue_confirm.html", context)

    def _tasks_url(self, name: str) -> str | None:
        """The task page of this queue when it carries a tasks backend's tasks (else None)."""
        if not tasks_framework_available():
            return None
        from django_fdbqueue.tasks.queues import task_queue_of

        found = task_queue_of(name)
        return self.url("task_list", *found) if found else None

    @staticmethod
    def _dead_letter_error(name: str, error: exceptions.QueueError, item_id: str) -> str:
        """The message for a dead-letter action the service refused (nothing changed).

        The service checks the id before the queue, so a bad id on a missing queue would read as
        a bad id: look the queue up first, so that case stays a 404 like every missing queue.
        """
        service.get_queue(get_database(), name)
        if isinstance(error, exceptions.DeadLetterNotFound):
            return (
                f"There is no dead letter {item_id} in this queue (it may have been requeued or "
                "deleted already); nothing was changed."
            )
        return f"{error} Nothing was changed."

    @store_guard
    def pop(self, request: HttpRequest, name: str) -> HttpResponse:
        """Remove and report the item at the chosen end."""
        self.require_on(request, "consume", name)
        return self._take(request, name, remove=True)

    @store_guard
    def peek(self, request: HttpRequest, name: str) -> HttpResponse:
        """Report the item at the chosen end without removing it."""
        self.require_on(request, "view", name)
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

    @store_guard
    def clear(self, request: HttpRequest, name: str) -> HttpResponse:
        """Confirmation page, then remove every item (the queue itself stays)."""
        self.require_on(request, "manage", name)
        return self._confirm(request, name, action="clear")

    @store_guard
    def delete(self, request: HttpRequest, name: str) -> HttpResponse:
        """Confirmation page, then delete the queue and its items."""
        self.require_on(request, "delete", name)
        return self._confirm(request, name, action="delete")

    def _confirm(self, request: HttpRequest, name: str, *, action: str) -> HttpResponse:
        database = get_database()
        if request.method == "POST" and ConfirmForm(request.POST).is_valid():
            if action == "clear":
                removed = _clear_counting(database, name)
                self.audit(request, "manage", name, operation="clear", removed=removed)
                messages.success(request, f"Cleared “{name}”: removed {removed} item{'s' if removed != 1 else ''}.")
                return HttpResponseRedirect(self.url("change", name))
            service.delete_queue(database, name)
            self.audit(request, "delete", name, operation="destroy")
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
